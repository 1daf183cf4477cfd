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

Everything after stage 1 runs in chunks of :data:`CHUNK_PAGES` pages (bounded memory):
the pages' grids are found by Newton steps on their concave log-likelihood
(:func:`bayesrate.likelihood.loglik_derivatives`), kept compactly, and the page × node
sums (``m_p`` at the μ nodes, the mixture priors at the θ nodes) are one parallel numba
kernel; no Bernoulli per visit, no per-page Python loop. Tested against 2-D quadrature
over ``(θ, μ)`` (``tests/models/test_models_scale.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numba
import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.estimators.grid import (
    CHUNK_PAGES,
    NEWTON_STEPS,
    SPAN,
    PageGrids,
    normalised_grid_posterior,
    prior_page_grids,
    sinh_grid,
    trapezoid_weights,
)
from bayesrate.models._binomial_kernels import exp_into

if TYPE_CHECKING:
    from bayesrate.models.hierarchical import HierarchicalModel
    from bayesrate.observations import Observations
    from bayesrate.sufficient import IntervalStats

#: nodes of each page's grid of log λ
N_THETA = 48
#: nodes of each domain's grid of μ
N_MU = 32
#: the pages' grids cover their likelihood times a normal of this many prior SDs' width
GRID_WIDTH_FACTOR = 1.5


def stratified_allocation(sizes: np.ndarray, n_sample: int, min_per_domain: int = 2) -> np.ndarray:
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


# ---------------------------------------------------------------------- numba kernels
# The per-page products (page grid × domain μ grid) fused into one pass per page, pages in
# parallel. Sums run in linear space against each page's own maximum; a sum that
# underflows (a μ node e^-700 away from everything the page allows) is redone in log space,
# so that no node ever gets a spurious −inf.
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_TINY_SUM = 1e-280
#: relative weights below e^-40 (SPAN) are left out of the sums
_NEGLIGIBLE = math.exp(-SPAN)
#: the vectorised exponential's domain starts here (its result is a normal number)
_EXP_ARGUMENT_MIN = -708.0


_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


@numba.njit(**_JIT)
def _log_mix(values, shift, offs, inv2s2):  # log Σ_i exp(values_i − (offs_i)² inv2s2)
    top = -np.inf
    for i in range(values.shape[0]):
        v = values[i] - offs[i] * offs[i] * inv2s2
        top = max(top, v)
    if top == -np.inf:
        return -np.inf
    acc = 0.0
    for i in range(values.shape[0]):
        acc += math.exp(values[i] - offs[i] * offs[i] * inv2s2 - top)
    return math.log(acc) + top


@numba.njit(parallel=True, **_JIT)
def _log_gaussian_mixture(centers, log_weight, points, sigma):
    # per page p and point k: log Σ_i exp(log_weight[p, i]) N(points[p, k]; centers[p, i], σ)
    # (the pages' marginals at the μ nodes, and the pages' mixture priors at the θ nodes)
    n, c = centers.shape
    m = points.shape[1]
    out = np.empty((n, m))
    inv2s2 = 0.5 / (sigma * sigma)
    norm = -math.log(sigma) - _LOG_SQRT_2PI
    for p in numba.prange(n):
        top = -np.inf
        for i in range(c):
            top = max(top, log_weight[p, i])
        w = np.empty(c)
        for i in range(c):
            w[i] = math.exp(log_weight[p, i] - top)
        offs = np.empty(c)
        active = np.flatnonzero(w >= _NEGLIGIBLE)  # centres within e^-40 of the largest
        size = len(active) * m
        x = np.empty(size)
        kernel = np.empty(size)
        poly = np.empty(size)
        scale_bits = np.empty(size, dtype=np.int64)
        for a in range(len(active)):
            for k in range(m):
                d = centers[p, active[a]] - points[p, k]
                # below e^-708 a kernel value is nothing next to _TINY_SUM
                x[a * m + k] = max(-d * d * inv2s2, _EXP_ARGUMENT_MIN)
        exp_into(x, kernel, poly, scale_bits, size)
        acc = np.zeros(m)
        for a in range(len(active)):
            for k in range(m):
                acc[k] += w[active[a]] * kernel[a * m + k]
        for k in range(m):
            if acc[k] > _TINY_SUM:
                out[p, k] = math.log(acc[k]) + top + norm
            else:
                for i in range(c):
                    offs[i] = centers[p, i] - points[p, k]
                out[p, k] = _log_mix(log_weight[p], 0.0, offs, inv2s2) + norm
    return out


@numba.njit(parallel=True, **_JIT)
def _moments_kernel(theta, log_weight, mu, sigma):
    # log m_p(μ_p), and mean and variance of θ under prior N(μ_p, σ)
    n, t = theta.shape
    log_m = np.empty(n)
    mean = np.empty(n)
    var = np.empty(n)
    inv2s2 = 0.5 / (sigma * sigma)
    norm = -math.log(sigma) - _LOG_SQRT_2PI
    for p in numba.prange(n):
        lp = np.empty(t)
        top = -np.inf
        for i in range(t):
            d = theta[p, i] - mu[p]
            lp[i] = log_weight[p, i] - d * d * inv2s2
            top = max(top, lp[i])
        s0 = 0.0
        s1 = 0.0
        for i in range(t):
            e = math.exp(lp[i] - top)
            lp[i] = e
            s0 += e
            s1 += e * theta[p, i]
        mu1 = s1 / s0
        s2 = 0.0
        for i in range(t):
            d = theta[p, i] - mu1
            s2 += lp[i] * d * d
        log_m[p] = math.log(s0) + top + norm
        mean[p] = mu1
        var[p] = max(s2 / s0, 0.0)
    return log_m, mean, var


def _normal_logpdf(x: np.ndarray, mu: np.ndarray, sigma: float) -> np.ndarray:
    z = (x - mu) / sigma
    return -0.5 * z * z - np.log(sigma) - 0.5 * math.log(2 * math.pi)


#: a page's grid is rebuilt around its domain's mode unless its likelihood is this much
#: narrower than the grid prior (information × width² above it) and the mode moved less
#: than :data:`REGRID_SHIFT` widths
REGRID_INFORMATION = 100.0
REGRID_SHIFT = 2.0


def _needs_regrid(grids: PageGrids, shift: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Pages whose pass-1 grid (around the global mean) may not serve their domain.

    Moving the grid prior's centre by ``δ`` tilts ``g`` by ``δ/width²`` per unit of θ.
    Where the likelihood's SD is at most ``width/10`` (information × width² ≥ 100) the
    SPAN region is at most ``2·√(2·SPAN)·width/10 ≈ 1.8·width`` wide, so a move of at most
    2 widths tilts it by at most 3.6 of its 40 log units: the pass-1 grid still covers
    the page's posterior to within e^-36 and resolves it as well (tested against 2-D
    quadrature). Every other page gets a new grid.
    """
    info = (grids.curvature - 1.0 / width**2) * width**2
    return (info < REGRID_INFORMATION) | (np.abs(shift) > REGRID_SHIFT * width)


def _page_moments(grids: PageGrids, mu: np.ndarray, sigma: float) -> tuple[np.ndarray, ...]:
    """Per page: ``log m_p(μ_p)``, and the mean and variance of θ under prior N(μ_p, σ)."""
    out = tuple(np.empty(grids.n_pages) for _ in range(3))
    for a in range(0, grids.n_pages, CHUNK_PAGES):
        sl = slice(a, a + CHUNK_PAGES)
        theta, log_weight = grids.theta(sl), grids.log_weight(sl)
        for whole, part in zip(out, _moments_kernel(theta, log_weight, mu[sl], sigma),
                               strict=True):  # fmt: skip
            whole[sl] = part
    return out


def _domain_modes(
    grids: PageGrids, domain: np.ndarray, n_domains: int, hyper: tuple[float, float, float]
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
        # the mode only centres the μ grid: a thousandth of its Laplace width is plenty
        if np.all(np.abs(step) < 1e-3 / np.sqrt(-curv)):
            break
    return mu, 1.0 / np.sqrt(-curv)


def _page_marginals(grids: PageGrids, sl: slice, mu_nodes: np.ndarray, sigma: float) -> np.ndarray:
    """``log m_p(μ)`` at the domain nodes ``mu_nodes`` of the pages in ``sl``."""
    theta, log_weight = grids.theta(sl), grids.log_weight(sl)
    return _log_gaussian_mixture(theta, log_weight, np.ascontiguousarray(mu_nodes), sigma)


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
    grids = prior_page_grids(groups, np.full(stats.n_pages, mu_global), width, n_theta)
    mode, laplace_sd = _domain_modes(grids, domain, n_domains, hyper)
    # pass 2: grids around each page's domain, where the move matters (_needs_regrid)
    redo = np.flatnonzero(_needs_regrid(grids, mode[domain] - mu_global, width))
    if len(redo):
        grids.replace(redo, prior_page_grids(groups.select(redo), mode[domain[redo]], width[redo],
                                        n_theta))  # fmt: skip
    reach = math.sqrt(2 * SPAN) * sigma_domain
    mu_nodes, mu_jac = sinh_grid(mode - reach, mode, mode + reach, n_mu, laplace_sd)
    log_w = _normal_logpdf(mu_nodes, mu_global, sigma_domain) + np.log(trapezoid_weights(mu_jac))
    # each page's log m_p(μ) at its domain's nodes, as float32 offsets from its maximum
    m_top = np.empty(stats.n_pages)
    m_rel = np.empty((stats.n_pages, n_mu), dtype=np.float32)
    for a in range(0, stats.n_pages, CHUNK_PAGES):
        sl = slice(a, a + CHUNK_PAGES)
        log_m = _page_marginals(grids, sl, mu_nodes[domain[sl]], sigma_page)
        for j in range(n_mu):  # Σ over each domain's pages, node by node
            log_w[:, j] += np.bincount(domain[sl], weights=log_m[:, j], minlength=n_domains)
        m_top[sl] = log_m.max(axis=1)
        m_rel[sl] = log_m - m_top[sl, None]
    log_w -= logsumexp(log_w, axis=1, keepdims=True)
    weight = np.exp(log_w)
    mu_mean = np.sum(weight * mu_nodes, axis=1)
    mu_sd = np.sqrt(np.maximum(np.sum(weight * (mu_nodes - mu_mean[:, None]) ** 2, axis=1), 0))
    mean_rate = np.sum(weight * np.exp(mu_nodes + sigma_page**2 / 2), axis=1)

    # stage 3: each page's prior mixes N(θ; μ, σ_p) over p(μ | y without the page)
    mean = np.empty(stats.n_pages)
    lower = np.empty(stats.n_pages)
    upper = np.empty(stats.n_pages)
    log_mean = np.empty(stats.n_pages)
    for a in range(0, stats.n_pages, CHUNK_PAGES):
        sl = slice(a, a + CHUNK_PAGES)
        loo = log_w[domain[sl]] - m_rel[sl].astype(np.float64)
        loo -= logsumexp(loo, axis=1, keepdims=True)
        theta, log_weight, jacobian = grids.chunk(sl)
        log_prior = _log_gaussian_mixture(
            np.ascontiguousarray(mu_nodes[domain[sl]]), loo, theta, sigma_page
        )
        log_post = log_weight - np.log(trapezoid_weights(jacobian)) + log_prior
        dens = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        post = normalised_grid_posterior(theta, dens, jacobian)
        mean[sl] = post.mean()
        log_mean[sl] = post.log_mean()
        lower[sl], upper[sl] = post.quantiles((0.05, 0.95))
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
