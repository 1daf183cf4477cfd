"""Do changes come in bursts? The two-state MMPP against the Poisson, on held-out time.

The models (:mod:`bayesrate.estimators.mmpp`) give every page a quiet log-rate from one
fitted log-normal population; the MMPP adds a burst state (rate ``r`` times the quiet
one) entered and left at shared switching rates, so detections cluster in time;
``mmpp_mixture`` makes a fitted share of the pages steady (Poisson) and the others
bursty. Each is
fitted by maximum marginal likelihood on the training part of every page's visit sequence
and judged on what it did not see:

- **held-out log score**: ``log p(test detections | training detections)`` per page, the
  test sequence scored interval by interval with the page's rate and hidden state carried
  over the split (nats per page, and per test interval);
- **gap check**: the coefficient of variation of the gaps between detections
  (:func:`bayesrate.checks.ppc.gap_cv`, pages with at least five detections) of the
  training sequences, against replicates drawn on the same visit times from each fit
  (each page's rate from its own posterior: the conditional replication);
- **weekly checks** on the same replicates: detections by hour of day and by day of week
  of the detecting visit (chi-square against the replicates' mean shares, scaled to each
  sequence's total: the shape over the cycle, UTC), the mean detections per page, and the
  mean share of a page's detections in its busiest hour-of-week cell (scheduled jobs);
- **intervals**: 90% large-sample intervals of each fit's shared parameters
  (:func:`bayesrate.estimators.mmpp.information`).

Data: a change history crawled on a fixed grid and cut at ``split`` (the forecast study's
design, :func:`bayesrate.studies.forecast.design`), or with ``crawl_log=True`` an embedded
crawl log as recorded (Open Terms Archive's own visit grid), cut at the same instant.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY, N_HOURS_OF_DAY
from bayesrate.errors import ObservationError
from bayesrate.estimators import mmpp
from bayesrate.observations import Observations, concat_ranges
from bayesrate.seeds import rng_from
from bayesrate.studies import Progress, StudyResult, silent
from bayesrate.sufficient import interval_arrays

DESCRIPTION = (
    "bursts: a two-state Markov-modulated Poisson process (and a mixture of bursty and "
    "steady pages) against the Poisson, fitted on "
    "each page's history up to a split and scored on the year after it, with a gap check"
)
MODELS = ("poisson", "mmpp", "mmpp_mixture")
#: small run for smoke tests
FAST = {"max_pages": 60, "replicates": 20, "max_evaluations": 40}


@dataclass(frozen=True)
class _Sequences:
    train_obs: Observations
    train: mmpp.VisitRuns
    full: mmpp.VisitRuns
    test_intervals: np.ndarray
    notes: tuple[str, ...]


def _from_history(dataset, history, crawl_every, split, horizon_hours, seed, max_pages):
    from bayesrate.history import hours_of
    from bayesrate.io.history import load_history
    from bayesrate.studies.forecast import design

    hist = load_history(dataset=dataset, path=history)
    split_hours = hist.end - horizon_hours if split is None else hours_of(split, "split")
    d = design(
        hist,
        crawl_every_hours=crawl_every,
        split=split_hours,
        horizon_hours=horizon_hours,
        seed=seed,
        max_pages=max_pages,
    )
    train = mmpp.VisitRuns.from_observations(d.train)
    page, tau, flag = interval_arrays(d.train)
    page = np.concatenate([page, d.interval_page])
    tau = np.concatenate([tau, d.interval_end - d.interval_start])
    flag = np.concatenate([flag, (d.interval_truth > 0).astype(np.int64)])
    order = np.argsort(page, kind="stable")
    full = mmpp.VisitRuns.from_intervals(page[order], tau[order], flag[order], d.n_pages)
    tests = np.bincount(d.interval_page, minlength=d.n_pages)
    return _Sequences(d.train, train, full, tests, (*d.notes, *hist.notes)), split_hours


def _from_crawl_log(dataset, split, horizon_hours, seed, max_pages):
    from bayesrate import datasets
    from bayesrate.history import hours_of

    obs = datasets.load(dataset)
    split_hours = (obs.time.max() - horizon_hours) if split is None else hours_of(split, "split")
    stop = split_hours + horizon_hours
    n_train = np.bincount(obs.page_of_visit[obs.time <= split_hours], minlength=obs.n_pages)
    n_full = np.bincount(obs.page_of_visit[obs.time <= stop], minlength=obs.n_pages)
    chosen = np.flatnonzero((n_train >= 2) & (n_full > n_train))
    notes = [f"{len(chosen)} of {obs.n_pages} pages have a training and a test interval"]
    if max_pages is not None and len(chosen) > max_pages:
        chosen = np.sort(rng_from(f"{seed}-pages").choice(chosen, max_pages, replace=False))
        notes.append(f"a random subset of {max_pages} of them")
    if len(chosen) == 0:
        raise ObservationError("no page has visits on both sides of the split", field="split")

    def cut(counts):
        idx = concat_ranges(obs.offsets[chosen], counts)
        return Observations(
            pages=obs.pages.iloc[chosen].copy(),
            offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            time=obs.time[idx],
            changed=obs.changed[idx],
            time_kind=obs.time_kind,
            source=obs.source,
        )

    train_obs = cut(n_train[chosen])
    full_obs = cut(n_full[chosen])
    seqs = _Sequences(
        train_obs,
        mmpp.VisitRuns.from_observations(train_obs),
        mmpp.VisitRuns.from_observations(full_obs),
        (n_full - n_train)[chosen],
        (*notes, *obs.notes),
    )
    return seqs, split_hours


#: the clock of the weekly checks (the crawl logs' and histories' times are UTC)
CHECK_TIMEZONE = "UTC"


def _replicate_checks(fitted, seqs: _Sequences, replicates: int, seed: str) -> list:
    """The training sequences against ``replicates`` replicated ones, on five statistics.

    Mean detections per page; gap CV (:func:`~bayesrate.checks.ppc.gap_cv`) of whole
    sequences; detections by hour of day and by day of week of the detecting visit as
    chi-square discrepancies against the replicates' mean shares scaled to each
    sequence's own total (the cycle's shape, one reference for observed and replicated
    alike); the mean share of a page's detections in its busiest hour-of-week cell (pages
    with :data:`~bayesrate.checks.ppc.MIN_DETECTIONS_FOR_GAPS` detections; scheduled jobs).
    """
    from bayesrate.checks.ppc import (
        MIN_DETECTIONS_FOR_GAPS,
        N_DAYS,
        N_HOURS_OF_WEEK,
        PPCStatistic,
        gap_cv,
        top_cell_share,
    )
    from bayesrate.clock import hour_of_week

    obs = seqs.train_obs
    keep = ~obs.is_baseline
    bucket = hour_of_week(obs.time[keep], CHECK_TIMEZONE)
    hour, day = bucket % N_HOURS_OF_DAY, bucket // N_HOURS_OF_DAY
    eligible = obs.changes_per_page >= MIN_DETECTIONS_FOR_GAPS
    position = np.cumsum(eligible) - 1
    page = obs.page_of_visit[keep]
    periodic = eligible[page]
    cell = position[page[periodic]] * N_HOURS_OF_WEEK + bucket[periodic]
    shape = (int(eligible.sum()), N_HOURS_OF_WEEK)

    def statistics(flags_of_intervals):
        flags = np.zeros(obs.n_visits, dtype=np.int8)
        flags[keep] = flags_of_intervals
        shares = top_cell_share(
            np.bincount(
                cell, weights=flags_of_intervals[periodic], minlength=shape[0] * shape[1]
            ).reshape(shape)
        )
        shares = shares[np.isfinite(shares)]
        return (
            gap_cv(flags, obs.time, obs.offsets)[0],
            np.bincount(hour, weights=flags_of_intervals, minlength=N_HOURS_OF_DAY),
            np.bincount(day, weights=flags_of_intervals, minlength=N_DAYS),
            float(shares.mean()) if len(shares) else float("nan"),
        )

    observed = statistics(obs.changed[keep].astype(np.float64))
    rng = rng_from(seed)
    reps = [
        statistics(mmpp.replicate_changes(fitted, seqs.train, rng).astype(np.float64))
        for _ in range(replicates)
    ]
    gaps, hours, days, tops = (np.array(column) for column in zip(*reps, strict=True))

    def chi2(observed_counts, replicated_counts):
        """Of each sequence's counts against the replicates' mean shares scaled to its own
        total: the shape over the cycle, whatever the number of detections."""
        totals = replicated_counts.sum(axis=1, keepdims=True)
        share = (replicated_counts / np.maximum(totals, 1.0)).mean(axis=0)
        share = np.maximum(share, 1e-12)

        def t(counts):
            expected = counts.sum(axis=-1, keepdims=True) * share
            return np.sum((counts - expected) ** 2 / np.maximum(expected, 1e-9), axis=-1)

        return float(t(observed_counts)), t(replicated_counts)

    n_pages = obs.n_pages
    return [
        PPCStatistic(
            "mean_detections",
            observed[2].sum() / n_pages,
            days.sum(axis=1) / n_pages,
            "mean detections per page",
        ),
        PPCStatistic("gap_cv", observed[0], gaps, "mean CV of gaps between detections"),
        PPCStatistic(
            "hour_of_day_chi2",
            *chi2(observed[1], hours),
            f"chi-square of detections by hour of day ({CHECK_TIMEZONE})",
            "upper",
        ),
        PPCStatistic(
            "day_of_week_chi2",
            *chi2(observed[2], days),
            f"chi-square of detections by day of week ({CHECK_TIMEZONE})",
            "upper",
        ),
        PPCStatistic(
            "top_hour_of_week_share",
            observed[3],
            tops,
            "mean share of a page's detections in its busiest hour-of-week cell",
            "upper",
        ),
    ]


def run(
    *,
    seed: int | str = "bayesrate-bursts",
    fast: bool = False,
    progress: Progress = silent,
    dataset: str | None = "ota-contrib",
    history: str | None = None,
    crawl_log: bool = False,
    crawl_every: float = 24.0,
    split: str | float | None = None,
    horizon_days: float = 365.0,
    max_pages: int | None = None,
    replicates: int = 200,
    max_evaluations: int = 300,
) -> StudyResult:
    """Fit both models before ``split`` and score them on the ``horizon_days`` after it.

    Parameters
    ----------
    seed
        Seeds the crawl phases, the page subset and the replicates.
    fast
        Small run for smoke tests (:data:`FAST`).
    progress
        Callback for one-line progress messages.
    dataset, history
        An embedded dataset, or a change-history file (``history``; then ``dataset`` is
        ignored).
    crawl_log
        Use the dataset's crawl log as recorded instead of crawling its history.
    crawl_every
        The crawl interval in hours (histories only).
    split
        Training/test split (tz-aware timestamp); default the end minus the horizon.
    horizon_days
        Length of the test window.
    max_pages
        A random subset of this many eligible pages.
    replicates
        Replicated training sequences per model for the gap check.
    max_evaluations
        Cap on the MMPP's Nelder–Mead evaluations.
    """
    from bayesrate.checks.ppc import MIN_DETECTIONS_FOR_GAPS

    if fast:
        max_pages = FAST["max_pages"] if max_pages is None else max_pages
        replicates = min(replicates, FAST["replicates"])
        max_evaluations = min(max_evaluations, FAST["max_evaluations"])
    horizon = float(horizon_days) * HOURS_PER_DAY
    t0 = time.perf_counter()
    if crawl_log:
        if history is not None:
            raise ObservationError("crawl_log needs an embedded dataset, not a history file")
        seqs, split_hours = _from_crawl_log(dataset, split, horizon, str(seed), max_pages)
    else:
        seqs, split_hours = _from_history(
            None if history else dataset,
            history,
            float(crawl_every),
            split,
            horizon,
            str(seed),
            max_pages,
        )
    source = seqs.train_obs.source
    progress(
        f"bursts: {seqs.train.n_pages:,} pages, {int(seqs.train.count.sum()):,} training "
        f"intervals in {seqs.train.n_runs:,} runs, {int(seqs.test_intervals.sum()):,} test "
        f"intervals ({time.perf_counter() - t0:.1f} s)"
    )
    rows: list[dict[str, Any]] = []
    fits = {}
    for name in MODELS:
        t1 = time.perf_counter()
        fitted = mmpp.fit(
            seqs.train,
            poisson=name == "poisson",
            mixture=name == "mmpp_mixture",
            max_evaluations=max_evaluations,
        )
        fit_seconds = time.perf_counter() - t1
        intervals = mmpp.information(fitted, seqs.train)
        score = mmpp.heldout_log_score(fitted, seqs.train, seqs.full)
        checks = _replicate_checks(fitted, seqs, replicates, f"{seed}-{name}-gaps")
        check_columns = {}
        for stat in checks:
            check_columns[f"{stat.name}_observed"] = stat.observed_value
            check_columns[f"{stat.name}_replicated"] = float(np.mean(stat.replicated))
            check_columns[f"{stat.name}_q05"] = float(np.quantile(stat.replicated, 0.05))
            check_columns[f"{stat.name}_q95"] = float(np.quantile(stat.replicated, 0.95))
            check_columns[f"{stat.name}_p"] = stat.p_value
        p_value = check_columns["gap_cv_p"]
        fits[name] = fitted
        rows.append(
            {
                "model": name,
                "train_loglik": fitted.loglik,
                "heldout_log_score_per_page": float(score.mean()),
                "heldout_log_score_per_interval": float(score.sum() / seqs.test_intervals.sum()),
                **check_columns,
                "fit_seconds": fit_seconds,
                "evaluations": fitted.evaluations,
                "converged": fitted.converged,
                "steady_share": fitted.steady_share,
                **fitted.params.as_dict(),
                "identified": intervals.identified,
                **{
                    f"{key}_{end}90": bound
                    for key, pair in intervals.interval(0.9).items()
                    for end, bound in zip(("lo", "hi"), pair, strict=True)
                },
            }
        )
        progress(
            f"  {name}: held-out {rows[-1]['heldout_log_score_per_page']:.4f} nats/page, "
            f"gap CV {check_columns['gap_cv_observed']:.3f} observed vs "
            f"{check_columns['gap_cv_replicated']:.3f} (p {p_value:.3f}), day of week p "
            f"{check_columns['day_of_week_chi2_p']:.3f} ({fit_seconds:.1f} s)"
        )
    table = pd.DataFrame(rows)
    score = table.set_index("model")["heldout_log_score_per_page"]
    summary = {
        "source": source,
        "crawl_log": bool(crawl_log),
        "split": pd.Timestamp(split_hours * 3600.0, unit="s", tz="UTC").isoformat(),
        "horizon_days": float(horizon_days),
        "pages": seqs.train.n_pages,
        "training_intervals": int(seqs.train.count.sum()),
        "training_runs": seqs.train.n_runs,
        "test_intervals": int(seqs.test_intervals.sum()),
        "min_detections_for_gaps": MIN_DETECTIONS_FOR_GAPS,
        "train_loglik_gain": {
            m: fits[m].loglik - fits["poisson"].loglik for m in MODELS if m != "poisson"
        },
        "heldout_gain_per_page": {
            m: float(score[m] - score["poisson"]) for m in MODELS if m != "poisson"
        },
        "models": {r["model"]: r for r in rows},
        "notes": list(seqs.notes),
        "seconds": time.perf_counter() - t0,
    }
    text = table[
        [
            "model",
            "heldout_log_score_per_page",
            "heldout_log_score_per_interval",
            "gap_cv_observed",
            "gap_cv_replicated",
            "gap_cv_p",
            "mean_detections_p",
            "day_of_week_chi2_p",
            "hour_of_day_chi2_p",
            "top_hour_of_week_share_p",
            "ratio",
            "ratio_lo90",
            "ratio_hi90",
            "burst_days",
            "burst_days_lo90",
            "burst_days_hi90",
            "quiet_days",
            "burst_share",
            "steady_share",
        ]
    ].to_string(index=False, float_format=lambda v: f"{v:.4g}")
    return StudyResult("bursts", tables={"bursts": table}, summary=summary, text=text)
