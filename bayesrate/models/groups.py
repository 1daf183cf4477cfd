"""Interval groups the models observe: a page's intervals of one exposure, with counts.

Under a Poisson change process an interval of integrated rate ``Λ = λ·E`` ends in a
detected change with probability ``1 − e^{−Λ}``, independently of the others. Intervals
of one page with the same *exposure* ``E`` are exchangeable, so ``n`` of them with ``c``
detections are one ``Binomial(n, 1 − e^{−λE})``: a sufficient statistic, never one
Bernoulli per visit.

The exposure of an interval is ``basis · m``: for constant-rate models ``basis`` is its
length (one column, ``m = 1``); for the modulated model its overlap with the 168
hour-of-week buckets (``m`` the multipliers). Intervals with equal bases form a
*pattern*; a group is a (page, pattern) pair. Two groupings:

:func:`interval_groups` (constant-rate models)
    Patterns are interval lengths (from :attr:`Observations.interval_stats`): the fewest
    groups, which the fitted likelihood needs.
:func:`visit_patterns` (the modulated model; every model's predictive)
    Patterns are (length, start within the local week): they fix the overlap with each
    bucket and the bucket of the detecting visit, which the predictive checks need.
    Intervals during which the clock's UTC offset changes (or that are longer than four
    weeks in a zone with daylight saving) get a pattern of their own, so that every
    interval's overlap is its pattern's exactly.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesrate.clock import check_timezone, hour_of_week, hour_of_week_overlap, utc_offset_hours
from bayesrate.constants import EPOCH_HOUR_OF_WEEK, HOURS_PER_WEEK
from bayesrate.sufficient import PATTERN_RESOLUTION_HOURS

if TYPE_CHECKING:
    from bayesrate.observations import Observations

#: fixed-offset clocks (every interval's pattern is its length and week position)
UTC_NAMES = ("UTC", "utc", "Etc/UTC")
#: in other zones, intervals longer than this get their own pattern (two offset changes
#: could fall inside them, which the offsets at their ends do not reveal)
MAX_SHARED_PATTERN_HOURS = 4 * HOURS_PER_WEEK
#: basis kinds: interval length, or overlap with each hour-of-week bucket
BASES = ("length", "hour_of_week")


@dataclass(frozen=True, eq=False)
class IntervalGroups:
    """Groups of a page's intervals with one exposure, sorted by page.

    Attributes
    ----------
    n_pages
        Pages the groups' ``page`` positions refer to.
    page, pattern
        Per group: page position, and pattern (row of :attr:`basis`).
    trials, detected
        Per group: intervals ``n`` and those that ended in a detected change ``c``.
    basis
        ``(n_patterns, K)``: one interval of pattern ``b`` has exposure ``basis[b] · m``.
    """

    n_pages: int
    page: np.ndarray
    pattern: np.ndarray
    trials: np.ndarray
    detected: np.ndarray
    basis: np.ndarray

    @property
    def n_groups(self) -> int:
        return len(self.page)

    def select(self, mask: np.ndarray) -> IntervalGroups:
        """The groups where ``mask`` holds, with only the patterns they use."""
        mask = np.asarray(mask, dtype=bool)
        used, pattern = np.unique(self.pattern[mask], return_inverse=True)
        return IntervalGroups(
            n_pages=self.n_pages,
            page=self.page[mask],
            pattern=pattern.reshape(-1).astype(np.int64),
            trials=self.trials[mask],
            detected=self.detected[mask],
            basis=self.basis[used],
        )


def sum_by_page(values: np.ndarray, group_page: np.ndarray, n_pages: int) -> np.ndarray:
    """Sum ``values`` (``(..., n_groups)``, groups sorted by page) over each page's groups."""
    values = np.asarray(values)
    out = np.zeros((*values.shape[:-1], n_pages), dtype=np.result_type(values, np.int64))
    starts = np.searchsorted(group_page, np.arange(n_pages))
    present = np.diff(np.r_[starts, len(group_page)]) > 0
    if present.any():
        out[..., present] = np.add.reduceat(values, starts[present], axis=-1)
    return out


def interval_groups(obs: Observations) -> IntervalGroups:
    """Groups by (page, interval length): the constant-rate models' likelihood."""
    stats = obs.interval_stats
    lengths, pattern = np.unique(stats.group_tau, return_inverse=True)
    return IntervalGroups(
        n_pages=stats.n_pages,
        page=stats.group_page,
        pattern=pattern.reshape(-1).astype(np.int64),
        trials=stats.group_n,
        detected=stats.group_changed,
        basis=lengths[:, None],
    )


@dataclass(frozen=True, eq=False)
class VisitPatterns:
    """Every interval of some observations grouped by (page, pattern) on one clock.

    Attributes
    ----------
    timezone
        The clock of the patterns' week positions and buckets.
    n_pages
        Pages of the observations.
    pattern_start, pattern_end
        Per pattern: one of its intervals (hours since the epoch).
    group_page, group_pattern, group_n, group_changed
        Per (page, pattern) group: page position, pattern, intervals, detections.
    interval_group
        Per interval (visits after each page's first, in visit order): its group.
    """

    timezone: str
    n_pages: int
    pattern_start: np.ndarray
    pattern_end: np.ndarray
    group_page: np.ndarray
    group_pattern: np.ndarray
    group_n: np.ndarray
    group_changed: np.ndarray
    interval_group: np.ndarray

    @property
    def n_patterns(self) -> int:
        return len(self.pattern_start)

    @property
    def n_groups(self) -> int:
        return len(self.group_page)

    @cached_property
    def pattern_length(self) -> np.ndarray:
        return self.pattern_end - self.pattern_start

    @cached_property
    def pattern_overlap(self) -> np.ndarray:
        """``(n_patterns, 168)`` hours of each pattern's intervals in each bucket."""
        return hour_of_week_overlap(self.pattern_start, self.pattern_end, self.timezone)

    @cached_property
    def pattern_end_bucket(self) -> np.ndarray:
        """Hour-of-week bucket of the visit that ends each pattern's intervals."""
        return hour_of_week(self.pattern_end, self.timezone)

    @property
    def group_end_bucket(self) -> np.ndarray:
        return self.pattern_end_bucket[self.group_pattern]

    def groups(self, basis: str = "length") -> IntervalGroups:
        """The groups with exposure basis ``"length"`` or ``"hour_of_week"``."""
        if basis not in BASES:
            raise ValueError(f"basis must be one of {BASES}, got {basis!r}")
        matrix = self.pattern_length[:, None] if basis == "length" else self.pattern_overlap
        return IntervalGroups(
            n_pages=self.n_pages,
            page=self.group_page,
            pattern=self.group_pattern,
            trials=self.group_n,
            detected=self.group_changed,
            basis=matrix,
        )


_PATTERN_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def visit_patterns(obs: Observations, timezone: str = "UTC") -> VisitPatterns:
    """Group every interval by (page, pattern) on ``timezone``'s clock (cached per data)."""
    check_timezone(timezone)
    cache = _PATTERN_CACHE.setdefault(obs, {})
    if timezone not in cache:
        cache[timezone] = _visit_patterns(obs, timezone)
    return cache[timezone]


def _ticks(hours: np.ndarray) -> np.ndarray:
    return np.round(hours / PATTERN_RESOLUTION_HOURS).astype(np.int64)


def _visit_patterns(obs: Observations, timezone: str) -> VisitPatterns:
    ends = np.flatnonzero(~obs.is_baseline)
    end = obs.time[ends]
    start = obs.time[ends - 1]
    length = end - start
    offset_start = utc_offset_hours(start, timezone)
    week_position = np.mod(start + offset_start + EPOCH_HOUR_OF_WEEK, HOURS_PER_WEEK)
    own = np.zeros(len(ends), dtype=bool)
    if timezone not in UTC_NAMES:
        own = (utc_offset_hours(end, timezone) != offset_start) | (
            length > MAX_SHARED_PATTERN_HOURS
        )
    length_code, _ = pd.factorize(_ticks(length))
    week_code, week_values = pd.factorize(_ticks(week_position))
    key = length_code.astype(np.int64) * max(len(week_values), 1) + week_code
    key = np.where(own, -1 - np.arange(len(ends)), key)
    pattern, _ = pd.factorize(key)
    return _grouped(obs, timezone, start, end, pattern.astype(np.int64))


def refined_patterns(obs: Observations, timezone: str, refine: np.ndarray) -> VisitPatterns:
    """:func:`visit_patterns` whose patterns also share ``refine`` (an integer per
    interval, e.g. its epoch), so that each group has one value of it."""
    base = visit_patterns(obs, timezone)
    refine = np.asarray(refine, dtype=np.int64)
    if len(refine) != len(base.interval_group):
        raise ValueError(f"refine needs one value per interval ({len(base.interval_group)})")
    ends = np.flatnonzero(~obs.is_baseline)
    both = pd.MultiIndex.from_arrays([base.group_pattern[base.interval_group], refine])
    pattern, _ = pd.factorize(both)
    return _grouped(obs, timezone, obs.time[ends - 1], obs.time[ends], pattern.astype(np.int64))


def _grouped(
    obs: Observations, timezone: str, start: np.ndarray, end: np.ndarray, pattern: np.ndarray
) -> VisitPatterns:
    """The (page, pattern) groups of the intervals ``(start, end]`` (in visit order)."""
    ends = np.flatnonzero(~obs.is_baseline)
    n_patterns = int(pattern.max()) + 1 if len(pattern) else 0
    first = np.full(n_patterns, len(ends), dtype=np.int64)
    np.minimum.at(first, pattern, np.arange(len(ends)))

    page = obs.page_of_visit[ends]
    group_key, interval_group, counts = np.unique(
        page * max(n_patterns, 1) + pattern, return_inverse=True, return_counts=True
    )
    interval_group = interval_group.reshape(-1).astype(np.int64)
    changed = np.bincount(interval_group, weights=obs.changed[ends], minlength=len(group_key))
    group_page, group_pattern = np.divmod(group_key, max(n_patterns, 1))
    return VisitPatterns(
        timezone=timezone,
        n_pages=obs.n_pages,
        pattern_start=start[first],
        pattern_end=end[first],
        group_page=group_page.astype(np.int64),
        group_pattern=group_pattern.astype(np.int64),
        group_n=counts.astype(np.int64),
        group_changed=np.rint(changed).astype(np.int64),
        interval_group=interval_group,
    )
