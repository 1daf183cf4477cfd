"""Fetch rates that are optimal under a budget (``docs/science.md`` §5).

Two objectives, both for pages whose content changes as a Poisson process of rate
``λᵢ`` (per hour) and which are fetched as a Poisson process of rate ``pᵢ`` (per hour):

- **binary freshness** (Azar et al. 2018): maximise ``Σ wᵢ pᵢ / (pᵢ + λᵢ)`` subject to
  ``Σ pᵢ ≤ R``. Closed form ``pᵢ = max(0, √(wᵢλᵢ/μ) − λᵢ)``; sorting by ``wᵢ/λᵢ`` and
  scanning the prefix sums finds ``μ`` exactly in O(N log N) (:func:`azar_rates`).
- **harmonic staleness** (Kolobov et al. 2019): minimise ``−Σ wᵢ ln(ρᵢ / (ρᵢ + λᵢ))``
  subject to ``Σ ρᵢ = R``; ``ρᵢ = (−λᵢ + √(λᵢ² + 4wᵢλᵢ/μ)) / 2`` never starves a page;
  ``μ`` by bisection (:func:`harmonic_rates`).

:func:`optimal_rates` adds per-page bounds (an exploration floor, a cap at the shortest
allowed interval) and per-host caps ``Σ_{i∈h} pᵢ ≤ C_h`` (politeness). Each host gets its
own multiplier ``ν_h = max(μ, μ*_h)`` in the Lagrangian, where ``μ*_h`` makes the host's
fetches exactly ``C_h``; every multiplier is found by bisection on ``log μ``, vectorized
over hosts, and the result never exceeds the budget or a cap.

Rates and budgets must be in the same unit (the package uses per hour).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bayesrate.errors import ObservationError

OBJECTIVES = ("freshness", "harmonic")
#: bisection steps on log μ over [-LOG_SPAN, LOG_SPAN]: 2·700 / 2^90 is far below 1 ulp
_BISECT_STEPS = 90
_LOG_SPAN = 700.0


def _check_inputs(
    weights: np.ndarray, rates: np.ndarray, budget: float
) -> tuple[np.ndarray, np.ndarray, float]:
    w = np.asarray(weights, dtype=np.float64)
    lam = np.asarray(rates, dtype=np.float64)
    if w.shape != lam.shape or w.ndim != 1:
        raise ObservationError(
            f"weights and rates must be 1-D arrays of one length, got {w.shape} and {lam.shape}"
        )
    bad_w = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if len(bad_w):
        raise ObservationError("weights must be finite and >= 0", field="weight", rows=bad_w)
    bad_l = np.flatnonzero(~np.isfinite(lam) | (lam < 0))
    if len(bad_l):
        raise ObservationError("change rates must be finite and >= 0", field="rate", rows=bad_l)
    try:
        budget = float(budget)
    except (TypeError, ValueError) as exc:
        raise ObservationError(f"budget must be a number, got {budget!r}", field="budget") from exc
    if not np.isfinite(budget) or budget < 0:
        raise ObservationError(
            f"budget must be a finite number >= 0, got {budget!r}", field="budget"
        )
    return w, lam, budget


def azar_rates(weights: np.ndarray, rates: np.ndarray, budget: float) -> np.ndarray:
    """Freshness-optimal Poisson fetch rates, exact, in O(N log N).

    Parameters
    ----------
    weights
        Importance ``wᵢ >= 0``.
    rates
        Change rates ``λᵢ >= 0``.
    budget
        Total fetch rate ``R >= 0`` (same time unit as ``rates``).

    Returns
    -------
    numpy.ndarray
        Fetch rates ``pᵢ >= 0`` with ``Σ pᵢ <= R`` (``= R`` unless no page can use it).
    """
    w, lam, budget = _check_inputs(weights, rates, budget)
    p = np.zeros_like(lam)
    useful = np.flatnonzero((w > 0) & (lam > 0))
    if budget == 0 or len(useful) == 0:
        return p
    wu, lu = w[useful], lam[useful]
    order = np.argsort(-(wu / lu), kind="stable")
    ws, ls = wu[order], lu[order]
    s = np.sqrt(ws * ls)
    sqrt_mu = np.cumsum(s) / (budget + np.cumsum(ls))
    # k-th page (0-based) is active with the top-(k+1) set iff w/λ > μ_k; the active set
    # is the longest prefix where that holds
    ok = np.sqrt(ws / ls) > sqrt_mu
    k = len(ok) if ok.all() else int(np.argmin(ok))
    k = max(k, 1)
    root = sqrt_mu[k - 1]
    ps = np.maximum(s[:k] / root - ls[:k], 0.0)
    out = np.zeros(len(useful))
    out[order[:k]] = ps
    p[useful] = out
    return _never_exceed(p, budget)


def _never_exceed(p: np.ndarray, cap: float) -> np.ndarray:
    total = p.sum()
    if total > cap:
        p *= cap / total * (1 - 1e-15)
    return p


def _rate_at(objective: str, w: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Unconstrained optimum of one page at multiplier ``mu`` (decreasing in ``mu``)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if objective == "freshness":
            p = np.sqrt(w * lam / mu) - lam
            p = np.where(np.isnan(p), 0.0, np.maximum(p, 0.0))
        else:
            x = 4.0 * w * lam / mu
            # (−λ + √(λ² + x)) / 2 without cancellation when x << λ²
            p = 0.5 * x / (lam + np.sqrt(lam * lam + x))
            p = np.where((lam == 0) | (w == 0), 0.0, p)
            p = np.where(np.isnan(p), np.inf, p)
    return p


def harmonic_rates(weights: np.ndarray, rates: np.ndarray, budget: float) -> np.ndarray:
    """Harmonic-staleness-optimal fetch rates (Kolobov et al. 2019), ``Σ ρᵢ = R``.

    Pages with ``wᵢ λᵢ = 0`` get no fetches (their staleness cost is zero).
    """
    return optimal_rates(weights, rates, budget, objective="harmonic")


def optimal_rates(
    weights: np.ndarray,
    rates: np.ndarray,
    budget: float,
    *,
    objective: str = "freshness",
    lower: np.ndarray | float = 0.0,
    upper: np.ndarray | float = np.inf,
    hosts: np.ndarray | None = None,
    host_caps: np.ndarray | float | None = None,
) -> np.ndarray:
    """Optimal fetch rates with per-page bounds and per-host caps.

    Parameters
    ----------
    weights, rates, budget
        As in :func:`azar_rates`.
    objective
        ``"freshness"`` (Azar) or ``"harmonic"`` (Kolobov).
    lower, upper
        Per-page bounds on the fetch rate (scalars or arrays): an exploration floor and the
        cap ``1 / shortest allowed interval``.
    hosts
        Integer host code ``0..H-1`` of each page (needed with ``host_caps``).
    host_caps
        Maximum total fetch rate per host (scalar, or one per host code).

    Returns
    -------
    numpy.ndarray
        ``pᵢ`` within the bounds with ``Σ pᵢ <= R`` and every host's sum ``<= C_h``.

    Raises
    ------
    ObservationError
        Bad weights/rates/budget, or bounds/caps that cannot be met (floors above the
        budget or above a host's cap).
    """
    if objective not in OBJECTIVES:
        raise ObservationError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    w, lam, budget = _check_inputs(weights, rates, budget)
    n = len(w)
    lo = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,))
    hi = np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,))
    if (np.isnan(lo) | np.isnan(hi) | (lo < 0) | (hi < lo)).any() or np.isinf(lo).any():
        raise ObservationError("bounds must satisfy 0 <= lower <= upper", field="lower/upper")
    if lo.sum() > budget * (1 + 1e-12):
        raise ObservationError(
            f"exploration floors need {lo.sum():.6g} fetches per unit time, "
            f"more than the budget {budget:.6g}",
            field="budget",
        )
    unbounded = not lo.any() and np.isinf(hi).all() and host_caps is None
    if unbounded and objective == "freshness":
        return azar_rates(w, lam, budget)

    if host_caps is None:
        codes = np.zeros(n, dtype=np.int64)
        caps = np.array([np.inf])
    else:
        if hosts is None:
            raise ObservationError("host_caps needs hosts", field="hosts")
        codes = np.asarray(hosts, dtype=np.int64)
        if codes.shape != (n,) or (n and codes.min() < 0):
            raise ObservationError("hosts must be integer codes >= 0, one per page", field="hosts")
        n_hosts = int(codes.max()) + 1 if n else 0
        caps = np.broadcast_to(np.asarray(host_caps, dtype=np.float64), (n_hosts,)).copy()
        bad = np.flatnonzero(np.isnan(caps) | (caps < 0))
        if len(bad):
            raise ObservationError("host caps must be >= 0", field="host_caps", rows=bad)
        floor_sum = np.bincount(codes, weights=lo, minlength=n_hosts)
        over = np.flatnonzero(floor_sum > caps * (1 + 1e-12))
        if len(over):
            raise ObservationError(
                "exploration floors exceed the host cap", field="host_caps", rows=over
            )
    n_hosts = len(caps)

    def fetches(mu_page: np.ndarray) -> np.ndarray:
        return np.clip(_rate_at(objective, w, lam, mu_page), lo, hi)

    def host_sum(log_mu_host: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=fetches(np.exp(log_mu_host[codes])), minlength=n_hosts)

    host_mu = host_multipliers(host_sum, caps)

    def total(log_mu: float) -> float:
        return float(fetches(np.exp(np.maximum(log_mu, host_mu)[codes])).sum())

    log_mu = budget_multiplier(total, budget)
    p = fetches(np.exp(np.maximum(log_mu, host_mu)[codes]))
    # clip rounding: never over the budget or a host cap, never below a floor
    return _never_exceed(p, budget) if p.sum() > budget else p


def page_fetch_rates(
    objective: str,
    weights: np.ndarray,
    rates: np.ndarray,
    log_mu: np.ndarray,
    lower: np.ndarray | float = 0.0,
    upper: np.ndarray | float = np.inf,
) -> np.ndarray:
    """Each page's optimal rate at its multiplier ``exp(log_mu)``, within its bounds."""
    return np.clip(_rate_at(objective, weights, rates, np.exp(log_mu)), lower, upper)


def host_multipliers(host_sum: Callable[[np.ndarray], np.ndarray], caps: np.ndarray) -> np.ndarray:
    """``log μ*_h`` making each host's fetches exactly its cap; ``−inf`` where it never binds.

    ``host_sum(log_mu)`` returns the hosts' total fetch rates with every page of host ``h``
    at multiplier ``exp(log_mu[h])`` (decreasing in it). Bisection on ``log μ``, vectorized
    over hosts; the upper end is kept, so that a host never exceeds its cap. ``host_sum``
    may sum over data held anywhere (:mod:`bayesrate.scaleout.rates` sums partitions).
    """
    n_hosts = len(caps)
    host_mu = np.full(n_hosts, -np.inf)
    finite = np.isfinite(caps)
    if not finite.any():
        return host_mu
    binding = finite & (host_sum(np.full(n_hosts, -_LOG_SPAN)) > caps)
    if binding.any():
        a = np.full(n_hosts, -_LOG_SPAN)
        b = np.full(n_hosts, _LOG_SPAN)
        for _ in range(_BISECT_STEPS):
            mid = 0.5 * (a + b)
            too_many = host_sum(mid) > caps
            a = np.where(too_many, mid, a)
            b = np.where(too_many, b, mid)
        host_mu = np.where(binding, b, -np.inf)  # upper end: never above the cap
    return host_mu


def budget_multiplier(total: Callable[[float], float], budget: float) -> float:
    """``log μ`` of the budget constraint: bisection on the decreasing ``total(log μ)``.

    Returns the upper end (fetches never exceed the budget), or ``−LOG_SPAN`` when even
    the smallest multiplier leaves budget unused (bounds and caps bind everywhere).
    """
    if total(-_LOG_SPAN) <= budget:
        return -_LOG_SPAN
    a, b = -_LOG_SPAN, _LOG_SPAN
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (a + b)
        if total(mid) > budget:
            a = mid
        else:
            b = mid
    return b


def never_exceed(p: np.ndarray, cap: float) -> np.ndarray:
    """Scale ``p`` down by rounding's worth when its sum exceeds ``cap``."""
    return _never_exceed(p, cap)


def expected_freshness(weights: np.ndarray, rates: np.ndarray, fetch: np.ndarray) -> float:
    """Weighted mean of ``p / (p + λ)`` (Poisson fetching; 1 for ``λ = 0``)."""
    w, lam, _ = _check_inputs(weights, rates, 0.0)
    p = np.asarray(fetch, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(lam == 0, 1.0, p / (p + lam))
    return float((w * f).sum() / w.sum())


def expected_harmonic_staleness(weights: np.ndarray, rates: np.ndarray, fetch: np.ndarray) -> float:
    """Weighted mean of ``ln((ρ + λ) / ρ)`` (Kolobov's objective per unit weight)."""
    w, lam, _ = _check_inputs(weights, rates, 0.0)
    rho = np.asarray(fetch, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(lam == 0, 0.0, np.log1p(lam / rho))
    return float((w * h).sum() / w.sum())
