"""How much of a forecast is the held-out window's level, and what a level prior costs.

A held-out year can be busier or quieter for every page at once (a mass edit, a quiet
year). These tools separate that shared level from a method's page rates, knowing the test
window's outcomes; they are references, not forecasts:

- :func:`level_oracle`: a method's point rates times the single factor that scores best on
  the window (it knows how busy the window was, not which pages change);
- :func:`level_mixture_bound`: the best *mixture* over a level shared by the pages, and an
  upper bound on it (no "rates times a random level" predictive scores above it);
- :func:`level_table` and :class:`LevelTable`: a method's whole posterior predictive with
  every integrated rate times each factor of a grid, so that any prior over a shared level
  (:func:`level_priors`: point levels, log-normals, two-level mixtures) is scored on
  several held-out windows at once (:func:`level_tradeoff`). A level prior is part of a
  model and cannot know which window comes: the table shows what one prior that brings
  every window's coverage90 into range costs in the window the method already forecasts
  well; :func:`chosen_on_past` scores each window with the prior that did best on the
  windows before it (a prior learned without the window's outcomes).

The study scores each page's marginal predictive, so a level shared by the pages and an
independent factor per page score alike here.

Each page's count of detections is Poisson-binomial over its test intervals (as in
:mod:`bayesrate.studies.forecast`); the log score is the mean over pages of
``log P(K = k)``, and coverage90 counts the randomised PIT values in ``[0.05, 0.95]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesrate.predictive import (
    COVERAGE_TARGET,
    MIN_PROBABILITY,
    Groups,
    Prediction,
    change_probability,
    count_pmf,
    in_pit_band,
    pmf_at,
)

#: factors of the level grid of :func:`level_table`: ``e^{-3}`` to ``e^{3}`` in steps of 0.1
LEVEL_GRID = np.exp(np.linspace(-3.0, 3.0, 61))


def level_oracle(
    rate_per_hour: np.ndarray,
    group_page: np.ndarray,
    group_n: np.ndarray,
    group_hours: np.ndarray,
    detected: np.ndarray,
) -> tuple[float, float]:
    """The single factor ``f`` on a method's point rates that scores best on the test
    window, and that log score: each page's count of detections Poisson-binomial over its
    intervals (``group_n`` intervals of ``group_hours`` each), ``P(change) = 1 −
    exp(−f·rate·τ)``, the log score the mean over pages of ``log P(K = detected)``.

    It knows the window's level (how busy the year was) but not which pages change: a
    method whose rates tell pages apart well and lose only by their level scores here as
    well as the best; ``rate_per_hour`` all ones gives the best single rate for every page
    (returned as the factor).
    """
    from scipy.optimize import minimize_scalar

    base = rate_per_hour[group_page] * group_hours

    def log_score(log_factor: float) -> float:
        prob_k, _ = _counts_at_levels(
            base[None, :], None, group_page, group_n, detected, [math.exp(log_factor)]
        )
        return float(np.mean(np.log(np.maximum(prob_k[0], MIN_PROBABILITY))))

    # the Poisson moment estimate, then the exact maximum within a factor e^4 of it
    start = math.log(max(detected.sum(), 0.5) / max(float(base @ group_n), 1e-300))
    best = minimize_scalar(
        lambda u: -log_score(u),
        bounds=(start - 4.0, start + 4.0),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return math.exp(best.x), -float(best.fun)


def level_mixture_bound(
    rate_per_hour: np.ndarray,
    group_page: np.ndarray,
    group_n: np.ndarray,
    group_hours: np.ndarray,
    detected: np.ndarray,
    centre: float,
    iterations: int = 20_000,
) -> tuple[float, float]:
    """The best log score of a method's rates times a *random* level shared by the pages.

    Over mixing weights ``w`` on 241 factors ``f_j`` spanning ``e^±6`` around ``centre``,
    the mean over pages of ``log Σ_j w_j P(K_p = k_p | f_j·rate)`` (each page's count
    Poisson-binomial, as in :func:`level_oracle`): the value EM reaches (``w_j ← w_j·D_j``,
    ``D_j = mean_p L_jp / Σ_i w_i L_ip``, which never lowers it), and an upper bound on the
    optimum, that value ``+ max_j D_j − 1`` (the objective is concave in ``w``, and its
    directional derivative towards any ``w*`` is ``Σ_j w*_j D_j − 1``). It knows the
    outcomes: no predictive of the form "these rates times a level" scores above the bound.
    """
    factors = centre * np.exp(np.linspace(-6.0, 6.0, 241))
    base = rate_per_hour[group_page] * group_hours
    like, _ = _counts_at_levels(base[None, :], None, group_page, group_n, detected, factors)
    return _mixture_em(np.maximum(like, MIN_PROBABILITY), iterations)


def _mixture_em(like: np.ndarray, iterations: int) -> tuple[float, float]:
    """The best mean over pages of ``log Σ_j w_j like[j, p]`` that EM reaches from equal
    weights, and the concavity bound on the optimum (:func:`level_mixture_bound`)."""
    weights = np.full(len(like), 1.0 / len(like))
    for _ in range(iterations):
        weights = weights * (like / (weights @ like)).mean(axis=1)
    mix = weights @ like
    value = float(np.mean(np.log(mix)))
    return value, value + float((like / mix).mean(axis=1).max()) - 1.0


def _counts_at_levels(
    group_lambda: np.ndarray,
    group_shape: np.ndarray | None,
    group_page: np.ndarray,
    group_n: np.ndarray,
    detected: np.ndarray,
    factors: Sequence[float] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(factors, pages)`` ``P(K = detected)`` and ``P(K < detected)`` with every integrated
    rate ``group_lambda`` ``(draws, groups)`` times each factor (Gamma-mixed with
    ``group_shape`` if given), mixed over the draws: one exact
    :func:`~bayesrate.predictive.count_pmf` per factor."""
    prob_k = np.empty((len(factors), len(detected)))
    cdf_below = np.empty_like(prob_k)
    for j, factor in enumerate(factors):
        prob = change_probability(group_lambda * factor, group_shape)
        buckets = count_pmf(prob, group_page, group_n, detected)
        prob_k[j], cdf_below[j] = pmf_at(buckets, detected)
    return prob_k, cdf_below


@dataclass(frozen=True)
class LevelTable:
    """A method's posterior predictive of each page's test count with every integrated rate
    times each factor of a grid (:func:`level_table`).

    Attributes
    ----------
    factors
        ``(factors,)`` the level grid.
    prob_at_k, cdf_below_k
        ``(factors, pages)`` ``P(K = k)`` and ``P(K < k)`` of the observed counts at each
        factor, mixed over the method's posterior draws.
    """

    factors: np.ndarray
    prob_at_k: np.ndarray
    cdf_below_k: np.ndarray

    def scores(self, weights: np.ndarray, pit_noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log score and coverage90 of the predictive mixed over a level shared by the pages.

        Parameters
        ----------
        weights
            ``(..., factors)`` probabilities of the grid's factors (one prior per row).
        pit_noise
            ``(pages,)`` the uniform noise of the randomised PIT values.

        Returns
        -------
        log_score, coverage90
            Shaped like ``weights`` without its last axis.
        """
        prob_k = weights @ self.prob_at_k
        pit = weights @ self.cdf_below_k + pit_noise * prob_k
        log_score = np.log(np.maximum(prob_k, MIN_PROBABILITY)).mean(axis=-1)
        return log_score, in_pit_band(pit).mean(axis=-1)

    def mixture_bound(self, iterations: int = 20_000) -> tuple[float, float]:
        """The best mixture over the grid's levels, chosen knowing the outcomes, and an upper
        bound on it (EM and concavity, as :func:`level_mixture_bound`, on the whole
        predictive rather than plug-in rates)."""
        return _mixture_em(np.maximum(self.prob_at_k, MIN_PROBABILITY), iterations)


def level_table(
    pred: Prediction, groups: Groups, detected: np.ndarray, factors: np.ndarray = LEVEL_GRID
) -> LevelTable:
    """:class:`LevelTable` of a method's prediction (:func:`forecast.method_prediction
    <bayesrate.studies.forecast.method_prediction>`) on the observed counts ``detected``.

    Each factor multiplies every integrated rate of every draw (and, for the bursty
    model, keeps its shape ``κ``); the count distribution is the exact convolution of
    :func:`~bayesrate.predictive.count_pmf`. Work: one ``count_pmf`` per factor.
    """
    prob_k, cdf_below = _counts_at_levels(
        pred.group_lambda, pred.group_shape, groups.page, groups.count, detected, factors
    )
    return LevelTable(np.asarray(factors, dtype=float), prob_k, cdf_below)


def level_priors(
    factors: np.ndarray = LEVEL_GRID,
    sds: Sequence[float] = tuple(np.round(np.arange(0.1, 1.51, 0.05), 2)),
    upper_weights: Sequence[float] = tuple(np.round(np.arange(0.05, 0.951, 0.05), 2)),
) -> tuple[pd.DataFrame, np.ndarray]:
    """Priors over a level shared by the pages, as weights on the grid ``factors``.

    Families: ``point`` (one factor); ``lognormal`` (median at each factor, log-scale sd in
    ``sds``: the grid's factors weighted by the normal density of their log, normalised);
    ``two levels`` (every pair of factors ``low < high``, ``high`` with each probability in
    ``upper_weights``).

    Returns
    -------
    params
        One row per prior: ``family``, ``median`` and ``sd`` (log-normal), ``low``,
        ``high`` and ``upper_weight`` (two levels; a point level has ``low = high``).
    weights
        ``(priors, factors)``; each row sums to 1.
    """
    factors = np.asarray(factors, dtype=float)
    n = len(factors)
    log_f = np.log(factors)
    rows: list[dict] = [{"family": "point", "low": f, "high": f} for f in factors]
    blocks = [np.eye(n)]
    sd = np.repeat(np.asarray(sds, dtype=float), n)
    centre = np.tile(log_f, len(sds))
    density = np.exp(-0.5 * ((log_f[None, :] - centre[:, None]) / sd[:, None]) ** 2)
    blocks.append(density / density.sum(axis=1, keepdims=True))
    rows += [
        {"family": "lognormal", "median": math.exp(c), "sd": s}
        for c, s in zip(centre, sd, strict=True)
    ]
    low, high = np.triu_indices(n, k=1)
    upper = np.asarray(upper_weights, dtype=float)
    pairs = np.zeros((len(low) * len(upper), n))
    pair_row = np.arange(len(pairs))
    pairs[pair_row, np.repeat(low, len(upper))] = 1.0 - np.tile(upper, len(low))
    pairs[pair_row, np.repeat(high, len(upper))] = np.tile(upper, len(low))
    blocks.append(pairs)
    rows += [
        {"family": "two levels", "low": factors[a], "high": factors[b], "upper_weight": w}
        for a, b in zip(low, high, strict=True)
        for w in upper
    ]
    return pd.DataFrame(rows), np.concatenate(blocks)


def level_tradeoff(
    tables: dict[str, LevelTable],
    pit_noise: dict[str, np.ndarray],
    priors: tuple[pd.DataFrame, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Every prior of :func:`level_priors` scored on several held-out windows at once.

    Parameters
    ----------
    tables
        Per window label, the method's :class:`LevelTable` (all on the same grid).
    pit_noise
        Per window label, its PIT noise.
    priors
        ``(params, weights)`` as returned by :func:`level_priors` (default: that function's
        defaults on the first table's grid).

    Returns
    -------
    pandas.DataFrame
        ``params`` with, per window, ``log_score[LABEL]`` and ``coverage90[LABEL]``, and
        ``in_target``: whether every window's coverage90 lies in
        :data:`~bayesrate.predictive.COVERAGE_TARGET`.
    """
    first = next(iter(tables.values()))
    if any(not np.array_equal(t.factors, first.factors) for t in tables.values()):
        raise ValueError("the level tables are not on one grid")
    params, weights = level_priors(first.factors) if priors is None else priors
    out = params.copy()
    in_target = np.ones(len(out), dtype=bool)
    for label, table in tables.items():
        log_score, coverage = table.scores(weights, pit_noise[label])
        out[f"log_score[{label}]"] = log_score
        out[f"coverage90[{label}]"] = coverage
        in_target &= (coverage >= COVERAGE_TARGET[0]) & (coverage <= COVERAGE_TARGET[1])
    out["in_target"] = in_target
    return out


def chosen_on_past(tradeoff: pd.DataFrame, windows: Sequence[str]) -> pd.DataFrame:
    """Each window scored with the prior that scored best on the windows before it.

    A level prior chosen without the window's outcomes: for window ``i ≥ 1`` (``windows`` in
    time order, labels of :func:`level_tradeoff`'s columns), the row of ``tradeoff`` with the
    best mean log score over windows ``0 … i−1``, with its log score and coverage90 on
    window ``i``.

    Returns
    -------
    pandas.DataFrame
        One row per window after the first: ``window``, ``prior`` (its row label in
        ``tradeoff``), ``family``, ``log_score``, ``coverage90``.
    """
    rows = []
    for i, window in enumerate(windows[1:], start=1):
        past = tradeoff[[f"log_score[{w}]" for w in windows[:i]]].mean(axis=1)
        best = past.idxmax()
        rows.append({
            "window": window,
            "prior": best,
            "family": tradeoff.at[best, "family"],
            "log_score": tradeoff.at[best, f"log_score[{window}]"],
            "coverage90": tradeoff.at[best, f"coverage90[{window}]"],
        })  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "LEVEL_GRID",
    "LevelTable",
    "chosen_on_past",
    "level_mixture_bound",
    "level_oracle",
    "level_priors",
    "level_table",
    "level_tradeoff",
]
