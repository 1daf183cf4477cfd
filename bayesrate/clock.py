"""Wall-clock arithmetic: hour-of-week buckets in a time zone and exact interval overlaps.

Times are hours since the Unix epoch (UTC). A time zone maps them to local wall-clock
hours; bucket ``b = 24 * weekday + hour`` (Monday 00:00-01:00 local is bucket 0).

:func:`hour_of_week_overlap` returns, for each interval ``(start, end]``, how many hours of
it fall in each of the 168 buckets. It is exact: within a stretch of constant UTC offset
the local clock is a shift of UTC, whole weeks add one hour to every bucket, and the
remainder (< 1 week) is cut at each local hour boundary. Intervals that cross a daylight
saving transition are split there first.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from bayesrate.constants import EPOCH_HOUR_OF_WEEK, HOURS_PER_WEEK, N_HOUR_OF_WEEK
from bayesrate.errors import ObservationError

_NS_PER_HOUR = 3_600_000_000_000
# offsets are sampled on this grid to find transitions (covers :30 and :45 zones)
_TRANSITION_STEP_HOURS = 0.25


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
    if timezone in ("UTC", "utc", "Etc/UTC"):
        return np.zeros_like(hours)
    ns = np.round(hours * _NS_PER_HOUR).astype("int64")
    utc = pd.DatetimeIndex(pd.to_datetime(ns, unit="ns", utc=True))
    local = utc.tz_convert(timezone).tz_localize(None)
    return (local.asi8 - utc.tz_localize(None).asi8) / _NS_PER_HOUR


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
    if timezone in ("UTC", "utc", "Etc/UTC") or n == 0:
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
