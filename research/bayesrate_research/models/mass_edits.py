"""Mass-edit model: the shocks model plus a rate of changes that every page of a domain gets.

Real sites change many pages at once: one commit reformats hundreds of pages, a template
edit touches every page of a service. Such an edit reaches a page *whatever its own rate*:
on the exact tldr-pages history the 900 pages that had not changed in 2022–2024 changed
1.36 times in 2025 on average, as often as those that had changed once (1.33) or 2–3
times (1.36), and 5,422 of 2025's 8,013 changes fell on days when more than 50 pages
changed (``research/docs/models.md``, "Mass-edit model"). A multiplicative
shock (:mod:`bayesrate_research.models.shocks`) scales a quiet page's small rate and cannot say so;
an added rate can::

    λ_p(t) = exp(log_rate[p] + shock[d, e]) + exp(edit_log_rate[d, e])     t in epoch e
    edit_log_rate[d, e] = edit_log_rate_mean + edit_global[e] + edit_domain[d, e]
    edit_global[e]      ~ Normal(0, sigma_edit_global)
    edit_domain[d, e]   : sigma_edit_domain · (zero-sum deviations, as the shocks' domain part)
    sigma_edit_*        ~ Gamma(2, 2/edit_sd_scale)
    total_log_rate      ~ Normal(log_mean_per_day − log 24, log_sd)
    logit(own_share)    ~ Normal(0, edit_share_sd)
    mu_global           = total_log_rate + log(own_share)
    edit_log_rate_mean  = total_log_rate + log(1 − own_share)

The pages' level ``mu_global`` and the edits' ``edit_log_rate_mean`` are drawn as their
total and the share of it that is the pages' own: a quiet page's rate pins
``e^{mu} + e^{edit}`` well and the split weakly, a curved ridge in ``(mu, edit)`` that is
straight in ``(total, share)``.

``log_rate`` and ``shock`` are the shocks model's (:class:`ShockModel`, iid shocks by
default). Each interval's integrated rate stays exact and linear in the epochs' hours,
``Λ = λ_p Σ_e hours_e·e^{shock[d, e]} + Σ_e hours_e·e^{edit_log_rate[d, e]}``, so the
sufficient statistics are the shocks model's (page, hours per epoch) groups; the added
part of each pattern is one more number per pattern, and a page's quiet intervals add a
constant ``Σ_e quiet_hours[p, e]·e^{edit_log_rate[d, e]}`` to its ``quiet`` term.

Pages, domains, shocks and edit effects are non-centred by default (``parameterisation``,
``shock_parameterisation``, ``edit_parameterisation``): with an added rate a quiet page's
own rate is pinned only from above (any own rate well below the edits fits), so the
hierarchical model's rule, which centres pages by their information at a plug-in rate,
centres pages whose own rate is loose; and a non-centred domain mean follows
``mu_global`` when the share moves. On 300 tldr-pages pages (training data of the 2025
split, 2 × 500 draws) the worst bulk ESS was 15 with the rule, 31 with only the pages
non-centred, 131 with everything non-centred and the total/share parameterisation above
(``mu_global`` and ``edit_log_rate_mean`` drawn directly: 53), 42 with centred edit
effects; the same rule with each page's information scaled by its own share of a
plug-in rate (the median page's as the edits' stand-in), 42. On a simulated world
(240 pages in 6 domains, 4 × 1000 draws) every page non-centred left the busiest pages at
bulk ESS 105; where the domains' means are equal (no spread to learn) the non-centred
domains mix slowly (bulk ESS 11 on ``sigma_domain``).

A future epoch draws a fresh edit rate from its distribution (independent of the fitted
epochs), so the predictive of a future window carries a busy year's uncertainty for quiet
and busy pages alike; ``rate``
is a page's expected rate in a future epoch, the shocks model's plus
``exp(edit_log_rate_mean + σ_global²/2 [+ σ_domain²/2])``.

``edit_process: ar1`` makes the global level persist::

    edit_global[e] = edit_log_rate_mean + x[e]
    x[0] ~ Normal(0, sigma_edit_global),  x[e] = φ·x[e−1] + sigma_edit_global·√(1 − φ²)·z[e]
    φ = edit_persistence ~ Beta(2, 2)

and a future epoch ``h`` after the fit continues the path from its last fitted value,
Normal(``m + φ^h·x_last``, ``σ²(1 − φ^(2h))``): a calm recent epoch predicts a calm next
one, a busy one a busy next one (``rate`` then has the next epoch's mean edit rate,
``exp(m + φ·x_last + σ²(1 − φ²)/2)``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import (
    DIM_DOMAIN,
    DIM_EPOCH,
    DIM_FUTURE_EPOCH,
    DIM_PAGE,
    HOURS_PER_DAY,
)
from bayesrate.models.base import check_config_numbers
from bayesrate_research.models.shocks import ShockModel, ar1_continue, ar1_next_log_mean, ar1_path

if TYPE_CHECKING:
    from collections.abc import Callable

    import xarray as xr

    from bayesrate.likelihood import CensoredGroups
    from bayesrate.observations import Observations

#: posterior variables of the added rate
EDIT_RATE = "edit_log_rate"
EDIT_GLOBAL = "edit_log_rate_global"
EDIT_MEAN = "edit_log_rate_mean"
SIGMA_EDIT_GLOBAL = "sigma_edit_global"
SIGMA_EDIT_DOMAIN = "sigma_edit_domain"
TOTAL = "total_log_rate"
LOGIT_SHARE = "logit_own_share"
EDIT_PERSISTENCE = "edit_persistence"

#: ``iid``: a fresh global edit level per epoch around ``edit_log_rate_mean``; ``ar1``: the
#: global level is a stationary AR(1) path around it (persistence ``edit_persistence``), so
#: a calm recent epoch predicts a calm next one and a busy one a busy next one
EDIT_PROCESSES = ("iid", "ar1")


def future_global_edits(mean, sigma, z, n: int, last=None, phi=None):
    """The global edit log-rates of ``n`` epochs after the fit from standard normal ``z``
    ``(..., n)``: ``iid`` (``phi`` None), ``mean + sigma·z``; ``ar1``, the path continued
    from its last fitted value ``last`` (:func:`~bayesrate_research.models.shocks.ar1_continue`).
    Arguments broadcast over leading (draw) axes; PyTensor or numpy."""
    if phi is None:
        return mean[..., None] + sigma[..., None] * z
    return mean[..., None] + ar1_continue(last - mean, 0.0 * mean, phi, sigma, z, n)


class MassEditModel(ShockModel):
    """The shocks model plus a shared rate of mass edits per (domain, epoch)."""

    model_type: ClassVar[str] = "mass_edits"
    marginal_refine_to: ClassVar[int | None] = 256
    default_model_config: ClassVar[dict[str, Any]] = {
        **ShockModel.default_model_config,
        "edit_share_sd": 1.5,
        "edit_sd_scale": 1.0,
        "edit_parameterisation": "noncentred",
        "edit_process": "iid",
        "shock_parameterisation": "noncentred",
        "parameterisation": "noncentred",
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        check_config_numbers(
            self.model_config,
            positive=("edit_share_sd", "edit_sd_scale"),
        )
        if self.model_config["edit_parameterisation"] not in ("centred", "noncentred"):
            raise ValueError("edit_parameterisation must be centred or noncentred")
        if self.model_config["edit_process"] not in EDIT_PROCESSES:
            raise ValueError(f"edit_process must be one of {EDIT_PROCESSES}")
        if self.model_config["shock_process"] == "ar1":
            raise ValueError("mass_edits takes iid or random_walk shocks, not ar1")

    # ------------------------------------------------------------------ graph
    def _global_mean(self):
        """``mu_global`` and ``edit_log_rate_mean`` from their total and the pages' share
        (module docstring); returns ``mu_global``."""
        import pymc as pm

        cfg = self.model_config
        total = pm.Normal(
            TOTAL, mu=cfg["log_mean_per_day"] - math.log(HOURS_PER_DAY), sigma=cfg["log_sd"]
        )
        logit_share = pm.Normal(LOGIT_SHARE, 0.0, cfg["edit_share_sd"])
        # log σ(x) = −softplus(−x)
        pm.Deterministic(EDIT_MEAN, total - pm.math.softplus(logit_share))
        return pm.Deterministic("mu_global", total - pm.math.softplus(-logit_share))

    def _added_log_rates(self, data: Observations):
        """``edit_log_rate`` (domain, epoch) in the current model; returns the tensor."""
        import pymc as pm

        cfg = self.model_config
        coords = pm.modelcontext(None).coords
        n_domains = len(coords[DIM_DOMAIN])
        centred = cfg["edit_parameterisation"] == "centred"
        mean = pm.modelcontext(None)[EDIT_MEAN]
        sigma_g = pm.Gamma(SIGMA_EDIT_GLOBAL, alpha=2.0, beta=2.0 / cfg["edit_sd_scale"])
        if cfg["edit_process"] == "ar1":
            level = self._ar1_edit_level(mean, sigma_g, centred)
        elif centred:
            level = pm.Normal(EDIT_GLOBAL, mean, sigma_g, dims=DIM_EPOCH)
        else:
            z = pm.Normal(f"z_{EDIT_GLOBAL}", 0.0, 1.0, dims=DIM_EPOCH)
            level = pm.Deterministic(EDIT_GLOBAL, mean + sigma_g * z, dims=DIM_EPOCH)
        rates = pm.math.ones((n_domains, 1)) * level[None, :]
        deviation = self._domain_deviation(
            data, "edit_domain", centred, SIGMA_EDIT_DOMAIN, cfg["edit_sd_scale"]
        )
        if deviation is not None:
            rates = rates + deviation
        return pm.Deterministic(EDIT_RATE, rates, dims=(DIM_DOMAIN, DIM_EPOCH))

    @staticmethod
    def _ar1_edit_level(mean, sigma_g, centred: bool):
        """``edit_log_rate_global``: ``mean`` plus a stationary AR(1) path (marginal sd
        ``sigma_g``, persistence ``edit_persistence`` ~ Beta(2, 2))."""
        import pymc as pm
        import pytensor.tensor as pt

        phi = pm.Beta(EDIT_PERSISTENCE, alpha=2.0, beta=2.0)
        if centred:
            path = pm.AR(
                f"{EDIT_GLOBAL}_path",
                rho=pt.stack([phi]),
                sigma=sigma_g * pt.sqrt(1.0 - phi**2),
                init_dist=pm.Normal.dist(0.0, sigma_g),
                ar_order=1,
                dims=DIM_EPOCH,
            )
        else:
            n_epochs = len(pm.modelcontext(None).coords[DIM_EPOCH])
            z = pm.Normal(f"z_{EDIT_GLOBAL}", 0.0, 1.0, dims=DIM_EPOCH)
            path = ar1_path(phi, sigma_g, z, n_epochs)
        return pm.Deterministic(EDIT_GLOBAL, mean + path, dims=DIM_EPOCH)

    # ------------------------------------------------------------------ predictive
    def _predictive_added(self, data: Observations, n_epochs: int):
        """``(data's domains, n_epochs)`` edit log-rates: the fitted ones (placeholders whose
        values come from the posterior; a new domain takes the global ones), fresh draws
        for the epochs after the fit (called after :meth:`_predictive_shocks`, which sets
        the coordinates)."""
        import pymc as pm
        import pytensor.tensor as pt

        post = self.idata_["posterior"]
        n_fit = post.sizes[DIM_EPOCH]
        fitted_global = pm.Flat(EDIT_GLOBAL, dims=DIM_EPOCH)
        rows, own = self._domain_rows(
            data, pm.Flat(EDIT_RATE, dims=(DIM_DOMAIN, DIM_EPOCH)), fitted_global
        )
        if n_epochs > n_fit:
            mean = pm.Flat(EDIT_MEAN)
            sigma_g = pm.HalfFlat(SIGMA_EDIT_GLOBAL)
            z_g = pm.Normal("future_z_edit_global", 0.0, 1.0, dims=DIM_FUTURE_EPOCH)
            phi = pm.Flat(EDIT_PERSISTENCE) if EDIT_PERSISTENCE in post else None
            level = future_global_edits(
                mean, sigma_g, z_g, n_epochs - n_fit, fitted_global[-1], phi
            )
            future = pt.ones((len(own), 1)) * level[None, :]
            if SIGMA_EDIT_DOMAIN in post and own.any():
                sigma_d = pm.HalfFlat(SIGMA_EDIT_DOMAIN)
                z_d = pm.Normal(
                    "future_z_edit_domain", 0.0, 1.0, shape=(len(own), n_epochs - n_fit)
                )
                future = future + sigma_d * z_d * own[:, None]
            rows = pt.concatenate([rows, future], axis=1)
        return rows[:, :n_epochs]

    # ------------------------------------------------------------------ results
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        return [*super().diagnostic_vars(idata), EDIT_RATE]

    def future_edit_log_mean(self, post: xr.Dataset, data: Observations):
        """Per draw and domain, ``log E[exp(edit_log_rate)]`` in the next epoch after the
        fit: ``edit_log_rate_mean + σ_global²/2``; ``ar1``, from the global level's last
        fitted value ``x``, ``m + φ(x − m) + σ_global²(1 − φ²)/2`` (``+ σ_domain²/2`` for a
        domain with its own)."""
        import xarray as xr

        variance = post[SIGMA_EDIT_GLOBAL] ** 2
        if EDIT_PERSISTENCE in post:
            mean = post[EDIT_MEAN]
            last = post[EDIT_GLOBAL].isel({DIM_EPOCH: -1}, drop=True)
            out = mean + ar1_next_log_mean(last - mean, post[EDIT_PERSISTENCE], variance)
        else:
            out = post[EDIT_MEAN] + variance / 2
        own = xr.DataArray(self.shocked_domains(data).astype(float), dims=DIM_DOMAIN)
        if SIGMA_EDIT_DOMAIN in post:
            return out + own * post[SIGMA_EDIT_DOMAIN] ** 2 / 2
        return out + 0.0 * own

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        import xarray as xr

        post = super()._add_derived(post, data)
        added = np.exp(self.future_edit_log_mean(post, data))
        page_domain = xr.DataArray(data.domain_codes, dims=DIM_PAGE)
        per_page = added.isel({DIM_DOMAIN: page_domain}).drop_vars(DIM_DOMAIN, errors="ignore")
        post["rate"] = post["rate"] + per_page
        post["rate"].attrs["units"] = "changes per hour (expected in a future epoch)"
        return post

    def _groups_of_draws(self, post: xr.Dataset) -> Callable[[int], CensoredGroups]:
        from bayesrate.draws import stack_draws
        from bayesrate_research.models.epochs import log_exposure_draws

        log_e = self._pattern_log_exposures(post)
        edit = stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH)
        log_a = log_exposure_draws(self.fitted_grid(), edit)
        return lambda s: self._shocked_groups(log_e[s], log_a[s])

    def _marginal_grid(self, post: xr.Dataset, groups_of: Callable[[int], CensoredGroups]):
        """The first pass, on 128 nodes: the likelihood's support at the first draw's
        effects, edits included, down to every draw's page prior ``mu − 10·sigma`` (a page's
        likelihood flattens at low rates, so the prior's tail counts there); each draw then
        integrates on :attr:`marginal_refine_to` nodes of its own."""
        from bayesrate.checks.marginal import N_GRID
        from bayesrate.draws import stack_draws
        from bayesrate.estimators.grid import likelihood_support_grids as page_grids

        support = page_grids(groups_of(0), 2 * N_GRID)
        mu = stack_draws(post["mu_domain"], DIM_DOMAIN)[:, self.data_.domain_codes]
        sigma = stack_draws(post["sigma_page"])
        lo = np.minimum(support[:, 0], (mu - 10.0 * sigma[:, None]).min(axis=0))
        t = np.linspace(0.0, 1.0, support.shape[1])
        return lo[:, None] + (support[:, -1] - lo)[:, None] * t[None, :]
