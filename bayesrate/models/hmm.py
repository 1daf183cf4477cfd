"""Forward–backward over each page's path of grid states (the dynamic model's likelihood).

Every page ``p`` has a chain of states on a grid over the columns ``first[p] … last[p]``
(its first and last epochs with data): the initial distribution ``init[p]``, a transition
matrix ``T[domain[p]]`` per step, and a likelihood ``emission[p, e, k]`` of its data in
column ``e`` at state ``k`` (scaled; the scale is a constant). Steps after ``last[p]`` have
no data, so they multiply the likelihood by 1 (rows of ``T`` sum to 1) and are skipped.

:func:`paths_logp_grad` returns ``Σ_p log Σ_paths`` and its exact gradient with respect to
``init`` and ``T`` (scaled forward and backward recursions):

- ``∂ log L / ∂ init[p, k] = b_first(k) β̂_first(k) / c_first``
- ``∂ log L / ∂ T[d, i, j] = Σ_{p ∈ d} Σ_e α̂_{e−1}(i) b_e(j) β̂_e(j) / c_e``

A transition matrix is used within its band (entries below ``BAND_TOLERANCE`` times the
row's largest are skipped, a relative change below 1e-15 per step), so a step costs
``K × band`` rather than ``K²``. :class:`PathsLogp` is the PyTensor Op (numba-compiled for
nutpie, the same kernel in Python mode); :func:`filter_last` the filtered distribution in a
given column, for posterior draws.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

#: transition entries below this fraction of their row's largest are not used
BAND_TOLERANCE = 1e-17
#: part of PyTensor's numba cache key: a digest of this file, so edited kernels recompile
_KERNEL_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _njit(fn):
    import numba

    return numba.njit(cache=True, nogil=True)(fn)


def _kernels():
    """Compile the numba kernels once (numba is imported only when a dynamic model is used)."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS

    @_njit
    def bands(transitions):
        """Per domain and row: the first and last column with a used entry."""
        n_domains, k, _ = transitions.shape
        lo = np.zeros((n_domains, k), dtype=np.int64)
        hi = np.zeros((n_domains, k), dtype=np.int64)
        for d in range(n_domains):
            for i in range(k):
                top = 0.0
                for j in range(k):
                    top = max(top, transitions[d, i, j])
                a, b = k, -1
                for j in range(k):
                    if transitions[d, i, j] > BAND_TOLERANCE * top:
                        a = min(a, j)
                        b = max(b, j)
                lo[d, i], hi[d, i] = a, b + 1
        return lo, hi

    @_njit
    def forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms):
        """Scaled forward pass of page ``p`` into ``alphas[first:last+1]``, ``norms``."""
        k = init.shape[1]
        f, end, d = first[p], last[p], domain[p]
        total = 0.0
        for j in range(k):
            alphas[f, j] = init[p, j] * emission[p, f, j]
            total += alphas[f, j]
        norms[f] = total
        for j in range(k):
            alphas[f, j] /= total
        for e in range(f + 1, end + 1):
            for j in range(k):
                alphas[e, j] = 0.0
            for i in range(k):
                a = alphas[e - 1, i]
                if a == 0.0:
                    continue
                for j in range(lo[d, i], hi[d, i]):
                    alphas[e, j] += a * transitions[d, i, j]
            total = 0.0
            for j in range(k):
                alphas[e, j] *= emission[p, e, j]
                total += alphas[e, j]
            norms[e] = total
            for j in range(k):
                alphas[e, j] /= total

    @_njit
    def logp_grad(init, transitions, emission, domain, first, last):
        n_pages, n_epochs, k = emission.shape
        lo, hi = bands(transitions)
        alphas = np.empty((max(n_epochs, 1), k))
        norms = np.empty(max(n_epochs, 1))
        beta = np.empty(k)
        weight = np.empty(k)
        grad_init = np.zeros_like(init)
        grad_t = np.zeros_like(transitions)
        logp = 0.0
        for p in range(n_pages):
            f, end, d = first[p], last[p], domain[p]
            if f >= n_epochs:
                continue
            forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
            for e in range(f, end + 1):
                logp += np.log(norms[e])
            for j in range(k):
                beta[j] = 1.0
            for e in range(end, f, -1):
                for j in range(k):
                    weight[j] = emission[p, e, j] * beta[j] / norms[e]
                for i in range(k):
                    a = alphas[e - 1, i]
                    s = 0.0
                    for j in range(lo[d, i], hi[d, i]):
                        grad_t[d, i, j] += a * weight[j]
                        s += transitions[d, i, j] * weight[j]
                    beta[i] = s
            for j in range(k):
                grad_init[p, j] = emission[p, f, j] * beta[j] / norms[f]
        return logp, grad_init, grad_t

    @_njit
    def filter_at(init, transitions, emission, domain, first, last, column):
        """``(pages, K)`` each page's distribution in ``column`` (≥ its last) given its data."""
        n_pages, n_epochs, k = emission.shape
        lo, hi = bands(transitions)
        alphas = np.empty((max(n_epochs, 1), k))
        norms = np.empty(max(n_epochs, 1))
        out = np.empty((n_pages, k))
        state = np.empty(k)
        nxt = np.empty(k)
        for p in range(n_pages):
            d = domain[p]
            if first[p] >= n_epochs:
                out[p] = init[p]
                continue
            forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
            for j in range(k):
                state[j] = alphas[last[p], j]
            for _ in range(last[p], column):
                for j in range(k):
                    nxt[j] = 0.0
                for i in range(k):
                    for j in range(lo[d, i], hi[d, i]):
                        nxt[j] += state[i] * transitions[d, i, j]
                for j in range(k):
                    state[j] = nxt[j]
            out[p] = state
        return out

    _KERNELS = (logp_grad, filter_at)
    return _KERNELS


_KERNELS = None


def _chain_arrays(init, transitions, emission, domain, first, last) -> tuple:
    """The kernels' arguments as contiguous float64 / int64 arrays."""
    floats = (np.ascontiguousarray(a, dtype=np.float64) for a in (init, transitions, emission))
    ints = (np.ascontiguousarray(a, dtype=np.int64) for a in (domain, first, last))
    return (*floats, *ints)


def paths_logp_grad(init, transitions, emission, domain, first, last):
    """``(log L, ∂/∂init, ∂/∂T)``: see the module docstring."""
    return _kernels()[0](*_chain_arrays(init, transitions, emission, domain, first, last))


def filter_last(init, transitions, emission, domain, first, last, column: int) -> np.ndarray:
    """``(pages, K)`` every page's state distribution in ``column`` given all its data."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return _kernels()[1](*arrays, int(column))


def paths_logp(init, transitions, emission, domain, first, last):
    """The PyTensor scalar ``Σ_p log Σ_paths`` (gradient with respect to ``init`` and
    ``transitions``; the data arrays are constants)."""
    import pytensor.tensor as pt

    constants = [
        pt.constant(np.ascontiguousarray(emission, dtype=np.float64)),
        pt.constant(np.asarray(domain, dtype=np.int64)),
        pt.constant(np.asarray(first, dtype=np.int64)),
        pt.constant(np.asarray(last, dtype=np.int64)),
    ]
    op = _op()
    return op(pt.as_tensor_variable(init), pt.as_tensor_variable(transitions), *constants)[0]


_OP = None


def _op():
    """The Op class, defined (and registered with the numba backend) on first use."""
    global _OP
    if _OP is not None:
        return _OP
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_type
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    class PathsLogp(Op):
        """Outputs ``(log L, ∂ log L/∂init, ∂ log L/∂T)``; the gradient uses the last two."""

        __props__ = ()

        def make_node(self, init, transitions, emission, domain, first, last):
            inputs = [init, transitions, emission, domain, first, last]
            outputs = [pt.dscalar(), init.type(), transitions.type()]
            return Apply(self, inputs, outputs)

        def perform(self, node, inputs, output_storage):
            logp, grad_init, grad_t = paths_logp_grad(*inputs)
            output_storage[0][0] = np.asarray(logp)
            output_storage[1][0] = grad_init
            output_storage[2][0] = grad_t

        def grad(self, inputs, output_grads):
            _, grad_init, grad_t = self(*inputs)
            g = output_grads[0]
            return [g * grad_init, g * grad_t, *(disconnected_type() for _ in inputs[2:])]

        def connection_pattern(self, node):
            return [[True, True, True], [True, True, True], *([[False] * 3] * 4)]

    kernel = _kernels()[0]

    @register_funcify_and_cache_key(PathsLogp)
    def _numba_paths_logp(op, node=None, **kwargs):
        @numba_njit
        def paths(init, transitions, emission, domain, first, last):
            logp, grad_init, grad_t = kernel(init, transitions, emission, domain, first, last)
            return np.asarray(logp), grad_init, grad_t

        return paths, f"bayesrate-paths-logp-v{_KERNEL_VERSION}"

    _OP = PathsLogp()
    return _OP
