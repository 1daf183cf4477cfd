"""The interval-censored log-likelihood in numpy: the one home of its formula.

A page whose content changes as a Poisson process is visited at times ``t₀ < t₁ < …``; an
interval of integrated rate ``Λ`` contributes ``log(1 − e^{−Λ})`` when the visit that ends it
detected a change, and ``−Λ`` when it did not. With ``θ = log λ`` (a page's log-rate per
hour) and the page's intervals grouped (:class:`CensoredGroups`)::

    ℓ(θ) = −U·e^θ + Σ_g c_g · log(1 − exp(−e^{θ + log E_g}))

``U`` is the page's unchanged exposure (the integrated rate multiplier over its unchanged
intervals, in hours: their total length for a constant rate), and each changed group ``g``
holds ``c_g`` changed intervals of exposure ``E_g`` (their length ``τ``, or the modulated
exposure ``Σ_b m_b·overlap_b``). A rate shared by the pages on top of the page's own (the
mass-edit model's ``a``: the research package's ``mass_edits``) adds a known integrated rate
``A_g`` to each changed group and ``A_U`` to the unchanged intervals::

    ℓ(θ) = −U·e^θ − A_U + Σ_g c_g · log(1 − exp(−(e^{θ + log E_g} + A_g)))

Every estimator, model, check and the scale path evaluates
``ℓ`` through this module; the PyTensor graph of :mod:`bayesrate.models.likelihood` and the
fused numba kernel of :mod:`bayesrate.models.fused` are its tensor twins (tested equal).

``ℓ`` is concave in ``θ``: ``d/dθ log(1 − e^{−x}) = x/(eˣ − 1)`` decreases in ``x = e^θ E``
(with an added rate it need not be: a group's term flattens to ``log(1 − e^{−A_g})`` as
``θ → −∞``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from bayesrate.ragged import concat_ranges

#: below this ``log Λ`` the series ``a − e^a/2 + e^{2a}/24`` replaces ``log(−expm1(−e^a))``
#: (relative error < e^{3a}/48: exact in double precision; ``e^a`` itself may underflow)
SERIES_BELOW = -20.0
LN2 = float(np.log(2.0))
_EXP_SERIES_BELOW = float(np.exp(SERIES_BELOW))
#: cap on (changed groups x columns) evaluated at once by :func:`loglik_grid`
CHUNK_CELLS = 1 << 22


def log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 − eˣ)`` for ``x ≤ 0``, accurate everywhere (Mächler 2012).

    ``log(−expm1(x))`` for ``x > −ln 2``, ``log1p(−eˣ)`` below; ``−inf`` at ``x = 0``.
    """
    x = np.asarray(x, dtype=np.float64)
    near = x > -LN2
    with np.errstate(divide="ignore"):
        return np.where(
            near,
            np.log(-np.expm1(np.where(near, x, -1.0))),
            np.log1p(-np.exp(np.where(near, -1.0, x))),
        )


def log1mexp_of_log(log_lam: np.ndarray) -> np.ndarray:
    """``log(1 − exp(−e^a))`` from ``a = log Λ``: the log-probability of a detected change.

    Finite for every finite ``a`` (the series ``a − e^a/2 + e^{2a}/24`` takes over below
    :data:`SERIES_BELOW`, where ``e^a`` may underflow); ``0`` for large ``a``.
    """
    a = np.asarray(log_lam, dtype=np.float64)
    with np.errstate(over="ignore"):
        return log1mexp_of_rate(np.exp(a), a)


def log1mexp_of_rate(
    lam: np.ndarray, log_lam: np.ndarray | None = None, expm1_lam: np.ndarray | None = None
) -> np.ndarray:
    """``log(1 − e^{−Λ})`` from ``Λ`` (and ``log Λ``, used below ``e^``:data:`SERIES_BELOW`
    where ``Λ`` may have underflowed; ``log(Λ)`` when not given).

    Mächler (2012): ``log(−expm1(−Λ))`` for ``Λ ≤ ln 2`` — computed as
    ``log(expm1(Λ)) − Λ`` when ``expm1_lam`` (``eˣ − 1``, shared with the score) is given —
    and ``log1p(−e^{−Λ})`` above.
    """
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if expm1_lam is None:
            out = np.log(-np.expm1(-lam))
        else:
            out = np.log(expm1_lam) - lam
        far = np.flatnonzero(lam > LN2)
        if len(far):
            out.flat[far] = np.log1p(-np.exp(-lam.flat[far]))
    small = np.flatnonzero(lam <= _EXP_SERIES_BELOW)
    if len(small):
        e = lam.flat[small]
        with np.errstate(divide="ignore"):
            a = np.log(e) if log_lam is None else np.asarray(log_lam).flat[small]
        out.flat[small] = a - e / 2 + e * e / 24
    return out


def detection_score(x: np.ndarray, expm1_x: np.ndarray | None = None) -> np.ndarray:
    """``x / (eˣ − 1)``: the derivative of ``log(1 − e^{−x})`` with respect to ``log x``.

    ``1`` at ``x = 0``, ``0`` for large ``x``; ``expm1_x`` may pass ``eˣ − 1`` if known.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = x / (np.expm1(x) if expm1_x is None else expm1_x)
    bad = np.flatnonzero(~np.isfinite(out))  # x = 0 (0/0) or x = inf (inf/inf)
    if len(bad):
        out.flat[bad] = np.where(x.flat[bad] == 0, 1.0, 0.0)
    return out


def detection_information(x: np.ndarray) -> np.ndarray:
    """``−d²/d(log x)² log(1 − e^{−x}) = x² eˣ/(eˣ − 1)² − x/(eˣ − 1)`` (≥ 0)."""
    x = np.asarray(x, dtype=np.float64)
    s = detection_score(x)
    # x² eˣ/(eˣ − 1)² = s² eˣ = s² + s·x
    return np.maximum(s * s + s * x - s, 0.0)


@dataclass(frozen=True)
class CensoredGroups:
    """A sufficient summary of interval-censored visits, for the log-likelihood.

    Attributes
    ----------
    unchanged
        ``(n_pages,)`` unchanged exposure ``U`` per page, hours (times the modulation).
    group_page
        ``(n_groups,)`` page position of each changed group, sorted.
    group_log_exposure
        ``log E_g`` of each changed group.
    group_count
        ``c_g``: changed intervals in the group (float).
    unchanged_added, group_log_added
        Optional, together: an integrated rate added to the page's own, ``A_U`` per page
        over its unchanged intervals and ``log A_g`` per changed group (``−inf``: none).
    """

    unchanged: np.ndarray
    group_page: np.ndarray
    group_log_exposure: np.ndarray
    group_count: np.ndarray
    unchanged_added: np.ndarray | None = None
    group_log_added: np.ndarray | None = None

    def __post_init__(self) -> None:
        if len(self.group_page) > 1 and np.any(np.diff(self.group_page) < 0):
            raise ValueError("changed groups must be sorted by page")
        if (self.unchanged_added is None) != (self.group_log_added is None):
            raise ValueError("give both unchanged_added and group_log_added, or neither")

    @property
    def has_added(self) -> bool:
        """Whether a rate is added to the page's own (``A_U``, ``A_g``)."""
        return self.group_log_added is not None

    @property
    def n_pages(self) -> int:
        return len(self.unchanged)

    @cached_property
    def group_exposure(self) -> np.ndarray:
        """``E_g`` of each changed group."""
        return np.exp(self.group_log_exposure)

    @cached_property
    def starts(self) -> np.ndarray:
        """Positions where a new page's changed groups begin."""
        gp = self.group_page
        return np.flatnonzero(np.r_[True, gp[1:] != gp[:-1]]) if len(gp) else np.zeros(0, int)

    @cached_property
    def offsets(self) -> np.ndarray:
        """Changed groups of page ``i`` are ``offsets[i]:offsets[i + 1]``."""
        return np.searchsorted(self.group_page, np.arange(self.n_pages + 1)).astype(np.int64)

    @property
    def n_changes(self) -> np.ndarray:
        """Detected changes per page."""
        return np.bincount(self.group_page, weights=self.group_count, minlength=self.n_pages)

    @property
    def exposure(self) -> np.ndarray:
        """Hours of every interval per page: unchanged plus changed (``U + Σ_g c_g·E_g``)."""
        return self.unchanged + np.bincount(
            self.group_page, weights=self.group_count * self.group_exposure, minlength=self.n_pages
        )

    @property
    def naive_log_rate(self) -> np.ndarray:
        """``log((changes + ½)/exposure)`` per page: changes over hours, half a change
        added so that a page without one has a finite estimate."""
        return np.log((self.n_changes + 0.5) / self.exposure)

    def select(self, pages: np.ndarray) -> CensoredGroups:
        """The groups of the pages at ``pages`` (positions, in that order), renumbered."""
        pages = np.asarray(pages, dtype=np.int64)
        offsets = self.offsets
        counts = offsets[pages + 1] - offsets[pages]
        take = concat_ranges(offsets[pages], counts)
        return CensoredGroups(
            unchanged=self.unchanged[pages],
            group_page=np.repeat(np.arange(len(pages)), counts),
            group_log_exposure=self.group_log_exposure[take],
            group_count=self.group_count[take],
            unchanged_added=self.unchanged_added[pages] if self.has_added else None,
            group_log_added=self.group_log_added[take] if self.has_added else None,
        )


def _sum_by_page(values: np.ndarray, groups: CensoredGroups) -> np.ndarray:
    """Sum rows of ``values`` (changed groups, ...) into their pages."""
    out = np.zeros((groups.n_pages, *values.shape[1:]))
    if len(groups.group_page):
        starts = groups.starts
        out[groups.group_page[starts]] = np.add.reduceat(values, starts, axis=0)
    return out


def loglik_grid(groups: CensoredGroups, theta: np.ndarray) -> np.ndarray:
    """``ℓ_p(θ)`` of every page at log-rates ``theta``.

    Parameters
    ----------
    groups
        The pages' sufficient statistics.
    theta
        ``(n_pages, k)`` log-rates per hour (a grid per page, or one draw per column), or
        ``(k,)`` shared by every page.

    Returns
    -------
    numpy.ndarray
        ``(n_pages, k)``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    if theta.ndim == 1:
        theta = np.broadcast_to(theta, (groups.n_pages, len(theta)))
    with np.errstate(over="ignore"):
        out = -groups.unchanged[:, None] * np.exp(theta)
    if groups.has_added:
        out -= groups.unchanged_added[:, None]
    n_groups = len(groups.group_page)
    if n_groups:
        step = max(1, CHUNK_CELLS // n_groups)
        for a in range(0, theta.shape[1], step):
            cols = slice(a, a + step)
            log_lam = theta[groups.group_page, cols] + groups.group_log_exposure[:, None]
            if groups.has_added:
                log_lam = np.logaddexp(log_lam, groups.group_log_added[:, None])
            contrib = groups.group_count[:, None] * log1mexp_of_log(log_lam)
            out[:, cols] += _sum_by_page(contrib, groups)
    return out


def loglik(groups: CensoredGroups, log_rate: np.ndarray) -> np.ndarray:
    """``ℓ_p`` of every page at its own log-rate (``(n_pages,)`` in, ``(n_pages,)`` out)."""
    return loglik_derivatives(groups, log_rate, order=0)[0]


def loglik_derivatives(
    groups: CensoredGroups, log_rate: np.ndarray, order: int = 2
) -> tuple[np.ndarray, ...]:
    """Value, score ``dℓ/dθ`` and observed information ``−d²ℓ/dθ²`` per page at ``θ_p``.

    ``order`` 0 returns the value only, 1 value and score, 2 all three. With an added
    rate a group's integrated rate is ``x = y + A_g`` (``y = λE_g``, the part that moves
    with ``θ``): with ``s = x/(eˣ − 1)`` and ``r = y/x`` its score is ``c·s·r`` and its
    information ``c·((s² + s·x)·r² − s·r)`` (``r = 1`` without one).
    """
    theta = np.asarray(log_rate, dtype=np.float64)
    with np.errstate(over="ignore"):
        lam = np.exp(theta)
    exposure = groups.unchanged * lam
    gp = groups.group_page
    own = lam[gp] * groups.group_exposure
    x = own + np.exp(groups.group_log_added) if groups.has_added else own
    c = groups.group_count
    with np.errstate(over="ignore"):
        q = np.expm1(x)
    value = -exposure - (groups.unchanged_added if groups.has_added else 0.0)
    out = [value + _sum_by_page(c * log1mexp_of_rate(x, None, q), groups)]
    if order >= 1:
        s = detection_score(x, q)
        if groups.has_added:
            with np.errstate(invalid="ignore"):
                r = np.where(x > 0, own / x, 1.0)
        else:
            r = 1.0
        out.append(-exposure + _sum_by_page(c * s * r, groups))
        if order >= 2:
            info = (s * s + s * x) * r * r - s * r
            if not groups.has_added:  # ≥ 0 but for rounding
                info = np.maximum(info, 0.0)
            out.append(exposure + _sum_by_page(c * info, groups))
    return tuple(out)


def pointwise_loglik(groups: CensoredGroups, log_rate_draws: np.ndarray) -> np.ndarray:
    """``(draws, pages)`` log-likelihood of each page at each posterior draw of its log-rate."""
    draws = np.atleast_2d(np.asarray(log_rate_draws, dtype=np.float64))
    return loglik_grid(groups, draws.T).T


# --------------------------------------------------------------------------- Gamma-mixed intervals
#: below this ``z`` the series ``z − e^z/2`` replaces ``log(log(1 + e^z))`` (error < e^{2z}/3)
LOG_SOFTPLUS_SERIES_BELOW = -20.0


def log_softplus(z: np.ndarray) -> np.ndarray:
    """``log(log(1 + e^z))``, finite for every finite ``z`` (the series below −20)."""
    z = np.asarray(z, dtype=np.float64)
    exact = np.log(np.logaddexp(0.0, np.maximum(z, LOG_SOFTPLUS_SERIES_BELOW)))
    low = np.minimum(z, LOG_SOFTPLUS_SERIES_BELOW)
    return np.where(z > LOG_SOFTPLUS_SERIES_BELOW, exact, low - np.exp(low) / 2)


def mixed_log_quiet(log_lam: np.ndarray, log_shape: np.ndarray) -> np.ndarray:
    """``log P(no change)`` of an interval whose integrated rate is Gamma-mixed.

    The interval's changes are Poisson with mean ``Λ·G``, ``G ~ Gamma(κ, κ)`` (mean 1), so
    ``P(0) = (1 + Λ/κ)^{−κ}``: ``−κ·log(1 + e^{a − b})`` with ``a = log Λ``, ``b = log κ``
    (``→ −Λ``, the Poisson, as ``κ → ∞``).
    """
    a = np.asarray(log_lam, dtype=np.float64)
    b = np.asarray(log_shape, dtype=np.float64)
    return -np.exp(b) * np.logaddexp(0.0, a - b)


def mixed_log_detection(log_lam: np.ndarray, log_shape: np.ndarray) -> np.ndarray:
    """``log(1 − (1 + Λ/κ)^{−κ})`` from ``a = log Λ``, ``b = log κ``: a detected change.

    ``log(1 − e^{−y})`` with ``log y = b + log softplus(a − b)`` (:func:`log1mexp_of_log`),
    so that neither a tiny ``Λ`` nor a huge ``κ`` loses precision.
    """
    a = np.asarray(log_lam, dtype=np.float64)
    b = np.asarray(log_shape, dtype=np.float64)
    return log1mexp_of_log(b + log_softplus(a - b))


def mixed_pointwise_loglik(
    groups_page: np.ndarray,
    groups_log_tau: np.ndarray,
    groups_n: np.ndarray,
    groups_changed: np.ndarray,
    log_rate_draws: np.ndarray,
    log_shape_draws: np.ndarray,
) -> np.ndarray:
    """``(draws, pages)`` log-likelihood of Gamma-mixed interval groups (no Binomial constants).

    Each group of ``n`` intervals of length ``τ`` with ``c`` detections contributes
    ``c·log p + (n − c)·log(1 − p)`` at its page's draws of ``log λ`` and ``log κ``
    (``(draws, pages)`` each).
    """
    log_rate = np.atleast_2d(np.asarray(log_rate_draws, dtype=np.float64))
    log_shape = np.atleast_2d(np.asarray(log_shape_draws, dtype=np.float64))
    a = log_rate[:, groups_page] + groups_log_tau[None, :]
    b = log_shape[:, groups_page]
    c = groups_changed.astype(np.float64)
    quiet = (groups_n - c) * mixed_log_quiet(a, b)
    detected = np.where(c > 0, c * mixed_log_detection(a, b), 0.0)
    out = np.zeros(log_rate.shape)
    for row in range(len(out)):
        out[row] = np.bincount(
            groups_page, weights=quiet[row] + detected[row], minlength=log_rate.shape[1]
        )
    return out
