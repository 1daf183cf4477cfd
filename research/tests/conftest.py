"""The core's fixtures and markers (tests/conftest.py), and the research models registered:
through their entry points when the package is installed (``make test-research``), else
by :func:`bayesrate_research.register_all` (a checkout on ``PYTHONPATH``)."""

from __future__ import annotations

import pytest

from tests.conftest import (  # noqa: F401 (pytest's hooks and fixtures)
    pytest_addoption,
    pytest_generate_tests,
    rng,
)
from tests.conftest import pytest_collection_modifyitems as _core_modifyitems


def _register() -> None:
    from bayesrate.models.registry import _entry_points

    if "shocks" not in _entry_points():
        from bayesrate_research import register_all

        register_all()


_register()


def pytest_collection_modifyitems(config, items):
    """The core's markers, and ``compiles`` on every test here (each compiles a model)."""
    _core_modifyitems(config, items)
    for item in items:
        item.add_marker(pytest.mark.compiles)
