"""Checks that decide what is trustworthy: posterior predictive checks and LOO comparison.

``bayesrate.checks.ppc`` is numpy-only; ``bayesrate.checks.compare`` imports ArviZ.
"""
