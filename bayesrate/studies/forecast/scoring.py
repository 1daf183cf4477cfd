"""The forecast study's scores of one method's prediction (:class:`MethodForecast`).

``log_score``, the mean over pages of ``log P(k)`` (``k`` the number of test intervals with a
detected change); ``brier``, the Brier score of "changed at all" against the exact history;
``coverage90``, the fraction of pages whose randomised PIT value ``u = F(k − 1) + V·P(k)``
(``V`` uniform, common to all methods) lies in ``[0.05, 0.95]``; and ``rate_log_rmse``, the
RMSE of ``log`` predicted rate against ``log`` realised exact rate over pages with at least
one true change in the window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesrate.predictive import (
    MIN_PROBABILITY,
    Groups,
    Prediction,
    Worlds,
    count_pmf,
    in_pit_band,
    pmf_at,
)
from bayesrate.studies.forecast.windows import Design
from bayesrate.studies.forecast.worlds import WorldCoverage, draw_worlds, world_coverage

if TYPE_CHECKING:
    from bayesrate.models.walk_forecast import WalkForecast


#: a fitted method's diagnostics that :meth:`MethodForecast.summary` puts beside its scores
FIT_GATES = ("converged", "r_hat_max", "ess_bulk_min", "divergences")


@dataclass
class MethodForecast:
    """One method's scores and per-page predictions (arrays aligned with the pages)."""

    name: str
    log_score: float
    brier: float
    coverage90: float
    rate_log_rmse: float
    prob_at_k: np.ndarray
    cdf_below_k: np.ndarray
    pit: np.ndarray
    prob_change: np.ndarray
    expected_count: np.ndarray
    rate_per_hour: np.ndarray
    seconds: float
    diagnostics: dict[str, Any] | None = None
    floored_probabilities: int = 0
    worlds: WorldCoverage | None = None
    #: the best single multiple of the method's rates for the test window, and the log
    #: score there (:func:`~bayesrate.studies.level.level_oracle`: knows the level, not
    #: which pages change)
    level_factor: float = np.nan
    level_log_score: float = np.nan

    def scores(self) -> dict[str, float]:
        return {
            "log_score": self.log_score,
            "brier": self.brier,
            "coverage90": self.coverage90,
            "rate_log_rmse": self.rate_log_rmse,
        }

    def summary(self) -> dict[str, Any]:
        """:meth:`scores`, the seconds, and for a fitted model its gates beside them
        (``converged``, ``r_hat_max``, ``ess_bulk_min``, ``divergences``): a score of a
        fit that missed its gates is read as such."""
        out: dict[str, Any] = {**self.scores(), "seconds": round(self.seconds, 2)}
        if self.diagnostics:
            out.update({key: self.diagnostics.get(key) for key in FIT_GATES})
        return out


def count_predictive(
    prob: np.ndarray, group_page: np.ndarray, group_n: np.ndarray, k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``P(K = k)`` and ``P(K < k)`` per page for a sum of Binomials, mixed over draws.

    Parameters
    ----------
    prob
        ``(draws, groups)`` change probability of one interval of each group.
    group_page, group_n
        Page position and number of intervals of each group (sorted by page).
    k
        Observed count per page.

    Notes
    -----
    Exact: per draw the count of a page is the convolution of its groups' Binomial
    distributions, truncated at ``k`` (:func:`count_pmf`).
    """
    return pmf_at(count_pmf(prob, group_page, group_n, k), k)


class Binomials:
    """A :class:`Prediction` on its test groups, as :func:`score` asks of a prediction:
    per draw the count of a page is a sum of Binomials."""

    def __init__(self, pred: Prediction, groups: Groups, n_pages: int):
        self.pred, self.groups, self.n_pages = pred, groups, n_pages
        self.prob = pred.group_probability()

    def draw_worlds(self, n_worlds: int, seed: int | str) -> Worlds:
        g = self.groups
        return draw_worlds(self.prob, g.page, g.count, self.n_pages, n_worlds, seed)

    def count_distribution(self, k: np.ndarray, world_counts: np.ndarray | None = None):
        """:func:`count_pmf`'s buckets up to ``k`` and every world's count, the expected
        count and the probability of a change in the window, per page."""
        g = self.groups
        expected = np.bincount(
            g.page, weights=g.count * self.prob.mean(axis=0), minlength=self.n_pages
        )
        cap = k if world_counts is None else np.maximum(k, world_counts.max(axis=0))
        buckets = count_pmf(self.prob, g.page, g.count, cap)
        return buckets, expected, self.pred.window_probability().mean(axis=0)


def score(
    name: str,
    pred: Prediction | WalkForecast,
    groups: Groups,
    d: Design,
    pit_noise: np.ndarray,
    seconds: float,
    diagnostics: dict[str, Any] | None = None,
    worlds: int = 0,
    seed: int | str = "bayesrate-forecast",
) -> MethodForecast:
    """Scores of one method's prediction (see the module docstring): Binomials per draw
    (:class:`Prediction`) or a dynamic model's walks summed out
    (:class:`~bayesrate.models.walk_forecast.WalkForecast`); with ``worlds``, the spread
    of coverage90 over that many worlds drawn from the prediction (:func:`world_coverage`)."""
    k = d.detected
    source = Binomials(pred, groups, d.n_pages) if isinstance(pred, Prediction) else pred
    drawn = source.draw_worlds(worlds, f"{seed}-{name}") if worlds else None
    buckets, expected, prob_change = source.count_distribution(  # once for both
        k, None if drawn is None else drawn.counts
    )
    prob_k, cdf_below = pmf_at(buckets, k)
    return method_forecast(
        name,
        d,
        prob_k,
        cdf_below,
        pit_noise,
        prob_change,
        pred.rate_per_hour,
        expected,
        seconds,
        diagnostics,
        None if drawn is None else (drawn, lambda counts: pmf_at(buckets, counts)),
    )


def method_forecast(
    name: str,
    d: Design,
    prob_k: np.ndarray,
    cdf_below: np.ndarray,
    pit_noise: np.ndarray,
    prob_change: np.ndarray,
    rate_per_hour: np.ndarray,
    expected: np.ndarray,
    seconds: float,
    diagnostics: dict[str, Any] | None,
    worlds: tuple[Worlds, Callable] | None,
) -> MethodForecast:
    """The scores from a method's ``P(K = k)``, ``P(K < k)`` per page and its window change
    probabilities; ``worlds``: drawn worlds and the same ``(P(K = k), P(K < k))`` of any
    counts."""
    floored = int((prob_k < MIN_PROBABILITY).sum())
    log_score = float(np.mean(np.log(np.maximum(prob_k, MIN_PROBABILITY))))
    pit = cdf_below + pit_noise * prob_k
    coverage = float(np.mean(in_pit_band(pit)))
    changed = d.window_changes > 0
    brier = float(np.mean((prob_change - changed) ** 2))
    true_rate = d.window_changes / d.window_hours
    ok = changed & (rate_per_hour > 0)
    rmse = float(np.sqrt(np.mean((np.log(rate_per_hour[ok]) - np.log(true_rate[ok])) ** 2)))
    own = None if worlds is None else world_coverage(*worlds, coverage)
    return MethodForecast(
        name=name,
        log_score=log_score,
        brier=brier,
        coverage90=coverage,
        rate_log_rmse=rmse,
        prob_at_k=prob_k,
        cdf_below_k=cdf_below,
        pit=pit,
        prob_change=prob_change,
        expected_count=expected,
        rate_per_hour=rate_per_hour,
        seconds=seconds,
        diagnostics=diagnostics,
        floored_probabilities=floored,
        worlds=own,
    )
