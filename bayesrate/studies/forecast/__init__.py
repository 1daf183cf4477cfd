"""Forecast study: which method predicts the future of real pages? (``docs/histories.md``)

Every page alive at the ``split`` is crawled on a fixed schedule (every ``crawl_every_hours``,
a random phase per page) from the start of the history: the visits up to the split are the
censored training data, the only thing a method sees. The same schedule continues through
the test window ``(split, split + horizon]``; its intervals (the first one starts at the last
training visit) carry the exact number of changes from the history. Each method predicts,
per page:

- the number ``k`` of test intervals with a detected change: for the Bayesian models the
  posterior predictive (per posterior draw the count is a sum of Binomials over the page's
  test intervals grouped by integrated rate, mixed over draws); for the point estimators the
  plug-in Binomial with ``λ̂`` floored at :data:`RATE_FLOOR_CHANGES` change over the page's
  training exposure (so a page that never changed does not get probability 0);
- the probability that the page changes at all in the test window (until it is deleted).

Scores (``ForecastResult.to_json()``): ``log_score``, the mean over pages of
``log P(k)``; ``brier``, the Brier score of "changed at all" against the exact history;
``coverage90``, the fraction of pages whose randomised PIT value ``u = F(k − 1) + V·P(k)``
(``V`` uniform, common to all methods) lies in ``[0.05, 0.95]`` — 0.90 in expectation for a
calibrated predictive even when most counts are 0 or 1; and ``rate_log_rmse``, the RMSE of
``log`` predicted rate against ``log`` realised exact rate over pages with at least one
true change in the window (the rate a Bayesian model predicts is its posterior mean).

:func:`run` is the library entry point (``bayesrate study forecast`` is a thin layer over
it, :mod:`bayesrate.commands.study`); the figures are :func:`bayesrate.plots.forecast_calibration`,
:func:`~bayesrate.plots.forecast_pit` and :func:`~bayesrate.plots.forecast_log_scores`.

The modules, one idea each: :mod:`.windows` (the crawl, the split and each page's test
window), :mod:`.methods` (the methods and the run's options), :mod:`.predictions` (each
method's predictive), :mod:`.worlds` (coverage90 of worlds drawn from a method's own
predictive), :mod:`.scoring` (the scores of one prediction), :mod:`.burst` (the MMPP's fit and
exact predictive), :mod:`.result` (:class:`ForecastResult`: tables, JSON, figures) and
:mod:`.runner` (:func:`run`). This package re-exports their public names.
"""

from __future__ import annotations

from bayesrate.history import hours_of
from bayesrate.predictive import (
    Worlds,
    count_pmf,
    in_pit_band,
    length_groups,
    pmf_at,
)
from bayesrate.studies.forecast.burst import burst_forecast
from bayesrate.studies.forecast.methods import (
    BURST_METHODS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_METHODS,
    FAST,
    METHODS,
    MODEL_METHODS,
    ON_REQUEST,
    POINT_METHODS,
    RATE_FLOOR_CHANGES,
    RECOMMENDED_METHOD,
    STUDY_SAMPLER,
    WALKS,
    checked_methods,
    checked_walks,
    method_configs,
    study_sampler,
)
from bayesrate.studies.forecast.predictions import (
    closing_epoch_groups,
    hindsight_prediction,
    method_prediction,
    model_prediction,
    point_prediction,
)
from bayesrate.studies.forecast.result import ForecastResult
from bayesrate.studies.forecast.runner import DESCRIPTION, run
from bayesrate.studies.forecast.scoring import (
    FIT_GATES,
    Binomials,
    MethodForecast,
    count_predictive,
    method_forecast,
    score,
)
from bayesrate.studies.forecast.windows import Design, design, iso_time, pit_noise_of
from bayesrate.studies.forecast.worlds import WORLDS, WorldCoverage, draw_worlds, world_coverage

__all__ = [
    "BURST_METHODS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_METHODS",
    "DESCRIPTION",
    "FAST",
    "FIT_GATES",
    "METHODS",
    "MODEL_METHODS",
    "ON_REQUEST",
    "POINT_METHODS",
    "RATE_FLOOR_CHANGES",
    "RECOMMENDED_METHOD",
    "STUDY_SAMPLER",
    "WALKS",
    "WORLDS",
    "Binomials",
    "Design",
    "ForecastResult",
    "MethodForecast",
    "WorldCoverage",
    "Worlds",
    "burst_forecast",
    "checked_methods",
    "checked_walks",
    "closing_epoch_groups",
    "count_pmf",
    "count_predictive",
    "design",
    "draw_worlds",
    "hindsight_prediction",
    "hours_of",
    "in_pit_band",
    "iso_time",
    "length_groups",
    "method_configs",
    "method_forecast",
    "method_prediction",
    "model_prediction",
    "pit_noise_of",
    "pmf_at",
    "point_prediction",
    "run",
    "score",
    "study_sampler",
    "world_coverage",
]
