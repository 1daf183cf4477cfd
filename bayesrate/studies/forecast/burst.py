"""The forecast study's burst methods (``mmpp``, ``mmpp_mixture``): the two-state MMPP
fitted by maximum marginal likelihood and scored with its own exact predictive."""

from __future__ import annotations

import time

import numpy as np

from bayesrate.predictive import Worlds
from bayesrate.seeds import rng_from
from bayesrate.studies import Progress, silent
from bayesrate.studies.forecast.scoring import MethodForecast, method_forecast
from bayesrate.studies.forecast.windows import Design


def burst_forecast(
    d: Design,
    pit_noise: np.ndarray,
    worlds: int,
    seed: int | str,
    progress: Progress = silent,
    *,
    mixture: bool = False,
) -> MethodForecast:
    """The two-state MMPP (:mod:`bayesrate.estimators.mmpp`) fitted to the training visits
    and its exact predictive of each page's test detections: the quiet rate integrated over
    the page's posterior, the hidden state carried over from its last training visit
    (``mixture``: a fitted share of the pages steady, ``mmpp_mixture``)."""
    from bayesrate.estimators import mmpp

    name = "mmpp_mixture" if mixture else "mmpp"
    t0 = time.perf_counter()
    train = mmpp.VisitRuns.from_observations(d.train)
    fitted = mmpp.fit(train, mixture=mixture)
    diag = {
        "method": "maximum marginal likelihood (Nelder-Mead)",
        "converged": fitted.converged,
        "evaluations": fitted.evaluations,
        "train_loglik": fitted.loglik,
        "steady_share": fitted.steady_share,
        **fitted.params.as_dict(),
    }
    progress(
        f"  {name}: fitted in {time.perf_counter() - t0:.0f} s ({fitted.evaluations} "
        f"evaluations, {'converged' if fitted.converged else 'NOT converged'}): ratio "
        f"{fitted.params.ratio:.3g}, bursts {fitted.params.burst_days:.3g} d, quiet spells "
        f"{fitted.params.quiet_days:.3g} d, steady share {fitted.steady_share:.3g}"
    )
    offsets = np.searchsorted(d.interval_page, np.arange(d.n_pages + 1)).astype(np.int64)
    last_visit = d.train.time[d.train.offsets[1:] - 1]
    k = d.detected
    rng = rng_from(f"{seed}-worlds")
    pred = mmpp.window_predictive(
        fitted,
        train,
        offsets,
        d.interval_end - d.interval_start,
        d.split - last_visit,
        d.window_hours,
        k,
    )
    prob_k, cdf_below = pred.at(k)
    expected = np.array([pmf @ np.arange(len(pmf)) for pmf in pred.pmf])
    drawn = None
    if worlds:
        drawn = (Worlds(pred.sample(worlds, rng), rng.random((worlds, d.n_pages))), pred.at)
    return method_forecast(
        name,
        d,
        prob_k,
        cdf_below,
        pit_noise,
        pred.prob_change,
        pred.mean_rate,
        expected,
        time.perf_counter() - t0,
        diag,
        drawn,
    )
