"""Per-page posteriors of the hierarchical model, Rao-Blackwellised over the population draws.

Given the population parameters ``φ = (μ_d, σ_p)``, pages are independent and page ``p``'s
posterior of ``θ = log λ`` is one-dimensional::

    p(θ | φ, y_p) = L_p(θ) · N(θ; μ_{d(p)}, σ_p) / m_p(φ)

so its marginal posterior is the average of these exact conditionals over the posterior
draws of ``φ``, ``p(θ | y) = (1/S) Σ_s p(θ | φ_s, y_p)``. Averaging the conditionals
instead of the page's own draws of ``θ`` estimates the same posterior with far less Monte
Carlo error (the conditional mean's variance over ``φ`` is at most the draws' variance, and
for a page whose data dominate its prior it is a small fraction of it). On the 5,000-page
irregular-visit benchmark the per-page means agree with a long reference run to a fraction
of a percent where the draws' own means scatter by up to 3% (``benchmarks/RESULTS.md``).

Each page's conditionals are evaluated on one sinh grid of ``θ``
(:func:`bayesrate.estimators.grid.prior_page_grids`) that covers ``L_p(θ)·N(θ; centre, width)`` with
the centre at the page's mean domain mean and a width that exceeds every draw's ``σ_p``;
the average over draws is one parallel numba pass per page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from bayesrate.estimators.grid import (
    CHUNK_PAGES,
    normalised_grid_posterior,
    prior_page_grids,
    trapezoid_weights,
)
from bayesrate.likelihood import CensoredGroups

#: nodes of each page's grid of log λ
N_THETA = 64
#: the grid's width exceeds the largest σ_p draw by this many SDs of the page's domain mean
DOMAIN_SPREAD_SDS = 4.0
#: a grid of :data:`N_THETA` nodes serves conditional priors down to its width over this
#: (more nodes below): accurate to ~1e-8 in the mean where the draws' σ_p vary by ±10%
WIDTH_RATIO_PER_GRID = 2.0

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


@numba.njit(parallel=True, **_JIT)
def _average_conditionals(theta, log_weight, domain, mu, sigma, draw_means):
    # per page p: (1/S) Σ_s softmax_j(log_weight[p, j] − (θ_pj − μ[s, d(p)])² / (2 σ_s²)),
    # the conditionals' probabilities of the grid cells averaged over the draws; with
    # draw_means (S, n) (else (0, n)) also each conditional's mean of e^θ
    n, t = theta.shape
    n_draws = mu.shape[0]
    keep_means = draw_means.shape[0] > 0
    out = np.empty((n, t))
    for p in numba.prange(n):
        d = domain[p]
        acc = np.zeros(t)
        a = np.empty(t)
        rate = np.empty(t)
        for j in range(t):
            rate[j] = math.exp(theta[p, j])
        for s in range(n_draws):
            m = mu[s, d]
            inv2s2 = 0.5 / (sigma[s] * sigma[s])
            top = -np.inf
            for j in range(t):
                z = theta[p, j] - m
                a[j] = log_weight[p, j] - z * z * inv2s2
                top = max(top, a[j])
            total = 0.0
            for j in range(t):
                a[j] = math.exp(a[j] - top)
                total += a[j]
            inv = 1.0 / total
            for j in range(t):
                acc[j] += a[j] * inv
            if keep_means:
                first = 0.0
                for j in range(t):
                    first += a[j] * rate[j]
                draw_means[s, p] = first * inv
        for j in range(t):
            out[p, j] = acc[j] / n_draws
    return out


@dataclass
class PagePosteriors:
    """Per-page summaries of the averaged conditionals (rates per hour).

    Attributes
    ----------
    mean
        ``(n_pages,)`` posterior mean of λ: the average of :attr:`draw_means` when kept.
    quantiles
        ``(n_quantiles, n_pages)`` posterior quantiles of λ at the requested levels.
    n_theta
        ``(n_pages,)`` grid nodes each page was integrated on.
    draw_means
        ``(n_draws, n_pages)`` each conditional's mean of λ, or ``None``: their Monte
        Carlo standard error (over the chains) is the mean's.
    """

    mean: np.ndarray
    quantiles: np.ndarray
    n_theta: np.ndarray
    draw_means: np.ndarray | None = None


def nodes_needed(width: np.ndarray, sigma_min: float, n_theta: int = N_THETA) -> np.ndarray:
    """Grid nodes per page: :data:`N_THETA` doubled until the narrowest conditional prior is
    resolved as well as the widest grid is (``width / sigma_min`` at most
    :data:`WIDTH_RATIO_PER_GRID`)."""
    ratio = np.maximum(width / sigma_min / WIDTH_RATIO_PER_GRID, 1.0)
    return n_theta * 2 ** np.ceil(np.log2(ratio)).astype(np.int64)


def conditional_average(
    groups: CensoredGroups,
    domain: np.ndarray,
    mu_domain: np.ndarray,
    sigma_page: np.ndarray,
    *,
    quantiles: tuple[float, ...] = (0.05, 0.95),
    n_theta: int = N_THETA,
    draw_means: bool = False,
) -> PagePosteriors:
    """Each page's posterior of ``θ = log λ`` as the average of its exact conditionals.

    Parameters
    ----------
    groups
        The pages' sufficient statistics (the likelihood the model was fitted to).
    domain
        ``(n_pages,)`` domain position of each page.
    mu_domain
        ``(n_draws, n_domains)`` posterior draws of the domain means of ``log λ``.
    sigma_page
        ``(n_draws,)`` posterior draws of the pages' spread around their domain mean.
    quantiles
        Levels of the reported quantiles.
    n_theta
        Fewest grid nodes per page (more where the draws' spread needs them:
        :func:`nodes_needed`).
    draw_means
        Also keep each conditional's mean rate, ``(n_draws, n_pages)``.
    """
    mu_domain = np.ascontiguousarray(mu_domain, dtype=np.float64)
    sigma_page = np.ascontiguousarray(sigma_page, dtype=np.float64)
    domain = np.ascontiguousarray(domain, dtype=np.int64)
    if mu_domain.ndim != 2 or sigma_page.shape != (mu_domain.shape[0],):
        raise ValueError("mu_domain must be (draws, domains) and sigma_page (draws,)")
    if len(domain) != groups.n_pages:
        raise ValueError(f"{len(domain)} domain codes for {groups.n_pages} pages")
    if not (np.all(np.isfinite(mu_domain)) and np.all(sigma_page > 0)):
        raise ValueError("the population draws must be finite with sigma_page > 0")
    n_draws = len(sigma_page)
    centre = mu_domain.mean(axis=0)[domain]
    width = sigma_page.max() + DOMAIN_SPREAD_SDS * mu_domain.std(axis=0)[domain]
    nodes = nodes_needed(width, float(sigma_page.min()), n_theta)
    mean = np.empty(groups.n_pages)
    out_q = np.empty((len(quantiles), groups.n_pages))
    means = np.empty((n_draws, groups.n_pages)) if draw_means else None
    for n in np.unique(nodes):
        pages = np.flatnonzero(nodes == n)
        sub = groups.select(pages)
        grids = prior_page_grids(sub, centre[pages], width[pages], int(n))
        for a in range(0, len(pages), CHUNK_PAGES):
            sl = slice(a, a + CHUNK_PAGES)
            rows = pages[sl]
            theta, log_weight, jacobian = grids.chunk(sl)
            chunk_means = np.empty((n_draws if draw_means else 0, len(rows)))
            cells = _average_conditionals(
                theta, log_weight, domain[rows], mu_domain, sigma_page, chunk_means
            )
            mean[rows] = np.sum(cells * np.exp(theta), axis=1)
            post = normalised_grid_posterior(theta, cells / trapezoid_weights(jacobian), jacobian)
            out_q[:, rows] = post.quantiles(tuple(quantiles))
            if means is not None:
                means[:, rows] = chunk_means
    # a page without intervals has its prior for posterior: the exact mean of a log-normal
    # (a grid cannot hold e^θ's mass, at μ + σ², when σ_p is large)
    n_groups = np.bincount(groups.group_page, minlength=groups.n_pages)
    empty = (groups.unchanged == 0) & (n_groups == 0)
    if empty.any():
        exact = np.exp(mu_domain[:, domain[empty]] + 0.5 * sigma_page[:, None] ** 2)
        mean[empty] = exact.mean(axis=0)
        if means is not None:
            means[:, empty] = exact
    return PagePosteriors(mean=mean, quantiles=out_q, n_theta=nodes, draw_means=means)
