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

import numpy as np

from bayesrate.observations import concat_ranges

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


def page_totals(
    group_page: np.ndarray,
    group_tau: np.ndarray,
    group_n: np.ndarray,
    group_changed: np.ndarray,
    n_pages: int,
) -> dict[str, np.ndarray]:
    """Per-page ``n``, ``c``, unchanged exposure ``U``, changed exposure ``C``, ``τ_min``."""
    n = np.bincount(group_page, weights=group_n, minlength=n_pages)
    c = np.bincount(group_page, weights=group_changed, minlength=n_pages)
    unchanged = np.bincount(
        group_page, weights=(group_n - group_changed) * group_tau, minlength=n_pages
    )
    changed_exp = np.bincount(group_page, weights=group_changed * group_tau, minlength=n_pages)
    tau_min = np.full(n_pages, np.inf)
    if len(group_page):
        if np.all(group_page[1:] >= group_page[:-1]):
            offsets = _csr(group_page, n_pages)
            present = np.flatnonzero(np.diff(offsets) > 0)
            tau_min[present] = np.minimum.reduceat(group_tau, offsets[present])
        else:
            np.minimum.at(tau_min, group_page, group_tau)
    return {"n": n, "c": c, "U": unchanged, "C": changed_exp, "tau_min": tau_min}


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
    group_page: np.ndarray,
    group_tau: np.ndarray,
    group_n: np.ndarray,
    group_changed: np.ndarray,
    n_pages: int,
    *,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    block_groups: int = BLOCK_GROUPS,
) -> SolveResult:
    group_page = np.asarray(group_page, dtype=np.int64)
    group_tau = np.asarray(group_tau, dtype=np.float64)
    group_n = np.asarray(group_n, dtype=np.float64)
    group_changed = np.asarray(group_changed, dtype=np.float64)
    if len(group_tau) and not np.all(group_tau > 0):
        bad = np.flatnonzero(~(group_tau > 0))[:10].tolist()
        raise ValueError(f"interval lengths must be positive (groups {bad})")
    if len(group_page) and np.any(np.diff(group_page) < 0):
        order = np.argsort(group_page, kind="stable")
        group_page, group_tau = group_page[order], group_tau[order]
        group_n, group_changed = group_n[order], group_changed[order]
    tot = page_totals(group_page, group_tau, group_n, group_changed, n_pages)
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
        sel = np.ones(len(group_page), dtype=bool)
        tau_bar = np.divide(tot["U"] + tot["C"], n, out=np.ones(n_pages), where=n > 0)
        frac = np.divide(c, n, out=np.zeros(n_pages), where=n > 0)
        start = np.where(interior, -np.log1p(-np.where(interior, frac, 0.0)) / tau_bar, 0.0)
        log_target = np.log(np.where(interior, n - c, 1.0))
        weight_all = group_n
    start = np.minimum(start, cap)

    g_page = group_page[sel]
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


def solve_mle(
    group_page: np.ndarray,
    group_tau: np.ndarray,
    group_n: np.ndarray,
    group_changed: np.ndarray,
    n_pages: int,
    **kwargs,
) -> SolveResult:
    """Maximum-likelihood rates (per hour) from grouped intervals, vectorized over pages.

    Parameters
    ----------
    group_page, group_tau, group_n, group_changed
        One entry per group of intervals: page position, length (hours), number of
        intervals, number with a detected change. Need not be grouped (one entry per
        interval with ``n = 1`` is fine); sorted by page is fastest.
    n_pages
        Number of pages.
    tol, max_iter, block_groups
        Relative Newton tolerance, iteration limit, groups per cache block.
    """
    return _solve("mle", group_page, group_tau, group_n, group_changed, n_pages, **kwargs)


def solve_mm(
    group_page: np.ndarray,
    group_tau: np.ndarray,
    group_n: np.ndarray,
    group_changed: np.ndarray,
    n_pages: int,
    **kwargs,
) -> SolveResult:
    """Moment-matching (Upadhyay et al.) rates: ``Σ n_g e^{−λτ_g} = n − c`` per page."""
    return _solve("mm", group_page, group_tau, group_n, group_changed, n_pages, **kwargs)


def profile_interval(
    rate: np.ndarray,
    cap: np.ndarray,
    group_page: np.ndarray,
    group_tau: np.ndarray,
    group_n: np.ndarray,
    group_changed: np.ndarray,
    n_pages: int,
    *,
    level: float = 0.95,
    tol: float = 1e-12,
    max_iter: int = 100,
    block_groups: int = BLOCK_GROUPS,
) -> tuple[np.ndarray, np.ndarray]:
    """Profile-likelihood interval ``{λ : 2(ℓ(λ̂) − ℓ(λ)) ≤ χ²₁(level)}`` per page.

    The log-likelihood is concave in ``θ = log λ`` (complementary log-log binomial), so
    each side has one crossing of ``ℓ(θ̂) − χ²/2``. Newton on a concave function started
    outside the interval (where it is below the target) moves monotonically to the
    crossing, so each side is found by plain Newton in ``θ`` from a start a few Wald
    half-widths out (widened until it is below the target), vectorized over the pages of
    cache-sized blocks.

    Boundary cases: ``c = 0`` gives ``[0, q/(2U)]`` in closed form (``ℓ = −Uλ``);
    ``c = n`` gives ``[λ_L, inf)`` (the likelihood rises to its supremum 0 as
    ``λ → ∞``); a page without intervals gives ``[0, inf)``.
    """
    from scipy.stats import chi2, norm

    half = 0.5 * chi2.ppf(level, 1)
    z = norm.ppf(0.5 + level / 2)
    group_page = np.asarray(group_page, dtype=np.int64)
    group_tau = np.asarray(group_tau, dtype=np.float64)
    group_n = np.asarray(group_n, dtype=np.float64)
    group_changed = np.asarray(group_changed, dtype=np.float64)
    if len(group_page) and np.any(np.diff(group_page) < 0):
        order = np.argsort(group_page, kind="stable")
        group_page, group_tau = group_page[order], group_tau[order]
        group_n, group_changed = group_n[order], group_changed[order]
    tot = page_totals(group_page, group_tau, group_n, group_changed, n_pages)
    n, c, unchanged = tot["n"], tot["c"], tot["U"]
    lower = np.zeros(n_pages)
    upper = np.full(n_pages, np.inf)
    none = c == 0
    np.divide(half, unchanged, out=upper, where=none & (unchanged > 0))
    all_changed = (c > 0) & (c >= n)
    interior = (c > 0) & (c < n)
    todo = interior | all_changed

    sel = group_changed > 0
    g_page, g_tau, g_c = group_page[sel], group_tau[sel], group_changed[sel]
    offsets = _csr(g_page, n_pages)
    for p0, p1 in _blocks(offsets, block_groups):
        pages = p0 + np.flatnonzero(todo[p0:p1])
        if not len(pages):
            continue
        lo, hi = offsets[pages], offsets[pages + 1]
        lens = hi - lo
        starts = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.int64)
        take = concat_ranges(lo, lens)
        tau_b, c_b, u_b = g_tau[take], g_c[take], unchanged[pages]

        def ll_slope(theta, tau_b=tau_b, c_b=c_b, u_b=u_b, lens=lens, starts=starts):
            lam = np.exp(theta)
            x = np.repeat(lam, lens) * tau_b
            with np.errstate(over="ignore"):
                ll = np.add.reduceat(c_b * np.log(-np.expm1(-x)), starts) - u_b * lam
                slope = np.add.reduceat(c_b * x / np.expm1(x), starts) - u_b * lam
            return ll, slope

        inner = interior[pages]
        theta_hat = np.where(inner, np.log(np.where(inner, rate[pages], 1.0)), 0.0)
        theta_hat[~inner] = np.log(cap[pages][~inner])
        ll_hat, _ = ll_slope(theta_hat)
        target = np.where(inner, ll_hat, 0.0) - half
        # Wald half-width on θ from the observed information at θ̂ (a starting scale)
        lam = np.exp(theta_hat)
        x = np.repeat(lam, lens) * tau_b
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            q = tau_b / np.expm1(x)
            info = np.add.reduceat(np.nan_to_num(c_b * q * (q + tau_b)), starts)
            width = np.where(info > 0, z / (lam * np.sqrt(info)), 1.0)
        width = np.clip(np.nan_to_num(width, nan=1.0, posinf=1.0), 1e-3, 10.0)

        for direction, out, use in ((-1.0, lower, np.ones(len(pages), bool)), (1.0, upper, inner)):
            if not use.any():
                continue
            idx = np.flatnonzero(use)
            theta = theta_hat.copy()
            step = 2.0 * width
            # widen until below the target (concavity then guarantees monotone Newton)
            for _ in range(60):
                trial = np.where(use, theta_hat + direction * step, theta_hat)
                f, _ = ll_slope(trial)
                bad = use & ~(f < target)
                theta = np.where(use & ~bad, trial, theta)
                if not bad.any():
                    break
                step = np.where(bad, 2.0 * step, step)
            for _ in range(max_iter):
                f, slope = ll_slope(theta)
                with np.errstate(divide="ignore", invalid="ignore"):
                    delta = np.where(use & (slope != 0), (f - target) / slope, 0.0)
                delta = np.nan_to_num(delta)
                theta = theta - delta
                if np.all(np.abs(delta) <= tol * np.maximum(1.0, np.abs(theta))):
                    break
            out[pages[idx]] = np.exp(theta[idx])
    return lower, upper
