"""Worlds drawn from a method's own predictive: how far from 0.90 its coverage90 falls when
it is the truth (:class:`WorldCoverage`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bayesrate.predictive import COVERAGE_TARGET, Worlds, in_pit_band
from bayesrate.seeds import rng_from

#: worlds drawn from each method's predictive to show the spread of coverage90
WORLDS = 500


@dataclass(frozen=True)
class WorldCoverage:
    """coverage90 of worlds drawn from a method's own predictive (:func:`world_coverage`).

    Attributes
    ----------
    coverage
        One coverage90 per world.
    observed
        The coverage90 measured on the real test window.
    """

    coverage: np.ndarray
    observed: float

    @property
    def q05(self) -> float:
        return float(np.quantile(self.coverage, 0.05))

    @property
    def q95(self) -> float:
        return float(np.quantile(self.coverage, 0.95))

    @property
    def share_in_target(self) -> float:
        """Share of worlds whose coverage90 lies in :data:`COVERAGE_TARGET`."""
        lo, hi = COVERAGE_TARGET
        return float(np.mean((self.coverage >= lo) & (self.coverage <= hi)))

    @property
    def observed_quantile(self) -> float:
        """Share of worlds whose coverage90 is at most the observed one (mid-rank for ties)."""
        below = np.mean(self.coverage < self.observed)
        return float(below + 0.5 * np.mean(self.coverage == self.observed))

    def to_json(self) -> dict[str, float | int]:
        return {
            "worlds": len(self.coverage),
            "mean": float(self.coverage.mean()),
            "q05": self.q05,
            "q95": self.q95,
            "share_in_target": self.share_in_target,
            "observed_quantile": self.observed_quantile,
        }


def draw_worlds(
    prob: np.ndarray,
    group_page: np.ndarray,
    group_n: np.ndarray,
    n_pages: int,
    n_worlds: int,
    seed: int | str,
) -> Worlds:
    """Worlds drawn from a method's own predictive: each takes one posterior draw (its
    shocks, walks and population parameters shared by every page), then each page's test
    count from that draw's Binomials.

    Parameters
    ----------
    prob, group_page, group_n
        As in :func:`count_predictive`.
    n_pages
        Number of pages (a page without groups counts 0).
    n_worlds
        Number of worlds.
    seed
        Seeds the worlds and their PIT noise.
    """
    prob = np.atleast_2d(prob)
    rng = rng_from(f"{seed}-worlds")
    draw = rng.integers(prob.shape[0], size=n_worlds)
    counts = rng.binomial(group_n[None, :], prob[draw])  # (worlds, groups)
    k = np.zeros((n_worlds, n_pages), dtype=np.int64)
    np.add.at(k.T, group_page, counts.T)
    return Worlds(counts=k, noise=rng.random((n_worlds, n_pages)))


def world_coverage(
    worlds: Worlds,
    at: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    observed: float,
) -> WorldCoverage:
    """How far from 0.90 coverage90 falls when the method's own predictive is the truth.

    Each world's coverage90 is scored against the mixed predictive: ``at(counts)`` gives
    ``P(K = k)`` and ``P(K < k)`` of any ``(worlds, pages)`` counts (e.g.
    :func:`pmf_at` of :func:`count_pmf`'s buckets with caps covering the worlds' counts).
    Pages that share a draw-level effect (a shock) make the worlds' coverage spread far
    wider than the Binomial spread of independent pages: one held-out window is one draw
    of it.
    """
    prob_k, cdf_below = at(worlds.counts)
    inside = in_pit_band(cdf_below + worlds.noise * prob_k)
    return WorldCoverage(coverage=inside.mean(axis=1), observed=float(observed))
