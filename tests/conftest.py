"""Shared fixtures. Seeds come from fixed strings so runs are reproducible."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BAYESRATE_SHARED", REPO.parent / "shared"))


def seed_of(text: str) -> int:
    """A 32-bit seed from a string (stable across runs and platforms)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def raw_loglik(obs, page: int, lam: float) -> float:
    """Per-interval log-likelihood of one page from its raw visits (a test oracle,
    independent of the sufficient statistics)."""
    sl = slice(obs.offsets[page], obs.offsets[page + 1])
    t, c = obs.time[sl], obs.changed[sl]
    total = 0.0
    for k in range(1, len(t)):
        x = lam * (t[k] - t[k - 1])
        if c[k]:  # log(1 - e^{-x}), each branch where it is accurate
            total += math.log(-math.expm1(-x)) if x < 0.5 else math.log1p(-math.exp(-x))
        else:
            total -= x
    return total


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded from the test's name."""
    return np.random.default_rng(seed_of(request.node.nodeid))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.fail(f"shared data not found at {path} (set BAYESRATE_SHARED)")
    return path
