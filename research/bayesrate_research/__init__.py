"""bayesrate's research models, outside the product (issue #51): see ``research/README.md``.

Installed (``pip install -e research``), each model is an entry point of the group
``bayesrate.models`` that :func:`bayesrate.models.get_model` loads on first use of its
name. :func:`register_all` registers them without the entry points (a source checkout on
``PYTHONPATH``; the tests' fallback).
"""

from __future__ import annotations

#: name -> "module:Class", as research/pyproject.toml's entry points
MODELS = {
    "bursty": "bayesrate_research.models.bursty:BurstyModel",
    "shocks": "bayesrate_research.models.shocks:ShockModel",
    "drift": "bayesrate_research.models.shocks:DriftModel",
    "shocks_ar1": "bayesrate_research.models.shocks:PersistentShockModel",
    "mass_edits": "bayesrate_research.models.mass_edits:MassEditModel",
    "dynamic_shocks": "bayesrate_research.models.dynamic_shocks:DynamicShockModel",
    "dynamic_edits": "bayesrate_research.models.dynamic_edits:DynamicEditModel",
}


def register_all() -> None:
    """Register every research model with :func:`bayesrate.models.register`."""
    import importlib

    from bayesrate.models import register

    for name, target in MODELS.items():
        module, _, cls = target.partition(":")
        register(name, getattr(importlib.import_module(module), cls))
