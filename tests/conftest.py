"""Shared fixtures. Seeds come from fixed strings so runs are reproducible."""

from __future__ import annotations

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
