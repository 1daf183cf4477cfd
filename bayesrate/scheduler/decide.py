"""Decisions over a :class:`~bayesrate.scheduler.state.SchedulerState` (``docs/science.md`` §5).

- :func:`decision_rates`: the λ each URL is scheduled with — posterior mean (or a Thompson
  draw, or a quantile; always of the URL's posterior as it is, no special cases), floored
  at ``rate_floor``; URLs that changed at every visit are raised to at least
  ``1 / min_interval`` (no information above the sampling frequency: cap, do not extrapolate).
- :func:`next_check`: ``t_next = t_last + factor / λ`` (with hour-of-week multipliers: the
  time at which the integrated rate reaches ``factor``), clipped to
  ``[min_interval, max_interval]`` (the upper clip is the exploration floor).
- :func:`priority`: ``w · E[Λ(t_last, now)]``, or with a plan (:func:`plan`) the number of
  planned intervals elapsed ``p · M(t_last, now)`` (``M`` the integrated hour-of-week
  multiplier when the artifact has one: fetches land after the busy hours; else the time).
  Never-fetched URLs and URLs past ``max_interval`` come first; URLs fetched less than
  ``min_interval`` ago are not eligible.
- :func:`due`: the ``k`` most valuable URLs with at most ``politeness_limit − recent`` per
  host (recent = fetches observed in the politeness window).
- :func:`plan`: fetch rates optimal for freshness (Azar) or harmonic staleness (Kolobov)
  under a budget, with an exploration floor and per-host caps: from each URL's whole
  posterior at ``now`` (expected freshness gain, :func:`~bayesrate.scheduler.optimal.
  expected_optimal_rates`; the grid posterior's default) or from point rates; ``hedge``
  spreads a share of the budget uniformly first (:func:`hedge_split`).
"""

from __future__ import annotations

import numpy as np

from bayesrate.errors import ObservationError
from bayesrate.scheduler.optimal import expected_optimal_rates, optimal_rates
from bayesrate.scheduler.state import SchedulerState
from bayesrate.scheduler.wallclock import CLOCK_SKEW_HOURS

#: priority of never-fetched URLs and URLs past the revisit floor (above any finite score)
URGENT = np.inf


def decision_rates(
    state: SchedulerState,
    *,
    thompson: bool | None = None,
    rng: np.random.Generator | None = None,
    cap: bool = True,
    quantile: float | None = None,
    now: float | None = None,
) -> np.ndarray:
    """λ per hour used for decisions (see module docstring).

    ``thompson`` (default: the config's) draws λ from each posterior; otherwise ``quantile``
    (e.g. 0.3) takes that posterior quantile, and ``None`` the posterior mean — of the
    posterior at the last fetch, or drifted to ``now`` when given. ``cap=False`` skips
    raising changed-at-every-visit URLs to ``1 / min_interval`` (the planner bounds fetch
    rates by ``1 / min_interval`` itself and uses the posterior as is).
    """
    cfg = state.config
    use_draw = cfg.thompson if thompson is None else thompson
    if use_draw:
        rng = rng if rng is not None else np.random.default_rng()
        lam = state.posterior_draw(rng, now)
    elif quantile is not None:
        lam = state.posterior_quantile(float(quantile), now)
    else:
        lam = state.posterior_mean(now)
    lam = np.maximum(lam, cfg.rate_floor)
    capped = state.changed_every_visit if cap else np.zeros(0, dtype=bool)
    if capped.any():
        lam = np.where(capped, np.maximum(lam, 1.0 / cfg.min_interval), lam)
    return lam


def next_check(
    state: SchedulerState, *, factor: float | None = None, rates: np.ndarray | None = None
) -> np.ndarray:
    """Next check time per URL (hours since the epoch; NaN for never-fetched URLs)."""
    cfg = state.config
    factor = cfg.factor if factor is None else float(factor)
    if not (np.isfinite(factor) and factor > 0):
        raise ObservationError(f"factor must be > 0, got {factor!r}", field="factor")
    lam = decision_rates(state) if rates is None else np.asarray(rates, dtype=np.float64)
    last = state.last_fetch
    t = np.full(len(last), np.nan)
    fetched = ~np.isnan(last)  # hour-of-week buckets of a NaN time are undefined
    t[fetched] = state.modulation.advance(last[fetched], (factor / lam)[fetched])
    t = np.clip(t, last + cfg.min_interval, last + cfg.max_interval)
    return np.where(state.changed_every_visit, last + cfg.min_interval, t)


def due_times(state: SchedulerState) -> np.ndarray:
    """When each URL becomes due (hours since the epoch; NaN: never fetched, due at once).

    The time :func:`priority` ranks it as due: with a plan, when its planned interval
    ``1 / target`` has elapsed (in integrated hour-of-week time; a URL planned at 0 at its
    revisit floor); without one, :func:`next_check`. Always within ``[min_interval,
    max_interval]`` after the last fetch. The fleet's frontier
    (:mod:`~bayesrate.scheduler.frontier`) hands out URLs in this order.
    """
    cfg = state.config
    out = np.full(state.n, np.nan)
    rows = np.flatnonzero(~np.isnan(state.last_fetch))
    if not len(rows):
        return out
    last = state.last_fetch[rows]
    if state.target.any():
        target = state.target[rows]
        interval = np.where(target > 0, 1.0 / np.where(target > 0, target, 1.0), cfg.max_interval)
        t = state.modulation.advance(last, np.minimum(interval, cfg.max_interval))
        out[rows] = np.clip(t, last + cfg.min_interval, last + cfg.max_interval)
    else:
        out[rows] = next_check(state)[rows]
    return out


def priority(
    state: SchedulerState, now: float, *, rates: np.ndarray | None = None, use_plan: bool = True
) -> np.ndarray:
    """Value of fetching each URL at ``now`` (higher first; ``-inf`` = not eligible).

    A URL fetched after ``now`` by at most the clock-skew tolerance
    (:data:`~bayesrate.scheduler.wallclock.CLOCK_SKEW_HOURS`: the store accepts such
    times from a crawler whose clock runs fast) is not eligible, as if just fetched;
    later than that is an error naming the URLs.
    """
    cfg = state.config
    last = state.last_fetch
    never = np.isnan(last)
    ahead = ~never & (last > now)
    if (last[ahead] > now + CLOCK_SKEW_HOURS).any():
        bad = np.flatnonzero(ahead & (last > now + CLOCK_SKEW_HOURS))
        raise ObservationError(
            f"now is before the last fetch of some URLs by more than the {CLOCK_SKEW_HOURS:g} h "
            "clock-skew tolerance (time going backwards); if their fetch times are wrong, "
            "reset them (Store.reset, 'bayesrate schedule reset-url')",
            field="now",
            pages=[state.urls[i] for i in bad[:10]],
        )
    last = np.where(ahead, now, last)
    elapsed_from = np.where(never, now, last)
    integrated = state.modulation.integral(elapsed_from, np.full_like(elapsed_from, now))
    if use_plan and state.target.any():
        score = state.target * integrated
    elif rates is None:
        score = state.weight * decision_rates(state) * integrated * drift_growth(state, now)
    else:
        score = state.weight * rates * integrated
    elapsed = now - elapsed_from
    score = np.where(never | (elapsed >= cfg.max_interval), URGENT, score)
    return np.where(ahead | (~never & (elapsed < cfg.min_interval)), -np.inf, score)


def drift_growth(state: SchedulerState, now: float) -> np.ndarray:
    """Mean growth of the expected rate over the time since the last fetch under drift:
    ``(e^a − 1)/a`` with ``a = σ²Δt/2`` (a log-normal random walk has
    ``E[λ(t)] = E[λ(0)]·e^{σ²t/2}``; exact off the grid's ends). 1 without drift."""
    sigma2 = state.drift_variances()
    if not sigma2.any():
        return np.ones(state.n)
    last = state.last_fetch
    a = 0.5 * sigma2 * np.where(np.isnan(last), 0.0, np.maximum(now - last, 0.0))
    safe = np.where(a > 1e-12, a, 1.0)
    return np.where(a > 1e-12, np.expm1(a) / safe, 1.0)


def due(
    state: SchedulerState,
    now: float,
    k: int,
    *,
    rates: np.ndarray | None = None,
    use_plan: bool = True,
) -> np.ndarray:
    """Row indices of the ``k`` most valuable eligible URLs, best first, polite per host.

    Does not change the state: the fetches count against politeness once observed.
    """
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise ObservationError(f"k must be an integer >= 0, got {k!r}", field="k")
    score = priority(state, now, rates=rates, use_plan=use_plan)
    limit = state.config.politeness_limit
    quota = None
    if limit is not None:
        quota = np.maximum(int(limit) - state.recent_fetches(now), 0)
    return select_polite(score, k, state.host, quota)


def token_cap(day_grant: float) -> float:
    """The most fetch tokens a policy may hold: one day's grant, and at least one fetch.

    Tokens accrue fractionally every tick; unused ones carry over up to this cap, so no
    policy exceeds its budget. Capping at one day's grant alone starves a small site at a
    small budget (``budget × pages < 1`` a day: the tokens never reach one fetch).

    Parameters
    ----------
    day_grant
        Tokens granted per day (``budget × live pages``).

    Returns
    -------
    float
        ``max(day_grant, 1)``.
    """
    return max(float(day_grant), 1.0)


def select_polite(
    score: np.ndarray, k: int, host: np.ndarray, quota: np.ndarray | None
) -> np.ndarray:
    """Indices of the ``k`` highest finite scores with at most ``quota[h]`` per host ``h``.

    Best first (ties by index). Partial selection (``argpartition``) of ``4k`` candidates,
    widened only when politeness rejects too many: O(N) typical.
    """
    eligible = np.flatnonzero(score > -np.inf)
    if k == 0 or len(eligible) == 0:
        return np.zeros(0, dtype=np.int64)
    m = min(len(eligible), 4 * k)
    while True:
        cand = eligible
        if m < len(eligible):
            part = np.argpartition(-score[eligible], m - 1)[:m]
            cand = eligible[part]
        cand = cand[np.lexsort((cand, -score[cand]))]  # best first, ties by index
        if quota is not None:
            h = host[cand]
            order = np.argsort(h, kind="stable")
            hs = h[order]
            first = np.r_[True, hs[1:] != hs[:-1]]
            start = np.maximum.accumulate(np.where(first, np.arange(len(hs)), 0))
            rank = np.empty(len(cand), dtype=np.int64)
            rank[order] = np.arange(len(hs)) - start
            cand = cand[rank < quota[h]]
        if len(cand) >= k or m >= len(eligible):
            return cand[:k].astype(np.int64)
        m = min(len(eligible), 4 * m)


def plan(
    state: SchedulerState,
    budget: float,
    *,
    objective: str = "freshness",
    floor: float | np.ndarray | None = None,
    rates: np.ndarray | None = None,
    host_cap: float | None = None,
    rng: np.random.Generator | None = None,
    now: float | None = None,
    rows: np.ndarray | None = None,
    hedge: float = 0.0,
) -> np.ndarray:
    """Set ``state.target`` to optimal fetch rates per hour for a budget (fetches per hour).

    Parameters
    ----------
    budget
        Total fetches per hour.
    objective
        ``"freshness"`` (Azar: Poisson-timed fetches), ``"periodic"`` (Cho &
        Garcia-Molina: fetches on a fixed schedule) or ``"harmonic"`` (Kolobov).
    floor
        Exploration floor per URL (fetches per hour); default ``1 / max_interval``, reduced
        so that the floors use at most half the budget and half of each host's cap.
    rates
        Point rates to plan with. Default: the grid posterior's whole distribution at
        ``now`` (``config.plans_expected``: the expected freshness gain); else
        :func:`decision_rates` with ``cap=False`` and the config's ``plan_quantile``, or
        Thompson draws when the config says so.
    host_cap
        Fetches per hour per host (default: the politeness limit over its window).
    now
        Time the posteriors are drifted to (default: the latest fetch in the state).
    rows
        Plan only these URLs (the others get 0); default all.
    hedge
        Share of the budget spread uniformly over the planned URLs (a hedge against rates
        the posteriors get wrong: drift, mass edits), in ``[0, 1]``; the rest is planned
        as above (:func:`hedge_split`). 0 (default) is the plain plan, 1 the uniform
        policy; the targets sum to what the plan of the rest uses plus the uniform share.

    Returns
    -------
    numpy.ndarray
        A copy of the new ``state.target``.
    """
    cfg = state.config
    if state.n == 0:
        return np.zeros(0)
    rows = np.arange(state.n) if rows is None else np.asarray(rows, dtype=np.int64)
    n = len(rows)
    if now is None and np.isfinite(state.last_fetch).any():
        now = float(np.nanmax(state.last_fetch))
    if host_cap is None and cfg.politeness_limit is not None:
        host_cap = cfg.politeness_limit / cfg.politeness_window
    hosts = state.host[rows]
    if floor is None:
        floor = min(1.0 / cfg.max_interval, 0.5 * float(budget) / max(n, 1)) if budget > 0 else 0.0
        if host_cap is not None and floor > 0:
            # floors may use at most half of a host's cap (large hosts get a lower floor)
            per_host = np.bincount(hosts, minlength=len(state.hosts))
            floor = np.minimum(floor, 0.5 * float(host_cap) / per_host[hosts])
    upper: float | np.ndarray = 1.0 / cfg.min_interval
    caps: float | np.ndarray | None = host_cap
    uniform = np.zeros(n)
    if hedge != 0.0:
        uniform, budget, floor, upper, caps = hedge_split(
            budget, hedge, hosts, floor=floor, upper=upper, host_cap=host_cap
        )
    bounds = {
        "objective": objective,
        "lower": floor,
        "upper": upper,
        "hosts": hosts if host_cap is not None else None,
        "host_caps": caps,
    }
    expected = rates is None and cfg.plans_expected and not cfg.thompson
    if hedge != 0.0 and budget <= 0.0:  # everything spread uniformly
        p = np.zeros(n)
    elif expected:
        grid = state.config.grid()
        if state.posterior == "grid":
            logp = state.log_weights_at(now)[rows]
        else:  # a Gamma posterior read on the grid, cell masses exact
            logp = grid.gamma_probabilities(state.alpha[rows], state.beta[rows])
        probs = grid.probabilities(logp)
        p = expected_optimal_rates(state.weight[rows], probs, grid.rate, budget, **bounds)
    else:
        if rates is None:
            lam = decision_rates(state, rng=rng, cap=False, quantile=cfg.plan_quantile, now=now)
        else:
            lam = np.asarray(rates, dtype=np.float64)
        p = optimal_rates(state.weight[rows], lam[rows], budget, **bounds)
    state.target[:] = 0.0
    state.target[rows] = p + uniform
    return state.target.copy()


def hedge_split(
    budget: float,
    share: float,
    hosts: np.ndarray,
    *,
    floor: float | np.ndarray,
    upper: float,
    host_cap: float | None = None,
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray | None]:
    """Split a budget into a uniform share and the rest to plan (:func:`plan`'s ``hedge``).

    Every URL gets ``share · budget / n`` fetches per hour (at most its host's cap divided
    evenly over the host's URLs: what a host cannot take goes back to the plan); the plan
    gets the rest of the budget, floors and bounds less what the uniform part already
    gives, and each host's cap less its uniform fetches. Uniform share + planned budget =
    ``budget`` exactly.

    Parameters
    ----------
    budget
        Total fetches per hour.
    share
        Share of the budget spread uniformly, in ``[0, 1]``.
    hosts
        Host code of each planned URL.
    floor, upper
        The plan's per-URL lower and upper bounds on the fetch rate.
    host_cap
        Fetches per hour per host, or ``None``.

    Returns
    -------
    uniform, planned_budget, floor, upper, host_caps
        Per-URL uniform fetch rates; the budget, bounds and per-host caps left for the plan.

    Raises
    ------
    ObservationError
        A share outside ``[0, 1]``, a budget that is not a finite number ``>= 0``.
    """
    share, budget = float(share), float(budget)
    if not (np.isfinite(budget) and budget >= 0):
        raise ObservationError(f"budget must be a finite number >= 0, got {budget!r}")
    if not 0.0 <= share <= 1.0:
        raise ObservationError(
            f"the hedge must be a share of the budget in [0, 1], got {share!r}", field="hedge"
        )
    n = len(hosts)
    uniform = np.full(n, share * budget / max(n, 1))
    caps = None
    if host_cap is not None:
        per_host = np.bincount(hosts)
        uniform = np.minimum(uniform, float(host_cap) / per_host[hosts])
        caps = np.maximum(float(host_cap) - np.bincount(hosts, weights=uniform), 0.0)
    planned = budget - float(uniform.sum())
    if planned <= 1e-12 * budget:  # rounding of a share of 1: nothing left to plan
        planned = 0.0
    return (
        uniform,
        planned,
        np.maximum(np.asarray(floor, dtype=np.float64) - uniform, 0.0),
        np.maximum(upper - uniform, 0.0),
        caps,
    )
