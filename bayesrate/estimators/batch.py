"""Batch point estimators over the sufficient statistics of many pages at once.

Every function takes an :class:`~bayesrate.sufficient.IntervalStats` (intervals grouped
by page and length) and returns a :class:`RateEstimate` with one rate per page, **per
hour**, computed with whole-array operations (no per-page Python loop). Formulas:
``docs/science.md`` §2. Notation per page: ``n`` intervals, ``c`` of them with a detected
change, ``T`` observed hours (sum of interval lengths), ``τ̄ = T / n``.

==========  =====================================================  =====================
method      estimate                                               interval
==========  =====================================================  =====================
naive       ``c / T``                                              —
moment      ``−log(1 − c/n) / τ̄``                                  —
cho         ``−log((n − c + 0.5) / (n + 0.5)) / τ̄``                —
mle         root of ``Σ_changed τ/(e^{λτ} − 1) = Σ_unchanged τ``   profile likelihood
                                                                   (or Fisher, log scale)
mm          root of ``Σ e^{−λτ} = n − c`` (Upadhyay et al.)         —
==========  =====================================================  =====================

Unequal intervals: ``moment`` and ``cho`` use the mean interval ``τ̄`` (they are exact
only for a regular grid; use ``mle`` for irregular visits). The case study's "adjusted"
estimator ``−log(1 − (n/(n + 0.5))·c/n)`` is algebraically the same as ``cho``.

Boundaries, all finite:

- no interval (one visit): rate ``0``; for ``mle`` the interval is ``[0, inf)``.
- ``c = 0``: every estimator gives ``0``.
- ``c = n``: ``moment`` (undefined there) is capped at ``log(2n + 1)/τ̄`` — the ``cho``
  value at ``c = n`` — and never extrapolated; ``mle`` and ``mm`` (no finite root) are
  capped at ``log(2n + 1)/τ_min``. ``RateEstimate.clipped`` marks capped pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.estimators import mle as _mle

if TYPE_CHECKING:
    from bayesrate.sufficient import IntervalStats


@dataclass(frozen=True)
class RateEstimate:
    """Per-page rate estimates (per hour), with an interval where the method has one.

    Attributes
    ----------
    method
        Estimator name.
    rate
        Point estimate per page, per hour.
    lower, upper
        Interval bounds per hour (``None`` if the method has no interval).
    level
        Coverage of the interval (nominal).
    clipped
        Pages whose estimate was capped (``c = n`` or a root above the cap), or ``None``.
    """

    method: str
    rate: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    level: float | None = None
    clipped: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def has_interval(self) -> bool:
        return self.lower is not None and self.upper is not None

    def to_frame(self, stats: IntervalStats, *, per_day: bool = True) -> pd.DataFrame:
        """One row per page: ``page, n_visits, n_changes, rate_per_day[, lower/upper]``."""
        scale = HOURS_PER_DAY if per_day else 1.0
        unit = "per_day" if per_day else "per_hour"
        frame = pd.DataFrame(
            {
                "page": stats.pages.to_numpy(),
                "n_visits": stats.n_visits,
                "n_changes": stats.n_changes,
                f"rate_{unit}": self.rate * scale,
            }
        )
        if self.has_interval:
            frame[f"lower_{unit}"] = self.lower * scale
            frame[f"upper_{unit}"] = self.upper * scale
        return frame


def _totals(stats: IntervalStats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return stats.n_intervals, stats.n_changes, stats.exposure


def naive(stats: IntervalStats) -> RateEstimate:
    """Detected changes per observed hour, ``c / T`` (biased low under censoring)."""
    _, c, exposure = _totals(stats)
    rate = np.divide(c, exposure, out=np.zeros(len(c)), where=exposure > 0)
    return RateEstimate("naive", rate)


def moment(stats: IntervalStats) -> RateEstimate:
    """Corrected method of moments ``−log(1 − c/n)/τ̄``, capped at ``c = n``."""
    n, c, exposure = _totals(stats)
    # one pass per operation, no masks on the common path: −log1p(−c/n) · n / T
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.divide(c, n)
        np.negative(rate, out=rate)
        np.log1p(rate, out=rate)
        rate *= n
        rate /= exposure
        np.negative(rate, out=rate)
    all_changed = (c >= n) & (c > 0)
    if all_changed.any():
        idx = np.flatnonzero(all_changed)
        rate[idx] = np.log(2.0 * n[idx] + 1.0) * n[idx] / exposure[idx]
    empty = ~(exposure > 0)
    if empty.any():
        rate[empty] = 0.0
    return RateEstimate("moment", rate, clipped=all_changed)


def cho(stats: IntervalStats) -> RateEstimate:
    """Cho & Garcia-Molina bias-reduced ``−log((n − c + 0.5)/(n + 0.5))/τ̄``."""
    n, c, exposure = _totals(stats)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.log((n + 0.5) / (n - c + 0.5))
        rate *= n
        rate /= exposure
    empty = ~(exposure > 0)
    if empty.any():
        rate[empty] = 0.0
    return RateEstimate("cho", rate)


def mle(
    stats: IntervalStats,
    *,
    interval: str | None = "profile",
    level: float = 0.95,
    tol: float = _mle.TOL,
) -> RateEstimate:
    """Maximum likelihood for unequal intervals (see :mod:`bayesrate.estimators.mle`).

    Parameters
    ----------
    interval
        ``"profile"`` (profile likelihood, default), ``"fisher"`` (Wald interval on
        ``log λ`` from the observed information; pages at ``c = 0`` or ``c = n``, where
        it is undefined, get the profile interval) or ``None``.
    level
        Interval coverage.
    tol
        Relative Newton tolerance.
    """
    res = _mle.solve_mle(stats, tol=tol)
    lower = upper = None
    if interval is not None:
        if interval not in ("profile", "fisher"):
            raise ValueError(f"interval must be 'profile', 'fisher' or None, not {interval!r}")
        lower, upper = _mle.profile_interval(stats, res.rate, res.cap, level=level)
        if interval == "fisher":
            lo_f, hi_f, ok = fisher_interval(stats, res.rate, level=level)
            ok &= ~res.clipped
            lower = np.where(ok, lo_f, lower)
            upper = np.where(ok, hi_f, upper)
    return RateEstimate(
        "mle",
        res.rate,
        lower,
        upper,
        level if interval else None,
        res.clipped,
        {"iterations": res.iterations, "cap": res.cap},
    )


def fisher_interval(
    stats: IntervalStats, rate: np.ndarray, *, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wald interval on ``log λ``: ``λ̂ exp(± z / √I(θ̂))``; returns (lower, upper, ok).

    ``I(θ)`` is the observed information about ``θ = log λ`` (:mod:`bayesrate.likelihood`);
    ``ok`` is False where ``λ̂ = 0`` (undefined).
    """
    from scipy.stats import norm

    from bayesrate.likelihood import loglik_derivatives

    z = norm.ppf(0.5 + level / 2)
    rate = np.asarray(rate, dtype=np.float64)
    positive = rate > 0
    info = np.zeros_like(rate)
    info[positive] = loglik_derivatives(stats.groups.select(np.flatnonzero(positive)),
                                        np.log(rate[positive]))[2]  # fmt: skip
    ok = positive & (info > 0) & np.isfinite(info)
    se_log = np.divide(1.0, np.sqrt(np.where(ok, info, 1.0)), out=np.zeros_like(rate), where=ok)
    return rate * np.exp(-z * se_log), rate * np.exp(z * se_log), ok


def mm(stats: IntervalStats, *, tol: float = _mle.TOL) -> RateEstimate:
    """Moment matching (Upadhyay et al.): solve ``Σ e^{−λτ} = n − c`` per page."""
    res = _mle.solve_mm(stats, tol=tol)
    return RateEstimate("mm", res.rate, clipped=res.clipped, extra={"cap": res.cap})


def gamma_exposure(stats: IntervalStats, alpha: float, beta: float, *, level: float = 0.95):
    """Exposure-based Gamma posterior ``Gamma(α + c, β + T)`` (order-free; biased low)."""
    from scipy.stats import gamma

    _n, c, exposure = _totals(stats)
    a = alpha + c
    b = beta + exposure
    lo = gamma.ppf(0.5 - level / 2, a, scale=1.0 / b)
    hi = gamma.ppf(0.5 + level / 2, a, scale=1.0 / b)
    return RateEstimate("gamma-exposure", a / b, lo, hi, level, extra={"alpha": a, "beta": b})


BATCH = {"naive": naive, "moment": moment, "cho": cho, "mle": mle, "mm": mm}
