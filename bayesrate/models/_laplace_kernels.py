"""The numba kernels of :mod:`bayesrate.models.laplace` (each page's path integrated out
by a Laplace approximation), at module level so that numba's on-disk cache holds them
across processes."""

from __future__ import annotations

import numpy as np

from bayesrate.models._hmm_kernels import _njit

#: Newton stops when every step is below this (log-rate units)
NEWTON_TOLERANCE = 1e-10
#: or when the gain it predicts, ``½·gᵀH⁻¹g``, is below this times ``1 + |f|`` (a step of
#: ``NEWTON_TOLERANCE`` at unit curvature): where a wide walk leaves the curvature near 0,
#: rounding in the gradient keeps the steps above ``NEWTON_TOLERANCE`` for ever (log Z was
#: −inf at walk sds in the hundreds: the divergences of the 90-day excursion fit of
#: ota-contrib, "Logp function returned error code")
NEWTON_GAIN_TOLERANCE = 1e-20
#: a page's second-order term ``ε`` enters as ``ε/√(1 + (ε/κ)²)``: unchanged where it is
#: small (the expansion holds), at most ``κ`` nats where the expansion has failed
SECOND_ORDER_CAP = 0.5
#: Newton's step gets Chebyshev's third-order correction ``H⁻¹(½ ℓ''' ∘ δ²)`` when every
#: step is below this (cubic convergence near the mode) and the corrected step still
#: climbs (``gᵀδ > 0``): beside a cell whose every interval changed, ``ℓ'''`` can turn it
#: downhill, and the line search then stalled (log Z = −inf at walk sds near 8: the
#: divergences of the 90-day excursion fit that remained after the gain stop)
CHEBYSHEV_BELOW = 0.5
#: and gives up (log Z = −inf) after this many passes
NEWTON_MAX_PASSES = 200
#: Newton starts from the modes at a reference population moved along their tangents,
#: each slot by at most this much (log-rate units)
START_SHIFT_LIMIT = 3.0


@_njit
def cell_derivatives(x, cell, unchanged, group_start, group_exposure, group_count, high):
    """``ℓ`` and its first five derivatives in ``x`` (the last two only if ``high``).

    With ``t = λE``, ``q = t/(eᵗ − 1)`` and ``D = t·d/dt`` (``= d/dx``), a group's
    ``h = log(1 − e^{−t})`` has ``Dh = q``, ``Dq = q(1 − t − q)``; the higher ones are
    polynomials in ``q`` and ``t``.
    """
    lam = np.exp(x)
    v = -unchanged[cell] * lam
    d1, d2, d3 = v, v, v
    d4 = d5 = v if high else 0.0
    for g in range(group_start[cell], group_start[cell + 1]):
        t = lam * group_exposure[g]
        k = group_count[g]
        busy = -np.expm1(-t)  # 1 − e^{−t}
        if busy <= 0.0:  # t below the smallest double: log(1 − e^{−t}) = log t
            h, q = np.log(t), 1.0
        else:
            h = np.log(busy)
            q = t * (1.0 - busy) / busy  # t / (e^t − 1)
        h2 = q * (1.0 - t - q)
        v += k * h
        d1 += k * q
        d2 += k * h2
        d3 += k * (h2 * (1.0 - t - 2.0 * q) - t * q)
        if high:
            q2, t2 = q * q, t * t
            d4 -= k * q * (
                6.0 * q2 * q + 12.0 * q2 * t - 12.0 * q2 + 7.0 * q * t2 - 18.0 * q * t
                + 7.0 * q + t2 * t - 6.0 * t2 + 7.0 * t - 1.0
            )  # fmt: skip
            d5 += k * q * (
                24.0 * q2 * q2 + 60.0 * q2 * q * t - 60.0 * q2 * q + 50.0 * q2 * t2
                - 120.0 * q2 * t + 50.0 * q2 + 15.0 * q * t2 * t - 70.0 * q * t2
                + 75.0 * q * t - 15.0 * q + t2 * t2 - 10.0 * t2 * t + 25.0 * t2 - 15.0 * t
                + 1.0
            )  # fmt: skip
    return v, d1, d2, d3, d4, d5


@_njit
def page_terms(x, o, n, slot_cell, unchanged, group_start, group_exposure, group_count, out):
    """Fill ``out[:, j]`` with the terms of column ``j``; return their value's sum."""
    total = 0.0
    for j in range(n):
        c = slot_cell[o + j]
        if c < 0:
            out[0, j] = out[1, j] = out[2, j] = out[3, j] = 0.0
            continue
        v, d1, d2, d3, _, _ = cell_derivatives(
            x[j], c, unchanged, group_start, group_exposure, group_count, False
        )
        out[0, j], out[1, j], out[2, j], out[3, j] = v, d1, min(d2, 0.0), d3
        total += v
    return total


@_njit
def log_joint(x, n, m, s, w, rho, cell_sum):
    """``f(x)`` without its constants: cells + prior of the path."""
    f = cell_sum - 0.5 * ((x[0] - m) / s) ** 2
    pull = 1.0 - rho
    for j in range(1, n):
        f -= 0.5 * ((x[j] - x[j - 1] + pull * (x[j - 1] - m)) / w) ** 2
    return f


@_njit
def newton_system(x, n, m, s, w, rho, terms, grad, diag):
    """The gradient of ``f`` and the diagonal of ``H = −∇²f`` (off-diagonal ``−ρ/w²``)."""
    iw2, is2 = (1.0 / w) ** 2, (1.0 / s) ** 2
    pull, rho_iw2 = 1.0 - rho, rho * rho * iw2
    for j in range(n):
        grad[j] = terms[1, j]
        diag[j] = -terms[2, j]
    grad[0] -= (x[0] - m) * is2
    diag[0] += is2
    for j in range(1, n):
        step = (x[j] - x[j - 1] + pull * (x[j - 1] - m)) * iw2
        grad[j] -= step
        grad[j - 1] += rho * step
        diag[j] += iw2
        diag[j - 1] += rho_iw2


@_njit
def factor(n, diag, off, d, lower, inv):
    """``LDLᵀ`` of the tridiagonal matrix (``diag``, constant ``off``); ``inv = 1/d``."""
    d[0] = diag[0]
    for j in range(n - 1):
        inv[j] = 1.0 / d[j]
        lower[j] = off * inv[j]
        d[j + 1] = diag[j + 1] - lower[j] * off
    inv[n - 1] = 1.0 / d[n - 1]


@_njit
def solve(n, inv, lower, rhs, out):
    """``out = (LDLᵀ)⁻¹ rhs`` with ``inv = 1/d``."""
    out[0] = rhs[0]
    for j in range(1, n):
        out[j] = rhs[j] - lower[j - 1] * out[j - 1]
    out[n - 1] = out[n - 1] * inv[n - 1]
    for j in range(n - 2, -1, -1):
        out[j] = out[j] * inv[j] - lower[j] * out[j + 1]


@_njit
def second_order(x, n, o, m, s, w, slot_cell, unchanged, group_start, group_exposure,
                 group_count, a, inv, lower, sig, u, z, work, out):  # fmt: skip
    """The second-order term of ``log Z`` and its gradient in ``(m, s, w)`` (into
    ``out``), at the mode ``x`` with ``a = ℓ'''``, ``H = LDLᵀ`` (``inv = 1/d``), ``sig = diag H⁻¹``,
    ``u`` and ``z = H⁻¹u`` of the first-order gradient.

    ``ε = ⅛ Σ_j ℓ''''_j Σ_jj² + ⅛ uᵀz + (1/12) Σ_ij a_i a_j Σ_ij³`` (the Gaussian
    moments of the cubic and quartic terms of ``f`` about its mode), each sum in
    ``O(n)``: ``Σ_ij = Σ_jj·Π_{k=i}^{j−1}(−l_k)`` for ``i < j``. Its gradient is
    forward-mode through the same recursions, the mode moving as ``H⁻¹b_θ``.
    """
    b4, b5, cum, rhs, v, dh, dd, dl, ds = (
        work[0], work[1], work[2], work[3], work[4], work[5], work[6], work[7], work[8]
    )  # fmt: skip
    for j in range(n):
        c = slot_cell[o + j]
        if c < 0:
            b4[j] = b5[j] = 0.0
        else:
            b4[j], b5[j] = cell_derivatives(x[j], c, unchanged, group_start,
                                            group_exposure, group_count, True)[4:]  # fmt: skip
    cum[0] = 0.0
    for j in range(n - 1):
        cum[j + 1] = (cum[j] + a[j]) * -(lower[j] ** 3)
    quartic, pairs, cubes = 0.0, 0.0, 0.0
    for j in range(n):
        quartic += b4[j] * sig[j] ** 2
        pairs += u[j] * z[j]
        cubes += a[j] * sig[j] ** 3 * (a[j] + 2.0 * cum[j])
    s3, w3 = s * s * s, w * w * w
    off = -1.0 / (w * w)
    for k in range(3):
        for j in range(n):
            rhs[j] = 0.0
        doff = 0.0
        if k == 0:
            rhs[0] = 1.0 / (s * s)
        elif k == 1:
            rhs[0] = 2.0 * (x[0] - m) / s3
        else:
            doff = 2.0 / w3
            for j in range(1, n):
                step = 2.0 * (x[j] - x[j - 1]) / w3
                rhs[j] += step
                rhs[j - 1] -= step
        solve(n, inv, lower, rhs, v)  # dx̂/dθ
        for j in range(n):
            dh[j] = -a[j] * v[j]
            if k == 2:
                dh[j] -= ((j > 0) + (j < n - 1)) * 2.0 / w3
        if k == 1:
            dh[0] -= 2.0 / s3
        dd[0] = dh[0]
        for j in range(n - 1):
            dl[j] = (doff - lower[j] * dd[j]) * inv[j]
            dd[j + 1] = dh[j + 1] - dl[j] * off - lower[j] * doff
        ds[n - 1] = -dd[n - 1] * inv[n - 1] ** 2
        for j in range(n - 2, -1, -1):
            ds[j] = (-dd[j] * inv[j] ** 2 + 2.0 * lower[j] * dl[j] * sig[j + 1]
                     + lower[j] ** 2 * ds[j + 1])  # fmt: skip
        d_quartic, d_pairs, d_cubes, d_cum = 0.0, 0.0, 0.0, 0.0
        for j in range(n):
            da = b4[j] * v[j]
            d_quartic += b5[j] * v[j] * sig[j] ** 2 + 2.0 * b4[j] * sig[j] * ds[j]
            du = -da * sig[j] - a[j] * ds[j]
            d_pairs += 2.0 * z[j] * du - dh[j] * z[j] ** 2
            if j < n - 1:
                d_pairs -= 2.0 * doff * z[j] * z[j + 1]
            arm = a[j] + 2.0 * cum[j]
            d_cubes += (da * sig[j] ** 3 * arm + 3.0 * a[j] * sig[j] ** 2 * ds[j] * arm
                        + a[j] * sig[j] ** 3 * (da + 2.0 * d_cum))  # fmt: skip
            if j < n - 1:
                link2 = lower[j] ** 2
                d_cum = -(d_cum + da) * link2 * lower[j] - (cum[j] + a[j]) * 3.0 * link2 * dl[j]
        out[k] = d_quartic / 8.0 + d_pairs / 8.0 + d_cubes / 12.0
    eps = quartic / 8.0 + pairs / 8.0 + cubes / 12.0
    ratio = 1.0 + (eps / SECOND_ORDER_CAP) ** 2
    for k in range(3):
        out[k] /= ratio * np.sqrt(ratio)
    return eps / np.sqrt(ratio)


@_njit
def arrow_solve(n, inv, lower, a, schur, rhs, rhs_level, out):
    """Solve ``[[A, k], [kᵀ, c]] [y; y_L] = [rhs; rhs_level]`` with ``A = LDLᵀ``
    (``inv = 1/d``), ``a = A⁻¹k`` and ``schur = c − kᵀa``: ``out = y``, return ``y_L``."""
    solve(n, inv, lower, rhs, out)
    level = rhs_level
    for j in range(n):
        level -= a[j] * rhs[j]
    level /= schur
    for j in range(n):
        out[j] -= a[j] * level
    return level


@_njit
def level_coupling(n, s, w, rho, k):
    """``k = ∂²(−f)/∂x∂L = −P·1`` of the walk's precision ``P`` about the level ``L``;
    return ``1ᵀP1``."""
    pull, iw2 = 1.0 - rho, 1.0 / (w * w)
    for j in range(n):
        k[j] = 0.0
    k[0] = -1.0 / (s * s)
    for j in range(1, n):
        k[j] -= pull * iw2
        k[j - 1] += rho * pull * iw2
    return 1.0 / (s * s) + (n - 1) * pull * pull * iw2


@_njit
def walk_gradient(x, n, centre, s, w, rho, sig, sig_up, z):
    """``(∂/∂centre, ∂/∂s, ∂/∂w, ∂/∂ρ)`` of a page's ``log Z`` through its walk's prior,
    at the mode ``x`` with ``sig``, ``sig_up`` the diagonal and super-diagonal of the
    covariance of ``x − centre`` under ``H⁻¹`` and ``z = H⁻¹u`` mapped the same way."""
    gap = x[0] - centre
    squares, trace_walk, z_walk = 0.0, 0.0, 0.0
    d_m_walk, d_rho = 0.0, 0.0
    if rho == 1.0:
        for j in range(n):
            links = (j > 0) + (j < n - 1)
            walk_x = links * x[j]
            if j > 0:
                walk_x -= x[j - 1]
                squares += (x[j] - x[j - 1]) ** 2
            if j < n - 1:
                walk_x -= x[j + 1]
                trace_walk -= 2.0 * sig_up[j]
            trace_walk += links * sig[j]
            z_walk += z[j] * walk_x
    else:
        # r_j = x_j − m − ρ(x_{j−1} − m), the step's innovation; y_j = x_j − m
        pull, iw2 = 1.0 - rho, 1.0 / (w * w)
        rho_terms = 0.0  # ∂f/∂ρ·w² − ½(tr(Σ ∂P/∂ρ) + zᵀ∂∇f/∂ρ)·w²
        for j in range(n):
            y = x[j] - centre
            r_here = x[j] - x[j - 1] + pull * (x[j - 1] - centre) if j > 0 else 0.0
            r_next = x[j + 1] - x[j] + pull * y if j < n - 1 else 0.0
            z_walk += z[j] * (r_here - rho * r_next)
            squares += r_here * r_here
            trace_walk += sig[j] * ((j > 0) + rho * rho * (j < n - 1))
            b_rho = 0.0
            if j > 0:
                rho_terms += r_here * (x[j - 1] - centre)
                b_rho += x[j - 1] - centre
                d_m_walk += pull * r_here
            if j < n - 1:
                trace_walk -= 2.0 * rho * sig_up[j]
                rho_terms -= rho * sig[j] - sig_up[j]
                b_rho += r_next - rho * y
            rho_terms -= 0.5 * z[j] * b_rho
            d_m_walk -= 0.5 * z[j] * pull * ((j > 0) - rho * (j < n - 1))
        d_rho = rho_terms * iw2
        d_m_walk *= iw2
    s2, s3, w3 = s * s, s * s * s, w * w * w
    d_m = gap / s2 - 0.5 * z[0] / s2 + d_m_walk
    d_s = gap * gap / s3 - 1.0 / s - 0.5 * (-2.0 * sig[0] / s3 + z[0] * 2.0 * gap / s3)
    d_w = squares / w3 - (n - 1) / w - 0.5 * (2.0 / w3) * (z_walk - trace_walk)
    return d_m, d_s, d_w, d_rho


@_njit
def laplace_logp_grad(m, s, w, rho, tau, page_start, slot_cell, unchanged, group_start,
                      group_exposure, group_count, start, tangent, reference,
                      order):  # fmt: skip
    """``(Σ_p log Z_p, ∂/∂m, ∂/∂s, ∂/∂w, per-page log Z, Newton passes, modes,
    (mean correction, variance) of each page's last column, ∂/∂ρ, ∂/∂τ, (mode, mean
    correction, variance) of each page's level)``.

    A page's steps revert towards ``m``: ``x_j ~ Normal(m + ρ(x_{j−1} − m), w)`` (``ρ = 1``:
    the random walk, computed exactly as without ``ρ``; the second order takes that only).
    Where ``τ > 0`` the walk's centre is the page's own level ``L ~ Normal(m, τ)``
    (``x_0 ~ Normal(L, s)``, steps towards ``L``), integrated with the path: the Laplace
    approximation in ``(x, L)``, whose Hessian is ``A`` (the path's, tridiagonal) bordered
    by ``k = −P·1`` and ``c = 1ᵀP1 + 1/τ²`` (solved by the Schur complement
    ``S = c − kᵀA⁻¹k``; ``log det H = log det A + log S``).

    Newton starts at ``start + tangent · (m − m₀, log s − log s₀, log w − log w₀)`` with
    ``reference = (m₀, log s₀, log w₀)`` (each slot's shift clipped to
    ``±START_SHIFT_LIMIT``), or where ``start`` is NaN at the slot before (the first: ``m``);
    a level starts at ``m``.

    One loop over the pages, its buffers allocated once: a page's step done by a
    function of its own (arrays passed in, views of a work array) cost numba's
    reference counts on every array at every page, ~15% of the time.
    """
    n_pages = len(page_start) - 1
    longest = 1
    for p in range(n_pages):
        longest = max(longest, page_start[p + 1] - page_start[p])
    size = max(longest, 3)
    x, trial, grad, diag = np.empty(size), np.empty(size), np.empty(size), np.empty(size)
    d, lower, step, u = np.empty(size), np.empty(size), np.empty(size), np.empty(size)
    spare, inv = np.empty(size), np.empty(size)
    sig, sig_up, z = np.empty(size), np.empty(size), np.empty(size)
    k, a = np.empty(size), np.empty(size)
    terms, trial_terms = np.empty((4, size)), np.empty((4, size))
    second_work, more = np.empty((9, size)), np.empty(3)
    grad_m, grad_s, grad_w = np.zeros(n_pages), np.zeros(n_pages), np.zeros(n_pages)
    grad_rho, grad_tau = np.zeros(n_pages), np.zeros(n_pages)
    per_page = np.zeros(n_pages)
    modes, last_moments = np.full(len(slot_cell), np.nan), np.full((2, n_pages), np.nan)
    level_moments = np.full((3, n_pages), np.nan)
    passes = 0
    for p in range(n_pages):
        o = page_start[p]
        n = page_start[p + 1] - o
        if n == 0:
            continue
        mp, sp, wp, rp, tp = m[p], s[p], w[p], rho[p], tau[p]
        has_level = tp > 0.0
        if order >= 2 and (rp != 1.0 or has_level):
            raise ValueError("the second-order Laplace term takes the random walk only")
        moved_m = mp - reference[0]
        log_s, log_w = np.log(sp), np.log(wp)
        moved_s, moved_w = log_s - reference[1], log_w - reference[2]
        previous = mp
        for j in range(n):
            if np.isfinite(start[o + j]):
                shift = (tangent[0, o + j] * moved_m + tangent[1, o + j] * moved_s
                         + tangent[2, o + j] * moved_w)  # fmt: skip
                if not np.isfinite(shift):
                    shift = 0.0
                x[j] = start[o + j] + min(max(shift, -START_SHIFT_LIMIT), START_SHIFT_LIMIT)
            else:
                x[j] = previous
            previous = x[j]
        off = -rp / (wp * wp)
        centre, level_step, schur, grad_level = mp, 0.0, 1.0, 0.0
        itau2 = 1.0 / (tp * tp) if has_level else 0.0
        if has_level:
            coupling = level_coupling(n, sp, wp, rp, k) + itau2
        f = log_joint(
            x, n, centre, sp, wp, rp,
            page_terms(x, o, n, slot_cell, unchanged, group_start, group_exposure,
                       group_count, terms),
        )  # fmt: skip
        page_passes = 1
        converged = True
        while True:
            newton_system(x, n, centre, sp, wp, rp, terms, grad, diag)
            factor(n, diag, off, d, lower, inv)
            if has_level:
                grad_level = -(centre - mp) * itau2
                for j in range(n):
                    grad_level += terms[1, j] - grad[j]  # (P(x − L·1))_j
                solve(n, inv, lower, k, a)
                schur = coupling
                for j in range(n):
                    schur -= k[j] * a[j]
                level_step = arrow_solve(n, inv, lower, a, schur, grad, grad_level, step)
            else:
                solve(n, inv, lower, grad, step)
            largest = abs(level_step)
            for j in range(n):
                largest = max(largest, abs(step[j]))
            gain = grad_level * level_step
            for j in range(n):
                gain += grad[j] * step[j]
            if largest < NEWTON_TOLERANCE or 0.5 * gain < NEWTON_GAIN_TOLERANCE * (1.0 + abs(f)):
                break
            decrement = gain
            if largest < CHEBYSHEV_BELOW:  # the cells' curvature changes along the step
                for j in range(n):
                    u[j] = 0.5 * terms[3, j] * step[j] * step[j]
                level_extra = 0.0
                if has_level:
                    level_extra = arrow_solve(n, inv, lower, a, schur, u, 0.0, spare)
                else:
                    solve(n, inv, lower, u, spare)
                corrected = grad_level * (level_step + level_extra)
                for j in range(n):
                    corrected += grad[j] * (step[j] + spare[j])
                if corrected > 0.0:  # else the correction turned the step downhill
                    level_step += level_extra
                    for j in range(n):
                        step[j] += spare[j]
                    decrement = corrected
            t = 1.0
            while True:
                for j in range(n):
                    trial[j] = x[j] + t * step[j]
                trial_centre = centre + t * level_step
                cells = page_terms(trial, o, n, slot_cell, unchanged, group_start,
                                   group_exposure, group_count, trial_terms)  # fmt: skip
                f_trial = log_joint(trial, n, trial_centre, sp, wp, rp, cells)
                f_trial -= 0.5 * (trial_centre - mp) ** 2 * itau2
                page_passes += 1
                if f_trial >= f + 1e-4 * t * decrement or f_trial >= f - 1e-13 * (1 + abs(f)):
                    break  # (the second: equal to rounding, near the mode)
                t *= 0.5
                if t < 1e-12:
                    break
            if page_passes > NEWTON_MAX_PASSES or t < 1e-12 or not np.isfinite(f_trial):
                converged = False
                break
            for j in range(n):
                x[j] = trial[j]
                for r in range(4):
                    terms[r, j] = trial_terms[r, j]
            centre = trial_centre
            f = f_trial
        passes += page_passes
        if not converged:
            per_page[p] = -np.inf
            continue
        # Σ = H⁻¹: diagonal (sig) and super-diagonal (sig_up) by the LDLᵀ recursion
        log_det, product = 0.0, 1.0
        for j in range(n):
            product *= d[j]
            if not 1e-150 < product < 1e150:
                log_det += np.log(product)
                product = 1.0
        log_det += np.log(product)
        sig[n - 1] = inv[n - 1]
        for j in range(n - 2, -1, -1):
            sig_up[j] = -lower[j] * sig[j + 1]
            sig[j] = inv[j] + lower[j] * lower[j] * sig[j + 1]
        z_level = 0.0
        if has_level:
            log_det += np.log(schur)
            for j in range(n):
                u[j] = -terms[3, j] * (sig[j] + a[j] * a[j] / schur)
            z_level = arrow_solve(n, inv, lower, a, schur, u, 0.0, z)
        else:
            for j in range(n):
                u[j] = -terms[3, j] * sig[j]
            solve(n, inv, lower, u, z)
        for j in range(n):
            modes[o + j] = x[j]
        last_moments[0, p] = -0.5 * z[n - 1]  # E[x] − x̂ to first order in ℓ'''
        last_moments[1, p] = sig[n - 1] + (a[n - 1] ** 2 / schur if has_level else 0.0)
        if has_level:
            level_moments[0, p], level_moments[1, p] = centre, -0.5 * z_level
            level_moments[2, p] = 1.0 / schur
            # the walk's gradient sees x − L: its covariance and z move with the level's
            for j in range(n):
                z[j] -= z_level
                sig[j] += (a[j] + 1.0) ** 2 / schur
                if j < n - 1:
                    sig_up[j] += (a[j] + 1.0) * (a[j + 1] + 1.0) / schur
        d_m, d_s, d_w, d_rho = walk_gradient(x, n, centre, sp, wp, rp, sig, sig_up, z)
        log_z = f - log_s - (n - 1) * log_w - 0.5 * log_det
        if has_level:
            gap = centre - mp
            log_z -= np.log(tp)
            d_m = (gap - 0.5 * z_level) * itau2
            grad_tau[p] = (gap * gap + 1.0 / schur - z_level * gap) * itau2 / tp - 1.0 / tp
        if order >= 2:
            log_z += second_order(x, n, o, mp, sp, wp, slot_cell, unchanged, group_start,
                                  group_exposure, group_count, terms[3], inv, lower, sig,
                                  u, z, second_work, more)  # fmt: skip
            d_m, d_s, d_w = d_m + more[0], d_s + more[1], d_w + more[2]
        per_page[p], grad_m[p], grad_s[p], grad_w[p] = log_z, d_m, d_s, d_w
        grad_rho[p] = d_rho
    return (per_page.sum(), grad_m, grad_s, grad_w, per_page, passes, modes, last_moments,
            grad_rho, grad_tau, level_moments)  # fmt: skip
