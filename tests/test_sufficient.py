"""Sufficient statistics against a direct per-visit computation."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

from bayesrate import datasets
from bayesrate.clock import hour_of_week_overlap
from bayesrate.observations import Observations


def random_observations(rng, n_pages=12, irregular=True) -> Observations:
    rows = []
    for p in range(n_pages):
        n = int(rng.integers(1, 40))
        if irregular:
            steps = rng.exponential(7.0, n - 1) + 0.01
        else:
            steps = rng.choice([6.0, 12.0, 24.0], n - 1)
        times = 400_000.0 + rng.uniform(0, 50) + np.concatenate([[0.0], np.cumsum(steps)])
        flags = [None, *rng.integers(0, 2, n - 1).tolist()]
        rows += [(f"p{p}", f"d{p % 3}", t, f) for t, f in zip(times, flags, strict=True)]
    return Observations.from_frame(
        pd.DataFrame(rows, columns=["page", "domain", "time", "changed"])
    )


def direct_intervals(obs: Observations):
    """Per-visit loop: {(page, tau): [n, c]}, exposure per page."""
    groups = defaultdict(lambda: [0, 0])
    exposure = defaultdict(float)
    frame = obs.to_frame()
    for page, g in frame.groupby("page", sort=False):
        t = g["time"].to_numpy()
        c = g["changed"].to_numpy()
        for k in range(1, len(t)):
            groups[(page, t[k] - t[k - 1])][0] += 1
            groups[(page, t[k] - t[k - 1])][1] += int(c[k])
            exposure[page] += t[k] - t[k - 1]
    return groups, exposure


@pytest.mark.parametrize("irregular", [True, False])
def test_interval_stats_match_per_visit_loop(rng, irregular):
    obs = random_observations(rng, irregular=irregular)
    stats = obs.interval_stats
    groups, exposure = direct_intervals(obs)
    got = {
        (stats.pages[p], tau): [n, c]
        for p, tau, n, c in zip(
            stats.group_page, stats.group_tau, stats.group_n, stats.group_changed, strict=True
        )
    }
    assert got == dict(groups)
    for i, page in enumerate(stats.pages):
        assert stats.exposure[i] == pytest.approx(exposure.get(page, 0.0))
    assert stats.group_n.sum() == obs.n_intervals
    assert stats.group_changed.sum() == obs.n_changes


def test_interval_loglik_matches_per_visit_bernoulli(rng):
    obs = random_observations(rng)
    rate = rng.uniform(0.01, 0.5, obs.n_pages)
    frame = obs.to_frame()
    direct = np.zeros(obs.n_pages)
    for i, (_, g) in enumerate(frame.groupby("page", sort=False)):
        t = g["time"].to_numpy()
        c = g["changed"].to_numpy()
        for k in range(1, len(t)):
            p = 1 - math.exp(-rate[i] * (t[k] - t[k - 1]))
            direct[i] += math.log(p) if c[k] else math.log(1 - p)
    assert np.allclose(obs.interval_stats.loglik(rate), direct)


def brute_overlap(start_h: float, end_h: float, tz: str) -> np.ndarray:
    """Walk the interval minute by minute in local time (independent of clock.py)."""
    out = np.zeros(168)
    zone = ZoneInfo(tz)
    t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=start_h)
    end = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=end_h)
    step = timedelta(minutes=1)
    while t < end:
        nxt = min(t + step, end)
        local = (t + (nxt - t) / 2).astimezone(zone)
        out[local.weekday() * 24 + local.hour] += (nxt - t).total_seconds() / 3600
        t = nxt
    return out


@pytest.mark.parametrize("tz", ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"])
def test_hour_of_week_overlap_against_minute_walk(tz):
    # intervals across DST changes (2024-03-10 US, 2024-03-31 EU, 2024-10-27 EU)
    start = pd.Timestamp("2024-03-09T20:00Z").value / 3.6e12
    cases = [
        (start, start + 30.0),
        (start + 500.5, start + 700.25),
        (start + 5000.0, start + 5400.0),
        (start + 10.0, start + 10.0),
    ]
    for a, b in cases:
        # aligned to whole minutes, so the minute walk is exact
        a, b = round(a * 60) / 60, round(b * 60) / 60
        got = hour_of_week_overlap(np.array([a]), np.array([b]), tz)[0]
        assert np.allclose(got, brute_overlap(a, b, tz), atol=1e-9)


def test_hour_of_week_stats_loglik_matches_per_interval(rng):
    obs = random_observations(rng)
    week = obs.hour_of_week_stats("Europe/Paris")
    rate = rng.uniform(0.01, 0.5, obs.n_pages)
    m = rng.uniform(0.2, 3.0, 168)
    frame = obs.to_frame()
    direct = np.zeros(obs.n_pages)
    for i, (_, g) in enumerate(frame.groupby("page", sort=False)):
        t = g["time"].to_numpy()
        c = g["changed"].to_numpy()
        for k in range(1, len(t)):
            lam = rate[i] * brute_overlap(t[k - 1], t[k], "Europe/Paris") @ m
            direct[i] += math.log(-math.expm1(-lam)) if c[k] else -lam
    # the minute walk rounds interval ends to the minute: compare loosely
    assert np.allclose(week.loglik(rate, m), direct, rtol=2e-3, atol=2e-3)
    # with flat modulation both summaries give the same likelihood exactly
    assert np.allclose(week.loglik(rate, np.ones(168)), obs.interval_stats.loglik(rate))


def test_embedded_dataset_statistics_are_consistent():
    obs = datasets.load("ota-pga")
    stats = obs.interval_stats
    week = obs.hour_of_week_stats()
    assert stats.group_n.sum() == obs.n_intervals
    assert week.changed_count.sum() == obs.n_changes
    assert np.allclose(week.unchanged_exposure.sum(1), stats.unchanged_exposure)
    # on a 6/12-hourly UTC grid the changed-interval patterns are few
    assert week.n_patterns < 100
