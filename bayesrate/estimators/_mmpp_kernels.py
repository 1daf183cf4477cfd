"""The numba kernels of :mod:`bayesrate.estimators.mmpp`, at module level so that
numba's on-disk cache holds them across processes (imported on first use)."""

from __future__ import annotations

import numba
import numpy as np

#: below this ``2Dτ`` the scaled exponential uses the series of ``−expm1(−x)/x``
_SERIES_BELOW = 1e-8

njit = numba.njit(cache=True, nogil=True)


@njit
def expm2_scaled(a, b, c, d, t):
    """``exp([[a, b], [c, d]]·t)·e^{−ℓ}`` and ``ℓ`` (``b, c ≥ 0``; ``ℓ``: top eigenvalue·t)."""
    s = 0.5 * (a + d)
    h = 0.5 * (a - d)
    bc = b * c
    root = np.sqrt(h * h + bc)
    x = 2.0 * root * t
    low = np.exp(-x)
    f = -np.expm1(-x) / (2.0 * root) if x > _SERIES_BELOW else t * (1.0 - 0.5 * x)
    if h >= 0.0:
        plus = root + h
        minus = bc / plus if plus > 0.0 else 0.0
    else:
        minus = root - h
        plus = bc / minus if minus > 0.0 else 0.0
    return low + plus * f, b * f, c * f, low + minus * f, (s + root) * t


@njit
def page_loglik(lo, hi, tau, changed, count, lam, ratio, q_in, q_out):
    """Scaled forward recursion of one page at quiet rate ``lam``: ``log L`` and the
    filtered probability of the burst state after the last interval."""
    total = q_in + q_out
    p0 = q_out / total if total > 0.0 else 1.0
    p1 = 1.0 - p0
    ll = 0.0
    for i in range(lo, hi):
        t = tau[i]
        if changed[i] == 0:
            m00, m01, m10, m11, scale = expm2_scaled(
                -q_in - lam, q_in, q_out, -q_out - ratio * lam, t * count[i]
            )
            n0 = p0 * m00 + p1 * m10
            n1 = p0 * m01 + p1 * m11
            norm = n0 + n1
            if not norm > 0.0:
                return -np.inf, np.nan
            ll += np.log(norm) + scale
            p0, p1 = n0 / norm, n1 / norm
        else:
            m00, m01, m10, m11, scale = expm2_scaled(
                -q_in - lam, q_in, q_out, -q_out - ratio * lam, t
            )
            e = np.exp(scale)
            s00, s01, s10, s11, _ = expm2_scaled(-q_in, q_in, q_out, -q_out, t)
            c00 = max(s00 - e * m00, 0.0)
            c01 = max(s01 - e * m01, 0.0)
            c10 = max(s10 - e * m10, 0.0)
            c11 = max(s11 - e * m11, 0.0)
            for _ in range(count[i]):
                n0 = p0 * c00 + p1 * c10
                n1 = p0 * c01 + p1 * c11
                norm = n0 + n1
                if not norm > 0.0:
                    return -np.inf, np.nan
                ll += np.log(norm)
                p0, p1 = n0 / norm, n1 / norm
    return ll, p1


@numba.njit(cache=True, nogil=True, parallel=True)
def grid(offsets, tau, changed, count, theta, ratio, q_in, q_out, stride, drop):
    """Every page at every grid point; with ``stride > 1`` only at every ``stride``-th
    point first, then inside the cells with an end within ``drop`` of that scan's
    best (the others stay ``−inf``)."""
    n_pages = len(offsets) - 1
    n = len(theta)
    out = np.full((n_pages, n), -np.inf)
    burst = np.full((n_pages, n), np.nan)
    coarse = np.unique(np.append(np.arange(0, n, max(stride, 1)), n - 1))
    for p in numba.prange(n_pages):
        lo, hi = offsets[p], offsets[p + 1]
        points = np.arange(n) if stride <= 1 else coarse
        for k in points:
            out[p, k], burst[p, k] = page_loglik(
                lo, hi, tau, changed, count, np.exp(theta[k]), ratio, q_in, q_out
            )
        if stride <= 1:
            continue
        top = -np.inf
        for k in coarse:
            top = max(top, out[p, k])
        for c in range(len(coarse) - 1):
            a, b = coarse[c], coarse[c + 1]
            if max(out[p, a], out[p, b]) < top - drop:
                continue
            for k in range(a + 1, b):
                out[p, k], burst[p, k] = page_loglik(
                    lo, hi, tau, changed, count, np.exp(theta[k]), ratio, q_in, q_out
                )
    return out, burst


@njit
def count_pmf(burst, lam, ratio, q_in, q_out, tau, cap):
    """``P(K = c)``, ``c ≤ cap``, of the detections in intervals ``tau`` from a state
    that is burst with probability ``burst``; the mass above ``cap`` is dropped."""
    dist = np.zeros((cap + 1, 2))
    dist[0, 0], dist[0, 1] = 1.0 - burst, burst
    for t in tau:
        m00, m01, m10, m11, scale = expm2_scaled(-q_in - lam, q_in, q_out, -q_out - ratio * lam, t)
        e = np.exp(scale)
        m00, m01, m10, m11 = e * m00, e * m01, e * m10, e * m11
        s00, s01, s10, s11, _ = expm2_scaled(-q_in, q_in, q_out, -q_out, t)
        c00, c01 = max(s00 - m00, 0.0), max(s01 - m01, 0.0)
        c10, c11 = max(s10 - m10, 0.0), max(s11 - m11, 0.0)
        for c in range(cap, -1, -1):
            a0, a1 = dist[c, 0], dist[c, 1]
            n0 = a0 * m00 + a1 * m10
            n1 = a0 * m01 + a1 * m11
            if c > 0:
                b0, b1 = dist[c - 1, 0], dist[c - 1, 1]
                n0 += b0 * c00 + b1 * c10
                n1 += b0 * c01 + b1 * c11
            dist[c, 0], dist[c, 1] = n0, n1
    return dist[:, 0] + dist[:, 1]


@njit
def simulate(offsets, tau, count, lam, ratio, q_in, q_out, starts, uniforms):
    """Detection flags per interval (runs expanded); ``starts``: one uniform per page."""
    n_pages = len(offsets) - 1
    total = q_in + q_out
    pi1 = q_in / total if total > 0.0 else 0.0
    n = 0
    for i in range(len(count)):
        n += count[i]
    flags = np.zeros(n, dtype=np.int8)
    j = 0
    for p in range(n_pages):
        state = 1 if starts[p] < pi1 else 0
        for i in range(offsets[p], offsets[p + 1]):
            t = tau[i]
            m00, m01, m10, m11, scale = expm2_scaled(
                -q_in - lam[p], q_in, q_out, -q_out - ratio * lam[p], t
            )
            e = np.exp(scale)
            s00, _, s10, _, _ = expm2_scaled(-q_in, q_in, q_out, -q_out, t)
            for _ in range(count[i]):
                u = uniforms[j]
                if state == 0:
                    quiet0, quiet1, any0 = e * m00, e * m01, s00
                else:
                    quiet0, quiet1, any0 = e * m10, e * m11, s10
                # outcomes in order: (no change, end 0), (no change, end 1),
                # (change, end 0), (change, end 1); the row sums to 1
                if u < quiet0:
                    state = 0
                elif u < quiet0 + quiet1:
                    state = 1
                elif u < any0 + quiet1:
                    flags[j] = 1
                    state = 0
                else:
                    flags[j] = 1
                    state = 1
                j += 1
    return flags
