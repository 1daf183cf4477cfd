"""A fused PyTensor Op for the changed-interval terms of the modulated likelihood.

``Σ_k c_k · log(1 − e^{−λ_k})`` with ``log λ_k = log_rate[page_k] + log_pattern[pattern_k]``
is the expensive part of :func:`bayesrate.models.likelihood.hour_of_week_loglik`: on an
hourly grid there is one term per (page, hour-of-week bucket) with a change (24,700 of them
on ``pages_like(300)``). As a graph of gathers, elementwise ops and scatter-adds, one
log-density + gradient cost 0.75 ms under nutpie's numba backend; with this Op, which
computes value and gradient in one pass (0.25–0.29 ms), the model's costs 0.36–0.48 ms
(``benchmarks/RESULTS.md`` → Models).

How:

* The Op returns ``(value, ∂/∂log_rate, ∂/∂log_pattern)``; its ``pullback`` reuses the two
  gradient outputs, so a log-density-and-gradient is one evaluation. Second derivatives
  are not implemented (NUTS, ADVI and pathfinder need none).
* The kernel is nopython numba and releases the GIL: nutpie's chain threads run in
  parallel. (A numpy version was as fast on one thread but serialised two chains on the
  GIL; ``np.dot`` inside the kernel let BLAS threads contend with the chains.)
* ``λ = e^{log_rate}·e^{log_pattern}`` (per-page and per-pattern exponentials, unless a
  factor is beyond ±340 in log), ``e^{−λ}`` by Cody-Waite range reduction and a Taylor
  series with ``2^k`` from exponent bits, ``log(1 − e^{−λ})`` by a Bernoulli series for
  ``λ ≤ ln 2`` and an atanh series above: all arithmetic, in blocks of 256 terms, so LLVM
  vectorises the loops (numba's libm calls do not vectorise). Per term: ~1 ulp relative
  for ``λ ≤ ln 2``; above, the inherent ``λ·ε`` of ``e^{−λ}`` (tested against numpy).
* The (page, pattern, count) groups live on the Op (equal Ops: equal digests of the
  arrays) and are frozen into the compiled function, which PyTensor caches on disk.

Per term, with ``λ`` the integrated rate (``docs/science.md`` §1) and ``a = log λ``:
``v = log(1 − e^{−λ})`` and ``dv/da = λ e^{−λ}/(1 − e^{−λ})``. For tiny ``λ`` the series
branch gives ``v = a + log((1 − e^{−λ})/λ)``, exact where ``1 − e^{−λ}`` would round (it
replaces the ``a < −20`` series of :func:`~bayesrate.models.likelihood.log1mexp_of_log`).
Values agree with :func:`~bayesrate.models.likelihood.np_log1mexp_of_log` to rounding, so
the model's posterior is unchanged (tested).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import numba
import numpy as np

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

#: part of PyTensor's numba cache key: a digest of this file, so edited kernels recompile
_KERNEL_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "fastmath": {"contract"}}


@numba.njit(inline="always", **_JIT)
def _expm1_reduced(r):
    """``expm1(r)`` for ``|r| ≤ ln2/2``: Taylor series to ``r^14/14!`` (error < 2e-18)."""
    return r * (
        1.0
        + r
        * (
            1 / 2
            + r
            * (
                1 / 6
                + r
                * (
                    1 / 24
                    + r
                    * (
                        1 / 120
                        + r
                        * (
                            1 / 720
                            + r
                            * (
                                1 / 5040
                                + r
                                * (
                                    1 / 40320
                                    + r
                                    * (
                                        1 / 362880
                                        + r
                                        * (
                                            1 / 3628800
                                            + r
                                            * (
                                                1 / 39916800
                                                + r
                                                * (
                                                    1 / 479001600
                                                    + r * (1 / 6227020800 + r / 87178291200)
                                                )
                                            )
                                        )
                                    )
                                )
                            )
                        )
                    )
                )
            )
        )
    )


@numba.njit(inline="always", **_JIT)
def _two_atanh(s):
    """``2 atanh(s) = log((1+s)/(1−s))`` for ``|s| ≤ 0.1716``: odd series to ``s^21``."""
    z = s * s
    series = 1.0 + z * (
        1 / 3
        + z
        * (
            1 / 5
            + z
            * (
                1 / 7
                + z
                * (
                    1 / 9
                    + z
                    * (1 / 11 + z * (1 / 13 + z * (1 / 15 + z * (1 / 17 + z * (1 / 19 + z / 21)))))
                )
            )
        )
    )
    return 2.0 * s * series


@numba.njit(**_JIT)
def _pow2_reduce(x, poly, scale_bits, m):
    """``x[j] = k·ln2 + r``: ``poly[j] = expm1(r)``, ``scale_bits[j]`` = bits of ``2^k``.

    ``x`` must lie in ``[−708, 709]`` so that ``2^k`` is a normal number.
    """
    for j in range(m):
        kf = np.floor(x[j] * _INV_LN2 + 0.5)
        r = (x[j] - kf * _LN2_HI) - kf * _LN2_LO
        poly[j] = _expm1_reduced(r)
        scale_bits[j] = (np.int64(kf) + 1023) << 52


@numba.njit(**_JIT)
def _exp_into(x, out, poly, scale_bits, m):
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


@numba.njit(inline="always", **_JIT)
def _log1mexp_small(lam):
    """``log((1 − e^{−λ})/λ)`` for ``0 ≤ λ ≤ ln 2``: ``−λ/2 + Σ B_2n λ^2n / (2n (2n)!)``.

    Bernoulli-number series to ``λ^20`` (next term < 1e-19 at ``λ = ln 2``).
    """
    z = lam * lam
    return -0.5 * lam + z * (
        0.041666666666666664
        + z
        * (
            -0.00034722222222222224
            + z
            * (
                5.5114638447971785e-06
                + z
                * (
                    -1.033399470899471e-07
                    + z
                    * (
                        2.08767569878681e-09
                        + z
                        * (
                            -4.403491782239578e-11
                            + z
                            * (
                                9.55895466477477e-13
                                + z
                                * (
                                    -2.1185501852016142e-14
                                    + z * (4.770034475709914e-16 + z * (-1.087434349279031e-17))
                                )
                            )
                        )
                    )
                )
            )
        )
    )


@numba.njit(inline="always", **_JIT)
def _slope_small(lam):
    """``λ/(e^λ − 1) = 1 − λ/2 + Σ B_2n λ^2n/(2n)!`` for ``0 ≤ λ ≤ ln 2`` (to ``λ^20``)."""
    z = lam * lam
    return (
        1.0
        - 0.5 * lam
        + z
        * (
            0.08333333333333333
            + z
            * (
                -0.001388888888888889
                + z
                * (
                    3.306878306878307e-05
                    + z
                    * (
                        -8.267195767195768e-07
                        + z
                        * (
                            2.08767569878681e-08
                            + z
                            * (
                                -5.284190138687493e-10
                                + z
                                * (
                                    1.3382536530684679e-11
                                    + z
                                    * (
                                        -3.3896802963225827e-13
                                        + z * (8.586062056277845e-15 + z * (-2.174868698558062e-16))
                                    )
                                )
                            )
                        )
                    )
                )
            )
        )
    )


@numba.njit(**_JIT)
def _scratch():
    """Per-call scratch arrays of one block (in L1 cache)."""
    f = np.empty((6, _BLOCK))
    i = np.empty((1, _BLOCK), np.int64)
    return f, i


@numba.njit(**_JIT)
def _block_terms(log_rate, log_pattern, rate, mult, exact_product, page, pattern, start, m, f, i):
    """Terms ``start .. start+m``: ``f[4] = log(1 − e^{−λ})``, ``f[5] = d f[4] / d log λ``.

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
        _exp_into(neg, lam, miss, i[0], m)
    for j in range(m):
        neg[j] = -min(lam[j], _LAMBDA_CAP)
    _exp_into(neg, miss, value, i[0], m)
    for j in range(m):
        lj = lam[j]
        q = miss[j] if lj < _LAMBDA_CAP else 0.0
        # log(1 − q): s = −q/(2 − q) keeps the relative accuracy for small q; for q > 0.29
        # (|s| would pass 0.17) 2(1 − q) lies in [1, 1.42], and 1 − q rounds by ≤ 2⁻⁵⁴
        y = 1.0 - q
        big_q = q > 0.29
        # one division: the numerator and denominator are selected, not the quotients
        s = (y - 0.5 if big_q else -q) / (y + 0.5 if big_q else 2.0 - q)
        log_y = _two_atanh(s) - (_LN2_HI + _LN2_LO if big_q else 0.0)
        small = lj <= _LN2
        value[j] = log_lam[j] + _log1mexp_small(lj) if small else log_y
        slope[j] = _slope_small(lj) if small else lj * q / y


@numba.njit(**_JIT)
def changed_loglik_kernel(log_rate, log_pattern, page, pattern, count):
    """Value and gradients of ``Σ_k c_k log(1 − e^{−λ_k})`` (see the module docstring).

    Parameters
    ----------
    log_rate
        ``(n_pages,)`` log base rates per hour.
    log_pattern
        ``(n_patterns,)`` log of each overlap pattern's integrated multiplier.
    page, pattern
        Per changed group: its page and its pattern (``int64``).
    count
        Per changed group: its number of changed intervals (``float64``).

    Returns
    -------
    tuple
        ``(value, d/d log_rate, d/d log_pattern)``.
    """
    f, i = _scratch()
    rate, mult, exact_product = _factors(log_rate, log_pattern)
    total = 0.0
    grad_rate = np.zeros(log_rate.shape[0])
    grad_pattern = np.zeros(log_pattern.shape[0])
    n = page.shape[0]
    # Groups come sorted by page: a page's weights are summed in a register and stored
    # once (correct for any order; fastest when sorted). Plain loops, not np.dot: BLAS
    # threads would contend with nutpie's chain threads.
    current = page[0] if n else 0
    running = 0.0
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        _block_terms(
            log_rate, log_pattern, rate, mult, exact_product, page, pattern, start, m, f, i
        )
        for j in range(m):
            k = start + j
            total += count[k] * f[4, j]
            weight = count[k] * f[5, j]
            if page[k] != current:
                grad_rate[current] += running
                current = page[k]
                running = 0.0
            running += weight
            grad_pattern[pattern[k]] += weight
    if n:
        grad_rate[current] += running
    return total, grad_rate, grad_pattern


@numba.njit(**_JIT)
def _changed_loglik_by_page(log_rate, log_pattern, page, pattern, count):
    n_draws, n_pages = log_rate.shape
    out = np.zeros((n_draws, n_pages))
    f, i = _scratch()
    n = page.shape[0]
    for s in range(n_draws):
        rate, mult, exact_product = _factors(log_rate[s], log_pattern[s])
        for start in range(0, n, _BLOCK):
            m = min(_BLOCK, n - start)
            _block_terms(
                log_rate[s],
                log_pattern[s],
                rate,
                mult,
                exact_product,
                page,
                pattern,
                start,
                m,
                f,
                i,
            )
            for j in range(m):
                out[s, page[start + j]] += count[start + j] * f[4, j]
    return out


def changed_loglik_by_page(
    log_rate: np.ndarray,
    log_pattern: np.ndarray,
    page: np.ndarray,
    pattern: np.ndarray,
    count: np.ndarray,
) -> np.ndarray:
    """Per draw and page, the changed terms' sum (the pointwise log-likelihood's part).

    Parameters
    ----------
    log_rate
        ``(n_draws, n_pages)`` log base rates per hour.
    log_pattern
        ``(n_draws, n_patterns)`` log integrated multipliers per pattern.
    page, pattern, count
        Per changed group, as in :func:`changed_loglik_kernel`.

    Returns
    -------
    numpy.ndarray
        ``(n_draws, n_pages)``.
    """
    return _changed_loglik_by_page(
        np.ascontiguousarray(log_rate, dtype=np.float64),
        np.ascontiguousarray(log_pattern, dtype=np.float64),
        np.ascontiguousarray(page, dtype=np.int64),
        np.ascontiguousarray(pattern, dtype=np.int64),
        np.ascontiguousarray(count, dtype=np.float64),
    )


def changed_loglik_numpy(
    log_rate: np.ndarray,
    log_pattern: np.ndarray,
    page: np.ndarray,
    pattern: np.ndarray,
    count: np.ndarray,
) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`changed_loglik_kernel` for any array-likes (converted to contiguous float/int64)."""
    value, grad_rate, grad_pattern = changed_loglik_kernel(
        np.ascontiguousarray(log_rate, dtype=np.float64),
        np.ascontiguousarray(log_pattern, dtype=np.float64),
        np.ascontiguousarray(page, dtype=np.int64),
        np.ascontiguousarray(pattern, dtype=np.int64),
        np.ascontiguousarray(count, dtype=np.float64),
    )
    return float(value), grad_rate, grad_pattern


@cache
def _op_class():
    """Build the Op class on first use (PyTensor and numba import lazily)."""
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    class ChangedLogLik(Op):
        """``(value, ∂/∂log_rate, ∂/∂log_pattern)`` of the changed-interval terms.

        The groups (page, pattern, count) are held by the Op, not passed as graph
        constants: numba would re-box 24k-element constant arrays into Python objects on
        every evaluation (0.4 ms on ``pages_like(300)``, longer than the computation).
        ``key`` (a digest of the three arrays) makes equal Ops compare equal.
        """

        __props__ = ("key",)

        def __init__(self, page, pattern, count):
            self.page = np.ascontiguousarray(page, dtype=np.int64)
            self.pattern = np.ascontiguousarray(pattern, dtype=np.int64)
            self.count = np.ascontiguousarray(count, dtype=np.float64)
            if not (len(self.page) == len(self.pattern) == len(self.count)):
                raise ValueError("page, pattern and count must have the same length")
            digest = hashlib.sha256()
            for arr in (self.page, self.pattern, self.count):
                digest.update(arr.tobytes())
            self.key = digest.hexdigest()

        def value_and_grad(self, log_rate, log_pattern):
            return changed_loglik_numpy(log_rate, log_pattern, self.page, self.pattern, self.count)

        def make_node(self, log_rate, log_pattern):
            inputs = [
                pt.as_tensor_variable(log_rate).astype("float64"),
                pt.as_tensor_variable(log_pattern).astype("float64"),
            ]
            return Apply(self, inputs, [pt.dscalar(), pt.dvector(), pt.dvector()])

        def perform(self, node, inputs, output_storage):
            value, g_rate, g_pattern = self.value_and_grad(*inputs)
            output_storage[0][0] = np.asarray(value)
            output_storage[1][0] = g_rate
            output_storage[2][0] = g_pattern

        def infer_shape(self, node, shapes):
            return [(), shapes[0], shapes[1]]

        def connection_pattern(self, node):
            return [[True, True, True], [True, True, True]]

        def pullback(self, inputs, outputs, cotangents):
            for g in cotangents[1:]:
                if not isinstance(g.type, DisconnectedType):
                    raise NotImplementedError(
                        "second derivatives of the fused changed-interval likelihood"
                    )
            return [cotangents[0] * outputs[1], cotangents[0] * outputs[2]]

    @register_funcify_and_cache_key(ChangedLogLik)
    def _numba_changed_loglik(op, node=None, **kwargs):
        page, pattern, count = op.page, op.pattern, op.count

        @numba_njit
        def changed_loglik(log_rate, log_pattern):
            value, g_rate, g_pattern = changed_loglik_kernel(
                log_rate, log_pattern, page, pattern, count
            )
            return np.array(value), g_rate, g_pattern

        # the closure freezes the Op's arrays into the function: they are part of the key
        return changed_loglik, f"bayesrate-changed-loglik-v{_KERNEL_VERSION}-{op.key}"

    return ChangedLogLik


def changed_loglik(log_rate, log_pattern, page, pattern, count):
    """The changed-interval terms' total as a PyTensor scalar (fused Op, exact gradient).

    Parameters
    ----------
    log_rate, log_pattern
        Tensors: log base rates per page and log integrated multipliers per pattern.
    page, pattern, count
        Numpy arrays, one entry per changed (page, pattern) group.
    """
    value, _, _ = _op_class()(page, pattern, count)(log_rate, log_pattern)
    return value
