"""The scheduler state with grid posteriors: priors, updates, summaries and plans."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.priors import GammaPrior, NormalMixture, Population, PriorSet, Summary
from bayesrate.scheduler import SchedulerConfig, SchedulerState, decide

T0 = 480_000.0
GRID = SchedulerConfig(posterior="grid")


def _v2_priors(location=-3.0, scale=1.4) -> PriorSet:
    mixture = NormalMixture((1.0,), (location,), (scale,))
    pop = Population(Summary(location), Summary(scale), mixture)
    gamma = GammaPrior.from_moments(*mixture.rate_moments())
    return PriorSet(gamma, {"a.com": gamma}, populations={"a.com": pop}, global_population=pop)


def test_v2_prior_is_the_population_and_v1_the_gamma():
    st = SchedulerState(_v2_priors(), GRID)
    st.add(["u"], ["a.com"])
    grid = st.grid
    p = grid.probabilities(st.log_weights.astype(float))[0]
    # θ = log λ per hour ~ Normal(-3 - log 24, 1.4): cell masses
    want = np.diff(stats.norm.cdf(grid.edges, -3.0 - np.log(HOURS_PER_DAY), 1.4))
    np.testing.assert_allclose(p, want, atol=1e-6)  # float32 storage
    v1 = SchedulerState(PriorSet(GammaPrior(0.5, 4.0)), GRID)
    v1.add(["u"], ["b.org"])
    g = grid.probabilities(v1.log_weights.astype(float))[0]
    want = np.diff(stats.gamma.cdf(np.exp(grid.edges), 0.5, scale=1 / (4.0 * HOURS_PER_DAY)))
    np.testing.assert_allclose(g, want, atol=1e-6)


def test_observed_sequence_matches_quadrature(rng):
    alpha, beta_days = 0.8, 6.0
    st = SchedulerState(PriorSet(GammaPrior(alpha, beta_days)), GRID)
    times = T0 + np.cumsum(rng.exponential(5 * HOURS_PER_DAY, 7))
    flags = (rng.random(7) < 0.5).astype(int)
    flags[0] = 0
    for t, c in zip(times, flags, strict=True):
        st.observe(["u"], [t], [c], hosts=["h"])
    days = np.diff(times) / HOURS_PER_DAY

    def post(lam):
        out = stats.gamma.pdf(lam, alpha, scale=1 / beta_days)
        for x, c in zip(days, flags[1:], strict=True):
            out *= -np.expm1(-lam * x) if c else np.exp(-lam * x)
        return out

    z = integrate.quad(post, 0, np.inf, limit=400)[0]
    mean = integrate.quad(lambda x: x * post(x), 0, np.inf, limit=400)[0] / z
    assert st.posterior_mean()[0] * HOURS_PER_DAY == pytest.approx(mean, rel=0.03)


@pytest.mark.parametrize("posterior", ["gamma", "grid"])
def test_crawl_log_at_once_equals_fetches_one_by_one(rng, posterior):
    cfg = SchedulerConfig(posterior=posterior)
    priors = PriorSet(GammaPrior(0.7, 3.0))
    counts = np.array([5, 1, 0, 9])
    times = np.concatenate([T0 + np.cumsum(rng.exponential(30.0, k)) for k in counts])
    changed = (rng.random(len(times)) < 0.4).astype(np.int8)
    offsets = np.r_[0, np.cumsum(counts)]
    urls = [f"u{i}" for i in range(len(counts))]
    whole = SchedulerState(priors, cfg)
    whole.add(urls, ["h"] * len(urls))
    whole.observe_log(offsets, times, changed)
    single = SchedulerState(priors, cfg)
    single.add(urls, ["h"] * len(urls))
    for i, u in enumerate(urls):
        for k in range(offsets[i], offsets[i + 1]):
            single.observe([u], [times[k]], [changed[k]])
    for c in whole.columns:
        np.testing.assert_allclose(whole.column(c), single.column(c), rtol=1e-6, atol=1e-6)


def test_summaries_and_draws_come_from_the_posterior(rng):
    st = SchedulerState(_v2_priors(), GRID)
    st.add([f"u{i}" for i in range(3000)], ["a.com"] * 3000)
    # Thompson draws: the population's log-normal (to within the grid's cells)
    draws = decide.decision_rates(st, thompson=True, rng=rng, cap=False)
    z = (np.log(draws * HOURS_PER_DAY) + 3.0) / 1.4
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # no special case for a wide posterior: the 0.3 quantile is the population's
    q = decide.decision_rates(st, quantile=0.3, cap=False)[0] * HOURS_PER_DAY
    assert abs(np.log(q) - (-3.0 + 1.4 * stats.norm.ppf(0.3))) < st.grid.spacing / 2


def test_drift_widens_the_posterior_with_time():
    cfg = SchedulerConfig(posterior="grid", drift=0.2)
    st = SchedulerState(_v2_priors(), cfg)
    st.add(["u"], ["a.com"])
    st.observe(["u"] * 6, T0 + 24.0 * np.arange(6), [0, 1, 1, 0, 1, 1])
    now = T0 + 5 * 24.0
    grid = st.grid
    sd = []
    for days in (0, 30, 120):
        p = grid.probabilities(st.log_weights_at(now + 24.0 * days))[0]
        m = p @ grid.theta
        sd.append(np.sqrt(p @ (grid.theta - m) ** 2))
    # variance grows by σ²Δt (the lattice walk is exact off the grid's ends)
    assert sd[1] ** 2 == pytest.approx(sd[0] ** 2 + 0.04 * 30, rel=0.05)
    assert sd[0] < sd[1] < sd[2]


def test_plan_from_grid_posteriors_spends_the_budget(rng):
    st = SchedulerState(_v2_priors(), SchedulerConfig(posterior="grid", drift=0.1))
    urls = [f"u{i}" for i in range(50)]
    st.add(urls, ["a.com"] * 50)
    for k in range(5):
        st.observe(urls, np.full(50, T0 + 24.0 * k), (rng.random(50) < 0.3).astype(int))
    budget = 50 / (7 * HOURS_PER_DAY)
    p = decide.plan(st, budget, now=T0 + 24.0 * 6)
    assert p.sum() == pytest.approx(budget, rel=1e-6)
    assert (p > 0).all() and (p <= 1.0 / st.config.min_interval).all()
    np.testing.assert_array_equal(st.target, p)
