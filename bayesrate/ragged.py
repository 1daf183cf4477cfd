"""Ragged arrays: rows of varying length stored flat, addressed by start offsets and counts.

The one index helper below the visit table (:mod:`bayesrate.observations`), the change
histories (:mod:`bayesrate.history`), the likelihood's interval groups
(:mod:`bayesrate.likelihood`) and the scheduler's replay; numpy only.
"""

from __future__ import annotations

import numpy as np


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenate ``arange(s, s + c)`` for each start/count pair, without a loop."""
    starts = np.asarray(starts, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    nonempty = counts > 0
    starts, counts = starts[nonempty], counts[nonempty]
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    block_start = np.cumsum(counts) - counts
    return np.repeat(starts - block_start, counts) + np.arange(total)
