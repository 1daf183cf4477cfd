"""Test oracles and data locations shared by several test modules.

Imported explicitly (``from tests.helpers import ...``); fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import pytest

from bayesrate import seeds

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BAYESRATE_SHARED", REPO.parent / "shared"))


def seed_of(text: str) -> int:
    """A 32-bit seed from a string (the package's one string-to-seed mapping)."""
    return seeds.seed_int(text, bits=32)


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


def interval_exposures(times, multipliers, timezone: str, step_minutes: float = 1.0):
    """Integrated hour-of-week multiplier of each interval between consecutive ``times``
    (hours since the epoch), by a midpoint sum over ``step_minutes`` steps of
    ``m[bucket(local t)]`` with the local clock from pandas (a test oracle, independent of
    ``bayesrate.clock``). Exact when the times are whole multiples of the step."""
    import numpy as np
    import pandas as pd

    out = []
    step = step_minutes / 60.0
    for start, end in itertools.pairwise(times):
        n = round((end - start) / step)
        mids = start + (np.arange(n) + 0.5) * step
        local = pd.DatetimeIndex(pd.to_datetime(np.round(mids * 3600), unit="s", utc=True))
        local = local.tz_convert(timezone)
        bucket = np.asarray(local.day_of_week) * 24 + np.asarray(local.hour)
        out.append(float(np.sum(np.asarray(multipliers)[bucket]) * step))
    return out


def raw_loglik_modulated(obs, page: int, lam: float, multipliers, timezone: str) -> float:
    """Per-interval log-likelihood of one page under ``λ·m[bucket(t)]`` (a test oracle)."""
    sl = slice(obs.offsets[page], obs.offsets[page + 1])
    t, c = obs.time[sl], obs.changed[sl]
    total = 0.0
    for k, exposure in enumerate(interval_exposures(t, multipliers, timezone), start=1):
        x = lam * exposure
        if c[k]:
            total += math.log(-math.expm1(-x)) if x < 0.5 else math.log1p(-math.exp(-x))
        else:
            total -= x
    return total


#: redistributable test data shipped with the repository (see the ATTRIBUTION files)
TEST_DATA = REPO / "tests" / "data"


def shared_dataset(name: str) -> Path:
    """A dataset of the team's shared data directory; skip (naming the path) when absent.

    Only data without a licence to redistribute lives there (the Wikipedia traces): a
    user's fresh clone has none, so the tests that need it skip; CI has it and runs them.
    """
    path = SHARED / "data" / name
    if not path.is_dir():
        pytest.skip(f"unlicensed test data not present: {path} (set BAYESRATE_SHARED to run)")
    return path
