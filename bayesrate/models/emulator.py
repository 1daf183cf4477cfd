"""Per-page Chebyshev emulators of the detected intervals' log-likelihood (numba).

With irregular visits every changed interval is its own group, and a log-density costs
one term per detected change. For a constant-rate model a page's detected terms are one
smooth function of its log-rate ``u``::

    F_p(u) = Σ_g c_g · φ(u + s_g),   φ(a) = log(1 − exp(−e^a)),   s_g = log(exposure_g)

``φ`` is analytic in the strip ``|Im a| < π/2`` (its nearest singularities are where
``e^a = ±2πik``), so a Chebyshev interpolant on pieces of width 2 converges like
``3.4^{−degree}``. Each page gets :data:`PIECES` pieces of width :data:`PIECE_WIDTH`
centred where its detections put its rate, with :data:`DEGREE`-degree interpolants of
``F_p`` and of ``F_p'`` (fitted to the exact values at Chebyshev nodes, not
differentiated). A log-density + gradient then costs O(pages × degree) instead of
O(detected groups); outside its window a page is summed exactly, term by term. The
quiet part of these groups, ``−(n − c)·λ·exposure``, is linear in ``λ``: one number per
page. Accuracy is measured at build time against the exact sum (:attr:`max_error`), and
tested.

Used by :mod:`bayesrate.models.fused` in the sum-only form of the Binomial Op when the
exposures are constants (censored and hierarchical models) and pages have many detected
groups (:func:`worth_emulating`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numba
import numpy as np

from bayesrate.models._binomial_kernels import binomial_total_kernel

#: pieces per page, their width in log-rate, and the interpolants' degree
PIECES = 10
PIECE_WIDTH = 2.0
DEGREE = 20
#: emulate when the detected groups per page exceed this: on the irregular-visit benchmark a
#: term cost ~24 ns and an emulated page ~88 ns (break-even ≈ 4 groups per page), so 12
#: keeps a margin for pages whose evaluation leaves their window
MIN_GROUPS_PER_PAGE = 12.0
_N = DEGREE + 1
#: emulators whose build check is worse than this (absolute, per page) are not used
MAX_ERROR = 1e-7

_JIT = {"nogil": True, "cache": True, "error_model": "numpy", "fastmath": False}


@numba.njit(**_JIT)
def _clenshaw(coef: np.ndarray, x: float) -> float:
    """``Σ_k coef[k]·T_k(x)``."""
    b1 = 0.0
    b2 = 0.0
    two_x = 2.0 * x
    for k in range(coef.shape[0] - 1, 0, -1):
        b1, b2 = two_x * b1 - b2 + coef[k], b1
    return x * b1 - b2 + coef[0]


@numba.njit(**_JIT)
def exact_sum(u: float, start: int, stop: int, shift: np.ndarray, count: np.ndarray):
    """``F_p(u)`` and ``F_p'(u)`` term by term over groups ``start:stop`` (the fused
    kernel's terms: the package's one ``log(1 − e^{−λ})`` in numba)."""
    m = stop - start
    total, grad_rate, _ = binomial_total_kernel(
        np.full(1, u),
        shift[start:stop],
        np.zeros(m, dtype=np.int64),
        np.arange(m),
        np.zeros(m),
        count[start:stop],
        0.0,
    )
    return total, grad_rate[0]


@numba.njit(**_JIT)
def emulated_pages(log_rate, lo, coef, dcoef, offsets, shift, count):
    """``F_p(u_p)`` and ``F_p'(u_p)`` per page: the emulator inside its window, the exact
    sum outside."""
    values = np.zeros(log_rate.shape[0])
    slopes = np.zeros(log_rate.shape[0])
    inv_width = 1.0 / PIECE_WIDTH
    for p in range(min(log_rate.shape[0], lo.shape[0])):  # later pages have no groups
        if offsets[p + 1] == offsets[p]:
            continue
        u = log_rate[p]
        t = (u - lo[p]) * inv_width
        piece = math.floor(t)
        if 0.0 <= piece < PIECES:
            k = int(piece)
            x = 2.0 * (t - piece) - 1.0
            values[p] = _clenshaw(coef[p, k], x)
            slopes[p] = _clenshaw(dcoef[p, k], x)
        else:
            values[p], slopes[p] = exact_sum(u, offsets[p], offsets[p + 1], shift, count)
    return values, slopes


@numba.njit(**_JIT)
def emulated_total_kernel(
    log_rate, lo, coef, dcoef, offsets, shift, count, quiet_exposure, constant_total
):
    """``(Σ_p [F_p(u_p) − e^{u_p}·Q_p] + constant, ∂/∂u)``."""
    values, slopes = emulated_pages(log_rate, lo, coef, dcoef, offsets, shift, count)
    n = min(log_rate.shape[0], quiet_exposure.shape[0])
    quiet = np.exp(log_rate[:n]) * quiet_exposure[:n]
    slopes[:n] -= quiet
    return constant_total + np.sum(values) - np.sum(quiet), slopes


@numba.njit(**_JIT)
def _values_at(nodes, offsets, shift, count):
    """``F_p`` and ``F_p'`` at ``nodes[p, j]`` for every page and node."""
    n_pages, n_nodes = nodes.shape
    values = np.zeros((n_pages, n_nodes))
    slopes = np.zeros((n_pages, n_nodes))
    for p in range(n_pages):
        for j in range(n_nodes):
            v, s = exact_sum(nodes[p, j], offsets[p], offsets[p + 1], shift, count)
            values[p, j] = v
            slopes[p, j] = s
    return values, slopes


def worth_emulating(n_pages: int, n_groups: int) -> bool:
    """Whether the emulators are cheaper than the term-by-term sum."""
    return n_groups > MIN_GROUPS_PER_PAGE * max(n_pages, 1)


@dataclass(frozen=True)
class PageEmulators:
    """The emulators of every page (arrays on pages, sorted groups) and their measured
    accuracy."""

    lo: np.ndarray
    coef: np.ndarray
    dcoef: np.ndarray
    offsets: np.ndarray
    shift: np.ndarray
    count: np.ndarray
    quiet_exposure: np.ndarray
    constant_total: float
    #: largest |emulated − exact| of F and F' at points between the nodes (build check)
    max_error: float
    key: str

    @classmethod
    def build(
        cls,
        page: np.ndarray,
        log_exposure: np.ndarray,
        unchanged: np.ndarray,
        detected: np.ndarray,
        n_pages: int,
        constant_total: float,
    ) -> PageEmulators:
        """Emulators for groups ``(page, log exposure, n − c, c)`` (any order)."""
        order = np.argsort(page, kind="stable")
        page = np.asarray(page)[order]
        shift = np.ascontiguousarray(np.asarray(log_exposure, dtype=np.float64)[order])
        count = np.ascontiguousarray(np.asarray(detected, dtype=np.float64)[order])
        quiet = np.bincount(
            page, weights=np.asarray(unchanged)[order] * np.exp(shift), minlength=n_pages
        )
        offsets = np.concatenate([[0], np.cumsum(np.bincount(page, minlength=n_pages))])
        lo = _window_start(page, shift, count, n_pages)
        # Chebyshev nodes of each piece, and the DCT that turns values into coefficients
        j = np.arange(_N)
        x = np.cos(np.pi * (j + 0.5) / _N)
        dct = 2.0 / _N * np.cos(np.pi * np.outer(j, j + 0.5) / _N)
        dct[0] *= 0.5
        starts = lo[:, None] + PIECE_WIDTH * np.arange(PIECES)[None, :]
        nodes = starts[:, :, None] + PIECE_WIDTH * (x[None, None, :] + 1.0) / 2.0
        values, slopes = _values_at(nodes.reshape(n_pages, -1), offsets, shift, count)
        coef = np.ascontiguousarray(values.reshape(n_pages, PIECES, _N) @ dct.T)
        dcoef = np.ascontiguousarray(slopes.reshape(n_pages, PIECES, _N) @ dct.T)
        digest = hashlib.sha256()
        for arr in (page, shift, count, quiet):
            digest.update(np.ascontiguousarray(arr).tobytes())
        emulators = cls(
            lo, coef, dcoef, offsets, shift, count, quiet, float(constant_total), np.nan,
            digest.hexdigest(),
        )  # fmt: skip
        return replace(emulators, max_error=emulators.check(starts))

    def check(self, starts: np.ndarray) -> float:
        """Largest error of ``F`` and ``F'`` between the nodes, against the exact sum."""
        between = starts[:, :, None] + PIECE_WIDTH * np.linspace(0.013, 0.987, 17)
        points = between.reshape(len(self.lo), -1)
        exact_v, exact_s = _values_at(points, self.offsets, self.shift, self.count)
        worst = 0.0
        for j in range(points.shape[1]):
            value, slope = self.pages(points[:, j])
            worst = max(
                worst,
                float(np.max(np.abs(value - exact_v[:, j]))),
                float(np.max(np.abs(slope - exact_s[:, j]))),
            )
        return worst

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return self.lo, self.coef, self.dcoef, self.offsets, self.shift, self.count

    def pages(self, log_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Emulated ``F_p`` and ``F_p'`` per page (no quiet term)."""
        return emulated_pages(np.ascontiguousarray(log_rate, dtype=np.float64), *self._arrays())

    def total(self, log_rate: np.ndarray) -> tuple[float, np.ndarray]:
        """The groups' summed log-likelihood and its gradient in ``log_rate``."""
        log_rate = np.ascontiguousarray(log_rate, dtype=np.float64)
        return emulated_total_kernel(
            log_rate, *self._arrays(), self.quiet_exposure, self.constant_total
        )


def _window_start(page, shift, count, n_pages) -> np.ndarray:
    """Where each page's window starts: centred on the log-rate at which its typical
    detected interval has exposure 1 (``u = −median log exposure``), which is where
    detections are informative."""
    weights = np.bincount(page, weights=count, minlength=n_pages)
    mean_shift = np.bincount(page, weights=count * shift, minlength=n_pages) / np.maximum(
        weights, 1e-300
    )
    centre = -mean_shift
    return centre - 0.5 * PIECES * PIECE_WIDTH
