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
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesrate.models import _hmm_kernels as kernels
from bayesrate.models._hmm_kernels import BAND_TOLERANCE  # noqa: F401 (documented here)

if TYPE_CHECKING:
    from bayesrate.likelihood import CensoredGroups

#: part of PyTensor's numba cache key: a digest of this file and the kernels', so edited
#: kernels recompile
OP_KERNEL_VERSION = hashlib.sha256(
    Path(__file__).read_bytes() + Path(kernels.__file__).read_bytes()
).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class ShiftedEmission:
    """Cells whose log-rate is the grid shifted by their group's amount (the dynamic shocks
    model's shared (domain, epoch) effects), plus their group's added rate (the dynamic
    mass-edit model's edits; none by default): at state ``k`` a cell of group ``g`` has the
    rate ``exp(grid[k] + shift[g]) + exp(added[g])``.

    Per cell the censored Binomial log-likelihood is ``−λU + Σ c·log(1 − e^{−λτ})`` over its
    unchanged exposure ``U`` and its changed groups (interval length ``τ``, ``c`` changes).
    The rates and ``log(1 − e^{−λτ})`` depend on the group, ``τ`` and the state only, so
    they are evaluated once per (group, τ, state) by
    :func:`bayesrate.models.fused.binomial_terms_kernel` (its "page" is ``group·K + k``)
    and summed into the cells with their counts.

    Attributes
    ----------
    grid
        ``(K,)`` log-rates per hour.
    term_row, term_tau
        Per distinct (group, τ) of the changed groups (a "key") and grid state ``k``: the
        rate row ``group·K + k`` and the index of ``τ`` in ``log_tau``.
    log_tau
        The distinct log interval lengths.
    entry_start, entry_key, entry_count
        Per cell ``c``: its changed groups ``entry_start[c] … entry_start[c + 1]``, each a
        key and its number of changed intervals.
    unchanged
        ``U`` per cell (hours).
    cell_group, n_groups
        Each cell's group (the index into ``shift`` and ``added``), of ``n_groups``.
    cell_page, cell_epoch, n_pages, n_epochs
        Where each cell sits in the ``(pages, epochs, K)`` emission table.
    """

    grid: np.ndarray
    term_row: np.ndarray
    term_tau: np.ndarray
    log_tau: np.ndarray
    entry_start: np.ndarray
    entry_key: np.ndarray
    entry_count: np.ndarray
    unchanged: np.ndarray
    cell_group: np.ndarray
    n_groups: int
    cell_page: np.ndarray
    cell_epoch: np.ndarray
    n_pages: int
    n_epochs: int

    @classmethod
    def from_cells(
        cls,
        groups: CensoredGroups,
        cell_page,
        cell_epoch,
        n_pages: int,
        n_epochs: int,
        grid: np.ndarray,
        cell_group=None,
        n_groups: int | None = None,
    ) -> ShiftedEmission:
        """From the cells' sufficient statistics (one "page" of ``groups`` per cell) and
        each cell's group (default: every cell its own group)."""
        n_cells = len(groups.unchanged)
        if cell_group is None:
            cell_group, n_groups = np.arange(n_cells), n_cells
        cell_group = np.asarray(cell_group, dtype=np.int64)
        if len(cell_group) != n_cells or n_groups is None:
            raise ValueError("give one group per cell and the number of groups")
        if n_cells and (cell_group.min() < 0 or cell_group.max() >= n_groups):
            raise ValueError(f"cell groups must lie in 0 … {n_groups - 1}")
        log_tau, tau_code = np.unique(groups.group_log_exposure, return_inverse=True)
        tau_code = tau_code.reshape(-1)
        entry_group = cell_group[groups.group_page]
        keys, entry_key = np.unique(
            entry_group * max(len(log_tau), 1) + tau_code, return_inverse=True
        )
        key_row, key_tau = np.divmod(keys, max(len(log_tau), 1))
        k = len(grid)
        per_cell = np.bincount(groups.group_page, minlength=n_cells)
        return cls(
            grid=np.ascontiguousarray(grid, dtype=np.float64),
            term_row=_as_int((key_row[:, None] * k + np.arange(k)).reshape(-1)),
            term_tau=_as_int(np.repeat(key_tau, k)),
            log_tau=np.ascontiguousarray(log_tau, dtype=np.float64),
            entry_start=_as_int(np.concatenate([[0], np.cumsum(per_cell)])),
            entry_key=_as_int(entry_key.reshape(-1)),
            entry_count=np.ascontiguousarray(groups.group_count, dtype=np.float64),
            unchanged=np.ascontiguousarray(groups.unchanged, dtype=np.float64),
            cell_group=cell_group,
            n_groups=int(n_groups),
            cell_page=_as_int(cell_page),
            cell_epoch=_as_int(cell_epoch),
            n_pages=int(n_pages),
            n_epochs=int(n_epochs),
        )

    @property
    def constants(self) -> tuple:
        return (
            self.grid,
            self.term_row,
            self.term_tau,
            self.log_tau,
            self.entry_start,
            self.entry_key,
            self.entry_count,
            self.unchanged,
            self.cell_group,
            self.cell_page,
            self.cell_epoch,
        )

    def tables(
        self, shift: np.ndarray, added: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(emission, log-slopes, log scale)`` at ``shift`` and ``added`` (one per group;
        no added rate if ``None``): the emission table scaled per cell by its largest entry
        (the scales' logs summed per page), and ``d log emission / d shift`` and ``/ d
        added`` of each cell's group (``(2, pages, epochs, K)``)."""
        shift = self._per_group(shift, "shift")
        added = no_added(len(shift)) if added is None else self._per_group(added, "added")
        return kernels.shifted_tables(
            self.grid, shift, added, *self.constants[1:], self.n_pages, self.n_epochs
        )

    def _per_group(self, values, name: str) -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        if len(values) != self.n_groups:
            raise ValueError(
                f"{name} needs one value per group ({self.n_groups}), got {len(values)}"
            )
        return values


def _as_int(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def no_added(n_groups: int) -> np.ndarray:
    """The added log-rates of ``n_groups`` groups without an added rate (``−inf``)."""
    return np.full(n_groups, -np.inf)


def _chain_arrays(init, transitions, emission, domain, first, last) -> tuple:
    """The kernels' arguments as contiguous float64 / int64 arrays."""
    floats = (np.ascontiguousarray(a, dtype=np.float64) for a in (init, transitions, emission))
    ints = (np.ascontiguousarray(a, dtype=np.int64) for a in (domain, first, last))
    return (*floats, *ints)


_NO_SLOPE = np.zeros((0, 0, 0, 0))


def paths_logp_grad(init, transitions, emission, domain, first, last):
    """``(log L, ∂/∂init, ∂/∂T)``: see the module docstring."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return kernels.logp_grad(*arrays, _NO_SLOPE)[:3]


def shifted_paths_logp_grad(
    init, transitions, shift, emission: ShiftedEmission, domain, first, last, added=None
):
    """``(log L, ∂/∂init, ∂/∂T, ∂/∂shift, ∂/∂added)`` with each cell's log-rates shifted by
    its group's ``shift`` and its group's rate ``exp(added)`` added (none if ``None``)."""
    init, transitions, _, domain, first, last = _chain_arrays(
        init, transitions, _NO_SLOPE, domain, first, last
    )
    shift = emission._per_group(shift, "shift")
    added = no_added(len(shift)) if added is None else emission._per_group(added, "added")
    return kernels.shifted_logp_grad(
        init, transitions, shift, added, *emission.constants, domain, first, last
    )


def filter_last(init, transitions, emission, domain, first, last, column: int) -> np.ndarray:
    """``(pages, K)`` every page's state distribution in ``column`` given all its data."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return kernels.filter_at(*arrays, int(column))


def page_log_likelihoods(init, transitions, emission, domain, first, last) -> np.ndarray:
    """``(pages,)`` each page's ``log Σ_paths`` of the (scaled) emission table."""
    return kernels.page_logps(*_chain_arrays(init, transitions, emission, domain, first, last))


def sample_paths(init, transitions, emission, domain, first, last, rng) -> np.ndarray:
    """``(pages, epochs)`` grid states: one draw of each page's path given its data
    (forward filtering, backward sampling), −1 outside its first … last columns."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return kernels.sample_paths(*arrays, rng.random(np.shape(emission)[:2]))


def paths_logp(init, transitions, emission, domain, first, last, shift=None, added=None):
    """The PyTensor scalar ``Σ_p log Σ_paths`` (gradient with respect to ``init``,
    ``transitions``, ``shift`` and ``added``; the data are constants). ``emission`` is the
    ``(pages, epochs, K)`` table, or with ``shift`` (one per group of cells) a
    :class:`ShiftedEmission`, optionally with added log-rates ``added`` (one per group)."""
    import pytensor.tensor as pt

    if added is not None and shift is None:
        raise ValueError("added rates need a ShiftedEmission and its shift")
    index = [np.asarray(a, dtype=np.int64) for a in (domain, first, last)]
    free = [pt.as_tensor_variable(x) for x in (init, transitions, shift, added) if x is not None]
    if shift is None:
        data = [np.ascontiguousarray(emission, dtype=np.float64)]
    else:  # without added rates, their −inf is the first constant (the kernel's order)
        free[2:] = [x.flatten() for x in free[2:]]
        data = [*([] if added is not None else [no_added(emission.n_groups)]),
                *emission.constants]  # fmt: skip
    op = _op(len(free))
    return op(*free, *(pt.constant(a) for a in (*data, *index)))[0]


def page_paths_logp(init, transitions, emission, domain, first, last):
    """The PyTensor vector of each page's ``log Σ_paths`` (:func:`paths_logp`'s terms;
    gradient with respect to ``init`` and ``transitions``, the data constants). The
    gradient of a weighted sum of the terms is exact for ``init`` (each page's own row);
    ``transitions`` are shared by a domain's pages, and the kernel sums their terms'
    gradients, so the weights must be equal (the model's log density, their sum: checked
    when the gradient is evaluated)."""
    import pytensor.tensor as pt

    index = [np.asarray(a, dtype=np.int64) for a in (domain, first, last)]
    free = [pt.as_tensor_variable(x) for x in (init, transitions)]
    data = np.ascontiguousarray(emission, dtype=np.float64)
    return _page_op()(*free, *(pt.constant(a) for a in (data, *index)))[0]


@cache
def page_value_and_gradient_op():
    """The base of an Op whose first ``n_free`` inputs are free and the rest constants, and
    whose outputs are a vector of per-page log-likelihood terms and the gradient of their
    sum with respect to each free input (computed together by a kernel). A free input
    whose leading axis is the page (``shared[i]`` False) has rows that only their page's
    term depends on, so the pullback of any weights ``g`` is ``g[p]·row p``, exact; a
    shared input's is exact for equal weights only (the sum), which the pullback checks."""
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_type
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.raise_op import Assert

    equal_weights = Assert("the pages' terms are differentiated as their sum only")

    class PageValueAndGradientOp(Op):
        n_free: int
        shared: tuple[bool, ...]

        def make_node(self, *inputs):
            outputs = [pt.dvector(), *(x.type() for x in inputs[: self.n_free])]
            return Apply(self, list(inputs), outputs)

        def pullback(self, inputs, outputs, output_grads):
            g = output_grads[0]
            grads = []
            for shared, x in zip(self.shared, outputs[1:], strict=True):
                if shared:
                    uniform = equal_weights(g[0], pt.all(pt.eq(g, g[0])))
                    grads.append(uniform * x)
                else:
                    grads.append(pt.shape_padright(g, x.ndim - 1) * x)
            n_const = len(inputs) - self.n_free
            return [*grads, *(disconnected_type() for _ in range(n_const))]

        def connection_pattern(self, node):
            n_out = self.n_free + 1
            n_const = len(node.inputs) - self.n_free
            return [[True] * n_out] * self.n_free + [[False] * n_out] * n_const

    return PageValueAndGradientOp


_PAGE_OP = None


def _page_op():
    """:func:`page_paths_logp`'s Op (defined and registered on first use)."""
    global _PAGE_OP
    if _PAGE_OP is not None:
        return _PAGE_OP
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    class PagePathsLogp(page_value_and_gradient_op()):
        """Outputs ``(each page's log Σ_paths, ∂ Σ/∂init, ∂ Σ/∂T)``. Free inputs
        ``init`` (per page) and ``transitions`` (shared); then the constants emission,
        domain, first, last."""

        __props__ = ()
        n_free = 2
        shared = (False, True)

        def perform(self, node, inputs, output_storage):
            for i, value in enumerate(kernels.page_logp_grad(*inputs)):
                output_storage[i][0] = value

    page_logp_grad = kernels.page_logp_grad

    @register_funcify_and_cache_key(PagePathsLogp)
    def _numba_page_paths_logp(op, node=None, **kwargs):
        @numba_njit
        def paths(*args):
            return page_logp_grad(*args)

        return paths, f"bayesrate-page-paths-logp-v{OP_KERNEL_VERSION}"

    _PAGE_OP = PagePathsLogp()
    return _PAGE_OP


_OPS: dict[int, object] = {}


def _op(n_free: int):
    """The Op (defined and registered with the numba backend on first use): outputs the
    log-likelihood and its gradient with respect to the ``n_free`` free inputs (``init``,
    ``transitions``, then ``shift`` and ``added`` on a :class:`ShiftedEmission`)."""
    if n_free in _OPS:
        return _OPS[n_free]
    if not _OPS:
        _register()
    _OPS[n_free] = _PATHS_LOGP(n_free)
    return _OPS[n_free]


_PATHS_LOGP = None


@cache
def value_and_gradient_op():
    """The base of an Op whose first ``n_free`` inputs are free and the rest constants, and
    whose outputs are a scalar log-likelihood and its gradient with respect to each free
    input (computed together by a kernel; the pullback scales them). Subclasses set
    ``n_free`` and define ``perform`` (PyTensor imports lazily)."""
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_type
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class ValueAndGradientOp(Op):
        n_free: int

        def make_node(self, *inputs):
            outputs = [pt.dscalar(), *(x.type() for x in inputs[: self.n_free])]
            return Apply(self, list(inputs), outputs)

        def pullback(self, inputs, outputs, output_grads):
            g = output_grads[0]
            n_const = len(inputs) - self.n_free
            return [*(g * x for x in outputs[1:]), *(disconnected_type() for _ in range(n_const))]

        def connection_pattern(self, node):
            n_out = self.n_free + 1
            n_const = len(node.inputs) - self.n_free
            return [[True] * n_out] * self.n_free + [[False] * n_out] * n_const

    return ValueAndGradientOp


def _register() -> None:
    global _PATHS_LOGP
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayesrate.models.fused import OP_KERNEL_VERSION as FUSED_VERSION

    class PathsLogp(value_and_gradient_op()):
        """Outputs ``(log L, ∂ log L/∂x for each free input x)``; the gradient uses the
        latter. Free inputs: ``init``, ``transitions`` (then ``shift``, then ``added``);
        then constants (in the kernels' order: with ``shift`` but not ``added``, the
        constant ``−inf`` added rates first)."""

        __props__ = ("n_free",)

        def __init__(self, n_free: int):
            if n_free not in (2, 3, 4):
                raise ValueError("PathsLogp takes 2, 3 or 4 free inputs")
            self.n_free = int(n_free)

        def perform(self, node, inputs, output_storage):
            if self.n_free > 2:
                results = kernels.shifted_logp_grad(*inputs)[: self.n_free + 1]
            else:
                results = kernels.logp_grad(*inputs, _NO_SLOPE)[:3]
            output_storage[0][0] = np.asarray(results[0])
            for i, value in enumerate(results[1:], start=1):
                output_storage[i][0] = value

    logp_grad, shifted_logp_grad = kernels.logp_grad, kernels.shifted_logp_grad

    @register_funcify_and_cache_key(PathsLogp)
    def _numba_paths_logp(op, node=None, **kwargs):
        if op.n_free == 4:

            @numba_njit
            def paths(*args):
                logp, grad_init, grad_t, grad_shift, grad_added = shifted_logp_grad(*args)
                return np.asarray(logp), grad_init, grad_t, grad_shift, grad_added

        elif op.n_free == 3:

            @numba_njit
            def paths(*args):
                logp, grad_init, grad_t, grad_shift, _ = shifted_logp_grad(*args)
                return np.asarray(logp), grad_init, grad_t, grad_shift

        else:
            no_slope = _NO_SLOPE

            @numba_njit
            def paths(*args):
                logp, grad_init, grad_t, _ = logp_grad(*args, no_slope)
                return np.asarray(logp), grad_init, grad_t

        key = f"bayesrate-paths-logp-v{OP_KERNEL_VERSION}-{FUSED_VERSION}-{op.n_free}"
        return paths, key

    _PATHS_LOGP = PathsLogp
