"""Checks that decide what is trustworthy: posterior predictive checks and LOO comparison.

``bayesrate.checks.ppc`` summarises a fitted model's predictive draws (PyMC runs inside
the model's ``predict``, not at import); ``bayesrate.checks.compare`` imports ArviZ.
"""
