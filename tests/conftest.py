"""Shared fixtures. Seeds come from fixed strings so runs are reproducible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import seed_of


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded from the test's name."""
    return np.random.default_rng(seed_of(request.node.nodeid))


def pytest_addoption(parser):
    parser.addoption(
        "--recovery-seeds",
        type=int,
        default=1,
        help="run each recovery test at this many seeds (its pass rate; tests/recovery.py)",
    )


def pytest_generate_tests(metafunc):
    """``recovery_seed``: 0 (the test's fixed seed) or, with ``--recovery-seeds N``, 0..N-1."""
    if "recovery_seed" in metafunc.fixturenames:
        n = max(1, metafunc.config.getoption("recovery_seeds"))
        metafunc.parametrize("recovery_seed", range(n), ids=[f"seed{i}" for i in range(n)])


#: source text that marks a test (or a fixture it uses) as compiling and sampling a model,
#: directly or through the CLI: such tests are marked ``sampling`` and left out of
#: ``make test-fast`` (the edit loop); ``make test`` runs them all
SAMPLING_TEXT = (".fit(", "fit_model(", "calibrate", '"fit"', "study", "run_forecast", "nutpie")


#: the directory of the test suite (its helpers are read too)
TESTS = str(Path(__file__).parent)


def _samples(source: str) -> bool:
    return any(text in source for text in SAMPLING_TEXT)


def pytest_collection_modifyitems(config, items):
    """Mark ``sampling`` every test that samples: in its body, in a fixture it depends on,
    or in a helper function of the test suite that either names (tests/checks samples
    through its ``fit`` helper); and ``compiles`` every test of ``tests/models`` (each
    compiles a model's PyTensor graph)."""
    import inspect

    verdict: dict[object, bool] = {}

    def source_of(func) -> str:
        try:
            return inspect.getsource(func)
        except (OSError, TypeError):
            return ""

    def samples(func) -> bool:
        """The function's source, or that of a helper function of ``tests`` it names
        (``fit(...)`` in tests/checks), samples."""
        func = getattr(func, "__wrapped__", func)
        if func in verdict:
            return verdict[func]
        verdict[func] = False  # recursion guard
        hit = _samples(source_of(func))
        code, names = getattr(func, "__code__", None), getattr(func, "__globals__", {})
        for name in code.co_names if code is not None and not hit else ():
            helper = names.get(name)
            if inspect.isfunction(helper) and helper.__code__.co_filename.startswith(TESTS):
                hit = samples(helper)
                if hit:
                    break
        verdict[func] = hit
        return hit

    for item in items:
        func = getattr(item, "function", None)
        hit = func is not None and samples(func)
        info = getattr(item, "_fixtureinfo", None)
        if not hit and info is not None:
            for defs in info.name2fixturedefs.values():
                for fixture in defs:
                    hit = hit or samples(fixture.func)
        if hit:
            item.add_marker(pytest.mark.sampling)
        if "tests/models/" in item.nodeid:
            item.add_marker(pytest.mark.compiles)
