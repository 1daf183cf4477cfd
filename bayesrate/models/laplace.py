"""Each page's random-walk path integrated out by a Laplace approximation (the dynamic
model's likelihood without a log-rate grid).

A page's log-rates ``x_0 … x_{n−1}`` over its columns (first to last epoch with data) have
the prior ``x_0 ~ Normal(m, s)``, ``x_j ~ Normal(x_{j−1}, w)``, and each column's cell of
intervals its censored log-likelihood ``ℓ_j(x_j)`` (concave in ``x_j``; 0 for a column
without intervals). With ``f(x)`` the log joint and ``H = −∇²f`` (tridiagonal: the cells'
information on the diagonal plus the walk's precision), the Laplace approximation of the
page's marginal likelihood is

    log Z ≈ f(x̂) + (n/2)·log 2π − ½·log det H(x̂),    x̂ = argmax f

found per page by Newton's method with a backtracking line search (``f`` is concave, so
the mode is unique). Its exact gradient with respect to ``(m, s, w)`` is

    d log Z/dθ = ∂f/∂θ − ½·[tr(H⁻¹ ∂P/∂θ) + zᵀ b_θ],   z = H⁻¹u,  u_j = −ℓ'''_j(x̂_j)·(H⁻¹)_jj

with ``P`` the walk's precision and ``b_θ = ∂∇f/∂θ`` (so ``dx̂/dθ = H⁻¹b_θ``); ``(H⁻¹)_jj``
and ``(H⁻¹)_{j,j+1}`` come from the ``LDLᵀ`` factor in ``O(n)``. The same ``z`` gives the
posterior mean of the path to first order in the cells' skew, ``E[x] ≈ x̂ − z/2``
(with ``E[δ_i] ≈ ½ Σ_j (H⁻¹)_ij (H⁻¹)_jj ℓ'''_j``). A page costs a few Newton
passes over its cells' groups, against ``K × band`` per column on the grid
(:mod:`bayesrate.models.hmm`).

With ``order=2`` (config ``laplace_order``) ``log Z`` adds the next term of the
expansion, the Gaussian moments of the cells' cubic and quartic terms about the mode,

    ε = ⅛ Σ_j ℓ''''_j Σ_jj² + ⅛ Σ_ij ℓ'''_i ℓ'''_j Σ_ii Σ_ij Σ_jj + (1/12) Σ_ij ℓ'''_i ℓ'''_j Σ_ij³

(``Σ = H⁻¹``; ``O(n)`` per page, exact gradient by forward mode), entered as
``ε/√(1 + (ε/κ)²)``, ``κ = SECOND_ORDER_CAP``. It shrinks the error where the cells are
rich (two columns of 2,000 intervals: 2.6e-8 against 2.2e-4) but is not the default: it
grows like the walk's square on pages with runs of unchanged columns, and on the
ota-contrib crawl log its fit is further from the grid's than the first order's (see
``docs/models.md``).

A cell's terms are the scalar form of :func:`bayesrate.likelihood.loglik_derivatives`
(``−U·λ + Σ_g c_g·log(1 − e^{−λE_g})``, its score and information) plus the third
derivative, which the gradient of ``log det H`` needs (and the fourth and fifth for the
second order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bayesrate.models.hmm import _njit

#: Newton stops when every step is below this (log-rate units)
NEWTON_TOLERANCE = 1e-10
#: a page's second-order term ``ε`` enters as ``ε/√(1 + (ε/κ)²)``: unchanged where it is
#: small (the expansion holds), at most ``κ`` nats where the expansion has failed
SECOND_ORDER_CAP = 0.5
#: Newton's step gets Chebyshev's third-order correction ``H⁻¹(½ ℓ''' ∘ δ²)`` when every
#: step is below this (cubic convergence near the mode)
CHEBYSHEV_BELOW = 0.5
#: and gives up (log Z = −inf) after this many passes
NEWTON_MAX_PASSES = 200
#: part of PyTensor's numba cache key: a digest of this file
_KERNEL_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class PathLayout:
    """The data of every page's path, as the kernel reads them.

    Attributes
    ----------
    page_start
        ``(pages + 1,)`` each page's first slot (one slot per column, first to last).
    slot_cell
        ``(slots,)`` the cell of each slot, −1 for a column without intervals.
    unchanged, group_start, group_exposure, group_count
        Per cell its unchanged exposure and the range of its changed groups; per group its
        interval length (hours) and count.
    start
        ``(slots,)`` Newton's starting log-rate: the cell's ``log((changes + ½)/exposure)``,
        NaN without a cell (the previous slot's, or the prior mean).
    """

    page_start: np.ndarray
    slot_cell: np.ndarray
    unchanged: np.ndarray
    group_start: np.ndarray
    group_exposure: np.ndarray
    group_count: np.ndarray
    start: np.ndarray

    @classmethod
    def from_cells(cls, cells) -> PathLayout:
        """The layout of :class:`~bayesrate.models.dynamic.EpochCells` ``cells``."""
        groups = cells.groups
        if groups.has_added:
            raise ValueError("the Laplace paths take cells without added rates")
        first, last = cells.first_column, cells.last_column
        columns = np.where(last >= first, last - first + 1, 0).astype(np.int64)
        page_start = np.concatenate([[0], np.cumsum(columns)]).astype(np.int64)
        slot_cell = np.full(int(page_start[-1]), -1, dtype=np.int64)
        slot_cell[page_start[cells.cell_page] + cells.cell_epoch - first[cells.cell_page]] = (
            np.arange(len(cells.cell_page))
        )
        n_cells = len(groups.unchanged)
        group_start = np.searchsorted(groups.group_page, np.arange(n_cells + 1)).astype(np.int64)
        exposure = np.exp(groups.group_log_exposure)
        changes = np.bincount(groups.group_page, weights=groups.group_count, minlength=n_cells)
        total = groups.unchanged + np.bincount(
            groups.group_page, weights=groups.group_count * exposure, minlength=n_cells
        )
        start = np.full(len(slot_cell), np.nan)
        has = slot_cell >= 0
        start[has] = np.log((changes[slot_cell[has]] + 0.5) / total[slot_cell[has]])
        return cls(
            page_start=page_start,
            slot_cell=slot_cell,
            unchanged=np.ascontiguousarray(groups.unchanged, dtype=np.float64),
            group_start=group_start,
            group_exposure=np.ascontiguousarray(exposure, dtype=np.float64),
            group_count=np.ascontiguousarray(groups.group_count, dtype=np.float64),
            start=start,
        )

    @property
    def n_pages(self) -> int:
        return len(self.page_start) - 1

    @property
    def constants(self) -> tuple[np.ndarray, ...]:
        """The kernel's data arguments, in its order."""
        return (
            self.page_start,
            self.slot_cell,
            self.unchanged,
            self.group_start,
            self.group_exposure,
            self.group_count,
            self.start,
        )


_KERNELS = None


def _kernels():
    """Compile the numba kernels once (numba is imported only when they are used)."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS

    @_njit
    def cell_terms(x, cell, unchanged, group_start, group_exposure, group_count):
        """``ℓ, ℓ', ℓ'', ℓ'''`` of ``cell`` at log-rate ``x``."""
        v, d1, d2, d3, _, _ = cell_derivatives(
            x, cell, unchanged, group_start, group_exposure, group_count, False
        )
        return v, d1, d2, d3

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
            v, d1, d2, d3 = cell_terms(x[j], c, unchanged, group_start, group_exposure, group_count)
            out[0, j], out[1, j], out[2, j], out[3, j] = v, d1, min(d2, 0.0), d3
            total += v
        return total

    @_njit
    def log_joint(x, n, m, s, w, cell_sum):
        """``f(x)`` without its constants: cells + prior of the path."""
        f = cell_sum - 0.5 * ((x[0] - m) / s) ** 2
        for j in range(1, n):
            f -= 0.5 * ((x[j] - x[j - 1]) / w) ** 2
        return f

    @_njit
    def newton_system(x, n, m, s, w, terms, grad, diag):
        """The gradient of ``f`` and the diagonal of ``H = −∇²f`` (off-diagonal ``−1/w²``)."""
        iw2 = 1.0 / (w * w)
        for j in range(n):
            grad[j] = terms[1, j]
            diag[j] = -terms[2, j]
        grad[0] -= (x[0] - m) / (s * s)
        diag[0] += 1.0 / (s * s)
        for j in range(1, n):
            step = (x[j] - x[j - 1]) * iw2
            grad[j] -= step
            grad[j - 1] += step
            diag[j] += iw2
            diag[j - 1] += iw2

    @_njit
    def factor(n, diag, off, d, lower):
        """``LDLᵀ`` of the tridiagonal matrix (``diag``, constant ``off``)."""
        d[0] = diag[0]
        for j in range(n - 1):
            lower[j] = off / d[j]
            d[j + 1] = diag[j + 1] - lower[j] * off

    @_njit
    def solve(n, d, lower, rhs, out):
        out[0] = rhs[0]
        for j in range(1, n):
            out[j] = rhs[j] - lower[j - 1] * out[j - 1]
        out[n - 1] = out[n - 1] / d[n - 1]
        for j in range(n - 2, -1, -1):
            out[j] = out[j] / d[j] - lower[j] * out[j + 1]

    @_njit
    def second_order(x, n, o, m, s, w, slot_cell, unchanged, group_start, group_exposure,
                     group_count, a, d, lower, sig, u, z, work, out):  # fmt: skip
        """The second-order term of ``log Z`` and its gradient in ``(m, s, w)`` (into
        ``out``), at the mode ``x`` with ``a = ℓ'''``, ``H = LDLᵀ``, ``sig = diag H⁻¹``,
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
            solve(n, d, lower, rhs, v)  # dx̂/dθ
            for j in range(n):
                dh[j] = -a[j] * v[j]
                if k == 2:
                    dh[j] -= ((j > 0) + (j < n - 1)) * 2.0 / w3
            if k == 1:
                dh[0] -= 2.0 / s3
            dd[0] = dh[0]
            for j in range(n - 1):
                dl[j] = (doff - lower[j] * dd[j]) / d[j]
                dd[j + 1] = dh[j + 1] - dl[j] * off - lower[j] * doff
            ds[n - 1] = -dd[n - 1] / d[n - 1] ** 2
            for j in range(n - 2, -1, -1):
                ds[j] = (-dd[j] / d[j] ** 2 + 2.0 * lower[j] * dl[j] * sig[j + 1]
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
    def page_laplace(p, m, s, w, page_start, slot_cell, unchanged, group_start,
                     group_exposure, group_count, start, order, work, modes,
                     last_moments):  # fmt: skip
        """``(log Z, ∂/∂m, ∂/∂s, ∂/∂w, Newton passes)`` of page ``p``; its mode goes to
        ``modes`` (its slots); its last column's mean correction and variance to
        ``last_moments[:, p]``."""
        o = page_start[p]
        n = page_start[p + 1] - o
        if n == 0:
            return 0.0, 0.0, 0.0, 0.0, 0
        x, trial, grad, diag = work[0], work[1], work[2], work[3]
        d, lower, step, u = work[4], work[5], work[6], work[7]
        terms, trial_terms, spare = work[8:12], work[12:16], work[16]
        previous = m
        for j in range(n):
            x[j] = start[o + j] if np.isfinite(start[o + j]) else previous
            previous = x[j]
        off = -1.0 / (w * w)
        f = log_joint(
            x, n, m, s, w,
            page_terms(x, o, n, slot_cell, unchanged, group_start, group_exposure,
                       group_count, terms),
        )  # fmt: skip
        passes = 1
        while True:
            newton_system(x, n, m, s, w, terms, grad, diag)
            factor(n, diag, off, d, lower)
            solve(n, d, lower, grad, step)
            largest = 0.0
            for j in range(n):
                largest = max(largest, abs(step[j]))
            if largest < NEWTON_TOLERANCE:
                break
            if largest < CHEBYSHEV_BELOW:  # the cells' curvature changes along the step
                for j in range(n):
                    u[j] = 0.5 * terms[3, j] * step[j] * step[j]
                solve(n, d, lower, u, spare)
                for j in range(n):
                    step[j] += spare[j]
            decrement = 0.0
            for j in range(n):
                decrement += grad[j] * step[j]
            t = 1.0
            while True:
                for j in range(n):
                    trial[j] = x[j] + t * step[j]
                cells = page_terms(trial, o, n, slot_cell, unchanged, group_start,
                                   group_exposure, group_count, trial_terms)  # fmt: skip
                f_trial = log_joint(trial, n, m, s, w, cells)
                passes += 1
                if f_trial >= f + 1e-4 * t * decrement or f_trial >= f - 1e-13 * (1 + abs(f)):
                    break  # (the second: equal to rounding, near the mode)
                t *= 0.5
                if t < 1e-12:
                    break
            if passes > NEWTON_MAX_PASSES or t < 1e-12 or not np.isfinite(f_trial):
                return -np.inf, 0.0, 0.0, 0.0, passes
            for j in range(n):
                x[j] = trial[j]
                for r in range(4):
                    terms[r, j] = trial_terms[r, j]
            f = f_trial
        # Σ = H⁻¹: diagonal (grad) and super-diagonal (diag) by the LDLᵀ recursion
        sig, sig_up = grad, diag
        log_det = 0.0
        for j in range(n):
            log_det += np.log(d[j])
        sig[n - 1] = 1.0 / d[n - 1]
        for j in range(n - 2, -1, -1):
            sig_up[j] = -lower[j] * sig[j + 1]
            sig[j] = 1.0 / d[j] + lower[j] * lower[j] * sig[j + 1]
        for j in range(n):
            u[j] = -terms[3, j] * sig[j]
            modes[o + j] = x[j]
        z = trial
        solve(n, d, lower, u, z)
        last_moments[0, p] = -0.5 * z[n - 1]  # E[x] − x̂ to first order in ℓ'''
        last_moments[1, p] = sig[n - 1]
        gap = x[0] - m
        squares, trace_walk, z_walk = 0.0, 0.0, 0.0
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
        log_z = f - np.log(s) - (n - 1) * np.log(w) - 0.5 * log_det
        s2, s3, w3 = s * s, s * s * s, w * w * w
        d_m = gap / s2 - 0.5 * z[0] / s2
        d_s = gap * gap / s3 - 1.0 / s - 0.5 * (-2.0 * sig[0] / s3 + z[0] * 2.0 * gap / s3)
        d_w = squares / w3 - (n - 1) / w - 0.5 * (2.0 / w3) * (z_walk - trace_walk)
        if order >= 2:
            more = work[25]
            log_z += second_order(x, n, o, m, s, w, slot_cell, unchanged, group_start,
                                  group_exposure, group_count, terms[3], d, lower, sig, u,
                                  z, work[16:25], more)  # fmt: skip
            d_m, d_s, d_w = d_m + more[0], d_s + more[1], d_w + more[2]
        return log_z, d_m, d_s, d_w, passes

    @_njit
    def laplace_logp_grad(m, s, w, page_start, slot_cell, unchanged, group_start,
                          group_exposure, group_count, start, order):  # fmt: skip
        """``(Σ_p log Z_p, ∂/∂m, ∂/∂s, ∂/∂w, per-page log Z, Newton passes, modes,
        (mean correction, variance) of each page's last column)``."""
        n_pages = len(page_start) - 1
        longest = 1
        for p in range(n_pages):
            longest = max(longest, page_start[p + 1] - page_start[p])
        work = np.empty((26, max(longest, 3)))
        grad_m, grad_s, grad_w = np.zeros(n_pages), np.zeros(n_pages), np.zeros(n_pages)
        per_page = np.zeros(n_pages)
        modes, last_moments = np.full(len(slot_cell), np.nan), np.full((2, n_pages), np.nan)
        passes = 0
        for p in range(n_pages):
            per_page[p], grad_m[p], grad_s[p], grad_w[p], k = page_laplace(
                p, m[p], s[p], w[p], page_start, slot_cell, unchanged, group_start,
                group_exposure, group_count, start, order, work, modes, last_moments,
            )  # fmt: skip
            passes += k
        return per_page.sum(), grad_m, grad_s, grad_w, per_page, passes, modes, last_moments

    _KERNELS = (laplace_logp_grad, cell_terms, cell_derivatives)
    return _KERNELS


def _per_page(value, n_pages: int) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=np.float64), n_pages))


class LaplaceResult(NamedTuple):
    """What :func:`laplace_logp_grad` returns (in the kernel's order)."""

    logp: float
    grad_m: np.ndarray
    grad_s: np.ndarray
    grad_w: np.ndarray
    #: ``(pages,)`` each page's ``log Z``
    per_page: np.ndarray
    #: Newton passes over a page's cells, summed over pages
    passes: int
    #: ``(slots,)`` each page's mode ``x̂``
    modes: np.ndarray
    #: ``(2, pages)`` each page's last column: the first-order mean correction ``−z/2``
    #: and the variance ``(H⁻¹)_last``
    last_moments: np.ndarray


def laplace_logp_grad(m, s, w, layout: PathLayout, order: int = 1) -> LaplaceResult:
    """``Σ_p log Z_p``, its gradient and each page's mode and last-column moments, with
    the prior mean ``m``, first-column sd ``s`` and walk step sd ``w`` of each page
    (scalars broadcast); ``order`` 2 adds the second-order term to ``log Z``."""
    n = layout.n_pages
    return LaplaceResult(
        *_kernels()[0](
            _per_page(m, n), _per_page(s, n), _per_page(w, n), *layout.constants, int(order)
        )
    )


def cell_terms(x: float, cell: int, layout: PathLayout) -> tuple[float, float, float, float]:
    """``ℓ, ℓ', ℓ'', ℓ'''`` of ``cell`` at log-rate ``x``, as the kernel computes them."""
    return _kernels()[1](
        float(x), int(cell), layout.unchanged, layout.group_start, layout.group_exposure,
        layout.group_count,
    )  # fmt: skip


def cell_derivatives(
    x: float, cell: int, layout: PathLayout
) -> tuple[float, float, float, float, float, float]:
    """``ℓ`` and its first five derivatives of ``cell`` at log-rate ``x``."""
    return _kernels()[2](
        float(x), int(cell), layout.unchanged, layout.group_start, layout.group_exposure,
        layout.group_count, True,
    )  # fmt: skip


def laplace_paths_logp(m, s, w, layout: PathLayout, order: int = 1):
    """The PyTensor scalar ``Σ_p log Z_p`` (gradient with respect to the per-page ``m``,
    ``s`` and ``w``; the data are constants), to first or second ``order``."""
    import pytensor.tensor as pt

    free = [pt.as_tensor_variable(v) for v in (m, s, w)]
    return _op_class()(int(order))(*free, *(pt.constant(a) for a in layout.constants))[0]


_OP_CLASS = None


def _op_class():
    """The Op class (defined and registered with the numba backend on first use)."""
    global _OP_CLASS
    if _OP_CLASS is not None:
        return _OP_CLASS
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayesrate.models.hmm import value_and_gradient_op

    class LaplacePathsLogp(value_and_gradient_op()):
        """Outputs ``(Σ_p log Z_p, ∂/∂m, ∂/∂s, ∂/∂w)``; the gradient uses the latter."""

        __props__ = ("order",)
        n_free = 3

        def __init__(self, order: int):
            self.order = order
            super().__init__()

        def perform(self, node, inputs, output_storage):
            results = _kernels()[0](*inputs, self.order)
            output_storage[0][0] = np.asarray(results[0])
            for i in range(1, 4):
                output_storage[i][0] = results[i]

    kernel = _kernels()[0]

    @register_funcify_and_cache_key(LaplacePathsLogp)
    def _numba_laplace(op, node=None, **kwargs):
        order = op.order

        @numba_njit
        def laplace(*args):
            logp, grad_m, grad_s, grad_w = kernel(*args, order)[:4]
            return np.asarray(logp), grad_m, grad_s, grad_w

        return laplace, f"bayesrate-laplace-paths-v{_KERNEL_VERSION}-order{order}"

    _OP_CLASS = LaplacePathsLogp
    return _OP_CLASS
