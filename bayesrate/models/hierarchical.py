"""Hierarchical model: page log-rates pooled within domains, domains pooled globally.

::

    mu_global     ~ Normal(log_mean_per_day − log 24, log_sd)          log rate per hour
    sigma_domain  ~ Gamma(2, 2/domain_sd_scale)                         (mean domain_sd_scale)
    mu_domain[d]  ~ Normal(mu_global, sigma_domain)                    (centred or not, per domain)
    sigma_page    ~ Gamma(2, 2/page_sd_scale)
    log_rate[p]   ~ Normal(mu_domain[domain(p)], sigma_page)           (centred or not, per page)
    detections    ~ Binomial per (page, interval length) group (bayesrate.models.likelihood)

**Centred or non-centred, chosen by the data.** For each page the expected Fisher
information of its intervals about ``log λ`` at a plug-in rate (the Cho estimate),
``I_p = Σ_groups n·x²/(eˣ − 1)`` with ``x = λ̂τ``, is compared with the pooling prior's
precision ``1/σ̂²`` (``σ̂`` = spread of the plug-in log-rates). A page whose likelihood
dominates (``I_p·σ̂² > centre_threshold``) is centred; others — few visits, or one-sided
likelihoods (no change, or a change at every visit: ``I_p`` set to 0) — are non-centred.
Domains likewise: the information about ``mu_d`` from its pages,
``I_d = Σ 1/(σ̂² + 1/I_p)``, times ``σ_q²``, where ``σ_q`` is the lower 5% quantile of
``sigma_domain`` given the domains' precision-weighted plug-in means (each with noise
``1/I_d``) and its ``Gamma`` prior (:func:`spread_quantile`). Where the posterior reaches
small ``sigma_domain``, a centred domain mean makes a funnel (ota-genai-eu, 12 domains
of 1–11 documents: 174 divergences at target-accept 0.8, 5 left at 0.99, with the
plug-in spread): a domain is centred only if its pages pin its mean over most of the
spread's plausible range. The choice and its counts are reported in
``diagnostics_.extra["parameterisation"]``. The quantile is a plug-in estimate and can
miss: if NUTS keeps divergences at every ``target_accept`` of the rule's choice, the fit
runs again with every domain mean non-centred
(:meth:`HierarchicalModel._fall_back`, reported in ``diagnostics_.extra["fallback"]``).
An excursion world of 4 domains × 60 pages centred all four at the quantile 0.155 where
the posterior's was 0.083 and kept 6 divergences at target-accept 0.99; non-centred, 0.

Posterior variables (per hour, log scale): ``mu_global``, ``sigma_domain``, ``mu_domain``
(domain), ``sigma_page``, ``log_rate`` (page), ``rate`` (page); the raw sampler variables
are ``mu_domain_centred``/``z_domain`` and ``log_rate_centred``/``z_page`` on the dims
``domain_centred``/``domain_noncentred`` and ``page_centred``/``page_noncentred``.

Derived for prior export (the documented form, ``docs/models.md``): ``domain_log_rate_mean``
(domain) and ``page_log_rate_sd``: a new page of domain ``d`` has time-averaged
``log λ ~ Normal(domain_log_rate_mean[d], page_log_rate_sd)`` per draw; a page of a new
domain adds ``Normal(global_log_rate_mean, domain_log_rate_sd)`` for the domain mean.
:meth:`~bayesrate.models.base.RateModel.predict` draws the detections of such pages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bayesrate.constants import (
    DIM_DOMAIN,
    DIM_NEW_DOMAIN,
    DIM_PAGE,
    HOURS_PER_DAY,
    POPULATION_GATES,
)
from bayesrate.models.base import LOWER_Q, UPPER_Q, RateModel, check_config_numbers, coord_labels

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations
    from bayesrate.sufficient import IntervalStats

DIM_PAGE_C = "page_centred"
DIM_PAGE_NC = "page_noncentred"
DIM_DOMAIN_C = "domain_centred"
DIM_DOMAIN_NC = "domain_noncentred"
#: floor of the plug-in spreads used by the parameterisation rule
MIN_PLUGIN_SD = 0.3
PARAMETERISATIONS = ("auto", "centred", "noncentred")
#: the fallback (:meth:`HierarchicalModel._fall_back`) after divergences at every target_accept
DOMAINS_NONCENTRED = "domain means non-centred"
#: the domain rule centres a domain mean if its pages pin it at this quantile of sigma_domain
SPREAD_QUANTILE = 0.05


def spread_quantile(
    means: np.ndarray, noise: np.ndarray, scale: float, quantile: float = SPREAD_QUANTILE
) -> float:
    """The ``quantile`` of the spread ``σ`` of group means ``means`` observed with noise
    variances ``noise``: ``means[d] ~ Normal(μ, σ² + noise[d])``, ``μ`` integrated under a
    flat prior (the restricted likelihood), ``σ ~ Gamma(2, 2/scale)`` (the hierarchical
    model's prior on ``sigma_domain``); on a grid in ``log σ``."""
    from scipy.special import logsumexp
    from scipy.stats import gamma

    m = np.asarray(means, dtype=float)
    v = np.asarray(noise, dtype=float)
    sigma = np.exp(np.linspace(np.log(1e-3), np.log(50.0 * scale), 4000))
    total = sigma[:, None] ** 2 + v[None, :]
    w = 1.0 / total
    mu = (w * m).sum(axis=1, keepdims=True) / w.sum(axis=1, keepdims=True)
    loglik = -0.5 * (np.log(total) + (m - mu) ** 2 * w).sum(axis=1) - 0.5 * np.log(w.sum(axis=1))
    log_post = loglik + gamma.logpdf(sigma, 2.0, scale=scale / 2.0) + np.log(sigma)
    cdf = np.exp(np.logaddexp.accumulate(log_post) - logsumexp(log_post))
    return float(sigma[min(np.searchsorted(cdf, quantile), len(sigma) - 1)])


#: centred sampler variables and the whole-vector deterministic that holds their draws
COVERED_BY = {"log_rate_centred": "log_rate", "mu_domain_centred": "mu_domain"}


def plugin_log_rates(stats: IntervalStats) -> np.ndarray:
    """Cho & Garcia-Molina log-rate per page at the mean interval (NaN without intervals).

    ``λ̂ = −ln((n − c + 0.5)/(n + 0.5)) / τ̄``; −inf for pages without a change.
    """
    n = stats.n_intervals.astype(float)
    c = stats.n_changes.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = stats.exposure / n
        lam = -np.log((n - c + 0.5) / (n + 0.5)) / tau
        return np.where(n > 0, np.log(lam), np.nan)


def fisher_information(stats: IntervalStats, log_rate: np.ndarray) -> np.ndarray:
    """Expected Fisher information about ``log λ`` of each page's intervals at ``log_rate``.

    ``Σ_groups n·x²/(eˣ − 1)``, ``x = λτ`` (0 where ``log_rate`` is not finite).
    """
    term = interval_information(log_rate[stats.group_page], stats.group_tau)
    return np.bincount(stats.group_page, weights=stats.group_n * term, minlength=stats.n_pages)


def interval_information(log_rate: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Expected Fisher information about ``log λ`` of one interval of length ``τ``:
    ``x²/(eˣ − 1)``, ``x = λτ`` (0 where ``log_rate`` is not finite)."""
    lam = np.exp(np.where(np.isfinite(log_rate), log_rate, -np.inf))
    x = lam * tau
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        term = np.where(x > 0, x**2 / np.expm1(x), 0.0)
    return np.where(np.isfinite(term), term, 0.0)


class HierarchicalModel(RateModel):
    """Page rates pooled within domains (log-normal), domains pooled globally."""

    model_type: ClassVar[str] = "hierarchical"
    #: a new page's prior: the population statistics on the mixed replication
    export_gates: ClassVar[Mapping[str, tuple[str, ...]] | None] = {"mixed": POPULATION_GATES}
    conditional_pages: ClassVar[bool] = True
    #: 0.8 first; 0.95, then 0.99, only if a run diverges (short histories can: docs/models.md)
    sampler_defaults: ClassVar[dict[str, Any]] = {
        "target_accept": 0.8,
        "target_accept_retry": [0.95, 0.99],
    }
    default_model_config: ClassVar[dict[str, Any]] = {
        "log_mean_per_day": 0.0,
        "log_sd": 2.5,
        "domain_sd_scale": 1.0,
        "page_sd_scale": 2.0,
        "parameterisation": "auto",
        "centre_threshold": 1.0,
    }

    def _validate_config(self) -> None:
        cfg = self.model_config
        if cfg["parameterisation"] not in PARAMETERISATIONS:
            raise ValueError(f"parameterisation must be one of {PARAMETERISATIONS}")
        check_config_numbers(
            cfg,
            positive=("log_sd", "domain_sd_scale", "page_sd_scale", "centre_threshold"),
            finite=("log_mean_per_day",),
        )

    # ------------------------------------------------------------------ parameterisation
    def choose_parameterisation(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks (pages centred, domains centred) and notes in ``_build_notes``."""
        stats = data.interval_stats
        choice = self.model_config["parameterisation"]
        n_domains = len(stats.domains)
        plug = plugin_log_rates(stats)
        one_sided = (stats.n_changes == 0) | (stats.n_changes >= stats.n_intervals)
        usable = np.isfinite(plug) & ~one_sided
        info = np.where(one_sided, 0.0, fisher_information(stats, plug))
        # spread of the plug-in log-rates minus their sampling noise (≈ 1/I_p)
        if usable.sum() >= 2:
            var_page = float(np.var(plug[usable]) - np.mean(1.0 / info[usable]))
        else:
            var_page = 1.0
        sd_page = max(math.sqrt(max(var_page, 0.0)), MIN_PLUGIN_SD)
        page_score = info * sd_page**2
        # domain level: information about mu_d from its pages, each a noisy draw with
        # variance sd_page² + 1/I_p, against the (noise-corrected) spread of domain means
        with np.errstate(divide="ignore"):
            page_var = sd_page**2 + np.where(info > 0, 1.0 / info, np.inf)
        domain_info = np.bincount(stats.domain, weights=1.0 / page_var, minlength=n_domains)
        means, noise = [], []
        for d in range(n_domains):
            sel = usable & (stats.domain == d)
            if sel.any():
                means.append(np.mean(plug[sel]))
                noise.append(sd_page**2 / sel.sum())
        spread = float(np.var(means) - np.mean(noise)) if len(means) >= 2 else 1.0
        sd_domain = max(math.sqrt(max(spread, 0.0)), MIN_PLUGIN_SD)
        # the domain means' pages pin them over most of sigma_domain's plausible range?
        has = domain_info > 0
        if has.sum() >= 2:
            weighted = np.bincount(stats.domain, weights=np.where(usable, plug, 0.0) / page_var,
                                   minlength=n_domains)  # fmt: skip
            sd_low = spread_quantile(
                weighted[has] / domain_info[has],
                1.0 / domain_info[has],
                self.model_config["domain_sd_scale"],
            )
        else:
            sd_low = sd_domain
        domain_score = domain_info * sd_low**2
        threshold = self.model_config["centre_threshold"]
        if choice == "auto":
            page_c = page_score > threshold
            dom_c = (domain_score > threshold) & (self._fallback != DOMAINS_NONCENTRED)
        else:
            page_c = np.full(stats.n_pages, choice == "centred")
            dom_c = np.full(n_domains, choice == "centred")
        self._build_notes["parameterisation"] = {
            "rule": choice,
            "criterion": f"Fisher information of the data x prior variance > {threshold} (pages: "
            "the plug-in spread; domains: the 5% quantile of sigma_domain)",
            "plugin_page_sd": sd_page,
            "plugin_domain_sd": sd_domain,
            "domain_sd_q05": sd_low,
            "pages_centred": int(page_c.sum()),
            "pages_noncentred": int((~page_c).sum()),
            "domains_centred": int(dom_c.sum()),
            "domains_noncentred": int((~dom_c).sum()),
        }
        return page_c, dom_c

    def _fall_back(self) -> bool:
        """Domain means the rule centred are non-centred (:data:`DOMAINS_NONCENTRED`):
        divergences that survive every ``target_accept`` are the funnel of a centred mean
        where ``sigma_domain`` is small (the rule's quantile is a plug-in estimate)."""
        notes = self._build_notes.get("parameterisation", {})
        auto = self.model_config["parameterisation"] == "auto"
        if not auto or self._fallback is not None or not notes.get("domains_centred"):
            return False
        self._fallback = DOMAINS_NONCENTRED
        return True

    def coords(self, data: Observations) -> dict[str, Any]:
        coords = super().coords(data)
        coords[DIM_DOMAIN] = coord_labels(data.domains)
        return coords

    # ------------------------------------------------------------------ graph
    def _page_log_rates(self, data: Observations, name: str = "log_rate"):
        """Add the pooled page log-rates (a deterministic ``name``) to the current model
        context; return the tensor."""
        import pymc as pm
        import pytensor.tensor as pt

        cfg = self.model_config
        model = pm.modelcontext(None)
        page_c, dom_c = self.choose_parameterisation(data)
        domain = data.domain_codes
        labels = coord_labels(data.pages.index)
        model.add_coords({DIM_PAGE_C: labels[page_c], DIM_PAGE_NC: labels[~page_c]})
        mu_domain = self._domain_means(data, dom_c)
        sigma_page = pm.Gamma("sigma_page", alpha=2.0, beta=2.0 / cfg["page_sd_scale"])
        parts, order = [], []
        if page_c.any():
            parts.append(
                pm.Normal(
                    "log_rate_centred",
                    mu=mu_domain[domain[page_c]],
                    sigma=sigma_page,
                    dims=DIM_PAGE_C,
                )
            )
            order.append(np.flatnonzero(page_c))
        if (~page_c).any():
            z_page = pm.Normal("z_page", 0.0, 1.0, dims=DIM_PAGE_NC)
            parts.append(mu_domain[domain[~page_c]] + sigma_page * z_page)
            order.append(np.flatnonzero(~page_c))
        inverse = np.argsort(np.concatenate(order))
        return pm.Deterministic(name, pt.concatenate(parts)[inverse], dims=DIM_PAGE)

    def _domain_means(self, data: Observations, dom_c: np.ndarray):
        """Add ``mu_global``, ``sigma_domain`` and ``mu_domain`` (centred where ``dom_c``)
        to the current model; return ``mu_domain``."""
        import pymc as pm
        import pytensor.tensor as pt

        cfg = self.model_config
        dlabels = coord_labels(data.domains)
        n_domains = len(dlabels)
        pm.modelcontext(None).add_coords(
            {DIM_DOMAIN_C: dlabels[dom_c], DIM_DOMAIN_NC: dlabels[~dom_c]}
        )
        mu_global = self._global_mean()
        # zero-avoiding Gamma(2) scale priors (mean = the configured scale): a HalfNormal's
        # mass at 0 produced divergences on short histories (docs/models.md)
        sigma_domain = pm.Gamma("sigma_domain", alpha=2.0, beta=2.0 / cfg["domain_sd_scale"])
        parts, order = [], []
        if dom_c.any():
            parts.append(
                pm.Normal("mu_domain_centred", mu=mu_global, sigma=sigma_domain, dims=DIM_DOMAIN_C)
            )
            order.append(np.flatnonzero(dom_c))
        if (~dom_c).any():
            z_domain = pm.Normal("z_domain", 0.0, 1.0, dims=DIM_DOMAIN_NC)
            parts.append(mu_global + sigma_domain * z_domain)
            order.append(np.flatnonzero(~dom_c))
        inverse = np.argsort(np.concatenate(order))
        mu_domain = pm.Deterministic(
            "mu_domain",
            pt.concatenate(parts)[inverse] if n_domains else pt.zeros(0),
            dims=DIM_DOMAIN,
        )
        return mu_domain

    def _global_mean(self):
        """``mu_global`` (in the current model): the pages' log-rate level per hour."""
        import pymc as pm

        cfg = self.model_config
        return pm.Normal(
            "mu_global", mu=cfg["log_mean_per_day"] - math.log(HOURS_PER_DAY), sigma=cfg["log_sd"]
        )

    def _population_log_rates(self, data: Observations):
        """New pages' log-rates: ``Normal(mu_domain[d], sigma_page)`` for a fitted domain
        ``d``; a page of another domain first draws that domain's mean from
        ``Normal(mu_global, sigma_domain)`` (one per new domain, shared by its pages). The
        population parameters are placeholders: their values come from the posterior."""
        import pymc as pm
        import pytensor.tensor as pt

        model = pm.modelcontext(None)
        fitted = [str(d) for d in self.idata_["posterior"][DIM_DOMAIN].values]
        domains = coord_labels(data.pages["domain"]).astype(str)
        new = sorted(set(domains) - set(fitted))
        model.add_coords({DIM_DOMAIN: fitted})
        mu_global = pm.Flat("mu_global")
        sigma_domain = pm.HalfFlat("sigma_domain")
        means = pm.Flat("mu_domain", dims=DIM_DOMAIN)
        sigma_page = pm.HalfFlat("sigma_page")
        if new:
            model.add_coords({DIM_NEW_DOMAIN: new})
            new_means = pm.Normal("new_domain_mean", mu_global, sigma_domain, dims=DIM_NEW_DOMAIN)
            means = pt.concatenate([means, new_means])
        column = pd.Index([*fitted, *new]).get_indexer(domains)
        return pm.Normal("new_log_rate", mu=means[column], sigma=sigma_page, dims=DIM_PAGE)

    # ------------------------------------------------------------------ results
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        """The free variables, ``log_rate`` and ``mu_domain``, each number once.

        The centred pages' and domains' sampler variables hold the same draws as their
        elements of ``log_rate`` and ``mu_domain``, so they are left out (on 5,000 pages they
        doubled the diagnostics' cost for identical values).
        """
        names = super().diagnostic_vars(idata)
        if "mu_domain" in idata["posterior"].data_vars:
            names = [*names, "mu_domain"]
        return [n for n in names if COVERED_BY.get(n) not in names]

    def _conditional_page_posterior(self, max_draws: int | None):
        """Each page's conditional posterior given ``(mu_domain, sigma_page)``, averaged
        over the (thinned) draws (:func:`bayesrate.models.page_posterior.conditional_average`)."""
        from bayesrate.draws import stack_draws
        from bayesrate.models.page_posterior import conditional_average

        post = self.thinned_posterior(max_draws)
        return conditional_average(
            self.data_.interval_stats.groups,
            self.data_.domain_codes,
            stack_draws(post["mu_domain"], DIM_DOMAIN),
            stack_draws(post["sigma_page"]),
            quantiles=(LOWER_Q, UPPER_Q),
        )

    def marginal_page_loglik(self, post: xr.Dataset, data: Observations | None = None):
        """``(draws, pages)`` ``log ∫ p(y_p | e^u) Normal(u | mu_domain, sigma_page) du`` per
        draw (:func:`bayesrate.checks.marginal.integrated_loglik_normal`)."""
        from bayesrate.checks import marginal

        data = self._loo_data(data)
        mu, sigma = self._loo_population(post, data)
        return marginal.integrated_loglik_normal(data.interval_stats, mu, sigma)

    def _loo_population(self, post: xr.Dataset, data: Observations):
        """Each draw's ``mu_domain`` of each page ``(draws, pages)`` and ``sigma_page``."""
        from bayesrate.draws import stack_draws

        mu = stack_draws(post["mu_domain"], DIM_DOMAIN)[:, data.domain_codes]
        return mu, stack_draws(post["sigma_page"])

    def log_rate_offset(self, post: xr.Dataset):
        """Log of the factor turning the base rate into the time-averaged rate (0 here)."""
        return 0.0

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        post = super()._add_derived(post, data)
        offset = self.log_rate_offset(post)
        post["rate"] = np.exp(post["log_rate"] + offset)
        post["rate"].attrs["units"] = "changes per hour (time-averaged)"
        post["domain_log_rate_mean"] = post["mu_domain"] + offset
        post["global_log_rate_mean"] = post["mu_global"] + offset
        post["domain_log_rate_sd"] = post["sigma_domain"]
        post["page_log_rate_sd"] = post["sigma_page"]
        return post
