"""The log-rate grid posterior against independent oracles (quadrature, closed forms)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.scheduler.rategrid import LogRateGrid, merge_unchanged, run_filter

ALPHA, BETA_DAYS = 0.6, 12.0  # a Gamma prior on λ per day (α < 1: mass near zero)


def _continuous_posterior_mean(alpha, beta, exposure, changed):
    """E[λ | data] for λ ~ Gamma(α, β) and censored intervals, by scipy quadrature in log λ."""

    def log_post(theta):
        lam = np.exp(theta)
        out = stats.gamma.logpdf(lam, alpha, scale=1 / beta) + theta  # density of θ
        for x, c in zip(exposure, changed, strict=True):
            out += np.log(-np.expm1(-lam * x)) if c else -lam * x
        return out

    thetas = np.linspace(-25, 6, 4001)
    shift = max(log_post(t) for t in thetas)
    f = lambda t: np.exp(log_post(t) - shift)  # noqa: E731
    z = integrate.quad(f, -40, 8, points=[-10, -5, 0], limit=400)[0]
    m = integrate.quad(lambda t: np.exp(t) * f(t), -40, 8, points=[-10, -5, 0], limit=400)[0]
    return m / z


def _sequence(rng, n):
    exposure = rng.exponential(20.0, n)  # days
    changed = rng.random(n) < 0.4
    return exposure, changed


@pytest.mark.parametrize("size, rel", [(48, 0.03), (400, 0.002)])
@pytest.mark.slow
def test_update_matches_quadrature_of_the_continuous_posterior(rng, size, rel):
    grid = LogRateGrid(size)
    prior = grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY)
    for _ in range(4):
        exposure, changed = _sequence(rng, int(rng.integers(1, 8)))
        logp = prior[None, :]
        for x, c in zip(exposure, changed, strict=True):
            logp, _ = grid.update(logp, np.array([x * HOURS_PER_DAY]), np.array([c]))
        got = grid.mean(logp)[0] * HOURS_PER_DAY
        want = _continuous_posterior_mean(ALPHA, BETA_DAYS, exposure, changed)
        assert got == pytest.approx(want, rel=rel)


def test_unchanged_only_matches_the_conjugate_closed_form():
    grid = LogRateGrid(400)
    logp = grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY)[None, :]
    total = 0.0
    for days in (3.0, 40.0, 0.5, 90.0):
        logp, _ = grid.update(logp, np.array([days * HOURS_PER_DAY]), np.array([False]))
        total += days
    mean = grid.mean(logp)[0] * HOURS_PER_DAY
    assert mean == pytest.approx(ALPHA / (BETA_DAYS + total), rel=2e-3)
    # the posterior median as well (histogram reading of the grid)
    median = grid.quantile(logp, 0.5)[0] * HOURS_PER_DAY
    assert median == pytest.approx(
        stats.gamma.ppf(0.5, ALPHA, scale=1 / (BETA_DAYS + total)), rel=0.02
    )


def test_evidence_is_the_predictive_probability():
    grid = LogRateGrid(400)
    logp = grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY)[None, :]
    days = 10.0
    _, log_ev = grid.update(logp, np.array([days * HOURS_PER_DAY]), np.array([False]))
    # P(no change in τ) = E[e^{−λτ}] = (β / (β + τ))^α under the Gamma prior
    assert np.exp(log_ev[0]) == pytest.approx((BETA_DAYS / (BETA_DAYS + days)) ** ALPHA, rel=1e-3)


def test_prior_cells_hold_the_normal_and_gamma_masses():
    grid = LogRateGrid()
    mean, sd = np.log(0.05 / HOURS_PER_DAY), 1.4
    p = grid.probabilities(grid.prior_normal_mixture(np.array([1.0]), np.array([mean]),
                                                     np.array([sd]))[None, :])[0]  # fmt: skip
    edges = grid.edges
    want = np.diff(stats.norm.cdf(edges, mean, sd))
    np.testing.assert_allclose(p, want, atol=1e-12)
    g = grid.probabilities(grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY)[None, :])[0]
    want = np.diff(stats.gamma.cdf(np.exp(edges), ALPHA, scale=1 / (BETA_DAYS * HOURS_PER_DAY)))
    np.testing.assert_allclose(g, want, atol=1e-12)


def test_diffusion_of_a_wide_posterior_is_the_gaussian_convolution():
    grid = LogRateGrid()
    centre = float(grid.theta[grid.size // 2])
    sd, variance = 1.2, 0.8
    logp = grid.prior_normal_mixture(np.array([1.0]), np.array([centre]), np.array([sd]))
    moved = grid.probabilities(grid.diffuse(logp[None, :], np.array([variance])))[0]
    # the exact convolution N(c, sd) * N(0, variance) = N(c, sqrt(sd² + variance)), in cells
    want = np.diff(stats.norm.cdf(grid.edges, centre, np.sqrt(sd**2 + variance)))
    assert 0.5 * np.abs(moved - want).sum() < 0.01  # total variation
    theta = grid.theta
    before = grid.probabilities(logp[None, :])[0]
    m = before @ theta
    # the lattice walk keeps the mean and adds σ²Δt to the variance (exact off the ends)
    assert moved @ theta == pytest.approx(m, abs=1e-6)
    assert moved @ (theta - m) ** 2 == pytest.approx(before @ (theta - m) ** 2 + variance, rel=1e-4)
    # no variance, no change; mass is kept
    np.testing.assert_allclose(grid.diffuse(logp[None, :], np.array([0.0]))[0], logp)
    assert moved.sum() == pytest.approx(1.0)


def _fine_filter(alpha, beta_h, durations, exposure, changed, sigma2):
    """Forward filter on a fine θ lattice with exact Gaussian transition kernels (oracle)."""
    theta = np.linspace(-30.0, 6.0, 3001)
    d = theta[1] - theta[0]
    lam = np.exp(theta)
    p = stats.gamma.pdf(lam, alpha, scale=1 / beta_h) * lam
    p /= p.sum()
    for dt, x, c in zip(durations, exposure, changed, strict=True):
        if sigma2 > 0:
            sd = np.sqrt(sigma2 * dt)
            k = np.arange(-int(8 * sd / d) - 1, int(8 * sd / d) + 2) * d
            kernel = stats.norm.pdf(k, 0.0, sd)
            full = np.convolve(p, kernel / kernel.sum(), mode="full")
            p = full[(len(k) - 1) // 2 : (len(k) - 1) // 2 + len(theta)]
        p = p * (-np.expm1(-lam * x) if c else np.exp(-lam * x))
        p /= p.sum()
    return float(p @ lam)


@pytest.mark.parametrize("sigma_per_day", [0.0, 0.3])
def test_run_filter_matches_a_fine_gaussian_filter(rng, sigma_per_day):
    grid = LogRateGrid(160, 1e-5, 100.0)
    sigma2 = sigma_per_day**2 / HOURS_PER_DAY
    beta_h = BETA_DAYS * HOURS_PER_DAY
    rows, durs, flags = [], [], []
    for r in range(3):
        n = int(rng.integers(3, 9))
        durs.append(rng.exponential(10 * HOURS_PER_DAY, n))
        flags.append(rng.random(n) < 0.5)
        rows.append(np.full(n, r))
    row, dur, flag = np.concatenate(rows), np.concatenate(durs), np.concatenate(flags)
    prior = np.tile(grid.prior_gamma(ALPHA, beta_h), (3, 1))
    logp, _ = run_filter(grid, prior, row, dur, dur, flag, sigma2=sigma2)
    for r in range(3):
        want = _fine_filter(ALPHA, beta_h, durs[r], durs[r], flags[r], sigma2)
        assert grid.mean(logp[r : r + 1])[0] == pytest.approx(want, rel=0.02)


def test_run_filter_equals_updates_one_by_one(rng):
    grid = LogRateGrid()
    sigma2 = np.array([0.0, 0.02, 0.1]) / HOURS_PER_DAY
    prior = np.tile(grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY), (3, 1))
    row = np.repeat(np.arange(3), [4, 1, 6])
    dur = rng.exponential(200.0, len(row))
    expo = dur * rng.uniform(0.5, 1.5, len(row))
    flag = rng.random(len(row)) < 0.5
    got, ev = run_filter(grid, prior, row, dur, expo, flag, sigma2=sigma2)
    for r in range(3):
        lp, total = prior[r : r + 1], 0.0
        for k in np.flatnonzero(row == r):
            lp = grid.diffuse(lp, np.array([sigma2[r] * dur[k]]))
            lp, e = grid.update(lp, expo[k : k + 1], flag[k : k + 1])
            total += e[0]
        # (probabilities below ~1e-15 carry the diffusion products' absolute rounding)
        np.testing.assert_allclose(np.exp(got[r]), np.exp(lp[0]), rtol=1e-9, atol=1e-15)
        assert ev[r] == pytest.approx(total)


def test_merging_unchanged_runs_is_exact_without_drift(rng):
    grid = LogRateGrid()
    row = np.repeat(np.arange(2), [9, 7])
    dur = rng.exponential(100.0, len(row))
    flag = rng.random(len(row)) < 0.3
    prior = np.tile(grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY), (2, 1))
    whole, ev = run_filter(grid, prior, row, dur, dur, flag)
    blocks = merge_unchanged(row, dur, dur, flag, np.inf)
    assert len(blocks[0]) < len(row)
    merged, ev_merged = run_filter(grid, prior, *blocks)
    np.testing.assert_allclose(merged, whole, atol=1e-9)
    np.testing.assert_allclose(ev_merged, ev)


def test_quantiles_and_thompson_draws_follow_the_posterior(rng):
    grid = LogRateGrid()
    logp = grid.prior_normal_mixture(np.array([0.3, 0.7]), np.log([1e-4, 5e-3]),
                                     np.array([0.5, 1.0]))[None, :]  # fmt: skip
    qs = np.array([0.05, 0.3, 0.5, 0.9])
    lam_q = grid.quantile(np.repeat(logp, 4, axis=0), qs)
    np.testing.assert_allclose(grid.cdf(np.repeat(logp, 4, axis=0), np.log(lam_q)), qs,
                               atol=1e-12)  # fmt: skip
    draws = grid.sample(np.repeat(logp, 4000, axis=0), rng)
    u = grid.cdf(np.repeat(logp, 4000, axis=0), np.log(draws))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # no special case: a prior with most of its mass near zero keeps its low quantiles
    gamma = grid.prior_gamma(0.2, 10.0 * HOURS_PER_DAY)[None, :]
    q30 = grid.quantile(gamma, 0.3)[0]
    want = stats.gamma.ppf(0.3, 0.2, scale=1 / (10.0 * HOURS_PER_DAY))
    assert abs(np.log(q30 / want)) < grid.spacing


def test_bad_grids_are_refused():
    with pytest.raises(ValueError, match="size"):
        LogRateGrid(3)
    with pytest.raises(ValueError, match="min < max"):
        LogRateGrid(48, 1.0, 0.1)


def test_evidence_prefers_drift_only_when_rates_drift(rng):
    grid = LogRateGrid()
    pages, days, sigma = 60, 200, 0.25  # σ per √day
    sigma2_h = sigma**2 / HOURS_PER_DAY
    start = rng.normal(np.log(0.3), 0.7, pages)
    steps = rng.normal(0.0, sigma, (pages, days)).cumsum(axis=1)
    prior = np.tile(
        grid.prior_normal_mixture(np.array([1.0]), np.array([np.log(0.3 / HOURS_PER_DAY)]),
                                  np.array([0.7])), (pages, 1))  # fmt: skip
    row = np.repeat(np.arange(pages), days)
    dur = np.full(pages * days, HOURS_PER_DAY)
    still_rates = np.repeat(start[:, None], days, axis=1)
    for theta, drifting in ((start[:, None] + steps, True), (still_rates, False)):
        flags = (rng.random((pages, days)) < -np.expm1(-np.exp(theta))).ravel()
        _, still = run_filter(grid, prior, row, dur, dur, flags, sigma2=0.0)
        _, moving = run_filter(grid, prior, row, dur, dur, flags, sigma2=sigma2_h)
        assert (moving.sum() > still.sum()) == drifting


@pytest.mark.parametrize("hours", [1e-6, 0.5, 3e3, 1e9])
@pytest.mark.parametrize("changed", [False, True])
def test_update_at_extreme_exposures_is_bayes_rule_in_log_space(hours, changed):
    """The compiled step (linear space, scaled likelihood) against Bayes' rule written in log
    space with scipy, where a naive linear product would underflow or lose the small node."""
    from scipy.special import logsumexp

    grid = LogRateGrid()
    prior = grid.prior_gamma(ALPHA, BETA_DAYS * HOURS_PER_DAY)
    x = hours * grid.rate
    loglik = np.log(-np.expm1(-x)) if changed else -x
    want = np.maximum(prior + loglik - logsumexp(prior + loglik), -700.0)
    got, evidence = grid.update(prior[None, :], np.array([hours]), np.array([changed]))
    np.testing.assert_allclose(np.exp(got[0]), np.exp(want), rtol=1e-9, atol=1e-300)
    assert evidence[0] == pytest.approx(logsumexp(prior + loglik), rel=1e-12, abs=1e-12)
