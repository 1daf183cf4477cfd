"""The forecast study's entry point :func:`run`: the design, every method's predictive and
scores, the level oracle and the hindsight reference, one :class:`ForecastResult`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.history import ChangeHistory, hours_of
from bayesrate.predictive import COVERAGE_TARGET, length_groups
from bayesrate.studies import Progress, silent
from bayesrate.studies.forecast.burst import burst_forecast
from bayesrate.studies.forecast.methods import (
    BURST_METHODS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_METHODS,
    FAST,
    RATE_FLOOR_CHANGES,
    checked_methods,
    checked_walks,
    method_configs,
    study_sampler,
)
from bayesrate.studies.forecast.predictions import hindsight_prediction, method_prediction
from bayesrate.studies.forecast.result import ForecastResult
from bayesrate.studies.forecast.scoring import MethodForecast, score
from bayesrate.studies.forecast.windows import design, iso_time, pit_noise_of
from bayesrate.studies.forecast.worlds import WORLDS, WorldCoverage

DESCRIPTION = "Forecast the future of real pages: every estimator and model vs the exact history"


def run(
    *,
    seed: int | str = "bayesrate-forecast",
    fast: bool = False,
    progress: Progress = silent,
    history: ChangeHistory | str | Path | None = None,
    dataset: str | None = None,
    crawl_every: float = 24.0,
    split: str | pd.Timestamp | float | None = None,
    horizon_days: float = DEFAULT_HORIZON_DAYS,
    methods: Sequence[str] | str = DEFAULT_METHODS,
    max_pages: int | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    predictive_draws: int = 500,
    worlds: int = WORLDS,
    model_config: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
    walks: str = "summed",
) -> ForecastResult:
    """Run the forecast study on a change history.

    Parameters
    ----------
    seed
        Seeds the crawl phases, the page subset, the draw subset and the PIT noise.
    fast
        Small run for smoke tests: :data:`FAST` (300 pages, short chains) unless given.
    progress
        Callback for one-line progress messages.
    history, dataset
        The exact (or approximate) change history: a :class:`ChangeHistory` or a file
        (``history``), or an embedded dataset name (``dataset``); exactly one.
    crawl_every
        The crawl interval in hours (training and test).
    split
        Training/test split (tz-aware timestamp or hours since the epoch); default the end
        of the history minus the horizon.
    horizon_days
        Length of the test window.
    methods
        Any of :data:`METHODS` or a registered model (:func:`bayesrate.models.register`;
        a sequence, or comma-separated text); default
        :data:`DEFAULT_METHODS`.
    max_pages
        Score a random subset of this many eligible pages.
    draws, tune, chains
        NUTS settings of the model fits (default :data:`STUDY_SAMPLER`).
    predictive_draws
        Posterior draws used for the predictive (a random subset of the fit's draws).
    worlds
        Worlds drawn from each method's predictive to show how far from 0.90 its coverage90
        falls when it is the truth (:func:`world_coverage`; 0: none).
    model_config
        Per model method, overrides of its ``model_config`` (e.g. ``{"dynamic":
        {"epoch_days": 365}}``), or ``"METHOD=JSON"`` texts (the CLI's
        ``--model-config``); recorded in each method's diagnostics.
    walks
        How the dynamic models' predictive treats each page's walk after the last fitted
        epoch: ``"summed"`` out on the grid (exact in the walk) or ``"sampled"``, one path
        per posterior draw (:func:`model_prediction`).
    """
    if not isinstance(history, ChangeHistory):
        from bayesrate.io.history import load_history

        history = load_history(dataset=dataset, path=history)
    elif dataset is not None:
        raise ObservationError("give a history or a dataset, not both", field="dataset")
    methods = checked_methods(methods, horizon_days)
    checked_walks(walks)
    configs = method_configs(model_config, methods)
    crawl_every_hours = float(crawl_every)
    if fast:
        max_pages = FAST["max_pages"] if max_pages is None else max_pages
        predictive_draws = min(predictive_draws, FAST["predictive_draws"])
    sampler = study_sampler(draws, tune, chains, seed, fast)
    horizon = horizon_days * HOURS_PER_DAY
    split_hours = history.end - horizon if split is None else hours_of(split, "split")
    t_start = time.perf_counter()
    seconds: dict[str, float] = {}
    d = design(
        history,
        crawl_every_hours=crawl_every_hours,
        split=split_hours,
        horizon_hours=horizon,
        seed=seed,
        max_pages=max_pages,
    )
    seconds["crawl_and_split"] = time.perf_counter() - t_start
    progress(
        f"forecast: {d.n_pages:,} pages, {d.train.n_visits:,} training visits, "
        f"{len(d.interval_start):,} test intervals ({seconds['crawl_and_split']:.1f} s)"
    )
    pit_noise = pit_noise_of(d, seed)
    by_length = length_groups(d)
    results: dict[str, MethodForecast] = {}
    for name in methods:
        t0 = time.perf_counter()
        if name in BURST_METHODS:
            results[name] = burst_forecast(
                d, pit_noise, worlds, f"{seed}-{name}", progress, mixture=name == "mmpp_mixture"
            )
            seconds[name] = results[name].seconds
            _report(progress, results[name])
            continue
        pred, groups, diag = method_prediction(
            name,
            d,
            by_length,
            sampler,
            predictive_draws,
            f"{seed}-{name}",
            progress,
            configs.get(name),
            walks,
        )
        results[name] = score(name, pred, groups, d, pit_noise, 0.0, diag, worlds, seed)
        seconds[name] = results[name].seconds = time.perf_counter() - t0
        _report(progress, results[name])
    from bayesrate.studies.level import level_oracle

    tau = by_length.key
    for m in results.values():
        m.level_factor, m.level_log_score = level_oracle(
            m.rate_per_hour, by_length.page, by_length.count, tau, d.detected
        )
    constant, constant_score = level_oracle(
        np.ones(d.n_pages), by_length.page, by_length.count, tau, d.detected
    )
    progress(
        "level oracle (each method's rates times the best single factor for the test "
        "window): "
        + ", ".join(
            f"{m.name} x{m.level_factor:.3f} {m.level_log_score:.4f}" for m in results.values()
        )
        + f"; one rate for every page {constant_score:.4f}"
    )
    reference = score("hindsight", hindsight_prediction(d, by_length), by_length, d, pit_noise, 0.0)
    seconds["total"] = time.perf_counter() - t_start
    stats = d.train.interval_stats
    return ForecastResult(
        source=history.source,
        split=iso_time(split_hours),
        horizon_days=float(horizon_days),
        crawl_every_hours=float(crawl_every_hours),
        pages=d.train.pages.index,
        domain=d.train.pages["domain"].to_numpy(),
        detected=d.detected,
        test_intervals=np.bincount(d.interval_page, minlength=d.n_pages),
        changed=d.window_changes > 0,
        true_rate=d.window_changes / d.window_hours,
        methods=results,
        training={
            "visits": d.train.n_visits,
            "intervals": d.train.n_intervals,
            "detected_changes": d.train.n_changes,
            "pages_never_changed": int((stats.n_changes == 0).sum()),
            "rate_floor": f"{RATE_FLOOR_CHANGES} change over each page's training exposure",
        },
        notes=(*d.notes, *history.notes),
        seconds=seconds,
        reference=reference,
        constant_rate_oracle=(constant, constant_score),
    )


def _report(progress: Progress, m: MethodForecast) -> None:
    progress(
        f"  {m.name}: log score {m.log_score:.4f}, Brier {m.brier:.4f}, coverage90 "
        f"{m.coverage90:.3f}{_worlds_text(m.worlds)}, rate log-RMSE "
        f"{m.rate_log_rmse:.3f} ({m.seconds:.1f} s)"
    )


def _worlds_text(w: WorldCoverage | None) -> str:
    if w is None:
        return ""
    return (
        f" (its own worlds {w.q05:.3f}-{w.q95:.3f}, {w.share_in_target:.0%} in "
        f"{COVERAGE_TARGET[0]}-{COVERAGE_TARGET[1]}; observed at their {w.observed_quantile:.0%})"
    )
