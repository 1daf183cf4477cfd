"""Fused PyTensor Ops for the interval groups' Binomial log-likelihood (numba, GIL-free).

A group ``k`` holds ``n_k`` intervals of one page with the same exposure, ``c_k`` of which
ended in a detected change. With ``log λ_k = log_rate[page_k] + log_pattern[pattern_k]``
(the integrated rate of one interval: page rate times the exposure of its pattern), its
log-probability is the Binomial's, written stably (``docs/models.md``)::

    v_k = c_k · log(1 − e^{−λ_k}) − (n_k − c_k) · λ_k + log C(n_k, c_k)

On an hourly grid the modulated model has one group per page × hour-of-week bucket with a
change (24,700 on ``pages_like(300)``); as a graph of gathers, elementwise ops and
scatter-adds one log-density + gradient cost 0.75 ms under nutpie's numba backend. Here:

* :class:`BinomialTerms` returns ``v`` (one per group: PyMC's pointwise log-likelihood),
  ``s = dv/d log λ`` and, from the same pass, the gradient of ``Σ v``: ``s`` summed into
  ``∂/∂log_rate`` (per page) and ``∂/∂log_pattern`` (per pattern). Its ``pullback``
  returns that gradient when the cotangent is one number broadcast to every group (the
  log-density is the plain sum: NUTS's case), and otherwise scales ``s`` by the cotangent
  and hands it to :class:`ScatterToFactors` (one numba loop). Measured on
  ``pages_like(300)``: the separate scatter pass cost 19% of a log-density + gradient.
* The kernels are nopython numba and release the GIL: nutpie's chain threads run in
  parallel. (A numpy version serialised two chains on the GIL; ``np.dot`` inside the
  kernel let BLAS threads contend with the chains.)
* ``λ = e^{log_rate}·e^{log_pattern}`` (per-page and per-pattern exponentials, unless a
  factor is beyond ±340 in log), ``e^{−λ}`` by Cody-Waite range reduction and a Taylor
  series with ``2^k`` from exponent bits, ``log(1 − e^{−λ})`` by a Bernoulli series for
  ``λ ≤ ln 2`` and an atanh series above: all arithmetic, in blocks of 256 terms, so LLVM
  vectorises the loops (numba's libm calls do not vectorise). The series' coefficients are
  data (tuples below) evaluated by one Horner loop. Per term: ~1 ulp relative for
  ``λ ≤ ln 2``; above, the inherent ``λ·ε`` of ``e^{−λ}`` (tested against numpy).
* The groups (page, pattern, n − c, c) live on the Ops (equal Ops: equal digests
  of the arrays) and are frozen into the compiled functions, which PyTensor caches on disk.

Per term, with ``a = log λ``: ``log(1 − e^{−λ})`` and its slope ``λ e^{−λ}/(1 − e^{−λ})``.
For tiny ``λ`` the series branch gives ``a + log((1 − e^{−λ})/λ)``, exact where
``1 − e^{−λ}`` would round; values agree with :func:`bayesrate.likelihood.log1mexp_of_log`
to rounding (tested).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import numpy as np

from bayesrate.models import emulator
from bayesrate.models._binomial_kernels import (
    KERNEL_VERSION,
    BinomialGroups,
    binomial_terms_kernel,
    binomial_total_kernel,
    scatter_to_factors,
)

#: part of PyTensor's numba cache key: the kernels' digest and this file's (the compiled
#: functions are closures defined here), so edited kernels or Ops recompile
OP_KERNEL_VERSION = hashlib.sha256(
    (KERNEL_VERSION + Path(__file__).read_text()).encode()
).hexdigest()[:16]


def _as_vector(x):
    import pytensor.tensor as pt

    return pt.as_tensor_variable(x).astype("float64")


def _uniform(cotangent):
    """The scalar ``g`` if ``cotangent`` is ``g`` broadcast to every element (what the
    gradient of ``sum(values)`` passes back), else ``None``."""
    import pytensor.tensor as pt
    from pytensor.scalar.basic import Second
    from pytensor.tensor.basic import Alloc
    from pytensor.tensor.elemwise import Elemwise

    owner = cotangent.owner
    if owner is None:
        return None
    if isinstance(owner.op, Elemwise) and isinstance(owner.op.scalar_op, Second):
        fill = owner.inputs[1]
    elif isinstance(owner.op, Alloc):
        fill = owner.inputs[0]
    else:
        return None
    return pt.squeeze(fill) if all(fill.type.broadcastable) else None


@cache
def _scatter_op_class():
    """``ScatterToFactors`` and its numba kernel (PyTensor imports lazily)."""
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    class ScatterToFactors(Op):
        """``(weights, log_rate, log_pattern) -> (∂/∂log_rate, ∂/∂log_pattern)``.

        ``log_rate`` and ``log_pattern`` give only the output sizes. Holds (page, pattern).
        """

        __props__ = ("key",)

        def __init__(self, groups: BinomialGroups):
            self.groups = groups
            self.key = groups.key

        def make_node(self, weights, log_rate, log_pattern):
            inputs = [_as_vector(weights), _as_vector(log_rate), _as_vector(log_pattern)]
            return Apply(self, inputs, [pt.dvector(), pt.dvector()])

        def perform(self, node, inputs, output_storage):
            weights, log_rate, log_pattern = inputs
            g = self.groups
            out = scatter_to_factors(weights, g.page, g.pattern, len(log_rate), len(log_pattern))
            output_storage[0][0], output_storage[1][0] = out

        def infer_shape(self, node, shapes):
            return [shapes[1], shapes[2]]

        def connection_pattern(self, node):
            return [[True, True], [False, False], [False, False]]

        def pullback(self, inputs, outputs, cotangents):
            raise NotImplementedError("second derivatives of the fused Binomial likelihood")

    @register_funcify_and_cache_key(ScatterToFactors)
    def _numba_scatter(op, node=None, **kwargs):
        page, pattern = op.groups.page, op.groups.pattern

        @numba_njit
        def scatter(weights, log_rate, log_pattern):
            return scatter_to_factors(
                weights, page, pattern, log_rate.shape[0], log_pattern.shape[0]
            )

        return scatter, f"bayesrate-scatter-v{OP_KERNEL_VERSION}-{op.key}"

    return ScatterToFactors


@cache
def _binomial_op_class():
    """``BinomialTerms``, its numba kernels and the sum-only rewrite (lazy imports)."""
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class BinomialTerms(Op):
        """``(log_rate, log_pattern) -> (v, s, ∂Σv/∂log_rate, ∂Σv/∂log_pattern)``.

        ``v`` and ``s = dv/d log λ`` per group (module docstring); with
        ``elementwise=False`` ``v`` is ``[Σ v]`` and ``s`` empty (the rewrite
        :func:`local_summed_binomial_terms` puts that form where only the sum is used).
        The groups are held by the Op, not passed as graph constants: numba would re-box
        24k-element constant arrays into Python objects on every evaluation (0.4 ms on
        ``pages_like(300)``, longer than the computation).
        """

        __props__ = ("key", "elementwise", "emulator_key")

        def __init__(self, groups: BinomialGroups, elementwise: bool = True, emulators=None):
            self.groups = groups
            self.key = groups.key
            self.elementwise = bool(elementwise)
            #: per-page Chebyshev emulators (sum-only form, constant exposures), or None
            self.emulators = emulators
            self.emulator_key = "" if emulators is None else emulators.key

        def make_node(self, log_rate, log_pattern):
            inputs = [_as_vector(log_rate), _as_vector(log_pattern)]
            return Apply(self, inputs, [pt.dvector() for _ in range(4)])

        def perform(self, node, inputs, output_storage):
            g = self.groups
            if self.elementwise:
                outputs = binomial_terms_kernel(
                    *inputs, g.page, g.pattern, g.unchanged, g.detected, g.constant
                )
            elif self.emulators is not None:
                total, grad_rate = self.emulators.total(inputs[0])
                outputs = (np.array([total]), np.zeros(0), grad_rate, np.zeros(len(inputs[1])))
            else:
                total, *grads = binomial_total_kernel(
                    *inputs, g.page, g.pattern, g.unchanged, g.detected, g.constant_total
                )
                outputs = (np.array([total]), np.zeros(0), *grads)
            for storage, value in zip(output_storage, outputs, strict=True):
                storage[0] = value

        def infer_shape(self, node, shapes):
            n = len(self.groups.page) if self.elementwise else 1
            return [(n,), (n if self.elementwise else 0,), shapes[0], shapes[1]]

        def connection_pattern(self, node):
            return [[True] * 4, [True] * 4]

        def pullback(self, inputs, outputs, cotangents):
            if not all(isinstance(c.type, DisconnectedType) for c in cotangents[1:]):
                raise NotImplementedError("second derivatives of the fused Binomial likelihood")
            log_rate, log_pattern = inputs
            scale = _uniform(cotangents[0]) if self.elementwise else cotangents[0].sum()
            if scale is not None:  # the gradient of a plain sum: computed in the forward pass
                return [scale * outputs[2], scale * outputs[3]]
            weights = cotangents[0] * outputs[1]
            return list(_scatter_op_class()(self.groups)(weights, log_rate, log_pattern))

    _register_binomial_terms(BinomialTerms)
    return BinomialTerms


def _register_binomial_terms(binomial_terms_op) -> None:
    """The numba kernels of ``BinomialTerms`` and the rewrite to its sum-only form."""
    from pytensor.graph.basic import Apply
    from pytensor.graph.rewriting.basic import node_rewriter
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key
    from pytensor.tensor.math import Sum
    from pytensor.tensor.rewriting.basic import register_specialize

    @register_funcify_and_cache_key(binomial_terms_op)
    def _numba_binomial_terms(op, node=None, **kwargs):
        g = op.groups
        page, pattern, unchanged, detected = g.page, g.pattern, g.unchanged, g.detected
        constant, constant_total = g.constant, g.constant_total

        @numba_njit
        def terms(log_rate, log_pattern):
            return binomial_terms_kernel(
                log_rate, log_pattern, page, pattern, unchanged, detected, constant
            )

        @numba_njit
        def total(log_rate, log_pattern):
            value, grad_rate, grad_pattern = binomial_total_kernel(
                log_rate, log_pattern, page, pattern, unchanged, detected, constant_total
            )
            return np.array([value]), np.zeros(0), grad_rate, grad_pattern

        # the closures freeze the Op's arrays into the function: they are part of the key
        key = f"bayesrate-binomial-terms-v{OP_KERNEL_VERSION}-{op.key}-{op.elementwise}"
        if op.emulators is not None:
            return _emulated_total_function(op.emulators), f"{key}-{op.emulator_key}"
        return (terms if op.elementwise else total), key

    @node_rewriter([binomial_terms_op])
    def local_summed_binomial_terms(fgraph, node):
        """Where the per-group values are only summed (a log-density), compute the sum in
        the kernel instead of storing every group's value and slope."""
        if not node.op.elementwise or fgraph.clients[node.outputs[1]]:
            return None
        for client, _ in fgraph.clients[node.outputs[0]]:
            if not (isinstance(client, Apply) and isinstance(client.op, Sum)):
                return None
            if client.op.axis not in (None, (0,)):
                return None
        return binomial_terms_op(node.op.groups, elementwise=False, emulators=_emulators_for(node))(
            *node.inputs
        )

    # named after this module, so that two copies of the package (a benchmark against an
    # earlier revision) can register their rewrites side by side
    register_specialize(local_summed_binomial_terms, name=f"{__name__}.summed_binomial_terms")


def _emulators_for(node):
    """Per-page emulators for a sum-only Binomial node whose exposures are constants and
    whose pages have many detected groups (:func:`bayesrate.models.emulator.worth_emulating`);
    ``None`` otherwise."""
    from pytensor.tensor.variable import TensorConstant

    log_pattern = node.inputs[1]
    g = node.op.groups
    if not isinstance(log_pattern, TensorConstant) or len(g.page) == 0:
        return None
    n_pages = int(g.page.max()) + 1
    if not emulator.worth_emulating(n_pages, len(g.page)):
        return None
    log_exposure = np.asarray(log_pattern.data, dtype=np.float64)[g.pattern]
    built = emulator.PageEmulators.build(
        g.page, log_exposure, g.unchanged, g.detected, n_pages, g.constant_total
    )
    return built if built.max_error < emulator.MAX_ERROR else None


def _emulated_total_function(emulators):
    """The numba function of the emulated sum-only form (arrays frozen in the closure)."""
    from pytensor.link.numba.dispatch.basic import numba_njit

    e = emulators
    lo, coef, dcoef, offsets = e.lo, e.coef, e.dcoef, e.offsets
    shift, count, quiet, constant = e.shift, e.count, e.quiet_exposure, e.constant_total

    @numba_njit
    def total(log_rate, log_pattern):
        value, grad_rate = emulator.emulated_total_kernel(
            log_rate, lo, coef, dcoef, offsets, shift, count, quiet, constant
        )
        return np.array([value]), np.zeros(0), grad_rate, np.zeros(log_pattern.shape[0])

    return total


def binomial_logp(log_rate, log_pattern, page, pattern, trials, detected):
    """Per-group Binomial log-probabilities as a PyTensor vector (fused Op, exact gradient).

    Parameters
    ----------
    log_rate, log_pattern
        Tensors: log page rates and log exposures per pattern.
    page, pattern, trials, detected
        Numpy arrays, one entry per group; ``detected`` is the observed value.
    """
    op = _binomial_op_class()(BinomialGroups(page, pattern, trials, detected))
    values, *_ = op(log_rate, log_pattern)
    return values
