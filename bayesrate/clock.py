"""The one clock: timestamps ↔ hours, hour-of-week buckets in a time zone, exact overlaps.

Times are hours since the Unix epoch (UTC); :func:`to_hours` and :func:`to_timestamps`
convert (timezone-naive timestamps are refused everywhere: a time without an offset is
ambiguous). A time zone maps them to local wall-clock
hours; bucket ``b = 24 * weekday + hour`` (Monday 00:00-01:00 local is bucket 0).

:func:`hour_of_week_overlap` returns, for each interval ``(start, end]``, how many hours of
it fall in each of the 168 buckets. It is exact: within a stretch of constant UTC offset
the local clock is a shift of UTC, whole weeks add one hour to every bucket, and the
remainder (< 1 week) is cut at each local hour boundary. Intervals that cross a daylight
saving transition are split there first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from bayesrate.constants import EPOCH_HOUR_OF_WEEK, HOURS_PER_WEEK, N_HOUR_OF_WEEK, TIME_UNITS
from bayesrate.errors import ObservationError

NS_PER_HOUR = 3_600_000_000_000
#: names of the UTC clock (no offset, no transitions)
UTC_NAMES = ("UTC", "utc", "Etc/UTC", "Z")
# offsets are sampled on this grid to find transitions (covers :30 and :45 zones)
_TRANSITION_STEP_HOURS = 0.25


_EPOCH = pd.Timestamp(0, tz="UTC")


def to_hours(values) -> np.ndarray:
    """Timezone-aware timestamps (Series, DatetimeIndex, list) to float hours since the epoch.

    Raises
    ------
    ObservationError
        For timezone-naive timestamps.
    """
    index = pd.DatetimeIndex(values)
    if index.tz is None:
        raise ObservationError(
            "timestamps are timezone-naive; give an offset (e.g. '2024-01-01T00:00Z')",
            field="time",
        )
    return index.tz_convert("UTC").as_unit("ns").asi8 / NS_PER_HOUR


def to_timestamps(hours: np.ndarray) -> pd.DatetimeIndex:
    """Float hours since the epoch to UTC timestamps (rounded to the nanosecond)."""
    ns = np.round(np.asarray(hours, dtype=np.float64) * NS_PER_HOUR).astype("int64")
    return pd.DatetimeIndex(pd.to_datetime(ns, unit="ns", utc=True))


def to_timestamp(hours: float) -> pd.Timestamp:
    """One time in hours since the epoch as a UTC timestamp."""
    return to_timestamps(np.array([hours]))[0]


def check_timezone(timezone: str) -> str:
    """Return ``timezone`` if pandas knows it, else raise :class:`ObservationError`."""
    try:
        pd.Timestamp(0, tz="UTC").tz_convert(timezone)
    except Exception as exc:  # zoneinfo raises several types
        raise ObservationError(f"unknown time zone {timezone!r}", field="timezone") from exc
    return timezone


def utc_offset_hours(hours: np.ndarray, timezone: str) -> np.ndarray:
    """UTC offset (local − UTC, in hours) in force at each time."""
    check_timezone(timezone)
    hours = np.asarray(hours, dtype=np.float64)
    if timezone in UTC_NAMES:
        return np.zeros_like(hours)
    utc = to_timestamps(hours)
    local = utc.tz_convert(timezone).tz_localize(None)
    return (local.asi8 - utc.tz_localize(None).asi8) / NS_PER_HOUR


def local_hours(hours: np.ndarray, timezone: str = "UTC") -> np.ndarray:
    """Local wall-clock hours since the local epoch."""
    hours = np.asarray(hours, dtype=np.float64)
    return hours + utc_offset_hours(hours, timezone)


def hour_of_week(hours: np.ndarray, timezone: str = "UTC") -> np.ndarray:
    """Hour-of-week bucket (0 = Monday 00:00-01:00 local) of each time."""
    local = np.floor(local_hours(hours, timezone)).astype(np.int64)
    return (local + EPOCH_HOUR_OF_WEEK) % N_HOUR_OF_WEEK


@lru_cache(maxsize=64)
def _transitions(timezone: str, first_hour: int, last_hour: int) -> tuple[np.ndarray, np.ndarray]:
    """Offset change points in ``[first_hour, last_hour]`` and the offsets after them."""
    grid = np.arange(first_hour, last_hour + _TRANSITION_STEP_HOURS, _TRANSITION_STEP_HOURS)
    offsets = utc_offset_hours(grid, timezone)
    change = np.flatnonzero(np.diff(offsets) != 0) + 1
    return grid[change], offsets[change]


def _split_at_transitions(
    start: np.ndarray, end: np.ndarray, timezone: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut intervals at UTC-offset changes: (piece_start, piece_end, piece_offset, owner)."""
    n = len(start)
    if timezone in UTC_NAMES or n == 0:
        return start, end, np.zeros(n), np.arange(n)
    lo = int(np.floor(start.min())) - 1
    hi = int(np.ceil(end.max())) + 1
    points, after = _transitions(timezone, lo, hi)
    base_offset = utc_offset_hours(np.array([float(lo)]), timezone)[0]
    first = np.searchsorted(points, start, side="right")
    last = np.searchsorted(points, end, side="left")
    pieces = last - first + 1
    owner = np.repeat(np.arange(n), pieces)
    within = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    cut_index = np.repeat(first, pieces) + within  # transition index that starts the piece
    padded = np.append(points, np.inf)  # so that indexing is safe when there are none
    piece_start = np.where(within == 0, start[owner], padded[np.maximum(cut_index - 1, 0)])
    is_last = within == np.repeat(pieces - 1, pieces)
    piece_end = np.where(is_last, end[owner], padded[np.minimum(cut_index, len(points))])
    offsets_after_k_transitions = np.concatenate([[base_offset], after])
    piece_offset = offsets_after_k_transitions[cut_index]
    return piece_start, piece_end, piece_offset, owner


def hour_of_week_overlap(start: np.ndarray, end: np.ndarray, timezone: str = "UTC") -> np.ndarray:
    """Hours of each interval ``(start, end]`` that fall in each hour-of-week bucket.

    Parameters
    ----------
    start, end
        Interval bounds in hours since the Unix epoch, ``end >= start``.
    timezone
        IANA name of the clock the buckets are read on.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 168)``; each row sums to ``end - start``.
    """
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    if start.shape != end.shape:
        raise ValueError("start and end must have the same shape")
    check_timezone(timezone)
    p_start, p_end, p_offset, owner = _split_at_transitions(start, end, timezone)
    pieces = _fixed_offset_overlap(p_start + p_offset, p_end + p_offset)
    if len(owner) == len(start) and (owner == np.arange(len(start))).all():
        return pieces
    out = np.zeros((len(start), N_HOUR_OF_WEEK))
    np.add.at(out, owner, pieces)
    return out


def _fixed_offset_overlap(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Overlap with hour-of-week buckets for local-clock intervals (no offset changes)."""
    n = len(lo)
    out = np.zeros((n, N_HOUR_OF_WEEK))
    if n == 0:
        return out
    length = hi - lo
    full_weeks = np.floor(length / HOURS_PER_WEEK)
    out += full_weeks[:, None]
    rem_lo = lo + full_weeks * HOURS_PER_WEEK
    cell = np.floor(rem_lo)
    # the remainder (< 168 h) touches at most 169 hour cells; visit rows longest-first so
    # that step k only touches the rows that still have a k-th cell
    n_cells = np.ceil(hi - cell).astype(np.int64)
    order = np.argsort(-n_cells, kind="stable")
    n_sorted = n_cells[order]
    for k in range(int(n_sorted[0]) if n else 0):
        active = order[: np.searchsorted(-n_sorted, -k, side="left")]
        cell_lo = cell[active] + k
        overlap = np.minimum(hi[active], cell_lo + 1.0) - np.maximum(rem_lo[active], cell_lo)
        np.maximum(overlap, 0.0, out=overlap)
        bucket = (cell_lo.astype(np.int64) + EPOCH_HOUR_OF_WEEK) % N_HOUR_OF_WEEK
        out[active, bucket] += overlap
    return out


@dataclass(frozen=True)
class CumulativeTerms:
    """``F(t)``, the integrated hour-of-week multiplier from a fixed origin, as terms linear
    in the multipliers ``m`` (:func:`cumulative_terms`; evaluated by
    :func:`evaluate_cumulative`).

    On a stretch of constant UTC offset the local clock is a shift of UTC, and the integral
    of a function constant on each local hour is ``weeks · Σm + prefix[bucket] +
    fraction · m[bucket]`` at the local time (``prefix`` the exclusive cumulative sum of
    ``m``). At each change of UTC offset (daylight saving) ``F`` is kept continuous by a
    jump: the same expression at the transition's local time before minus after. A time
    adds the jumps of the transitions at or before it (``passed`` of them).
    """

    weeks: np.ndarray
    bucket: np.ndarray
    fraction: np.ndarray
    passed: np.ndarray
    #: (weeks, bucket, fraction) at each transition, local time before and after it
    jump_before: tuple[np.ndarray, np.ndarray, np.ndarray]
    jump_after: tuple[np.ndarray, np.ndarray, np.ndarray]

    def select(self, mask: np.ndarray) -> CumulativeTerms:
        """The terms of the times where ``mask`` holds (the transitions are shared)."""
        return replace(
            self,
            weeks=self.weeks[mask],
            bucket=self.bucket[mask],
            fraction=self.fraction[mask],
            passed=self.passed[mask],
        )


def _local_terms(local: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whole weeks, bucket, fraction of the bucket) of local-clock hours since the epoch."""
    shifted = local + EPOCH_HOUR_OF_WEEK  # bucket = floor(shifted) mod 168
    weeks = np.floor(shifted / N_HOUR_OF_WEEK)
    within = shifted - weeks * N_HOUR_OF_WEEK
    bucket = np.minimum(within.astype(np.int64), N_HOUR_OF_WEEK - 1)
    return weeks, bucket, within - bucket


def cumulative_terms(times: np.ndarray, timezone: str = "UTC") -> CumulativeTerms:
    """The terms of ``F`` at each time (hours since the Unix epoch) on ``timezone``'s clock."""
    times = np.asarray(times, dtype=np.float64)
    empty = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    if timezone in UTC_NAMES or len(times) == 0:
        weeks, bucket, fraction = _local_terms(times)
        passed = np.zeros(len(times), dtype=np.int64)
        return CumulativeTerms(weeks, bucket, fraction, passed, empty, empty)
    check_timezone(timezone)
    lo = np.floor(times.min()) - 1.0
    hi = np.ceil(times.max()) + 1.0
    probe = np.arange(lo, hi + _TRANSITION_STEP_HOURS, _TRANSITION_STEP_HOURS)
    offsets = utc_offset_hours(probe, timezone)
    weeks, bucket, fraction = _local_terms(times + utc_offset_hours(times, timezone))
    cut = np.flatnonzero(np.diff(offsets) != 0) + 1  # probe[cut] is the first instant after
    t_cut = probe[cut]
    return CumulativeTerms(
        weeks,
        bucket,
        fraction,
        np.searchsorted(t_cut, times, side="right"),  # transitions at or before t
        _local_terms(t_cut + offsets[cut - 1]),
        _local_terms(t_cut + offsets[cut]),
    )


def evaluate_cumulative(terms: CumulativeTerms, multipliers, xp=np):
    """``F`` at the times of ``terms`` for one vector of 168 multipliers.

    ``xp`` is the array namespace: ``numpy`` (default), or ``pytensor.tensor`` for a
    symbolic ``multipliers`` (the modulated model's quiet exposure): O(times + 168), no
    times × 168 product.
    """
    m = multipliers
    prefix = xp.concatenate([xp.zeros(1), xp.cumsum(m)])
    total = prefix[-1]

    def at(weeks, bucket, fraction):
        return weeks * total + prefix[bucket] + fraction * m[bucket]

    out = at(terms.weeks, terms.bucket, terms.fraction)
    if len(terms.jump_before[0]):
        jumps = at(*terms.jump_before) - at(*terms.jump_after)
        out = out + xp.concatenate([xp.zeros(1), xp.cumsum(jumps)])[terms.passed]
    return out


def cumulative_multiplier(
    times: np.ndarray,
    multipliers: np.ndarray,
    which: np.ndarray | None = None,
    timezone: str = "UTC",
) -> np.ndarray:
    """``F(t) = integral of m[hour_of_week(u)] du`` from a fixed origin to each time.

    ``F(t_k) - F(t_{k-1})`` is the integrated multiplier over the interval
    ``(t_{k-1}, t_k]`` (in hour-units), exact in any time zone (:class:`CumulativeTerms`).

    Parameters
    ----------
    times
        Hours since the Unix epoch.
    multipliers
        ``(g, 168)`` rows of hour-of-week multipliers (bucket 0 = Monday 00:00 local).
    which
        Row of ``multipliers`` to use at each time (default: row 0 everywhere).
    timezone
        Clock the buckets are read on.

    Returns
    -------
    numpy.ndarray
        ``F`` at each time (only differences between times are meaningful).
    """
    terms = cumulative_terms(times, timezone)
    m = np.asarray(multipliers, dtype=np.float64).reshape(-1, N_HOUR_OF_WEEK)
    if which is None or len(m) == 1:
        return evaluate_cumulative(terms, m[0])
    rows = np.asarray(which)
    out = np.empty(len(rows))
    for row in np.unique(rows):
        mask = rows == row
        out[mask] = evaluate_cumulative(terms.select(mask), m[row])
    return out


# ---------------------------------------------------------------------- plausible dates
#: 1990-01-01T00:00Z in hours since the Unix epoch (7305 days)
EARLIEST_PLAUSIBLE = 7305 * 24.0
#: 2100-01-01T00:00Z in hours since the Unix epoch (47482 days)
LATEST_PLAUSIBLE = 47482 * 24.0
#: names of the time units, for messages
UNIT_NAMES = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def year_of(hours: float) -> str:
    """The calendar year of a time in hours since the epoch (approximate, for messages)."""
    if not np.isfinite(hours):
        return str(hours)
    return f"{1970 + hours / (24 * 365.2425):.0f}"


def plausible(hours: np.ndarray) -> np.ndarray:
    """Mask of times that are plausible dates: finite, 1990-01-01 to 2100-01-01."""
    hours = np.asarray(hours, dtype=np.float64)
    return np.isfinite(hours) & (hours >= EARLIEST_PLAUSIBLE) & (hours <= LATEST_PLAUSIBLE)


def unit_hint(hours: np.ndarray, unit: str) -> str:
    """Which other unit, if any, makes these numbers (``hours``, read in ``unit``) plausible
    dates: ``"; they would be plausible dates in seconds (--time-unit s)"`` or ``""``."""
    raw = np.asarray(hours, dtype=np.float64) / TIME_UNITS[unit]
    for other in ("s", "min", "h", "d"):
        if other != unit and plausible(raw * TIME_UNITS[other]).all():
            return f"; they would be plausible dates in {UNIT_NAMES[other]} (--time-unit {other})"
    return ""


def check_numeric_times(hours: np.ndarray, unit: str) -> None:
    """Raise unless numeric times, read in ``unit`` and converted to ``hours``, could be
    times: finite and no further from the epoch than :data:`LATEST_PLAUSIBLE` (2100).

    Numbers may be relative (0, 24, …), so only the magnitude is checked: epoch seconds
    read as hours (year ~196,000) and ``1e300`` are refused, with the unit that would make
    them dates when one does.

    Raises
    ------
    ObservationError
        Naming the rows, the unit and the year the first one would be.
    """
    hours = np.asarray(hours, dtype=np.float64)
    bad = np.abs(hours) > LATEST_PLAUSIBLE  # infinities too; NaN is a missing value
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    example = hours[rows[0]]
    raise ObservationError(
        f"time is not a plausible date or duration: read as {UNIT_NAMES.get(unit, unit)} since "
        f"the Unix epoch, {example / TIME_UNITS[unit]:.6g} is the year {year_of(example)} "
        f"(numeric times stay within 2100 of the epoch){unit_hint(hours[bad], unit)}",
        field="time",
        rows=rows.tolist(),
    )
