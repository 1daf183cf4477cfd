"""Bursty model: hierarchical page rates, each interval's exposure Gamma-mixed (overdispersion).

A page's changes in an interval of length ``τ`` are Poisson with mean ``λτ·G``, where
``G ~ Gamma(κ, κ)`` (mean 1) is drawn afresh for every interval: the number of changes is
negative binomial, and the interval shows no change with probability::

    P(no change in τ) = (1 + λτ/κ)^{−κ}          (→ e^{−λτ}, the Poisson, as κ → ∞)

so ``n`` intervals of one length with ``c`` detections are ``Binomial(n, p)``,
``p = 1 − (1 + λτ/κ)^{−κ}``: the same (page, interval length) groups as the hierarchical
model are sufficient. ``κ`` is pooled per domain::

    mu_log_kappa     ~ Normal(log_shape_mean, log_shape_sd)
    sigma_log_kappa  ~ Gamma(2, 2/shape_sd_scale)
    log_kappa[d]     = mu_log_kappa + sigma_log_kappa · z_log_kappa[d],  z ~ Normal(0, 1)

(non-centred by default: ``κ`` is weakly identified; ``shape_parameterisation =
"centred"`` where the pages pin it). Page log-rates are those of
:class:`~bayesrate.models.hierarchical.HierarchicalModel` (inherited). Small ``κ`` means
bursty intervals: a long interval is less likely to show a change than ``λτ`` suggests.

**Identifiability.** With one interval length per page (a fixed crawl grid), ``p`` is a
monotone function of ``λ`` for every ``κ``: the data pin ``p``, not ``(λ, κ)``, and the
predictive of further intervals of that length equals the hierarchical model's. ``κ`` is
learnt only from pages visited at several interval lengths (``research/docs/models.md``,
"Bursty model").

The quiet intervals are no longer linear in ``λ``: ``quiet`` is one term per group without
a detection, summed per page (:func:`bayesrate.models.likelihood.mixed_quiet`); the numpy
formulas are :func:`bayesrate.likelihood.mixed_log_quiet` and
:func:`~bayesrate.likelihood.mixed_log_detection`.

Posterior variables: the hierarchical model's, plus ``mu_log_kappa``, ``sigma_log_kappa``,
``log_kappa`` (domain) and ``kappa`` (domain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_DOMAIN, DIM_NEW_DOMAIN
from bayesrate.models.base import DETECTION_PROBABILITY, check_config_numbers, coord_labels
from bayesrate.models.hierarchical import HierarchicalModel

if TYPE_CHECKING:
    import pymc as pm
    import xarray as xr

    from bayesrate.observations import Observations


SHAPE_PARAMETERISATIONS = ("centred", "noncentred")


class BurstyModel(HierarchicalModel):
    """Pooled page rates with Gamma-mixed interval exposures, ``κ`` pooled per domain."""

    model_type: ClassVar[str] = "bursty"
    #: research: no prior artifact (a hierarchical model underneath, not its gates)
    export_gates: ClassVar[None] = None
    conditional_pages: ClassVar[bool] = False
    #: κ per domain mixes slowly (research/docs/models.md): a longer warm-up than the default
    sampler_defaults: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.sampler_defaults,
        "tune": 1000,
    }
    #: leave-one-page-out: each page's rate integrated out under each draw's ``κ``
    marginal_loo: ClassVar[bool] = True
    default_model_config: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.default_model_config,
        "log_shape_mean": 0.0,
        "log_shape_sd": 2.0,
        "shape_sd_scale": 0.5,
        "shape_parameterisation": "noncentred",
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        check_config_numbers(
            self.model_config,
            positive=("log_shape_sd", "shape_sd_scale"),
            finite=("log_shape_mean",),
        )
        if self.model_config["shape_parameterisation"] not in SHAPE_PARAMETERISATIONS:
            raise ValueError(f"shape_parameterisation must be one of {SHAPE_PARAMETERISATIONS}")

    def _build(self, data: Observations) -> pm.Model:
        import pymc as pm

        from bayesrate.models import likelihood as lik

        with pm.Model(coords=self.coords(data)) as model:
            log_rate = self._page_log_rates(data)
            log_shape = self._domain_log_shapes()[data.domain_codes]
            groups = self.fitted_groups(data)
            lik.mixed_detections(groups.select(groups.detected > 0), log_rate, log_shape)
            lik.mixed_quiet(groups.select(groups.detected == 0), log_rate, log_shape)
        return model

    def _domain_log_shapes(self):
        """``log κ`` per domain in the current model (non-centred unless configured centred,
        for domains whose pages pin ``κ``: several interval lengths); returns the tensor."""
        import pymc as pm

        cfg = self.model_config
        mu = pm.Normal("mu_log_kappa", mu=cfg["log_shape_mean"], sigma=cfg["log_shape_sd"])
        sigma = pm.Gamma("sigma_log_kappa", alpha=2.0, beta=2.0 / cfg["shape_sd_scale"])
        if cfg["shape_parameterisation"] == "centred":
            return pm.Normal("log_kappa", mu=mu, sigma=sigma, dims=DIM_DOMAIN)
        z = pm.Normal("z_log_kappa", 0.0, 1.0, dims=DIM_DOMAIN)
        return pm.Deterministic("log_kappa", mu + sigma * z, dims=DIM_DOMAIN)

    # ------------------------------------------------------------------ predictive
    def _predictive_detections(self, data: Observations, groups, log_rate) -> None:
        """Every group's ``detections`` with ``κ`` per page, and its detection probability."""
        import pymc as pm
        import pytensor.tensor as pt

        from bayesrate.constants import DIM_GROUP
        from bayesrate.models import likelihood as lik

        log_shape = self._predictive_log_shapes(data)
        lik.mixed_detections(groups, log_rate, log_shape)
        log_lam = lik.group_log_rate(groups, log_rate, lik.log_exposure(groups))
        page = pt.as_tensor_variable(groups.page)
        pm.Deterministic(
            DETECTION_PROBABILITY,
            pt.exp(lik.mixed_log_detection(log_lam, log_shape[page])),
            dims=DIM_GROUP,
        )

    def _predictive_log_shapes(self, data: Observations):
        """``log κ`` of each of ``data``'s pages: its fitted domain's (a placeholder whose
        values come from the posterior), or for another domain one draw per new domain from
        ``Normal(mu_log_kappa, sigma_log_kappa)``."""
        import pymc as pm
        import pytensor.tensor as pt

        model = pm.modelcontext(None)
        fitted = [str(d) for d in self.idata_["posterior"][DIM_DOMAIN].values]
        domains = coord_labels(data.pages["domain"]).astype(str)
        new = sorted(set(domains) - set(fitted))
        model.add_coords({DIM_DOMAIN: fitted})
        log_shape = pm.Flat("log_kappa", dims=DIM_DOMAIN)
        if new:
            model.add_coords({f"{DIM_NEW_DOMAIN}_kappa": new})
            mu = pm.Flat("mu_log_kappa")
            sigma = pm.HalfFlat("sigma_log_kappa")
            new_shapes = pm.Normal(
                "new_domain_log_kappa", mu, sigma, dims=f"{DIM_NEW_DOMAIN}_kappa"
            )
            log_shape = pt.concatenate([log_shape, new_shapes])
        column = pd.Index([*fitted, *new]).get_indexer(domains)
        return log_shape[column]

    # ------------------------------------------------------------------ results
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        names = super().diagnostic_vars(idata)
        return [*names, "log_kappa"] if "log_kappa" in idata["posterior"].data_vars else names

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        post = super()._add_derived(post, data)
        post["kappa"] = np.exp(post["log_kappa"])
        post["kappa"].attrs["meaning"] = "Gamma shape of each interval's exposure (inf: Poisson)"
        return post

    def page_loglik(self, max_draws: int | None = None) -> np.ndarray:
        """``(draws, pages)`` exact log-likelihood at each kept draw (its own ``κ``)."""
        post, log_rate = self._loglik_draws(max_draws)
        return self._mixed_loglik(log_rate, self._page_log_shapes(post))

    def marginal_page_loglik(
        self, post: xr.Dataset, data: Observations | None = None
    ) -> np.ndarray:
        """``(draws, pages)`` ``log ∫ p(y_p | λ, κ_s) Normal(log λ | mu_domain, sigma_page)``:
        each page's own rate integrated out under draw ``s``'s ``κ`` and population (the
        unit of leave-one-page-out, :mod:`bayesrate.checks.compare`)."""
        from bayesrate.checks.marginal import N_GRID, integrated_loglik_per_draw
        from bayesrate.draws import stack_draws
        from bayesrate.estimators.grid import likelihood_support_grids as page_grids

        self._loo_data(data, fitted_only=True)  # its terms are of the fitted data
        log_shape = self._page_log_shapes(post)

        def at(log_rates: np.ndarray, shapes: np.ndarray) -> np.ndarray:
            """``(pages, K)`` at per-page grids ``log_rates`` (or one ``(K,)`` grid)."""
            grid = np.broadcast_to(log_rates, (self.data_.n_pages, np.shape(log_rates)[-1]))
            return self._mixed_loglik(grid.T, np.broadcast_to(shapes, grid.T.shape)).T

        return integrated_loglik_per_draw(
            lambda s, grid: at(grid, log_shape[s]),
            page_grids(None, N_GRID, lambda coarse: at(coarse, log_shape.mean(axis=0))),
            stack_draws(post["mu_domain"], DIM_DOMAIN)[:, self.data_.domain_codes],
            stack_draws(post["sigma_page"]),
        )

    def _page_log_shapes(self, post: xr.Dataset) -> np.ndarray:
        """``(draws, pages)`` each page's ``log κ`` (its domain's)."""
        from bayesrate.draws import stack_draws

        return stack_draws(post["log_kappa"], DIM_DOMAIN)[:, self.data_.domain_codes]

    def _mixed_loglik(self, log_rate: np.ndarray, log_shape: np.ndarray) -> np.ndarray:
        """``(rows, pages)`` the fitted pages' Gamma-mixed log-likelihood at ``log_rate``
        and ``log_shape`` (``(rows, pages)`` each)."""
        from bayesrate.likelihood import mixed_pointwise_loglik

        stats = self.data_.interval_stats
        return mixed_pointwise_loglik(
            stats.group_page,
            np.log(stats.group_tau),
            stats.group_n,
            stats.group_changed,
            log_rate,
            log_shape,
        )

    # ------------------------------------------------------------------ forecast predictive
    def forecast_predictive(self, d, groups, keep, seed, walks: str = "summed"):
        """Each test interval Gamma-mixed with its domain's ``κ``
        (:func:`bayesrate_research.forecast.bursty_prediction`)."""
        from bayesrate_research.forecast import bursty_prediction

        base, mean_rate = self._forecast_rates(keep)
        return bursty_prediction(self.idata_["posterior"], d, groups, base, keep, mean_rate)

    def forecast_diagnostics(self) -> dict[str, Any]:
        """Per domain, the 5%, 50% and 95% posterior quantiles of ``κ``."""
        from bayesrate_research.forecast import domain_quantiles

        return {"kappa_per_domain_q05_q50_q95": domain_quantiles(self.idata_["posterior"]["kappa"])}
