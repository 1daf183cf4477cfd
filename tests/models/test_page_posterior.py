"""Conditional page posteriors (bayesrate.models.page_posterior) against quadrature.

Oracle: each page's log-likelihood written out interval by interval from its raw visits
(``tests.helpers.raw_loglik``, not the sufficient statistics), times the normal prior of
one population draw, integrated by scipy's adaptive quadrature; the posterior is the
average of those exact conditionals over the draws.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate

from bayesrate.models.page_posterior import conditional_average
from bayesrate.observations import Observations
from tests.helpers import raw_loglik, seed_of


def _pages(rng: np.random.Generator) -> Observations:
    """Pages in three domains: ordinary ones with unequal intervals, one that never changed
    over 60 visits, one that changed at every visit, one with a single visit."""
    frames = []

    def add(label, domain, times, flags):
        frames.append(
            pd.DataFrame({"page": label, "domain": domain, "time": times, "changed": flags})
        )

    for i in range(9):
        rate = float(np.exp(rng.normal(-3.0, 1.5)))
        t = np.r_[0.0, np.cumsum(rng.uniform(0.5, 40.0, int(rng.integers(3, 50))))]
        flags = np.r_[0, (rng.random(len(t) - 1) < -np.expm1(-rate * np.diff(t))).astype(int)]
        add(f"p{i}", f"d{i % 3}", t, flags)
    grid = np.arange(0.0, 600.0, 10.0)
    add("never", "d0", grid, np.zeros(len(grid), int))
    add("always", "d1", grid[:8], np.r_[0, np.ones(7, int)])
    add("single", "d2", [4.0], [0])
    return Observations.from_frame(pd.concat(frames, ignore_index=True))


def _oracle(obs: Observations, page: int, mu: float, sigma: float) -> tuple[float, callable]:
    """Mean rate and CDF (in λ) of one page's posterior under ``Normal(mu, sigma)`` on log λ."""

    def unnormalised(theta):
        z = (theta - mu) / sigma
        return math.exp(raw_loglik(obs, page, math.exp(theta)) - 0.5 * z * z)

    lo, hi = mu - 12 * sigma - 30, mu + 12 * sigma + 10
    # the mode: the integrand is unimodal; split there so quad sees the peak
    thetas = np.linspace(lo, hi, 4001)
    peak = float(thetas[np.argmax([unnormalised(t) for t in thetas])])
    opts = {"epsabs": 0.0, "epsrel": 1e-11, "limit": 400}

    def integral(f, a, b):
        pieces = [(a, min(b, peak)), (max(a, peak), b)]
        return sum(integrate.quad(f, x, y, **opts)[0] for x, y in pieces if y > x)

    total = integral(unnormalised, lo, hi)
    mean = integral(lambda t: math.exp(t) * unnormalised(t), lo, hi) / total

    def cdf(rate: float) -> float:
        return integral(unnormalised, lo, math.log(rate)) / total

    return mean, cdf


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(seed_of("page-posterior"))
    obs = _pages(rng)
    n_draws = 5
    # widely varied draws (σ_p from 0.3 to 2): a bug in the per-draw normalisation or the
    # grid's cover or resolution shows; larger σ_p put the mean's integrand of a page
    # without data beyond the grids' reach of 1e6 changes per hour (THETA_RANGE)
    mu = rng.normal(math.log(0.05), 1.0, (n_draws, 3))
    sigma = rng.uniform(0.3, 2.0, n_draws)
    post = conditional_average(
        obs.interval_stats.groups, obs.domain_codes, mu, sigma, draw_means=True
    )
    return obs, mu, sigma, post, post.draw_means


def test_each_draws_conditional_mean_equals_quadrature(case):
    obs, mu, sigma, _, draw_means = case
    for p in range(obs.n_pages):
        d = obs.domain_codes[p]
        want = [_oracle(obs, p, mu[s, d], sigma[s])[0] for s in range(len(sigma))]
        np.testing.assert_allclose(draw_means[:, p], want, rtol=1e-6, err_msg=str(p))


def test_averaged_posterior_mean_and_quantiles_equal_quadrature(case):
    obs, mu, sigma, post, draw_means = case
    mean = post.mean
    lower, upper = post.quantiles
    np.testing.assert_allclose(mean, draw_means.mean(axis=0), rtol=1e-12)
    for p in range(obs.n_pages):
        d = obs.domain_codes[p]
        oracles = [_oracle(obs, p, mu[s, d], sigma[s]) for s in range(len(sigma))]
        assert mean[p] == pytest.approx(np.mean([m for m, _ in oracles]), rel=1e-6)
        # the mixture's CDF at the reported quantiles: 5% and 95% (a rate error of 0.1%
        # moves these by far less than the tolerance only where the density is tiny)
        for q, rate in ((0.05, lower[p]), (0.95, upper[p])):
            got = np.mean([cdf(rate) for _, cdf in oracles])
            assert got == pytest.approx(q, abs=2e-4), (obs.pages.index[p], q)


def test_single_visit_page_gets_the_population_mixture(case):
    """No intervals: each conditional is its prior, so the mean is E[e^θ] of the normals."""
    obs, mu, sigma, post, _ = case
    p = list(obs.pages.index).index("single")
    d = obs.domain_codes[p]
    want = np.mean(np.exp(mu[:, d] + sigma**2 / 2))
    assert post.mean[p] == pytest.approx(want, rel=1e-7)


def test_inputs_are_checked(case):
    obs, mu, sigma, _, _ = case
    groups = obs.interval_stats.groups
    with pytest.raises(ValueError, match="draws"):
        conditional_average(groups, obs.domain_codes, mu[0], sigma)
    with pytest.raises(ValueError, match="domain codes"):
        conditional_average(groups, obs.domain_codes[:-1], mu, sigma)
    with pytest.raises(ValueError, match="sigma_page > 0"):
        conditional_average(groups, obs.domain_codes, mu, -sigma)
