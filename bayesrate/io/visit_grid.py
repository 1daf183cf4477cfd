"""The case study's regular-grid format: per page ``domain``, ``numVisits`` and
``visitsWChanges`` (1-based revisit indices at which a change was seen)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrate.clock import to_hours
from bayesrate.constants import DOMAIN, PAGE, TIME_UNITS
from bayesrate.errors import ObservationError
from bayesrate.observations import Observations, ids_as_strings

GRID_COLUMNS = ("numVisits", "visitsWChanges")


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
    if len(frame) == 0:
        raise ObservationError("no observations: the visit-grid table is empty")
    t0, step = _start_and_step(start, interval, time_unit)
    frame = ids_as_strings(frame.reset_index(drop=True), (page or DOMAIN, DOMAIN))
    n_revisits = _revisit_counts(frame)
    labels = _page_labels(frame, page)
    flags_per_page = _flags(frame, n_revisits, labels)
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


def _start_and_step(start, interval: float, time_unit: str) -> tuple[float, float]:
    """The baseline visit time (hours since the epoch) and the grid step (hours)."""
    if time_unit not in TIME_UNITS:
        raise ObservationError(f"unknown time unit {time_unit!r}", field="time_unit")
    step = float(interval) * TIME_UNITS[time_unit]
    if not np.isfinite(step) or step <= 0:
        raise ObservationError(f"interval must be positive, got {interval!r}", field="interval")
    if isinstance(start, (int, float, np.floating, np.integer)):
        return float(start), step
    ts = pd.Timestamp(start)
    if ts.tzinfo is None:
        raise ObservationError("start must be timezone-aware", field="start")
    return float(to_hours([ts])[0]), step


def _revisit_counts(frame: pd.DataFrame) -> np.ndarray:
    """``numVisits`` per row, as non-negative integers (rows named otherwise)."""
    n_raw = pd.to_numeric(frame["numVisits"], errors="coerce").to_numpy(dtype=float)
    bad_n = ~np.isfinite(n_raw) | (n_raw < 0) | (n_raw != np.round(n_raw))
    if bad_n.any():
        raise ObservationError(
            "numVisits must be a non-negative integer",
            field="numVisits",
            rows=np.flatnonzero(bad_n),
        )
    return n_raw.astype(np.int64)


def _page_labels(frame: pd.DataFrame, page: str | None) -> np.ndarray:
    """Page ids from the ``page`` column (default: the 1-based row, as in R)."""
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
    if page is None:
        return np.arange(1, len(frame) + 1).astype(str)
    return frame[page].to_numpy()


def _flags(frame: pd.DataFrame, n_revisits: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    """Per page, the change flags of its baseline visit and ``numVisits`` revisits."""
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
    for rows, what in ((bad_rows, "holds indices outside 1..numVisits (or non-integers)"),
                       (dup_rows, "repeats an index")):  # fmt: skip
        if rows:
            raise ObservationError(
                f"visitsWChanges {what}",
                field="visitsWChanges",
                rows=rows,
                pages=[labels[r] for r in rows],
            )
    return flags_per_page


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
