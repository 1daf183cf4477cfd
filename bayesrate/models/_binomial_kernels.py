"""The numba kernels of the interval groups' Binomial log-likelihood (values, slopes, sums).

Below both :mod:`bayesrate.models.fused` (the PyTensor Ops that call these kernels) and
:mod:`bayesrate.models.emulator` (per-page emulators checked against
:func:`binomial_total_kernel`), so that neither imports the other's consumer. The maths
and its accuracy are described in :mod:`bayesrate.models.fused`.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numba
import numpy as np
from scipy.special import gammaln

# Cody-Waite split of ln 2 (fdlibm) for the exponential's range reduction
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
#: λ is capped here: e^{−λ} is 0 to double precision and 2^k stays a normal number
_LAMBDA_CAP = 708.0
#: log λ is clamped to [-_LOG_LAMBDA_LOW, log(_LAMBDA_CAP) + 0.01] before exponentiating
_LOG_LAMBDA_LOW = 700.0
_LOG_LAMBDA_HIGH = 6.57
#: per-page and per-pattern log factors beyond ±this are not multiplied as exponentials
_FACTOR_LOG_LIMIT = 340.0
_LN2 = 0.6931471805599453
#: terms are processed in blocks of this many, so that the scratch arrays stay in L1
_BLOCK = 256

#: ``expm1(r)/r = Σ r^k/(k+1)!`` for ``|r| ≤ ln2/2``, to ``r^13`` (error < 2e-18)
_EXPM1_OVER_R = tuple(1.0 / math.factorial(k + 1) for k in range(14))
#: ``2 atanh(s)/(2s) = Σ s^2k/(2k+1)`` for ``|s| ≤ 0.1716``, in ``z = s²``, to ``s^20``
_ATANH_OVER_S = tuple(1.0 / (2 * k + 1) for k in range(11))
#: ``log((1 − e^{−λ})/λ) = −λ/2 + z·Σ B_2n z^(n−1)/(2n (2n)!)``, ``z = λ²``, to ``λ^20``
#: (``λ ≤ ln 2``; next term < 1e-19)
_LOG1MEXP_SMALL = (
    0.041666666666666664,
    -0.00034722222222222224,
    5.5114638447971785e-06,
    -1.033399470899471e-07,
    2.08767569878681e-09,
    -4.403491782239578e-11,
    9.55895466477477e-13,
    -2.1185501852016142e-14,
    4.770034475709914e-16,
    -1.087434349279031e-17,
)
#: ``λ/(e^λ − 1) = 1 − λ/2 + z·Σ B_2n z^(n−1)/(2n)!``, ``z = λ²``, to ``λ^20``
_SLOPE_SMALL = (
    0.08333333333333333,
    -0.001388888888888889,
    3.306878306878307e-05,
    -8.267195767195768e-07,
    2.08767569878681e-08,
    -5.284190138687493e-10,
    1.3382536530684679e-11,
    -3.3896802963225827e-13,
    8.586062056277845e-15,
    -2.174868698558062e-16,
)

#: part of PyTensor's numba cache key: a digest of this file, so edited kernels recompile
KERNEL_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "fastmath": {"contract"}}


@numba.njit(inline="always", **_JIT)
def _horner(coefficients, x):
    """``Σ coefficients[k] · x^k`` by Horner's rule (a loop LLVM unrolls: the tuple is a
    compile-time constant)."""
    acc = 0.0
    for k in range(len(coefficients) - 1, -1, -1):
        acc = acc * x + coefficients[k]
    return acc


@numba.njit(**_JIT)
def _pow2_reduce(x, poly, scale_bits, m):
    """``x[j] = k·ln2 + r``: ``poly[j] = expm1(r)``, ``scale_bits[j]`` = bits of ``2^k``.

    ``x`` must lie in ``[−708, 709]`` so that ``2^k`` is a normal number.
    """
    for j in range(m):
        kf = np.floor(x[j] * _INV_LN2 + 0.5)
        r = (x[j] - kf * _LN2_HI) - kf * _LN2_LO
        poly[j] = r * _horner(_EXPM1_OVER_R, r)
        scale_bits[j] = (np.int64(kf) + 1023) << 52


@numba.njit(**_JIT)
def exp_into(x, out, poly, scale_bits, m):
    """``out[j] = e^{x[j]}`` for ``x`` in ``[−708, 709]``, ~1 ulp, in SIMD-friendly loops."""
    _pow2_reduce(x, poly, scale_bits, m)
    scale = scale_bits.view(np.float64)
    for j in range(m):
        out[j] = scale[j] * (poly[j] + 1.0)


@numba.njit(**_JIT)
def _factors(log_rate, log_pattern):
    """``exp`` of the per-page and per-pattern log factors, clipped to ±340 so that
    products neither overflow nor underflow; whether no clipping happened."""
    exact = bool(np.all(np.abs(log_rate) <= _FACTOR_LOG_LIMIT)) and bool(
        np.all(np.abs(log_pattern) <= _FACTOR_LOG_LIMIT)
    )
    clip = _FACTOR_LOG_LIMIT
    return (
        np.exp(np.minimum(np.maximum(log_rate, -clip), clip)),
        np.exp(np.minimum(np.maximum(log_pattern, -clip), clip)),
        exact,
    )


@numba.njit(**_JIT)
def _scratch():
    """Per-call scratch arrays of one block (in L1 cache)."""
    f = np.empty((6, _BLOCK))
    i = np.empty((1, _BLOCK), np.int64)
    return f, i


@numba.njit(**_JIT)
def _block_terms(log_rate, log_pattern, rate, mult, exact_product, page, pattern, start, m, f, i):
    """Terms ``start .. start+m``: ``f[0] = log λ``, ``f[1] = λ`` (capped near ``e^6.57``
    unless ``exact_product``), ``f[4] = log(1 − e^{−λ})``, ``f[5] = d f[4] / d log λ``.

    ``rate``/``mult`` are ``exp`` of the clipped log factors; ``exact_product`` says no
    factor was clipped, so ``λ = rate·mult`` (else ``λ = exp(log λ)``, vectorised).
    Two branches, both evaluated and selected per term (so the loops vectorise):

    * ``λ ≤ ln 2``: ``log λ + log((1 − e^{−λ})/λ)`` and ``λ/(e^λ − 1)`` by their series
      (this also covers ``λ`` far below ``e^{−20}``, where ``1 − e^{−λ}`` would round);
    * ``λ > ln 2``: ``q = e^{−λ} ≤ ½``, ``log(1 − q) = 2 atanh(−q/(2 − q))`` (or, for
      ``q > 0.29``, ``log(2(1 − q)) − ln 2`` by the same series), and ``λq/(1 − q)``.
    """
    log_lam, lam, neg, miss, value, slope = f[0], f[1], f[2], f[3], f[4], f[5]
    if exact_product:
        for j in range(m):
            p = page[start + j]
            b = pattern[start + j]
            log_lam[j] = log_rate[p] + log_pattern[b]
            lam[j] = rate[p] * mult[b]
    else:
        for j in range(m):
            log_lam[j] = log_rate[page[start + j]] + log_pattern[pattern[start + j]]
            neg[j] = min(max(log_lam[j], -_LOG_LAMBDA_LOW), _LOG_LAMBDA_HIGH)
        exp_into(neg, lam, miss, i[0], m)
    for j in range(m):
        neg[j] = -min(lam[j], _LAMBDA_CAP)
    exp_into(neg, miss, value, i[0], m)
    for j in range(m):
        lj = lam[j]
        q = miss[j] if lj < _LAMBDA_CAP else 0.0
        # log(1 − q): s = −q/(2 − q) keeps the relative accuracy for small q; for q > 0.29
        # (|s| would pass 0.17) 2(1 − q) lies in [1, 1.42], and 1 − q rounds by ≤ 2⁻⁵⁴
        y = 1.0 - q
        big_q = q > 0.29
        # one division: the numerator and denominator are selected, not the quotients
        s = (y - 0.5 if big_q else -q) / (y + 0.5 if big_q else 2.0 - q)
        log_y = 2.0 * s * _horner(_ATANH_OVER_S, s * s) - (_LN2_HI + _LN2_LO if big_q else 0.0)
        small = lj <= _LN2
        z = lj * lj
        value[j] = log_lam[j] + (-0.5 * lj + z * _horner(_LOG1MEXP_SMALL, z)) if small else log_y
        slope[j] = 1.0 - 0.5 * lj + z * _horner(_SLOPE_SMALL, z) if small else lj * q / y


@numba.njit(**_JIT)
def _quiet_lambda(f, exact_product, m):
    """The row of ``f`` holding each term's ``λ`` for its unchanged intervals: ``f[1]``
    when the product is exact, else ``f[2] = exp(min(log λ, 709))`` (``f[1]`` is capped)."""
    if exact_product:
        return f[1]
    for j in range(m):
        f[2, j] = np.exp(min(f[0, j], 709.0))
    return f[2]


@numba.njit(**_JIT)
def binomial_terms_kernel(log_rate, log_pattern, page, pattern, unchanged, detected, constant):
    """Per group: the Binomial log-probability ``v`` and its slope ``s = dv/d log λ``; and
    the gradient of ``Σ v`` (``s`` summed per page and per pattern, in the same pass).

    Parameters
    ----------
    log_rate
        ``(n_pages,)`` log page rates per hour.
    log_pattern
        ``(n_patterns,)`` log exposure of one interval of each pattern (hours, or the
        integrated hour-of-week multiplier).
    page, pattern
        Per group: its page and pattern (``int64``).
    unchanged, detected
        Per group: intervals without ``n − c`` and with ``c`` a detected change (``float64``).
    constant
        Per group: ``log C(n, c)`` (added to ``v``).

    Returns
    -------
    tuple
        ``(v, s, ∂Σv/∂log_rate, ∂Σv/∂log_pattern)``.
    """
    n = page.shape[0]
    values = np.empty(n)
    slopes = np.empty(n)
    grad_rate = np.zeros(log_rate.shape[0])
    grad_pattern = np.zeros(log_pattern.shape[0])
    f, i = _scratch()
    rate, mult, exact_product = _factors(log_rate, log_pattern)
    # groups come sorted by page: a page's slopes are summed in a register and stored
    # once (correct for any order; fastest when sorted)
    current = page[0] if n else 0
    running = 0.0
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        _block_terms(
            log_rate, log_pattern, rate, mult, exact_product, page, pattern, start, m, f, i
        )
        lam = _quiet_lambda(f, exact_product, m)
        for j in range(m):
            k = start + j
            quiet = unchanged[k] * lam[j]
            values[k] = detected[k] * f[4, j] - quiet + constant[k]
            slope = detected[k] * f[5, j] - quiet
            slopes[k] = slope
            if page[k] != current:
                grad_rate[current] += running
                current = page[k]
                running = 0.0
            running += slope
            grad_pattern[pattern[k]] += slope
    if n:
        grad_rate[current] += running
    return values, slopes, grad_rate, grad_pattern


@numba.njit(**_JIT)
def binomial_total_kernel(log_rate, log_pattern, page, pattern, unchanged, detected, constant):
    """``(Σ v, ∂Σv/∂log_rate, ∂Σv/∂log_pattern)`` of :func:`binomial_terms_kernel`
    without storing ``v`` and ``s`` per group (``constant`` is the sum of the constants).

    The log-density and gradient NUTS needs; the per-group stores cost 7% of them on
    ``pages_like(300)`` (the Op is switched to this form by a graph rewrite). The loop is
    written out twice on purpose: a flag tested inside one loop cost 8%, and a shared
    helper taking the gradient arrays made the kernel 4x slower (numba's reference
    counting of array arguments at every call).
    """
    n = page.shape[0]
    total = constant
    grad_rate = np.zeros(log_rate.shape[0])
    grad_pattern = np.zeros(log_pattern.shape[0])
    f, i = _scratch()
    rate, mult, exact_product = _factors(log_rate, log_pattern)
    current = page[0] if n else 0
    running = 0.0
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        _block_terms(
            log_rate, log_pattern, rate, mult, exact_product, page, pattern, start, m, f, i
        )
        lam = _quiet_lambda(f, exact_product, m)
        for j in range(m):
            k = start + j
            quiet = unchanged[k] * lam[j]
            total += detected[k] * f[4, j] - quiet
            slope = detected[k] * f[5, j] - quiet
            if page[k] != current:
                grad_rate[current] += running
                current = page[k]
                running = 0.0
            running += slope
            grad_pattern[pattern[k]] += slope
    if n:
        grad_rate[current] += running
    return total, grad_rate, grad_pattern


@numba.njit(**_JIT)
def scatter_to_factors(weights, page, pattern, n_pages, n_patterns):
    """``(Σ_{k: page_k = p} w_k, Σ_{k: pattern_k = b} w_k)``: the chain rule of
    ``log λ_k = log_rate[page_k] + log_pattern[pattern_k]``.

    Groups sorted by page are summed in a register and stored once per page (correct for
    any order). Plain loops, not ``np.dot``: BLAS threads would contend with nutpie's
    chain threads.
    """
    grad_rate = np.zeros(n_pages)
    grad_pattern = np.zeros(n_patterns)
    n = page.shape[0]
    current = page[0] if n else 0
    running = 0.0
    for k in range(n):
        w = weights[k]
        if page[k] != current:
            grad_rate[current] += running
            current = page[k]
            running = 0.0
        running += w
        grad_pattern[pattern[k]] += w
    if n:
        grad_rate[current] += running
    return grad_rate, grad_pattern


def binomial_terms(
    log_rate: np.ndarray,
    log_pattern: np.ndarray,
    page: np.ndarray,
    pattern: np.ndarray,
    trials: np.ndarray,
    detected: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`binomial_terms_kernel` for any array-likes (with the Binomial constant)."""
    g = BinomialGroups(page, pattern, trials, detected)
    return binomial_terms_kernel(
        np.ascontiguousarray(log_rate, dtype=np.float64),
        np.ascontiguousarray(log_pattern, dtype=np.float64),
        g.page,
        g.pattern,
        g.unchanged,
        g.detected,
        g.constant,
    )


def binomial_log_constant(trials: np.ndarray, detected: np.ndarray) -> np.ndarray:
    """``log C(n, c)``, exactly as ``pm.Binomial`` adds it."""
    n = np.asarray(trials, dtype=np.float64)
    c = np.asarray(detected, dtype=np.float64)
    return gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)


class BinomialGroups:
    """The arrays an Op holds, and their digest (equal digests: equal Ops)."""

    def __init__(self, page, pattern, trials=None, detected=None):
        self.page = np.ascontiguousarray(page, dtype=np.int64)
        self.pattern = np.ascontiguousarray(pattern, dtype=np.int64)
        arrays = [self.page, self.pattern]
        if trials is not None:
            trials = np.asarray(trials, dtype=np.float64)
            self.detected = np.ascontiguousarray(detected, dtype=np.float64)
            self.unchanged = np.ascontiguousarray(trials - self.detected)
            self.constant = binomial_log_constant(trials, self.detected)
            self.constant_total = float(self.constant.sum())
            arrays += [self.unchanged, self.detected]
        if len({len(a) for a in arrays}) != 1:
            raise ValueError("the group arrays must have the same length")
        digest = hashlib.sha256()
        for arr in arrays:
            digest.update(arr.tobytes())
        self.key = digest.hexdigest()
