"""Scale path: the hierarchical model for many pages without sampling every page.

Three stages (``docs/models.md``, "Scale path"):

1. **Hyperparameters** — fit :class:`~bayesrate.models.hierarchical.HierarchicalModel` by
   NUTS on a *stratified sample* of pages (every domain represented, the rest allocated in
   proportion to domain size), or by ADVI/pathfinder on all pages. Keep the posterior
   means of ``mu_global``, ``sigma_domain`` and ``sigma_page`` (σ_d, σ_p below).
2. **Domain means from all pages, exactly** (given those hyperparameters). A page's
   marginal likelihood given its domain's mean, ``m_p(μ) = ∫ L_p(θ) N(θ; μ, σ_p) dθ``,
   is a quadrature on the page's own grid of ``θ = log λ`` (a sinh grid,
   :func:`bayesrate.estimators.grid.sinh_grid`, placed where the page's likelihood times
   its prior is not negligible). The domain mean's posterior
   ``w_d(μ) ∝ N(μ; μ_g, σ_d) Π_{p∈d} m_p(μ)`` is evaluated on a per-domain grid of μ:
   centred at its mode (Newton on the concave ``log w_d``), dense within its Laplace
   width and reaching ``±√(2·SPAN)·σ_d``, which bounds it because ``d² log w_d/dμ² ≤ −1/σ_d²``.
   A domain of 3,000 pages has a posterior SD near ``σ_p/√n``; a fixed grid cannot resolve
   it, this one does at any size.
3. **Pages** — the prior of page ``p`` is its domain mean's posterior *without the page's
   own data*, ``p(μ | y₋ₚ) ∝ w_d(μ) / m_p(μ)``, mixed over ``N(θ; μ, σ_p)``: its posterior
   ``∝ L_p(θ) ∫ p(μ | y₋ₚ) N(θ; μ, σ_p) dμ`` is the exact conditional (using ``w_d`` itself
   would count the page's data twice). Mean, 5% and 95% quantiles and the mean of
   ``log λ`` come from that 1-D posterior.

Everything after stage 1 is vectorized numpy in page chunks; no Bernoulli per visit, no
per-page Python loop. Tested against 2-D quadrature over ``(θ, μ)`` (``tests/``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.estimators.grid import SPAN, GridPosterior, locate, sinh_grid
from bayesrate.likelihood import CensoredGroups, loglik_grid

if TYPE_CHECKING:
    from bayesrate.models.hierarchical import HierarchicalModel
    from bayesrate.observations import Observations
    from bayesrate.sufficient import IntervalStats

#: nodes of each page's grid of log λ
N_THETA = 96
#: nodes of each domain's grid of μ
N_MU = 64
#: the pages' grids cover their likelihood times a normal of this many prior SDs' width
GRID_WIDTH_FACTOR = 1.5
#: pages per chunk (pages x N_THETA x N_MU cells per chunk)
CHUNK_PAGES = 2048
NEWTON_STEPS = 30
#: scan range of the pages' grids, log rate per hour
THETA_RANGE = (math.log(1e-12), math.log(1e6))


def stratified_allocation(
    sizes: np.ndarray, n_sample: int, min_per_domain: int = 2
) -> np.ndarray:
    """Pages to sample per domain: ``min(n_d, min_per_domain)`` each, the rest of
    ``n_sample`` in proportion to domain size (``sizes``: pages per domain)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) == 0 or n_sample >= sizes.sum():
        return sizes.copy()
    base = np.minimum(sizes, min_per_domain)
    extra = max(n_sample - base.sum(), 0)
    alloc = base + np.floor(extra * sizes / sizes.sum()).astype(np.int64)
    return np.minimum(alloc, sizes)


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
    alloc = stratified_allocation(sizes, n_sample, min_per_domain)
    chosen = []
    for d in range(n_domains):
        members = np.flatnonzero(domain == d)
        if alloc[d]:
            chosen.append(rng.choice(members, size=alloc[d], replace=False))
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, np.int64)


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
        hour, from all its pages), ``n_pages``, ``median_rate_per_day`` (``exp(mu_mean)``
        per day: the median rate of the domain's pages at the posterior mean of μ) and
        ``mean_rate_per_day`` (``E[exp(μ + σ_p²/2)]`` per day: the posterior mean of the
        domain's mean page rate).
    pages
        Per page, the ``page_summary_`` columns: ``page``, ``domain``, ``rate_per_day``
        (posterior mean), ``lower_per_day``, ``upper_per_day`` (5% and 95%),
        ``n_visits``, ``n_changes``, and ``log_rate_mean`` (posterior mean of log λ per
        hour).
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


def logsumexp(values: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    """``log Σ exp`` along ``axis`` (max-shifted; ``−inf`` where every value is)."""
    top = np.max(values, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(values - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


def _normal_logpdf(x: np.ndarray, mu: np.ndarray, sigma: float) -> np.ndarray:
    z = (x - mu) / sigma
    return -0.5 * z * z - np.log(sigma) - 0.5 * math.log(2 * math.pi)


def _trapezoid_weights(jacobian: np.ndarray) -> np.ndarray:
    """Trapezoid weights (``dθ`` per node) from a grid's ``dθ/dj``."""
    w = jacobian.copy()
    w[:, [0, -1]] *= 0.5
    return w


@dataclass
class _PageGrids:
    """Each page's grid of θ, its log weights ``ℓ_p(θ_g) + log dθ_g``, and the jacobian."""

    theta: np.ndarray
    log_weight: np.ndarray
    jacobian: np.ndarray


def _page_grids(
    groups: CensoredGroups, centre: np.ndarray, width: np.ndarray, n_theta: int
) -> _PageGrids:
    """Grids covering where ``L_p(θ)·N(θ; centre_p, width_p)`` is not negligible."""
    theta_parts, lw_parts, jac_parts = [], [], []
    for a in range(0, groups.n_pages, CHUNK_PAGES):
        pages = np.arange(a, min(a + CHUNK_PAGES, groups.n_pages))
        sub = groups.select(pages)

        def log_density(theta, rows, sub=sub, pages=pages):
            ll = loglik_grid(sub.select(rows), theta)
            return ll + _normal_logpdf(theta, centre[pages[rows], None], width[pages[rows], None])

        left, mode, right = locate(log_density, len(pages), *THETA_RANGE)
        theta, jacobian = sinh_grid(left, mode, right, n_theta)
        ll = loglik_grid(sub, theta)
        theta_parts.append(theta)
        lw_parts.append(ll + np.log(_trapezoid_weights(jacobian)))
        jac_parts.append(jacobian)
    return _PageGrids(
        np.concatenate(theta_parts), np.concatenate(lw_parts), np.concatenate(jac_parts)
    )


def _page_moments(grids: _PageGrids, mu: np.ndarray, sigma: float) -> tuple[np.ndarray, ...]:
    """Per page: ``log m_p(μ_p)``, and the mean and variance of θ under prior N(μ_p, σ)."""
    lp = grids.log_weight + _normal_logpdf(grids.theta, mu[:, None], sigma)
    log_m = logsumexp(lp, axis=1)
    w = np.exp(lp - log_m[:, None])
    mean = np.sum(w * grids.theta, axis=1)
    var = np.maximum(np.sum(w * (grids.theta - mean[:, None]) ** 2, axis=1), 0.0)
    return log_m, mean, var


def _domain_modes(
    grids: _PageGrids, domain: np.ndarray, n_domains: int, hyper: tuple[float, float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Mode and Laplace SD of each domain mean's posterior (Newton on a concave function)."""
    mu_g, sd_d, sd_p = hyper
    mu = np.full(n_domains, mu_g)
    for _ in range(NEWTON_STEPS):
        _, mean, var = _page_moments(grids, mu[domain], sd_p)
        grad = (mu_g - mu) / sd_d**2 + np.bincount(
            domain, weights=(mean - mu[domain]) / sd_p**2, minlength=n_domains
        )
        curv = -1.0 / sd_d**2 + np.bincount(
            domain, weights=(var - sd_p**2) / sd_p**4, minlength=n_domains
        )
        curv = np.minimum(curv, -1.0 / sd_d**2)  # the bound that concavity guarantees
        step = -grad / curv
        mu = mu + np.clip(step, -3 * sd_d, 3 * sd_d)
        if np.all(np.abs(step) < 1e-10 * np.maximum(1.0, np.abs(mu))):
            break
    return mu, 1.0 / np.sqrt(-curv)


def _page_marginals(grids: _PageGrids, mu_nodes: np.ndarray, sigma: float) -> np.ndarray:
    """``log m_p(μ)`` at each page's domain nodes: ``(n_pages, N_MU)``."""
    out = np.empty(mu_nodes.shape)
    for a in range(0, len(mu_nodes), CHUNK_PAGES):
        sl = slice(a, a + CHUNK_PAGES)
        lk = _normal_logpdf(grids.theta[sl, :, None], mu_nodes[sl, None, :], sigma)
        out[sl] = logsumexp(grids.log_weight[sl, :, None] + lk, axis=1)
    return out


def grid_domain_and_pages(
    stats: IntervalStats,
    mu_global: float,
    sigma_domain: float,
    sigma_page: float,
    *,
    n_theta: int = N_THETA,
    n_mu: int = N_MU,
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Stages 2 and 3 for fixed hyperparameters; see the module docstring.

    Returns
    -------
    domains, pages
        Domain table (``mu_mean``, ``mu_sd``, ``n_pages``, ``median_rate_per_day``,
        ``mean_rate_per_day``) and per-page arrays ``mean``, ``lower``, ``upper`` (rate per
        hour) and ``log_mean``.
    """
    groups = stats.groups
    domain = stats.domain
    n_domains = len(stats.domains)
    hyper = (mu_global, sigma_domain, sigma_page)
    marginal_sd = math.hypot(sigma_domain, sigma_page)
    width = np.full(stats.n_pages, GRID_WIDTH_FACTOR * marginal_sd)
    # pass 1: grids around the global prior; the domains' modes from them
    grids = _page_grids(groups, np.full(stats.n_pages, mu_global), width, n_theta)
    mode, laplace_sd = _domain_modes(grids, domain, n_domains, hyper)
    # pass 2: grids around each page's domain; the domain posteriors on their μ grids
    grids = _page_grids(groups, mode[domain], width, n_theta)
    reach = math.sqrt(2 * SPAN) * sigma_domain
    mu_nodes, mu_jac = sinh_grid(mode - reach, mode, mode + reach, n_mu, laplace_sd)
    log_m = _page_marginals(grids, mu_nodes[domain], sigma_page)
    log_w = _normal_logpdf(mu_nodes, mu_global, sigma_domain) + np.log(_trapezoid_weights(mu_jac))
    np.add.at(log_w, domain, log_m)
    log_w -= logsumexp(log_w, axis=1, keepdims=True)
    weight = np.exp(log_w)
    mu_mean = np.sum(weight * mu_nodes, axis=1)
    mu_sd = np.sqrt(np.maximum(np.sum(weight * (mu_nodes - mu_mean[:, None]) ** 2, axis=1), 0))
    mean_rate = np.sum(weight * np.exp(mu_nodes + sigma_page**2 / 2), axis=1)

    # stage 3: each page's prior mixes N(θ; μ, σ_p) over p(μ | y without the page)
    loo = log_w[domain] - log_m
    loo -= logsumexp(loo, axis=1, keepdims=True)
    mean = np.empty(stats.n_pages)
    lower = np.empty(stats.n_pages)
    upper = np.empty(stats.n_pages)
    log_mean = np.empty(stats.n_pages)
    for a in range(0, stats.n_pages, CHUNK_PAGES):
        sl = slice(a, a + CHUNK_PAGES)
        lk = _normal_logpdf(grids.theta[sl, :, None], mu_nodes[domain[sl], None, :], sigma_page)
        log_prior = logsumexp(lk + loo[sl, None, :], axis=2)
        log_post = grids.log_weight[sl] - np.log(_trapezoid_weights(grids.jacobian[sl]))
        log_post = log_post + log_prior
        dens = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        post = _normalised(grids.theta[sl], dens, grids.jacobian[sl])
        mean[sl] = post.mean()
        log_mean[sl] = post.log_mean()
        lower[sl] = post.quantile(0.05)
        upper[sl] = post.quantile(0.95)
    domains = pd.DataFrame(
        {
            "mu_mean": mu_mean,
            "mu_sd": mu_sd,
            "n_pages": np.bincount(domain, minlength=n_domains),
            "median_rate_per_day": np.exp(mu_mean) * HOURS_PER_DAY,
            "mean_rate_per_day": mean_rate * HOURS_PER_DAY,
            "laplace_sd": laplace_sd,
        },
        index=pd.Index(stats.domains, name="domain"),
    )
    return domains, {"mean": mean, "lower": lower, "upper": upper, "log_mean": log_mean}


def _normalised(theta: np.ndarray, dens: np.ndarray, jacobian: np.ndarray) -> GridPosterior:
    """A :class:`GridPosterior` from unnormalised densities on sinh grids (no tail)."""
    n = len(theta)
    total = np.sum(_trapezoid_weights(jacobian) * dens, axis=1)
    return GridPosterior(
        theta=theta,
        density=dens / total[:, None],
        jacobian=jacobian,
        tail_mass=np.zeros(n),
        tail_slope=np.zeros(n),
        log_evidence=np.full(n, np.nan),
    )


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
