"""Malformed rows: reason codes, per-partition counts and samples, and the report.

Each row read from a log carries a ``problem`` code (0: none). Row-level problems are
found where the row is read (:mod:`~bayesrate.scaleout.logs`); page-level ones (duplicate
visits, flags that contradict the page's time order) once a page's rows are together after
the shuffle (:mod:`~bayesrate.scaleout.aggregate`). Every partition reports its counts per
reason and a few sample rows (file and row number); :func:`report` sums them.

With ``bad_rows="error"`` (the default) any problem fails the stage with an
:class:`~bayesrate.errors.ObservationError` that gives the counts and the sample; with
``"skip"`` the rows are excluded, and the counts and sample are written to the output's
manifest and printed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.errors import ObservationError

#: reason of each problem code
REASONS: dict[int, str] = {
    1: "missing page/url",
    2: "missing time",
    3: "time is neither a number nor a timestamp",
    4: "timestamp without a time zone offset",
    5: "non-finite time",
    6: "'changed' is not 0 or 1",
    7: "missing digest (failed fetch)",
    8: "duplicate visit (same page, same time): the page's rows are excluded",
    9: "missing 'changed' on a visit that is not the page's first: the page's rows are excluded",
    10: "change flag on the page's first (baseline) visit: the page's rows are excluded",
    11: "domain varies within the page: the page's rows are excluded",
    12: "number among timestamps in the time column",
    13: "another row of the page is malformed and may lie between its visits (leaving it "
    "out would merge two intervals under the next visit's flag): the page's rows are excluded",
}
MISSING_PAGE, MISSING_TIME, BAD_TIME, NAIVE_TIME, NONFINITE_TIME = 1, 2, 3, 4, 5
BAD_CHANGED, MISSING_DIGEST, DUPLICATE, MISSING_FLAG, BASELINE_FLAG = 6, 7, 8, 9, 10
DOMAIN_VARIES, MIXED_TIME, ROW_BETWEEN_VISITS = 11, 12, 13
BAD_ROWS = ("error", "skip")
#: sample rows kept per reason and partition (and in the report)
SAMPLE_ROWS = 5


def partition_problems(bad: pd.DataFrame, sources: list[str]) -> dict[str, Any]:
    """Counts per reason and a sample of rows from one partition's malformed rows.

    ``bad`` has columns ``problem``, ``source`` (file index), ``row`` and ``page``.
    """
    counts: dict[str, int] = {}
    sample: list[dict[str, Any]] = []
    if len(bad):
        order = bad.sort_values(["problem", "source", "row"], kind="stable")
        for code, rows in order.groupby("problem", sort=True):
            counts[str(int(code))] = len(rows)
            for rec in rows.head(SAMPLE_ROWS).itertuples(index=False):
                page = rec.page
                sample.append(
                    {
                        "reason": REASONS[int(code)],
                        "file": sources[int(rec.source)],
                        "row": int(rec.row),
                        "page": None if pd.isna(page) else str(page),
                    }
                )
    return {"counts": counts, "sample": sample}


def report(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum per-partition problem summaries: counts per reason, total, and a sample."""
    counts: dict[int, int] = {}
    sample: list[dict[str, Any]] = []
    for part in parts:
        for code, n in part["counts"].items():
            counts[int(code)] = counts.get(int(code), 0) + int(n)
        sample.extend(part["sample"])
    sample.sort(key=lambda r: (r["reason"], r["file"], r["row"]))
    kept: list[dict[str, Any]] = []
    per_reason: dict[str, int] = {}
    for rec in sample:
        if per_reason.get(rec["reason"], 0) < SAMPLE_ROWS:
            kept.append(rec)
            per_reason[rec["reason"]] = per_reason.get(rec["reason"], 0) + 1
    return {
        "rows": int(sum(counts.values())),
        "counts": {REASONS[c]: counts[c] for c in sorted(counts)},
        "sample": kept,
    }


def describe(summary: Mapping[str, Any]) -> str:
    """One paragraph: counts per reason, then the sample rows."""
    counts = "; ".join(f"{reason}: {n:,}" for reason, n in summary["counts"].items())
    rows = "; ".join(
        f"{r['file']} row {r['row']} (page {r['page']!r}): {r['reason']}" for r in summary["sample"]
    )
    return f"{summary['rows']:,} malformed row(s) — {counts}. Sample: {rows}"


def raise_if_any(summary: Mapping[str, Any], bad_rows: str) -> None:
    """Raise :class:`ObservationError` with counts and sample when ``bad_rows="error"``."""
    if summary["rows"] and bad_rows == "error":
        raise ObservationError(
            describe(summary) + ". Fix the input, or pass --bad-rows skip to exclude these "
            "rows (they are then counted in the output's manifest)"
        )


def first_problem(*codes: np.ndarray) -> np.ndarray:
    """Elementwise the first non-zero code of several code arrays (0 where none)."""
    out = np.zeros(len(codes[0]), dtype=np.uint8)
    for c in codes:
        out = np.where(out == 0, c, out).astype(np.uint8)
    return out
