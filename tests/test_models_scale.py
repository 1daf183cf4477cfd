"""Scale path (bayesrate.models.scale) against brute-force quadrature oracles."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from bayesrate.models import scale
from bayesrate.observations import Observations
from tests.helpers import raw_loglik, seed_of


@pytest.fixture(scope="module")
def obs() -> Observations:
    rng = np.random.default_rng(seed_of("models-scale"))
    frames = []
    for i, (rate, n) in enumerate(((0.05, 30), (0.4, 12), (0.01, 50), (0.2, 5))):
        t = np.concatenate([[0.0], np.cumsum(rng.uniform(1, 12, n))])
        flags = np.r_[0, (rng.random(n) < 1 - np.exp(-rate * np.diff(t))).astype(int)]
        frames.append(
            pd.DataFrame(
                {"page": f"p{i}", "domain": "a" if i < 2 else "b", "time": t, "changed": flags}
            )
        )
    return Observations.from_frame(pd.concat(frames, ignore_index=True))


def test_page_loglik_grid_matches_raw_visits(obs):
    theta = np.linspace(-8, 2, 25)
    pages = np.array([2, 0, 3])
    grid = scale.page_loglik_grid(obs.interval_stats, pages, theta)
    for row, page in enumerate(pages):
        want = [raw_loglik(obs, page, math.exp(t)) for t in theta]
        np.testing.assert_allclose(grid[row], want, rtol=1e-10, atol=1e-12)


def test_stratified_sample_covers_every_domain(rng):
    domain = np.repeat(np.arange(5), [1, 3, 50, 200, 746])
    sample = scale.stratified_sample(domain, 100, rng)
    assert len(np.unique(sample)) == len(sample)
    assert set(domain[sample]) == set(range(5))
    assert 90 <= len(sample) <= 100
    # proportional allocation: the biggest domain gets the most
    counts = np.bincount(domain[sample], minlength=5)
    assert counts[4] > counts[3] > counts[2]


def _quad_page(obs, page, prior_logpdf):
    """Mean of λ and 5/95% quantiles by quadrature in θ (oracle)."""
    grid = np.linspace(-14, 5, 600)
    logs = np.array([raw_loglik(obs, page, math.exp(t)) + prior_logpdf(t) for t in grid])
    shift = logs.max()
    peak = grid[np.argmax(logs)]
    lo, hi = peak - 15, peak + 15

    def f(t):
        return math.exp(raw_loglik(obs, page, math.exp(t)) + prior_logpdf(t) - shift)

    z = integrate.quad(f, lo, hi, points=[peak], limit=200)[0]
    mean = integrate.quad(lambda t: math.exp(t) * f(t), lo, hi, points=[peak], limit=200)[0] / z
    return mean


def test_page_posteriors_match_quadrature_with_fixed_domain_mean(obs):
    """With a (nearly) known domain mean the page prior is N(μ, σ_page): oracle by quad."""
    mu_grid = np.linspace(scale.THETA_RANGE[0] + 2, scale.THETA_RANGE[1] - 2, scale.N_MU)
    mu = float(mu_grid[np.argmin(np.abs(mu_grid + 3.0))])
    sigma_page = 1.2
    _, pages = scale.grid_domain_and_pages(obs.interval_stats, mu, 1e-4, sigma_page)
    for page in range(obs.n_pages):
        want = _quad_page(obs, page, lambda t: stats.norm.logpdf(t, mu, sigma_page))
        assert pages["mean"][page] == pytest.approx(want, rel=2e-3), page
    assert (pages["lower"] < pages["mean"]).all() and (pages["mean"] < pages["upper"]).all()


def test_domain_mean_posterior_matches_brute_force(obs):
    mu_g, sd_d, sd_p = -3.0, 1.0, 0.8
    domains, _ = scale.grid_domain_and_pages(obs.interval_stats, mu_g, sd_d, sd_p)
    st = obs.interval_stats
    for d, label in enumerate(st.domains):
        members = np.flatnonzero(st.domain == d)

        def log_marginal(m, members=members):
            total = 0.0
            for p in members:

                def f(t, p=p):
                    return math.exp(raw_loglik(obs, p, math.exp(t))) * stats.norm.pdf(t, m, sd_p)

                total += math.log(integrate.quad(f, m - 9 * sd_p, m + 9 * sd_p, limit=200)[0])
            return total + stats.norm.logpdf(m, mu_g, sd_d)

        mus = np.linspace(-9, 3, 241)
        lp = np.array([log_marginal(m) for m in mus])
        w = np.exp(lp - lp.max())
        w /= w.sum()
        want = float(w @ mus)
        assert domains.loc[label, "mu_mean"] == pytest.approx(want, abs=0.02), label
