"""Seeds: the one mapping from a seed (int or string) to random numbers.

A string seed is hashed once (SHA-256 of its UTF-8 bytes, read little-endian): the same
string gives the same numpy stream (:func:`rng_from`) and, reduced to the sampler's width,
the same sampler seed (:func:`seed_int`) on every platform and run.
"""

from __future__ import annotations

import hashlib

import numpy as np


def seed_int(seed: int | str, bits: int | None = None) -> int:
    """An integer seed: ``int`` unchanged, a string through SHA-256; optionally ``mod 2^bits``."""
    if isinstance(seed, str):
        value = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "little")
    else:
        value = int(seed)
    return value if bits is None else value % (1 << bits)


def rng_from(seed: int | str | np.random.Generator | None) -> np.random.Generator:
    """A NumPy generator from an integer, a string, or an existing generator.

    ``int`` and ``str``: ``numpy.random.default_rng(seed_int(seed))`` (all 256 bits of a
    string's digest). A :class:`numpy.random.Generator` is returned unchanged. ``None``
    draws fresh OS entropy (not reproducible).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    if isinstance(seed, (str, int, np.integer)):
        return np.random.default_rng(seed_int(seed if isinstance(seed, str) else int(seed)))
    raise TypeError(f"seed must be an int, a string or a numpy Generator, got {type(seed)}")


def draw_states(probs: np.ndarray, rng) -> np.ndarray:
    """One categorical draw per row of ``probs`` (``(..., K)`` probabilities, any scale):
    the dynamic models' grid states (forward filtering / backward sampling, forecasts)."""
    cum = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cum[..., -1:]
    return np.minimum((u > cum).sum(axis=-1), probs.shape[-1] - 1)
