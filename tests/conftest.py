"""Shared fixtures. Seeds come from fixed strings so runs are reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import seed_of


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded from the test's name."""
    return np.random.default_rng(seed_of(request.node.nodeid))
