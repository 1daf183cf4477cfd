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

if TYPE_CHECKING:
    from bayesrate.likelihood import CensoredGroups

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
    def posterior_slopes(alphas, beta, slope, p, e, out):
        """``out[m, p, e] = Σ_k γ_e(k) slope[m, p, e, k]``, ``γ_e = α̂_e β̂_e`` the state's
        posterior, for every table ``m`` of slopes."""
        for m in range(slope.shape[0]):
            total = 0.0
            for j in range(alphas.shape[1]):
                total += alphas[e, j] * beta[j] * slope[m, p, e, j]
            out[m, p, e] = total

    @_njit
    def logp_grad(init, transitions, emission, domain, first, last, slope):
        n_pages, n_epochs, k = emission.shape
        lo, hi = bands(transitions)
        alphas = np.empty((max(n_epochs, 1), k))
        norms = np.empty(max(n_epochs, 1))
        beta = np.empty(k)
        weight = np.empty(k)
        grad_init = np.zeros_like(init)
        grad_t = np.zeros_like(transitions)
        shifted = slope.shape[0] > 0
        grad_shift = np.zeros((slope.shape[0], n_pages if shifted else 0, n_epochs))
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
                if shifted:
                    posterior_slopes(alphas, beta, slope, p, e, grad_shift)
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
            if shifted:
                posterior_slopes(alphas, beta, slope, p, f, grad_shift)
        return logp, grad_init, grad_t, grad_shift

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

    @_njit
    def page_logps(init, transitions, emission, domain, first, last):
        """``(pages,)`` each page's ``log Σ_paths`` (of the scaled emission table)."""
        n_pages, n_epochs, k = emission.shape
        lo, hi = bands(transitions)
        alphas = np.empty((max(n_epochs, 1), k))
        norms = np.empty(max(n_epochs, 1))
        out = np.zeros(n_pages)
        for p in range(n_pages):
            if first[p] >= n_epochs:
                continue
            forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
            for e in range(first[p], last[p] + 1):
                out[p] += np.log(norms[e])
        return out

    @_njit
    def pick(weights, u):
        """The index at which the running sum of ``weights`` first exceeds ``u`` times
        their total (the last positive one if rounding leaves none)."""
        total = 0.0
        for j in range(weights.shape[0]):
            total += weights[j]
        target, running, chosen = u * total, 0.0, -1
        for j in range(weights.shape[0]):
            if weights[j] > 0.0:
                chosen = j
                running += weights[j]
                if running > target:
                    return j
        return chosen

    @_njit
    def sample_paths(init, transitions, emission, domain, first, last, uniforms):
        """``(pages, epochs)`` one path per page from its posterior given its data (forward
        filtering, backward sampling; ``uniforms`` one per page and column); −1 outside
        each page's columns ``first … last``."""
        n_pages, n_epochs, k = emission.shape
        lo, hi = bands(transitions)
        alphas = np.empty((max(n_epochs, 1), k))
        norms = np.empty(max(n_epochs, 1))
        weights = np.empty(k)
        states = np.full((n_pages, n_epochs), -1, dtype=np.int64)
        for p in range(n_pages):
            f, end, d = first[p], last[p], domain[p]
            if f >= n_epochs:
                continue
            forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
            states[p, end] = pick(alphas[end], uniforms[p, end])
            for e in range(end - 1, f - 1, -1):
                j = states[p, e + 1]
                for i in range(k):
                    weights[i] = alphas[e, i] * transitions[d, i, j]
                states[p, e] = pick(weights, uniforms[p, e])
        return states

    from bayesrate.models.fused import binomial_terms_kernel

    @_njit
    def shifted_tables(
        grid,
        shift,
        added,
        term_row,
        term_tau,
        log_tau,
        entry_start,
        entry_key,
        entry_count,
        unchanged,
        cell_group,
        cell_page,
        cell_epoch,
        n_pages,
        n_epochs,
    ):
        """Emission table (scaled per cell), its log-slopes with respect to the cell's
        group's shift and added log-rate (``(2, pages, epochs, K)``), and each page's sum of
        the cells' log scales, at rates ``exp(grid[k] + shift[g]) + exp(added[g])`` (see
        :class:`ShiftedEmission`). The exponentials and ``log(1 − e^{−λτ})`` are evaluated
        once per (group, state) and (group, τ, state), not per cell."""
        n_groups, k = shift.shape[0], grid.shape[0]
        log_rate = np.empty(n_groups * k)
        rate = np.empty(n_groups * k)
        own_share = np.empty(n_groups * k)
        for g in range(n_groups):
            for j in range(k):
                own = grid[j] + shift[g]  # finite, so top is
                top = max(own, added[g])
                total = top + np.log(np.exp(own - top) + np.exp(added[g] - top))
                log_rate[g * k + j] = total
                rate[g * k + j] = np.exp(total)
                own_share[g * k + j] = np.exp(own - total)
        n_terms = term_row.shape[0]
        values, slopes, _, _ = binomial_terms_kernel(
            log_rate,
            log_tau,
            term_row,
            term_tau,
            np.zeros(n_terms),
            np.ones(n_terms),
            np.zeros(n_terms),
        )
        emission = np.ones((n_pages, n_epochs, k))
        slope = np.zeros((2, n_pages, n_epochs, k))
        scale = np.zeros(n_pages)
        ll = np.empty(k)
        sl = np.empty(k)
        for c in range(cell_page.shape[0]):
            p, e, base = cell_page[c], cell_epoch[c], cell_group[c] * k
            for j in range(k):
                quiet = rate[base + j] * unchanged[c]
                ll[j] = -quiet
                sl[j] = -quiet
            for t in range(entry_start[c], entry_start[c + 1]):
                at, n = entry_key[t] * k, entry_count[t]
                for j in range(k):
                    ll[j] += n * values[at + j]
                    sl[j] += n * slopes[at + j]
            top = ll[0]
            for j in range(1, k):
                top = max(top, ll[j])
            scale[p] += top
            for j in range(k):
                emission[p, e, j] = np.exp(ll[j] - top)
                w = own_share[base + j]
                slope[0, p, e, j] = sl[j] * w
                slope[1, p, e, j] = sl[j] * (1.0 - w)
        return emission, slope, scale

    @_njit
    def shifted_logp_grad(
        init,
        transitions,
        shift,
        added,
        grid,
        term_row,
        term_tau,
        log_tau,
        entry_start,
        entry_key,
        entry_count,
        unchanged,
        cell_group,
        cell_page,
        cell_epoch,
        domain,
        first,
        last,
    ):
        n_pages = first.shape[0]
        n_epochs = cell_epoch.max() + 1 if cell_epoch.shape[0] else 0
        emission, slope, scale = shifted_tables(
            grid,
            shift,
            added,
            term_row,
            term_tau,
            log_tau,
            entry_start,
            entry_key,
            entry_count,
            unchanged,
            cell_group,
            cell_page,
            cell_epoch,
            n_pages,
            n_epochs,
        )
        logp, grad_init, grad_t, grad_cells = logp_grad(
            init, transitions, emission, domain, first, last, slope
        )
        grad_shift = np.zeros(shift.shape[0])
        grad_added = np.zeros(shift.shape[0])
        for c in range(cell_page.shape[0]):
            g = cell_group[c]
            grad_shift[g] += grad_cells[0, cell_page[c], cell_epoch[c]]
            grad_added[g] += grad_cells[1, cell_page[c], cell_epoch[c]]
        return logp + scale.sum(), grad_init, grad_t, grad_shift, grad_added

    _KERNELS = (logp_grad, filter_at, shifted_tables, shifted_logp_grad, page_logps, sample_paths)
    return _KERNELS


_KERNELS = None


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
        return _kernels()[2](
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
    return _kernels()[0](*arrays, _NO_SLOPE)[:3]


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
    return _kernels()[3](init, transitions, shift, added, *emission.constants, domain, first, last)


def filter_last(init, transitions, emission, domain, first, last, column: int) -> np.ndarray:
    """``(pages, K)`` every page's state distribution in ``column`` given all its data."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return _kernels()[1](*arrays, int(column))


def page_log_likelihoods(init, transitions, emission, domain, first, last) -> np.ndarray:
    """``(pages,)`` each page's ``log Σ_paths`` of the (scaled) emission table."""
    return _kernels()[4](*_chain_arrays(init, transitions, emission, domain, first, last))


def sample_paths(init, transitions, emission, domain, first, last, rng) -> np.ndarray:
    """``(pages, epochs)`` grid states: one draw of each page's path given its data
    (forward filtering, backward sampling), −1 outside its first … last columns."""
    arrays = _chain_arrays(init, transitions, emission, domain, first, last)
    return _kernels()[5](*arrays, rng.random(np.shape(emission)[:2]))


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

    from bayesrate.models.fused import _KERNEL_VERSION as FUSED_VERSION

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
            kernel_logp, kernel_shifted = _kernels()[0], _kernels()[3]
            if self.n_free > 2:
                results = kernel_shifted(*inputs)[: self.n_free + 1]
            else:
                results = kernel_logp(*inputs, _NO_SLOPE)[:3]
            output_storage[0][0] = np.asarray(results[0])
            for i, value in enumerate(results[1:], start=1):
                output_storage[i][0] = value

    logp_grad, _, _, shifted_logp_grad, _, _ = _kernels()

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

        key = f"bayesrate-paths-logp-v{_KERNEL_VERSION}-{FUSED_VERSION}-{op.n_free}"
        return paths, key

    _PATHS_LOGP = PathsLogp
