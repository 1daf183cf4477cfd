"""Scale path: the hierarchical model for many pages without sampling every page.

Three stages (``docs/models.md``, "Scale path"):

1. **Hyperparameters** — fit :class:`~bayesrate.models.hierarchical.HierarchicalModel` by
   NUTS on a *stratified sample* of pages (every domain represented, the rest allocated in
   proportion to domain size), or by ADVI/pathfinder on all pages. Keep the posterior
   means of ``mu_global``, ``sigma_domain`` and ``sigma_page``.
2. **Domain means from all pages, exactly** — on a common grid of ``log λ`` each page's
   exact censored log-likelihood ``ℓ_p(θ)`` is tabulated; its marginal likelihood given
   the domain mean, ``∫ exp(ℓ_p(θ)) N(θ; μ, σ_page) dθ``, is a matrix product with a
   Gaussian kernel over a grid of ``μ``; summing over a domain's pages and adding the
   ``Normal(mu_global, sigma_domain)`` prior gives the exact posterior of every domain's
   mean (conditional on the stage-1 hyperparameters).
3. **Pages** — each page's posterior ``∝ exp(ℓ_p(θ)) · Σ_μ w_d(μ) N(θ; μ, σ_page)`` on the
   same grid (the domain-mean uncertainty is integrated out): mean, 5% and 95% quantiles.

Everything after stage 1 is vectorized numpy in page chunks; no Bernoulli per visit, no
per-page Python loop. The log-normal-prior grid posterior lives here because
:mod:`bayesrate.estimators.grid` offers only Gamma priors.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.models.likelihood import np_log1mexp_of_log

if TYPE_CHECKING:
    from bayesrate.models.hierarchical import HierarchicalModel
    from bayesrate.observations import Observations
    from bayesrate.sufficient import IntervalStats

#: common grid of log(rate per hour): 1e-7/h .. 1e4/h
THETA_RANGE = (math.log(1e-7), math.log(1e4))
N_THETA = 1200
N_MU = 300
#: page chunk size (pages x N_THETA cells per chunk)
CHUNK_PAGES = 4096


def theta_grid(n: int = N_THETA) -> np.ndarray:
    return np.linspace(*THETA_RANGE, n)


def page_loglik_grid(stats: IntervalStats, pages: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``(len(pages), len(theta))`` exact log-likelihood of each page at each log-rate."""
    lam = np.exp(theta)
    out = -np.outer(stats.unchanged_exposure[pages], lam)
    changed = stats.changed_groups
    # changed groups of the requested pages
    pos = np.full(stats.n_pages, -1, dtype=np.int64)
    pos[pages] = np.arange(len(pages))
    owner = pos[stats.group_page[changed]]
    keep = owner >= 0
    if keep.any():
        g = changed[keep]
        contrib = stats.group_changed[g][:, None] * np_log1mexp_of_log(
            theta[None, :] + np.log(stats.group_tau[g])[:, None]
        )
        _add_rows(out, owner[keep], contrib)
    return out


def _add_rows(out: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``out[rows] += values`` with repeated rows summed (sorted reduceat)."""
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], values[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    out[rows[starts]] += np.add.reduceat(values, starts, axis=0)


def gaussian_kernel(theta: np.ndarray, mu: np.ndarray, sd: float) -> np.ndarray:
    """``K[t, m] = N(theta_t; mu_m, sd) · Δθ`` (trapezoid weights)."""
    w = np.gradient(theta)  # interior Δθ, half at the ends (trapezoid)
    w[0] = w[-1] = (theta[1] - theta[0]) / 2
    z = (theta[:, None] - mu[None, :]) / sd
    return np.exp(-0.5 * z**2) / (sd * math.sqrt(2 * math.pi)) * w[:, None]


def stratified_sample(
    domain: np.ndarray, n_sample: int, rng: np.random.Generator, *, min_per_domain: int = 2
) -> np.ndarray:
    """Sorted page positions: every domain gets ``min(n_d, min_per_domain)`` pages, the
    rest of ``n_sample`` is allocated in proportion to domain size."""
    domain = np.asarray(domain)
    n_domains = int(domain.max()) + 1 if len(domain) else 0
    sizes = np.bincount(domain, minlength=n_domains)
    if n_sample >= len(domain):
        return np.arange(len(domain))
    base = np.minimum(sizes, min_per_domain)
    extra = max(n_sample - base.sum(), 0)
    alloc = base + np.floor(extra * sizes / sizes.sum()).astype(np.int64)
    alloc = np.minimum(alloc, sizes)
    chosen = []
    for d in range(n_domains):
        members = np.flatnonzero(domain == d)
        if alloc[d]:
            chosen.append(rng.choice(members, size=alloc[d], replace=False))
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, np.int64)


def _quantiles(theta: np.ndarray, dens: np.ndarray, qs: tuple[float, ...]) -> list[np.ndarray]:
    """Quantiles of λ = exp(θ) from normalised densities on a common grid (linear CDF)."""
    step = np.diff(theta)
    cdf = np.concatenate(
        [np.zeros((len(dens), 1)), np.cumsum(0.5 * (dens[:, 1:] + dens[:, :-1]) * step, axis=1)],
        axis=1,
    )
    cdf /= cdf[:, -1:]
    out = []
    rows = np.arange(len(dens))
    for q in qs:
        i = np.clip((cdf < q).sum(axis=1) - 1, 0, len(theta) - 2)
        c0, c1 = cdf[rows, i], cdf[rows, i + 1]
        frac = np.clip((q - c0) / np.maximum(c1 - c0, 1e-300), 0.0, 1.0)
        out.append(np.exp(theta[i] + frac * step[i]))
    return out


@dataclass
class ScaleResult:
    """Outcome of :func:`fit_scale`.

    Attributes
    ----------
    hyper
        Stage-1 posterior means: ``mu_global``, ``sigma_domain``, ``sigma_page`` (log rate
        per hour).
    domains
        Per domain: ``mu_mean``, ``mu_sd`` (posterior of the domain's mean log-rate per
        hour, from all its pages), ``n_pages``, ``rate_per_day`` (``exp(mu_mean)``·24).
    pages
        Per page, the ``page_summary_`` columns: ``page``, ``domain``, ``rate_per_day``,
        ``lower_per_day``, ``upper_per_day``, ``n_visits``, ``n_changes``.
    sample
        Page positions of the stage-1 sample.
    stage1
        The fitted stage-1 model.
    seconds
        Wall time per stage and total.
    """

    hyper: dict[str, float]
    domains: pd.DataFrame
    pages: pd.DataFrame
    sample: np.ndarray
    stage1: HierarchicalModel
    seconds: dict[str, float] = field(default_factory=dict)


def grid_domain_and_pages(
    stats: IntervalStats,
    mu_global: float,
    sigma_domain: float,
    sigma_page: float,
    *,
    n_theta: int = N_THETA,
    n_mu: int = N_MU,
    chunk: int = CHUNK_PAGES,
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Stages 2 and 3 for fixed hyperparameters; see the module docstring.

    Returns
    -------
    domains, pages
        Domain table (``mu_mean``, ``mu_sd``, ``n_pages``) and per-page arrays
        ``mean``, ``lower``, ``upper`` (rate per hour), ``log_mean``.
    """
    theta = theta_grid(n_theta)
    mu = np.linspace(THETA_RANGE[0] + 2, THETA_RANGE[1] - 2, n_mu)
    kernel = gaussian_kernel(theta, mu, sigma_page)  # (T, M)
    n_domains = len(stats.domains)
    domain = stats.domain
    chunks = [np.arange(a, min(a + chunk, stats.n_pages)) for a in range(0, stats.n_pages, chunk)]

    # stage 2: log posterior of each domain mean on the mu grid
    log_post = np.zeros((n_domains, n_mu))
    for pages in chunks:
        ll = page_loglik_grid(stats, pages, theta)
        top = ll.max(axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            marg = np.log(np.exp(ll - top) @ kernel) + top  # (P, M)
        _add_rows(log_post, domain[pages], marg)
    log_post += -0.5 * ((mu - mu_global) / sigma_domain) ** 2
    log_post -= log_post.max(axis=1, keepdims=True)
    weights = np.exp(log_post)
    weights /= weights.sum(axis=1, keepdims=True)
    mu_mean = weights @ mu
    mu_sd = np.sqrt(np.maximum(weights @ mu**2 - mu_mean**2, 0.0))

    # stage 3: each page's prior is its domain's mixture of normals
    with np.errstate(divide="ignore"):
        log_prior = np.log(weights @ (kernel / np.gradient(theta)[:, None]).T)  # (D, T)
    mean = np.empty(stats.n_pages)
    lower = np.empty(stats.n_pages)
    upper = np.empty(stats.n_pages)
    log_mean = np.empty(stats.n_pages)
    step = np.diff(theta)
    for pages in chunks:
        lp = page_loglik_grid(stats, pages, theta) + log_prior[domain[pages]]
        dens = np.exp(lp - lp.max(axis=1, keepdims=True))
        norm = np.sum(0.5 * (dens[:, 1:] + dens[:, :-1]) * step, axis=1)
        dens /= norm[:, None]
        trap = lambda v: np.sum(0.5 * (v[:, 1:] + v[:, :-1]) * step, axis=1)  # noqa: E731
        mean[pages] = trap(dens * np.exp(theta))
        log_mean[pages] = trap(dens * theta)
        lower[pages], upper[pages] = _quantiles(theta, dens, (0.05, 0.95))
    sizes = np.bincount(domain, minlength=n_domains)
    domains = pd.DataFrame(
        {
            "mu_mean": mu_mean,
            "mu_sd": mu_sd,
            "n_pages": sizes,
            "rate_per_day": np.exp(mu_mean) * HOURS_PER_DAY,
        },
        index=pd.Index(stats.domains, name="domain"),
    )
    return domains, {"mean": mean, "lower": lower, "upper": upper, "log_mean": log_mean}


def fit_scale(
    data: Observations,
    *,
    n_sample: int = 2000,
    method: str = "nuts",
    seed: int | str = "scale",
    model_config: dict[str, Any] | None = None,
    sampler_config: dict[str, Any] | None = None,
) -> ScaleResult:
    """Hierarchical posterior for many pages: see the module docstring.

    Parameters
    ----------
    data
        All observations.
    n_sample
        Pages in the stage-1 NUTS sample (ignored for ``method`` ADVI/pathfinder, which
        use all pages).
    method
        Stage-1 fitting method.
    seed
        Seed of the stratified sample and of the sampler.
    """
    from bayesrate.models.base import seed_int
    from bayesrate.models.hierarchical import HierarchicalModel

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed_int(seed))
    stats = data.interval_stats
    if method == "nuts":
        sample = stratified_sample(stats.domain, n_sample, rng)
    else:
        sample = np.arange(data.n_pages)
    sub = data.subset(sample) if len(sample) < data.n_pages else data
    sampler = {"seed": seed, **(sampler_config or {})}
    stage1 = HierarchicalModel(model_config, sampler).fit(sub, method=method)
    t1 = time.perf_counter()
    post = stage1.idata_["posterior"]
    hyper = {k: float(post[k].mean()) for k in ("mu_global", "sigma_domain", "sigma_page")}
    domains, pages = grid_domain_and_pages(
        stats, hyper["mu_global"], hyper["sigma_domain"], hyper["sigma_page"]
    )
    t2 = time.perf_counter()
    table = pd.DataFrame(
        {
            "page": data.pages.index.to_numpy(),
            "domain": data.pages["domain"].to_numpy(),
            "rate_per_day": pages["mean"] * HOURS_PER_DAY,
            "lower_per_day": pages["lower"] * HOURS_PER_DAY,
            "upper_per_day": pages["upper"] * HOURS_PER_DAY,
            "n_visits": stats.n_visits,
            "n_changes": stats.n_changes,
            "log_rate_mean": pages["log_mean"],
        }
    )
    return ScaleResult(
        hyper=hyper,
        domains=domains,
        pages=table,
        sample=sample,
        stage1=stage1,
        seconds={"stage1": t1 - t0, "grid": t2 - t1, "total": t2 - t0},
    )
