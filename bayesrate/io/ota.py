"""Open Terms Archive change logs → observations on a nominal visit grid.

Open Terms Archive (OTA) fetches each tracked document on a schedule and records a new
version **only when the extracted text changed**; unchanged visits leave no trace. So the
visit grid is an explicit input: a list of :class:`GridEra` (period, time of day, time
zone) per collection. The defaults in :data:`DEFAULT_GRIDS` are read off the commit times
(``shared/data/open-terms-archive/SOURCE.md``); gaps between runs (outages, runs with no
change anywhere) cannot be told apart from unchanged runs, so the nominal grid is taken as
the visit times.

Rules (each exclusion is counted in ``Observations.notes``):

- A document's baseline visit is the last grid time at or before its first
  ``first_record`` event. Documents without one (template files) are excluded.
- Each ``change`` event is a detection at the last grid time at or before it (the run that
  committed it). Several events in one grid slot are one detection.
- ``technical`` events (re-extraction after a selector/filter change by maintainers),
  ``other`` events (template commits) and repeated ``first_record`` events are not content
  changes and are excluded.
- Observation ends at the collection's last run for documents still present at HEAD, and
  at the document's last event for documents removed from the repository.
- **Silent stretches are merged** (default): a nominal run that never happened (an outage)
  would count as an unchanged visit of every document — a phantom interval that biases rates
  low and makes gaps look regular. Where the whole collection recorded nothing
  (no ``first_record``, ``change`` or ``technical`` event) for consecutive slots although
  its local event rate says that silence was improbable (probability below
  ``silence_probability`` under a Poisson count at the rate of the ``window_days`` either
  side), those slots' visits are dropped, so each document's interval spans the whole
  stretch. That is exact whether or not the runs happened: it only forgoes the information
  of runs that did happen and saw nothing. The merged stretches are listed in
  ``Observations.meta["merged_silences"]`` and summed up in the notes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesrate.clock import to_hours, to_timestamp
from bayesrate.constants import DOMAIN, PAGE
from bayesrate.errors import ObservationError
from bayesrate.observations import Observations, concat_ranges


@dataclass(frozen=True)
class GridEra:
    """A stretch of time visited every ``every_hours`` at a fixed local time of day.

    Parameters
    ----------
    start, end
        ISO dates/timestamps (UTC unless they carry an offset); ``end=None`` means open.
    every_hours
        Period between visits; must divide 24 or be a multiple of 24.
    anchor
        Local time of day (``"HH:MM"``) of one visit per day.
    timezone
        The clock the schedule runs on (e.g. ``"Europe/Paris"`` for a cron in Paris time).
    """

    start: str
    end: str | None
    every_hours: float
    anchor: str = "00:00"
    timezone: str = "UTC"

    def times(self, last: pd.Timestamp) -> np.ndarray:
        """Grid times (hours since the epoch) from ``start`` to ``min(end, last)``."""
        start = _utc(self.start)
        end = min(_utc(self.end), last) if self.end else last
        hh, mm = (int(x) for x in self.anchor.split(":"))
        local_start = start.tz_convert(self.timezone).tz_localize(None).normalize()
        local_end = end.tz_convert(self.timezone).tz_localize(None).normalize() + pd.Timedelta(
            days=1
        )
        if self.every_hours <= 24:
            per_day = round(24 / self.every_hours)
            days = pd.date_range(local_start, local_end, freq="D")
            offsets = pd.to_timedelta(hh * 60 + mm, unit="min") + pd.to_timedelta(
                np.arange(per_day) * self.every_hours, unit="h"
            )
            naive = (days.to_numpy()[:, None] + offsets.to_numpy()[None, :]).ravel()
        else:
            naive = pd.date_range(
                local_start + pd.Timedelta(hours=hh, minutes=mm),
                local_end,
                freq=pd.Timedelta(hours=self.every_hours),
            ).to_numpy()
        local = pd.DatetimeIndex(naive).tz_localize(
            self.timezone, ambiguous=True, nonexistent="shift_forward"
        )
        utc = local.tz_convert("UTC")
        keep = (utc >= start) & (utc < end) if self.end else (utc >= start) & (utc <= end)
        return to_hours(utc[keep])


#: Nominal visit grids per collection (see module docstring and SOURCE.md).
DEFAULT_GRIDS: dict[str, tuple[GridEra, ...]] = {
    # read off the hours of the commits per quarter (see docs/data.md)
    "contrib": (
        GridEra("2012-01-01", "2020-07-01", 24.0),  # daily run, commits 04:00-07:00 UTC
        GridEra("2020-07-01", "2024-07-01", 6.0),  # 00/06/12/18 (2020-21: commits at all hours)
        GridEra("2024-07-01", "2025-10-01", 12.0, anchor="06:00"),  # 06/18 only
        GridEra("2025-10-01", "2026-01-01", 6.0),  # switch-over: all four slots
        GridEra("2026-01-01", None, 12.0),  # 00/12 only
    ),
    "pga": (
        GridEra("2022-01-01", "2024-07-01", 6.0),
        GridEra("2024-07-01", None, 12.0),
    ),
    "genai-eu": (GridEra("2025-01-01", None, 12.0, anchor="00:30", timezone="Europe/Paris"),),
}

CHANGELOG_COLUMNS = ("time_utc", "event", "service", "terms_type", "path")
#: event kinds that show a run of the collection happened
RUN_EVENTS = ("first_record", "change", "technical")
#: a silent stretch is merged when silence had a smaller probability than this
SILENCE_PROBABILITY = 1e-3
#: days either side of a silent stretch whose events give the collection's local rate
SILENCE_WINDOW_DAYS = 30.0
DOCUMENT_COLUMNS = ("path", "service", "terms_type", "present_in_head")
EVENTS = ("first_record", "change", "technical", "other")


def _utc(value: str | pd.Timestamp) -> pd.Timestamp:
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def visit_grid(eras: tuple[GridEra, ...], last: pd.Timestamp) -> np.ndarray:
    """Sorted union of the eras' grid times up to ``last``."""
    if not eras:
        raise ObservationError("the visit grid needs at least one era", field="grid")
    return np.unique(np.concatenate([era.times(last) for era in eras]))


def from_changelog(
    changelog: pd.DataFrame,
    documents: pd.DataFrame,
    *,
    grid: tuple[GridEra, ...] | str,
    source: str = "open-terms-archive",
    merge_silences: bool = True,
    silence_probability: float = SILENCE_PROBABILITY,
    window_days: float = SILENCE_WINDOW_DAYS,
) -> Observations:
    """Build observations from an OTA changelog and documents table.

    Parameters
    ----------
    changelog
        Rows of ``*-versions-changelog.csv`` (at least ``time_utc``, ``event``,
        ``service``, ``terms_type``, ``path``).
    documents
        Rows of ``*-versions-documents.csv`` (at least ``path``, ``service``,
        ``terms_type``, ``present_in_head``).
    grid
        The nominal visit grid: eras, or a collection name from :data:`DEFAULT_GRIDS`.
    merge_silences
        Merge improbable collection-wide silences into single intervals (module docstring).
    silence_probability, window_days
        A silent stretch is merged when a Poisson count at the collection's event rate over
        ``window_days`` either side gives its silence a probability below this.

    Returns
    -------
    Observations
        Pages are document paths (without ``.md``), domains are services, and
        ``terms_type`` and ``collection`` are kept as page attributes.
    """
    collection, eras = _resolve_grid(grid)
    log, hours = _validated(changelog, documents)
    grid_times = visit_grid(eras, to_timestamp(float(hours.max())))
    docs = documents.drop_duplicates("path").set_index("path")
    notes: list[str] = []
    tracked, slot_of_first = _first_slots(log, hours, docs, grid_times, notes)
    end_slot = _end_slots(log, hours, docs, tracked, grid_times, slot_of_first)
    det_doc, det_slot = _detections(log, hours, docs, tracked, grid_times, slot_of_first, notes)

    counts = (end_slot - slot_of_first + 1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    visit_slot = concat_ranges(slot_of_first.astype(np.int64), counts)
    changed = np.zeros(offsets[-1], dtype=np.int8)
    changed[offsets[det_doc] + det_slot - slot_of_first[det_doc]] = 1
    silences: list[dict] = []
    if merge_silences:
        silences = silent_stretches(
            run_slots(log, hours, grid_times), grid_times, silence_probability, window_days
        )
        offsets, visit_slot, changed = _drop_slots(
            offsets, visit_slot, changed, silences, len(grid_times)
        )
        notes.append(_silence_note(silences, silence_probability, window_days))

    labels = [p[:-3] if p.endswith(".md") else p for p in tracked]
    pages = pd.DataFrame(index=pd.Index(labels, name=PAGE))
    pages[DOMAIN] = docs.loc[tracked, "service"].astype(str).to_numpy()
    pages["terms_type"] = docs.loc[tracked, "terms_type"].astype(str).to_numpy()
    pages["collection"] = collection
    era_text = "; ".join(
        f"{e.start}..{e.end or 'end'} every {e.every_hours:g} h at {e.anchor} {e.timezone}"
        for e in eras
    )
    notes.insert(0, f"visit grid ({collection}): {era_text}")
    return Observations(
        pages=pages,
        offsets=offsets,
        time=grid_times[visit_slot],
        changed=changed,
        time_kind="datetime",
        notes=tuple(notes),
        source=source,
        meta={
            "collection": collection,
            "grid": [e.__dict__ for e in eras],
            "merged_silences": silences if merge_silences else None,
        },
    )


def run_slots(log: pd.DataFrame, hours: np.ndarray, grid_times: np.ndarray) -> np.ndarray:
    """Per grid slot, the number of documents with a run event (:data:`RUN_EVENTS`) in it."""
    runs = log["event"].isin(RUN_EVENTS).to_numpy()
    slot = np.searchsorted(grid_times, hours[runs], "right") - 1
    path_code = pd.factorize(log["path"].to_numpy()[runs])[0]
    inside = slot >= 0
    key = np.unique(slot[inside].astype(np.int64) * (path_code.max() + 1) + path_code[inside])
    return np.bincount(key // (path_code.max() + 1), minlength=len(grid_times))


def silent_stretches(
    activity: np.ndarray,
    grid_times: np.ndarray,
    silence_probability: float = SILENCE_PROBABILITY,
    window_days: float = SILENCE_WINDOW_DAYS,
) -> list[dict]:
    """Maximal runs of slots without activity whose silence was improbable.

    A stretch of slots ``a..b`` covers the hours ``(t[a-1], t[b]]``; the collection's local
    rate is its activity (documents with an event, per slot) over the ``window_days`` before
    ``t[a-1]`` and after ``t[b]``, per hour. The stretch is kept when
    ``exp(-rate x hours) < silence_probability``. Slots before the first and after the last
    active slot are never merged (no document is observed there).

    Returns
    -------
    list of dict
        ``first_slot``, ``last_slot``, ``start``/``end`` (ISO UTC of ``t[a-1]`` and ``t[b]``),
        ``runs`` (nominal runs dropped), ``hours`` and ``expected_events``.
    """
    if not (0 < silence_probability < 1) or not window_days > 0:
        raise ObservationError(
            "silence_probability must be in (0, 1) and window_days > 0",
            field="silence_probability",
        )
    active = np.flatnonzero(activity > 0)
    if len(active) < 2:
        return []
    gaps = np.flatnonzero(np.diff(active) > 1)
    first_silent, last_silent = active[gaps] + 1, active[gaps + 1] - 1
    window = window_days * 24.0
    cumulative = np.concatenate([[0], np.cumsum(activity)])
    out = []
    for a, b in zip(first_silent.tolist(), last_silent.tolist(), strict=True):
        begin, end = grid_times[a - 1], grid_times[b]
        before = np.searchsorted(grid_times, begin - window, "left")
        after = np.searchsorted(grid_times, end + window, "right")
        events = cumulative[a] - cumulative[before] + cumulative[after] - cumulative[b + 1]
        span = min(window, begin - grid_times[0]) + min(window, grid_times[-1] - end)
        if span <= 0:
            continue
        expected = events / span * (end - begin)
        if math.exp(-expected) < silence_probability:
            out.append(
                {
                    "first_slot": a,
                    "last_slot": b,
                    "start": to_timestamp(float(begin)).isoformat(),
                    "end": to_timestamp(float(end)).isoformat(),
                    "runs": b - a + 1,
                    "hours": float(end - begin),
                    "expected_events": float(expected),
                }
            )
    return out


def _drop_slots(offsets, visit_slot, changed, silences, n_slots):
    """Observations without the visits in the merged silent slots (never a detection)."""
    merged = np.zeros(n_slots, dtype=bool)
    for s in silences:
        merged[s["first_slot"] : s["last_slot"] + 1] = True
    drop = merged[visit_slot]
    if changed[drop].any():  # a silent slot has no events, so no detection can sit there
        raise AssertionError("a merged silent slot holds a detection")
    page = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    counts = np.bincount(page[~drop], minlength=len(offsets) - 1)
    new_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return new_offsets, visit_slot[~drop], changed[~drop]


def _silence_note(silences: list[dict], silence_probability: float, window_days: float) -> str:
    runs = sum(s["runs"] for s in silences)
    days = sum(s["hours"] for s in silences) / 24.0
    rule = (
        f"P(silence) < {silence_probability:g} at the collection's event rate over "
        f"{window_days:g} days either side"
    )
    if not silences:
        return f"merged no silent stretches ({rule})"
    return (
        f"merged {len(silences)} collection-wide silent stretch(es) into single intervals: "
        f"{runs} nominal run(s) over {days:.1f} days dropped ({rule}); the list is in "
        f"meta['merged_silences']"
    )


def _resolve_grid(grid: tuple[GridEra, ...] | str) -> tuple[str, tuple[GridEra, ...]]:
    """(collection name, eras) of a grid given by collection name or as eras."""
    if not isinstance(grid, str):
        return "custom", tuple(grid)
    if grid not in DEFAULT_GRIDS:
        raise ObservationError(
            f"no default grid for collection {grid!r}; have {sorted(DEFAULT_GRIDS)}",
            field="grid",
        )
    return grid, DEFAULT_GRIDS[grid]


def _validated(changelog: pd.DataFrame, documents: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The changelog (re-indexed) and its event times in hours; errors name the rows."""
    for table, cols, name in (
        (changelog, CHANGELOG_COLUMNS, "changelog"),
        (documents, DOCUMENT_COLUMNS, "documents"),
    ):
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise ObservationError(f"{name} lacks column(s) {missing}", field=missing[0])
    if len(changelog) == 0:
        raise ObservationError("no observations: the changelog is empty")
    log = changelog.reset_index(drop=True)
    unknown = ~log["event"].isin(EVENTS).to_numpy()
    if unknown.any():
        raise ObservationError(
            f"unknown event kinds (expected {EVENTS})", field="event", rows=np.flatnonzero(unknown)
        )
    times = pd.to_datetime(log["time_utc"], utc=True, errors="coerce")
    bad_time = times.isna().to_numpy()
    if bad_time.any():
        raise ObservationError(
            "unparseable time_utc", field="time_utc", rows=np.flatnonzero(bad_time)
        )
    return log, to_hours(times)


def _first_slots(log, hours, docs, grid_times, notes) -> tuple[list[str], np.ndarray]:
    """Tracked documents (those with a first record) and the grid slot of each first record;
    every exclusion is noted."""
    event = log["event"].to_numpy()
    path = log["path"].to_numpy()
    first_mask = event == "first_record"
    first_record = pd.Series(hours[first_mask], index=path[first_mask]).groupby(level=0).min()
    repeat_first = int(first_mask.sum() - len(first_record))
    tracked = [p for p in docs.index if p in first_record.index]
    untracked = len(docs.index) - len(tracked)
    if untracked:
        notes.append(
            f"excluded {untracked} document(s) with no first_record event (template or "
            f"untracked files)"
        )
    for kind, why in (
        ("technical", "re-extraction by maintainers, not a content change"),
        ("other", "template/initial commits"),
    ):
        count = int((event == kind).sum())
        if count:
            notes.append(f"excluded {count} '{kind}' event(s): {why}")
    if repeat_first:
        notes.append(f"excluded {repeat_first} repeated first_record event(s) (re-tracking)")
    orphan = int((docs.index.get_indexer(path) < 0).sum())
    if orphan:
        notes.append(f"excluded {orphan} event(s) of paths missing from the documents table")
    slot_of_first = np.searchsorted(grid_times, first_record.loc[tracked].to_numpy(), "right") - 1
    if (slot_of_first < 0).any():
        early = [tracked[i] for i in np.flatnonzero(slot_of_first < 0)]
        raise ObservationError(
            "first_record before the visit grid starts; extend the grid's first era",
            field="grid",
            pages=early,
        )
    return tracked, slot_of_first


def _end_slots(log, hours, docs, tracked, grid_times, slot_of_first) -> np.ndarray:
    """Last visited slot per document: the grid's end if still tracked, else its last event."""
    path = log["path"].to_numpy()
    in_docs = docs.index.get_indexer(path) >= 0
    last_event = pd.Series(hours[in_docs], index=path[in_docs]).groupby(level=0).max()
    present = docs.loc[tracked, "present_in_head"].astype(int).to_numpy() == 1
    end_slot = np.where(
        present,
        len(grid_times) - 1,
        np.searchsorted(grid_times, last_event.loc[tracked].to_numpy(), "right") - 1,
    )
    return np.maximum(end_slot, slot_of_first)


def _detections(log, hours, docs, tracked, grid_times, slot_of_first, notes):
    """(document position, grid slot) of every detection: one per visit, after the first."""
    event = log["event"].to_numpy()
    path = log["path"].to_numpy()
    change = (event == "change") & (docs.index.get_indexer(path) >= 0)
    change_doc = pd.Index(tracked).get_indexer(path[change])
    not_tracked = change_doc < 0
    if not_tracked.any():
        notes.append(f"excluded {int(not_tracked.sum())} change event(s) of untracked documents")
    change_doc = change_doc[~not_tracked]
    change_slot = np.searchsorted(grid_times, hours[change][~not_tracked], "right") - 1
    at_baseline = change_slot <= slot_of_first[change_doc]
    if at_baseline.any():
        notes.append(
            f"excluded {int(at_baseline.sum())} change event(s) in the same grid slot as the "
            f"document's first record (no earlier visit to compare with)"
        )
    change_doc, change_slot = change_doc[~at_baseline], change_slot[~at_baseline]
    key = np.unique(change_doc.astype(np.int64) * len(grid_times) + change_slot)
    merged = len(change_doc) - len(key)
    if merged:
        notes.append(
            f"merged {merged} change event(s) into an earlier event of the same grid slot "
            f"(one detection per visit)"
        )
    return np.divmod(key, len(grid_times))
