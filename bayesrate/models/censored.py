"""Interval-censored Poisson model, one independent rate per page.

Each page's intervals, grouped by length ``τ``, are Binomial: ``c`` of ``n`` intervals with
a detected change, ``p = 1 − e^{−λτ}`` (:mod:`bayesrate.models.likelihood`); exact for any
interval lengths.

Priors (``model_config``, rates **per day** for readability):

``prior = "gamma"``
    ``λ_day ~ Gamma(alpha, beta_days)``; sampled on the log scale (PyMC's log transform).
    ``alpha = 1`` with ``beta_days → 0`` is flat in λ (its posterior mode is the MLE).
``prior = "lognormal"``
    ``log λ_day ~ Normal(log_mean_per_day, log_sd)``.

A new page (:meth:`~bayesrate.models.base.RateModel.predict`) draws its rate from the same
fixed prior.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_PAGE, HOURS_PER_DAY
from bayesrate.models.base import RateModel, check_config_numbers

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations


class CensoredModel(RateModel):
    """Independent per-page rates under the exact interval-censored likelihood."""

    model_type: ClassVar[str] = "censored"
    default_model_config: ClassVar[dict[str, Any]] = {
        "prior": "gamma",
        "alpha": 1.0,
        "beta_days": 1.0,
        "log_mean_per_day": 0.0,
        "log_sd": 2.0,
    }

    #: a fixed prior: leaving a page out is exact
    exact_loo: ClassVar[bool] = True

    def _validate_config(self) -> None:
        cfg = self.model_config
        if cfg["prior"] not in ("gamma", "lognormal"):
            raise ValueError(f"prior must be 'gamma' or 'lognormal', got {cfg['prior']!r}")
        check_config_numbers(
            cfg, positive=("alpha", "beta_days", "log_sd"), finite=("log_mean_per_day",)
        )

    def _prior_log_rates(self, name: str):
        """Log page rates per hour drawn from the fixed prior, as variable ``name``."""
        import pymc as pm
        import pytensor.tensor as pt

        cfg = self.model_config
        if cfg["prior"] == "gamma":
            # λ per hour ~ Gamma(alpha, beta_days · 24 h/day)
            rate = pm.Gamma(
                name, alpha=cfg["alpha"], beta=cfg["beta_days"] * HOURS_PER_DAY, dims=DIM_PAGE
            )
            return pt.log(rate)
        mu = cfg["log_mean_per_day"] - math.log(HOURS_PER_DAY)
        return pm.Normal(name, mu=mu, sigma=cfg["log_sd"], dims=DIM_PAGE)

    def _page_log_rates(self, data: Observations):
        import pymc as pm

        if self.model_config["prior"] == "gamma":
            return pm.Deterministic("log_rate", self._prior_log_rates("rate"), dims=DIM_PAGE)
        return self._prior_log_rates("log_rate")

    def _population_log_rates(self, data: Observations):
        name = "new_rate" if self.model_config["prior"] == "gamma" else "new_log_rate"
        return self._prior_log_rates(name)

    def marginal_page_loglik(self, post: xr.Dataset, data: Observations | None = None):
        """``(draws, pages)``: each page's likelihood integrated against the fixed prior,
        the same under every draw
        (:func:`bayesrate.checks.marginal.integrated_loglik_fixed_prior`)."""
        from bayesrate.checks import marginal

        data = self._loo_data(data)
        cfg = self.model_config
        if cfg["prior"] == "gamma":
            prior = marginal.gamma_log_prior_on_log_rate(
                cfg["alpha"], cfg["beta_days"] * HOURS_PER_DAY
            )
        else:
            prior = marginal.normal_log_prior(
                cfg["log_mean_per_day"] - math.log(HOURS_PER_DAY), cfg["log_sd"]
            )
        per_page = marginal.integrated_loglik_fixed_prior(data.interval_stats, prior)
        n_draws = post.sizes["chain"] * post.sizes["draw"]
        return np.broadcast_to(per_page, (n_draws, len(per_page)))
