"""Sufficient statistics of interval-censored visits, computed once and shared.

Under a Poisson change process each interval between consecutive visits contributes
``log(1 - exp(-Λ))`` if a change was detected and ``-Λ`` if not, where ``Λ`` is the
integrated rate over the interval (``docs/science.md`` §1). Two summaries keep the
likelihood exact while shrinking the data:

:class:`IntervalStats` (constant rate per page)
    Intervals grouped by (page, length τ) with counts ``n`` and changed counts ``c``.
    The log-likelihood of a group is ``c·log(1 − e^{−λτ}) − (n − c)·λτ``; summing over
    groups gives the per-visit likelihood exactly, because intervals of equal length are
    exchangeable. The unchanged intervals collapse further to one exposure per page,
    :attr:`IntervalStats.unchanged_exposure`.

:class:`HourOfWeekStats` (rate modulated by hour of week, ``λ(t) = λ_page · m[b(t)]``)
    ``Λ = λ_page · Σ_b m_b · o_b`` where ``o_b`` is the interval's overlap (hours) with
    bucket ``b``. Unchanged intervals enter only through ``−Λ``, which is linear in the
    overlap, so their overlaps are summed into one 168-vector per page
    (:attr:`HourOfWeekStats.unchanged_exposure`): exact. Changed intervals need their own
    overlap vector inside the logarithm; identical vectors (common on regular grids) are
    grouped into *patterns* with counts per (page, pattern): exact up to the 1e-9 h
    rounding used to recognise identical vectors. Since a page's intervals tile its
    observation span, the unchanged exposure is computed as the span's overlap minus the
    changed intervals' overlaps, without touching every unchanged interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesrate.clock import check_timezone, hour_of_week_overlap
from bayesrate.likelihood import CensoredGroups, loglik

if TYPE_CHECKING:
    from bayesrate.observations import Observations

#: overlaps are rounded to this many hours when recognising identical patterns
PATTERN_RESOLUTION_HOURS = 1e-9


@dataclass(frozen=True, eq=False)
class IntervalStats:
    """Per page, intervals grouped by length, with changed counts.

    Groups are sorted by page position, then interval length. Page-level arrays are
    aligned with :attr:`pages`.

    Attributes
    ----------
    pages
        Page labels.
    domain
        Domain position of each page (into :attr:`domains`).
    domains
        Domain labels.
    group_page, group_tau, group_n, group_changed
        One entry per (page, interval length) group: page position, length in hours,
        number of intervals, number of those with a detected change.
    group_offsets
        Groups of page ``i`` are ``group_offsets[i]:group_offsets[i + 1]``.
    n_visits, n_intervals, n_changes, exposure
        Per page: visits, intervals, detected changes, total observed hours.
    """

    pages: pd.Index
    domain: np.ndarray
    domains: pd.Index
    group_page: np.ndarray
    group_tau: np.ndarray
    group_n: np.ndarray
    group_changed: np.ndarray
    group_offsets: np.ndarray
    n_visits: np.ndarray
    n_intervals: np.ndarray
    n_changes: np.ndarray
    exposure: np.ndarray

    @classmethod
    def from_groups(
        cls,
        group_page: np.ndarray,
        group_tau: np.ndarray,
        group_n: np.ndarray,
        group_changed: np.ndarray,
        n_pages: int,
    ) -> IntervalStats:
        """Statistics of pages ``0..n_pages-1`` from interval groups given directly.

        Groups need not be merged (one per interval with ``n = 1`` is fine) nor sorted;
        pages are labelled by position and share one domain.
        """
        group_page = np.asarray(group_page, dtype=np.int64)
        order = np.argsort(group_page, kind="stable")
        group_page = group_page[order]
        group_tau = np.asarray(group_tau, dtype=np.float64)[order]
        group_n = np.asarray(group_n, dtype=np.int64)[order]
        group_changed = np.asarray(group_changed, dtype=np.int64)[order]
        if len(group_tau) and not np.all(group_tau > 0):
            bad = np.flatnonzero(~(group_tau > 0))[:10].tolist()
            raise ValueError(f"interval lengths must be positive (groups {bad})")
        n = np.bincount(group_page, weights=group_n, minlength=n_pages).astype(np.int64)
        return cls(
            pages=pd.RangeIndex(n_pages, name="page"),
            domain=np.zeros(n_pages, np.int64),
            domains=pd.Index(["(none)"], name="domain"),
            group_page=group_page,
            group_tau=group_tau,
            group_n=group_n,
            group_changed=group_changed,
            group_offsets=np.searchsorted(group_page, np.arange(n_pages + 1)).astype(np.int64),
            n_visits=n + 1,
            n_intervals=n,
            n_changes=np.bincount(group_page, weights=group_changed, minlength=n_pages).astype(
                np.int64
            ),
            exposure=np.bincount(group_page, weights=group_n * group_tau, minlength=n_pages),
        )

    @property
    def n_pages(self) -> int:
        return len(self.pages)

    @property
    def n_groups(self) -> int:
        return len(self.group_tau)

    @cached_property
    def unchanged_exposure(self) -> np.ndarray:
        """Per page, total hours of the intervals in which no change was detected."""
        unchanged = (self.group_n - self.group_changed) * self.group_tau
        return np.bincount(self.group_page, weights=unchanged, minlength=self.n_pages)

    @cached_property
    def changed_groups(self) -> np.ndarray:
        """Positions of groups with at least one detected change."""
        return np.flatnonzero(self.group_changed > 0)

    @cached_property
    def groups(self) -> CensoredGroups:
        """The log-likelihood's summary: unchanged exposure and changed (page, τ) groups."""
        changed = self.changed_groups
        return CensoredGroups(
            unchanged=self.unchanged_exposure,
            group_page=self.group_page[changed],
            group_log_exposure=np.log(self.group_tau[changed]),
            group_count=self.group_changed[changed].astype(np.float64),
        )

    def loglik(self, rate_per_hour: np.ndarray) -> np.ndarray:
        """Exact per-page log-likelihood of constant rates (one per page, per hour)."""
        with np.errstate(divide="ignore"):
            log_rate = np.log(np.asarray(rate_per_hour, dtype=np.float64))
        return loglik(self.groups, log_rate)

    def to_frame(self) -> pd.DataFrame:
        """The groups as a table: ``page``, ``tau_hours``, ``n``, ``changed``."""
        return pd.DataFrame(
            {
                "page": self.pages.to_numpy()[self.group_page],
                "tau_hours": self.group_tau,
                "n": self.group_n,
                "changed": self.group_changed,
            }
        )


@dataclass(frozen=True, eq=False)
class HourOfWeekStats:
    """Per page × hour-of-week bucket exposure, exact for modulated rates.

    Attributes
    ----------
    timezone
        The clock the buckets are read on (bucket 0 = Monday 00:00-01:00 local).
    pages, domain, domains
        As in :class:`IntervalStats`.
    unchanged_exposure
        ``(n_pages, 168)`` hours of unchanged intervals falling in each bucket.
    pattern_overlap
        ``(n_patterns, 168)`` distinct overlap vectors of changed intervals.
    changed_page, changed_pattern, changed_count
        One entry per (page, pattern) group of changed intervals, sorted by page.
    """

    timezone: str
    pages: pd.Index
    domain: np.ndarray
    domains: pd.Index
    unchanged_exposure: np.ndarray
    pattern_overlap: np.ndarray
    changed_page: np.ndarray
    changed_pattern: np.ndarray
    changed_count: np.ndarray

    @property
    def n_pages(self) -> int:
        return len(self.pages)

    @property
    def n_patterns(self) -> int:
        return len(self.pattern_overlap)

    def groups(self, multipliers: np.ndarray) -> CensoredGroups:
        """The log-likelihood's summary for hour-of-week multipliers ``m`` (168,).

        Exposures are ``Σ_b m_b·overlap_b``: per page for the unchanged intervals, per
        (page, pattern) group for the changed ones.
        """
        m = np.asarray(multipliers, dtype=np.float64)
        return CensoredGroups(
            unchanged=self.unchanged_exposure @ m,
            group_page=self.changed_page,
            group_log_exposure=np.log(self.pattern_overlap @ m)[self.changed_pattern],
            group_count=self.changed_count.astype(np.float64),
        )

    def loglik(self, rate_per_hour: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
        """Exact per-page log-likelihood for ``λ_page · m[bucket]``."""
        with np.errstate(divide="ignore"):
            log_rate = np.log(np.asarray(rate_per_hour, dtype=np.float64))
        return loglik(self.groups(multipliers), log_rate)


# ---------------------------------------------------------------------------------------


def interval_arrays(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(page position, length in hours, changed flag) of every interval."""
    not_first = ~obs.is_baseline
    tau = np.diff(obs.time, prepend=np.nan)[not_first]
    return obs.page_of_visit[not_first], tau, obs.changed[not_first].astype(np.int64)


def _factorize_sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Like ``np.unique(values, return_inverse=True)`` but by hashing (O(n))."""
    codes, uniques = pd.factorize(values, sort=False)
    order = np.argsort(uniques)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return np.asarray(uniques)[order], rank[codes]


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (after rounding to PATTERN_RESOLUTION_HOURS) and each row's code.

    Rows are hashed to one 64-bit key each and grouped by key; a collision (rows with the
    same key that differ) is detected and falls back to an exact sort-based unique.
    """
    n_cols = rows.shape[1] if rows.ndim == 2 else 0
    if len(rows) == 0:
        return np.zeros((0, n_cols)), np.zeros(0, dtype=np.int64)
    ticks = np.round(rows / PATTERN_RESOLUTION_HOURS).astype(np.int64)
    weights = np.random.default_rng(20261130).integers(1, 2**62, size=n_cols) | 1
    with np.errstate(over="ignore"):
        keys = (ticks.astype(np.uint64) * weights.astype(np.uint64)).sum(axis=1)
    codes, uniques = pd.factorize(keys, sort=False)
    first = np.full(len(uniques), len(rows), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(rows)))
    if not np.array_equal(ticks, ticks[first[codes]]):  # hash collision: exact fallback
        distinct, codes = np.unique(ticks, axis=0, return_inverse=True)
        return distinct * PATTERN_RESOLUTION_HOURS, codes.reshape(-1).astype(np.int64)
    return ticks[first] * PATTERN_RESOLUTION_HOURS, codes.astype(np.int64)


def interval_stats(obs: Observations) -> IntervalStats:
    """Group every page's intervals by length; see :class:`IntervalStats`."""
    page, tau, changed = interval_arrays(obs)
    n_pages = obs.n_pages
    tau_values, tau_code = _factorize_sorted(tau)
    n_tau = len(tau_values)
    if n_pages * max(n_tau, 1) <= 20_000_000:
        key = page * n_tau + tau_code
        counts = np.bincount(key, minlength=n_pages * n_tau)
        present = np.flatnonzero(counts)
        group_n = counts[present]
        group_changed = np.bincount(key, weights=changed, minlength=n_pages * n_tau)[present]
        group_page, group_tau_code = np.divmod(present, n_tau)
    else:
        key = page * n_tau + tau_code
        present, inverse, group_n = np.unique(key, return_inverse=True, return_counts=True)
        group_changed = np.bincount(inverse, weights=changed, minlength=len(present))
        group_page, group_tau_code = np.divmod(present, n_tau)
    group_offsets = np.searchsorted(group_page, np.arange(n_pages + 1)).astype(np.int64)
    n_visits = obs.visits_per_page.astype(np.int64)
    first = obs.time[obs.offsets[:-1].clip(max=max(obs.n_visits - 1, 0))]
    last = obs.time[(obs.offsets[1:] - 1).clip(min=0)]
    return IntervalStats(
        pages=obs.pages.index,
        domain=obs.domain_codes,
        domains=obs.domains,
        group_page=group_page.astype(np.int64),
        group_tau=tau_values[group_tau_code] if n_tau else np.zeros(0),
        group_n=group_n.astype(np.int64),
        group_changed=np.rint(group_changed).astype(np.int64),
        group_offsets=group_offsets,
        n_visits=n_visits,
        n_intervals=np.maximum(n_visits - 1, 0),
        n_changes=obs.changes_per_page.astype(np.int64),
        exposure=np.where(n_visits > 0, last - first, 0.0),
    )


def hour_of_week_stats(obs: Observations, timezone: str = "UTC") -> HourOfWeekStats:
    """Exact hour-of-week exposures; see :class:`HourOfWeekStats`."""
    check_timezone(timezone)
    changed_visit = np.flatnonzero(obs.changed.astype(bool))
    start = obs.time[changed_visit - 1]
    end = obs.time[changed_visit]
    owner = obs.page_of_visit[changed_visit]
    overlaps = hour_of_week_overlap(start, end, timezone)

    has_visits = obs.visits_per_page > 0
    first = np.where(has_visits, obs.time[obs.offsets[:-1].clip(max=max(obs.n_visits - 1, 0))], 0)
    last = np.where(has_visits, obs.time[(obs.offsets[1:] - 1).clip(min=0)], 0)
    span = hour_of_week_overlap(first, last, timezone)
    np.subtract.at(span, owner, overlaps)
    np.maximum(span, 0.0, out=span)

    patterns, pattern_code = unique_rows(overlaps)
    n_patterns = max(len(patterns), 1)
    key = owner * n_patterns + pattern_code
    groups, counts = np.unique(key, return_counts=True)
    group_page, group_pattern = np.divmod(groups, n_patterns)
    return HourOfWeekStats(
        timezone=timezone,
        pages=obs.pages.index,
        domain=obs.domain_codes,
        domains=obs.domains,
        unchanged_exposure=span,
        pattern_overlap=patterns,
        changed_page=group_page.astype(np.int64),
        changed_pattern=group_pattern.astype(np.int64),
        changed_count=counts.astype(np.int64),
    )
