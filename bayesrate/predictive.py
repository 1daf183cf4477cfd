"""What a fitted model's forecast predictive is made of (``RateModel.forecast_predictive``).

A forecast design (:func:`bayesrate.studies.forecast.design`: training observations, the
test intervals of each page and its test window) is grouped per page by integrated rate
(:class:`Groups`: by length, by hour-of-week overlap pattern, or by closing epoch); a model
answers with a :class:`Prediction`, per posterior draw the integrated rate of every group
and of every page's window. The models build theirs from the pieces here, so the study
never asks which model it holds; the study scores what they return, with the exact count
distribution of each page (:func:`count_pmf`, :func:`pmf_at`) and the PIT band here too,
shared by :mod:`bayesrate.studies.forecast`, :mod:`bayesrate.studies.level` and
:mod:`bayesrate.models.walk_forecast` (it imports none of them; numpy and scipy only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from bayesrate.models.epochs import epoch_overlap
from bayesrate.seeds import rng_from

#: test intervals per chunk when computing hour-of-week overlaps
OVERLAP_CHUNK = 50_000
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
    epochs: Any = None  # an epoch model's patterns (key: its pattern), or the dynamic
    # model's epoch column of each group (key: interval length)


@dataclass(frozen=True)
class Prediction:
    """Per draw: integrated rate of each test group and of each page's window; mean rate.

    With ``group_shape``/``window_shape`` each interval's integrated rate is Gamma-mixed
    with that shape ``κ``: ``P(no change) = (1 + Λ/κ)^{−κ}``; without, Poisson.
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


def length_groups(d) -> Groups:
    """Test intervals grouped by (page, exact length)."""
    tau = d.interval_end - d.interval_start
    values, code = np.unique(tau, return_inverse=True)
    key = d.interval_page * len(values) + code
    uniq, count = np.unique(key, return_counts=True)
    page, tau_code = np.divmod(uniq, len(values))
    return Groups(page, count, values[tau_code])


def pattern_groups(d, timezone: str) -> Groups:
    """Test intervals grouped by (page, hour-of-week overlap pattern), exact."""
    from bayesrate.clock import hour_of_week_overlap
    from bayesrate.sufficient import unique_rows

    chunk_patterns, chunk_codes = [], []
    for lo in range(0, len(d.interval_start), OVERLAP_CHUNK):
        sl = slice(lo, lo + OVERLAP_CHUNK)
        rows = hour_of_week_overlap(d.interval_start[sl], d.interval_end[sl], timezone)
        patterns, codes = unique_rows(rows)
        chunk_codes.append(codes + sum(len(p) for p in chunk_patterns))
        chunk_patterns.append(patterns)
    patterns, remap = unique_rows(np.concatenate(chunk_patterns))
    code = remap[np.concatenate(chunk_codes)]
    key = d.interval_page * len(patterns) + code
    uniq, count = np.unique(key, return_counts=True)
    page, pattern = np.divmod(uniq, len(patterns))
    return Groups(page, count, pattern, patterns)


def page_column_length_groups(
    page: np.ndarray, column: np.ndarray, tau: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Intervals (each its ``page``, ``column`` and length ``tau``) grouped by (page,
    column, length): each group's page, column, length and number of intervals, sorted."""
    values, code = np.unique(tau, return_inverse=True)
    width = int(column.max(initial=0)) + 1
    key = (page.astype(np.int64) * width + column) * len(values) + code.reshape(-1)
    uniq, count = np.unique(key, return_counts=True)
    rest, tau_code = np.divmod(uniq, len(values))
    group_page, group_column = np.divmod(rest, width)
    return group_page, group_column, values[tau_code], count


def column_groups(d, column: np.ndarray) -> Groups:
    """Test intervals grouped by (page, ``column`` of each interval, length): a dynamic
    model's closing-epoch columns (``epochs``: each group's column)."""
    page, col, length, count = page_column_length_groups(
        d.interval_page, column, d.interval_end - d.interval_start
    )
    return Groups(page, count, length, epochs=col)


class FutureEpochs(NamedTuple):
    """The epochs after a dynamic model's last fitted one, as its predictives use them.

    Attributes
    ----------
    group_ahead
        Per test group, its closing epoch's steps after the last fitted one (0: at or
        before it).
    window_page, window_ahead, window_hours
        The pieces of each page's window: page, steps ahead, hours.
    n_ahead
        The most steps any group or piece needs.
    log_shift, log_added
        ``(draws, domains, n_ahead + 1)``: the log-rate offset (a shared effect; 0 without)
        and the log of an added rate (``−inf`` without) of each epoch from the last fitted
        one (the model's ``future_log_effects``).
    """

    group_ahead: np.ndarray
    window_page: np.ndarray
    window_ahead: np.ndarray
    window_hours: np.ndarray
    n_ahead: int
    log_shift: np.ndarray
    log_added: np.ndarray


def future_epochs(model, d, groups: Groups, keep, seed: int | str) -> FutureEpochs:
    """:class:`FutureEpochs` of a fitted dynamic model for the design ``d``, its test groups
    by closing epoch (``model.forecast_groups``) and the kept draws ``keep``."""
    cells = model.cells(model.data_)
    last = cells.n_epochs - 1
    page, epoch, hours = epoch_overlap(
        np.full(d.n_pages, d.split), d.split + d.window_hours, cells.anchor, cells.epoch_hours
    )
    window_ahead = np.maximum(epoch - cells.first_epoch - last, 0)
    group_ahead = np.maximum(np.asarray(groups.epochs) - last, 0)
    n_ahead = int(max(group_ahead.max(initial=0), window_ahead.max(initial=0)))
    log_shift, log_added = model.future_log_effects(keep, n_ahead, seed)
    return FutureEpochs(group_ahead, page, window_ahead, hours, n_ahead, log_shift, log_added)


def sampled_walk_prediction(
    model, d, groups: Groups, keep, mean_rate, seed: int | str
) -> Prediction:
    """A dynamic model's predictive with one sampled path per draw: each page's state in the
    last fitted epoch (its posterior ``log_rate`` draw) walks on one step per later epoch
    (:meth:`~bayesrate.models.dynamic.DynamicModel.walk_forward`); a test interval has its
    closing epoch's rate, the window the rates of the epochs it overlaps."""
    from bayesrate.constants import DIM_PAGE
    from bayesrate.draws import stack_draws

    post = model.idata_["posterior"]
    grid = model.grid(model.data_)
    log_rate = stack_draws(post["log_rate"], DIM_PAGE)[keep]
    state = np.rint((log_rate - grid[0]) / (grid[1] - grid[0])).astype(np.int64)
    state = np.clip(state, 0, len(grid) - 1)  # a Laplace fit's draws are not grid values
    dom = d.train.domain_codes
    sigma, centre, phi = model.forward_walk({k: v[keep] for k, v in model._stacked(post).items()})
    future = future_epochs(model, d, groups, keep, seed)
    rng = rng_from(f"{seed}-future-walk")
    levels = [grid[state]]
    for _ in range(future.n_ahead):
        state = model.walk_forward(state, sigma, rng, centre, phi)
        levels.append(grid[state])
    levels = np.stack(levels, axis=2) + future.log_shift[:, dom, :]  # (draws, pages, ahead)
    levels = np.logaddexp(levels, future.log_added[:, dom, :])
    owner, window_ahead = future.window_page, future.window_ahead
    window_lambda = np.zeros((len(keep), d.n_pages))
    np.add.at(
        window_lambda.T,
        owner,
        (future.window_hours[None, :] * np.exp(levels[:, owner, window_ahead])).T,
    )
    return Prediction(
        group_lambda=np.exp(levels[:, groups.page, future.group_ahead]) * groups.key[None, :],
        window_lambda=window_lambda,
        rate_per_hour=mean_rate,
    )


def pmf_at(
    buckets: list[tuple[np.ndarray, np.ndarray]], k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``P(K = k)`` and ``P(K < k)`` from :func:`count_pmf`'s buckets; ``k`` is ``(pages,)``
    or ``(worlds, pages)``.

    A count beyond its page's bucket gets probability 0 and, below it, the bucket's whole
    mass: a lower bound of ``P(K < k)``, exact for the PIT band wherever that mass is above
    the band (:meth:`~bayesrate.models.walk_forecast.WalkForecast.count_distribution`
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
