"""Policy comparison harness: a synthetic web, one fetch budget, seven policies.

The world (:func:`make_world`): ``n_pages`` URLs whose true long-run change rates are drawn
from the priors (the calibrated ``priors.json`` if one is found, else
:meth:`~bayesrate.priors.PriorSet.default`), per host = prior domain. A fraction of pages is
hour-of-week modulated (the artifact's multipliers, else a weekday business-hours pattern),
a fraction bursty (two-state Markov-modulated: 20× rate contrast, busy spells of 12 h,
quiet spells of 72 h), the rest homogeneous Poisson; the change times come from
:mod:`bayesrate.simulate`'s processes. Importance weights are Pareto (shape 1.5, mean 1);
hosts have Zipf-like sizes and a politeness limit of ``host_limit`` fetches per tick.

The run (:func:`run`): discrete fetch ticks of ``dt`` hours (default 0.5). At each tick every
policy gets the same token budget (``budget`` fetches per URL per day; tokens accrue
fractionally; unused ones carry over for at most one day, or one fetch where a day grants
less, so no policy ever exceeds the budget), and picks its most wanted
URLs subject to the politeness limit. Between fetches, time is continuous: freshness (the
stored copy equals the live page) and harmonic staleness (``H(n) = 1 + 1/2 + … + 1/n`` for
``n`` changes since the last fetch; Kolobov et al.) are integrated exactly over each page's
change times, weighted by importance and averaged over time.

Policies: ``uniform``, ``nutch-adaptive``, ``stormcrawler-adaptive``, ``heritrix-wait`` and
``pagestate`` (:mod:`~bayesrate.scheduler.baselines`; their interval constants are scaled so
that, unconstrained, they use the budget to within 0.5%; calibrated on a subsample),
``bayesrate`` (ours: censoring-exact Gamma posteriors per URL from the priors, Azar-optimal
rates from the posterior means re-solved daily, exploration floor, politeness caps, fetch
the URLs with most planned intervals elapsed), and ``oracle`` (the same with the true
long-run rates: the Azar optimum).
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesrate.constants import HOURS_PER_DAY, N_HOUR_OF_WEEK
from bayesrate.errors import ObservationError
from bayesrate.priors import PriorSet
from bayesrate.scheduler.baselines import BASELINES, IntervalPolicy, PageStatePolicy
from bayesrate.scheduler.decide import plan, priority, select_polite, token_cap
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState

#: Monday 2025-01-06 00:00 UTC, hours since the epoch
T0 = 20094 * 24.0


def business_hours() -> np.ndarray:
    """Weekday 08:00-18:00 at 3× the weekend/night rate, normalised to mean 1."""
    m = np.full(N_HOUR_OF_WEEK, 0.3)
    for day in range(5):
        m[day * 24 + 8 : day * 24 + 18] = 3.0
    return m / m.mean()


# ---------------------------------------------------------------------- world
@dataclass
class World:
    """A synthetic web: pages, hosts, weights, true rates, and change events by tick."""

    t0: float
    days: float
    dt: float
    weights: np.ndarray
    hosts: np.ndarray
    host_names: list[str]
    mean_rate: np.ndarray  # true long-run changes per hour
    kind: np.ndarray
    host_limit: int
    priors: PriorSet
    # change events sorted by (tick, page, time): CSR by tick
    tick_ptr: np.ndarray = field(repr=False)
    ev_page: np.ndarray = field(repr=False)
    ev_offset: np.ndarray = field(repr=False)  # hours after the tick's start
    ev_rank: np.ndarray = field(repr=False)  # 0 for a page's first change in the tick

    @property
    def n(self) -> int:
        return len(self.weights)

    @property
    def n_ticks(self) -> int:
        return len(self.tick_ptr) - 1

    def subset(self, rows: np.ndarray) -> World:
        """The same world restricted to some pages (for calibration runs)."""
        rows = np.sort(np.asarray(rows))
        new_id = np.full(self.n, -1)
        new_id[rows] = np.arange(len(rows))
        keep = new_id[self.ev_page] >= 0
        tick = np.repeat(np.arange(self.n_ticks), np.diff(self.tick_ptr))[keep]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(tick, minlength=self.n_ticks))])
        return World(
            self.t0,
            self.days,
            self.dt,
            self.weights[rows],
            self.hosts[rows],
            self.host_names,
            self.mean_rate[rows],
            self.kind[rows],
            self.host_limit,
            self.priors,
            ptr,
            new_id[self.ev_page[keep]],
            self.ev_offset[keep],
            self.ev_rank[keep],
        )


def make_world(
    n_pages: int = 10_000,
    days: float = 60.0,
    seed: int | str = "bayesrate-schedule-simulate",
    priors: PriorSet | None = None,
    *,
    dt: float = 0.5,
    frac_modulated: float = 0.25,
    frac_bursty: float = 0.15,
    pareto_shape: float | None = 1.5,
    n_hosts: int | None = None,
    host_limit: int | None = None,
    budget: float = 0.2,
) -> World:
    """Draw a synthetic web (see module docstring). ``pareto_shape=None`` gives every page
    weight 1. ``budget`` (fetches per URL per day)
    only sets the default politeness limit: about 5× a uniform host's share per tick for
    the largest host, so politeness binds for skewed schedules only.
    """
    from bayesrate.simulate import rng_from

    if n_pages < 1 or days <= 0 or dt <= 0:
        raise ObservationError("need n_pages >= 1, days > 0, dt > 0", field="n_pages/days")
    if days * 24.0 < 2 * dt:
        raise ObservationError(
            f"the fetch tick ({dt:g} h) leaves fewer than two ticks in the simulated "
            f"{days:g} days ({days * 24.0:g} h): the policies could not fetch and be compared; "
            "use a shorter --tick or more --days",
            field="tick",
        )
    rng = rng_from(seed)
    priors = priors if priors is not None else PriorSet.default()
    hosts, host_names, rate = _hosts_and_rates(priors, n_pages, n_hosts, rng)
    n_hosts = len(host_names)
    if pareto_shape:
        weights = rng.pareto(pareto_shape, n_pages) + 1.0
        weights /= weights.mean()
    else:  # equal importance (ablation: what rate estimates alone are worth)
        weights = np.ones(n_pages)
    u = rng.random(n_pages)
    kind = np.where(
        u < frac_modulated,
        "modulated",
        np.where(u < frac_modulated + frac_bursty, "bursty", "homogeneous"),
    )
    mult = priors.hour_of_week if priors.hour_of_week is not None else business_hours()
    mult = np.asarray(mult) / np.mean(mult)
    t, p = _change_times(rate, kind, mult, priors.timezone, T0 + days * HOURS_PER_DAY, rng)
    ptr, p, offset, rank = _by_tick(t, p, days, dt)
    if host_limit is None:
        share = budget / HOURS_PER_DAY * dt * np.bincount(hosts, minlength=n_hosts).max()
        host_limit = max(2, int(np.ceil(5 * share)))
    return World(
        T0,
        days,
        dt,
        weights,
        hosts,
        host_names,
        rate,
        kind,
        int(host_limit),
        priors,
        ptr,
        p,
        offset,
        rank,
    )


def _hosts_and_rates(
    priors: PriorSet, n_pages: int, n_hosts: int | None, rng: np.random.Generator
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each page's host (Zipf-like sizes), the host names and the true rates per hour drawn
    from the host's prior (per day in the artifact)."""
    names = sorted(priors.domains) or []
    if n_hosts is None:
        n_hosts = len(names) if names else max(1, n_pages // 50)
    host_names = (
        (names * (n_hosts // max(len(names), 1) + 1))[:n_hosts]
        if names
        else [f"host{j:04d}.example" for j in range(n_hosts)]
    )
    if names and n_hosts > len(names):
        host_names = [f"{h}#{j}" if j >= len(names) else h for j, h in enumerate(host_names)]
    size = 1.0 / (np.arange(n_hosts) + 1.0) ** 1.1
    hosts = rng.choice(n_hosts, size=n_pages, p=size / size.sum()).astype(np.int32)
    alpha, beta_day = priors.arrays(
        np.array([host_names[h].split("#")[0] for h in hosts], dtype=object)
    )
    rate = rng.gamma(alpha, 1.0 / beta_day) / HOURS_PER_DAY
    return hosts, host_names, rate


def _change_times(
    rate: np.ndarray,
    kind: np.ndarray,
    mult: np.ndarray,
    timezone: str,
    t_end: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Change times of every page from ``T0`` to ``t_end`` and their pages (page order)."""
    from bayesrate.simulate import Bursty, Homogeneous, HourOfWeekModulated

    times, pages = [], []
    d_hi, d_lo, contrast = 12.0, 72.0, 20.0
    for i in range(len(rate)):
        if kind[i] == "modulated":
            proc: Any = HourOfWeekModulated(rate[i], mult, timezone)
        elif kind[i] == "bursty":
            low = rate[i] * (d_hi + d_lo) / (contrast * d_hi + d_lo)
            proc = Bursty(rates=(contrast * low, low), mean_durations=(d_hi, d_lo))
        else:
            proc = Homogeneous(rate[i])
        t = proc.sample(T0, t_end, rng)
        times.append(t)
        pages.append(np.full(len(t), i, dtype=np.int32))
    t = np.concatenate(times) if times else np.zeros(0)
    p = np.concatenate(pages) if pages else np.zeros(0, dtype=np.int32)
    return t, p


def _by_tick(
    t: np.ndarray, p: np.ndarray, days: float, dt: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Changes ordered by tick: tick pointers, pages, offset within the tick, and the rank of
    each change among its page's changes in the same tick."""
    n_ticks = int(np.ceil(days * HOURS_PER_DAY / dt))
    tick = np.minimum(((t - T0) // dt).astype(np.int64), n_ticks - 1)
    order = np.lexsort((t, p, tick))
    t, p, tick = t[order], p[order], tick[order]
    first = np.r_[True, (p[1:] != p[:-1]) | (tick[1:] != tick[:-1])]
    start = np.maximum.accumulate(np.where(first, np.arange(len(p)), 0))
    rank = np.arange(len(p)) - start
    ptr = np.concatenate([[0], np.cumsum(np.bincount(tick, minlength=n_ticks))])
    return ptr, p, t - (T0 + tick * dt), rank


# ---------------------------------------------------------------------- policies
class PlannedPolicy:
    """Ours: per-URL Gamma posteriors, Azar-optimal rates re-solved every ``replan`` hours.

    Parameters
    ----------
    world
        The world (hosts, weights, priors, tick, politeness).
    budget
        Fetches per URL per day.
    rates
        If given, plan with these true rates and never learn (the oracle).
    floor_days
        Exploration floor: every URL at least once per this many days (default 60), as
        long as floors use at most half the budget.
    thompson
        Plan with posterior draws (re-drawn at every re-plan).
    quantile
        Plan with this posterior quantile (optimism; ``None``: posterior mean).
    update
        ``"adf"`` (censoring-exact) or ``"exposure"`` (seed ``PageState`` update).
    """

    def __init__(
        self,
        world: World,
        budget: float,
        *,
        rates: np.ndarray | None = None,
        floor_days: float = 60.0,
        replan: float = 24.0,
        objective: str = "freshness",
        thompson: bool = False,
        name: str = "bayesrate",
        quantile: float | None = 0.3,
        update: str = "adf",
        posterior: str = "gamma",
        plan_expected: bool = True,
    ) -> None:
        self.name = name
        self.world = world
        self.true_rates = rates
        self.replan = replan
        self.objective = objective
        self.thompson = thompson
        self.budget_h = budget / HOURS_PER_DAY * world.n
        self.floor = (
            0.0
            if rates is not None
            else min(1.0 / (floor_days * HOURS_PER_DAY), 0.5 * self.budget_h / world.n)
        )
        cfg = SchedulerConfig(
            min_interval=world.dt,
            max_interval=max(floor_days, world.days * 2) * HOURS_PER_DAY,
            thompson=thompson,
            plan_quantile=quantile,
            update=update,
            posterior=posterior,
            plan_expected=plan_expected,
        )
        self.state = SchedulerState(world.priors, cfg, capacity=world.n)
        self.urls = [f"u{i}" for i in range(world.n)]
        self.state.add(
            self.urls, [world.host_names[h].split("#")[0] for h in world.hosts], world.weights
        )
        self.next_plan = -np.inf
        self.rng = np.random.default_rng(0)

    def reset(self, t0: float, rng: np.random.Generator) -> None:
        self.rng = rng
        self.state.observe(self.urls, np.full(self.world.n, t0), np.zeros(self.world.n))
        self.next_plan = t0

    def priority(self, now: float) -> np.ndarray:
        if now >= self.next_plan:
            plan(
                self.state,
                self.budget_h,
                objective=self.objective,
                floor=self.floor,
                rates=self.true_rates,
                host_cap=self.world.host_limit / self.world.dt,
                rng=self.rng,
                now=now,
            )
            self.next_plan = now + self.replan
        return priority(self.state, now)

    def observe(self, rows: np.ndarray, now: float, changed: np.ndarray) -> None:
        if self.true_rates is None:
            self.state.observe([self.urls[i] for i in rows], np.full(len(rows), now), changed)
        else:  # the oracle needs only the fetch times
            self.state._last_fetch[rows] = now


def _make_baseline(name: str, n: int, scale: float) -> IntervalPolicy:
    return BASELINES[name](n, scale)


# ---------------------------------------------------------------------- runner
def _harmonic_table(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1))])


def _fetch(pol, s: dict, now: float, per_tick, cap, hosts: np.ndarray, quota) -> None:
    """One policy's fetches at ``now``: its top priorities within its tokens and the hosts'
    politeness (every URL when unconstrained); the fetched URLs become fresh."""
    stale = s["stale"]
    score = pol.priority(now)
    if per_tick is None:
        rows = np.flatnonzero(score > -np.inf)
    else:
        s["tokens"] = min(s["tokens"] + per_tick, cap)
        m = int(s["tokens"])
        rows = select_polite(score, m, hosts, quota) if m else np.zeros(0, int)
        s["tokens"] -= len(rows)
    if len(rows):
        changed = (stale[rows] > 0).astype(np.int8)
        stale[rows] = 0
        pol.observe(rows, now, changed)
        s["fetches"] += len(rows)


def _tick_integrals(
    stale: np.ndarray,
    w: np.ndarray,
    dt: float,
    events: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    htab: np.ndarray,
) -> tuple[float, float]:
    """Exact weighted freshness and harmonic-staleness integrals over ``(now, now + dt]``;
    the tick's changes (page, offset, rank, first of its page) are then counted in
    ``stale``."""
    ep, eo, er, first = events
    fresh0 = stale == 0
    f = dt * float(w @ fresh0)
    h = dt * float(w @ htab[stale])
    if len(ep):
        fe = first & fresh0[ep]
        f -= float(w[ep[fe]] @ (dt - eo[fe]))
        h += float((w[ep] * (dt - eo)) @ (1.0 / (stale[ep] + er + 1.0)))
        np.add.at(stale, ep, 1)
    return f, h


def run(
    world: World,
    policies: list[Any],
    budget: float | None,
    *,
    seed: int | str = "bayesrate-schedule-run",
    series_every: float = 24.0,
) -> dict[str, dict[str, Any]]:
    """Run policies in lockstep on one world.

    Parameters
    ----------
    budget
        Fetches per URL per day, or ``None`` for unconstrained (no tokens, no politeness;
        used to calibrate baselines).

    Returns
    -------
    dict
        Per policy: ``freshness``, ``harmonic_staleness`` (weighted time averages),
        ``fetches``, and ``series`` (weighted freshness averaged per ``series_every`` hours).
    """
    from bayesrate.seeds import rng_from

    if budget is not None and (not np.isfinite(budget) or budget < 0):
        raise ObservationError(
            f"budget must be >= 0 fetches per URL per day, got {budget!r}", field="budget"
        )
    n, dt = world.n, world.dt
    w = world.weights
    w_sum = float(w.sum())
    counts = max(int(np.bincount(world.ev_page, minlength=n).max(initial=0)), 1)
    htab = _harmonic_table(counts + 1)
    per_tick = None if budget is None else budget / HOURS_PER_DAY * n * dt
    cap = None if budget is None else token_cap(budget * n)  # one day's budget, >= 1
    quota = np.full(len(world.host_names), world.host_limit)
    k_ticks = world.n_ticks
    every = max(1, round(series_every / dt))
    state = []
    for pol in policies:
        pol.reset(world.t0, rng_from(f"{seed}-{pol.name}"))  # independent of the others
        state.append(
            {
                "stale": np.zeros(n, dtype=np.int64),
                "tokens": 0.0,
                "fetches": 0,
                "F": 0.0,
                "H": 0.0,
                "series": [],
                "acc": 0.0,
            }
        )
    for k in range(k_ticks):
        now = world.t0 + k * dt
        e0, e1 = world.tick_ptr[k], world.tick_ptr[k + 1]
        ep, eo, er = world.ev_page[e0:e1], world.ev_offset[e0:e1], world.ev_rank[e0:e1]
        first = er == 0
        for pol, s in zip(policies, state, strict=True):
            _fetch(pol, s, now, per_tick, cap, world.hosts, quota)
            f, h = _tick_integrals(s["stale"], w, dt, (ep, eo, er, first), htab)
            s["F"] += f
            s["H"] += h
            s["acc"] += f
            if (k + 1) % every == 0 or k == k_ticks - 1:
                span = ((k % every) + 1) * dt
                s["series"].append(s["acc"] / (w_sum * span))
                s["acc"] = 0.0
    total = k_ticks * dt * w_sum
    return {
        pol.name: {
            "freshness": s["F"] / total,
            "harmonic_staleness": s["H"] / total,
            "fetches": int(s["fetches"]),
            "series": s["series"],
        }
        for pol, s in zip(policies, state, strict=True)
    }


def calibrate(
    world: World,
    name: str,
    budget: float,
    *,
    sample: int = 2000,
    tol: float = 0.02,
    seed: int | str = "bayesrate-schedule-calibrate",
) -> tuple[float, int]:
    """Interval scale at which a baseline uses ``budget`` to within ``tol`` (default 2%).

    Runs on a subsample of pages. Stage 1, unconstrained (an unconstrained policy's fetches
    are independent across pages): solve fetches(scale) = budget to 0.5% by secant steps on
    ``log scale``. Stage 2, with the token budget and politeness (scaled to the subsample),
    which defer fetches when demand bunches up: shrink the scale until the policy's fetches
    reach ``1 − tol/2`` of the budget (tokens make more than the budget impossible).
    :func:`compare` checks the result on the whole world. Returns ``(scale, runs)``.
    """
    from bayesrate.seeds import rng_from

    rng = rng_from(seed)
    rows = rng.choice(world.n, size=min(sample, world.n), replace=False)
    sub = world.subset(rows)
    sub.host_limit = max(1, int(np.ceil(world.host_limit * sub.n / world.n)))
    target = budget * sub.n * world.days
    cls = BASELINES[name]
    start = 7 * HOURS_PER_DAY if cls is PageStatePolicy else cls.start
    scale = (HOURS_PER_DAY / budget) / start
    gamma = 1.0
    prev: tuple[float, float] | None = None
    runs = 0
    for _ in range(15):
        fetches = run(sub, [_make_baseline(name, sub.n, scale)], None, seed=seed)[name]["fetches"]
        runs += 1
        ratio = fetches / target
        if abs(ratio - 1) <= 0.005:
            break
        if prev is not None and fetches > 0 < prev[1] and fetches != prev[1] and scale != prev[0]:
            g = -np.log(fetches / prev[1]) / np.log(scale / prev[0])
            gamma = float(np.clip(g, 0.2, 5.0))
        prev = (scale, fetches)
        # no fetch at all (a tiny world): no secant step, and a finite shrink of the scale
        scale *= max(ratio, 1e-3) ** (1.0 / gamma)
    scale = _shrink_to_budget(sub, name, budget, scale, 1 - tol / 2, seed)
    return scale, runs


def _shrink_to_budget(
    world: World, name: str, budget: float, scale: float, need: float, seed: int | str
) -> float:
    """Shrink ``scale`` until the constrained policy uses at least ``need`` of the budget."""
    target = budget * world.n * world.days
    for _ in range(12):
        pol = _make_baseline(name, world.n, scale)
        ratio = run(world, [pol], budget, seed=seed)[name]["fetches"] / target
        if ratio >= need:
            break
        scale *= max(ratio, 1e-3) ** 2
    return scale


def _use_whole_budget(world: World, results: dict, scales: dict, budget: float, seed: str, say):
    """Re-run every baseline that used less than 98% of the budget on the whole world with
    a smaller interval scale (policies are independent given the world: own random
    streams)."""
    budget_fetches = budget * world.n * world.days
    for name in BASELINES:
        if results[name]["fetches"] < 0.98 * budget_fetches:
            t = _time.perf_counter()
            scales[name] = _shrink_to_budget(world, name, budget, scales[name], 0.985, seed)
            results[name] = run(
                world, [_make_baseline(name, world.n, scales[name])], budget, seed=seed
            )[name]
            say(f"re-calibrated {name} on the whole world ({_time.perf_counter() - t:.1f} s)")


def _summary(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ours against the oracle and the best production baseline (freshness; harmonic
    staleness, where lower is better, as "how many times lower")."""
    prod = ["uniform", "nutch-adaptive", "stormcrawler-adaptive", "heritrix-wait"]
    best = max(prod, key=lambda n: results[n]["freshness"])
    best_h = min(prod, key=lambda n: results[n]["harmonic_staleness"])
    ours, oracle = results["bayesrate"], results["oracle"]

    def ratio(a: float, b: float) -> float:  # NaN where undefined (a tiny world: no staleness)
        return float(a) / float(b) if b else float("nan")

    return {
        "ours_vs_oracle_freshness": ratio(ours["freshness"], oracle["freshness"]),
        "best_production_baseline": best,
        "ours_vs_best_production_freshness": ratio(ours["freshness"], results[best]["freshness"]),
        "oracle_over_ours_harmonic": ratio(
            oracle["harmonic_staleness"], ours["harmonic_staleness"]
        ),
        "best_production_harmonic": best_h,
        "best_production_over_ours_harmonic": ratio(
            results[best_h]["harmonic_staleness"], ours["harmonic_staleness"]
        ),
    }


def compare(
    n_pages: int = 10_000,
    days: float = 60.0,
    budget: float = 0.2,
    seed: int | str = "bayesrate-schedule-simulate",
    priors: PriorSet | None = None,
    *,
    dt: float = 0.5,
    floor_days: float = 60.0,
    thompson: bool = False,
    quantile: float | None = 0.3,
    pareto_shape: float | None = 1.5,
    update: str = "adf",
    objective: str = "freshness",
    progress: Any = None,
    posterior: str = "gamma",
    plan_expected: bool = True,
) -> dict[str, Any]:
    """Build a world, calibrate the baselines, run all seven policies; JSON-ready result."""
    if budget is None or not np.isfinite(budget) or budget <= 0:
        raise ObservationError(
            f"budget must be > 0 fetches per URL per day, got {budget!r}", field="budget"
        )
    say = progress or (lambda msg: None)
    t_start = _time.perf_counter()
    world = make_world(n_pages, days, seed, priors, dt=dt, budget=budget, pareto_shape=pareto_shape)
    say(
        f"world: {world.n} pages, {len(world.host_names)} hosts, {len(world.ev_page)} changes, "
        f"politeness {world.host_limit}/host/tick ({_time.perf_counter() - t_start:.1f} s)"
    )
    scales = {}
    for name in BASELINES:
        t = _time.perf_counter()
        scales[name], iters = calibrate(world, name, budget, seed=f"{seed}-cal")
        say(
            f"calibrated {name}: scale {scales[name]:.4g} in {iters} runs "
            f"({_time.perf_counter() - t:.1f} s)"
        )
    policies: list[Any] = [_make_baseline(name, world.n, scales[name]) for name in BASELINES]
    policies.append(
        PlannedPolicy(
            world,
            budget,
            floor_days=floor_days,
            thompson=thompson,
            quantile=quantile,
            update=update,
            objective=objective,
            posterior=posterior,
            plan_expected=plan_expected,
        )
    )
    policies.append(
        PlannedPolicy(world, budget, rates=world.mean_rate, name="oracle", objective=objective)
    )
    t = _time.perf_counter()
    results = run(world, policies, budget, seed=f"{seed}-run")
    say(f"ran {len(policies)} policies in {_time.perf_counter() - t:.1f} s")
    budget_fetches = budget * world.n * world.days
    _use_whole_budget(world, results, scales, budget, f"{seed}-run", say)
    for name, r in results.items():
        r["fetches_vs_budget"] = r["fetches"] / budget_fetches
        if name in scales:
            r["interval_scale"] = scales[name]
    return {
        "policies": results,
        "setup": {
            "pages": world.n,
            "days": world.days,
            "budget_per_url_per_day": budget,
            "tick_hours": dt,
            "hosts": len(world.host_names),
            "host_limit_per_tick": world.host_limit,
            "changes": len(world.ev_page),
            "kinds": {str(k): int((world.kind == k).sum()) for k in np.unique(world.kind)},
            "priors": dict(world.priors.metadata).get("model", "artifact"),
            "weights": f"pareto({pareto_shape})" if pareto_shape else "equal",
            "ours_plans_with": "thompson"
            if thompson
            else "expected freshness gain"
            if plan_expected
            else ("posterior mean" if quantile is None else f"posterior quantile {quantile}"),
            "ours_posterior": posterior,
            "ours_update": update,
            "objective": objective,
            "seed": seed,
            "seconds": round(_time.perf_counter() - t_start, 1),
        },
        "summary": _summary(results),
    }
