"""Fetch times against the wall clock: plausible dates, clock skew, unit hints.

The durable scheduler (:mod:`bayesrate.scheduler.store`, ``bayesrate schedule``) works on real
dates in hours since the Unix epoch (UTC). A time far in the future blocks a URL until the
clock passes it (its next fetch would look like time going backwards), and a number in the
wrong unit (epoch seconds read as hours) is such a time. So the store accepts a fetch time
only if it is

- a plausible date: not before :data:`EARLIEST_PLAUSIBLE` (1990-01-01, before the web) and
  not after :data:`LATEST_PLAUSIBLE` (2100-01-01); and
- not later than *now* plus :data:`CLOCK_SKEW_HOURS` (one hour of clock skew between the
  crawler's machines and the scheduler's).

Errors name the rows, the unit the numbers were read in and, when one fits, the unit that
would make them plausible dates (:func:`bayesrate.clock.unit_hint`; the plausible range and
the hint live in :mod:`bayesrate.clock`, shared with the numeric times of every loader).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from bayesrate.clock import (
    EARLIEST_PLAUSIBLE,
    LATEST_PLAUSIBLE,
    UNIT_NAMES,
    plausible,
    unit_hint,
    year_of,
)
from bayesrate.constants import TIME_UNITS
from bayesrate.errors import ObservationError

__all__ = [
    "CLOCK_SKEW_HOURS",
    "EARLIEST_PLAUSIBLE",
    "LATEST_PLAUSIBLE",
    "check_fetch_times",
    "check_plausible",
    "now_hours",
    "plausible",
    "year_of",
]

#: fetch times may be this many hours later than the scheduler's clock (clock skew)
CLOCK_SKEW_HOURS = 1.0


def now_hours() -> float:
    """The current time in hours since the Unix epoch."""
    return time.time() / 3600.0


def check_plausible(
    hours: float | Sequence[float] | np.ndarray,
    *,
    field: str = "time",
    unit: str = "h",
    pages: Sequence[object] = (),
) -> np.ndarray:
    """Raise :class:`ObservationError` unless every time is a plausible date.

    Parameters
    ----------
    hours
        Times in hours since the epoch (after unit conversion).
    field
        The field named in the error.
    unit
        The unit the user's numbers were read in (named in the error, with a hint).
    pages
        Labels of the rows (URLs), for the error.
    """
    hours = np.atleast_1d(np.asarray(hours, dtype=np.float64))
    bad = np.flatnonzero(~np.isfinite(hours))
    if len(bad):
        raise ObservationError(
            f"{field} must be a finite number",
            field=field,
            rows=bad,
            pages=[pages[i] for i in bad] if len(pages) else (),
        )
    bad = np.flatnonzero(~plausible(hours))
    if len(bad):
        example = hours[bad[0]]
        raise ObservationError(
            f"{field} is not a plausible date: read as {UNIT_NAMES.get(unit, unit)} since the "
            f"Unix epoch, {example / TIME_UNITS[unit]:.6g} is the year {year_of(example)} "
            f"(accepted: 1990 to 2100){unit_hint(hours, unit)}",
            field=field,
            rows=bad,
            pages=[pages[i] for i in bad] if len(pages) else (),
        )
    return hours


def check_fetch_times(
    hours: Sequence[float] | np.ndarray,
    *,
    now: float | None = None,
    unit: str = "h",
    urls: Sequence[object] = (),
) -> float:
    """Check fetch times: plausible dates, none after ``now + CLOCK_SKEW_HOURS``.

    Returns the ``now`` used (the wall clock unless given). A given ``now`` may be earlier
    than the wall clock, not later than it plus the skew tolerance: a clock set in the
    future would let future fetch times in, which block their URLs (issue 54).
    """
    if now is None:
        now = now_hours()
    else:
        now = float(check_plausible(now, field="now")[0])
        wall = now_hours()
        if now > wall + CLOCK_SKEW_HOURS:
            raise ObservationError(
                f"now ({now:.3f} h, the year {year_of(now)}) is later than the wall clock "
                f"({wall:.3f} h) plus the {CLOCK_SKEW_HOURS:g} h clock-skew tolerance: the "
                "future-time check cannot be moved into the future",
                field="now",
            )
    hours = check_plausible(hours, unit=unit, pages=urls)
    future = np.flatnonzero(hours > now + CLOCK_SKEW_HOURS)
    if len(future):
        raise ObservationError(
            f"fetch times in the future: later than now ({now:.3f} h) plus the "
            f"{CLOCK_SKEW_HOURS:g} h clock-skew tolerance (read as {UNIT_NAMES.get(unit, unit)}"
            " since the Unix epoch); a future time would block these URLs until the clock "
            "passes it",
            field="time",
            rows=future,
            pages=[urls[i] for i in future] if len(urls) else (),
        )
    return now
