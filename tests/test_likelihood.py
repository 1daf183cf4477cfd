"""The numpy log-likelihood (bayesrate.likelihood) against raw visits and calculus."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from bayesrate import likelihood
from bayesrate.observations import Observations
from tests.helpers import raw_loglik, seed_of


@pytest.fixture(scope="module")
def obs() -> Observations:
    rng = np.random.default_rng(seed_of("likelihood"))
    frames = []
    for i, (rate, n) in enumerate(((0.05, 30), (0.4, 12), (0.01, 50), (0.2, 5), (3.0, 8))):
        t = np.concatenate([[0.0], np.cumsum(rng.uniform(1, 12, n))])
        flags = np.r_[0, (rng.random(n) < 1 - np.exp(-rate * np.diff(t))).astype(int)]
        frames.append(pd.DataFrame({"page": f"p{i}", "time": t, "changed": flags}))
    return Observations.from_frame(pd.concat(frames, ignore_index=True))


def test_loglik_grid_matches_raw_visits(obs):
    theta = np.linspace(-8, 3, 23)
    grid = likelihood.loglik_grid(obs.interval_stats.groups, theta)
    for page in range(obs.n_pages):
        want = [raw_loglik(obs, page, math.exp(t)) for t in theta]
        np.testing.assert_allclose(grid[page], want, rtol=1e-12, atol=1e-12)


def test_pointwise_and_selection_agree_with_the_grid(obs):
    groups = obs.interval_stats.groups
    draws = np.random.default_rng(1).normal(-3, 1, size=(7, obs.n_pages))
    pointwise = likelihood.pointwise_loglik(groups, draws)
    for s in range(7):
        np.testing.assert_allclose(pointwise[s], likelihood.loglik(groups, draws[s]), rtol=1e-13)
    pick = np.array([4, 0, 2])
    sub = likelihood.loglik_grid(groups.select(pick), draws[:, pick].T)
    np.testing.assert_allclose(sub, pointwise[:, pick].T, rtol=1e-13)


def test_score_and_information_are_the_derivatives(obs):
    groups = obs.interval_stats.groups
    theta = np.linspace(-6, 1, obs.n_pages)
    value, score, info = likelihood.loglik_derivatives(groups, theta)
    h = 1e-4
    up, down = likelihood.loglik(groups, theta + h), likelihood.loglik(groups, theta - h)
    np.testing.assert_allclose(value, likelihood.loglik(groups, theta))
    np.testing.assert_allclose(score, (up - down) / (2 * h), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(info, -(up - 2 * value + down) / h**2, rtol=1e-5, atol=1e-6)


def _exact_log1mexp_of_log(a: float) -> float:
    """log(1 - exp(-e^a)) to double precision with exact rational series where needed."""
    if a < -30:
        lam = math.exp(a)  # log(1 - e^-x) = log x - x/2 + x^2/24 - ...: the first terms
        return a - lam / 2 + lam * lam / 24
    x = Fraction(math.exp(a))
    if x < 1:  # 1 - e^{-x} as an exact alternating series, then one rounding
        term, total, k = Fraction(1), Fraction(0), 1
        while True:
            term = term * (-x) / k
            total -= term
            if abs(term) < Fraction(1, 10**40) * total:
                break
            k += 1
        return math.log(float(total))  # x >= e^-30: no underflow
    return math.log1p(-math.exp(-float(x)))


@pytest.mark.parametrize(
    "a", [-800.0, -300.0, -40.0, -20.5, -19.5, -5.0, -0.37, 0.0, 0.3, 3.0, 40.0]
)
def test_log1mexp_of_log_is_accurate(a):
    got = float(likelihood.log1mexp_of_log(np.array([a]))[0])
    want = _exact_log1mexp_of_log(a)
    assert got == pytest.approx(want, rel=1e-14, abs=1e-300)
