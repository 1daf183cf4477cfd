"""Real edit traces as ground truth: estimator error vs visit interval (Wikipedia).

Three Wikipedia articles (Ebola virus disease, Ebola virus disease in the United States,
Monsanto; the ``wikipedia-revisions-westhad`` traces: one CSV of revisions per article,
``<article>.Revisions.csv``) carry exact edit times (uncensored). Each article's history
is cut into 30-day windows; each window is a "page" whose true rate is its number of edits
per hour over the observed span. A crawler visiting on a regular grid (15 min … 1 week,
aligned with the window start) records only whether at least one edit happened since its
previous visit; every estimator is applied to those censored flags and compared with the
window's uncensored rate. The whole history of each article (one page per article) is
reported as well.

Parsing (the CSV is messy): the file is read line by line, split on commas,
and a line is kept when its first field is an integer revision id and its 7th field
starts with ``https://``; the time is the 5th field (seconds since the first edit).
Line-wise splitting keeps the rows that a quoting CSV reader swallows into multi-line
comments (the counts 7,650 / 3,955 / 1,521 are the CSV reader's; line-wise gives
7,792 / 3,984 / 1,521, all with distinct ids and non-decreasing times). Every dropped
line is counted in ``summary.json``.

The traces have no stated licence, so they are not shipped: ``run(data_dir=...)`` (``bayesrate
study wikipedia --data-dir DIR``) reads them from ``DIR/wikipedia-revisions-westhad/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bayesrate.estimators.estimate import METHODS as ESTIMATOR_METHODS
from bayesrate.studies import Progress, StudyResult, silent

DESCRIPTION = "Wikipedia edit traces subsampled on visit grids: estimator error vs interval"

DATASET = "wikipedia-revisions-westhad"
INTERVALS_HOURS = (0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 12.0, 24.0, 48.0, 96.0, 168.0)
WINDOW_HOURS = 720.0
MIN_WINDOW_HOURS = 168.0
#: every estimator but the grid posterior (its Gamma(1, 1 day) prior is the same as
#: gamma-adf's, whose online replay is the point of comparison)
METHODS = tuple(m for m in ESTIMATOR_METHODS if m != "posterior-grid")


def read_trace(path: Path) -> tuple:
    """Edit times (hours since the first edit, sorted) and the number of dropped lines."""
    import numpy as np

    from bayesrate.errors import ObservationError

    times, ids, dropped = [], set(), 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\n").split(",")
            if (
                len(parts) >= 7
                and parts[0].strip().isdigit()
                and parts[6].strip().startswith("https://")
            ):
                rev = parts[0].strip()
                if rev in ids:
                    dropped += 1
                    continue
                ids.add(rev)
                times.append(float(parts[4]))
            else:
                dropped += 1
    t = np.asarray(times) / 3600.0
    if len(t) == 0:
        raise ObservationError(f"no revision rows found in {path}", field="revision id")
    if np.any(np.diff(t) < 0):
        bad = np.flatnonzero(np.diff(t) < 0)[:10] + 1
        raise ObservationError(
            f"edit times decrease in {path} at kept rows {bad.tolist()}", field="time"
        )
    return t, dropped


def censor(edits: np.ndarray, starts: np.ndarray, ends: np.ndarray, interval: float) -> tuple:
    """Visit grids over each window ``[start, end]`` and the censored flags.

    Returns (page, time, changed, truth_per_hour) with ``truth`` = edits in
    ``(first visit, last visit]`` divided by that span.
    """
    pages, times, flags, truth = [], [], [], []
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        visits = a + np.arange(0.0, b - a + 1e-9, interval)
        # edits up to and including each visit
        cum = np.searchsorted(edits, visits, side="right")
        changed = np.concatenate([[0], (np.diff(cum) > 0).astype(np.int8)])
        pages.append(np.full(len(visits), i))
        times.append(visits)
        flags.append(changed)
        span = visits[-1] - visits[0]
        truth.append((cum[-1] - cum[0]) / span if span > 0 else 0.0)
    return (
        np.concatenate(pages),
        np.concatenate(times),
        np.concatenate(flags),
        np.asarray(truth),
    )


#: methods for the whole-history pages (online replay of ~10^5 visits per page is slow)
ARTICLE_METHODS = ("naive", "moment", "cho", "mle", "mm", "gamma-exposure")


def estimate_all(page, time, changed, methods=METHODS) -> tuple:
    """Per-page rates per hour for every method, on observations built from arrays."""
    from bayesrate.constants import HOURS_PER_DAY
    from bayesrate.estimators.estimate import estimate
    from bayesrate.observations import Observations

    labels = np.char.add("w", np.char.zfill(page.astype(str), 6))
    obs = Observations.from_arrays(labels, time, changed)
    order = np.argsort(obs.pages.index.to_numpy())
    out = {}
    for method in methods:
        frame = estimate(obs, method)
        out[method] = frame["rate_per_day"].to_numpy()[order] / HOURS_PER_DAY
    st = obs.interval_stats
    capped = (st.n_changes == st.n_intervals)[order] & (st.n_intervals > 0)[order]
    return out, capped


def run(
    *,
    data_dir: str | Path,
    seed: int | str = "bayesrate-wikipedia",
    fast: bool = False,
    progress: Progress = silent,
) -> StudyResult:
    """Censor the traces on every visit grid and score every estimator; see the module docstring.

    Parameters
    ----------
    data_dir
        Directory holding ``wikipedia-revisions-westhad/*.Revisions.csv``.
    seed
        Unused (the study is deterministic); accepted like every study's.
    fast
        Two visit intervals (1 h, 1 day) and 40 windows (smoke tests).
    progress
        Called with one line per step.

    Raises
    ------
    ObservationError
        When the directory holds no trace.
    """
    import pandas as pd

    from bayesrate import plots
    from bayesrate.errors import ObservationError

    folder = Path(data_dir) / DATASET
    files = sorted(folder.glob("*.Revisions.csv"))
    if not files:
        raise ObservationError(
            f"no *.Revisions.csv under {folder}: the Wikipedia traces are not shipped "
            "(no licence); pass the directory that holds wikipedia-revisions-westhad/"
        )
    intervals = (1.0, 24.0) if fast else INTERVALS_HOURS

    traces, parse = _read_traces(files, progress)
    windows = _windows(traces, fast)
    rows, article_rows = [], []
    for interval in intervals:
        progress(f"wikipedia: visits every {interval} h over {len(windows[0])} windows")
        rows += _score_windows(traces, windows, interval)
        article_rows += _score_articles(traces, interval)
    table = pd.DataFrame(rows)
    articles = pd.DataFrame(article_rows)
    summary = {
        "data": str(folder),
        "parse": parse,
        "window_hours": WINDOW_HOURS,
        "windows": len(windows[0]),
        "intervals_hours": list(intervals),
        "median_ratio": {
            m: dict(zip(part.interval_hours, part.median_ratio.round(4), strict=True))
            for m, part in table.groupby("method", sort=False)
        },
    }
    wide = table.pivot(index="interval_hours", columns="method", values="median_ratio")
    text = "median estimate / true rate over 30-day windows\n" + wide[list(METHODS)].to_string(
        float_format=lambda v: f"{v:.3f}"
    )
    return StudyResult(
        name="wikipedia",
        tables={"windows": table, "articles": articles},
        summary=summary,
        figures={"wikipedia": plots.ratio_by_interval(table)},
        text=text,
    )


def _read_traces(files: list[Path], progress: Progress) -> tuple[dict, dict]:
    """Edit times per article, and what parsing kept and dropped (with burstiness)."""
    traces, parse = {}, {}
    for f in files:
        article = f.name.removesuffix(".Revisions.csv")
        traces[article], dropped = read_trace(f)
        gaps = np.diff(traces[article])
        parse[article] = {
            "revisions": len(traces[article]),
            "dropped_lines": dropped,
            "span_days": float(traces[article][-1] / 24),
            # burstiness: a Poisson process has gap CV 1 and few very short gaps
            "share_gaps_under_15min": float(np.mean(gaps < 0.25)) if len(gaps) else 0.0,
            "gap_cv": float(gaps.std() / gaps.mean()) if len(gaps) and gaps.mean() > 0 else 0.0,
        }
        progress(f"wikipedia: {article}: {len(traces[article])} edits, {dropped} lines dropped")
    return traces, parse


def _windows(traces: dict, fast: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, article) of the 30-day windows; the last one kept if at least a week."""
    win_article, win_start, win_end = [], [], []
    for article, t in traces.items():
        starts = np.arange(0.0, t[-1], WINDOW_HOURS)
        ends = np.minimum(starts + WINDOW_HOURS, t[-1])
        keep = ends - starts >= MIN_WINDOW_HOURS
        win_article += [article] * int(keep.sum())
        win_start.append(starts[keep])
        win_end.append(ends[keep])
    start, end, article = (
        np.concatenate(win_start),
        np.concatenate(win_end),
        np.asarray(win_article),
    )
    if fast:
        pick = np.linspace(0, len(start) - 1, min(40, len(start))).astype(int)
        start, end, article = start[pick], end[pick], article[pick]
    return start, end, article


def _score_windows(traces: dict, windows: tuple, interval: float) -> list[dict]:
    """Every method's error on the windows censored on a grid of ``interval`` hours."""
    win_start, win_end, win_article = windows
    pages, times, flags, truths = [], [], [], []
    for article in traces:
        sel = win_article == article
        if not sel.any():
            continue
        p, tm, ch, tr = censor(traces[article], win_start[sel], win_end[sel], interval)
        pages.append(p + sum(len(x) for x in truths))
        times.append(tm)
        flags.append(ch)
        truths.append(tr)
    truth = np.concatenate(truths)
    est, capped = estimate_all(np.concatenate(pages), np.concatenate(times), np.concatenate(flags))
    ok = truth > 0
    rows = []
    for method, rate in est.items():
        ratio = rate[ok] / truth[ok]
        rows.append(
            {
                "interval_hours": interval,
                "method": method,
                "windows": int(ok.sum()),
                "median_ratio": float(np.median(ratio)),
                "pooled_ratio": float(rate[ok].sum() / truth[ok].sum()),
                "mean_abs_rel_error": float(np.mean(np.abs(ratio - 1))),
                "rmse_per_day": float(np.sqrt(np.mean((rate[ok] - truth[ok]) ** 2)) * 24),
                "share_all_changed": float(np.mean(capped[ok])),
            }
        )
    return rows


def _score_articles(traces: dict, interval: float) -> list[dict]:
    """Each article's whole history as one page, censored on a grid of ``interval`` hours."""
    parts = [censor(t, np.array([0.0]), np.array([t[-1]]), interval) for t in traces.values()]
    page = np.concatenate([p + j for j, (p, *_) in enumerate(parts)])
    est, _ = estimate_all(
        page,
        np.concatenate([tm for _, tm, _, _ in parts]),
        np.concatenate([ch for _, _, ch, _ in parts]),
        ARTICLE_METHODS,
    )
    truth = np.concatenate([tr for *_, tr in parts])
    return [
        {
            "article": article,
            "interval_hours": interval,
            "method": method,
            "truth_per_day": truth[j] * 24,
            "estimate_per_day": rate[j] * 24,
            "ratio": rate[j] / truth[j] if truth[j] > 0 else float("nan"),
        }
        for j, article in enumerate(traces)
        for method, rate in est.items()
    ]
