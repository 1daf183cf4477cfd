"""Interval-censored Poisson model, one independent rate per page.

``log L(λ) = Σ_groups c·log(1 − e^{−λτ}) − λ·U`` per page (``U`` = unchanged exposure,
hours), exact for any interval lengths; see :mod:`bayesrate.models.likelihood`.

Priors (``model_config``, rates **per day** for readability):

``prior = "gamma"``
    ``λ_day ~ Gamma(alpha, beta_days)``; sampled on the log scale (PyMC's log transform).
    ``alpha = 1`` with ``beta_days → 0`` is flat in λ (its posterior mode is the MLE).
``prior = "lognormal"``
    ``log λ_day ~ Normal(log_mean_per_day, log_sd)``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_PAGE, HOURS_PER_DAY
from bayesrate.models.base import RateModel, check_config_numbers
from bayesrate.models.likelihood import interval_loglik, pointwise_interval_loglik

if TYPE_CHECKING:
    import pymc as pm

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

    def _validate_config(self) -> None:
        cfg = self.model_config
        if cfg["prior"] not in ("gamma", "lognormal"):
            raise ValueError(f"prior must be 'gamma' or 'lognormal', got {cfg['prior']!r}")
        check_config_numbers(
            cfg, positive=("alpha", "beta_days", "log_sd"), finite=("log_mean_per_day",)
        )

    def _build(self, data: Observations) -> pm.Model:
        import pymc as pm
        import pytensor.tensor as pt

        cfg = self.model_config
        stats = data.interval_stats
        with pm.Model(coords=self.coords(data)) as model:
            if cfg["prior"] == "gamma":
                # λ per hour ~ Gamma(alpha, beta_days · 24 h/day)
                rate = pm.Gamma(
                    "rate",
                    alpha=cfg["alpha"],
                    beta=cfg["beta_days"] * HOURS_PER_DAY,
                    dims=DIM_PAGE,
                )
                log_rate = pm.Deterministic("log_rate", pt.log(rate), dims=DIM_PAGE)
            else:
                mu = cfg["log_mean_per_day"] - math.log(HOURS_PER_DAY)
                log_rate = pm.Normal("log_rate", mu=mu, sigma=cfg["log_sd"], dims=DIM_PAGE)
            pm.Potential("interval_censored_loglik", interval_loglik(log_rate, stats))
        return model

    def pointwise_loglik(self, posterior, data: Observations) -> np.ndarray:
        log_rate = self.log_rate_draws(posterior)
        chains, draws, pages = log_rate.shape
        flat = pointwise_interval_loglik(log_rate.reshape(-1, pages), data.interval_stats)
        return flat.reshape(chains, draws, pages)
