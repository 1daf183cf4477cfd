"""Vectorized maximum-likelihood and moment-matching solvers for interval-censored rates.

Both estimators solve one monotone equation per page (``docs/science.md`` §2):

MLE
    ``S(λ) = Σ_changed c_g τ_g / (e^{λτ_g} − 1) = U`` where ``U`` is the page's unchanged
    exposure (the score of the exact censored likelihood set to zero).
MM (Upadhyay et al.)
    ``M(λ) = Σ_g n_g e^{−λτ_g} = n − c`` (expected = observed number of unchanged intervals).

Solver
------
Each equation is written as ``h(λ) = log S(λ) − log U = 0`` (resp. ``log M − log(n − c)``).
``h`` is convex and decreasing in ``λ`` (a log-sum-exp of convex decreasing functions), so
Newton's method started from a point *left* of the root moves monotonically to the root and
never overshoots: no bracketing or line search is needed, and the iterate stays inside
``[start, cap]``. The log transform makes ``h`` nearly linear both where ``λτ`` is large
(``log S ≈ const − λτ``) and small (``log S ≈ const − log λ``), so a handful of steps
suffice. Guaranteed left starting points:

- MLE: ``τ/(e^{x} − 1) ≥ τ(1/x − 1/2)`` gives ``S(λ) ≥ c/λ − C/2`` with ``C`` the changed
  exposure, hence ``λ_0 = c / (U + C/2)`` satisfies ``S(λ_0) ≥ U``.
- MM: Jensen, ``Σ n_g e^{−λτ_g} ≥ n e^{−λτ̄}``, so the method-of-moments value
  ``λ_0 = −log(1 − c/n)/τ̄`` (``τ̄`` = mean interval) satisfies ``M(λ_0) ≥ n − c``.

Pages are processed in blocks of consecutive pages (about :data:`BLOCK_GROUPS` groups) so
that every array of a block stays in cache; within a block, converged pages are dropped
from the iteration.

Boundaries (documented behaviour, never NaN or inf)
---------------------------------------------------
- ``c = 0`` (no detected change, including pages with no interval at all): ``λ̂ = 0``.
- ``c = n`` (a change at every visit): no finite root; ``λ̂`` is the cap
  ``log(2n + 1) / τ_min``, which for equal intervals is the Cho & Garcia-Molina estimate
  at ``c = n``: the rate above which the data carry no information.
- Any root above the cap is clipped to the cap; :attr:`SolveResult.clipped` marks
  both cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bayesrate.observations import concat_ranges

if TYPE_CHECKING:
    from bayesrate.sufficient import IntervalStats

#: groups per block of pages (keeps a block's working arrays in cache)
BLOCK_GROUPS = 1 << 15
#: default relative tolerance on the Newton step
TOL = 1e-10
MAX_ITER = 100


@dataclass(frozen=True)
class SolveResult:
    """Per-page roots.

    Attributes
    ----------
    rate
        Estimate per hour (``0`` at ``c = 0``, the cap at ``c = n`` or above it).
    cap
        Per-page upper clip ``log(2n + 1) / τ_min`` (``0`` for pages without intervals).
    clipped
        True where the estimate is the cap (``c = n`` or a root above the cap).
    iterations
        Largest number of Newton iterations any block needed.
    """

    rate: np.ndarray
    cap: np.ndarray
    clipped: np.ndarray
    iterations: int


def page_totals(stats: IntervalStats) -> dict[str, np.ndarray]:
    """Per-page ``n``, ``c``, unchanged exposure ``U``, changed exposure ``C``, ``τ_min``."""
    unchanged = stats.unchanged_exposure
    tau_min = np.full(stats.n_pages, np.inf)
    present = np.flatnonzero(np.diff(stats.group_offsets) > 0)
    if len(present):
        tau_min[present] = np.minimum.reduceat(stats.group_tau, stats.group_offsets[present])
    return {
        "n": stats.n_intervals.astype(np.float64),
        "c": stats.n_changes.astype(np.float64),
        "U": unchanged,
        "C": stats.exposure - unchanged,
        "tau_min": tau_min,
    }


def rate_cap(n: np.ndarray, tau_ref: np.ndarray) -> np.ndarray:
    """``log(2n + 1) / τ_ref``; 0 where there is no interval."""
    n = np.asarray(n, dtype=np.float64)
    tau_ref = np.asarray(tau_ref, dtype=np.float64)
    ok = (n > 0) & np.isfinite(tau_ref) & (tau_ref > 0)
    out = np.zeros(np.broadcast(n, tau_ref).shape)
    np.divide(np.log(2.0 * n + 1.0), tau_ref, out=out, where=ok)
    return out


def _blocks(offsets: np.ndarray, block_groups: int) -> list[tuple[int, int]]:
    """Split pages ``0..len(offsets)-1`` into runs of about ``block_groups`` groups."""
    n_pages = len(offsets) - 1
    if n_pages == 0:
        return []
    targets = np.arange(0, offsets[-1], block_groups)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(offsets, targets[1:]), [n_pages]]))
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))


def _csr(group_page: np.ndarray, n_pages: int) -> np.ndarray:
    """Offsets of each page's groups (``group_page`` sorted)."""
    offsets = np.zeros(n_pages + 1, dtype=np.int64)
    np.cumsum(np.bincount(group_page, minlength=n_pages), out=offsets[1:])
    return offsets


def _newton_block(
    kind: str,
    lam: np.ndarray,
    cap: np.ndarray,
    log_target: np.ndarray,
    starts: np.ndarray,
    tau: np.ndarray,
    weight: np.ndarray,
    tol: float,
    max_iter: int,
) -> int:
    """Monotone Newton on ``log F(λ) − log target`` for the pages of one block, in place.

    ``starts`` are the (non-empty) group segments of the pages, ``tau``/``weight`` the
    groups (changed count for the MLE, interval count for MM).
    """
    active = np.arange(len(lam))
    seg = starts
    t, w = tau, weight
    lens = np.diff(np.append(starts, len(tau)))
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        lam_g = np.repeat(lam[active], lens)
        x = lam_g * t
        if kind == "mle":
            with np.errstate(over="ignore"):
                q = t / np.expm1(x)  # long intervals: expm1 = inf, q = 0, as it should
            f_terms = w * q
            d_terms = f_terms * (q + t)  # −dF/dλ
        else:
            e = np.exp(-x)
            f_terms = w * e
            d_terms = f_terms * t
        f = np.add.reduceat(f_terms, seg)
        d = np.add.reduceat(d_terms, seg)
        h = np.log(f) - log_target[active]
        step = h * f / d
        new = np.minimum(lam[active] + np.maximum(step, 0.0), cap[active])
        lam[active] = new
        moving = (step > tol * new) & (new < cap[active])
        if not moving.all():
            if not moving.any():
                break
            keep = np.flatnonzero(moving)
            # compact the group arrays to the pages still moving
            take = np.repeat(moving, lens)
            t, w = t[take], w[take]
            lens = lens[keep]
            seg = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.int64)
            active = active[keep]
    return it


def _solve(
    kind: str,
    stats: IntervalStats,
    *,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    block_groups: int = BLOCK_GROUPS,
) -> SolveResult:
    n_pages = stats.n_pages
    group_tau = stats.group_tau
    group_n = stats.group_n.astype(np.float64)
    group_changed = stats.group_changed.astype(np.float64)
    tot = page_totals(stats)
    n, c, unchanged = tot["n"], tot["c"], tot["U"]
    cap = rate_cap(n, tot["tau_min"])
    rate = np.zeros(n_pages)
    all_changed = (c > 0) & (c >= n)
    rate[all_changed] = cap[all_changed]
    interior = (c > 0) & (c < n)

    if kind == "mle":
        sel = group_changed > 0
        start = np.zeros(n_pages)
        np.divide(c, unchanged + 0.5 * tot["C"], out=start, where=interior)
        log_target = np.log(np.where(interior, unchanged, 1.0))
        weight_all = group_changed
    else:
        sel = np.ones(len(group_tau), dtype=bool)
        tau_bar = np.divide(tot["U"] + tot["C"], n, out=np.ones(n_pages), where=n > 0)
        frac = np.divide(c, n, out=np.zeros(n_pages), where=n > 0)
        start = np.where(interior, -np.log1p(-np.where(interior, frac, 0.0)) / tau_bar, 0.0)
        log_target = np.log(np.where(interior, n - c, 1.0))
        weight_all = group_n
    start = np.minimum(start, cap)

    g_page = stats.group_page[sel]
    g_tau = group_tau[sel]
    g_w = weight_all[sel]
    offsets = _csr(g_page, n_pages)
    iterations = 0
    for p0, p1 in _blocks(offsets, block_groups):
        pages = p0 + np.flatnonzero(interior[p0:p1])
        if not len(pages):
            continue
        # gather the block's groups of the pages to solve (Newton clamps at the cap)
        lo, hi = offsets[pages], offsets[pages + 1]
        lens = hi - lo
        take = concat_ranges(lo, lens)
        tau_b, w_b = g_tau[take], g_w[take]
        seg = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.int64)
        lam = start[pages].copy()
        cap_b = cap[pages]
        iterations = max(
            iterations,
            _newton_block(kind, lam, cap_b, log_target[pages], seg, tau_b, w_b, tol, max_iter),
        )
        rate[pages] = lam
    clipped = (c > 0) & (rate >= cap)
    return SolveResult(rate=rate, cap=cap, clipped=clipped, iterations=iterations)


def solve_mle(stats: IntervalStats, **kwargs) -> SolveResult:
    """Maximum-likelihood rates (per hour) from grouped intervals, vectorized over pages.

    Parameters
    ----------
    stats
        Interval statistics (:meth:`IntervalStats.from_groups` builds them from arrays).
    tol, max_iter, block_groups
        Relative Newton tolerance, iteration limit, groups per cache block.
    """
    return _solve("mle", stats, **kwargs)


def solve_mm(stats: IntervalStats, **kwargs) -> SolveResult:
    """Moment-matching (Upadhyay et al.) rates: ``Σ n_g e^{−λτ_g} = n − c`` per page."""
    return _solve("mm", stats, **kwargs)


def profile_interval(
    stats: IntervalStats,
    rate: np.ndarray,
    cap: np.ndarray,
    *,
    level: float = 0.95,
    tol: float = 1e-12,
    max_iter: int = 100,
    block_groups: int = BLOCK_GROUPS,
) -> tuple[np.ndarray, np.ndarray]:
    """Profile-likelihood interval ``{λ : 2(ℓ(λ̂) − ℓ(λ)) ≤ χ²₁(level)}`` per page.

    The log-likelihood (:mod:`bayesrate.likelihood`) is concave in ``θ = log λ``, so each
    side has one crossing of ``ℓ(θ̂) − χ²/2``. Newton on a concave function started outside
    the interval (where it is below the target) moves monotonically to the crossing, so
    each side is found by plain Newton in ``θ`` from a start a few Wald half-widths out
    (widened until it is below the target), vectorized over the pages of cache-sized blocks.

    Boundary cases: ``c = 0`` gives ``[0, q/(2U)]`` in closed form (``ℓ = −Uλ``);
    ``c = n`` gives ``[λ_L, inf)`` (the likelihood rises to its supremum 0 as
    ``λ → ∞``); a page without intervals gives ``[0, inf)``.
    """
    from scipy.stats import chi2, norm

    half = 0.5 * chi2.ppf(level, 1)
    z = norm.ppf(0.5 + level / 2)
    tot = page_totals(stats)
    n, c, unchanged = tot["n"], tot["c"], tot["U"]
    lower = np.zeros(stats.n_pages)
    upper = np.full(stats.n_pages, np.inf)
    np.divide(half, unchanged, out=upper, where=(c == 0) & (unchanged > 0))
    interior = (c > 0) & (c < n)
    todo = interior | ((c > 0) & (c >= n))
    groups = stats.groups
    for p0, p1 in _blocks(groups.offsets, block_groups):
        pages = p0 + np.flatnonzero(todo[p0:p1])
        if len(pages):
            inner = interior[pages]
            theta_hat = np.log(np.where(inner, rate[pages], cap[pages]))
            lower[pages], hi = _profile_sides(
                groups.select(pages), theta_hat, inner, half, z, tol, max_iter
            )
            upper[pages[inner]] = hi[inner]
    return lower, upper


def _profile_sides(groups, theta_hat, inner, half, z, tol, max_iter):
    """Both crossings of ``ℓ(θ̂) − half`` for one block's pages (upper only where ``inner``)."""
    from bayesrate.likelihood import loglik, loglik_derivatives

    target = np.where(inner, loglik(groups, theta_hat), 0.0) - half
    # Wald half-width on θ from the observed information at θ̂ (a starting scale)
    info = loglik_derivatives(groups, theta_hat)[2]
    with np.errstate(divide="ignore"):
        width = np.clip(np.where(info > 0, z / np.sqrt(info), 1.0), 1e-3, 10.0)
    sides = []
    for direction, use in ((-1.0, np.ones(len(theta_hat), bool)), (1.0, inner)):
        theta = theta_hat.copy()
        step = 2.0 * width
        # widen until below the target (concavity then guarantees monotone Newton)
        for _ in range(60):
            trial = np.where(use, theta_hat + direction * step, theta_hat)
            bad = use & ~(loglik(groups, trial) < target)
            theta = np.where(use & ~bad, trial, theta)
            if not bad.any():
                break
            step = np.where(bad, 2.0 * step, step)
        for _ in range(max_iter):
            value, slope = loglik_derivatives(groups, theta, order=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                delta = np.where(use & (slope != 0), (value - target) / slope, 0.0)
            theta = theta - np.nan_to_num(delta)
            if np.all(np.abs(delta) <= tol * np.maximum(1.0, np.abs(theta))):
                break
        sides.append(np.exp(theta))
    return sides[0], sides[1]
