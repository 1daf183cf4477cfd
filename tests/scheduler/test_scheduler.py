"""Scheduler state, updates, decisions and politeness."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from bayesrate.errors import ObservationError
from bayesrate.priors import GammaPrior, PriorSet
from bayesrate.scheduler import SchedulerConfig, SchedulerState, decide
from bayesrate.scheduler.state import Modulation

T0 = 480_000.0  # hours since the epoch (2024-10)


def _snapshot(state):
    cols = ("alpha", "beta", "last_fetch", "last_change", "weight", "n_fetch", "n_changed")
    return {c: state.column(c).copy() for c in cols} | {"n": state.n, "urls": list(state.urls)}


def _same(a, b):
    assert a["n"] == b["n"] and a["urls"] == b["urls"]
    for c in a:
        if c not in ("n", "urls"):
            np.testing.assert_array_equal(a[c], b[c])


def test_import_is_light():
    code = (
        "import sys, bayesrate.scheduler, bayesrate.scheduler.store, "
        "bayesrate.scheduler.harness, bayesrate.scheduler.baselines, "
        "bayesrate.commands.schedule\n"
        "bad = [m for m in ('pymc', 'pytensor', 'arviz') if m in sys.modules]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_priors_per_day_become_per_hour():
    priors = PriorSet(GammaPrior(0.5, 10.0), {"a.com": GammaPrior(2.0, 4.0)})
    st = SchedulerState(priors)
    st.add(["u1", "u2"], ["a.com", "unseen.org"])
    np.testing.assert_allclose(st.alpha, [2.0, 0.5])
    np.testing.assert_allclose(st.beta, [4.0 * 24, 10.0 * 24])
    # mean rate per hour = mean per day / 24
    np.testing.assert_allclose(st.posterior_mean(), [0.5 / 24, 0.05 / 24])
    # without an artifact: the documented default Gamma(1, 1 day)
    d = SchedulerState()
    d.add(["x"], ["h"])
    assert (d.alpha[0], d.beta[0]) == (1.0, 24.0)


def test_unchanged_intervals_are_conjugate_and_changed_matches_quadrature():
    st = SchedulerState(PriorSet(GammaPrior(1.5, 0.5)))
    st.observe(["u"], [T0], [0], hosts=["h"])  # baseline
    st.observe(["u", "u"], [T0 + 3.0, T0 + 10.0], [0, 0])
    assert st.alpha[0] == 1.5 and st.beta[0] == pytest.approx(12.0 + 10.0)
    a, b = st.alpha[0], st.beta[0]
    tau = 7.5
    st.observe(["u"], [T0 + 10.0 + tau], [1])
    # oracle: moments of (1 - e^{-λτ}) Gamma(λ | a, b) by quadrature
    dens = stats.gamma(a, scale=1 / b).pdf
    z = integrate.quad(lambda x: (1 - np.exp(-x * tau)) * dens(x), 0, np.inf)[0]
    m1 = integrate.quad(lambda x: x * (1 - np.exp(-x * tau)) * dens(x), 0, np.inf)[0] / z
    m2 = integrate.quad(lambda x: x * x * (1 - np.exp(-x * tau)) * dens(x), 0, np.inf)[0] / z
    assert st.alpha[0] / st.beta[0] == pytest.approx(m1, rel=1e-6)
    assert st.alpha[0] / st.beta[0] ** 2 == pytest.approx(m2 - m1**2, rel=1e-6)
    assert st.last_change[0] == T0 + 10.0 + tau
    assert st.n_fetch[0] == 4 and st.n_changed[0] == 1


def test_exposure_update_option():
    st = SchedulerState(PriorSet(GammaPrior(1.0, 7.0)), SchedulerConfig(update="exposure"))
    st.observe(["u"], [T0], [0], hosts=["h"])
    st.observe(["u", "u", "u"], [T0 + 5, T0 + 6, T0 + 20], [1, 1, 0])
    assert st.alpha[0] == 3.0 and st.beta[0] == 7.0 * 24 + 20


def test_batch_equals_one_by_one(rng):
    urls = [f"u{i}" for i in range(30)]
    hosts = [f"h{i % 4}" for i in range(30)]
    times = T0 + np.cumsum(rng.exponential(3.0, (6, 30)), axis=0)
    flags = rng.integers(0, 2, (6, 30))
    one, batch = SchedulerState(), SchedulerState()
    for k in range(6):
        for j in range(30):
            one.observe([urls[j]], [times[k, j]], [flags[k, j]], hosts=[hosts[j]])
    order = rng.permutation(6 * 30)  # interleave URLs; time order per URL kept below
    u = np.tile(urls, 6)[order]
    t = times.ravel()[order]
    c = flags.ravel()[order]
    h = np.tile(hosts, 6)[order]
    # times per URL must be increasing in input order: sort by time (stable)
    s = np.argsort(t, kind="stable")
    batch.observe(u[s].tolist(), t[s], c[s], hosts=h[s].tolist())
    for col in ("alpha", "beta", "last_fetch", "n_fetch", "n_changed"):
        np.testing.assert_allclose(
            batch.column(col)[np.argsort(batch.urls)],
            one.column(col)[np.argsort(one.urls)],
            rtol=1e-12,
        )


@pytest.mark.parametrize(
    ("call", "field", "named"),
    [
        (lambda s: s.observe(["nope"], [T0 + 5], [0]), "url", "nope"),
        (lambda s: s.observe(["a"], [T0 - 1], [0]), "time", "a"),
        (lambda s: s.observe(["b", "b"], [T0 + 9, T0 + 8], [0, 0]), "time", "b"),
        (lambda s: s.observe(["a"], [T0 + 1], [0], weights=[float("nan")]), "weight", None),
        (lambda s: s.observe(["a"], [T0 + 1], [2]), "changed", "a"),
        (lambda s: s.observe(["a"], [float("nan")], [0]), "time", "a"),
        (lambda s: s.observe(["a"], [T0 + 1], [0], hosts=["other"]), "host", "a"),
        (lambda s: s.add(["a"], ["h"]), "url", "a"),
    ],
)
def test_bad_input_names_culprits_and_changes_nothing(call, field, named):
    st = SchedulerState()
    st.observe(["a", "b"], [T0, T0], [0, 0], hosts=["h", "h"])
    before = _snapshot(st)
    with pytest.raises(ObservationError) as err:
        call(st)
    assert err.value.field == field
    if named:
        assert named in err.value.pages
    _same(before, _snapshot(st))


def test_modulation_integral_matches_clock_overlap(rng):
    from bayesrate.clock import hour_of_week_overlap

    m = rng.uniform(0.2, 3.0, 168)
    m /= m.mean()
    start = T0 + rng.uniform(0, 2000, 200)
    end = start + rng.exponential(50.0, 200)
    for tz in ("UTC", "Europe/Paris"):
        mod = Modulation(m, tz)
        expect = hour_of_week_overlap(start, end, tz) @ m
        np.testing.assert_allclose(mod.integral(start, end), expect, rtol=1e-9, atol=1e-9)
    mod = Modulation(m, "UTC")
    amount = rng.exponential(20.0, 200)
    np.testing.assert_allclose(
        mod.integral(start, mod.advance(start, amount)), amount, rtol=1e-9, atol=1e-9
    )


def test_next_check_factor_and_cap_for_always_changed():
    cfg = SchedulerConfig(min_interval=2.0, max_interval=1000.0, cap_after=2)
    st = SchedulerState(PriorSet(GammaPrior(1.0, 1.0)), cfg)
    st.observe(["slow", "fast"], [T0, T0], [0, 0], hosts=["h", "h"])
    st.observe(["slow", "fast"], [T0 + 24, T0 + 24], [0, 1])
    st.observe(["slow", "fast"], [T0 + 48, T0 + 48], [0, 1])
    lam_slow = st.alpha[0] / st.beta[0]
    t = decide.next_check(st, factor=0.5)
    assert t[0] == pytest.approx(T0 + 48 + 0.5 / lam_slow)
    # "fast" changed at every visit: the shortest allowed interval, whatever its posterior says
    assert st.changed_every_visit.tolist() == [False, True]
    assert t[1] == T0 + 48 + 2.0
    # the revisit floor (exploration) bounds the wait
    st2 = SchedulerState(PriorSet(GammaPrior(1.0, 1e6)), cfg)
    st2.observe(["z"], [T0], [0], hosts=["h"])
    assert decide.next_check(st2)[0] == T0 + 1000.0


def test_due_matches_brute_force_priority(rng):
    cfg = SchedulerConfig(min_interval=1.0, max_interval=1e6)
    st = SchedulerState(config=cfg)
    n = 500
    urls = [f"u{i}" for i in range(n)]
    w = rng.pareto(1.5, n) + 0.1
    st.observe(urls, T0 + rng.uniform(0, 100, n), np.zeros(n), hosts=["h"] * n, weights=w)
    more = rng.choice(n, 200, replace=False)
    st.observe([urls[i] for i in more], T0 + 100 + rng.uniform(0, 50, 200), rng.integers(0, 2, 200))
    now = T0 + 160.0
    # independent: w · α/β · elapsed by hand
    value = {
        u: st.weight[i] * st.alpha[i] / st.beta[i] * (now - st.last_fetch[i])
        for i, u in enumerate(st.urls)
    }
    expect = sorted(value, key=lambda u: -value[u])[:25]
    got = [st.urls[i] for i in decide.due(st, now, 25)]
    assert got == expect


def test_never_fetched_and_min_interval():
    st = SchedulerState(config=SchedulerConfig(min_interval=5.0))
    st.observe(["old"], [T0], [0], hosts=["h"])
    st.add(["new"], ["h"])
    assert [st.urls[i] for i in decide.due(st, T0 + 1, 5)] == ["new"]  # old too recent
    assert [st.urls[i] for i in decide.due(st, T0 + 6, 5)] == ["new", "old"]


def test_politeness_never_violated(rng):
    limit, window = 3, 2.0
    cfg = SchedulerConfig(min_interval=0.25, politeness_limit=limit, politeness_window=window)
    st = SchedulerState(config=cfg)
    n = 300
    urls = [f"u{i}" for i in range(n)]
    hosts = [f"h{int(x)}" for x in rng.zipf(1.6, n) % 7]
    st.add(urls, hosts, rng.pareto(1.5, n) + 0.1)
    log = []
    now = T0
    for _ in range(120):
        now += float(rng.uniform(0.05, 0.5))
        rows = decide.due(st, now, int(rng.integers(1, 40)))
        if len(rows):
            st.observe(
                [st.urls[i] for i in rows], np.full(len(rows), now), rng.integers(0, 2, len(rows))
            )
            log += [(hosts[i], now) for i in rows]
    assert len(log) > 200
    # brute force over the whole history: any window (t - W, t] holds <= limit per host
    for h, t in log:
        assert sum(1 for h2, t2 in log if h2 == h and t - window < t2 <= t) <= limit


def test_thompson_draws_from_posterior(rng):
    st = SchedulerState(PriorSet(GammaPrior(3.0, 2.0)), SchedulerConfig(thompson=True))
    st.add([f"u{i}" for i in range(20_000)], ["h"] * 20_000)
    lam = decide.decision_rates(st, rng=rng)
    # mean and variance of Gamma(3, 48 h) per hour
    assert lam.mean() == pytest.approx(3 / 48, rel=0.03)
    assert lam.var() == pytest.approx(3 / 48**2, rel=0.08)
    assert stats.kstest(lam, stats.gamma(3.0, scale=1 / 48).cdf).pvalue > 1e-3


def test_plan_respects_budget_floor_and_host_caps(rng):
    cfg = SchedulerConfig(politeness_limit=2, politeness_window=1.0, max_interval=24 * 60)
    st = SchedulerState(config=cfg)
    n = 2000
    st.observe(
        [f"u{i}" for i in range(n)],
        np.full(n, T0),
        np.zeros(n),
        hosts=[f"h{i % 50}" for i in range(n)],
        weights=rng.pareto(1.5, n) + 0.1,
    )
    budget = 0.2 / 24 * n
    p = decide.plan(st, budget)
    assert p.sum() <= budget
    assert (p >= min(1 / (24 * 60), 0.5 * budget / n) * (1 - 1e-12)).all()
    assert np.bincount(st.host, weights=p).max() <= 2.0 * (1 + 1e-12)
    with pytest.raises(ObservationError) as err:
        decide.plan(st, -1.0)
    assert err.value.field == "budget"
    np.testing.assert_array_equal(st.target, p)  # a rejected plan changes nothing


def test_summary_is_json_serialisable():
    st = SchedulerState()
    st.observe(["a", "b"], [T0, T0], [0, 0], hosts=["h", "g"])
    json.dumps(st.summary())


def test_priority_uses_hour_of_week_multipliers(rng):
    from bayesrate.clock import hour_of_week_overlap

    m = rng.uniform(0.1, 4.0, 168)
    m /= m.mean()
    priors = PriorSet(GammaPrior(2.0, 3.0), hour_of_week=m, timezone="America/New_York")
    st = SchedulerState(priors, SchedulerConfig(max_interval=1e6))
    n = 50
    last = T0 + rng.uniform(0, 300, n)
    st.observe(
        [f"u{i}" for i in range(n)],
        last,
        np.zeros(n),
        hosts=["h"] * n,
        weights=rng.uniform(0.5, 2, n),
    )
    now = T0 + 400.0
    expect = (
        st.weight
        * st.alpha
        / st.beta
        * (hour_of_week_overlap(last, np.full(n, now), "America/New_York") @ m)
    )
    np.testing.assert_allclose(decide.priority(st, now), expect, rtol=1e-9)
    # and the update used the integrated modulation as exposure (unchanged: β += ∫m)
    st.observe(["u0"], [now], [0])
    beta_expect = (
        3.0 * 24 + hour_of_week_overlap(last[:1], np.array([now]), "America/New_York")[0] @ m
    )
    assert st.beta[0] == pytest.approx(beta_expect, rel=1e-9)


def test_default_floor_fits_small_host_caps():
    # 300 URLs on one host, 1 fetch per 10 h allowed: floors 1/720 h each would need 0.42/h
    cfg = SchedulerConfig(politeness_limit=1, politeness_window=10.0, max_interval=720.0)
    st = SchedulerState(config=cfg)
    st.observe([f"u{i}" for i in range(300)], np.full(300, T0), np.zeros(300), hosts=["h"] * 300)
    p = decide.plan(st, 5.0)
    assert p.sum() <= 0.1 * (1 + 1e-12)
    assert (p > 0).all()


def test_due_rejects_bad_now_and_k():
    st = SchedulerState()
    st.observe(["a"], [T0], [0], hosts=["h"])
    with pytest.raises(ObservationError) as err:
        decide.due(st, T0 - 1.5, 3)  # beyond the 1 h clock-skew tolerance
    assert err.value.field == "now" and "a" in err.value.pages
    assert len(decide.due(st, T0 - 0.5, 3)) == 0  # within it: not eligible (issue 54)
    with pytest.raises(ObservationError):
        decide.due(st, T0 + 5.0, -1)


def test_empty_batch_is_a_no_op():
    st = SchedulerState(config=SchedulerConfig(politeness_limit=2))
    assert len(st.observe([], [], [])) == 0
    st.observe(["a"], [T0], [0], hosts=["h"])
    before = _snapshot(st)
    st.observe([], np.zeros(0), np.zeros(0))
    _same(before, _snapshot(st))


def test_plan_quantile_is_the_posterior_quantile_even_when_alpha_below_one():
    # priors with α < 1 (as calibrated on Open Terms Archive) and α ≥ 1: no special case,
    # the quantile is the Gamma's own (floored at rate_floor like every decision rate)
    priors = PriorSet(GammaPrior(2.0, 4.0), {"slow.org": GammaPrior(0.2, 10.0)})
    st = SchedulerState(priors)
    st.add(["a", "b"], ["slow.org", "fast.com"], [1.0, 1.0])
    lam = decide.decision_rates(st, quantile=0.3, cap=False)
    alpha, beta_h = 0.2, 10.0 * 24.0  # per hour
    expected = max(stats.gamma.ppf(0.3, alpha, scale=1 / beta_h), st.config.rate_floor)
    assert lam[0] == pytest.approx(expected, rel=1e-9)
    assert lam[1] == pytest.approx(stats.gamma.ppf(0.3, 2.0, scale=1 / (4.0 * 24.0)))
