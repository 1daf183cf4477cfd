"""Subcommands of the ``bayesrate`` CLI: one module each, light to import."""
