"""Exact 1-D posterior of a constant rate on a log-rate grid, vectorized over pages.

The posterior of a page's log-rate ``θ = log λ`` (per hour) is the exact censored
likelihood (:mod:`bayesrate.likelihood`) times a prior density of ``θ`` given as a
callable (:data:`LogPrior`): :func:`gamma_log_prior` (``λ ~ Gamma(α, β)``, whose density in
``θ`` is ``∝ e^{αθ − βe^θ}``), :func:`normal_log_prior` (log-normal rates), or any other,
such as the scale path's mixture of normals (:mod:`bayesrate.models.scale`).

Where the grid goes (:func:`locate`): the log posterior is scanned on a coarse grid over
``[THETA_MIN, THETA_MAX]`` and the scan zooms in until the region where it is within
:data:`SPAN` of its maximum spans many scan steps. The region is then covered by two
uniform grids, one each side of the mode, so that a posterior whose sides have very
different widths (a Gamma prior with ``α ≪ 1``: a left side that decays only like
``e^{αθ}``, a right side that falls like ``e^{−βe^θ}``) is resolved on both.

**The left tail, analytically.** With ``α ≪ 1`` and no change, the posterior keeps mass at
rates far below any representable grid (the 5% quantile of Gamma(0.01, ·) is ~1e-130 of
its mean). Below ``THETA_MIN`` every factor is log-linear in ``θ`` to double precision
(``log(1 − e^{−e^θτ}) = θ + log τ + O(e^θτ)``, ``−βe^θ → 0``), so the density there is
``p(θ₀)·e^{k(θ − θ₀)}`` with ``k`` its slope at ``θ₀ = THETA_MIN`` (for a Gamma prior,
``k = α + c``): its mass ``p(θ₀)/k``, its share of ``E[λ]`` and its quantiles are closed
forms (:class:`GridPosterior`).

Integrals use the trapezoid rule in ``θ`` (cumulative Simpson for the CDF); tested against
the closed-form Gamma posterior of pages without changes for ``α`` from 0.01 to 10.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from bayesrate.likelihood import CensoredGroups, loglik_derivatives, loglik_grid

#: log-prior density of θ = log λ: ``(theta (P, G), pages (P,)) -> (P, G)``; ``pages`` are
#: positions into the statistics the posterior is computed for
LogPrior = Callable[[np.ndarray, np.ndarray], np.ndarray]

#: scan range in log(rate per hour): e^-700 ≈ 1e-304 per hour up to 1e9 per hour
THETA_MIN, THETA_MAX = -700.0, float(np.log(1e9))
#: log-density drop from the maximum that bounds the grid (e^-40 ≈ 4e-18)
SPAN = 40.0
#: points per scan level
N_SCAN = 256
#: a scan stops zooming once the region spans at least this many scan steps
MIN_STEPS = 48
MAX_LEVELS = 8
#: cap on (changed groups x grid points) evaluated per chunk of pages
CHUNK_CELLS = 1 << 22


def gamma_log_prior(alpha: float | np.ndarray, beta: float | np.ndarray) -> LogPrior:
    """Density of ``θ = log λ`` when ``λ ~ Gamma(α, β)`` (rate per hour, ``β`` in hours).

    ``α``, ``β`` are scalars or one per page; ``β = 0`` is the improper ``λ^{α−1}``.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if np.any(~(alpha > 0)) or np.any(~(beta >= 0)):
        raise ValueError("a Gamma prior needs alpha > 0 and beta >= 0")
    with np.errstate(divide="ignore"):
        log_norm = np.where(beta > 0, alpha * np.log(np.where(beta > 0, beta, 1.0)), 0.0)
    log_norm = log_norm - gammaln(alpha)

    def log_prior(theta: np.ndarray, pages: np.ndarray) -> np.ndarray:
        a = alpha if alpha.ndim == 0 else alpha[pages]
        b = beta if beta.ndim == 0 else beta[pages]
        c = log_norm if log_norm.ndim == 0 else log_norm[pages]
        a, b, c = (np.reshape(v, (-1, 1)) if np.ndim(v) else v for v in (a, b, c))
        with np.errstate(over="ignore"):
            return a * theta - b * np.exp(theta) + c

    return log_prior


def normal_log_prior(mu: float | np.ndarray, sigma: float | np.ndarray) -> LogPrior:
    """Density of ``θ = log λ`` when ``θ ~ Normal(μ, σ)`` (scalars or one per page)."""
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    if np.any(~(sigma > 0)):
        raise ValueError("a normal prior needs sigma > 0")

    def log_prior(theta: np.ndarray, pages: np.ndarray) -> np.ndarray:
        m = mu if mu.ndim == 0 else mu[pages][:, None]
        s = sigma if sigma.ndim == 0 else sigma[pages][:, None]
        z = (theta - m) / s
        return -0.5 * z * z - np.log(s) - 0.5 * np.log(2 * np.pi)

    return log_prior


@dataclass(frozen=True)
class GridPosterior:
    """Per-page posterior of ``θ = log λ`` on a per-page grid, with an analytic left tail.

    Attributes
    ----------
    theta
        ``(n_pages, n_grid)`` nodes ``θ_j = c + s·sinh(u_j)``, ``u`` uniform (increasing).
    density
        ``(n_pages, n_grid)`` posterior density of ``θ`` at the nodes (the whole
        distribution integrates to 1: grid part plus :attr:`tail_mass`).
    jacobian
        ``(n_pages, n_grid)`` ``dθ/dj`` at each node (``j`` the node index): integrals
        are trapezoid (or Simpson) sums over ``j`` of ``f·density·jacobian``.
    tail_mass
        ``(n_pages,)`` mass below ``theta[:, 0]``, where the density is
        ``density[:, 0]·e^{k(θ − θ₀)}`` with ``k`` = :attr:`tail_slope` (0 when the grid
        reaches where the density is negligible).
    tail_slope
        ``(n_pages,)`` the left tail's rate ``k`` in ``θ``.
    log_evidence
        ``(n_pages,)`` ``log ∫ L(θ) p(θ) dθ``: the page's marginal likelihood under the prior
        (meaningful when the prior density is normalised).
    """

    theta: np.ndarray
    density: np.ndarray
    jacobian: np.ndarray
    tail_mass: np.ndarray
    tail_slope: np.ndarray
    log_evidence: np.ndarray

    def expect(self, values: np.ndarray) -> np.ndarray:
        """``∫ f(θ) p(θ) dθ`` over the grid part, for ``values`` = f at the nodes."""
        return _trapezoid(values * self.density * self.jacobian)

    def _tail(self, power: float) -> np.ndarray:
        """``E[λ^power; θ < θ₀]`` of the log-linear left tail."""
        k = np.where(self.tail_mass > 0, self.tail_slope, 1.0)
        out = self.tail_mass * k / (k + power) * np.exp(power * self.theta[:, 0])
        return np.where(self.tail_mass > 0, out, 0.0)

    def mean(self) -> np.ndarray:
        """Posterior mean of λ (per hour)."""
        return self.expect(np.exp(self.theta)) + self._tail(1.0)

    def var(self) -> np.ndarray:
        """Posterior variance of λ."""
        m = self.mean()
        return self.expect(np.exp(2 * self.theta)) + self._tail(2.0) - m**2

    def log_mean(self) -> np.ndarray:
        """Posterior mean of ``θ = log λ``."""
        k = np.where(self.tail_mass > 0, self.tail_slope, 1.0)
        tail = np.where(self.tail_mass > 0, self.tail_mass * (self.theta[:, 0] - 1.0 / k), 0.0)
        return self.expect(self.theta) + tail

    def cdf(self) -> np.ndarray:
        """Cumulative distribution at the nodes (tail + cumulative Simpson over ``j``)."""
        from scipy.integrate import cumulative_simpson

        grid_part = cumulative_simpson(self.density * self.jacobian, dx=1.0, axis=1, initial=0.0)
        grid_part = np.maximum.accumulate(np.maximum(grid_part, 0.0), axis=1)
        scale = (1.0 - self.tail_mass) / np.where(grid_part[:, -1] > 0, grid_part[:, -1], 1.0)
        return self.tail_mass[:, None] + grid_part * scale[:, None]

    def quantile(self, q: float) -> np.ndarray:
        """Posterior ``q``-quantile of λ.

        Inside the tail, the exponential's inverse; on the grid, the log density is linear
        within each cell (exact where the density is exponential, as in a Gamma prior's
        left side), scaled to the cell's mass, and the cell's CDF is inverted exactly.
        """
        return self.quantiles((q,))[0]

    def quantiles(self, qs: tuple[float, ...]) -> list[np.ndarray]:
        """:meth:`quantile` for several ``q`` (the CDF computed once)."""
        cdf = self.cdf()
        return [self._quantile_from_cdf(q, cdf) for q in qs]

    def _quantile_from_cdf(self, q: float, cdf: np.ndarray) -> np.ndarray:
        rows = np.arange(len(cdf))
        i = np.clip((cdf < q).sum(axis=1) - 1, 0, cdf.shape[1] - 2)
        h = self.theta[rows, i + 1] - self.theta[rows, i]
        with np.errstate(divide="ignore"):
            log_p0 = np.log(self.density[rows, i])
            log_p1 = np.log(self.density[rows, i + 1])
        b = np.nan_to_num((log_p1 - log_p0) / h, nan=0.0, posinf=0.0, neginf=0.0)
        cell = cdf[rows, i + 1] - cdf[rows, i]
        frac = np.clip((q - cdf[rows, i]) / np.maximum(cell, 1e-300), 0.0, 1.0)
        # mass of [θ_i, θ_i + s] is proportional to expm1(b s) / b; solve for the fraction
        bh = b * h
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s = np.where(np.abs(bh) > 1e-8, np.log1p(frac * np.expm1(bh)) / b, frac * h)
        s = np.clip(np.nan_to_num(s, nan=0.0), 0.0, h)
        on_grid = self.theta[rows, i] + s
        in_tail = q < self.tail_mass
        with np.errstate(divide="ignore", invalid="ignore"):
            tail_theta = self.theta[:, 0] + np.log(q / self.tail_mass) / self.tail_slope
        return np.exp(np.where(in_tail, tail_theta, on_grid))


def _trapezoid(values: np.ndarray) -> np.ndarray:
    """Trapezoid sum over the last axis (unit spacing) with Gregory's end correction.

    The correction ``−(g'(end) − g'(start))/12`` (one-sided differences) matters only
    where the integrand has not vanished at an end: at the start of an analytic left tail.
    """
    g = values
    trapezoid = g.sum(axis=-1) - 0.5 * (g[..., 0] + g[..., -1])
    start = (-3 * g[..., 0] + 4 * g[..., 1] - g[..., 2]) / 2
    end = (3 * g[..., -1] - 4 * g[..., -2] + g[..., -3]) / 2
    return trapezoid - (end - start) / 12


def _scan(log_density: Callable[[np.ndarray, np.ndarray], np.ndarray], rows, lo, hi):
    """One scan level: (grid, first, last, argmax) of the region within SPAN of the max."""
    t = np.linspace(0.0, 1.0, N_SCAN)
    grid = lo[:, None] + (hi - lo)[:, None] * t[None, :]
    values = log_density(grid, rows)
    values = np.where(np.isnan(values), -np.inf, values)
    keep = values >= values.max(axis=1, keepdims=True) - SPAN
    first = np.argmax(keep, axis=1)
    last = N_SCAN - 1 - np.argmax(keep[:, ::-1], axis=1)
    return grid, first, last, np.argmax(values, axis=1)


def locate(
    log_density: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_pages: int,
    lo: float | np.ndarray = THETA_MIN,
    hi: float | np.ndarray = THETA_MAX,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each page's (unimodal) log density is within :data:`SPAN` of its maximum.

    Parameters
    ----------
    log_density
        ``(grid (k, G), rows (k,))`` → ``(k, G)`` unnormalised log density of the pages at
        positions ``rows`` (``0..n_pages-1``).
    lo, hi
        Scan range per page (or shared).

    Returns
    -------
    left, mode, right
        ``(n_pages,)`` each: the region ``[left, right]`` (one scan step of margin, clipped
        to ``[lo, hi]``) and the location of the maximum found.
    """
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n_pages,)).copy()
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n_pages,)).copy()
    mode = (lo + hi) / 2
    todo = np.arange(n_pages)
    for _ in range(MAX_LEVELS):
        if len(todo) == 0:
            break
        grid, first, last, top = _scan(log_density, todo, lo[todo], hi[todo])
        rows = np.arange(len(todo))
        lo[todo] = grid[rows, np.maximum(first - 1, 0)]
        hi[todo] = grid[rows, np.minimum(last + 1, N_SCAN - 1)]
        mode[todo] = grid[rows, top]
        todo = todo[(last - first + 2) < MIN_STEPS]
    return lo, mode, hi


def sinh_grid(
    left: np.ndarray,
    centre: np.ndarray,
    right: np.ndarray,
    n_grid: int,
    scale: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``θ = c + s·sinh(u)`` on ``[left, right]``, ``u`` uniform; and ``dθ/dj``.

    ``s`` (``scale``) defaults to the narrower side's width over ``√(2·SPAN)`` (a standard
    deviation for a Gaussian whose log density drops by SPAN there): nodes are dense near
    the centre and spread out geometrically into a wide side, so a side that decays like
    ``e^{αθ}`` over hundreds of units and one that falls within a fraction of a unit are
    both resolved, and the trapezoid rule in ``u`` keeps its geometric convergence (the
    integrand stays smooth in ``u``).
    """
    return sinh_nodes(sinh_params(left, centre, right, scale), n_grid)


def sinh_params(
    left: np.ndarray, centre: np.ndarray, right: np.ndarray, scale: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """The four numbers ``(c, s, u_lo, u_hi)`` per row that define :func:`sinh_grid`."""
    centre = np.clip(centre, left, right)
    width = right - left
    if scale is None:
        near = np.minimum(centre - left, right - centre)
        scale = near / np.sqrt(2 * SPAN)
    scale = np.maximum(scale, 1e-6 * width)
    u_lo = np.arcsinh((left - centre) / scale)
    u_hi = np.arcsinh((right - centre) / scale)
    return centre, scale, u_lo, u_hi


def sinh_nodes(params: tuple[np.ndarray, ...], n_grid: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and ``dθ/dj`` of sinh grids from :func:`sinh_params`."""
    centre, scale, u_lo, u_hi = params
    t = np.linspace(0.0, 1.0, n_grid)
    u = u_lo[:, None] + (u_hi - u_lo)[:, None] * t[None, :]
    theta = centre[:, None] + scale[:, None] * np.sinh(u)
    jacobian = scale[:, None] * np.cosh(u) * ((u_hi - u_lo) / (n_grid - 1))[:, None]
    return theta, jacobian


def posterior_on_grid(
    log_post: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_pages: int,
    *,
    n_grid: int,
    lo: float | np.ndarray = THETA_MIN,
    hi: float | np.ndarray = THETA_MAX,
) -> GridPosterior:
    """Normalise an unnormalised log posterior ``log_post(theta, rows)`` on located grids.

    ``rows`` are positions ``0..n_pages-1`` of the pages the grid rows belong to.

    Raises
    ------
    ValueError
        When a page's posterior does not vanish at the ends of the scan range (improper).
    """
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n_pages,))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n_pages,))
    left, mode, right = locate(log_post, n_pages, lo, hi)
    theta, jacobian = sinh_grid(left, mode, right, n_grid)
    log_dens = log_post(theta, np.arange(n_pages))
    top = log_dens.max(axis=1, keepdims=True)
    dens = np.exp(log_dens - top)
    open_right = (log_dens[:, -1] > top[:, 0] - SPAN) & (theta[:, -1] >= hi - 1e-9)
    if open_right.any():
        raise ValueError(
            f"posterior improper at large rates for pages {np.flatnonzero(open_right)[:10]}: "
            "a page that changed at every visit needs a prior that vanishes at large rates"
        )
    # log-linear tail below the scan range, where the density has not become negligible
    open_left = (log_dens[:, 0] > top[:, 0] - SPAN) & (theta[:, 0] <= lo + 1e-9)
    tail_mass = np.zeros(n_pages)
    tail_slope = np.zeros(n_pages)
    if open_left.any():
        sub = np.flatnonzero(open_left)
        t0 = theta[sub, :1]
        probe = log_post(np.concatenate([t0, t0 + 1.0], axis=1), sub)
        k = probe[:, 1] - probe[:, 0]
        if np.any(~(k > 0)):
            raise ValueError(
                f"posterior improper at small rates for pages {sub[~(k > 0)][:10]}: "
                "the prior must vanish as the rate goes to 0"
            )
        tail_slope[sub] = k
        tail_mass[sub] = dens[sub, 0] / k
    total = _trapezoid(dens * jacobian) + tail_mass
    return GridPosterior(
        theta=theta,
        density=dens / total[:, None],
        jacobian=jacobian,
        tail_mass=tail_mass / total,
        tail_slope=tail_slope,
        log_evidence=np.log(total) + top[:, 0],
    )


def grid_posterior(
    stats_or_groups,
    log_prior: LogPrior,
    *,
    n_grid: int = 801,
    pages: np.ndarray | None = None,
) -> GridPosterior:
    """Exact posterior of each page's rate under a prior density of ``θ = log λ``.

    Parameters
    ----------
    stats_or_groups
        :class:`~bayesrate.sufficient.IntervalStats` or
        :class:`~bayesrate.likelihood.CensoredGroups`.
    log_prior
        A :data:`LogPrior` (:func:`gamma_log_prior`, :func:`normal_log_prior`, ...);
        called with page positions into ``stats_or_groups``.
    n_grid
        Grid points per page.
    pages
        Page positions to compute (default: all).

    Raises
    ------
    ValueError
        When a page's posterior is improper (e.g. a flat prior and no unchanged interval).
    """
    groups = _as_groups(stats_or_groups)
    if pages is None:
        pages = np.arange(groups.n_pages)
    pages = np.asarray(pages, dtype=np.int64)
    parts = []
    for chunk in _chunks(groups, pages, max(n_grid, N_SCAN)):
        sub = groups.select(chunk)

        def log_post(theta, rows, sub=sub, chunk=chunk):
            return loglik_grid(sub.select(rows), theta) + log_prior(theta, chunk[rows])

        parts.append(posterior_on_grid(log_post, len(chunk), n_grid=n_grid))
    if not parts:
        empty = np.zeros((0, n_grid))
        return GridPosterior(empty, empty, empty, np.zeros(0), np.zeros(0), np.zeros(0))
    fields = GridPosterior.__dataclass_fields__
    return GridPosterior(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))


def _as_groups(stats_or_groups) -> CensoredGroups:
    if isinstance(stats_or_groups, CensoredGroups):
        return stats_or_groups
    return stats_or_groups.groups


def _chunks(groups: CensoredGroups, pages: np.ndarray, width: int) -> list[np.ndarray]:
    """Page chunks with at most about CHUNK_CELLS (groups x grid points) each."""
    if len(pages) == 0:
        return []
    offsets = groups.offsets
    cost = (np.maximum(offsets[pages + 1] - offsets[pages], 1) + 1) * width
    cuts = np.searchsorted(np.cumsum(cost), np.arange(CHUNK_CELLS, cost.sum(), CHUNK_CELLS))
    return [c for c in np.split(pages, np.unique(cuts)) if len(c)]


# --------------------------------------------------------------------------- page grids
# Per-page grids of log λ built once and reused under many priors: the scale path and the
# page summaries (:mod:`bayesrate.models.scale`, :mod:`bayesrate.models.page_posterior`),
# and the leave-one-page-out integrals (:mod:`bayesrate.checks.marginal`).

#: pages per chunk of :func:`prior_page_grids` (and of its callers' passes over pages)
CHUNK_PAGES = 16384
#: Newton steps of :func:`_concave_region` (each side and the mode)
NEWTON_STEPS = 30
#: range of :func:`prior_page_grids`, log rate per hour
PRIOR_GRID_RANGE = (math.log(1e-12), math.log(1e6))
#: range of :func:`likelihood_support_grids`, log rate per hour (1e-9 .. 1e4 per hour)
U_MIN, U_MAX = np.log(1e-9), np.log(1e4)
#: :func:`likelihood_support_grids` covers where the log-likelihood is within this of its max
LOGLIK_WINDOW = 60.0


def trapezoid_weights(jacobian: np.ndarray) -> np.ndarray:
    """Trapezoid weights (``dθ`` per node) from a grid's ``dθ/dj``."""
    w = jacobian.copy()
    w[:, [0, -1]] *= 0.5
    return w


@dataclass
class PageGrids:
    """Each page's sinh grid of θ (its four parameters) and log weights
    ``ℓ_p(θ_g) + log dθ_g``, kept as float32 offsets from the page's maximum ``top``
    (~4e-6 absolute in log: far below the quadrature's error) — 48 nodes cost ~230 bytes
    a page, so 10 M pages' grids fit in ~2.3 GB; :meth:`chunk` rebuilds float64 arrays."""

    params: tuple[np.ndarray, ...]
    top: np.ndarray
    rel_weight: np.ndarray
    #: ``−g''`` at the mode (likelihood information plus the grid prior's ``1/width²``)
    curvature: np.ndarray

    @property
    def n_pages(self) -> int:
        return len(self.top)

    def chunk(self, sl: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(theta, log_weight, jacobian)`` of the pages in ``sl``, float64."""
        theta, jacobian = sinh_nodes(tuple(p[sl] for p in self.params), self.rel_weight.shape[1])
        return theta, self.log_weight(sl), jacobian

    def replace(self, pages: np.ndarray, other: PageGrids) -> None:
        """Put ``other``'s grids (one per position in ``pages``) in place of these pages'."""
        for mine, theirs in zip(self.params, other.params, strict=True):
            mine[pages] = theirs
        self.top[pages] = other.top
        self.rel_weight[pages] = other.rel_weight
        self.curvature[pages] = other.curvature

    def theta(self, sl: slice) -> np.ndarray:
        c, scale, u_lo, u_hi = (p[sl] for p in self.params)
        u = u_lo[:, None] + (u_hi - u_lo)[:, None] * np.linspace(0, 1, self.rel_weight.shape[1])
        return c[:, None] + scale[:, None] * np.sinh(u)

    def log_weight(self, sl: slice) -> np.ndarray:
        return self.rel_weight[sl].astype(np.float64) + self.top[sl, None]


def prior_page_grids(
    groups: CensoredGroups, centre: np.ndarray, width: np.ndarray, n_theta: int
) -> PageGrids:
    """Sinh grids covering where ``L_p(θ)·N(θ; centre_p, width_p)`` is within :data:`SPAN`
    of its maximum (found by Newton on the concave log, :func:`_concave_region`): the
    grids of a page's posterior under a Normal prior of known width (the scale path, the
    page summaries). Not :func:`likelihood_support_grids`, which covers the likelihood
    alone (any prior, a leave-one-page-out integral) with uniform nodes."""
    n = groups.n_pages
    params = tuple(np.empty(n) for _ in range(4))
    top = np.empty(n)
    curvature = np.empty(n)
    rel = np.empty((n, n_theta), dtype=np.float32)
    for a in range(0, n, CHUNK_PAGES):
        pages = np.arange(a, min(a + CHUNK_PAGES, n))
        sub = groups.select(pages)
        left, mode, right, curvature[pages] = _concave_region(sub, centre[pages], width[pages])
        chunk_params = sinh_params(left, mode, right)
        theta, jacobian = sinh_nodes(chunk_params, n_theta)
        lw = loglik_grid(sub, theta) + np.log(trapezoid_weights(jacobian))
        for whole, part in zip(params, chunk_params, strict=True):
            whole[pages] = part
        top[pages] = lw.max(axis=1)
        rel[pages] = lw - top[pages, None]
    return PageGrids(params, top, rel, curvature)


def _concave_region(
    groups: CensoredGroups, centre: np.ndarray, width: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Where ``g = ℓ_p(θ) + log N(θ; centre, width)`` is within SPAN of its maximum:
    ``(left, mode, right, −g''(mode))``.

    ``g`` is concave with ``g'' ≤ −1/width²`` (``ℓ`` is concave), so: its mode by damped
    Newton; then each side's level ``g(mode) − SPAN`` by Newton started at
    ``mode ∓ √(2·SPAN)·width``, which lies beyond it (the bound on ``g''``) — on a concave
    function, Newton from outside the level stays outside and converges monotonically.
    Replaces a scan of the whole range (:func:`~bayesrate.estimators.grid.locate`) with
    a few derivative evaluations per page.
    """
    inv_w2 = 1.0 / width**2

    def derivs(theta):
        value, score, info = loglik_derivatives(groups, theta)
        z = theta - centre
        return value - 0.5 * z * z * inv_w2, score - z * inv_w2, info + inv_w2

    lo, hi = PRIOR_GRID_RANGE
    # the mode: Newton safeguarded by the bracket [a, b] (g' > 0 at a, < 0 at b)
    a = np.full(len(centre), lo)
    b = np.full(len(centre), hi)
    # start at the naive rate (changes over exposure): near the likelihood's mode, where
    # Newton converges fast; from the prior's centre it crawls along e^θ for many steps
    naive = np.log((groups.n_changes + 0.5) / (groups.exposure + 1e-9))
    mode = np.clip(naive, lo, hi)
    curv = inv_w2
    for _ in range(NEWTON_STEPS):
        _, grad, curv = derivs(mode)
        a = np.where(grad > 0, mode, a)
        b = np.where(grad > 0, b, mode)
        new = mode + grad / curv
        new = np.where((new >= a) & (new <= b), new, 0.5 * (a + b))
        moved = np.abs(new - mode)
        mode = new
        if np.all(moved < 1e-6 * width):
            break
    target = derivs(mode)[0] - SPAN
    # each side's level: Newton from the Laplace approximation's edge; on a concave
    # function a step from inside lands outside, and from outside it converges monotonically
    laplace = math.sqrt(2 * SPAN) / np.sqrt(curv)
    reach = math.sqrt(2 * SPAN) * width
    ends = []
    for sign in (-1.0, 1.0):
        theta = mode + sign * np.minimum(laplace, reach)
        for _ in range(NEWTON_STEPS):
            value, grad, _ = derivs(theta)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = -(value - target) / grad
            step = np.clip(np.where(np.isfinite(step) & (grad * sign < 0), step, 0.0),
                           -reach, reach)  # fmt: skip
            theta = np.clip(theta + step, mode - reach, mode + reach)
            if np.all(np.abs(step) < 1e-3 * width):  # an edge needs no more
                break
        ends.append(np.clip(theta, lo, hi))
    return ends[0], mode, ends[1], curv


def normalised_grid_posterior(
    theta: np.ndarray, dens: np.ndarray, jacobian: np.ndarray
) -> GridPosterior:
    """A :class:`GridPosterior` from unnormalised densities on sinh grids (no tail)."""
    n = len(theta)
    total = np.sum(trapezoid_weights(jacobian) * dens, axis=1)
    return GridPosterior(
        theta=theta,
        density=dens / total[:, None],
        jacobian=jacobian,
        tail_mass=np.zeros(n),
        tail_slope=np.zeros(n),
        log_evidence=np.full(n, np.nan),
    )


def likelihood_support_grids(
    groups: CensoredGroups | None, n_grid: int, loglik_at: callable | None = None
) -> np.ndarray:
    """Per-page uniform grids in log-rate covering each page's likelihood support: where it
    is within :data:`LOGLIK_WINDOW` of its maximum on a 400-node scan of ``[U_MIN, U_MAX]``
    (``loglik_at``: ``(K,)`` log-rates → ``(pages, K)`` log-likelihoods; default the
    censored Poisson's of ``groups``). For integrals of the likelihood against any prior
    (leave-one-page-out, :mod:`bayesrate.checks.marginal`); not
    :func:`prior_page_grids`, whose sinh nodes follow one known Normal prior."""
    coarse = np.linspace(U_MIN, U_MAX, 400)
    ll = loglik_grid(groups, coarse) if loglik_at is None else loglik_at(coarse)
    return support_nodes(coarse, ll, n_grid)


def support_nodes(coarse: np.ndarray, ll: np.ndarray, n_grid: int) -> np.ndarray:
    """Per page, ``n_grid`` nodes spanning the nodes of ``coarse`` (``(K,)`` or ``(pages,
    K)``) where ``ll`` is within :data:`LOGLIK_WINDOW` of the page's maximum, and one node
    beyond on each side."""
    coarse = np.broadcast_to(coarse, ll.shape)
    keep = ll >= ll.max(axis=1, keepdims=True) - LOGLIK_WINDOW
    idx = np.arange(ll.shape[1])
    rows = np.arange(len(ll))
    lo = np.where(keep, idx, ll.shape[1]).min(axis=1)
    hi = np.where(keep, idx, -1).max(axis=1)
    lo_u = coarse[rows, np.maximum(lo - 1, 0)]
    hi_u = coarse[rows, np.minimum(hi + 1, ll.shape[1] - 1)]
    t = np.linspace(0.0, 1.0, n_grid)
    return lo_u[:, None] + (hi_u - lo_u)[:, None] * t[None, :]
