"""Fetch rates that are optimal under a budget (``docs/science.md`` §5).

Three objectives, all for pages whose content changes as a Poisson process of rate
``λᵢ`` (per hour), fetched ``pᵢ`` times per hour:

- **binary freshness, Poisson-timed fetches** (``"freshness"``, Azar et al. 2018): maximise
  ``Σ wᵢ pᵢ / (pᵢ + λᵢ)`` subject to ``Σ pᵢ ≤ R``. Closed form
  ``pᵢ = max(0, √(wᵢλᵢ/μ) − λᵢ)``; sorting by ``wᵢ/λᵢ`` and scanning the prefix sums finds
  ``μ`` exactly in O(N log N) (:func:`azar_rates`).
- **binary freshness, periodic fetches** (``"periodic"``, Cho & Garcia-Molina 2003): a page
  fetched every ``1/fᵢ`` is fresh a share ``Fᵢ = (fᵢ/λᵢ)(1 − e^{−λᵢ/fᵢ})`` of the time;
  maximise ``Σ wᵢFᵢ`` subject to ``Σ fᵢ = R``. The Lagrangian gives, with ``xᵢ = λᵢ/fᵢ``,
  ``1 − e^{−xᵢ}(1 + xᵢ) = μλᵢ/wᵢ`` — the left side is the regularised incomplete Gamma
  ``P(2, xᵢ)``, so ``xᵢ = P⁻¹(2, μλᵢ/wᵢ)`` — and ``fᵢ = 0`` where ``μλᵢ/wᵢ ≥ 1`` (pages too
  fast to keep fresh are abandoned); ``μ`` by bisection (:func:`periodic_rates`). Plan with
  the objective that matches how the fetches are really timed: a scheduler that fetches a
  page when its planned interval has elapsed fetches periodically.
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

OBJECTIVES = ("freshness", "harmonic", "periodic")
#: what each objective solves, for command output
OBJECTIVE_DESCRIPTIONS = {
    "freshness": "freshness of Poisson-timed fetches (Azar et al. 2018)",
    "periodic": "freshness of periodic fetches (Cho & Garcia-Molina 2003)",
    "harmonic": "harmonic staleness (Kolobov et al. 2019)",
}
#: command-line names: ``poisson`` is ``freshness``
OBJECTIVE_ALIASES = {"poisson": "freshness"}


def objective_name(name: str) -> str:
    """The objective a command-line name stands for (:data:`OBJECTIVE_ALIASES`).

    Parameters
    ----------
    name
        One of :data:`OBJECTIVES` or an alias.

    Returns
    -------
    str
        A name in :data:`OBJECTIVES`.
    """
    name = OBJECTIVE_ALIASES.get(name, name)
    if name not in OBJECTIVES:
        raise ObservationError(f"objective must be one of {OBJECTIVES}, got {name!r}")
    return name


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
    if objective == "periodic":
        return _periodic_rate_at(w, lam, mu)
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


def _periodic_rate_at(w: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Periodic fetches: ``f = λ / x`` with ``P(2, x) = 1 − e^{−x}(1 + x) = μλ/w``; 0 where
    ``μλ/w ≥ 1`` or ``wλ = 0``."""
    from scipy.special import gammaincinv

    w, lam, mu = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (w, lam, mu)))
    useful = (w > 0) & (lam > 0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        level = np.where(useful, mu * lam / np.where(useful, w, 1.0), 1.0)
        x = gammaincinv(2.0, np.clip(level, 0.0, 1.0))
        f = np.where(level < 1.0, lam / x, 0.0)
    return np.where(useful & ~np.isnan(f), f, 0.0)


def periodic_freshness(rates: np.ndarray, fetch: np.ndarray) -> np.ndarray:
    """Share of time a page fetched every ``1/f`` is fresh: ``(f/λ)(1 − e^{−λ/f})``.

    Parameters
    ----------
    rates
        Change rates ``λ >= 0``.
    fetch
        Fetch frequencies ``f >= 0`` (same time unit).

    Returns
    -------
    numpy.ndarray
        Per page, 1 for ``λ = 0``, 0 for ``f = 0 < λ``.
    """
    lam, f = np.broadcast_arrays(np.asarray(rates, float), np.asarray(fetch, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = lam / f
        out = -np.expm1(-x) / x
    return np.where(lam == 0, 1.0, np.where(f > 0, out, 0.0))


def periodic_rates(weights: np.ndarray, rates: np.ndarray, budget: float) -> np.ndarray:
    """Freshness-optimal periodic fetch frequencies (Cho & Garcia-Molina), ``Σ fᵢ = R``.

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
        Fetch frequencies ``fᵢ >= 0`` (a page is fetched every ``1/fᵢ``), ``Σ fᵢ <= R``;
        pages with ``μλᵢ/wᵢ >= 1`` at the budget's multiplier get none.
    """
    return optimal_rates(weights, rates, budget, objective="periodic")


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
        ``"freshness"`` (Azar: Poisson-timed fetches), ``"periodic"`` (Cho &
        Garcia-Molina: periodic fetches) or ``"harmonic"`` (Kolobov).
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
    lo, hi, codes, caps = _bounds_and_hosts(n, budget, lower, upper, hosts, host_caps)
    unbounded = not lo.any() and np.isinf(hi).all() and host_caps is None
    if unbounded and objective == "freshness":
        return azar_rates(w, lam, budget)

    def fetches(mu_page: np.ndarray) -> np.ndarray:
        return np.clip(_rate_at(objective, w, lam, mu_page), lo, hi)

    return _solve_multipliers(fetches, budget, codes, caps)


def _bounds_and_hosts(
    n: int,
    budget: float,
    lower: np.ndarray | float,
    upper: np.ndarray | float,
    hosts: np.ndarray | None,
    host_caps: np.ndarray | float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validated per-page bounds, host codes and per-host caps (one host when uncapped)."""
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
    if host_caps is None:
        return lo, hi, np.zeros(n, dtype=np.int64), np.array([np.inf])
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
    return lo, hi, codes, caps


def _solve_multipliers(
    fetches: Callable[[np.ndarray], np.ndarray],
    budget: float,
    codes: np.ndarray,
    caps: np.ndarray,
) -> np.ndarray:
    """Fetch rates at the budget's multiplier, with a multiplier per host for its cap.

    ``fetches(mu_page)`` gives every page's bounded optimum at its multiplier (decreasing
    in it): :func:`host_multipliers` for the caps, then :func:`budget_multiplier`.
    """
    n_hosts = len(caps)

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


N_TABLE = 64


class PosteriorResponse:
    """Each page's optimal fetch rate at a multiplier, from its whole rate posterior.

    With ``π_ij`` the probability of rate ``λ_j`` for page ``i`` (a shared set of rates:
    the scheduler's grid), the marginal value of fetch rate ``p`` is
    ``v_i(p) = w_i Σ_j π_ij λ_j / (p + λ_j)²`` for freshness (the derivative of
    ``E[p / (p + λ)]``), ``w_i Σ_j π_ij P(2, λ_j/p) / λ_j`` for periodic freshness (of
    ``E[(p/λ)(1 − e^{−λ/p})]``, ``P`` the regularised incomplete Gamma) and
    ``w_i Σ_j π_ij λ_j / (p (p + λ_j))`` for harmonic staleness
    (of ``−E[log(p / (p + λ))]``). Both decrease in ``p``; the optimum at multiplier ``μ``
    solves ``v_i(p) = μ`` (0 for freshness when ``v_i(0) ≤ μ``), clipped to the bounds.
    ``v`` is tabulated on :data:`N_TABLE` (periodic: twice that) log-spaced rates spanning
    the bounds (one matrix product ``π · K``) and inverted by binary search per page with
    linear interpolation of ``log p`` in ``log v``.
    """

    def __init__(
        self,
        objective: str,
        weights: np.ndarray,
        probabilities: np.ndarray,
        node_rates: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        n_table: int | None = None,
    ) -> None:
        self.objective = objective
        if n_table is None:
            # periodic freshness's marginal value turns as e^{−λ/p}: twice the table keeps
            # the inversion's objective loss ~1e-6 relative, as for the other objectives
            n_table = 2 * N_TABLE if objective == "periodic" else N_TABLE
        lam = np.asarray(node_rates, dtype=np.float64)
        finite_hi = upper[np.isfinite(upper)]
        p_max = float(finite_hi.max()) if len(finite_hi) else 1e3 * float(lam.max())
        positive_lo = lower[lower > 0]
        p_min = min(float(positive_lo.min()) if len(positive_lo) else np.inf,
                    1e-3 * float(lam.min()), p_max / 1e6)  # fmt: skip
        p_min = min(p_min, p_max)
        table = np.geomspace(p_min, max(p_max, p_min * (1 + 1e-9)), n_table)
        if objective == "freshness":
            kernel = lam[:, None] / (table[None, :] + lam[:, None]) ** 2
            at_zero = probabilities @ (1.0 / lam)
        elif objective == "periodic":
            from scipy.special import gammainc

            # d/df of (f/λ)(1 − e^{−λ/f}) is P(2, λ/f) / λ; 1/λ at f → 0
            kernel = gammainc(2.0, lam[:, None] / table[None, :]) / lam[:, None]
            at_zero = probabilities @ (1.0 / lam)
        else:
            kernel = lam[:, None] / (table[None, :] * (table[None, :] + lam[:, None]))
            at_zero = np.full(len(probabilities), np.inf)
        self.p = table
        self.log_p = np.log(table)
        w = np.asarray(weights, dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.log_v = np.log(w[:, None] * (probabilities @ kernel))
            self.log_v0 = np.log(w * at_zero)
        self.lower, self.upper = lower, upper
        self.useful = w > 0

    def __call__(self, mu: np.ndarray) -> np.ndarray:
        """Bounded optimum of every page at its multiplier ``mu`` (decreasing in ``mu``)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return self._respond(np.log(np.asarray(mu, dtype=np.float64)))

    def _respond(self, log_mu: np.ndarray) -> np.ndarray:
        log_v = self.log_v
        n, m = log_v.shape
        rows = np.arange(n)
        # first table index with v < μ (m if none), by binary search per row
        left = np.zeros(n, dtype=np.int64)
        right = np.full(n, m, dtype=np.int64)
        for _ in range(int(np.ceil(np.log2(m + 1)))):
            active = left < right
            mid = (left + right) // 2
            ge = log_v[rows, np.minimum(mid, m - 1)] >= log_mu
            left = np.where(active & ge, mid + 1, left)
            right = np.where(active & ~ge, mid, right)
        lo = left - 1
        above_all = left == m
        j = np.clip(lo, 0, m - 2)
        v_a, v_b = log_v[rows, j], log_v[rows, j + 1]
        frac = np.clip((v_a - log_mu) / np.where(v_a > v_b, v_a - v_b, 1.0), 0.0, 1.0)
        p = np.exp(self.log_p[j] + frac * (self.log_p[j + 1] - self.log_p[j]))
        p = np.where(above_all, self.p[-1] * np.exp((log_v[:, -1] - log_mu) / 2), p)
        below_all = lo < 0  # μ above v at the smallest tabulated rate
        if self.objective in ("freshness", "periodic"):
            # between 0 and the first rate: v is ~linear in p; 0 when v(0) <= μ
            v0, v1 = np.exp(self.log_v0), np.exp(log_v[:, 0])
            mu_lin = np.exp(log_mu)
            small = self.p[0] * np.clip((v0 - mu_lin) / np.maximum(v0 - v1, 1e-300), 0, 1)
            p = np.where(below_all, small, p)
        else:  # harmonic: v ~ w/p near 0
            p = np.where(below_all, self.p[0] * np.exp(log_v[:, 0] - log_mu), p)
        p = np.where(self.useful, p, 0.0)
        return np.clip(p, self.lower, self.upper)


def expected_optimal_rates(
    weights: np.ndarray,
    probabilities: np.ndarray,
    node_rates: np.ndarray,
    budget: float,
    *,
    objective: str = "freshness",
    lower: np.ndarray | float = 0.0,
    upper: np.ndarray | float = np.inf,
    hosts: np.ndarray | None = None,
    host_caps: np.ndarray | float | None = None,
) -> np.ndarray:
    """Fetch rates maximising the *posterior expected* objective under a budget.

    Freshness: maximise ``Σ w_i E_i[p_i / (p_i + λ)]``; periodic freshness: maximise
    ``Σ w_i E_i[(p_i/λ)(1 − e^{−λ/p_i})]``; harmonic: minimise
    ``Σ w_i E_i[log((p_i + λ) / p_i)]``, each expectation over page ``i``'s rate posterior
    ``P(λ = node_rates[j]) = probabilities[i, j]``; ``Σ p ≤ budget``, bounds and per-host
    caps as in :func:`optimal_rates` (:class:`PosteriorResponse` gives each page's
    optimum at a multiplier, :func:`_solve_multipliers` the multipliers).
    """
    if objective not in OBJECTIVES:
        raise ObservationError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    probs = np.asarray(probabilities, dtype=np.float64)
    lam = np.asarray(node_rates, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != len(lam) or (lam <= 0).any():
        raise ObservationError(
            "probabilities must be (pages, nodes) over positive node rates", field="rate"
        )
    w, _, budget = _check_inputs(weights, np.ones(len(probs)), budget)
    if (probs < 0).any() or not np.allclose(probs.sum(axis=1), 1.0, atol=1e-6):
        raise ObservationError("posterior probabilities must be >= 0 and sum to 1", field="rate")
    n = len(w)
    lo, hi, codes, caps = _bounds_and_hosts(n, budget, lower, upper, hosts, host_caps)
    if n == 0:
        return np.zeros(0)
    response = PosteriorResponse(objective, w, probs, lam, lo, hi)
    return _solve_multipliers(response, budget, codes, caps)


def expected_freshness(weights: np.ndarray, rates: np.ndarray, fetch: np.ndarray) -> float:
    """Weighted mean of ``p / (p + λ)`` (Poisson fetching; 1 for ``λ = 0``)."""
    w, lam, _ = _check_inputs(weights, rates, 0.0)
    p = np.asarray(fetch, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(lam == 0, 1.0, p / (p + lam))
    return float((w * f).sum() / w.sum())


def expected_periodic_freshness(weights: np.ndarray, rates: np.ndarray, fetch: np.ndarray) -> float:
    """Weighted mean of :func:`periodic_freshness` (fetches every ``1/f``)."""
    w, lam, _ = _check_inputs(weights, rates, 0.0)
    return float((w * periodic_freshness(lam, fetch)).sum() / w.sum())


def expected_harmonic_staleness(weights: np.ndarray, rates: np.ndarray, fetch: np.ndarray) -> float:
    """Weighted mean of ``ln((ρ + λ) / ρ)`` (Kolobov's objective per unit weight)."""
    w, lam, _ = _check_inputs(weights, rates, 0.0)
    rho = np.asarray(fetch, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(lam == 0, 0.0, np.log1p(lam / rho))
    return float((w * h).sum() / w.sum())
