"""Each method's predictive for the test intervals: the point estimators' plug-in rates
(floored at :data:`~bayesrate.studies.forecast.methods.RATE_FLOOR_CHANGES` change over the
page's training exposure), a fitted model's own posterior predictive, and the hindsight
reference that knows each page's realised test rate."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesrate.constants import DIM_PAGE
from bayesrate.predictive import Groups, Prediction, length_groups
from bayesrate.seeds import rng_from
from bayesrate.studies import Progress
from bayesrate.studies.forecast.methods import POINT_METHODS, RATE_FLOOR_CHANGES, checked_walks
from bayesrate.studies.forecast.windows import Design

if TYPE_CHECKING:
    from bayesrate.models.walk_forecast import WalkForecast


def closing_epoch_groups(d: Design, model) -> Groups:
    """Test intervals grouped as a dynamic model's predictive needs them: by (page, column
    of the closing visit's epoch on its grid, length)."""
    return model.forecast_groups(d, length_groups(d))


def point_prediction(name: str, d: Design, groups: Groups) -> Prediction:
    """Plug-in prediction of a batch estimator, floored at RATE_FLOOR_CHANGES / exposure."""
    from bayesrate.estimators import batch

    stats = d.train.interval_stats
    estimate = batch.mle(stats, interval=None) if name == "mle" else batch.BATCH[name](stats)
    rate = np.maximum(estimate.rate, RATE_FLOOR_CHANGES / stats.exposure)
    return Prediction(
        group_lambda=(rate[groups.page] * groups.key)[None, :],
        window_lambda=(rate * d.window_hours)[None, :],
        rate_per_hour=rate,
    )


def hindsight_prediction(d: Design, groups: Groups) -> Prediction:
    """The realised rate of each page over its test intervals: a reference that knows the
    future (no floor: a page without a change in its test intervals has no detection)."""
    span = np.bincount(
        d.interval_page, weights=d.interval_end - d.interval_start, minlength=d.n_pages
    )
    rate = np.bincount(d.interval_page, weights=d.interval_truth, minlength=d.n_pages) / span
    return Prediction(
        group_lambda=(rate[groups.page] * groups.key)[None, :],
        window_lambda=(rate * d.window_hours)[None, :],
        rate_per_hour=rate,
    )


def model_prediction(
    model, d: Design, groups: Groups, n_draws: int, seed: int | str, walks: str = "summed"
) -> Prediction | WalkForecast:
    """Posterior predictive integrated rates of a fitted model, on ``n_draws`` draws: the
    model's own :meth:`~bayesrate.models.base.RateModel.forecast_predictive`.

    A dynamic model's page walks after the last fitted epoch are summed out on its grid
    (``walks="summed"``, :mod:`bayesrate.models.walk_forecast`) or sampled, one path per
    draw (``"sampled"``: integrated rates per draw, as :mod:`bayesrate.studies.level`
    needs; for a grid fit the same law with Monte Carlo error in the tails, for a Laplace
    fit its states start from the Normal approximation of its ``log_rate`` draws instead
    of the grid's filtered distribution).
    """
    from bayesrate.draws import stack_draws

    checked_walks(walks)
    n_total = stack_draws(model.idata_["posterior"]["log_rate"], DIM_PAGE).shape[0]
    keep = np.sort(rng_from(f"{seed}-draws").permutation(n_total)[:n_draws])
    return model.forecast_predictive(d, groups, keep, seed, walks)


def method_prediction(
    name: str,
    d: Design,
    by_length: Groups,
    sampler: dict[str, int | str],
    predictive_draws: int,
    seed: str,
    progress: Progress,
    model_config: dict[str, Any] | None = None,
    walks: str = "summed",
) -> tuple[Prediction | WalkForecast, Groups, dict | None]:
    """One method's predictive for the test intervals, its groups and its fit diagnostics
    (``walks``: see :func:`model_prediction`)."""
    if name in POINT_METHODS:
        return point_prediction(name, d, by_length), by_length, None
    from bayesrate.quick_fit import describe_fit, fit_model

    t0 = time.perf_counter()
    model = fit_model(name, d.train, sampler, model_config, progress=progress)
    diag = model.diagnostics_.to_dict()
    if model_config:
        diag["model_config_overrides"] = dict(model_config)
    diag.update(model.forecast_diagnostics())
    progress(f"  {name}: fitted in {time.perf_counter() - t0:.0f} s; {describe_fit(diag)}")
    groups = model.forecast_groups(d, by_length)
    return model_prediction(model, d, groups, predictive_draws, seed, walks), groups, diag
