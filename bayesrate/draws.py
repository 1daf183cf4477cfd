"""Posterior draws as plain arrays (xarray in, numpy out)."""

from __future__ import annotations

import numpy as np


def stack_draws(da, *dims: str) -> np.ndarray:
    """Stack chains and draws: ``(chain, draw, *dims)`` → array ``(samples, *dims)``."""
    values = np.asarray(da.transpose("chain", "draw", *dims))
    return values.reshape(-1, *values.shape[2:])
