"""Per-page log-likelihood with the page's own rate integrated out, for leave-one-page-out.

Leaving a *page* out of a model with one rate parameter per page removes everything that
informs that parameter, so PSIS-LOO on the conditional log-likelihood ``log p(y_p | λ_p)``
has Pareto k far above its threshold for most pages. The standard remedy for hierarchical
models is to integrate the page's rate out given the population parameters of each draw:

    log p(y_p | θ_s) = log ∫ p(y_p | λ = e^u) p(u | θ_s) du

with ``p(u | θ_s)`` the page's prior at draw ``s`` (hierarchical/modulated: Normal(mu_domain,
sigma_page) on the base log-rate; censored: its fixed Gamma or log-normal prior). The
integral is one-dimensional: it is evaluated on a per-page grid in ``u`` that covers
where the page's likelihood is within ``LOGLIK_WINDOW`` of its maximum (clipped to
``[U_MIN, U_MAX]``: :func:`~bayesrate.estimators.grid.likelihood_support_grids`), with
the trapezoid rule — which converges geometrically for these smooth, rapidly decaying
integrands: 64 points agree with 2,000 to 1e-10 on ``ota-pga``.
For modulated models the likelihood of each draw uses that draw's hour-of-week multipliers,
for the research models (``research/``) their epoch effects or ``κ``
(:func:`integrated_loglik_per_draw`). The dynamic models sum each page's whole path out
on their own grid (``DynamicModel.marginal_page_loglik``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import gammaln, logsumexp

from bayesrate.estimators.grid import likelihood_support_grids, support_nodes
from bayesrate.likelihood import loglik_grid

if TYPE_CHECKING:
    from bayesrate.sufficient import HourOfWeekStats, IntervalStats

#: grid points per page of the trapezoid rule
N_GRID = 64


def _trapezoid_log_weights(grid: np.ndarray) -> np.ndarray:
    step = grid[:, 1] - grid[:, 0]
    w = np.ones(grid.shape[1])
    w[[0, -1]] = 0.5
    return np.log(step)[:, None] + np.log(w)[None, :]


def _normal_logpdf(u, mu, sigma):
    z = (u - mu) / sigma
    return -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def integrated_loglik_normal(
    stats: IntervalStats | HourOfWeekStats,
    mu: np.ndarray,
    sigma: np.ndarray,
    multipliers: np.ndarray | None = None,
    *,
    n_grid: int = N_GRID,
    chunk: int = 64,
) -> np.ndarray:
    """``log ∫ p(y_p | e^u) Normal(u | mu[s, p], sigma[s]) du`` for every draw and page.

    Parameters
    ----------
    stats
        :class:`IntervalStats` (constant rates) or :class:`HourOfWeekStats` (then
        ``multipliers`` ``(draws, 168)`` is required).
    mu
        ``(draws, pages)`` prior mean of each page's (base) log-rate per hour.
    sigma
        ``(draws,)`` prior SD of the page log-rates.

    Returns
    -------
    numpy.ndarray
        ``(draws, pages)``.
    """
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64).reshape(-1)
    n_draws, n_pages = mu.shape
    out = np.empty((n_draws, n_pages))
    if multipliers is None:
        groups = stats.groups
        grid = likelihood_support_grids(groups, n_grid)
        ll = loglik_grid(groups, grid) + _trapezoid_log_weights(grid)
        for start in range(0, n_draws, chunk):
            sl = slice(start, start + chunk)
            lp = _normal_logpdf(grid[None], mu[sl, :, None], sigma[sl, None, None])
            out[sl] = logsumexp(ll[None] + lp, axis=-1)
        return out
    multipliers = np.asarray(multipliers, dtype=np.float64)
    return integrated_loglik_per_draw(
        lambda s, grid: loglik_grid(stats.groups(multipliers[s]), grid),
        likelihood_support_grids(stats.groups(multipliers.mean(axis=0)), n_grid),
        mu,
        sigma,
    )


def integrated_loglik_per_draw(
    loglik_of_draw: callable,
    grid: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    refine_to: int | None = None,
) -> np.ndarray:
    """``log ∫ p_s(y_p | e^u) Normal(u | mu[s, p], sigma[s]) du`` when each draw ``s`` has
    its own likelihood, ``loglik_of_draw(s, grid)`` ``(pages, K)`` on the per-page ``grid``
    (:func:`~bayesrate.estimators.grid.likelihood_support_grids` of the likelihood at the
    draws' mean effects): the modulated model's multipliers, a research model's epoch
    effects or ``κ``.

    ``refine_to``: ``grid`` is a first pass; each draw integrates on ``refine_to`` nodes
    spanning that draw's integrand (likelihood times prior) within
    :data:`~bayesrate.estimators.grid.LOGLIK_WINDOW` of its maximum. For likelihoods that
    do not fall off at low rates (an added rate's: the mass-edit model), whose support
    alone spreads the nodes thin over a plateau the prior makes negligible."""
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64).reshape(-1)
    out = np.empty(mu.shape)

    def integrand(s, g):
        return loglik_of_draw(s, g) + _normal_logpdf(g, mu[s][:, None], sigma[s])

    for s in range(len(mu)):
        g = grid if refine_to is None else support_nodes(grid, integrand(s, grid), refine_to)
        out[s] = logsumexp(integrand(s, g) + _trapezoid_log_weights(g), axis=-1)
    return out


def integrated_loglik_fixed_prior(
    stats: IntervalStats,
    log_prior: callable,
    *,
    n_grid: int = 128,
) -> np.ndarray:
    """``log ∫ p(y_p | e^u) p(u) du`` per page for a fixed prior density on ``u``."""
    groups = stats.groups
    grid = likelihood_support_grids(groups, n_grid)
    ll = loglik_grid(groups, grid) + _trapezoid_log_weights(grid)
    return logsumexp(ll + log_prior(grid), axis=-1)


def gamma_log_prior_on_log_rate(alpha: float, beta: float):
    """Density of ``u = log λ`` when ``λ ~ Gamma(alpha, beta)`` (rate per hour)."""

    def log_prior(u):
        return alpha * np.log(beta) - gammaln(alpha) + alpha * u - beta * np.exp(u)

    return log_prior


def normal_log_prior(mu: float, sigma: float):
    def log_prior(u):
        return _normal_logpdf(u, mu, sigma)

    return log_prior
