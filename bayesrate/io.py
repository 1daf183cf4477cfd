"""Loaders that turn crawl records of several shapes into :class:`Observations`.

- :func:`read_observations` — a canonical table in CSV or Parquet.
- :func:`from_fetch_log` — one row per fetch with a content digest; ``changed`` is
  "digest differs from the page's previous digest".
- :func:`from_visit_grid` — the case study's format: per page ``domain``, ``numVisits``
  and ``visitsWChanges`` (1-based revisit indices at which a change was seen) on a regular
  grid; :func:`read_rda` reads that format from an R ``.rda``/``.RData`` file.
- :func:`bayesrate.io.ota.from_changelog` — Open Terms Archive change logs plus a nominal
  visit grid (in :mod:`bayesrate.ota`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrate.constants import CHANGED, DEFAULT_TIME_UNIT, DOMAIN, PAGE, TIME, TIME_UNITS
from bayesrate.errors import ObservationError, format_items
from bayesrate.observations import (
    Observations,
    ids_as_strings,
    load_table,
    timestamps_to_hours,
)

GRID_COLUMNS = ("numVisits", "visitsWChanges")


def read_observations(
    path: str | Path,
    *,
    time_unit: str = DEFAULT_TIME_UNIT,
    origin: pd.Timestamp | str | None = None,
) -> Observations:
    """Read a canonical observation table (``page``, ``time``, ``changed``, ``domain``).

    Parameters
    ----------
    path
        ``.csv``, ``.csv.gz`` or ``.parquet`` file.
    time_unit
        Unit of numeric times (default hours); ISO timestamps need an offset or ``Z``.
    origin
        Timestamp that numeric time 0 stands for (default: the Unix epoch).
    """
    frame = load_table(path)
    return Observations.from_frame(frame, time_unit=time_unit, origin=origin, source=str(path))


def from_fetch_log(
    frame: pd.DataFrame,
    *,
    page: str = PAGE,
    time: str = TIME,
    digest: str = "digest",
    domain: str | None = DOMAIN,
    time_unit: str = DEFAULT_TIME_UNIT,
    failed: str = "error",
    source: str = "fetch log",
) -> Observations:
    """Observations from fetch records with a content digest per fetch.

    Parameters
    ----------
    frame
        One row per fetch: page id, fetch time, digest of the content that matters (e.g.
        a hash of the extracted text), optional domain.
    page, time, digest, domain
        Column names. ``domain=None`` (or a missing column) puts every page in one domain.
    time_unit
        Unit of numeric times.
    failed
        What to do with fetches whose digest is missing (failed fetches): ``"error"``
        (default) raises naming the rows; ``"skip"`` excludes them — a failed fetch is
        not a visit, so the next successful fetch is compared with the last successful
        one — and records how many in ``notes``.

    Notes
    -----
    Revisits that return the same digest are unchanged; a change that reverted before
    the next fetch is invisible (a blind spot of binary observation).
    """
    for col in (page, time, digest):
        if col not in frame.columns:
            raise ObservationError(
                f"fetch log lacks column {col!r}; have {list(frame.columns)}", field=col
            )
    if failed not in ("error", "skip"):
        raise ValueError("failed must be 'error' or 'skip'")
    frame = ids_as_strings(frame.reset_index(drop=True), (page, domain or page))
    notes = []
    missing = frame[digest].isna().to_numpy()
    if missing.any():
        if failed == "error":
            raise ObservationError(
                "missing digest (failed fetch?); pass failed='skip' to exclude such fetches",
                field=digest,
                rows=np.flatnonzero(missing),
            )
        notes.append(
            f"excluded {int(missing.sum())} fetch(es) without a digest (failed fetches): rows "
            f"{format_items(np.flatnonzero(missing).tolist())}"
        )
        frame = frame.loc[~missing]
    canonical = pd.DataFrame({PAGE: frame[page].to_numpy(), TIME: frame[time].to_numpy()})
    if domain is not None and domain in frame.columns:
        canonical[DOMAIN] = frame[domain].to_numpy()
    # digests are compared in each page's time order; build() rejects out-of-order input
    canonical[CHANGED] = 0
    obs_probe = Observations.from_frame(
        canonical, time_unit=time_unit, source=source, notes=tuple(notes)
    )
    codes, _ = pd.factorize(canonical[PAGE], sort=False)
    order = np.lexsort((np.arange(len(canonical)), codes))
    digests = frame[digest].to_numpy()[order]
    prev = np.roll(digests, 1)
    changed = (digests != prev).astype(np.int8)
    changed[obs_probe.offsets[:-1]] = 0
    return obs_probe.replace(changed=changed)


def from_visit_grid(
    frame: pd.DataFrame,
    *,
    interval: float = 1.0,
    time_unit: str = "h",
    start: pd.Timestamp | str | float = 0.0,
    page: str | None = None,
    source: str = "visit grid",
) -> Observations:
    """Observations from the case study's regular-grid format.

    Parameters
    ----------
    frame
        One row per page with ``numVisits`` (number of revisits, i.e. intervals) and
        ``visitsWChanges`` (a list/array of 1-based revisit indices at which a change was
        detected), and optionally ``domain``.
    interval
        Time between visits, in ``time_unit`` (default one hour).
    start
        Time of every page's baseline visit: a tz-aware timestamp, or a number in hours
        since the Unix epoch.
    page
        Column of page ids (default: the row position, 1-based as in R).

    Raises
    ------
    ObservationError
        For missing columns, non-integer or negative ``numVisits``, indices outside
        ``1..numVisits``, repeated indices, or an unknown unit.
    """
    for col in GRID_COLUMNS:
        if col not in frame.columns:
            raise ObservationError(
                f"visit-grid table lacks column {col!r}; have {list(frame.columns)}", field=col
            )
    if time_unit not in TIME_UNITS:
        raise ObservationError(f"unknown time unit {time_unit!r}", field="time_unit")
    if len(frame) == 0:
        raise ObservationError("no observations: the visit-grid table is empty")
    step = float(interval) * TIME_UNITS[time_unit]
    if not np.isfinite(step) or step <= 0:
        raise ObservationError(f"interval must be positive, got {interval!r}", field="interval")
    if isinstance(start, (int, float, np.floating, np.integer)):
        t0 = float(start)
    else:
        ts = pd.Timestamp(start)
        if ts.tzinfo is None:
            raise ObservationError("start must be timezone-aware", field="start")
        t0 = float(timestamps_to_hours(pd.DatetimeIndex([ts]))[0])

    frame = ids_as_strings(frame.reset_index(drop=True), (page or DOMAIN, DOMAIN))
    n_raw = pd.to_numeric(frame["numVisits"], errors="coerce").to_numpy(dtype=float)
    bad_n = ~np.isfinite(n_raw) | (n_raw < 0) | (n_raw != np.round(n_raw))
    if bad_n.any():
        raise ObservationError(
            "numVisits must be a non-negative integer",
            field="numVisits",
            rows=np.flatnonzero(bad_n),
        )
    n_revisits = n_raw.astype(np.int64)
    if page is not None and page not in frame.columns:
        raise ObservationError(
            f"visit-grid table lacks column {page!r}; have {list(frame.columns)}", field=page
        )
    for col in (page, DOMAIN):
        if col is not None and col in frame.columns and frame[col].isna().any():
            raise ObservationError(
                f"missing values in {col!r}",
                field=col,
                rows=np.flatnonzero(frame[col].isna().to_numpy()),
            )
    labels = (
        frame[page].to_numpy() if page is not None else np.arange(1, len(frame) + 1).astype(str)
    )
    flags_per_page: list[np.ndarray] = []
    bad_rows: list[int] = []
    dup_rows: list[int] = []
    for row, (n, raw) in enumerate(zip(n_revisits, frame["visitsWChanges"], strict=True)):
        idx = _as_indices(raw)
        if idx is None or ((idx < 1) | (idx > n)).any():
            bad_rows.append(row)
            continue
        if len(np.unique(idx)) != len(idx):
            dup_rows.append(row)
            continue
        flags = np.zeros(n + 1, dtype=np.int8)
        flags[idx] = 1
        flags_per_page.append(flags)
    if bad_rows:
        raise ObservationError(
            "visitsWChanges holds indices outside 1..numVisits (or non-integers)",
            field="visitsWChanges",
            rows=bad_rows,
            pages=[labels[r] for r in bad_rows],
        )
    if dup_rows:
        raise ObservationError(
            "visitsWChanges repeats an index",
            field="visitsWChanges",
            rows=dup_rows,
            pages=[labels[r] for r in dup_rows],
        )
    counts = n_revisits + 1
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], counts)
    pages = pd.DataFrame(index=pd.Index(labels, name=PAGE))
    pages[DOMAIN] = frame[DOMAIN].astype(str).to_numpy() if DOMAIN in frame.columns else "(none)"
    if pages.index.duplicated().any():
        dup = pages.index[pages.index.duplicated()].tolist()
        raise ObservationError("page ids repeat", field=page or "row", pages=dup)
    return Observations(
        pages=pages,
        offsets=offsets,
        time=t0 + within * step,
        changed=np.concatenate(flags_per_page) if flags_per_page else np.zeros(0, np.int8),
        time_kind="numeric" if isinstance(start, (int, float)) else "datetime",
        source=source,
    )


def _as_indices(raw: object) -> np.ndarray | None:
    """A list-column cell as an int array; None if it holds non-integers."""
    if raw is None or (isinstance(raw, float) and np.isnan(raw)):
        return np.zeros(0, dtype=np.int64)
    if isinstance(raw, str):
        text = raw.strip().strip("[]()")
        parts = [p for p in text.replace(",", " ").split() if p]
        raw = parts
    values = np.atleast_1d(np.asarray(raw, dtype=object))
    try:
        floats = values.astype(float)
    except (TypeError, ValueError):
        return None
    if not np.all(np.isfinite(floats)) or np.any(floats != np.round(floats)):
        return None
    return floats.astype(np.int64)


def read_rda(
    path: str | Path,
    *,
    name: str | None = None,
    interval: float = 1.0,
    time_unit: str = "h",
    start: pd.Timestamp | str | float = 0.0,
) -> Observations:
    """Read the case study's ``pages.rda`` (or any R file holding a data frame of that shape).

    Parameters
    ----------
    path
        ``.rda``/``.RData`` file.
    name
        Object to read (default: the only data frame in the file, or ``pages``).
    interval, time_unit, start
        As in :func:`from_visit_grid` (the case study visited hourly).
    """
    import rdata

    path = Path(path)
    if not path.exists():
        raise ObservationError(f"no such file: {path}")
    try:
        objects = rdata.read_rda(str(path))
    except Exception as exc:  # rdata raises several types for malformed files
        raise ObservationError(f"cannot read R data from {path}: {exc}") from exc
    frames = {k: v for k, v in objects.items() if isinstance(v, pd.DataFrame)}
    if name is None:
        if len(frames) == 1:
            name = next(iter(frames))
        elif "pages" in frames:
            name = "pages"
        else:
            raise ObservationError(
                f"{path} holds data frames {sorted(frames)}; say which with name=", field="name"
            )
    if name not in frames:
        raise ObservationError(f"{path} has no data frame {name!r} (has {sorted(frames)})")
    frame = frames[name]
    return from_visit_grid(
        frame, interval=interval, time_unit=time_unit, start=start, source=f"{path}:{name}"
    )


def to_visit_grid(obs: Observations) -> pd.DataFrame:
    """The inverse of :func:`from_visit_grid` for regularly visited pages."""
    rows = []
    for i, label in enumerate(obs.pages.index):
        flags = obs.changed[obs.offsets[i] : obs.offsets[i + 1]]
        rows.append(
            {
                "page": label,
                DOMAIN: obs.pages[DOMAIN].iloc[i],
                "numVisits": max(len(flags) - 1, 0),
                "visitsWChanges": np.flatnonzero(flags).astype(np.int64),
            }
        )
    return pd.DataFrame(rows)


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
