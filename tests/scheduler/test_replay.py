"""Scheduler replay on exact histories: exact freshness, equal budgets, the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main
from bayesrate.errors import ObservationError
from bayesrate.history import ChangeHistory
from bayesrate.priors import PriorSet
from bayesrate.scheduler import replay
from bayesrate.scheduler.baselines import BASELINES
from bayesrate.scheduler.optimal import azar_rates

T0 = pd.Timestamp("2024-01-01", tz="UTC")
H0 = T0.value / 3.6e12


def ts(hours: float) -> str:
    return (T0 + pd.Timedelta(hours=hours)).isoformat()


def test_staleness_integrals_by_hand():
    rows = [
        ["a", ts(2), "changed"],
        ["a", ts(3), "changed"],
        ["a", ts(7), "changed"],
        ["b", ts(4), "created"],
        ["b", ts(6), "changed"],
        ["b", ts(9), "deleted"],
        ["c", ts(-1), "changed"],
    ]
    h = ChangeHistory.from_frame(pd.DataFrame(rows, columns=["page", "time", "event"]), end=ts(10))
    assert list(h.pages.index) == ["a", "b", "c"]
    fetch_page = np.array([0, 0, 1, 2])
    fetch_time = np.array([5.0, 8.0, 5.0, 1.0]) + H0
    copy = np.array([0.0, np.nan, -2.0]) + H0
    fresh, harmonic, live = replay.staleness_integrals(
        h, fetch_page, fetch_time, (H0, H0 + 10), copy
    )
    # a: stale [2,5) with n = 1 then 2, and [7,8) with n = 1
    # b: exists [4,9); stale from its creation to the fetch at 5, and from 6 to its deletion
    # c: the change at -1 (after its copy at -2) keeps it stale until the fetch at 1
    assert live.tolist() == pytest.approx([10.0, 5.0, 10.0])
    assert fresh.tolist() == pytest.approx([6.0, 1.0, 9.0])
    assert harmonic.tolist() == pytest.approx([1 + 1.5 * 2 + 1, 1 + 3, 1.0])


def synthetic_history(seed: str, n_pages: int = 40, days: float = 120.0) -> ChangeHistory:
    rng = np.random.default_rng(int.from_bytes(seed.encode(), "little") % 2**32)
    rows = []
    for i in range(n_pages):
        rate = np.exp(rng.normal(np.log(0.3), 1.2)) / 24  # per hour
        born = 0.0 if i < 30 else rng.uniform(20, 110) * 24
        died = rng.uniform(100, 119) * 24 if i % 9 == 0 else None
        if born > 0:
            rows.append([f"p{i:02d}", ts(born), "created"])
        end = died if died is not None else days * 24
        t = born + rng.exponential(1 / rate)
        while t < end:
            rows.append([f"p{i:02d}", ts(t), "changed"])
            t += rng.exponential(1 / rate)
        if died is not None:
            rows.append([f"p{i:02d}", ts(died), "deleted"])
    frame = pd.DataFrame(rows, columns=["page", "time", "event"])
    frame["domain"] = np.where(frame["page"] < "p20", "x", "y")
    return ChangeHistory.from_frame(frame, end=ts(days * 24))


def brute_force_freshness(setup, pages, times, step=0.01):
    """Freshness and harmonic staleness by evaluating the state on a fine time grid."""
    h = setup.history
    grid = np.arange(setup.start, setup.end, step) + step / 2
    fresh = harm = live_total = 0.0
    for i in range(h.n_pages):
        lives = [
            (h.life_start[j], h.life_end[j])
            for j in range(h.life_offsets[i], h.life_offsets[i + 1])
        ]
        alive = np.zeros(len(grid), dtype=bool)
        for a, b in lives:
            alive |= (grid >= a) & (grid < b)
        f = np.sort(np.concatenate([times[pages == i], [setup.copy_time[i]]]))
        f = f[~np.isnan(f)]
        events = h.times[h.offsets[i] : h.offsets[i + 1]]
        if np.isnan(setup.copy_time[i]) and h.life_start[h.life_offsets[i]] > h.start:
            events = np.sort(np.append(events, h.life_start[h.life_offsets[i]]))
        last = np.searchsorted(f, grid, side="right") - 1
        since = np.where(last >= 0, f[np.maximum(last, 0)], -np.inf)
        n = np.searchsorted(events, grid, side="right") - np.searchsorted(events, since, "right")
        hn = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n.max(initial=0) + 1))])[n]
        fresh += step * np.sum(alive & (n == 0))
        harm += step * np.sum(hn * alive)
        live_total += step * alive.sum()
    return fresh / live_total, harm / live_total


@pytest.mark.slow
def test_replay_budgets_and_exact_scores():
    h = synthetic_history("replay")
    start = H0 + 90 * 24
    warm = replay.warmup_crawl(h, start, 24.0, seed="t")
    setup = replay.prepare(h, warm, start=start, days=20, tick_hours=1.0)
    assert setup.n == h.n_pages - 0  # every page exists at some time in the window
    budget = 1 / 3
    result = replay.replay_policies(setup, budget=budget, priors=PriorSet.default(), seed="t")
    shape = result.to_json()
    assert set(shape["policies"]) == set(replay.POLICIES)
    for name, r in result.policies.items():
        assert 0.98 <= r["fetches_vs_budget"] <= 1.0 + 1e-9, name
        assert set(shape["policies"][name]) == {"freshness", "harmonic_staleness", "fetches"}
    # the exact integrals agree with a brute-force time grid for two policies' real fetches
    policies = [
        replay.IntervalReplay("uniform", setup, 1.0, np.random.default_rng(1)),
        replay.PlannedReplay(
            "bayesrate", setup, PriorSet.default(), budget, np.random.default_rng(2)
        ),
    ]
    fetches, _ = replay.run_policies(setup, policies, budget)
    for name in ("uniform", "bayesrate"):
        exact = replay.score_fetches(setup, *fetches[name])
        approx_f, approx_h = brute_force_freshness(setup, *fetches[name])
        assert exact["freshness"] == pytest.approx(approx_f, abs=2e-3)
        assert exact["harmonic_staleness"] == pytest.approx(approx_h, abs=2e-3)


def _hindsight_problem(setup, start):
    live = replay._live_overlap(
        setup.history, np.arange(setup.n), np.full(setup.n, -np.inf), np.full(setup.n, np.inf),
        setup.start, setup.end,
    )  # fmt: skip
    counts = setup.history.count_changes(
        np.arange(setup.n), np.full(setup.n, start), np.full(setup.n, start + 480)
    )
    new = np.isnan(setup.copy_time)
    return live, (counts + new).astype(float)


def test_hindsight_rates_are_azar_on_window_counts():
    h = synthetic_history("hindsight")
    start = H0 + 90 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=20)
    p = replay.hindsight_rates(setup, 0.2, objective="freshness")
    live, n_changes = _hindsight_problem(setup, start)
    # fetches planned over the window equal the budget, and they solve Azar's problem
    assert (p * live).sum() == pytest.approx(setup.budget_fetches(0.2), rel=1e-9)
    q = azar_rates(live, n_changes, setup.budget_fetches(0.2))
    assert np.allclose(p * live, q)


def test_hindsight_rates_are_the_periodic_optimum_on_window_counts():
    """The default oracle plans for the replay's fetches (each due when its planned interval
    has elapsed: periodic): Cho & Garcia-Molina's first-order conditions hold, checked with
    the marginal freshness ``w((1 − e^{−x}) − x e^{−x})/N`` (``x = N/q``) written out."""
    h = synthetic_history("hindsight")
    start = H0 + 90 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=20)
    p = replay.hindsight_rates(setup, 0.2)
    live, n_changes = _hindsight_problem(setup, start)
    q = p * live
    assert q.sum() == pytest.approx(setup.budget_fetches(0.2), rel=1e-9)
    active = q > 0
    assert active.sum() >= 2 and (n_changes[active] > 0).all()
    assert (q[n_changes == 0] == 0).all()  # a page that never changes needs no fetch
    x = n_changes[active] / q[active]
    marginal = live[active] * (-np.expm1(-x) - x * np.exp(-x)) / n_changes[active]
    np.testing.assert_allclose(marginal, marginal.mean(), rtol=1e-8)
    # the abandoned pages are worth no more than the multiplier at zero fetches
    dropped = ~active & (n_changes > 0)
    assert (live[dropped] / n_changes[dropped] <= marginal.mean() * (1 + 1e-9)).all()
    assert not np.allclose(p, replay.hindsight_rates(setup, 0.2, objective="freshness"))


def test_replay_module_never_imports_pymc():
    code = (
        "import sys, bayesrate.scheduler.replay, bayesrate.commands.schedule_replay\n"
        "print([m for m in ('pymc', 'pytensor', 'arviz') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def small_history_files(tmp_path):
    """A 12-page history of 60 days as a CSV, and default priors saved beside it."""
    h_path = tmp_path / "h.csv"
    rows = []
    rng = np.random.default_rng(7)
    for i in range(12):
        for t in np.sort(rng.uniform(0, 60 * 24, rng.integers(2, 30))):
            rows.append([f"p{i}", ts(t)])
    pd.DataFrame(rows, columns=["page", "time"]).to_csv(h_path, index=False)
    return h_path, PriorSet.default().save(tmp_path / "priors")


@pytest.mark.slow
def test_cli_replay_json(tmp_path, capsys):
    h_path, priors = small_history_files(tmp_path)
    args = ["schedule", "replay", "--history", str(h_path), "--start", ts(40 * 24)]
    args += ["--days", "10", "--budget", "0.5", "--priors", str(priors), "--json"]
    assert main([*args, "--seeds", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"seeds", "policies", "paired"} and out["seeds"] == 3
    assert set(out["policies"]) == set(replay.POLICIES)
    # the paired statistics, recomputed from the per-seed scores
    ours = np.array(out["policies"]["bayesrate"]["freshness"]["per_seed"])
    for base in BASELINES:
        d = ours - np.array(out["policies"][base]["freshness"]["per_seed"])
        got = out["paired"]["bayesrate"][base]
        assert got["mean"] == pytest.approx(d.mean(), abs=1e-15)
        assert got["se"] == pytest.approx(np.sqrt(np.sum((d - d.mean()) ** 2) / 2 / 3))
        assert got["wins"] == int(np.sum(d > 0))
    # the seeds differ (warm-up phases, policy randomness); the first is --seed's own replay
    assert len(set(out["policies"]["uniform"]["freshness"]["per_seed"])) > 1
    assert main([*args, "--seeds", "1"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["policies"]["uniform"]["freshness"]["per_seed"] == [
        out["policies"]["uniform"]["freshness"]["per_seed"][0]
    ]
    assert single["paired"]["bayesrate"]["uniform"]["se"] is None
    # a missing required option is a usage error (exit 2)
    assert (
        main(["schedule", "replay", "--history", str(h_path), "--days", "1", "--budget", "1"]) == 2
    )
    assert main([*args[:5], "2024-01-01T00:00", *args[6:]]) == 1
    assert "no time zone" in capsys.readouterr().err


@pytest.mark.slow
def test_a_small_site_at_a_small_budget_gets_fetches_for_every_policy():
    """60 pages at 1/90 fetches per page per day grant 2/3 of a fetch a day: tokens capped at
    one day's grant never reached one fetch, and every policy (the oracle too) made none."""
    h = synthetic_history("small-site", n_pages=60, days=300.0)
    start = H0 + 200 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=90,
                           tick_hours=2.0)  # fmt: skip
    budget = 1 / 90
    assert setup.live_counts().max() * budget < 1  # a day grants less than one fetch
    result = replay.replay_policies(setup, budget=budget, priors=PriorSet.default(), seed="t")
    target = setup.budget_fetches(budget)
    for name, r in result.policies.items():
        assert r["fetches"] > 0, name
        assert r["fetches"] <= target + 1e-9, name
    # ours and the oracle plan their fetches and spend (nearly) all of them
    for name in ("bayesrate", "oracle-hindsight"):
        assert result.policies[name]["fetches"] >= 0.9 * target, name


def test_a_window_without_fetches_is_an_error():
    h = synthetic_history("small-site", n_pages=60, days=300.0)
    start = H0 + 200 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=1,
                           tick_hours=2.0)  # fmt: skip
    with pytest.raises(ObservationError, match="fewer than one"):
        replay.replay_policies(setup, budget=1 / 90, priors=PriorSet.default(), seed="t")


def test_summarize_seeds_by_hand():
    """Three seeds with hand-made scores: means, sds, paired differences, se and wins."""

    def result(scores):
        return replay.ReplayResult(
            {name: {"freshness": f, "harmonic_staleness": 1 - f, "fetches": 10}
             for name, f in scores.items()},
            {},
        )  # fmt: skip

    base = dict.fromkeys(BASELINES, 0.5)
    seeds = [
        result({**base, "uniform": 0.80, "bayesrate": 0.82}),
        result({**base, "uniform": 0.70, "bayesrate": 0.69}),
        result({**base, "uniform": 0.90, "bayesrate": 0.95}),
    ]
    out = replay.summarize_seeds(seeds, ("bayesrate",))
    u = out["policies"]["uniform"]["freshness"]
    assert u["mean"] == pytest.approx(0.8) and u["sd"] == pytest.approx(0.1)
    d = out["paired"]["bayesrate"]["uniform"]
    # differences +0.02, −0.01, +0.05: mean 0.02, sd 0.03, se 0.03/√3, 2 wins
    assert d["mean"] == pytest.approx(0.02)
    assert d["se"] == pytest.approx(0.03 / np.sqrt(3))
    assert d["wins"] == 2 and d["seeds"] == 3
    assert out["paired"]["bayesrate"]["nutch-adaptive"]["wins"] == 3
    assert replay.seed_names("s", 3) == ["s", "s-1", "s-2"]


@pytest.mark.slow
def test_the_periodic_variant_plans_for_periodic_fetches():
    """``--ours periodic``: the default planner with Cho & Garcia-Molina's freshness; its
    plan of the same posteriors spends the same budget, differently from Azar's, and it
    fetches as much as the default in the replay."""
    h = synthetic_history("replay")
    start = H0 + 90 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=20,
                           tick_hours=1.0)  # fmt: skip
    budget = 1 / 3
    plans = {}
    for variant in ("bayesrate", "periodic"):
        objective = replay.OURS[variant].get("objective", "freshness")
        pol = replay.PlannedReplay(
            variant, setup, PriorSet.default(), budget, np.random.default_rng(0),
            config=replay.ours_config(setup, variant), objective=objective,
        )  # fmt: skip
        pol.set_live(np.ones(setup.n, dtype=bool))
        pol.priority(setup.start)
        plans[variant] = pol.state.target.copy()
    total = budget / 24 * setup.n
    for p in plans.values():
        assert p.sum() == pytest.approx(total, rel=1e-6)
    assert not np.allclose(plans["bayesrate"], plans["periodic"], rtol=1e-3)
    result = replay.replay_policies(setup, budget=budget, priors=PriorSet.default(), seed="t",
                                    ours=("bayesrate", "periodic"))  # fmt: skip
    assert 0.98 <= result.policies["periodic"]["fetches_vs_budget"] <= 1 + 1e-9


def switching_history(switch_day: float, permute: bool, n: int = 200, days: float = 240.0):
    """Pages with log-normal rates that are permuted among the pages at ``switch_day``
    (``permute``) or kept; the events before ``switch_day`` are the same either way, and
    every page has an event at 0.5 h, so the pages and the warm-up log before the switch
    do not depend on what happens after it."""
    rng = np.random.default_rng(5)
    rates = np.exp(rng.normal(np.log(0.2), 1.5, n)) / 24
    later = rng.permutation(rates) if permute else rates
    rows = []
    for i in range(n):
        rows.append([f"p{i:03d}", ts(0.5)])
        for a, b, lam, part in (
            (1.0, switch_day * 24, rates[i], [i, 0]),
            (switch_day * 24, days * 24, later[i], [i, 1, int(switch_day)]),
        ):
            r = np.random.default_rng(part)
            t = a + r.exponential(1 / lam)
            while t < b:
                rows.append([f"p{i:03d}", ts(t)])
                t += r.exponential(1 / lam)
    frame = pd.DataFrame(rows, columns=["page", "time"])
    return ChangeHistory.from_frame(frame, end=ts(days * 24))


@pytest.mark.slow
def test_auto_hedge_is_chosen_on_the_warm_up_log_alone():
    """``hedge_by_backtest`` picks the share on the warm-up log: permuting the pages' rates
    in the window changes the window (the oracle's plan) but not the share; permuting them
    in the held-out end of the warm-up log (rates the past does not predict) moves the
    share from 0 towards uniform."""
    start = H0 + 150 * 24

    def backtest(history):
        setup = replay.prepare(history, replay.warmup_crawl(history, start, 24.0, "t"),
                               start=start, days=90, tick_hours=2.0)  # fmt: skip
        config = replay.ours_config(setup, "bayesrate")
        share, detail = replay.hedge_by_backtest(setup, PriorSet.default(), 1 / 7, config=config)
        return setup, share, detail

    stable, share, detail = backtest(switching_history(150, permute=False))
    window, share_w, detail_w = backtest(switching_history(150, permute=True))
    # the same warm-up log, a different window
    np.testing.assert_array_equal(stable.warmup_time, window.warmup_time)
    np.testing.assert_array_equal(stable.warmup_changed, window.warmup_changed)
    assert not np.allclose(
        replay.hindsight_rates(stable, 1 / 7), replay.hindsight_rates(window, 1 / 7)
    )
    assert (share_w, detail_w) == (share, detail)
    assert detail["pages"] == 200 and detail["holdout_days"] == pytest.approx(75, abs=0.1)
    assert set(detail["freshness"]) == set(replay.HEDGE_SHARES)
    assert share <= 0.1  # stable rates: the plan alone is best
    _, share_h, detail_h = backtest(switching_history(75, permute=True))
    assert share_h >= 0.5
    assert detail_h["freshness"][share_h] == max(detail_h["freshness"].values())


@pytest.mark.slow
def test_replay_reports_the_hedge_and_a_given_share_is_used(tmp_path, capsys):
    """``--hedge 1``: ours spreads its whole budget uniformly (its plan gives every live
    page the same target); the share is in the JSON per seed and on the text output;
    ``unhedged`` plans with 0; a share outside [0, 1] is a usage error."""
    h = synthetic_history("replay")
    start = H0 + 90 * 24
    setup = replay.prepare(h, replay.warmup_crawl(h, start, 24.0, "t"), start=start, days=20,
                           tick_hours=1.0)  # fmt: skip
    pol = replay.PlannedReplay("bayesrate", setup, PriorSet.default(), 1 / 3,
                               np.random.default_rng(0), hedge=1.0)  # fmt: skip
    live = np.ones(setup.n, dtype=bool)
    live[:5] = False
    pol.set_live(live)
    pol.priority(setup.start)
    target = pol.state.target
    assert np.all(target[:5] == 0)
    np.testing.assert_allclose(target[5:], 1 / 3 / 24, rtol=1e-12)
    with pytest.raises(ObservationError, match="hedge"):
        replay.replay_policies(setup, budget=1 / 3, priors=PriorSet.default(), hedge=1.5)
    # the command line
    h_path, priors = small_history_files(tmp_path)
    args = ["schedule", "replay", "--input", str(h_path), "--start", ts(40 * 24), "--days", "10"]
    args += ["--budget", "0.5", "--priors", str(priors), "--seeds", "2"]
    assert main([*args, "--json", "--hedge", "1/4", "--ours", "bayesrate,unhedged"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policies"]["bayesrate"]["hedge"] == [0.25, 0.25]
    assert out["policies"]["unhedged"]["hedge"] == [0.0, 0.0]
    assert "hedge" not in out["policies"]["uniform"]
    assert main([*args, "--ours", "bayesrate,unhedged", "--seeds", "1"]) == 0
    text = capsys.readouterr().out
    assert "bayesrate: share of the budget spread uniformly per seed:" in text
    assert "by backtest on the warm-up log" in text and "unhedged: " in text
    assert main([*args, "--hedge", "2"]) == 2
    assert "argument --hedge" in capsys.readouterr().err
