"""Each page's walk integrated out by a Laplace approximation (the dynamic model's
likelihood without a log-rate grid).

A page's log-rates ``x_0 … x_{n−1}`` over its columns (first to last epoch with data) have
the prior ``x_0 ~ Normal(m, s)``, ``x_j ~ Normal(x_{j−1}, w)`` (a random walk; reverting
towards ``m``, ``x_j ~ Normal(m + ρ(x_{j−1} − m), w)``, adds ``ρ`` to the parameters and
``∂/∂ρ`` to the gradient, the same tridiagonal algebra), and each column's cell of
intervals its censored log-likelihood ``ℓ_j(x_j)`` (concave in ``x_j``; 0 for a column
without intervals). With ``f(x)`` the log joint and ``H = −∇²f`` (tridiagonal: the cells'
information on the diagonal plus the walk's precision), the Laplace approximation of the
page's marginal likelihood is

    log Z ≈ f(x̂) + (n/2)·log 2π − ½·log det H(x̂),    x̂ = argmax f

found per page by Newton's method with a backtracking line search (``f`` is concave, so
the mode is unique; near the mode each step adds Chebyshev's third-order correction
where the corrected step still climbs),
started at the modes of a reference population moved along their tangents
(:attr:`PathLayout.start`).
Its exact gradient with respect to ``(m, s, w)`` is

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
``research/docs/models-log.md``, "Laplace paths").

A cell's terms are the scalar form of :func:`bayesrate.likelihood.loglik_derivatives`
(``−U·λ + Σ_g c_g·log(1 − e^{−λE_g})``, its score and information) plus the third
derivative, which the gradient of ``log det H`` needs (and the fourth and fifth for the
second order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bayesrate.models import _laplace_kernels as kernels
from bayesrate.models._laplace_kernels import (  # noqa: F401 (documented here)
    CHEBYSHEV_BELOW,
    NEWTON_GAIN_TOLERANCE,
    NEWTON_MAX_PASSES,
    NEWTON_TOLERANCE,
    SECOND_ORDER_CAP,
    START_SHIFT_LIMIT,
)

#: part of PyTensor's numba cache key: a digest of this file and the kernels'
OP_KERNEL_VERSION = hashlib.sha256(
    Path(__file__).read_bytes() + Path(kernels.__file__).read_bytes()
).hexdigest()[:16]


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
    start, tangent, reference
        Newton's start: ``start`` ``(slots,)`` is each page's mode at the population
        ``reference = (m₀, log s₀, log w₀)``, ``tangent`` ``(3, slots)`` its derivative in
        those three; the kernel starts each slot at ``start + tangent · Δ`` (NaN in
        ``start``: the previous slot's, or the prior mean). A start near the mode saves
        Newton passes; the result does not depend on it beyond Newton's tolerance, and it
        is a fixed function of the population, so fits stay reproducible.
    """

    page_start: np.ndarray
    slot_cell: np.ndarray
    unchanged: np.ndarray
    group_start: np.ndarray
    group_exposure: np.ndarray
    group_count: np.ndarray
    start: np.ndarray
    tangent: np.ndarray
    reference: np.ndarray

    @classmethod
    def from_cells(cls, cells, referenced: bool = True) -> PathLayout:
        """The layout of :class:`~bayesrate.models.epochs.EpochCells` ``cells``; Newton
        starts at the modes of a reference population (:meth:`referenced`), or with
        ``referenced=False`` at each cell's ``log((changes + ½)/exposure)``."""
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
        naive = np.full(len(slot_cell), np.nan)
        has = slot_cell >= 0
        naive[has] = groups.naive_log_rate[slot_cell[has]]
        layout = cls(
            page_start=page_start,
            slot_cell=slot_cell,
            unchanged=np.ascontiguousarray(groups.unchanged, dtype=np.float64),
            group_start=groups.offsets,
            group_exposure=np.ascontiguousarray(groups.group_exposure, dtype=np.float64),
            group_count=np.ascontiguousarray(groups.group_count, dtype=np.float64),
            start=naive,
            tangent=np.zeros((3, len(slot_cell))),
            reference=np.zeros(3),
        )
        if not referenced:
            return layout
        return layout.referenced(float(np.nanmean(naive)) if has.any() else 0.0)

    def referenced(self, m0: float, s0: float = 1.0, w0: float = 1.0) -> PathLayout:
        """This layout with Newton's start at the modes of the population ``(m0, s0, w0)``
        (the same for every page) and their tangents by central differences (steps of
        ``1e-4`` in ``m``, ``log s``, ``log w``), from the current start."""
        reference = np.array([m0, np.log(s0), np.log(w0)])

        def modes(shift: np.ndarray) -> np.ndarray:
            m, log_s, log_w = reference + shift
            return laplace_logp_grad(m, np.exp(log_s), np.exp(log_w), self).modes

        step = 1e-4
        tangent = np.array([
            (modes(step * e) - modes(-step * e)) / (2 * step) for e in np.eye(3)
        ])  # fmt: skip
        start = modes(np.zeros(3))
        return replace(
            self,
            start=start,
            tangent=np.nan_to_num(tangent, nan=0.0, posinf=0.0, neginf=0.0),
            reference=reference,
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
            self.tangent,
            self.reference,
        )


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
    #: ``∂/∂ρ`` per page (0 where ``ρ = 1``)
    grad_rho: np.ndarray
    #: ``∂/∂τ`` per page (0 without a level)
    grad_tau: np.ndarray
    #: ``(3, pages)`` each page's level: its mode, the first-order mean correction and its
    #: variance (NaN without a level or without columns)
    level_moments: np.ndarray


def laplace_logp_grad(
    m, s, w, layout: PathLayout, order: int = 1, rho=1.0, level_sd=0.0
) -> LaplaceResult:
    """``Σ_p log Z_p``, its gradient and each page's mode and last-column moments, with
    the prior mean ``m``, first-column sd ``s``, step sd ``w`` and reversion ``rho`` of
    each page (scalars broadcast; steps ``x_j ~ Normal(m + ρ(x_{j−1} − m), w)``, ``ρ = 1``
    the random walk); ``order`` 2 adds the second-order term to ``log Z`` (random walk
    only). Where ``level_sd`` ``τ > 0`` the page's walk is centred on a level
    ``L ~ Normal(m, τ)`` of its own (``x_0 ~ Normal(L, s)``, steps towards ``L``),
    integrated out with the path."""
    per_page = [_per_page(v, layout.n_pages) for v in (m, s, w, rho, level_sd)]
    return LaplaceResult(*kernels.laplace_logp_grad(*per_page, *layout.constants, int(order)))


def corrected_mean(mode: np.ndarray, correction: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """The Laplace mean ``mode`` plus the first-order correction for the cells' skew, the
    correction capped at one sd (``√variance``), where that expansion has failed: pages
    without changes and large walks."""
    spread = np.sqrt(variance)
    return mode + np.clip(correction, -spread, spread)


def level_posterior(
    m, s, w, layout: PathLayout, rho, level_sd
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pages,)`` each page's ``log Z`` (level and path integrated) and the mean and sd
    of its level's Laplace posterior (:func:`laplace_logp_grad`'s ``level_moments``: the
    :func:`corrected_mean`, the variance from the joint Hessian);
    ``Normal(m, level_sd)`` for a page without intervals."""
    result = laplace_logp_grad(m, s, w, layout, rho=rho, level_sd=level_sd)
    mode, correction, variance = result.level_moments
    has = layout.page_start[1:] > layout.page_start[:-1]
    variance = np.where(has, variance, 1.0)
    mean = np.where(has, corrected_mean(mode, correction, variance), m)
    sd = np.where(has, np.sqrt(variance), level_sd)
    return result.per_page, mean, sd


def cell_derivatives(
    x: float, cell: int, layout: PathLayout, high: bool = True
) -> tuple[float, float, float, float, float, float]:
    """``ℓ`` and its first five derivatives of ``cell`` at log-rate ``x``, as the kernel
    computes them (the fourth and fifth 0 unless ``high``)."""
    return kernels.cell_derivatives(
        float(x), int(cell), layout.unchanged, layout.group_start, layout.group_exposure,
        layout.group_count, bool(high),
    )  # fmt: skip


def cell_terms(x: float, cell: int, layout: PathLayout) -> tuple[float, float, float, float]:
    """``ℓ, ℓ', ℓ'', ℓ'''`` of ``cell`` at log-rate ``x``, as Newton's passes compute them."""
    return cell_derivatives(x, cell, layout, high=False)[:4]


def laplace_paths_logp(m, s, w, layout: PathLayout, order: int = 1, rho=None, level_sd=None):
    """The PyTensor scalar ``Σ_p log Z_p``: the sum of :func:`laplace_page_logps`' terms."""
    return laplace_page_logps(m, s, w, layout, order, rho, level_sd).sum()


def laplace_page_logps(m, s, w, layout: PathLayout, order: int = 1, rho=None, level_sd=None):
    """The PyTensor vector of each page's ``log Z_p`` (the kernel's ``per_page``; gradient
    with respect to the per-page ``m``, ``s``, ``w`` and, if given, ``rho``, without it the
    random walk, and ``level_sd``, without it no level; the data are constants), to first or
    second ``order`` (random walk only). Every free input is per page and a page's
    ``log Z_p`` depends on its own only, so the gradient of any weighted sum of the terms is
    exact."""
    import pytensor.tensor as pt

    if (rho is not None or level_sd is not None) and order != 1:
        raise ValueError("the second-order Laplace term takes the random walk only")
    if level_sd is not None and rho is None:
        raise ValueError("a page level takes a reverting walk (rho)")
    free = [pt.as_tensor_variable(v) for v in (m, s, w, rho, level_sd) if v is not None]
    constants = [pt.constant(a) for a in layout.constants]
    if level_sd is None:
        constants.insert(0, pt.constant(np.zeros(layout.n_pages)))
    if rho is None:
        constants.insert(0, pt.constant(np.ones(layout.n_pages)))
    return _page_op_class()(int(order), len(free))(*free, *constants)[0]


_PAGE_OP_CLASS = None


def _page_op_class():
    """:func:`laplace_page_logps`' Op class (defined and registered on first use)."""
    global _PAGE_OP_CLASS
    if _PAGE_OP_CLASS is not None:
        return _PAGE_OP_CLASS
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayesrate.models.hmm import page_value_and_gradient_op

    class LaplacePageLogps(page_value_and_gradient_op()):
        """Outputs ``(each page's log Z_p, ∂/∂m, ∂/∂s, ∂/∂w[, ∂/∂ρ[, ∂/∂τ]])``, every
        free input per page: ``m, s, w`` and, with ``n_free`` 4, ``ρ``, with 5 also the
        level's ``τ`` (else constants: ones, zeros)."""

        __props__ = ("order", "n_free")

        def __init__(self, order: int, n_free: int = 3):
            if n_free not in (3, 4, 5):
                raise ValueError("LaplacePageLogps takes 3, 4 or 5 free inputs")
            self.order = order
            self.n_free = n_free
            self.shared = (False,) * n_free
            super().__init__()

        def perform(self, node, inputs, output_storage):
            results = kernels.laplace_logp_grad(*inputs, self.order)
            for i, result in enumerate((4, 1, 2, 3, 8, 9)[: self.n_free + 1]):
                output_storage[i][0] = np.asarray(results[result])

    kernel = kernels.laplace_logp_grad

    @register_funcify_and_cache_key(LaplacePageLogps)
    def _numba_laplace_pages(op, node=None, **kwargs):
        order = op.order
        key = f"bayesrate-laplace-pages-v{OP_KERNEL_VERSION}-order{order}-free{op.n_free}"
        if op.n_free == 5:

            @numba_njit
            def levelled(*args):
                r = kernel(*args, order)
                return r[4], r[1], r[2], r[3], r[8], r[9]

            return levelled, key
        if op.n_free == 4:

            @numba_njit
            def reverting(*args):
                r = kernel(*args, order)
                return r[4], r[1], r[2], r[3], r[8]

            return reverting, key

        @numba_njit
        def laplace(*args):
            r = kernel(*args, order)
            return r[4], r[1], r[2], r[3]

        return laplace, key

    _PAGE_OP_CLASS = LaplacePageLogps
    return _PAGE_OP_CLASS
