"""The count predictive of the forecast studies: test groups, per-draw integrated rates, and
the exact distribution of each page's detected count in the test window.

Shared by :mod:`bayesrate.studies.forecast` (every method scored),
:mod:`bayesrate.studies.level` (level oracles and level priors) and
:mod:`bayesrate.studies.walk_forecast` (dynamic models' walks summed out); it imports none of
them. numpy and scipy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: central PIT band whose coverage is reported
PIT_BAND = (0.05, 0.95)
#: the coverage90 range the forecast targets (issue #14);
#: :class:`~bayesrate.studies.forecast.WorldCoverage` reports the share of a method's own
#: worlds that reach it
COVERAGE_TARGET = (0.85, 0.95)
#: probabilities below this are floored before taking logs (counted in the result)
MIN_PROBABILITY = 1e-300


@dataclass(frozen=True)
class Groups:
    """Test intervals grouped per page by integrated rate: (page, count, key)."""

    page: np.ndarray
    count: np.ndarray
    key: np.ndarray  # interval length (hours) or overlap-pattern index
    patterns: np.ndarray | None = None  # (n_patterns, 168) hour-of-week overlaps
    epochs: Any = None  # the shocks model's EpochPatterns (key: its pattern), or the
    # dynamic model's epoch column of each group (key: interval length)


def pmf_at(
    buckets: list[tuple[np.ndarray, np.ndarray]], k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``P(K = k)`` and ``P(K < k)`` from :func:`count_pmf`'s buckets; ``k`` is ``(pages,)``
    or ``(worlds, pages)``.

    A count beyond its page's bucket gets probability 0 and, below it, the bucket's whole
    mass: a lower bound of ``P(K < k)``, exact for the PIT band wherever that mass is above
    the band (:meth:`~bayesrate.studies.walk_forecast.WalkForecast.count_distribution`
    stops there for its worlds' largest counts).
    """
    prob_k = np.zeros(k.shape)
    cdf_below = np.zeros(k.shape)
    for pages, pmf in buckets:
        rows = np.arange(len(pages))
        kk = k[..., pages]
        inside = kk < pmf.shape[1]
        at = np.minimum(kk, pmf.shape[1] - 1)
        cdf = pmf.cumsum(axis=1)
        prob_k[..., pages] = np.where(inside, pmf[rows, at], 0.0)
        cdf_below[..., pages] = np.where(inside, (cdf - pmf)[rows, at], cdf[:, -1])
    return prob_k, cdf_below


def in_pit_band(pit: np.ndarray) -> np.ndarray:
    """Whether each randomised PIT value lies in :data:`PIT_BAND` (what coverage90 counts)."""
    return (pit >= PIT_BAND[0]) & (pit <= PIT_BAND[1])


def count_pmf(
    prob: np.ndarray, group_page: np.ndarray, group_n: np.ndarray, cap: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The predictive distribution of each page's count up to ``cap``, mixed over draws.

    Parameters
    ----------
    prob, group_page, group_n
        As in :func:`~bayesrate.studies.forecast.count_predictive`.
    cap
        Per page, the largest count whose probability is needed.

    Returns
    -------
    list of (pages, pmf)
        Pages are bucketed by ``cap`` rounded up to a power of two; ``pmf[i, m]`` is
        ``P(K = m)`` of page ``pages[i]`` for ``m`` below the bucket's width (exact: the
        convolution of the page's Binomials truncated there, averaged over draws; the work is
        ``O(draws · groups · width²)``, no per-page loop).
    """
    from scipy.stats import binom

    prob = np.atleast_2d(prob)
    n_draws = prob.shape[0]
    n_pages = len(cap)
    rank = np.arange(len(group_page)) - np.searchsorted(group_page, group_page, side="left")
    width = 2 ** np.ceil(np.log2(np.maximum(cap, 0) + 1)).astype(np.int64)
    out = []
    for size in np.unique(width):
        pages = np.flatnonzero(width == size)
        local = np.full(n_pages, -1)
        local[pages] = np.arange(len(pages))
        m = np.arange(size)
        dist = np.zeros((n_draws, len(pages), size))
        dist[:, :, 0] = 1.0
        sel_groups = np.flatnonzero(local[group_page] >= 0)
        for r in range(int(rank[sel_groups].max()) + 1 if len(sel_groups) else 0):
            g = sel_groups[rank[sel_groups] == r]
            rows = local[group_page[g]]
            pmf = binom.pmf(m[None, None, :], group_n[g][None, :, None], prob[:, g][:, :, None])
            current = dist[:, rows, :]
            new = np.zeros_like(current)
            for j in range(min(size, int(group_n[g].max()) + 1)):
                new[:, :, j:] += current[:, :, : size - j] * pmf[:, :, j : j + 1]
            dist[:, rows, :] = new
        out.append((pages, dist.mean(axis=0)))
    return out


def pmf_buckets(pmfs: Sequence[np.ndarray], cap: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-page ``P(K = c)`` for ``c ≤ cap`` as :func:`count_pmf`'s buckets (pages by
    ``cap`` rounded up to a power of two, each pmf padded with zeros to its width)."""
    width = 2 ** np.ceil(np.log2(np.maximum(cap, 0) + 1)).astype(np.int64)
    out = []
    for size in np.unique(width):
        pages = np.flatnonzero(width == size)
        pmf = np.zeros((len(pages), size))
        for row, p in enumerate(pages):
            pmf[row, : len(pmfs[p])] = pmfs[p][:size]
        out.append((pages, pmf))
    return out


@dataclass(frozen=True)
class Worlds:
    """Test counts of worlds drawn from a predictive
    (:func:`~bayesrate.studies.forecast.draw_worlds`) and the PIT noise they are scored
    with; both ``(worlds, pages)``."""

    counts: np.ndarray
    noise: np.ndarray


@dataclass(frozen=True)
class Prediction:
    """Per draw: integrated rate of each test group and of each page's window; mean rate.

    With ``group_shape``/``window_shape`` (the bursty model) each interval's integrated rate
    is Gamma-mixed with that shape ``κ``: ``P(no change) = (1 + Λ/κ)^{−κ}``; without, Poisson.
    """

    group_lambda: np.ndarray  # (draws, groups)
    window_lambda: np.ndarray  # (draws, pages)
    rate_per_hour: np.ndarray  # (pages,) point prediction of the rate
    group_shape: np.ndarray | None = None  # (draws, groups) κ of one interval
    window_shape: np.ndarray | None = None  # (draws, pages) κ × intervals in the window

    def group_probability(self) -> np.ndarray:
        """``(draws, groups)`` probability that one interval of each group shows a change."""
        return change_probability(self.group_lambda, self.group_shape)

    def window_probability(self) -> np.ndarray:
        """``(draws, pages)`` probability that each page changes in its test window."""
        return change_probability(self.window_lambda, self.window_shape)


def change_probability(lam: np.ndarray, shape: np.ndarray | None) -> np.ndarray:
    """``1 − e^{−Λ}``, or ``1 − (1 + Λ/κ)^{−κ}`` with a Gamma-mixing shape ``κ``."""
    if shape is None:
        return -np.expm1(-lam)
    from bayesrate.likelihood import mixed_log_quiet

    with np.errstate(divide="ignore"):
        return -np.expm1(mixed_log_quiet(np.log(lam), np.log(shape)))
