"""Optimal fetch rates: closed forms against brute-force optimisation (scipy as oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy.optimize import minimize

from bayesrate.errors import ObservationError
from bayesrate.scheduler.optimal import (
    azar_rates,
    expected_freshness,
    expected_harmonic_staleness,
    expected_periodic_freshness,
    harmonic_rates,
    optimal_rates,
    periodic_freshness,
    periodic_rates,
)


def _feasible(x, lo, hi, budget, hosts, caps):
    """``x`` clipped to its bounds and scaled down onto any host cap or budget it exceeds."""
    x = np.clip(x, lo, hi)
    if hosts is not None:
        for h, cap in enumerate(caps):
            members = hosts == h
            total = x[members].sum()
            if total > cap:
                x[members] *= cap / total
    return x * min(1.0, budget / x.sum())


def _periodic_fresh(lam, f):
    """``(f/λ)(1 − e^{−λ/f})``: share of time fresh when fetched every ``1/f`` (oracle)."""
    x = lam / f
    return -np.expm1(-x) / x


def _brute(objective, w, lam, budget, lower=0.0, upper=None, hosts=None, caps=None, seed=0):
    """Best of several SLSQP starts on the original (non-Lagrangian) problem, each made
    exactly feasible before it is scored (SLSQP may overshoot a constraint by ~1e-8, which
    at a marginal gain of ~100 beats the exact optimum by ~1e-6)."""
    n = len(w)
    lo = np.broadcast_to(lower, (n,)).astype(float)
    hi = np.full(n, budget) if upper is None else np.broadcast_to(upper, (n,)).astype(float)

    def f(p):
        p = np.maximum(p, 1e-12)
        if objective == "freshness":
            return -np.sum(w * p / (p + lam))
        if objective == "periodic":
            return -np.sum(w * _periodic_fresh(lam, p))
        return np.sum(w * np.log1p(lam / p))

    cons = [{"type": "ineq", "fun": lambda p: budget - p.sum()}]
    if hosts is not None:
        for h, cap in enumerate(caps):
            members = hosts == h
            cons.append({"type": "ineq", "fun": lambda p, m=members, c=cap: c - p[m].sum()})
    gen = np.random.default_rng(seed)
    best = None
    for _ in range(8):
        x0 = np.clip(gen.dirichlet(np.ones(n)) * budget, lo, hi)
        r = minimize(
            f,
            x0,
            method="SLSQP",
            bounds=list(zip(lo, hi, strict=True)),
            constraints=cons,
            options={"ftol": 1e-13, "maxiter": 500},
        )
        x = _feasible(r.x, lo, hi, budget, hosts, caps)
        if best is None or f(x) < best[1]:
            best = (x, f(x))
    return best


@pytest.mark.parametrize("trial", range(6))
def test_azar_matches_brute_force(rng, trial):
    n = int(rng.integers(2, 7))
    w = rng.pareto(1.5, n) + 0.1
    lam = rng.gamma(0.7, 1.0, n)
    budget = float(rng.uniform(0.1, 3.0))
    p = azar_rates(w, lam, budget)
    assert p.sum() <= budget * (1 + 1e-12)
    assert p.sum() == pytest.approx(budget, rel=1e-9)
    _, fun = _brute("freshness", w, lam, budget, seed=trial)
    ours = np.sum(w * p / (p + lam))
    assert ours >= -fun - 1e-7  # at least as good as the best the optimiser found
    # and the bisection solver agrees with the closed form
    p2 = optimal_rates(w, lam, budget, objective="freshness", lower=0.0, upper=1e9)
    np.testing.assert_allclose(p2, p, atol=1e-8)


@pytest.mark.parametrize("trial", range(6))
def test_harmonic_matches_brute_force(rng, trial):
    n = int(rng.integers(2, 7))
    w = rng.pareto(1.5, n) + 0.1
    lam = rng.gamma(0.7, 1.0, n) + 0.01
    budget = float(rng.uniform(0.1, 3.0))
    rho = harmonic_rates(w, lam, budget)
    assert (rho > 0).all()  # never starves a page
    assert rho.sum() <= budget * (1 + 1e-12)
    x, fun = _brute("harmonic", w, lam, budget, seed=trial)
    ours = np.sum(w * np.log1p(lam / rho))
    assert ours <= fun + 1e-7
    np.testing.assert_allclose(rho, x, rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("objective", ["freshness", "harmonic", "periodic"])
def test_bounds_and_host_caps_match_brute_force(rng, objective):
    n = 6
    w = rng.pareto(1.5, n) + 0.1
    lam = rng.gamma(0.7, 1.0, n) + 0.01
    hosts = np.array([0, 0, 0, 1, 1, 2])
    caps = np.array([0.3, 5.0, 0.2])
    budget = 1.5
    p = optimal_rates(
        w, lam, budget, objective=objective, lower=0.02, upper=0.8, hosts=hosts, host_caps=caps
    )
    assert p.sum() <= budget * (1 + 1e-12)
    assert (np.bincount(hosts, weights=p) <= caps * (1 + 1e-12)).all()
    assert (p >= 0.02 - 1e-12).all() and (p <= 0.8 + 1e-12).all()
    _, fun = _brute(objective, w, lam, budget, lower=0.02, upper=0.8, hosts=hosts, caps=caps)
    if objective == "freshness":
        assert np.sum(w * p / (p + lam)) >= -fun - 1e-6
    elif objective == "periodic":
        assert np.sum(w * _periodic_fresh(lam, p)) >= -fun - 1e-6
    else:
        assert np.sum(w * np.log1p(lam / p)) <= fun + 1e-6


def test_azar_textbook_two_pages():
    # equal weights and rates: split the budget evenly
    p = azar_rates([1.0, 1.0], [1.0, 1.0], 2.0)
    np.testing.assert_allclose(p, [1.0, 1.0])
    # a page changing much faster than the budget allows is abandoned (w/λ below μ)
    p = azar_rates([1.0, 1.0], [100.0, 0.1], 0.2)
    assert p[0] == 0 and p[1] == pytest.approx(0.2)


def test_budget_never_exceeded_large(rng):
    n = 50_000
    w = rng.pareto(1.2, n) + 0.01
    lam = rng.gamma(0.5, 2.0, n)
    for budget in (1e-3, 1.0, 1e3, 1e6):
        for obj in ("freshness", "harmonic"):
            p = optimal_rates(
                w,
                lam,
                budget,
                objective=obj,
                lower=0.0,
                upper=np.inf if obj == "freshness" else 1e12,
            )
            assert p.sum() <= budget
            assert (p >= 0).all()
    hosts = rng.integers(0, 100, n)
    p = optimal_rates(w, lam, 100.0, hosts=hosts, host_caps=0.5)
    assert p.sum() <= 100.0
    assert np.bincount(hosts, weights=p).max() <= 0.5


def test_expected_metrics_closed_form():
    assert expected_freshness([1, 3], [1.0, 0.0], [1.0, 0.0]) == pytest.approx((0.5 + 3) / 4)
    assert expected_harmonic_staleness([1], [2.0], [1.0]) == pytest.approx(np.log(3.0))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget": -1.0}, "budget"),
        ({"budget": float("nan")}, "budget"),
        ({"weights": [1.0, float("nan")]}, "weight"),
        ({"rates": [-1.0, 1.0]}, "rate"),
        ({"lower": 2.0}, "budget"),
    ],
)
def test_bad_input(kwargs, field):
    args = {"weights": [1.0, 1.0], "rates": [1.0, 1.0], "budget": 1.0} | kwargs
    with pytest.raises(ObservationError) as err:
        optimal_rates(**args)
    assert err.value.field == field


@settings(max_examples=60, deadline=None)
@given(
    w=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40),
    seed=st.integers(0, 2**31 - 1),
    budget=st.floats(1e-3, 1e3),
)
def test_azar_satisfies_kkt(w, seed, budget):
    """Optimality conditions (independent of the algorithm): the marginal value
    w λ / (p + λ)² equals one μ on active pages and is <= μ at p = 0 (w / λ <= μ)."""
    w = np.array(w)
    lam = np.random.default_rng(seed).gamma(0.7, 1.0, len(w)) + 1e-3
    p = azar_rates(w, lam, budget)
    assert p.sum() == pytest.approx(budget, rel=1e-9)
    active = p > 1e-9 * budget
    marginal = w * lam / (p + lam) ** 2
    mu = np.median(marginal[active])
    np.testing.assert_allclose(marginal[active], mu, rtol=1e-6)
    assert (w[~active] / lam[~active] <= mu * (1 + 1e-6)).all()


@pytest.mark.parametrize("objective", ["freshness", "harmonic", "periodic"])
def test_expected_optimal_rates_maximise_the_posterior_expectation(rng, objective):
    from scipy import optimize

    from bayesrate.scheduler.optimal import expected_optimal_rates

    node = np.array([0.002, 0.02, 0.2, 1.0, 4.0])
    probs = rng.dirichlet(np.full(len(node), 0.5), 6)
    w = rng.uniform(0.5, 2.0, 6)
    budget, lower = 1.5, 0.01

    def value(p):  # posterior expected objective, to maximise
        p = np.maximum(p, 1e-12)[:, None]
        if objective == "freshness":
            per_node = p / (p + node[None, :])
        elif objective == "periodic":
            per_node = _periodic_fresh(node[None, :], p)
        else:
            per_node = -np.log1p(node[None, :] / p)
        return float(w @ (probs * per_node).sum(axis=1))

    got = expected_optimal_rates(w, probs, node, budget, objective=objective, lower=lower)
    assert got.sum() == pytest.approx(budget, rel=1e-6) and (got >= lower - 1e-12).all()
    best = None
    for start in (np.full(6, budget / 6), rng.dirichlet(np.ones(6)) * budget):
        res = optimize.minimize(
            lambda p: -value(p), start, method="SLSQP", bounds=[(lower, budget)] * 6,
            constraints=[{"type": "eq", "fun": lambda p: p.sum() - budget}],
            options={"ftol": 1e-14, "maxiter": 1000},
        )  # fmt: skip
        best = res if best is None or res.fun < best.fun else best
    assert value(got) >= -best.fun - 1e-5  # the tabulated inversion: ~1e-6 relative
    np.testing.assert_allclose(got, best.x, rtol=0.02, atol=1e-3)
    # a posterior that is a point mass plans as the point rate does (to the tabulated
    # inversion's accuracy: rates within 3%, objective within 1e-6 relative)
    point = np.eye(len(node))[rng.integers(0, len(node), 6)]
    exp_p = expected_optimal_rates(w, point, node, budget, objective=objective, lower=lower)
    exact = optimal_rates(w, point @ node, budget, objective=objective, lower=lower)
    np.testing.assert_allclose(exp_p, exact, rtol=0.03)
    probs = point
    assert value(exp_p) == pytest.approx(value(exact), rel=1e-6)


# ------------------------------------------------------------------ periodic fetches
def _marginal(w, lam, f):
    """d/df of ``w (f/λ)(1 − e^{−λ/f})`` written out directly (``w/λ`` at ``f = 0``)."""
    if f == 0:
        return w / lam
    x = lam / f
    return w * ((1 - np.exp(-x)) / lam - np.exp(-x) / f)


def _response(w, lam, mu):
    """The page's frequency where its marginal value is ``mu`` (0 when ``w/λ <= mu``), by
    Brent's method on the marginal value itself."""
    if w / lam <= mu:
        return 0.0
    hi = 1.0
    while _marginal(w, lam, hi) > mu:
        hi *= 2
    return optimize.brentq(lambda f: _marginal(w, lam, f) - mu, 0.0, hi, xtol=1e-300,
                           rtol=4 * np.finfo(float).eps, maxiter=500)  # fmt: skip


def _lagrange_oracle(w, lam, budget):
    """Independent solver: Brent on the multiplier, Brent on each page's marginal value."""

    def excess(log_mu):
        mu = np.exp(log_mu)
        return sum(_response(a, b, mu) for a, b in zip(w, lam, strict=True)) - budget

    top = np.log(np.max(w / lam))
    log_mu = optimize.brentq(excess, top - 60, top, xtol=1e-15, rtol=4 * np.finfo(float).eps,
                             maxiter=500)  # fmt: skip
    return np.array([_response(a, b, np.exp(log_mu)) for a, b in zip(w, lam, strict=True)])


@pytest.mark.parametrize(
    "w, lam, budget",
    [
        ([1.0, 1.0], [0.5, 2.0], 1.0),  # both pages fetched
        ([1.0, 3.0], [0.1, 5.0], 0.7),  # unequal weights
        ([1.0, 1.0], [0.2, 40.0], 0.5),  # the fast page is abandoned (a corner)
        ([2.0, 1.0, 0.5], [0.3, 1.0, 4.0], 2.0),
        ([1.0, 1.0, 1.0], [0.01, 0.3, 9.0], 0.4),  # three pages, one abandoned
    ],
)
def test_periodic_rates_exact_against_an_independent_solver(w, lam, budget):
    """Cho & Garcia-Molina's optimum to 1e-9 against Brent's method on the first-order
    conditions (no incomplete Gamma), and for two pages against a dense search of the
    budget's split."""
    w, lam = np.asarray(w), np.asarray(lam)
    f = periodic_rates(w, lam, budget)
    want = _lagrange_oracle(w, lam, budget)
    np.testing.assert_allclose(f, want, rtol=1e-9, atol=1e-12 * budget)
    assert f.sum() <= budget * (1 + 1e-12)
    assert f.sum() == pytest.approx(budget, rel=1e-9)
    if len(w) == 2:
        # the objective on a dense grid of splits, refined around its best node
        def value(t):
            return sum(a * _periodic_fresh(b, x) if x > 0 else 0.0
                       for a, b, x in zip(w, lam, (t, budget - t), strict=True))  # fmt: skip

        grid = np.linspace(0.0, budget, 100_001)
        best = grid[int(np.argmax([value(t) for t in grid]))]
        step = budget / 100_000
        res = optimize.minimize_scalar(lambda t: -value(t), method="bounded",
                                       bounds=(max(best - step, 0), min(best + step, budget)),
                                       options={"xatol": 1e-12})  # fmt: skip
        assert value(f[0]) >= -res.fun - 1e-13
        assert f[0] == pytest.approx(res.x, abs=1e-6 * budget)


@pytest.mark.parametrize("trial", range(4))
def test_periodic_rates_match_slsqp_and_beat_azar_on_their_own_objective(rng, trial):
    n = int(rng.integers(3, 8))
    w = rng.pareto(1.5, n) + 0.1
    lam = rng.gamma(0.7, 1.0, n) + 0.01
    budget = float(rng.uniform(0.2, 3.0))
    f = periodic_rates(w, lam, budget)
    np.testing.assert_allclose(f, _lagrange_oracle(w, lam, budget), rtol=1e-9, atol=1e-12)
    _, fun = _brute("periodic", w, lam, budget, seed=trial)
    ours = float(np.sum(w * _periodic_fresh(lam, np.maximum(f, 1e-300))))
    assert ours >= -fun - 1e-9
    # Azar's rates are optimal for Poisson-timed fetches, not for periodic ones
    p = azar_rates(w, lam, budget)
    assert ours >= float(np.sum(w * _periodic_fresh(lam, np.maximum(p, 1e-300)))) - 1e-12
    assert expected_periodic_freshness(w, lam, f) == pytest.approx(ours / w.sum(), rel=1e-12)


def test_periodic_freshness_closed_forms():
    # fetched once per change on average: 1 − e^{−1}; never fetched: 0; never changing: 1
    got = periodic_freshness([1.0, 2.0, 0.0, 3.0], [1.0, 0.0, 5.0, 1e-9])
    assert got.tolist() == pytest.approx([1 - np.exp(-1), 0.0, 1.0, 1e-9 / 3], rel=1e-12)


def _hedge_state(rng, n=300, hosts=None, politeness_limit=None):
    """A scheduler state whose URLs have different posteriors (two fetches each)."""
    import pandas as pd

    from bayesrate.scheduler import SchedulerConfig, SchedulerState

    t0 = pd.Timestamp("2024-01-01", tz="UTC").value / 3.6e12
    cfg = SchedulerConfig(politeness_limit=politeness_limit, politeness_window=1.0)
    st = SchedulerState(config=cfg)
    urls = [f"u{i}" for i in range(n)]
    hosts = hosts if hosts is not None else [f"h{i % 3}" for i in range(n)]
    st.observe(urls, np.full(n, t0), np.zeros(n), hosts=hosts, weights=rng.pareto(1.5, n) + 0.1)
    st.observe(urls, t0 + rng.uniform(2, 200, n), rng.integers(0, 2, n))
    return st


def test_hedge_zero_is_the_plan_one_is_uniform_and_the_budget_is_conserved(rng):
    """``plan(hedge=h)``: h = 0 is the plain plan bit for bit; h = 1 gives every URL
    ``budget / n``; in between, the plan of ``(1 − h)·budget`` plus ``h·budget / n`` each
    (point rates: the exact Lagrangian on both sides), and the targets sum to the budget."""
    from bayesrate.scheduler import decide

    st = _hedge_state(rng)
    n = st.n
    budget = 0.2 / 24 * n
    plain = decide.plan(st, budget)
    np.testing.assert_array_equal(decide.plan(st, budget, hedge=0.0), plain)
    uniform = decide.plan(st, budget, hedge=1.0)
    np.testing.assert_allclose(uniform, budget / n, rtol=1e-14)
    lam = rng.gamma(0.5, 0.05, n)
    for h in (0.25, 0.6):
        hedged = decide.plan(st, budget, hedge=h, rates=lam, floor=0.0)
        rest = decide.plan(st, (1 - h) * budget, rates=lam, floor=0.0)
        np.testing.assert_allclose(hedged, rest + h * budget / n, rtol=1e-12, atol=1e-18)
        assert hedged.sum() == pytest.approx(budget, rel=1e-12)
        # the default planner (expected gain over each posterior, exploration floor)
        assert decide.plan(st, budget, hedge=h).sum() == pytest.approx(budget, rel=1e-9)
        assert decide.plan(st, budget, hedge=h).min() >= h * budget / n * (1 - 1e-12)
    before = st.target.copy()
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ObservationError) as err:
            decide.plan(st, budget, hedge=bad)
        assert err.value.field == "hedge"
    np.testing.assert_array_equal(st.target, before)  # a rejected plan changes nothing


def test_hedge_within_host_caps(rng):
    """A host whose cap is below its URLs' uniform share gets its cap, spread evenly; what
    it cannot take goes to the plan: the budget is still spent whole, no cap exceeded."""
    from bayesrate.scheduler import decide

    n = 300
    hosts = ["big"] * 200 + [f"h{i % 10}" for i in range(100)]
    st = _hedge_state(rng, n, hosts=hosts, politeness_limit=1.0)  # cap: 1 fetch per hour
    budget = 4.0
    share = 0.5
    p = decide.plan(st, budget, hedge=share)
    per_host = np.bincount(st.host, weights=p)
    big = st.host_index["big"]
    assert share * budget / n * 200 > 1.0  # the big host's uniform share is over its cap
    assert per_host[big] == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(p[:200], 1.0 / 200, rtol=1e-9)  # evenly, nothing planned
    assert per_host.max() <= 1.0 * (1 + 1e-12)
    assert p.sum() == pytest.approx(budget, rel=1e-9)
