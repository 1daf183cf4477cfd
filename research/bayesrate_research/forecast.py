"""The research models' forecast predictives (``forecast_groups`` / ``forecast_predictive``
of :class:`~bayesrate_research.models.shocks.ShockModel` and its subclasses, and of
:class:`~bayesrate_research.models.bursty.BurstyModel`), moved with them out of
:mod:`bayesrate.studies.forecast` (issue #51). The study scores what they return.
"""

from __future__ import annotations

import numpy as np

from bayesrate.predictive import Groups, Prediction
from bayesrate.seeds import rng_from


def epoch_groups(d, model) -> Groups:
    """Test intervals grouped by (page, hours per epoch) on a shocks model's fitted grid."""
    from bayesrate_research.models.epochs import interval_patterns

    grid = model.fitted_grid()
    patterns = interval_patterns(
        d.interval_start,
        d.interval_end,
        d.interval_page,
        d.interval_truth > 0,
        d.train.domain_codes,
        d.n_pages,
        grid.anchor,
        grid.epoch_hours,
        first_epoch=grid.first_epoch,
    )
    g = patterns.groups
    return Groups(g.page, g.trials, g.pattern, epochs=patterns)


def bursty_prediction(post, d, groups: Groups, base, keep, mean_rate) -> Prediction:
    """The bursty model's predictive: each test interval Gamma-mixed with its domain's ``κ``.

    The window ("changes at all") is taken as the page's test intervals' worth of intervals
    of their mean length: ``κ_window = κ · window / τ̄`` (the same formula, exact when the
    window is a whole number of equal intervals).
    """
    from bayesrate.constants import DIM_DOMAIN
    from bayesrate.draws import stack_draws

    kappa = np.exp(stack_draws(post["log_kappa"], DIM_DOMAIN)[keep])[:, d.train.domain_codes]
    span = np.bincount(
        d.interval_page, weights=d.interval_end - d.interval_start, minlength=d.n_pages
    )
    intervals = np.bincount(d.interval_page, minlength=d.n_pages)
    return Prediction(
        group_lambda=base[:, groups.page] * groups.key[None, :],
        window_lambda=base * d.window_hours[None, :],
        rate_per_hour=mean_rate,
        group_shape=kappa[:, groups.page],
        window_shape=kappa * (d.window_hours * intervals / span)[None, :],
    )


def shock_prediction(
    model, d, groups: Groups, base, keep, mean_rate, seed: int | str
) -> Prediction:
    """The shocks model's predictive: fitted shocks for the fitted epochs, fresh draws of the
    shock distribution (global, and per domain for the domains with shocks of their own; per
    posterior draw) for every later epoch:
    independent shocks, or (``random_walk``) steps from the last fitted level. The mass-edit
    model adds its edit rate, fitted and then drawn afresh likewise."""
    from bayesrate.constants import DIM_EPOCH
    from bayesrate_research.models.epochs import interval_patterns, log_exposure_draws
    from bayesrate_research.models.mass_edits import EDIT_RATE

    n_fitted = model.idata_["posterior"].sizes[DIM_EPOCH]
    grid = model.fitted_grid()
    window = interval_patterns(
        np.full(d.n_pages, d.split),
        d.split + d.window_hours,
        np.arange(d.n_pages),
        np.zeros(d.n_pages),
        d.train.domain_codes,
        d.n_pages,
        grid.anchor,
        grid.epoch_hours,
        first_epoch=grid.first_epoch,
    )
    n_epochs = max(groups.epochs.n_epochs, window.n_epochs, n_fitted)
    shock = fitted_and_future_shocks(model, keep, n_epochs - n_fitted, seed)
    group_lambda = (
        base[:, groups.page] * np.exp(log_exposure_draws(groups.epochs, shock))[:, groups.key]
    )
    window_lambda = (
        base[:, window.groups.page]
        * np.exp(log_exposure_draws(window, shock))[:, window.groups.pattern]
    )
    if EDIT_RATE in model.idata_["posterior"]:  # mass edits: the added rate on top
        edit = fitted_and_future_edits(model, keep, n_epochs - n_fitted, seed)
        group_lambda += np.exp(log_exposure_draws(groups.epochs, edit))[:, groups.key]
        window_lambda += np.exp(log_exposure_draws(window, edit))[:, window.groups.pattern]
    return Prediction(
        group_lambda=group_lambda, window_lambda=window_lambda, rate_per_hour=mean_rate
    )


def fitted_and_future_edits(model, keep, n_new: int, seed: int | str) -> np.ndarray:
    """``(draws, domains, fitted + n_new epochs)``: each kept draw's fitted edit log-rates,
    then fresh draws of their distribution (global, and per domain for the domains with
    effects of their own) for ``n_new`` later epochs; the global level independent per
    epoch or (``edit_process: ar1``) continued from its last fitted value
    (:func:`~bayesrate_research.models.mass_edits.future_global_edits`)."""
    from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH
    from bayesrate.draws import stack_draws
    from bayesrate_research.models.mass_edits import (
        EDIT_GLOBAL,
        EDIT_MEAN,
        EDIT_PERSISTENCE,
        EDIT_RATE,
        SIGMA_EDIT_DOMAIN,
        SIGMA_EDIT_GLOBAL,
        future_global_edits,
    )

    post = model.idata_["posterior"]
    fitted = stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH)[keep]
    rng = rng_from(f"{seed}-future-edits")
    n_draws, n_domains = fitted.shape[:2]
    mean = stack_draws(post[EDIT_MEAN])[keep]
    sigma_g = stack_draws(post[SIGMA_EDIT_GLOBAL])[keep]
    z = rng.standard_normal((n_draws, n_new))
    phi = last = None
    if EDIT_PERSISTENCE in post:
        phi = stack_draws(post[EDIT_PERSISTENCE])[keep]
        last = stack_draws(post[EDIT_GLOBAL], DIM_EPOCH)[keep, -1]
    future = future_global_edits(mean, sigma_g, z, n_new, last, phi)[:, None, :]
    if SIGMA_EDIT_DOMAIN in post:
        own = model.shocked_domains(model.data_).astype(float)[None, :, None]
        sigma_d = stack_draws(post[SIGMA_EDIT_DOMAIN])[keep][:, None, None]
        future = future + sigma_d * rng.standard_normal((n_draws, n_domains, n_new)) * own
    return np.concatenate([fitted, np.broadcast_to(future, (n_draws, n_domains, n_new))], axis=2)


def fitted_and_future_shocks(model, keep, n_new: int, seed: int | str) -> np.ndarray:
    """``(draws, domains, fitted + n_new epochs)``: each kept draw's fitted shocks, then
    fresh draws of the shock distribution (global, and per domain for the domains with
    shocks of their own) for ``n_new`` later epochs: independent, (``random_walk``) steps
    from the last fitted level, or (``ar1``) the global path continued from its last fitted
    value (:func:`~bayesrate_research.models.shocks.ar1_continue`) with independent domain parts."""
    from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH
    from bayesrate.draws import stack_draws
    from bayesrate_research.models.shocks import ar1_continue

    post = model.idata_["posterior"]
    fitted = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)[keep]
    rng = rng_from(f"{seed}-future-shocks")
    n_draws, n_domains = fitted.shape[:2]
    future = np.zeros((n_draws, n_domains, n_new))
    own = model.shocked_domains(model.data_).astype(float)[None, :, None]
    process = model.model_config["shock_process"]
    ar1 = process == "ar1" and "shock_persistence" in post  # (not with a single epoch)
    for name, shape, mask in (
        ("sigma_shock_global", (n_draws, 1, n_new), 1.0),
        ("sigma_shock_domain", (n_draws, n_domains, n_new), own),
    ):
        if name in post and not (ar1 and name == "sigma_shock_global"):
            sigma = stack_draws(post[name])[keep]
            future += sigma[:, None, None] * rng.standard_normal(shape) * mask
    if process == "random_walk":  # on from the last level
        future = fitted[:, :, -1:] + np.cumsum(future, axis=2)
    elif ar1:
        mean, phi, sigma = (
            stack_draws(post[k])[keep]
            for k in ("shock_mean_global", "shock_persistence", "sigma_shock_global")
        )
        last = stack_draws(post["shock_path_global"], DIM_EPOCH)[keep, -1]
        z = rng.standard_normal((n_draws, n_new))
        future += ar1_continue(last, mean, phi, sigma, z, n_new)[:, None, :]
    return np.concatenate([fitted, future], axis=2)


def domain_quantiles(draws) -> dict[str, list[float]]:
    """Per domain, the 5%, 50% and 95% posterior quantiles of ``draws`` (chain, draw, domain)."""
    from bayesrate.constants import DIM_DOMAIN

    q = draws.quantile([0.05, 0.5, 0.95], dim=("chain", "draw")).transpose(DIM_DOMAIN, ...)
    rows = zip(q[DIM_DOMAIN].values, q.values, strict=True)
    return {str(d): [float(v) for v in row] for d, row in rows}
