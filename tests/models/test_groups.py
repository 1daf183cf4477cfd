"""Interval groups (``bayesrate.models.groups``) against the intervals one by one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesrate.models.groups import interval_groups, visit_patterns
from bayesrate.observations import Observations
from tests.helpers import interval_exposures, seed_of

#: 2024-03-29T00:00Z in hours since the epoch; Paris moves to summer time on 2024-03-31 01:00Z
FRIDAY = 475_464.0


def _paris_obs() -> Observations:
    """Pages on 2-h, 3-h and half-hour-shifted grids across the spring DST change, plus
    long intervals, a single-visit page and one with jittered times."""
    rng = np.random.default_rng(seed_of("groups-paris"))
    frames = []

    def add(label, times):
        flags = np.r_[0, (rng.random(len(times) - 1) < 0.4).astype(int)]
        frames.append(pd.DataFrame({"page": label, "time": times, "changed": flags}))

    add("two-hourly", FRIDAY + np.arange(0.0, 96.0, 2.0))
    add("three-hourly", FRIDAY + 0.5 + np.arange(0.0, 96.0, 3.0))
    add("long", FRIDAY + np.array([0.0, 30 * 24.0, 31 * 24.0, 62 * 24.0]))
    add("jittered", FRIDAY + np.cumsum(np.round(rng.uniform(0.5, 9.0, 30) * 60) / 60))
    add("two-hourly-copy", FRIDAY + 168.0 + np.arange(0.0, 96.0, 2.0))
    add("five-hourly", FRIDAY + 24.0 + np.arange(0.0, 75.0, 5.0))
    frames.append(pd.DataFrame({"page": ["single"], "time": [FRIDAY], "changed": [0]}))
    return Observations.from_frame(pd.concat(frames, ignore_index=True), time_unit="h")


@pytest.mark.parametrize("timezone", ["UTC", "Europe/Paris", "Asia/Kolkata"])
def test_every_interval_has_its_patterns_exposure_and_bucket(timezone):
    """Each interval's own overlap (and detecting bucket) equals its pattern's; counts add up."""
    from bayesrate.clock import hour_of_week

    obs = _paris_obs()
    patterns = visit_patterns(obs, timezone)
    ends = np.flatnonzero(~obs.is_baseline)
    group = patterns.interval_group
    assert len(group) == obs.n_intervals
    np.testing.assert_array_equal(patterns.group_page[group], obs.page_of_visit[ends])
    np.testing.assert_array_equal(np.bincount(group), patterns.group_n)
    np.testing.assert_array_equal(
        np.bincount(group, weights=obs.changed[ends]), patterns.group_changed
    )
    # oracle: a random multiplier integrated minute by minute over every interval
    m = np.random.default_rng(seed_of(f"groups-m-{timezone}")).uniform(0.2, 3.0, 168)
    pattern = patterns.group_pattern[group]
    for page in range(obs.n_pages):
        sl = slice(obs.offsets[page], obs.offsets[page + 1])
        own = interval_exposures(obs.time[sl], m, timezone)
        rows = (obs.page_of_visit[ends] == page).nonzero()[0]
        # times near 4.7e5 h are resolved to ~6e-11 h, the oracle assumes whole minutes
        np.testing.assert_allclose(patterns.pattern_overlap[pattern[rows]] @ m, own, rtol=1e-9)
    np.testing.assert_array_equal(
        patterns.pattern_end_bucket[pattern], hour_of_week(obs.time[ends], timezone)
    )
    np.testing.assert_allclose(patterns.pattern_length[pattern], np.diff(obs.time)[ends - 1])


def test_regular_grids_share_patterns():
    """Pages on the same grid a week apart fall into the same patterns (no DST in UTC)."""
    patterns = visit_patterns(_paris_obs(), "UTC")
    labels = list(_paris_obs().pages.index)
    first = patterns.group_pattern[patterns.group_page == labels.index("two-hourly")]
    copy = patterns.group_pattern[patterns.group_page == labels.index("two-hourly-copy")]
    # 47 intervals within four days: 47 week positions, the same one week later
    assert set(first) == set(copy) and len(first) == 47


def test_intervals_longer_than_176_days_keep_their_own_pattern():
    """Pattern keys of (length, week position) once wrapped past 176 days: a 353-day
    interval took the pattern of a one-day one."""
    ms = 3.6e6  # key units per hour of the former key
    k = int(168 * ms) + 1
    wrap = -(-(2**64) // k)
    shift = (wrap * k - 2**64) / ms
    long = 24.0 + wrap / ms
    obs = Observations.from_arrays(
        np.array(["a", "a", "b", "b"]),
        np.array([FRIDAY + shift, FRIDAY + shift + 24.0, FRIDAY, FRIDAY + long]),
        np.array([0, 1, 0, 0]),
    )
    patterns = visit_patterns(obs, "UTC")
    assert patterns.n_patterns == 2
    np.testing.assert_allclose(np.sort(patterns.pattern_length), [24.0, long])


def test_interval_groups_are_the_length_groups():
    obs = _paris_obs()
    groups = interval_groups(obs)
    lengths = groups.basis[groups.pattern, 0]
    stats = obs.interval_stats
    np.testing.assert_array_equal(groups.page, stats.group_page)
    np.testing.assert_allclose(lengths, stats.group_tau)
    changed = groups.select(groups.detected > 0)
    assert changed.detected.sum() == obs.n_changes and (changed.detected > 0).all()
    np.testing.assert_allclose(changed.basis[changed.pattern, 0], lengths[groups.detected > 0])
