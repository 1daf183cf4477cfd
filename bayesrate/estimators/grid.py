"""Exact 1-D posterior of a constant rate on a log-rate grid, vectorized over pages.

Posterior of a ``Gamma(α, β)`` prior (rate per hour, ``β`` in hours) times the exact
censored likelihood (``docs/science.md`` §1) over the groups of an
:class:`~bayesrate.sufficient.IntervalStats`. In ``θ = log λ`` the unnormalised log
density is ``α θ − β e^θ − U e^θ + Σ_changed c log(1 − e^{−e^θ τ})`` (the ``e^θ``
Jacobian turns ``λ^{α−1}`` into ``λ^α``).

Two passes per page: a coarse common grid (``log λ`` from :data:`THETA_RANGE`) locates
where the log density is within :data:`SPAN` of its maximum, then a fine per-page grid of
``n_grid`` points covers that region. Integrals use the trapezoid rule in ``θ``. This is
the reference used to check the online Gamma updates; it is exact up to grid resolution
(relative error ~1e-6 for a few hundred points), not meant for millions of pages.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bayesrate.sufficient import IntervalStats

#: coarse grid range in log(rate per hour)
THETA_RANGE = (np.log(1e-12), np.log(1e6))
N_COARSE = 1200
#: log-density drop from the maximum that bounds the fine grid
SPAN = 40.0
#: cap on (changed groups x grid points) per chunk
CHUNK_CELLS = 1 << 22


@dataclass(frozen=True)
class GridPosterior:
    """Per-page posterior on a per-page grid of ``log λ``.

    Attributes
    ----------
    theta
        ``(n_pages, n_grid)`` grid of ``log λ`` (λ per hour).
    density
        ``(n_pages, n_grid)`` normalised density of ``θ`` on the grid.
    """

    theta: np.ndarray
    density: np.ndarray

    def _integrate(self, values: np.ndarray) -> np.ndarray:
        return np.trapezoid(values * self.density, self.theta, axis=1)

    def mean(self) -> np.ndarray:
        """Posterior mean of λ (per hour)."""
        return self._integrate(np.exp(self.theta))

    def var(self) -> np.ndarray:
        """Posterior variance of λ."""
        m = self.mean()
        return self._integrate(np.exp(2 * self.theta)) - m**2

    def cdf(self) -> np.ndarray:
        """Cumulative distribution at the grid points (cumulative Simpson), ``(n_pages, G)``."""
        from scipy.integrate import cumulative_simpson

        cdf = cumulative_simpson(self.density, x=self.theta, axis=1, initial=0.0)
        cdf = np.maximum.accumulate(np.maximum(cdf, 0.0), axis=1)
        return cdf / cdf[:, -1:]

    def quantile(self, q: float) -> np.ndarray:
        """Posterior ``q``-quantile of λ.

        The density is linear within each grid cell (the trapezoid rule's model), so the
        CDF is quadratic there and is inverted exactly.
        """
        cdf = self.cdf()
        d = self.density / self._norm()[:, None]
        rows = np.arange(len(cdf))
        i = np.clip((cdf < q).sum(axis=1) - 1, 0, cdf.shape[1] - 2)
        h = self.theta[rows, i + 1] - self.theta[rows, i]
        p0, p1 = d[rows, i], d[rows, i + 1]
        need = q - cdf[rows, i]
        # solve p0 s + (p1 - p0) s^2 / (2h) = need for s in [0, h]
        slope = (p1 - p0) / h
        disc = np.sqrt(np.maximum(p0**2 + 2 * slope * need, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(np.abs(slope) > 1e-300, (disc - p0) / slope, need / p0)
        s = np.clip(np.nan_to_num(s, nan=0.0), 0.0, h)
        return np.exp(self.theta[rows, i] + s)

    def _norm(self) -> np.ndarray:
        d = self.density
        return np.sum(0.5 * (d[:, 1:] + d[:, :-1]) * np.diff(self.theta, axis=1), axis=1)


def _log_density(
    theta: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    unchanged: np.ndarray,
    lens: np.ndarray,
    tau: np.ndarray,
    count: np.ndarray,
) -> np.ndarray:
    """Unnormalised log density on ``theta`` (n_pages, G) for a set of pages."""
    lam = np.exp(theta)
    out = alpha[:, None] * theta - (beta + unchanged)[:, None] * lam
    has = lens > 0
    if has.any():
        rows = np.repeat(np.flatnonzero(has), lens[has])
        x = lam[rows] * tau[:, None]
        contrib = count[:, None] * np.log(-np.expm1(-x))
        seg = np.concatenate([[0], np.cumsum(lens[has])[:-1]]).astype(np.int64)
        out[has] += np.add.reduceat(contrib, seg, axis=0)
    return out


def grid_posterior(
    stats: IntervalStats,
    alpha: float | np.ndarray,
    beta: float | np.ndarray,
    *,
    n_grid: int = 801,
    pages: np.ndarray | None = None,
) -> GridPosterior:
    """Exact posterior of each page's rate under a Gamma(α, β) prior (per hour).

    Parameters
    ----------
    stats
        Interval statistics.
    alpha, beta
        Gamma prior shape and rate (``β`` in hours); scalars or one per page; ``α > 0``,
        ``β ≥ 0`` (``β = 0`` is allowed when the page has unchanged exposure).
    n_grid
        Fine-grid points per page.
    pages
        Page positions to compute (default: all).
    """
    if pages is None:
        pages = np.arange(stats.n_pages)
    pages = np.asarray(pages, dtype=np.int64)
    n = len(pages)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (stats.n_pages,))[pages]
    beta = np.broadcast_to(np.asarray(beta, dtype=np.float64), (stats.n_pages,))[pages]
    if np.any(~(alpha > 0)) or np.any(~(beta >= 0)):
        raise ValueError("grid posterior needs alpha > 0 and beta >= 0")
    unchanged = stats.unchanged_exposure[pages]
    if np.any((beta + unchanged) <= 0):
        raise ValueError("posterior improper: beta = 0 and no unchanged exposure")
    sel = stats.group_changed > 0
    offsets = np.searchsorted(stats.group_page[sel], np.arange(stats.n_pages + 1))
    g_tau = stats.group_tau[sel]
    g_c = stats.group_changed[sel].astype(np.float64)

    theta_out = np.empty((n, n_grid))
    dens_out = np.empty((n, n_grid))
    coarse = np.linspace(*THETA_RANGE, N_COARSE)
    step = coarse[1] - coarse[0]
    # chunk pages so (groups x grid) stays bounded
    lens_all = offsets[pages + 1] - offsets[pages]
    per_page = np.maximum(lens_all, 1) * max(n_grid, N_COARSE)
    bounds = np.searchsorted(np.cumsum(per_page), np.arange(0, per_page.sum(), CHUNK_CELLS))
    bounds = np.unique(np.concatenate([[0], bounds[1:], [n]]))
    for a, b in itertools.pairwise(bounds):
        pg = pages[a:b]
        lens = lens_all[a:b]
        take = np.concatenate(
            [np.arange(offsets[p], offsets[p + 1]) for p in pg] or [np.zeros(0, np.int64)]
        ).astype(np.int64)
        args = (alpha[a:b], beta[a:b], unchanged[a:b], lens, g_tau[take], g_c[take])
        grid = np.broadcast_to(coarse, (b - a, N_COARSE))
        ld = _log_density(grid, *args)
        keep = ld >= ld.max(axis=1, keepdims=True) - SPAN
        first = np.argmax(keep, axis=1)
        last = N_COARSE - 1 - np.argmax(keep[:, ::-1], axis=1)
        lo = coarse[first] - step
        hi = coarse[last] + step
        fine = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, n_grid)[None, :]
        ld = _log_density(fine, *args)
        dens = np.exp(ld - ld.max(axis=1, keepdims=True))
        dens /= np.trapezoid(dens, fine, axis=1)[:, None]
        theta_out[a:b] = fine
        dens_out[a:b] = dens
    return GridPosterior(theta_out, dens_out)
