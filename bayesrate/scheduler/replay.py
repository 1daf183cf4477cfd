"""Scheduler replay on an exact change history: which policy keeps real pages fresh?

``bayesrate schedule replay`` (``docs/histories.md``). Before ``start`` every policy sees the
same censored crawl log of the past (:func:`warmup_crawl`: a fixed-interval crawl with a
random phase per page, default daily). From ``start`` on, for ``days`` days, each policy
spends the same budget — ``budget`` fetches per *live* page per day, as tokens granted every
tick of ``tick_hours`` (tokens accrue fractionally; unused ones carry over for at most one
day, or one fetch where a day grants less, so no policy exceeds the budget); the interval
baselines' constants are scaled until they use it to within 2%. A policy that makes no
fetch in the window is an error (the window grants too few fetches), not a result.
A fetch at ``t`` returns "changed since your last fetch" from the exact history. Pages
created in the window enter at creation (the policies know the URL from then on; it is stale
until fetched), deleted pages leave, and are scored only while they exist.

Freshness (the stored copy equals the live page) and harmonic staleness
(``H(n) = 1 + 1/2 + … + 1/n`` for ``n`` changes since the last fetch; Kolobov et al.) are
computed **exactly** from the true change times and each policy's fetch times
(:func:`staleness_integrals`), weighted by importance and averaged over live time.

Policies: ``uniform``, ``nutch-adaptive``, ``stormcrawler-adaptive``, ``heritrix-wait``,
``pagestate`` (:mod:`~bayesrate.scheduler.baselines`; the warm-up log is replayed through
their interval rules), ``bayesrate`` (ours: per-URL Gamma posteriors from the priors updated
with the warm-up log, Azar-optimal rates from the expected freshness gain over each
posterior re-solved daily over the live pages, exploration floor — as in ``schedule
simulate`` — with a share of the budget spread uniformly, chosen by a backtest on the
warm-up log, :func:`hedge_by_backtest`; other variants of ours by name, :data:`OURS`) and
``oracle-hindsight`` (the periodic-fetch optimum of Cho & Garcia-Molina with each page's
realised rate in the window — the objective that matches the replay's fetches, each due
when its planned interval has elapsed: an upper reference, not a bound, when rates drift).

Never imports PyMC: priors come in as a :class:`~bayesrate.priors.PriorSet` (calibrating
them from the warm-up log is :func:`bayesrate.quick_fit.calibrate_priors`, which the command
layer calls).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.history import ChangeHistory, Crawl, FixedInterval, crawl, segment_searchsorted
from bayesrate.priors import PriorSet
from bayesrate.ragged import concat_ranges
from bayesrate.scheduler.baselines import BASELINES, IntervalPolicy, PageStatePolicy
from bayesrate.scheduler.decide import plan, priority, select_polite, token_cap
from bayesrate.scheduler.optimal import optimal_rates, periodic_freshness
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState
from bayesrate.seeds import rng_from
from bayesrate.sufficient import IntervalStats

POLICIES = (*BASELINES, "bayesrate", "oracle-hindsight")
#: a baseline's fetches must reach this share of the budget (tokens forbid more than 100%)
BUDGET_TOLERANCE = 0.02
#: the quantile of the ``gamma-q0.3`` variant; ours re-plans every REPLAN_HOURS, floors
#: every URL at one fetch per FLOOR_DAYS (as ``schedule simulate``)
PLAN_QUANTILE = 0.3
REPLAN_HOURS = 24.0
FLOOR_DAYS = 60.0
#: our variants (SchedulerConfig settings; ``drift: True`` takes σ from the caller):
#: ``bayesrate`` the package default (Gamma-ADF, planned from the expected freshness gain),
#: ``gamma-q0.3`` Gamma-ADF planned from the 0.3 posterior quantile (the default before
#: issue #15), ``gamma-mean`` Gamma-ADF planned from the posterior mean, ``grid`` the
#: log-rate grid posterior (expected gain), ``grid-drift`` the same with drift, ``periodic``
#: the default planned for periodic fetches (Cho & Garcia-Molina's freshness, the objective
#: that matches the replay's fetches; ``objective`` is the planner's, not a config setting),
#: ``unhedged`` the default with no share of the budget spread uniformly whatever ``hedge``
#: says (``hedge`` is the planner's too; every other variant hedges as told)
OURS: dict[str, dict[str, Any]] = {
    "bayesrate": {},
    "unhedged": {"hedge": 0.0},
    "periodic": {"objective": "periodic"},
    "gamma-q0.3": {"posterior": "gamma", "plan_expected": False, "plan_quantile": PLAN_QUANTILE},
    "gamma-mean": {"posterior": "gamma", "plan_expected": False, "plan_quantile": None},
    "grid": {"posterior": "grid"},
    "grid-drift": {"posterior": "grid", "drift": True},
}
#: the shares of the budget spread uniformly that :func:`hedge_by_backtest` tries
HEDGE_SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: σ_rw candidates (per √day) for :func:`drift_by_evidence`
DRIFT_CANDIDATES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


# --------------------------------------------------------------------------- exact scoring
def staleness_integrals(
    history: ChangeHistory,
    fetch_page: np.ndarray,
    fetch_time: np.ndarray,
    window: tuple[float, float],
    copy_time: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact fresh, harmonic-staleness and live hours per page over ``window``.

    Parameters
    ----------
    history
        The pages' exact change times and lifetimes.
    fetch_page, fetch_time
        Every fetch of the policy (page position, time), any order.
    window
        ``(start, end)``: only time in ``[start, end)`` while a page exists counts.
    copy_time
        Per page, the fetch that produced the copy held at ``start`` (NaN: none — the page
        is stale from its creation until its first fetch).

    Returns
    -------
    fresh, harmonic, live
        Per page: hours in which the copy was fresh; ``∫ H(n(t)) dt`` with ``n(t)`` the
        number of changes since the last fetch; hours alive in the window.

    Notes
    -----
    A fetch at ``t`` sees every change at or before ``t``. A change with rank ``r`` since
    the last fetch before it raises ``H`` by ``1/r`` until the next fetch at or after it;
    the first one (``r = 1``) ends freshness until then.
    """
    lo, hi = window
    n = history.n_pages
    # events that make the copy stale: changes, plus the creation of pages never fetched
    never = np.isnan(copy_time)
    first_life = history.life_offsets[:-1]
    created = never & (history.life_start[first_life] > history.start)
    ev_page = np.concatenate([history.change_page, np.flatnonzero(created)])
    ev_time = np.concatenate([history.times, history.life_start[first_life][created]])
    order = np.lexsort((ev_time, ev_page))
    ev_page, ev_time = ev_page[order], ev_time[order]
    ev_offsets = np.concatenate([[0], np.cumsum(np.bincount(ev_page, minlength=n))])
    # fetches, with the copy held at the start as a fetch
    has_copy = ~never
    f_page = np.concatenate([np.asarray(fetch_page, np.int64), np.flatnonzero(has_copy)])
    f_time = np.concatenate([np.asarray(fetch_time, np.float64), copy_time[has_copy]])
    order = np.lexsort((f_time, f_page))
    f_page, f_time = f_page[order], f_time[order]
    f_offsets = np.concatenate([[0], np.cumsum(np.bincount(f_page, minlength=n))])

    nxt = segment_searchsorted(f_time, f_offsets, ev_page, ev_time, side="left")
    seg_end = np.where(
        nxt < f_offsets[ev_page + 1], f_time[np.minimum(nxt, len(f_time) - 1)], np.inf
    )
    prev = nxt - 1
    prev_time = np.where(prev >= f_offsets[ev_page], f_time[np.maximum(prev, 0)], -np.inf)
    first_after_prev = segment_searchsorted(ev_time, ev_offsets, ev_page, prev_time, side="right")
    rank = np.arange(len(ev_time)) - first_after_prev + 1
    seg_live = _live_overlap(history, ev_page, ev_time, seg_end, lo, hi)
    stale = np.bincount(ev_page, weights=seg_live * (rank == 1), minlength=n)
    harmonic = np.bincount(ev_page, weights=seg_live / rank, minlength=n)
    live = _live_overlap(history, np.arange(n), np.full(n, -np.inf), np.full(n, np.inf), lo, hi)
    return live - stale, harmonic, live


def _live_overlap(
    history: ChangeHistory, page: np.ndarray, a: np.ndarray, b: np.ndarray, lo: float, hi: float
) -> np.ndarray:
    """Hours of ``[a, b) ∩ [lo, hi)`` during which the page exists (vectorised by lifetime)."""
    out = np.zeros(len(page))
    lives = np.diff(history.life_offsets)[page]
    a = np.maximum(a, lo)
    b = np.minimum(b, hi)
    for j in range(int(lives.max(initial=0))):
        sel = np.flatnonzero(lives > j)
        life = history.life_offsets[page[sel]] + j
        start = np.maximum(a[sel], history.life_start[life])
        end = np.minimum(b[sel], history.life_end[life])
        out[sel] += np.maximum(end - start, 0.0)
    return out


# --------------------------------------------------------------------------- setup
@dataclass(frozen=True, eq=False)
class Replay:
    """The pages, window, weights and warm-up log every policy shares."""

    history: ChangeHistory  # the pages that exist at some time in the window
    start: float
    end: float
    tick: float
    weights: np.ndarray
    warmup: Crawl
    copy_time: np.ndarray  # per page: last warm-up visit (NaN: none)
    warmup_offsets: np.ndarray  # per page: warm-up visits (CSR into warmup_time/changed)
    warmup_time: np.ndarray
    warmup_changed: np.ndarray
    n_ticks: int
    on_ptr: np.ndarray  # CSR by tick: pages whose lifetime starts (become live)
    on_page: np.ndarray
    off_ptr: np.ndarray  # CSR by tick: pages whose lifetime ends
    off_page: np.ndarray

    @property
    def n(self) -> int:
        return self.history.n_pages

    @property
    def warmup_page(self) -> np.ndarray:
        """Page position of every warm-up visit."""
        return np.repeat(np.arange(self.n), np.diff(self.warmup_offsets))

    def budget_fetches(self, budget: float) -> float:
        """Total fetches the budget grants over the window (tokens of every tick)."""
        live = self.live_counts()
        return float(budget / HOURS_PER_DAY * self.tick * live.sum())

    def live_counts(self) -> np.ndarray:
        """Live pages at each tick."""
        on = np.diff(self.on_ptr)[: self.n_ticks]
        off = np.diff(self.off_ptr)[: self.n_ticks]
        return np.cumsum(on - off)


def warmup_crawl(
    history: ChangeHistory, start: float, every_hours: float = 24.0, seed: int | str = "warmup"
) -> Crawl:
    """The censored crawl log of everything before ``start`` that every policy sees."""
    if not history.start < start < history.end:
        raise ObservationError("start must lie inside the history", field="start")
    return crawl(history, FixedInterval(every_hours), f"{seed}-warmup", end=start)


def prepare(
    history: ChangeHistory,
    warmup: Crawl,
    *,
    start: float,
    days: float,
    weights: dict[str, float] | None = None,
    tick_hours: float = 0.5,
) -> Replay:
    """Select the pages alive in the window and line up their warm-up logs."""
    end = start + days * HOURS_PER_DAY
    if not (np.isfinite(days) and days > 0) or end > history.end:
        raise ObservationError(
            f"the window must have days > 0 and end by the end of the history "
            f"({days!r} days from the start)",
            field="days",
        )
    if not (np.isfinite(tick_hours) and tick_hours > 0):
        raise ObservationError("tick must be > 0 hours", field="tick_hours")
    overlaps = (history.life_start < end) & (history.life_end > start)
    pages = np.unique(history.life_page[overlaps])
    sub = history.subset(pages)
    w = np.ones(len(pages))
    if weights is not None:
        labels = sub.pages.index
        w = np.array([weights.get(p, np.nan) for p in labels], dtype=float)
        missing = np.flatnonzero(np.isnan(w))
        if len(missing):
            raise ObservationError(
                "pages without a weight in --weights", field="weight",
                pages=[labels[i] for i in missing],
            )  # fmt: skip
        if (w <= 0).any() or not np.isfinite(w).all():
            raise ObservationError("weights must be finite and > 0", field="weight")
    # warm-up visits of the selected pages
    position = np.full(history.n_pages, -1)
    position[pages] = np.arange(len(pages))
    obs = warmup.observations
    mine = position[warmup.history_page]
    counts = np.zeros(len(pages), dtype=np.int64)
    seen = mine >= 0
    counts[mine[seen]] = obs.visits_per_page[seen]
    starts = np.zeros(len(pages), dtype=np.int64)
    starts[mine[seen]] = obs.offsets[:-1][seen]
    idx = concat_ranges(starts, counts)
    copy = np.full(len(pages), np.nan)
    copy[counts > 0] = obs.time[starts[counts > 0] + counts[counts > 0] - 1]
    # lifetime starts/ends as tick events (a page is live at tick k if start <= t_k < end)
    n_ticks = int(np.ceil(days * HOURS_PER_DAY / tick_hours))
    life_page = sub.life_page
    on_tick = np.clip(np.ceil((sub.life_start - start) / tick_hours), 0, n_ticks).astype(np.int64)
    off_tick = np.clip(np.ceil((sub.life_end - start) / tick_hours), 0, n_ticks).astype(np.int64)
    keep = on_tick < off_tick
    on_ptr, on_page = _by_tick(on_tick[keep], life_page[keep], n_ticks)
    off_ptr, off_page = _by_tick(off_tick[keep], life_page[keep], n_ticks)
    return Replay(
        history=sub,
        start=start,
        end=end,
        tick=tick_hours,
        weights=w,
        warmup=warmup,
        copy_time=copy,
        n_ticks=n_ticks,
        warmup_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        warmup_time=obs.time[idx],
        warmup_changed=obs.changed[idx],
        on_ptr=on_ptr,
        on_page=on_page,
        off_ptr=off_ptr,
        off_page=off_page,
    )


def _by_tick(tick: np.ndarray, page: np.ndarray, n_ticks: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(tick, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(tick, minlength=n_ticks + 1))])
    return ptr, page[order]


# --------------------------------------------------------------------------- policies
def _warm_intervals(policy: IntervalPolicy, replay: Replay) -> None:
    """Replay the warm-up log through an interval policy's update rule."""
    counts = np.diff(replay.warmup_offsets)
    if isinstance(policy, PageStatePolicy):  # exposure update: order-free totals
        later = np.ones(len(replay.warmup_time), dtype=bool)
        later[replay.warmup_offsets[:-1][counts > 0]] = False
        policy.alpha += np.bincount(
            replay.warmup_page, weights=replay.warmup_changed * later, minlength=replay.n
        )
        first = np.full(replay.n, np.nan)
        first[counts > 0] = replay.warmup_time[replay.warmup_offsets[:-1][counts > 0]]
        policy.beta += np.nan_to_num(replay.copy_time - first)
        policy.interval = policy._interval(np.arange(replay.n))
        return
    order = np.argsort(-counts, kind="stable")
    descending = -counts[order]
    for r in range(1, int(counts.max(initial=0))):
        rows = order[: np.searchsorted(descending, -(r + 1), side="right")]
        policy.update(rows, replay.warmup_changed[replay.warmup_offsets[rows] + r].astype(bool))


class IntervalReplay:
    """A production baseline (:mod:`~bayesrate.scheduler.baselines`) in the replay."""

    def __init__(self, name: str, replay: Replay, scale: float, rng: np.random.Generator):
        self.name = name
        self.policy = BASELINES[name](replay.n, scale)
        _warm_intervals(self.policy, replay)
        # first revisits staggered over one interval from the start; new pages at creation
        first_life = replay.history.life_offsets[:-1]
        born = np.maximum(replay.history.life_start[first_life], replay.start)
        if isinstance(self.policy, PageStatePolicy):
            self.policy.last = np.where(np.isnan(replay.copy_time), born, replay.copy_time)
        stagger = replay.start + self.policy.interval * rng.uniform(0.0, 1.0, replay.n)
        self.policy.next_due = np.where(np.isnan(replay.copy_time), born, stagger)

    def priority(self, now: float) -> np.ndarray:
        return self.policy.priority(now)

    def observe(self, rows: np.ndarray, now: float, changed: np.ndarray) -> None:
        self.policy.observe(rows, now, changed)


def warm_state(state: SchedulerState, replay: Replay) -> np.ndarray | None:
    """Apply the warm-up log to the per-URL posteriors (:meth:`SchedulerState.observe_log`);
    returns the grid filter's log-evidence per page (``None`` for Gamma posteriors)."""
    return state.observe_log(replay.warmup_offsets, replay.warmup_time, replay.warmup_changed)


def ours_config(replay: Replay, variant: str, drift: float | None = None) -> SchedulerConfig:
    """The scheduler configuration of one of our variants (:data:`OURS`) in the replay."""
    if variant not in OURS:
        raise ObservationError(f"unknown variant {variant!r}; one of {sorted(OURS)}", field="ours")
    settings = dict(OURS[variant])
    settings.pop("objective", None)
    settings.pop("hedge", None)
    if settings.pop("drift", None):
        if drift is None:
            raise ObservationError(f"{variant!r} needs a drift σ (per √day)", field="drift")
        settings["drift"] = float(drift)
    return SchedulerConfig(
        min_interval=replay.tick,
        max_interval=max(FLOOR_DAYS, 2 * (replay.end - replay.start) / HOURS_PER_DAY)
        * HOURS_PER_DAY,
        **settings,
    )


def drift_by_evidence(
    replay: Replay, priors: PriorSet, sigmas: tuple[float, ...] = DRIFT_CANDIDATES
) -> tuple[float, dict[float, float]]:
    """``σ_rw`` (per √day) maximising the grid filter's marginal likelihood of the warm-up
    log, among ``sigmas``; and the total log-evidence of each (the future is not used)."""
    evidence = {}
    labels = replay.history.pages.index.astype(str).tolist()
    domains = replay.history.pages["domain"].astype(str).tolist()
    for sigma in sigmas:
        state = SchedulerState(priors, SchedulerConfig(posterior="grid", drift=float(sigma)))
        state.add(labels, domains)
        evidence[float(sigma)] = float(np.sum(warm_state(state, replay)))
    best = max(evidence, key=evidence.__getitem__)
    return best, evidence


def exploration_floor(budget_h: float, n: int) -> float:
    """Ours' floor per URL (fetches per hour): one fetch per FLOOR_DAYS, at most half of an
    even share of the budget ``budget_h`` (fetches per hour) over ``n`` URLs."""
    return min(1.0 / (FLOOR_DAYS * HOURS_PER_DAY), 0.5 * budget_h / max(n, 1))


def hedge_by_backtest(
    replay: Replay,
    priors: PriorSet,
    budget: float,
    *,
    config: SchedulerConfig,
    objective: str = "freshness",
    shares: tuple[float, ...] = HEDGE_SHARES,
) -> tuple[float, dict[str, Any]]:
    """The hedge share that would have kept the warm-up log's last stretch freshest.

    The warm-up log (never the window) is split at ``split = start − H`` with ``H`` the
    window's length, at most half of the log's span. Posteriors from the priors and the
    visits before the split plan the budget at the split (as ours does, with each hedge
    share in ``shares``) over the URLs seen both before and after it. Each plan is scored
    by its freshness on what came after: a URL fetched every ``1/f`` is fresh a share
    ``(f/λ)(1 − e^{−λ/f})`` of the time (:func:`~bayesrate.scheduler.optimal.
    periodic_freshness`: the replay fetches when a planned interval has elapsed), with
    ``λ`` the Cho & Garcia-Molina estimate from the URL's intervals after the split; URLs
    are weighted by weight × observed hours. The best share wins (ties: the smaller).

    Parameters
    ----------
    replay
        The replay; only its warm-up log, pages and weights are read.
    priors
        Ours' priors.
    budget
        Fetches per live page per day.
    config, objective
        The variant's scheduler configuration and planning objective.
    shares
        Candidate shares in ``[0, 1]``.

    Returns
    -------
    share, backtest
        The chosen share; and ``{"split", "holdout_days", "pages", "freshness": {share:
        score}}`` (``pages`` 0 and no scores when the log has no URL seen on both sides of
        the split: the share is then 0).
    """
    from bayesrate.estimators.batch import cho

    times = replay.warmup_time
    out: dict[str, Any] = {"split": None, "holdout_days": 0.0, "pages": 0, "freshness": {}}
    if len(times) == 0:
        return 0.0, out
    holdout = min(replay.end - replay.start, 0.5 * (replay.start - float(times.min())))
    split = replay.start - holdout
    page = replay.warmup_page
    before = times < split
    # each page's visits are in time order: the ones before the split are a prefix
    counts = np.bincount(page[before], minlength=replay.n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # intervals ending after the split (a visit after it that is not its page's first)
    first = np.zeros(len(times), dtype=bool)
    first[replay.warmup_offsets[:-1][np.diff(replay.warmup_offsets) > 0]] = True
    after = np.flatnonzero(~before & ~first)
    stats = IntervalStats.from_groups(
        page[after], times[after] - times[after - 1], np.ones(len(after)),
        replay.warmup_changed[after], replay.n,
    )  # fmt: skip
    rows = np.flatnonzero((counts > 0) & (stats.n_intervals > 0))
    out.update(split=_iso(split), holdout_days=holdout / HOURS_PER_DAY, pages=len(rows))
    if len(rows) == 0 or holdout <= 0:
        return 0.0, out
    state = SchedulerState(priors, config, capacity=replay.n)
    labels = replay.history.pages.index.astype(str).tolist()
    state.add(labels, replay.history.pages["domain"].astype(str).tolist(), replay.weights)
    state.observe_log(offsets, times[before], replay.warmup_changed[before])
    lam = cho(stats).rate[rows]
    w = replay.weights[rows] * stats.exposure[rows]
    budget_h = budget / HOURS_PER_DAY * len(rows)
    floor = exploration_floor(budget_h, len(rows))
    rng = rng_from("hedge-backtest")
    scores = {}
    for share in shares:
        target = plan(
            state, budget_h, objective=objective, floor=floor, rng=rng, now=split, rows=rows,
            hedge=share,
        )  # fmt: skip
        scores[float(share)] = float(w @ periodic_freshness(lam, target[rows]) / w.sum())
    best = max(scores.values())
    chosen = min(s for s, v in scores.items() if v == best)
    out["freshness"] = scores
    return chosen, out


class PlannedReplay:
    """Ours (learns from fetches) or the hindsight oracle (plans with realised rates)."""

    def __init__(
        self,
        name: str,
        replay: Replay,
        priors: PriorSet,
        budget: float,
        rng: np.random.Generator,
        *,
        rates: np.ndarray | None = None,
        config: SchedulerConfig | None = None,
        objective: str = "freshness",
        hedge: float = 0.0,
    ) -> None:
        self.name = name
        self.objective = objective
        self.hedge = hedge
        self.replay = replay
        self.rates = rates
        self.budget = budget
        self.rng = rng
        config = config if config is not None else ours_config(replay, "bayesrate")
        self.state = SchedulerState(priors, config, capacity=replay.n)
        labels = replay.history.pages.index.astype(str).tolist()
        self.urls = labels
        self.state.add(labels, replay.history.pages["domain"].astype(str).tolist(), replay.weights)
        warm_state(self.state, replay)
        self.next_plan = -np.inf
        self.live = np.zeros(replay.n, dtype=bool)

    def set_live(self, live: np.ndarray) -> None:
        self.live = live

    def _plan(self, now: float) -> None:
        live = np.flatnonzero(self.live)
        target = self.state.target
        target[:] = 0.0
        if len(live) == 0:
            return
        budget_h = self.budget / HOURS_PER_DAY * len(live)
        if self.rates is not None:
            target[live] = self.rates[live]
            return
        plan(
            self.state, budget_h, objective=self.objective, floor=exploration_floor(budget_h,
            len(live)), rng=self.rng, now=now, rows=live, hedge=self.hedge,
        )  # fmt: skip

    def priority(self, now: float) -> np.ndarray:
        if now >= self.next_plan:
            self._plan(now)
            self.next_plan = now + REPLAN_HOURS
        return priority(self.state, now)

    def observe(self, rows: np.ndarray, now: float, changed: np.ndarray) -> None:
        if self.rates is None:
            self.state.observe([self.urls[i] for i in rows], np.full(len(rows), now), changed)
        else:  # the oracle needs only the fetch times
            self.state.last_fetch[rows] = now


def hindsight_rates(replay: Replay, budget: float, objective: str = "periodic") -> np.ndarray:
    """The freshness optimum with each page's realised rate in the window (fetches per hour).

    With ``L`` live hours and ``N`` changes in the window (a creation in the window counts:
    the page is stale until fetched), fetching a page ``q`` times is a freshness problem
    with weights ``w·L``, rates ``N`` and budget = the window's total fetches; ``p = q / L``.
    ``objective``: ``"periodic"`` (default: Cho & Garcia-Molina, as the replay fetches a
    page when its planned interval has elapsed) or ``"freshness"`` (Azar's, for
    Poisson-timed fetches; :mod:`bayesrate.scheduler.optimal`).
    """
    h = replay.history
    n = replay.n
    live = _live_overlap(
        h, np.arange(n), np.full(n, -np.inf), np.full(n, np.inf), replay.start, replay.end
    )
    first_life = h.life_offsets[:-1]
    # a page without a copy is stale from its creation: one change to catch up with
    created = np.isnan(replay.copy_time) & (h.life_start[first_life] > h.start)
    changes = h.count_changes(np.arange(n), np.full(n, replay.start), np.full(n, replay.end))
    realised = changes + created
    q = optimal_rates(
        replay.weights * live,
        realised.astype(float),
        replay.budget_fetches(budget),
        objective=objective,
    )
    return np.divide(q, live, out=np.zeros(n), where=live > 0)


# --------------------------------------------------------------------------- the run
@dataclass
class ReplayResult:
    """Per policy: ``freshness``, ``harmonic_staleness`` (weighted time averages),
    ``fetches``; plus the setup and throughput."""

    policies: dict[str, dict[str, Any]]
    setup: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"policies": {NAME: {"freshness", "harmonic_staleness", "fetches"}}}``."""
        keys = ("freshness", "harmonic_staleness", "fetches")
        return {"policies": {n: {k: r[k] for k in keys} for n, r in self.policies.items()}}


def run_policies(
    replay: Replay, policies: list[Any], budget: float | None
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, float]]:
    """Run policies in lockstep over the window; their fetches (page, time) and timing.

    ``budget=None`` runs unconstrained (every due page is fetched; for calibration).
    """
    n, dt = replay.n, replay.tick
    h = replay.history
    live = np.zeros(n, dtype=bool)
    last = {p.name: replay.copy_time.copy() for p in policies}
    tokens = dict.fromkeys((p.name for p in policies), 0.0)
    fetched: dict[str, list[tuple[np.ndarray, float]]] = {p.name: [] for p in policies}
    decisions = 0
    no_hosts = np.zeros(n, dtype=np.int64)  # one site: no politeness limit in the replay
    no_rows = np.zeros(0, dtype=np.int64)
    t0 = _time.perf_counter()
    for k in range(replay.n_ticks):
        now = replay.start + k * dt
        live[replay.on_page[replay.on_ptr[k] : replay.on_ptr[k + 1]]] = True
        live[replay.off_page[replay.off_ptr[k] : replay.off_ptr[k + 1]]] = False
        n_live = int(live.sum())
        decisions += n_live * len(policies)
        for pol in policies:
            if hasattr(pol, "set_live"):
                pol.set_live(live)
            score = np.where(live, pol.priority(now), -np.inf)
            if budget is None:
                rows = np.flatnonzero(score > -np.inf)
            else:
                grant = budget / HOURS_PER_DAY * n_live * dt
                tokens[pol.name] = min(tokens[pol.name] + grant, token_cap(budget * n_live))
                m = int(tokens[pol.name])
                rows = select_polite(score, m, no_hosts, None) if m else no_rows
                tokens[pol.name] -= len(rows)
            if len(rows) == 0:
                continue
            prev = last[pol.name][rows]
            first = np.isnan(prev)
            count = h.count_changes(rows, np.where(first, -np.inf, prev), np.full(len(rows), now))
            changed = ((count > 0) & ~first).astype(np.int8)
            pol.observe(rows, now, changed)
            last[pol.name][rows] = now
            fetched[pol.name].append((rows, now))
    loop = _time.perf_counter() - t0
    out = {}
    for name, parts in fetched.items():
        if parts:
            pages = np.concatenate([r for r, _ in parts])
            times = np.concatenate([np.full(len(r), t) for r, t in parts])
        else:
            pages, times = np.zeros(0, np.int64), np.zeros(0)
        out[name] = (pages, times)
    return out, {"loop_seconds": loop, "decisions": float(decisions)}


def score_fetches(replay: Replay, pages: np.ndarray, times: np.ndarray) -> dict[str, Any]:
    """Weighted freshness and harmonic staleness of one policy's fetches (exact)."""
    fresh, harmonic, live = staleness_integrals(
        replay.history, pages, times, (replay.start, replay.end), replay.copy_time
    )
    w = replay.weights
    total = float(w @ live)
    return {
        "freshness": float(w @ fresh) / total,
        "harmonic_staleness": float(w @ harmonic) / total,
        "fetches": len(pages),
    }


def calibrate_scale(
    replay: Replay, name: str, budget: float, seed: int | str, max_runs: int = 24
) -> tuple[float, int]:
    """Interval scale at which a baseline uses the budget to within BUDGET_TOLERANCE.

    Secant steps on ``log scale`` for the unconstrained fetch count, then shrink under the
    token budget until the fetches reach ``1 − BUDGET_TOLERANCE / 2`` of it.
    """
    target = replay.budget_fetches(budget)
    cls = BASELINES[name]
    start = 7 * HOURS_PER_DAY if cls is PageStatePolicy else cls.start
    scale = (HOURS_PER_DAY / budget) / start
    runs = 0
    prev: tuple[float, float] | None = None
    gamma = 1.0

    def fetches(s: float, constrained: bool) -> int:
        pol = IntervalReplay(name, replay, s, rng_from(f"{seed}-{name}"))
        out, _ = run_policies(replay, [pol], budget if constrained else None)
        return len(out[name][0])

    for _ in range(max_runs // 2):
        got = fetches(scale, constrained=False)
        runs += 1
        ratio = max(got, 1) / target
        if abs(ratio - 1) <= BUDGET_TOLERANCE / 4:
            break
        if prev is not None and got != prev[1] and scale != prev[0] and got > 0 and prev[1] > 0:
            g = -np.log(got / prev[1]) / np.log(scale / prev[0])
            gamma = float(np.clip(g, 0.2, 5.0))
        prev = (scale, got)
        scale *= ratio ** (1.0 / gamma)
    for _ in range(max_runs - runs):
        got = fetches(scale, constrained=True)
        runs += 1
        ratio = got / target
        if ratio >= 1 - BUDGET_TOLERANCE / 2:
            break
        scale *= max(ratio, 0.5) ** 2
    return scale, runs


def replay_policies(
    replay: Replay,
    *,
    budget: float,
    priors: PriorSet,
    seed: int | str = "bayesrate-replay",
    progress: Callable[[str], None] = lambda message: None,
    ours: tuple[str, ...] = ("bayesrate",),
    drift: float | None = None,
    hedge: float | str = "auto",
) -> ReplayResult:
    """Calibrate the baselines, run them, our ``ours`` variants (:data:`OURS`; ``drift``:
    σ_rw per √day for ``grid-drift``) and the hindsight oracle, score them exactly.

    ``hedge``: the share of ours' budget spread uniformly (:func:`~bayesrate.scheduler.
    decide.plan`), or ``"auto"`` (default): per variant, the share
    :func:`hedge_by_backtest` picks on the warm-up log. ``unhedged`` always plans with 0.
    Each of ours' results holds its ``hedge`` (and ``hedge_backtest`` when chosen)."""
    if hedge != "auto" and not (isinstance(hedge, (int, float)) and 0.0 <= hedge <= 1.0):
        raise ObservationError(
            f"hedge must be 'auto' or a share of the budget in [0, 1], got {hedge!r}",
            field="hedge",
        )
    if not (np.isfinite(budget) and budget > 0):
        raise ObservationError(f"budget must be > 0 fetches per page per day, got {budget!r}")
    if replay.budget_fetches(budget) < 1:
        raise ObservationError(
            f"the window grants {replay.budget_fetches(budget):.3g} fetches at budget "
            f"{budget:g} per live page per day: fewer than one; replay a longer window",
            field="budget",
        )
    t_start = _time.perf_counter()
    seconds: dict[str, float] = {}
    scales = {}
    for name in BASELINES:
        t = _time.perf_counter()
        scales[name], runs = calibrate_scale(replay, name, budget, seed)
        seconds[f"calibrate_{name}"] = took = _time.perf_counter() - t
        progress(f"  calibrated {name}: scale {scales[name]:.4g} in {runs} runs ({took:.1f} s)")
    t = _time.perf_counter()
    policies: list[Any] = [
        IntervalReplay(name, replay, scales[name], rng_from(f"{seed}-{name}")) for name in BASELINES
    ]
    hedges: dict[str, tuple[float, dict[str, Any] | None]] = {}
    for variant in ours:
        config = ours_config(replay, variant, drift)
        objective = OURS[variant].get("objective", "freshness")
        share = OURS[variant].get("hedge", hedge)
        backtest = None
        if share == "auto":
            share, backtest = hedge_by_backtest(
                replay, priors, budget, config=config, objective=objective
            )
            progress(f"  {variant}: hedge {share:g} by backtest on the warm-up log "
                     f"({backtest['holdout_days']:.0f} days held out)")  # fmt: skip
        hedges[variant] = (float(share), backtest)
        policies.append(
            PlannedReplay(
                variant, replay, priors, budget, rng_from(f"{seed}-ours"), config=config,
                objective=objective, hedge=float(share),
            )
        )  # fmt: skip
    policies.append(
        PlannedReplay(
            "oracle-hindsight", replay, priors, budget, rng_from(f"{seed}-oracle"),
            rates=hindsight_rates(replay, budget),
        )
    )  # fmt: skip
    seconds["setup_policies"] = _time.perf_counter() - t
    fetches, timing = run_policies(replay, policies, budget)
    seconds["replay_loop"] = timing["loop_seconds"]
    target = replay.budget_fetches(budget)
    results = {}
    for pol in policies:
        r = score_fetches(replay, *fetches[pol.name])
        r["fetches_vs_budget"] = r["fetches"] / target
        if pol.name in scales:
            r["interval_scale"] = scales[pol.name]
        if pol.name in hedges:
            r["hedge"], backtest = hedges[pol.name]
            if backtest is not None:
                r["hedge_backtest"] = backtest
        results[pol.name] = r
    idle = [name for name, r in results.items() if r["fetches"] == 0]
    if idle:
        raise ObservationError(
            f"no fetch in the window by {', '.join(idle)} (budget {budget:g}, "
            f"{target:.3g} fetches granted): a window without fetches is no result",
            field="budget",
        )
    seconds["total"] = _time.perf_counter() - t_start
    total_fetches = sum(r["fetches"] for r in results.values())
    setup = {
        "pages": replay.n,
        "start": _iso(replay.start),
        "days": (replay.end - replay.start) / HOURS_PER_DAY,
        "budget_per_live_page_per_day": budget,
        "budget_fetches": target,
        "tick_hours": replay.tick,
        "live_pages_min_max": [int(replay.live_counts().min()), int(replay.live_counts().max())],
        "changes_in_window": int(
            replay.history.count_changes(
                np.arange(replay.n), np.full(replay.n, replay.start), np.full(replay.n, replay.end)
            ).sum()
        ),
        "weights": "equal" if np.all(replay.weights == 1) else "given",
        "warmup_visits": len(replay.warmup_time),
        "priors": dict(priors.metadata).get("model", "artifact"),
        "decisions_per_second": timing["decisions"] / max(timing["loop_seconds"], 1e-9),
        "fetches_per_second": total_fetches / max(timing["loop_seconds"], 1e-9),
    }
    return ReplayResult(results, setup, seconds, replay.history.notes)


def _iso(hours: float) -> str:
    from bayesrate.clock import to_timestamp

    return to_timestamp(hours).isoformat()


# --------------------------------------------------------------------------- several seeds
#: the scores summarised over seeds
SEED_METRICS = ("freshness", "harmonic_staleness")


def seed_names(seed: int | str, k: int) -> list[str]:
    """``k`` replay seeds: ``seed`` itself first (one seed reproduces a single replay),
    then ``seed-1`` … ``seed-(k−1)``."""
    if k < 1:
        raise ObservationError(f"need at least one seed, got {k!r}", field="seeds")
    return [str(seed)] + [f"{seed}-{i}" for i in range(1, k)]


def summarize_seeds(results: list[ReplayResult], ours: tuple[str, ...]) -> dict[str, Any]:
    """Each policy's mean and sd over seeds, and ours paired against each production policy.

    Parameters
    ----------
    results
        One :class:`ReplayResult` per seed (each seed: its own warm-up phases and policy
        randomness; the same pages, window and budget).
    ours
        Our variants' names (the rest of :data:`BASELINES` are the production policies).

    Returns
    -------
    dict
        ``seeds``; ``policies[name][metric] = {"mean", "sd", "per_seed"}`` (``sd`` with
        ``ddof=1``, ``None`` for one seed) for ``freshness`` and ``harmonic_staleness``,
        plus the mean ``fetches`` and, for ours, the ``hedge`` share per seed;
        ``paired[ours][baseline]`` = the freshness difference
        ours − baseline per seed: ``mean``, ``se`` (its sd / √K, ``None`` for one seed),
        ``wins`` (seeds where ours is fresher) and ``seeds``.
    """
    if not results:
        raise ObservationError("no replay results to summarise", field="seeds")
    k = len(results)
    names = list(results[0].policies)
    policies: dict[str, dict[str, Any]] = {}
    for name in names:
        entry: dict[str, Any] = {}
        for metric in SEED_METRICS:
            x = np.array([r.policies[name][metric] for r in results], dtype=float)
            entry[metric] = {
                "mean": float(x.mean()),
                "sd": float(x.std(ddof=1)) if k > 1 else None,
                "per_seed": x.tolist(),
            }
        entry["fetches"] = float(np.mean([r.policies[name]["fetches"] for r in results]))
        if "hedge" in results[0].policies[name]:
            entry["hedge"] = [r.policies[name]["hedge"] for r in results]
        policies[name] = entry
    paired: dict[str, dict[str, Any]] = {}
    for mine in ours:
        paired[mine] = {}
        for base in BASELINES:
            d = np.array(policies[mine]["freshness"]["per_seed"]) - np.array(
                policies[base]["freshness"]["per_seed"]
            )
            paired[mine][base] = {
                "mean": float(d.mean()),
                "se": float(d.std(ddof=1) / np.sqrt(k)) if k > 1 else None,
                "wins": int((d > 0).sum()),
                "seeds": k,
            }
    return {"seeds": k, "policies": policies, "paired": paired}
