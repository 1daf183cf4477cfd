"""The canonical observation table: one row per visit of a page.

Columns: ``page`` (id), ``domain`` (the grouping the hierarchy pools over; optional),
``time`` (tz-aware timestamps, or numbers in a declared unit), ``changed`` (0/1: whether
the content differed from the page's previous visit). The first visit of each page is its
baseline and carries no change flag (empty or 0).

:class:`Observations` stores the table in compact sorted arrays (hours since the Unix
epoch, one ``int8`` flag per visit, page offsets) so that tens of millions of visits fit
in memory, and computes the sufficient statistics every consumer shares once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesrate.clock import (
    NS_PER_HOUR,
    check_numeric_times,
    to_hours,
    to_timestamp,
    to_timestamps,
)
from bayesrate.constants import (
    CHANGED,
    DEFAULT_TIME_UNIT,
    DOMAIN,
    HOURS_PER_DAY,
    PAGE,
    TIME,
    TIME_UNITS,
)
from bayesrate.errors import ObservationError
from bayesrate.ragged import concat_ranges

if TYPE_CHECKING:
    from bayesrate.sufficient import HourOfWeekStats, IntervalStats

DEFAULT_DOMAIN = "(none)"


@dataclass(frozen=True, eq=False)
class Observations:
    """Validated visits of many pages, sorted by page then time.

    Build one with :meth:`from_frame`, :func:`bayesrate.io.read_observations`, the other
    loaders in :mod:`bayesrate.io`, or :func:`bayesrate.datasets.load`.

    Attributes
    ----------
    pages
        One row per page, indexed by page label, with column ``domain`` and any further
        page-level attributes (e.g. ``terms_type``).
    offsets
        ``int64`` array of length ``n_pages + 1``: visits of page ``i`` are
        ``time[offsets[i]:offsets[i + 1]]``.
    time
        Visit times in hours since the Unix epoch (numeric input: since ``origin``).
    changed
        ``int8`` change flags; 0 on each page's baseline (first) visit.
    time_kind
        ``"datetime"`` when built from timestamps, ``"numeric"`` otherwise.
    notes
        What the loader did that a user should know (rows excluded and why).
    source
        Where the data came from.
    """

    pages: pd.DataFrame
    offsets: np.ndarray
    time: np.ndarray
    changed: np.ndarray
    time_kind: str = "numeric"
    notes: tuple[str, ...] = ()
    source: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        time_unit: str = DEFAULT_TIME_UNIT,
        origin: pd.Timestamp | str | None = None,
        page_attributes: Iterable[str] = (),
        source: str = "",
        notes: Iterable[str] = (),
    ) -> Observations:
        """Validate a canonical table and build observations from it.

        Parameters
        ----------
        frame
            Columns ``page``, ``time``, ``changed`` and optionally ``domain``; rows in any
            page order, but each page's visits in increasing time.
        time_unit
            Unit of numeric times: one of :data:`bayesrate.constants.TIME_UNITS`.
        origin
            Timestamp that numeric time 0 stands for (default: the Unix epoch, UTC). It
            fixes the hour of week of numeric times.
        page_attributes
            Further columns that are constant per page and should be kept (e.g.
            ``terms_type``).
        source, notes
            Provenance carried along for reports.

        Raises
        ------
        ObservationError
            On empty input, missing columns, missing values, ``changed`` outside {0, 1},
            times out of order or duplicated within a page, mixed naive/aware or naive
            timestamps, unknown units, or page attributes that vary within a page.
        """
        return _build_from_frame(
            frame,
            time_unit=time_unit,
            origin=origin,
            page_attributes=tuple(page_attributes),
            source=source,
            notes=tuple(notes),
        )

    @classmethod
    def from_arrays(
        cls,
        page: np.ndarray,
        time: np.ndarray,
        changed: np.ndarray,
        domain: np.ndarray | None = None,
        *,
        time_kind: str = "numeric",
        source: str = "",
        notes: Iterable[str] = (),
    ) -> Observations:
        """Build from plain arrays (numeric hours since the epoch), validating them.

        A thin convenience over :meth:`from_frame` for simulators and tests.
        """
        data = {PAGE: page, TIME: time, CHANGED: changed}
        if domain is not None:
            data[DOMAIN] = domain
        obs = cls.from_frame(pd.DataFrame(data), time_unit="h", source=source, notes=notes)
        if time_kind != obs.time_kind:
            obs = obs.replace(time_kind=time_kind)
        return obs

    def replace(self, **changes: Any) -> Observations:
        """A copy with some fields replaced (cached statistics are not carried over)."""
        from dataclasses import replace

        return replace(self, **changes)

    # ------------------------------------------------------------------ basic properties
    @property
    def n_pages(self) -> int:
        return len(self.pages)

    @property
    def n_visits(self) -> int:
        return len(self.time)

    @property
    def n_intervals(self) -> int:
        return self.n_visits - self.n_pages

    @property
    def n_changes(self) -> int:
        return int(self.changed.sum(dtype=np.int64))

    @cached_property
    def visits_per_page(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def page_of_visit(self) -> np.ndarray:
        """Page position (0..n_pages-1) of every visit."""
        return np.repeat(np.arange(self.n_pages, dtype=np.int64), self.visits_per_page)

    @cached_property
    def changes_per_page(self) -> np.ndarray:
        return np.add.reduceat(self.changed.astype(np.int64), self.offsets[:-1]) * (
            self.visits_per_page > 0
        )

    @cached_property
    def domain_codes(self) -> np.ndarray:
        """Domain position of every page, into :attr:`domains`."""
        codes, _ = pd.factorize(self.pages[DOMAIN], sort=True)
        return codes.astype(np.int64)

    @cached_property
    def domains(self) -> pd.Index:
        return pd.Index(np.sort(self.pages[DOMAIN].unique()), name=DOMAIN)

    @cached_property
    def is_baseline(self) -> np.ndarray:
        flags = np.zeros(self.n_visits, dtype=bool)
        flags[self.offsets[:-1][self.visits_per_page > 0]] = True
        return flags

    @property
    def span_hours(self) -> float:
        return float(self.time.max() - self.time.min()) if self.n_visits else 0.0

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the page labels, domains, visit times and flags (stable across runs)."""
        digest = hashlib.sha256()
        digest.update(self.time_kind.encode())
        digest.update("\x1f".join(map(str, self.pages.index)).encode())
        digest.update("\x1f".join(map(str, self.pages[DOMAIN])).encode())
        digest.update(np.ascontiguousarray(self.offsets, dtype="<i8").tobytes())
        digest.update(np.ascontiguousarray(self.time, dtype="<f8").tobytes())
        digest.update(np.ascontiguousarray(self.changed, dtype="i1").tobytes())
        return digest.hexdigest()

    # ------------------------------------------------------------------ sufficient statistics
    @cached_property
    def interval_stats(self) -> IntervalStats:
        """Per page, changed/unchanged interval counts grouped by interval length."""
        from bayesrate.sufficient import interval_stats

        return interval_stats(self)

    def hour_of_week_stats(self, timezone: str = "UTC") -> HourOfWeekStats:
        """Per page x hour-of-week bucket exposure, exact, for modulated models.

        Cached per time zone.
        """
        cache = self.__dict__.setdefault("_hour_of_week_cache", {})
        if timezone not in cache:
            from bayesrate.sufficient import hour_of_week_stats

            cache[timezone] = hour_of_week_stats(self, timezone)
        return cache[timezone]

    # ------------------------------------------------------------------ views
    def subset(self, pages: np.ndarray | Iterable[int]) -> Observations:
        """Observations of the pages at the given positions (in that order)."""
        positions = np.asarray(list(pages) if not isinstance(pages, np.ndarray) else pages)
        positions = positions.astype(np.int64)
        starts = self.offsets[positions]
        counts = self.visits_per_page[positions]
        idx = concat_ranges(starts, counts)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return Observations(
            pages=self.pages.iloc[positions],
            offsets=offsets,
            time=self.time[idx],
            changed=self.changed[idx],
            time_kind=self.time_kind,
            notes=self.notes,
            source=self.source,
            meta=dict(self.meta),
        )

    def to_frame(self) -> pd.DataFrame:
        """The canonical table: ``page``, ``domain``, ``time``, ``changed`` (+ attributes).

        ``time`` is a UTC timestamp for datetime data, hours otherwise; ``changed`` is
        ``<NA>`` on baseline visits.
        """
        pos = self.page_of_visit
        frame = pd.DataFrame({PAGE: self.pages.index.to_numpy()[pos]})
        for col in self.pages.columns:
            frame[col] = self.pages[col].to_numpy()[pos]
        if self.time_kind == "datetime":
            frame[TIME] = to_timestamps(self.time)
        else:
            frame[TIME] = self.time
        flags = pd.array(self.changed, dtype="Int8")
        flags[self.is_baseline] = pd.NA
        frame[CHANGED] = flags
        return frame[[PAGE, DOMAIN, TIME, CHANGED, *[c for c in self.pages.columns if c != DOMAIN]]]

    def summary(self) -> dict[str, Any]:
        """Headline counts and the distribution of detected changes per page."""
        changes = self.changes_per_page
        intervals = np.maximum(self.visits_per_page - 1, 0)
        quantiles = [0.0, 0.25, 0.5, 0.75, 0.9, 1.0]
        out: dict[str, Any] = {
            "source": self.source,
            "pages": self.n_pages,
            "domains": len(self.domains),
            "visits": self.n_visits,
            "intervals": self.n_intervals,
            "changes": self.n_changes,
            "span_days": self.span_hours / HOURS_PER_DAY,
            "changes_per_page": {
                f"q{int(q * 100)}": float(np.quantile(changes, q)) for q in quantiles
            }
            | {"mean": float(changes.mean()) if len(changes) else 0.0},
            "pages_never_changed": int((changes == 0).sum()),
            "pages_changed_every_visit": int(((changes == intervals) & (intervals > 0)).sum()),
            "fingerprint": self.fingerprint,
            "notes": list(self.notes),
        }
        if self.time_kind == "datetime" and self.n_visits:
            out["first_visit"] = str(to_timestamp(float(self.time.min())))
            out["last_visit"] = str(to_timestamp(float(self.time.max())))
        return out

    def __repr__(self) -> str:
        return (
            f"Observations(pages={self.n_pages}, domains={len(self.domains)}, "
            f"visits={self.n_visits}, changes={self.n_changes}, source={self.source!r})"
        )


# ---------------------------------------------------------------------------------------
# helpers


def rows_where(mask: np.ndarray, order: np.ndarray | None = None) -> list[int]:
    """Input row positions where ``mask`` holds (``order`` maps sorted to input rows)."""
    hits = np.flatnonzero(mask)
    if order is not None:
        hits = np.sort(order[hits])
    return hits.tolist()


def times_to_hours(
    col: pd.Series, time_unit: str, origin: pd.Timestamp | str | None
) -> tuple[np.ndarray, str]:
    """A ``time`` column as float hours since the epoch, and its kind (``"datetime"`` or
    ``"numeric"``); validates kinds and units, naming the offending rows."""
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        return to_hours(col), "datetime"
    if pd.api.types.is_datetime64_dtype(col.dtype):
        raise ObservationError(
            "timestamps are timezone-naive; localize them (e.g. "
            "frame['time'] = frame['time'].dt.tz_localize('UTC')) or give numbers with a unit",
            field=TIME,
            rows=range(min(len(col), 10)),
        )
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        if time_unit not in TIME_UNITS:
            raise ObservationError(
                f"unknown time unit {time_unit!r}; use one of {sorted(TIME_UNITS)}",
                field=TIME,
            )
        hours = col.to_numpy(dtype=np.float64) * TIME_UNITS[time_unit]
        check_numeric_times(hours, time_unit)
        if origin is not None:
            origin_ts = pd.Timestamp(origin)
            if origin_ts.tzinfo is None:
                raise ObservationError("origin must be timezone-aware", field="origin")
            hours = hours + float(to_hours([origin_ts])[0])
        return hours, "numeric"
    # object / string column: per-element parsing so mixed kinds can be reported by row
    values = col.to_numpy(dtype=object)
    kinds = np.empty(len(values), dtype=object)
    parsed = np.full(len(values), np.nan)
    for i, value in enumerate(values):
        kind, hours = _parse_time_value(value)
        kinds[i] = kind
        parsed[i] = hours
    bad = kinds == "invalid"
    if bad.any():
        raise ObservationError(
            "time values are neither numbers nor timestamps", field=TIME, rows=rows_where(bad)
        )
    naive = kinds == "naive"
    aware = kinds == "aware"
    numeric = kinds == "number"
    if naive.any() and aware.any():
        raise ObservationError(
            "timezone-naive and timezone-aware timestamps are mixed; naive rows listed",
            field=TIME,
            rows=rows_where(naive),
        )
    if naive.any():
        raise ObservationError(
            "timestamps are timezone-naive; give an offset (e.g. '2024-01-01T00:00Z')",
            field=TIME,
            rows=rows_where(naive),
        )
    if numeric.any() and aware.any():
        raise ObservationError(
            "numbers and timestamps are mixed in the time column; numeric rows listed",
            field=TIME,
            rows=rows_where(numeric),
        )
    if numeric.all():
        return times_to_hours(pd.Series(parsed, index=col.index), time_unit, origin)
    return parsed, "datetime"


def _parse_time_value(value: object) -> tuple[str, float]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "missing", np.nan
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return "number", float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return "number", float(text)
        except ValueError:
            pass
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        return "invalid", np.nan
    if ts is pd.NaT:
        return "missing", np.nan
    if ts.tzinfo is None:
        return "naive", np.nan
    return "aware", float(ts.tz_convert("UTC").value) / NS_PER_HOUR


def _changed_flags(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return (flags as float with NaN for missing, mask of invalid values)."""
    if pd.api.types.is_bool_dtype(col.dtype):
        values = col.astype("float64").to_numpy(na_value=np.nan)
        return values, np.zeros(len(values), dtype=bool)
    numeric = pd.to_numeric(col, errors="coerce").astype("float64").to_numpy(na_value=np.nan)
    present = col.notna().to_numpy()
    invalid = present & ~np.isin(numeric, (0.0, 1.0))
    return numeric, invalid


def _build_from_frame(
    frame: pd.DataFrame,
    *,
    time_unit: str,
    origin: pd.Timestamp | str | None,
    page_attributes: tuple[str, ...],
    source: str,
    notes: tuple[str, ...],
) -> Observations:
    frame = _check_columns(frame, page_attributes)
    hours, time_kind = times_to_hours(frame[TIME], time_unit, origin)
    if not np.isfinite(hours).all():
        raise ObservationError(
            "non-finite time values", field=TIME, rows=rows_where(~np.isfinite(hours))
        )
    flags, invalid = _changed_flags(frame[CHANGED])
    if invalid.any():
        raise ObservationError(
            "'changed' must be 0 or 1 (or True/False)", field=CHANGED, rows=rows_where(invalid)
        )
    page_codes, page_labels = pd.factorize(frame[PAGE], sort=False)
    order = np.lexsort((np.arange(len(frame)), page_codes))  # stable: input order per page
    sorted_ = _Sorted(order, page_codes[order], page_labels)
    _check_sequences(sorted_, hours[order], flags[order])
    return Observations(
        pages=_page_table(frame, sorted_, page_attributes),
        offsets=sorted_.offsets,
        time=np.ascontiguousarray(hours[order], dtype=np.float64),
        changed=np.nan_to_num(flags[order], nan=0.0).astype(np.int8),
        time_kind=time_kind,
        notes=notes,
        source=source,
    )


def _check_columns(frame: pd.DataFrame, page_attributes: tuple[str, ...]) -> pd.DataFrame:
    """The frame (re-indexed) if it has every required column and no missing values."""
    if not isinstance(frame, pd.DataFrame):
        raise ObservationError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    if len(frame) == 0:
        raise ObservationError("no observations: the input is empty")
    missing = [c for c in (PAGE, TIME, CHANGED, *page_attributes) if c not in frame.columns]
    if missing:
        raise ObservationError(
            f"missing required column(s) {missing}; have {list(frame.columns)}",
            field=missing[0],
        )
    frame = frame.reset_index(drop=True)
    for col in (PAGE, *([DOMAIN] if DOMAIN in frame.columns else []), *page_attributes, TIME):
        null = frame[col].isna().to_numpy()
        if null.any():
            raise ObservationError(f"missing values in {col!r}", field=col, rows=rows_where(null))
    return frame


@dataclass(frozen=True)
class _Sorted:
    """Input rows sorted by page (stable), with the page of each sorted row."""

    order: np.ndarray
    codes: np.ndarray
    labels: pd.Index

    @cached_property
    def counts(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=len(self.labels))

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)

    def rows(self, mask: np.ndarray) -> list[int]:
        return rows_where(mask, self.order)

    def pages(self, mask: np.ndarray) -> list:
        return list(pd.unique(self.labels[self.codes[mask]]))


def _check_sequences(sorted_: _Sorted, hours: np.ndarray, flags: np.ndarray) -> None:
    """Each page's visits strictly increase in time; flags are set after the baseline only."""
    first = np.zeros(len(hours), dtype=bool)
    first[sorted_.offsets[:-1]] = True
    step = np.diff(hours, prepend=np.nan)
    step[first] = np.nan
    dup = step == 0
    if dup.any():
        raise ObservationError(
            "duplicate visits: the same page at the same time (zero-length interval)",
            field=TIME,
            rows=sorted_.rows(dup),
            pages=sorted_.pages(dup),
        )
    back = step < 0
    if back.any():
        raise ObservationError(
            "times out of order within a page (negative interval); sort each page's visits by time",
            field=TIME,
            rows=sorted_.rows(back),
            pages=sorted_.pages(back),
        )
    missing_flag = np.isnan(flags) & ~first
    if missing_flag.any():
        raise ObservationError(
            "missing 'changed' on a visit that is not its page's first (baseline) visit",
            field=CHANGED,
            rows=sorted_.rows(missing_flag),
        )
    baseline_changed = first & (flags == 1)
    if baseline_changed.any():
        raise ObservationError(
            "the first visit of a page is its baseline and carries no change flag "
            "(leave it empty or 0)",
            field=CHANGED,
            rows=sorted_.rows(baseline_changed),
            pages=list(sorted_.labels[sorted_.codes[baseline_changed]]),
        )


def _page_table(frame: pd.DataFrame, sorted_: _Sorted, page_attributes) -> pd.DataFrame:
    """One row per page: its domain and attributes, each constant within the page."""
    attrs = [DOMAIN, *[a for a in page_attributes if a != DOMAIN]]
    table = pd.DataFrame(index=pd.Index(sorted_.labels, name=PAGE))
    for col in attrs:
        if col not in frame.columns:  # domain is optional
            table[col] = DEFAULT_DOMAIN
            continue
        values = frame[col].to_numpy()[sorted_.order]
        per_page = values[sorted_.offsets[:-1]]
        varies = values != np.repeat(per_page, sorted_.counts)
        if varies.any():
            raise ObservationError(
                f"{col!r} must be constant within a page",
                field=col,
                rows=sorted_.rows(varies),
                pages=sorted_.pages(varies),
            )
        table[col] = per_page.astype(str) if col == DOMAIN else per_page
    return table


#: columns that hold identifiers: read as text exactly as written
ID_COLUMNS = (PAGE, DOMAIN)


def ids_as_strings(frame: pd.DataFrame, columns: Iterable[str] = ID_COLUMNS) -> pd.DataFrame:
    """``frame`` with its identifier columns as strings (missing cells stay missing).

    Identifiers are labels, not numbers: ``"007"`` and ``"7"`` are different pages, and
    ``"NA"``, ``"null"`` and ``"None"`` are ids like any other. Values that are not strings
    (e.g. integers from a Parquet file) become their text (``7`` → ``"7"``); ``None``/NaN
    stay missing, for the validation to report by row.
    """
    present = [c for c in columns if c in frame.columns]
    converted = {}
    for col in present:
        series = frame[col]
        if isinstance(series.dtype, pd.StringDtype) or (
            series.dtype == object
            and pd.api.types.infer_dtype(series, skipna=True) in ("string", "empty")
        ):
            continue
        missing = series.isna().to_numpy()
        values = series.to_numpy(dtype=object)
        converted[col] = np.array(
            [
                None if gone else (v.decode() if isinstance(v, bytes) else str(v))
                for v, gone in zip(values, missing, strict=True)
            ],
            dtype=object,
        )
    if not converted:
        return frame
    return frame.assign(**converted)


def concat(parts: Sequence[Observations], *, source: str = "") -> Observations:
    """Stack observations of disjoint page sets."""
    if not parts:
        raise ObservationError("nothing to concatenate")
    pages = pd.concat([p.pages for p in parts])
    if pages.index.duplicated().any():
        raise ObservationError(
            "the same page appears in more than one part",
            pages=pages.index[pages.index.duplicated()].tolist(),
        )
    counts = np.concatenate([p.visits_per_page for p in parts])
    kinds = {p.time_kind for p in parts}
    if len(kinds) > 1:
        raise ObservationError("cannot mix datetime and numeric observations", field=TIME)
    return Observations(
        pages=pages,
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        time=np.concatenate([p.time for p in parts]),
        changed=np.concatenate([p.changed for p in parts]),
        time_kind=kinds.pop(),
        notes=tuple(n for p in parts for n in p.notes),
        source=source or "+".join(p.source for p in parts),
    )
