"""Scale path (bayesrate.models.scale) against brute-force 2-D quadrature over (θ, μ)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bayesrate.models import scale
from bayesrate.observations import Observations

# dense oracle grids: θ = log λ per hour, and the domain mean μ
THETA = np.linspace(-30.0, 6.0, 7201)
D_THETA = THETA[1] - THETA[0]


def raw_loglik_on_grid(times: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Log-likelihood of one page's raw visits at every θ of THETA (interval by interval)."""
    lam = np.exp(THETA)
    out = np.zeros_like(THETA)
    for tau, changed in zip(np.diff(times), flags[1:], strict=True):
        x = lam * tau
        out += np.log(-np.expm1(-x)) if changed else -x
    return out


def normal_pdf(x, mu, sd):
    return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


def oracle(pages: list[tuple[np.ndarray, np.ndarray, int]], mu_g, sd_d, sd_p, n_mu=6001):
    """Exact posteriors of one domain by brute force on dense (θ, μ) grids.

    ``pages`` lists distinct page types ``(times, flags, copies)``. Returns the domain
    mean's posterior mean and SD, and per type the page's posterior mean of λ and its
    5% / 95% quantiles (per hour).
    """
    mu = np.linspace(mu_g - 9 * sd_d, mu_g + 9 * sd_d, n_mu)
    d_mu = mu[1] - mu[0]
    kernel = normal_pdf(THETA[:, None], mu[None, :], sd_p) * D_THETA  # (T, M)
    lik = [np.exp(raw_loglik_on_grid(t, f)) for t, f, _ in pages]
    log_m = [np.log(lk @ kernel) for lk in lik]  # each page type's marginal likelihood of μ
    log_w = np.log(normal_pdf(mu, mu_g, sd_d)) + sum(
        c * lm for (_, _, c), lm in zip(pages, log_m, strict=True)
    )
    w = np.exp(log_w - log_w.max())
    w /= w.sum() * d_mu
    mu_mean = np.sum(w * mu) * d_mu
    mu_sd = math.sqrt(np.sum(w * (mu - mu_mean) ** 2) * d_mu)
    out = []
    for lk, lm in zip(lik, log_m, strict=True):
        loo = w / np.exp(lm - lm.max())  # p(μ | y without this page), unnormalised
        prior = kernel @ loo
        dens = lk * prior
        dens /= dens.sum()
        cdf = np.cumsum(dens)
        out.append(
            (
                float(np.sum(dens * np.exp(THETA))),
                float(np.exp(np.interp(0.05, cdf, THETA))),
                float(np.exp(np.interp(0.95, cdf, THETA))),
            )
        )
    return mu_mean, mu_sd, out


def observations(domains: dict[str, list[tuple[np.ndarray, np.ndarray, int]]]) -> Observations:
    frames = []
    for domain, types in domains.items():
        for k, (times, flags, copies) in enumerate(types):
            for c in range(copies):
                frames.append(
                    pd.DataFrame(
                        {"page": f"{domain}-{k}-{c}", "domain": domain, "time": times,
                         "changed": flags}
                    )
                )  # fmt: skip
    return Observations.from_frame(pd.concat(frames, ignore_index=True))


def hourly(n: int, changed_at: list[int]) -> tuple[np.ndarray, np.ndarray]:
    flags = np.zeros(n + 1, dtype=int)
    flags[changed_at] = 1
    return np.arange(n + 1, dtype=float), flags


def test_one_page_domain_is_not_counted_twice():
    """The issue's case: 5 unchanged days, μ_g = log 0.2/h, σ_d = σ_p = 1.5. Using the
    domain posterior (which holds the page's own data) as the page's prior gave 0.125/day
    (90% 0.009-0.39); the exact answer is 0.170/day (0.015-0.50)."""
    times = np.arange(6) * 24.0
    page = (times, np.zeros(6, dtype=int), 1)
    mu_g, sd = math.log(0.2), 1.5
    stats = observations({"a": [page]}).interval_stats
    _, pages = scale.grid_domain_and_pages(stats, mu_g, sd, sd)
    _, _, [(mean, lo, hi)] = oracle([page], mu_g, sd, sd)
    assert pages["mean"][0] == pytest.approx(mean, rel=2e-3)
    assert pages["lower"][0] == pytest.approx(lo, rel=5e-3)
    assert pages["upper"][0] == pytest.approx(hi, rel=5e-3)
    assert 24 * mean == pytest.approx(0.170, abs=0.0015)


def test_small_domains_match_quadrature():
    mu_g, sd_d, sd_p = math.log(0.05), 1.0, 0.8
    rng = np.random.default_rng(3)
    a = [
        (np.concatenate([[0.0], np.cumsum(rng.uniform(1, 12, 30))]), None, 1),
        (np.concatenate([[0.0], np.cumsum(rng.uniform(1, 12, 12))]), None, 1),
        (np.arange(41) * 6.0, None, 1),
    ]
    rates = (0.05, 0.4, 0.01)
    a = [
        (t, np.r_[0, (rng.random(len(t) - 1) < 1 - np.exp(-r * np.diff(t))).astype(int)], c)
        for (t, _, c), r in zip(a, rates, strict=True)
    ]
    b = [(np.arange(8) * 24.0, np.array([0, 0, 1, 0, 0, 0, 1, 0]), 1)]
    obs = observations({"a": a, "b": b})
    domains, pages = scale.grid_domain_and_pages(obs.interval_stats, mu_g, sd_d, sd_p)
    for label, types, first in (("a", a, 0), ("b", b, 3)):
        mu_mean, mu_sd, per_type = oracle(types, mu_g, sd_d, sd_p)
        assert domains.loc[label, "mu_mean"] == pytest.approx(mu_mean, abs=1e-3)
        assert domains.loc[label, "mu_sd"] == pytest.approx(mu_sd, rel=1e-2)
        for k, (mean, lo, hi) in enumerate(per_type):
            assert pages["mean"][first + k] == pytest.approx(mean, rel=2e-3), (label, k)
            assert pages["lower"][first + k] == pytest.approx(lo, rel=1e-2), (label, k)
            assert pages["upper"][first + k] == pytest.approx(hi, rel=1e-2), (label, k)


def test_large_domain_mean_is_resolved():
    """3,000 pages x 100 hourly visits, σ_page = 1: the domain mean's posterior SD is near
    σ_page/√n ≈ 0.018 (a fixed 300-point μ grid reported 0.0055)."""
    types = [
        (*hourly(100, [7, 60]), 1000),
        (*hourly(100, list(range(5, 100, 10))), 1000),
        (*hourly(100, list(range(1, 100, 3))), 1000),
    ]
    mu_g, sd_d, sd_p = math.log(0.05), 1.0, 1.0
    obs = observations({"big": types})
    domains, pages = scale.grid_domain_and_pages(obs.interval_stats, mu_g, sd_d, sd_p)
    mu_mean, mu_sd, per_type = oracle(types, mu_g, sd_d, sd_p)
    assert 0.012 < mu_sd < 0.03
    assert domains.loc["big", "mu_sd"] == pytest.approx(mu_sd, rel=0.02)
    assert domains.loc["big", "mu_mean"] == pytest.approx(mu_mean, abs=2e-3)
    for k, (mean, _, _) in enumerate(per_type):
        assert pages["mean"][k * 1000] == pytest.approx(mean, rel=2e-3)
    # the domain's median and mean page rate are named for what they are
    assert domains.loc["big", "median_rate_per_day"] == pytest.approx(24 * math.exp(mu_mean),
                                                                      rel=1e-2)  # fmt: skip
    assert domains.loc["big", "mean_rate_per_day"] == pytest.approx(
        24 * math.exp(mu_mean + sd_p**2 / 2), rel=1e-2
    )


def test_stratified_sample_covers_every_domain(rng):
    domain = np.repeat(np.arange(5), [1, 3, 50, 200, 746])
    sample = scale.stratified_sample(domain, 100, rng)
    assert len(np.unique(sample)) == len(sample)
    assert set(domain[sample]) == set(range(5))
    assert 90 <= len(sample) <= 100
    # proportional allocation: the biggest domain gets the most
    counts = np.bincount(domain[sample], minlength=5)
    assert counts[4] > counts[3] > counts[2]


def test_informative_pages_keep_their_first_grid_and_match_quadrature(monkeypatch):
    """Pages whose likelihood is much narrower than the grid prior keep the grid built
    around the global mean even though their domain's mode is ~2 units away (no second
    grid): the posteriors still match 2-D quadrature."""
    types = [
        (*hourly(200, list(range(3, 200, 5))), 40),
        (*hourly(200, list(range(2, 200, 4))), 40),
    ]
    mu_g, sd_d, sd_p = math.log(0.03), 1.0, 0.8
    obs = observations({"shifted": types})
    seen = {}
    real = scale._needs_regrid

    def spy(grids, shift, width):
        out = real(grids, shift, width)
        seen["regrid"], seen["shift"] = out, shift
        return out

    monkeypatch.setattr(scale, "_needs_regrid", spy)
    domains, pages = scale.grid_domain_and_pages(obs.interval_stats, mu_g, sd_d, sd_p)
    assert not seen["regrid"].any() and np.abs(seen["shift"]).min() > 1.5
    mu_mean, mu_sd, per_type = oracle(types, mu_g, sd_d, sd_p)
    assert domains.loc["shifted", "mu_mean"] == pytest.approx(mu_mean, abs=2e-3)
    assert domains.loc["shifted", "mu_sd"] == pytest.approx(mu_sd, rel=2e-2)
    for k, (mean, lo, hi) in enumerate(per_type):
        assert pages["mean"][k * 40] == pytest.approx(mean, rel=2e-3)
        assert pages["lower"][k * 40] == pytest.approx(lo, rel=5e-3)
        assert pages["upper"][k * 40] == pytest.approx(hi, rel=5e-3)
