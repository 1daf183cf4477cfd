"""Exact change histories: the ground truth a crawl log never gives.

A change history lists, per page, when it was **created**, every time its content
**changed**, and when it was **deleted** — exact times, not detections. The table has one
row per event: ``page``, optional ``domain``, ``time`` (tz-aware timestamps, or numbers in a
declared unit) and ``event`` in {``created``, ``changed``, ``deleted``}; a table with only
``page`` and ``time`` means every row is a change.

:class:`ChangeHistory` holds it in compact arrays (hours since the Unix epoch): each page's
change times and its **lifetimes** (spans in which it exists). :func:`crawl` censors it
with a visit schedule (:class:`FixedInterval` with a random phase per page,
:class:`PoissonVisits`, or an explicit :class:`VisitGrid`) and returns the
:class:`~bayesrate.observations.Observations` a crawler would have logged plus the exact
number of changes in every interval — the bridge every evaluation against real histories
uses (``docs/histories.md``).

Validation (:meth:`ChangeHistory.from_frame`) names bad rows and pages
(:class:`~bayesrate.errors.ObservationError`) and drops nothing silently. Events of one page
at the **same instant** (e.g. commits that landed together in a rebase merge) are resolved
by their net effect, independent of their order in the file, and every merge is counted in
``notes``:

- before the instant the page does not exist: the group must create it; the page exists
  afterwards unless the group deletes it as often as it creates it (a zero-length lifetime,
  ignored and noted); changes in the group are merged into the creation (invisible);
- the page exists: the group may delete it (changes merged into the deletion), delete and
  re-create it (one change), or change it (one change, however many rows).

Anything else (a change or deletion of a page that does not exist, a creation of one that
does) is an error naming the rows. A page whose first event is not a creation existed before
the record starts: it is alive from the history's ``start``. A page **re-created** after a
deletion counts as *changed* at its re-creation (a crawler that kept its URL sees new
content); while deleted it is not visited and not scored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.clock import to_hours, to_timestamp
from bayesrate.constants import DEFAULT_TIME_UNIT, DOMAIN, HOURS_PER_DAY, PAGE, TIME
from bayesrate.errors import ObservationError, format_items
from bayesrate.observations import (
    DEFAULT_DOMAIN,
    Observations,
    ids_as_strings,
    rows_where,
    times_to_hours,
)
from bayesrate.ragged import concat_ranges
from bayesrate.seeds import rng_from

EVENT = "event"
CREATED, CHANGED, DELETED = "created", "changed", "deleted"
EVENTS = (CREATED, CHANGED, DELETED)
#: optional column of an event table: when the record ends, the same time on every row
#: (``bayesrate data from-git --end``); default the last event
RECORD_END = "record_end"
#: ISO 8601 timestamps with an explicit offset (``Z``, ``+HH:MM``, ``+HHMM``, ``+HH``)
_AWARE_ISO = re.compile(r"^\s*\d{4}-\d{2}-\d{2}[T ][0-9:.]+(Z|[+-]\d{2}(:?\d{2})?)\s*$")
#: visit phases are rounded to 1/PHASE_TICKS hours so that grid intervals are exact
PHASE_TICKS = 4096.0
#: most visits one crawl may make (about 40 bytes each in memory, with the exact counts):
#: a schedule asking for more is refused before any array is allocated
MAX_CRAWL_VISITS = 200_000_000
#: note attached to histories derived from crawl logs (detections as change times)
APPROXIMATE_NOTE = (
    "approximate history: change times are the crawl log's detection times (each change "
    "placed at the visit that saw it, several changes in one visit interval count once); "
    "valid only for crawl intervals much longer than the log's own visit grid"
)


# --------------------------------------------------------------------------- the type
@dataclass(frozen=True, eq=False)
class ChangeHistory:
    """Exact change times and lifetimes of many pages (hours since the Unix epoch).

    Build one with :meth:`from_frame`, :func:`bayesrate.io.history.read_history`,
    :func:`from_observations` or :func:`bayesrate.datasets.load_history`.

    Attributes
    ----------
    pages
        One row per page (index: page id, a string), column ``domain``.
    offsets
        ``int64``, length ``n_pages + 1``: changes of page ``i`` are
        ``times[offsets[i]:offsets[i + 1]]`` (sorted, distinct).
    times
        Change times (re-creations after a deletion included).
    life_offsets, life_start, life_end
        Lifetimes of page ``i``: ``life_start[j], life_end[j]`` for ``j`` in
        ``life_offsets[i]:life_offsets[i + 1]`` (sorted, disjoint); the page exists in
        ``[start, end)``. A page alive when the record ends has ``life_end = end``.
    start, end
        The span the history covers (default: first and last event).
    notes, source
        What the loader did (merges, assumptions) and where the data came from.
    """

    pages: pd.DataFrame
    offsets: np.ndarray
    times: np.ndarray
    life_offsets: np.ndarray
    life_start: np.ndarray
    life_end: np.ndarray
    start: float
    end: float
    notes: tuple[str, ...] = ()
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        time_unit: str = DEFAULT_TIME_UNIT,
        end: pd.Timestamp | str | float | None = None,
        source: str = "",
        notes: Iterable[str] = (),
    ) -> ChangeHistory:
        """Validate an event table and build the history.

        Parameters
        ----------
        frame
            Columns ``page``, ``time``, optionally ``domain``, ``event`` and
            :data:`RECORD_END`; rows in any order.
        time_unit
            Unit of numeric times (hours since the epoch by default).
        end
            When the record ends (default: the table's :data:`RECORD_END`, else the last
            event). Pages still alive are alive until then.
        source, notes
            Provenance carried along.

        Raises
        ------
        ObservationError
            Empty input, missing columns or values, unknown events, times that are not
            tz-aware timestamps (or numbers), a domain that varies within a page, an
            impossible event sequence, or an ``end`` before the last event.
        """
        return _build(frame, time_unit=time_unit, end=end, source=source, notes=tuple(notes))

    # ------------------------------------------------------------------ properties
    @property
    def n_pages(self) -> int:
        return len(self.pages)

    @property
    def n_changes(self) -> int:
        return len(self.times)

    @cached_property
    def changes_per_page(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def change_page(self) -> np.ndarray:
        """Page position of every change."""
        return np.repeat(np.arange(self.n_pages, dtype=np.int64), self.changes_per_page)

    @cached_property
    def life_page(self) -> np.ndarray:
        """Page position of every lifetime."""
        return np.repeat(np.arange(self.n_pages, dtype=np.int64), np.diff(self.life_offsets))

    @cached_property
    def domain_codes(self) -> np.ndarray:
        codes, _ = pd.factorize(self.pages[DOMAIN], sort=True)
        return codes.astype(np.int64)

    def lifetime_at(self, t: float) -> np.ndarray:
        """Per page, the position of the lifetime containing ``t`` (``-1``: not alive)."""
        alive = (self.life_start <= t) & (t < self.life_end)
        out = np.full(self.n_pages, -1, dtype=np.int64)
        out[self.life_page[alive]] = np.flatnonzero(alive)
        return out

    def alive_at(self, t: float) -> np.ndarray:
        """Boolean mask of the pages that exist at ``t``."""
        return self.lifetime_at(t) >= 0

    def count_changes(self, pages: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Exact number of changes of each given page in ``(lo, hi]``."""
        pages = np.asarray(pages, dtype=np.int64)
        below_hi = segment_searchsorted(self.times, self.offsets, pages, hi, side="right")
        below_lo = segment_searchsorted(self.times, self.offsets, pages, lo, side="right")
        return below_hi - below_lo

    def subset(self, positions: np.ndarray | Iterable[int]) -> ChangeHistory:
        """The history of the pages at the given positions (in that order)."""
        pos = np.asarray(list(positions) if not isinstance(positions, np.ndarray) else positions)
        pos = pos.astype(np.int64)
        counts = self.changes_per_page[pos]
        lives = np.diff(self.life_offsets)[pos]
        return ChangeHistory(
            pages=self.pages.iloc[pos],
            offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            times=self.times[concat_ranges(self.offsets[pos], counts)],
            life_offsets=np.concatenate([[0], np.cumsum(lives)]).astype(np.int64),
            life_start=self.life_start[concat_ranges(self.life_offsets[pos], lives)],
            life_end=self.life_end[concat_ranges(self.life_offsets[pos], lives)],
            start=self.start,
            end=self.end,
            notes=self.notes,
            source=self.source,
            meta=dict(self.meta),
        )

    def summary(self) -> dict[str, Any]:
        """Headline counts: pages, changes, lifetimes, span and changes per page."""
        per_page = self.changes_per_page
        quantiles = (0.5, 0.9, 0.99, 1.0)
        return {
            "source": self.source,
            "kind": "change history",
            "pages": self.n_pages,
            "domains": int(self.pages[DOMAIN].nunique()),
            "changes": self.n_changes,
            "lifetimes": len(self.life_start),
            "alive_at_end": int(self.alive_at(self.end - 1e-9).sum()),
            "start": str(to_timestamp(self.start)),
            "end": str(to_timestamp(self.end)),
            "span_days": (self.end - self.start) / HOURS_PER_DAY,
            "changes_per_page": {
                f"q{int(q * 100)}": float(np.quantile(per_page, q)) for q in quantiles
            }
            | {"mean": float(per_page.mean()) if self.n_pages else 0.0},
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        return (
            f"ChangeHistory(pages={self.n_pages}, changes={self.n_changes}, "
            f"lifetimes={len(self.life_start)}, source={self.source!r})"
        )


# --------------------------------------------------------------------------- validation
def _missing(col: pd.Series) -> np.ndarray:
    """Missing cells: NA or empty/blank text."""
    values = col.astype(object).to_numpy()
    missing = pd.isna(values)
    text = np.array([isinstance(v, str) for v in values])
    if text.any():
        stripped = np.char.strip(values[text].astype(str))
        missing[text] = stripped == ""
    return missing


def _event_times(col: pd.Series, time_unit: str) -> np.ndarray:
    """Hours since the epoch; ISO strings with offsets are parsed in one vectorised pass."""
    if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
        text = col.astype(str)
        if text.str.match(_AWARE_ISO).all():
            parsed = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
            if not parsed.isna().any():
                return to_hours(parsed)
    return times_to_hours(col, time_unit, None)[0]


def hours_of(value: pd.Timestamp | str | float, field: str = TIME) -> float:
    """Hours since the epoch of a tz-aware timestamp (or a number of hours)."""
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        raise ObservationError(f"cannot read {field} {value!r} as a time", field=field) from exc
    if ts.tzinfo is None:
        raise ObservationError(
            f"{field} {value!r} has no time zone; give one (e.g. '2026-01-01T00:00Z')",
            field=field,
        )
    return float(to_hours(pd.DatetimeIndex([ts]))[0])


def _end_hours(end: pd.Timestamp | str | float | None) -> float | None:
    return None if end is None else hours_of(end, "end")


def _build(
    frame: pd.DataFrame,
    *,
    time_unit: str,
    end: pd.Timestamp | str | float | None,
    source: str,
    notes: tuple[str, ...],
) -> ChangeHistory:
    frame, hours = _checked_frame(frame, time_unit)
    end = _record_end(frame, end, time_unit)
    pages_text = frame[PAGE].to_numpy(dtype=object)
    kind, kind_notes = _event_kinds(frame)
    notes_out = [*notes, *kind_notes]

    page_codes, page_labels = pd.factorize(pages_text, sort=True)
    order = np.lexsort((np.arange(len(frame)), hours, page_codes))
    code_s, hours_s, kind_s = page_codes[order], hours[order], kind[order]

    domain = _page_domains(frame, order, code_s, page_labels)

    history_start = float(hours.min())
    history_end = float(hours.max())
    given_end = _end_hours(end)
    if given_end is not None:
        if given_end < history_end:
            late = hours > given_end
            raise ObservationError(
                "events after the given end of the record", field=TIME, rows=rows_where(late)
            )
        history_end = given_end

    resolved = _resolve_instants(code_s, hours_s, kind_s, order, page_labels)
    notes_out += resolved.notes
    n_pages = len(page_labels)
    life_page = resolved.life_page
    life_end = np.where(np.isnan(resolved.life_end), history_end, resolved.life_end)
    life_start = np.where(np.isnan(resolved.life_start), history_start, resolved.life_start)
    lives = np.bincount(life_page, minlength=n_pages)
    no_life = np.flatnonzero(lives == 0)
    if len(no_life):
        notes_out.append(
            f"{len(no_life)} page(s) only ever had zero-length lifetimes and are left out: "
            f"{format_items([page_labels[i] for i in no_life])}"
        )
    keep = lives > 0
    new_pos = np.cumsum(keep) - 1
    change_keep = keep[resolved.change_page]
    pages = pd.DataFrame({DOMAIN: domain[keep]}, index=pd.Index(page_labels[keep], name=PAGE))
    change_counts = np.bincount(
        new_pos[resolved.change_page[change_keep]], minlength=int(keep.sum())
    )
    return ChangeHistory(
        pages=pages,
        offsets=np.concatenate([[0], np.cumsum(change_counts)]).astype(np.int64),
        times=np.ascontiguousarray(resolved.change_time[change_keep], dtype=np.float64),
        life_offsets=np.concatenate([[0], np.cumsum(lives[keep])]).astype(np.int64),
        life_start=life_start,
        life_end=life_end,
        start=history_start,
        end=history_end,
        notes=tuple(notes_out),
        source=source,
    )


def _record_end(
    frame: pd.DataFrame, end: pd.Timestamp | str | float | None, time_unit: str
) -> pd.Timestamp | str | float | None:
    """The record's end: ``end`` if given, else the table's :data:`RECORD_END` column (one
    time on every row), else ``None`` (the last event)."""
    if RECORD_END not in frame.columns or end is not None:
        return end
    column = frame[RECORD_END]
    null = _missing(column)
    if null.any():
        raise ObservationError(
            f"missing values in {RECORD_END!r}", field=RECORD_END, rows=rows_where(null)
        )
    try:
        hours = _event_times(column, time_unit)
    except ObservationError as exc:
        raise ObservationError(
            f"{RECORD_END!r} values are not times (timestamps with a zone, or numbers)",
            field=RECORD_END,
            rows=exc.rows,
        ) from exc
    differ = hours != hours[0]
    if differ.any() or not np.isfinite(hours[0]):
        raise ObservationError(
            f"{RECORD_END!r} must be one time, the same on every row",
            field=RECORD_END,
            rows=rows_where(differ),
        )
    return float(hours[0])


def _checked_frame(frame: pd.DataFrame, time_unit: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The event table with its required columns present, complete and ids as text; hours."""
    if not isinstance(frame, pd.DataFrame):
        raise ObservationError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    if len(frame) == 0:
        raise ObservationError("no events: the change history is empty")
    missing_cols = [c for c in (PAGE, TIME) if c not in frame.columns]
    if missing_cols:
        raise ObservationError(
            f"missing required column(s) {missing_cols}; have {list(frame.columns)}",
            field=missing_cols[0],
        )
    frame = frame.reset_index(drop=True)
    for col in (PAGE, TIME, *(c for c in (DOMAIN, EVENT) if c in frame.columns)):
        null = _missing(frame[col])
        if null.any():
            raise ObservationError(f"missing values in {col!r}", field=col, rows=rows_where(null))
    frame = ids_as_strings(frame, (PAGE, DOMAIN, EVENT))
    hours = _event_times(frame[TIME], time_unit)
    if not np.isfinite(hours).all():
        raise ObservationError(
            "non-finite time values", field=TIME, rows=rows_where(~np.isfinite(hours))
        )
    return frame, hours


def _event_kinds(frame: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Per row 0 (created), 1 (changed) or 2 (deleted), and a note when there is no event
    column (every row is a change)."""
    if EVENT not in frame.columns:
        return np.ones(len(frame), dtype=np.int8), ["no 'event' column: every row is a change"]
    events = frame[EVENT].astype(str).str.strip().str.lower().to_numpy()
    unknown = ~np.isin(events, EVENTS)
    if unknown.any():
        raise ObservationError(
            f"unknown event kinds (expected one of {EVENTS})", field=EVENT, rows=rows_where(unknown)
        )
    kind = np.select([events == CREATED, events == DELETED], [0, 2], 1).astype(np.int8)
    return kind, []


def _page_domains(
    frame: pd.DataFrame, order: np.ndarray, code_s: np.ndarray, labels: np.ndarray
) -> np.ndarray:
    n_pages = len(labels)
    if DOMAIN not in frame.columns:
        return np.full(n_pages, DEFAULT_DOMAIN, dtype=object)
    values = frame[DOMAIN].to_numpy(dtype=object)[order]
    first = np.searchsorted(code_s, np.arange(n_pages))
    per_page = values[first]
    varies = values != per_page[code_s]
    if varies.any():
        raise ObservationError(
            "'domain' must be constant within a page",
            field=DOMAIN,
            rows=rows_where(varies, order),
            pages=list(pd.unique(labels[code_s[varies]])),
        )
    return per_page


@dataclass
class _Resolved:
    change_page: np.ndarray
    change_time: np.ndarray
    life_page: np.ndarray
    life_start: np.ndarray  # NaN: alive before the record starts
    life_end: np.ndarray  # NaN: alive when the record ends
    notes: list[str]


def _resolve_instants(
    code: np.ndarray, hours: np.ndarray, kind: np.ndarray, order: np.ndarray, labels: np.ndarray
) -> _Resolved:
    """Resolve each page's events, grouped by instant, into changes and lifetimes."""
    new_group = np.r_[True, (code[1:] != code[:-1]) | (hours[1:] != hours[:-1])]
    group = np.cumsum(new_group) - 1
    g_code = code[new_group]
    g_time = hours[new_group]
    n_groups = len(g_code)
    n_created = np.bincount(group, weights=kind == 0, minlength=n_groups).astype(np.int64)
    n_changed = np.bincount(group, weights=kind == 1, minlength=n_groups).astype(np.int64)
    n_deleted = np.bincount(group, weights=kind == 2, minlength=n_groups).astype(np.int64)
    delta = n_created - n_deleted

    first_of_page = np.r_[True, g_code[1:] != g_code[:-1]]
    # a page whose first instant creates it did not exist before; otherwise it did
    initial = np.where(first_of_page & (n_created > 0), 0, 1)
    page_start_group = np.maximum.accumulate(np.where(first_of_page, np.arange(n_groups), 0))
    cum = np.cumsum(delta)
    before_page = np.where(page_start_group > 0, cum[page_start_group - 1], 0)
    after = initial[page_start_group] + cum - before_page
    before = after - delta
    bad = (
        ((before == 0) & ((n_created == 0) | (delta < 0) | (delta > 1)))
        | ((before == 1) & ((delta > 0) | (delta < -1)))
        | ~np.isin(before, (0, 1))
    )
    if bad.any():
        rows = rows_where(bad[group], order)
        raise ObservationError(
            "impossible event sequence: a page changed or deleted while it does not exist, "
            "or created while it exists (events at one instant are taken together)",
            field="event",
            rows=rows,
            pages=list(pd.unique(labels[g_code[bad]])),
        )
    born = (before == 0) & (after == 1)
    dies = (before == 1) & (after == 0)
    instant = (before == 0) & (after == 0)  # created and deleted at one instant
    change = (before == 1) & (after == 1)
    page_open = initial[page_start_group] == 1
    open_start = first_of_page & page_open

    # lifetimes start at births (or before the record, for pages that existed already) and
    # end at deaths (or with the record); each death closes its page's latest start
    starts = np.flatnonzero(born | open_start)
    life_page = g_code[starts]
    life_start = np.where(open_start[starts], np.nan, g_time[starts])
    life_end = np.full(len(starts), np.nan)
    ends = np.flatnonzero(dies)
    life_end[np.searchsorted(starts, ends, side="right") - 1] = g_time[ends]
    # a birth after an earlier lifetime of the same page is a re-creation: a change
    recreated = np.r_[False, life_page[1:] == life_page[:-1]]
    change_group = np.sort(np.concatenate([np.flatnonzero(change), starts[recreated]]))

    notes = _resolution_notes(
        n_created, n_changed, change, instant, recreated, open_start, labels[g_code]
    )
    return _Resolved(
        change_page=g_code[change_group].astype(np.int64),
        change_time=g_time[change_group],
        life_page=life_page.astype(np.int64),
        life_start=life_start,
        life_end=life_end,
        notes=notes,
    )


def _resolution_notes(
    n_created: np.ndarray,
    n_changed: np.ndarray,
    change: np.ndarray,
    instant: np.ndarray,
    recreated: np.ndarray,
    open_start: np.ndarray,
    group_labels: np.ndarray,
) -> list[str]:
    """What resolving the events merged or assumed, one sentence each (per-instant arrays)."""
    notes = []
    extra = n_changed[change] - (n_created[change] == 0)
    merged_into_change = int(extra.clip(min=0).sum())
    merged_into_other = int(n_changed[~change].sum())
    if merged_into_change:
        notes.append(
            f"merged {merged_into_change} change event(s) into another change of the same page "
            f"at the same instant (e.g. commits landed together): a page cannot visibly "
            f"change twice at one instant"
        )
    if merged_into_other:
        notes.append(
            f"merged {merged_into_other} change event(s) into a creation or deletion of the "
            f"same page at the same instant"
        )
    same_instant = int((change & (n_created > 0)).sum())
    if same_instant:
        notes.append(
            f"{same_instant} deletion(s) and re-creation(s) of a page at one instant count "
            f"as one change each"
        )
    if recreated.any():
        notes.append(
            f"{int(recreated.sum())} re-creation(s) of a deleted page count as a change at "
            f"the re-creation; the page is not visited or scored while deleted"
        )
    if instant.any():
        notes.append(
            f"ignored {int(instant.sum())} zero-length lifetime(s) (created and deleted at one "
            f"instant) of page(s) {format_items(list(pd.unique(group_labels[instant])))}"
        )
    n_open = int(open_start.sum())
    if n_open:
        notes.append(
            f"{n_open} page(s) have no 'created' event before their first event: alive "
            f"from the history's start"
        )
    return notes


def from_observations(obs: Observations, *, end: float | None = None) -> ChangeHistory:
    """An **approximate** history from a crawl log: detections as change times.

    Each page exists from its first visit to its last (or to ``end`` if given and the page
    was visited at the log's last visit time); each detected change is placed at the
    visit that detected it. Valid only for crawl intervals much longer than the log's own
    visit grid (the note says so).
    """
    if obs.time_kind != "datetime":
        raise ObservationError(
            "an approximate history needs a crawl log with timestamps", field=TIME
        )
    counts = obs.visits_per_page
    if (counts == 0).any():
        raise ObservationError("pages without visits", pages=list(obs.pages.index[counts == 0]))
    first = obs.time[obs.offsets[:-1]]
    last = obs.time[obs.offsets[1:] - 1]
    log_end = float(obs.time.max())
    record_end = log_end if end is None else float(end)
    # a page visited at the log's last run is still alive; others stopped being tracked
    life_end = np.where(last >= log_end, record_end, last)
    life_end = np.where(life_end > first, life_end, np.nextafter(first, np.inf))
    changed = obs.changed.astype(bool)
    times = obs.time[changed]
    page = obs.page_of_visit[changed]
    change_counts = np.bincount(page, minlength=obs.n_pages)
    return ChangeHistory(
        pages=obs.pages[[DOMAIN]].copy(),
        offsets=np.concatenate([[0], np.cumsum(change_counts)]).astype(np.int64),
        times=np.ascontiguousarray(times, dtype=np.float64),
        life_offsets=np.arange(obs.n_pages + 1, dtype=np.int64),
        life_start=first.astype(np.float64),
        life_end=life_end.astype(np.float64),
        start=float(obs.time.min()),
        end=record_end,
        notes=(APPROXIMATE_NOTE, *obs.notes),
        source=f"{obs.source} (approximate history)",
        meta={"approximate": True},
    )


# --------------------------------------------------------------------------- searching
#: up to this many queries :func:`segment_searchsorted` searches each segment on its own
FEW_QUERIES = 16


def segment_searchsorted(
    values: np.ndarray,
    offsets: np.ndarray,
    segment: np.ndarray,
    queries: np.ndarray | float,
    *,
    side: str = "left",
) -> np.ndarray:
    """``np.searchsorted`` within CSR segments, vectorised over queries.

    For each query ``q`` in segment ``s`` returns the global index, in
    ``offsets[s]..offsets[s + 1]``, where ``q`` would be inserted into the sorted
    ``values[offsets[s]:offsets[s + 1]]`` (``side`` as in :func:`numpy.searchsorted`).
    A binary search of ``ceil(log2(longest segment + 1))`` whole-array steps: exact, no
    per-segment loop.
    """
    if side not in ("left", "right"):
        raise ValueError("side must be 'left' or 'right'")
    segment = np.asarray(segment, dtype=np.int64)
    queries = np.broadcast_to(np.asarray(queries, dtype=np.float64), segment.shape)
    if segment.ndim == 1 and len(segment) <= FEW_QUERIES and not np.isnan(queries).any():
        # a few queries (a replay's fetches of one tick): one searchsorted each is ~10x
        # cheaper than the whole-array steps
        out = np.empty(len(segment), dtype=np.int64)
        for i, (s, q) in enumerate(zip(segment.tolist(), queries.tolist(), strict=True)):
            start, stop = int(offsets[s]), int(offsets[s + 1])
            out[i] = start + int(np.searchsorted(values[start:stop], q, side=side))
        return out
    lo = offsets[segment].astype(np.int64)
    hi = offsets[segment + 1].astype(np.int64)
    longest = int((hi - lo).max(initial=0))
    top = max(len(values) - 1, 0)
    for _ in range(int(np.ceil(np.log2(longest + 1))) if longest else 0):
        mid = (lo + hi) // 2
        v = values[np.minimum(mid, top)] if len(values) else np.zeros(len(mid))
        go_right = (v < queries) if side == "left" else (v <= queries)
        active = lo < hi
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)
    return lo


# --------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class FixedInterval:
    """Visit every ``every_hours``; each page gets its own phase.

    ``phase="random"`` draws a phase per page uniformly in ``[0, every_hours)`` (hours
    after the epoch, modulo the period) on a grid of ``phase_step_hours`` (default
    ``1/4096`` h, 0.9 s: visit times are then exact binary numbers, so a page's intervals
    are all exactly ``every_hours`` long); a number fixes one phase for every page.
    ``phase_step_hours=1`` gives each page a whole-hour phase (a daily crawl at a
    page-specific hour): every interval then has one of ``every_hours`` hour-of-week
    overlap patterns per weekday, which keeps the modulated model's exact likelihood small.
    """

    every_hours: float
    phase: str | float = "random"
    phase_step_hours: float = 1.0 / PHASE_TICKS

    def __post_init__(self) -> None:
        if not (np.isfinite(self.every_hours) and self.every_hours > 0):
            raise ObservationError(
                f"crawl interval must be > 0 hours, got {self.every_hours!r}", field="every_hours"
            )
        if self.phase != "random" and not np.isfinite(float(self.phase)):
            raise ObservationError("phase must be 'random' or a number", field="phase")
        step = self.phase_step_hours
        if not (np.isfinite(step) and 0 < step <= self.every_hours):
            raise ObservationError(
                "phase_step_hours must be in (0, every_hours]", field="phase_step_hours"
            )

    def describe(self) -> str:
        phase = (
            f"random phase per page, on a {self.phase_step_hours:g} h grid"
            if self.phase == "random"
            else f"phase {self.phase} h"
        )
        return f"every {self.every_hours:g} h ({phase})"


@dataclass(frozen=True)
class PoissonVisits:
    """Visits at the arrivals of a Poisson process of ``rate_per_hour`` per page."""

    rate_per_hour: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate_per_hour) and self.rate_per_hour > 0):
            raise ObservationError("visit rate must be > 0 per hour", field="rate_per_hour")

    def describe(self) -> str:
        return f"Poisson visits, {self.rate_per_hour * HOURS_PER_DAY:g} per day"


@dataclass(frozen=True)
class VisitGrid:
    """The same explicit visit times (hours since the epoch) for every page."""

    times: tuple[float, ...]

    def __post_init__(self) -> None:
        t = np.asarray(self.times, dtype=np.float64)
        if t.ndim != 1 or len(t) == 0 or not np.isfinite(t).all() or (np.diff(t) <= 0).any():
            raise ObservationError("a visit grid needs increasing finite times", field="times")

    def describe(self) -> str:
        return f"explicit grid of {len(self.times)} visit times"


Schedule = FixedInterval | PoissonVisits | VisitGrid


@dataclass(frozen=True, eq=False)
class Crawl:
    """A history censored by a visit schedule.

    Attributes
    ----------
    observations
        What the crawler logged: pages with at least one visit, in history order.
    true_changes
        Per visit, the exact number of changes in ``(previous visit, this visit]`` of the
        same page (``0`` on each page's baseline visit); ``changed = true_changes > 0``.
    history_page
        Position in the history of each observed page.
    """

    observations: Observations
    true_changes: np.ndarray
    history_page: np.ndarray


def _stamp(hours: float) -> str:
    """A time in hours since the epoch as an ISO timestamp, for messages."""
    return str(to_timestamp(hours)) if np.isfinite(hours) else str(hours)


def _check_visit_count(visits: float, schedule: Schedule) -> None:
    """Raise if a crawl would make more than :data:`MAX_CRAWL_VISITS` visits (``visits``:
    their number, or its expectation for random visits)."""
    if visits > MAX_CRAWL_VISITS:
        raise ObservationError(
            f"the crawl {schedule.describe()} would make {visits:.3g} visits (at most "
            f"{MAX_CRAWL_VISITS:,}, ~{MAX_CRAWL_VISITS * 40 / 2**30:.0f} GiB): visit less often "
            "(a longer crawl interval) or crawl fewer pages or a shorter window",
            field="schedule",
        )


def crawl(
    history: ChangeHistory,
    schedule: Schedule,
    seed: int | str = "bayesrate-crawl",
    *,
    start: float | None = None,
    end: float | None = None,
) -> Crawl:
    """Censor a history with a visit schedule; the exact count per interval comes along.

    Parameters
    ----------
    history
        The change history.
    schedule
        :class:`FixedInterval`, :class:`PoissonVisits` or :class:`VisitGrid`.
    seed
        Seed of the random phases / visit times (int or string).
    start, end
        Crawl only in ``[start, end)`` (hours since the epoch; default the history's span).

    Notes
    -----
    A page is visited only while it exists (``[life_start, life_end)``); its first visit
    is its baseline. An interval that spans a deletion and re-creation contains the
    re-creation, which counts as a change. Pages never visited are left out (counted in
    ``notes``).
    """
    rng = rng_from(seed)
    lo = history.start if start is None else float(start)
    hi = history.end if end is None else float(end)
    if not hi > lo:
        raise ObservationError(
            f"crawl window is empty ({_stamp(lo)} .. {_stamp(hi)}; the history spans "
            f"{_stamp(history.start)} .. {_stamp(history.end)})",
            field="end",
        )
    a = np.maximum(history.life_start, lo)
    b = np.minimum(history.life_end, hi)
    life_page = history.life_page
    if isinstance(schedule, FixedInterval):
        step = float(schedule.every_hours)
        if schedule.phase == "random":
            grid = schedule.phase_step_hours
            slots = max(int(np.floor(step / grid)), 1)
            phase = (rng.integers(0, slots, history.n_pages) * grid)[life_page]
        else:
            phase = np.full(len(a), float(schedule.phase) % step)
        k0 = np.ceil((a - phase) / step)
        k1 = np.ceil((b - phase) / step) - 1
        counts = np.maximum(k1 - k0 + 1, 0)
        _check_visit_count(float(counts.sum()), schedule)
        counts = counts.astype(np.int64)
        # visit j of the crawl is first[l] + (j - block[l])·step for its lifetime l: one repeat
        # and one arange (all terms are exact binary numbers, so the times are exact)
        block = np.cumsum(counts) - counts
        times = np.repeat(phase + (k0 - block) * step, counts)
        times += np.arange(int(counts.sum()), dtype=np.float64) * step
    elif isinstance(schedule, PoissonVisits):
        span = np.maximum(b - a, 0.0)
        _check_visit_count(float(schedule.rate_per_hour * span.sum()), schedule)
        counts = rng.poisson(schedule.rate_per_hour * span).astype(np.int64)
        owner = np.repeat(np.arange(len(a)), counts)
        # uniform positions sorted within each lifetime: one sort of ``lifetime + position/2``
        # (the halving keeps every key below the next lifetime's, whatever the rounding)
        position = 2.0 * (np.sort(owner + 0.5 * rng.random(len(owner))) - owner)
        times = a[owner] + position * span[owner]
    elif isinstance(schedule, VisitGrid):
        grid = np.asarray(schedule.times, dtype=np.float64)
        first = np.searchsorted(grid, a, side="left")
        counts = np.maximum(np.searchsorted(grid, b, side="left") - first, 0).astype(np.int64)
        times = grid[concat_ranges(first, counts)]
    else:
        raise ObservationError(f"unknown schedule {schedule!r}", field="schedule")
    per_page = np.bincount(life_page, weights=counts, minlength=history.n_pages).astype(np.int64)
    seen = np.flatnonzero(per_page > 0)
    visit_offsets = np.concatenate([[0], np.cumsum(per_page)]).astype(np.int64)

    # each change is detected by the first visit of its page at or after it
    detector = segment_searchsorted(
        times, visit_offsets, history.change_page, history.times, side="left"
    )
    page_first = visit_offsets[history.change_page]
    page_stop = visit_offsets[history.change_page + 1]
    observed = (detector > page_first) & (detector < page_stop)
    true_changes = np.bincount(detector[observed], minlength=len(times)).astype(np.int64)

    pages = history.pages.iloc[seen]
    offsets = np.concatenate([[0], np.cumsum(per_page[seen])]).astype(np.int64)
    notes = [f"crawl of {history.source or 'a change history'}: {schedule.describe()}"]
    unseen = history.n_pages - len(seen)
    if unseen:
        notes.append(f"{unseen} page(s) got no visit in the crawl window and are left out")
    obs = Observations(
        pages=pages.copy(),
        offsets=offsets,
        time=np.ascontiguousarray(times, dtype=np.float64),
        changed=(true_changes > 0).astype(np.int8),
        time_kind="datetime",
        notes=(*notes, *history.notes),
        source=f"crawl({history.source})",
        meta={"schedule": schedule.describe()},
    )
    return Crawl(observations=obs, true_changes=true_changes, history_page=seen)
