"""Merging Open Terms Archive's collection-wide silences (probable outages).

Oracles: a brute-force walk over the slots for the rule itself, and, for exactness, the
observations of the schedule that really ran (the nominal grid with the outage cut out,
loaded without merging): merging the outage must give exactly those observations.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bayesrate import datasets
from bayesrate.errors import ObservationError
from bayesrate.io.ota import GridEra, from_changelog, silent_stretches
from bayesrate.seeds import rng_from

START = pd.Timestamp("2024-01-01", tz="UTC")
OUTAGE = (pd.Timestamp("2024-02-10 03:00", tz="UTC"), pd.Timestamp("2024-02-16 03:00", tz="UTC"))
END = pd.Timestamp("2024-04-01", tz="UTC")


def brute_force_stretches(activity, times, probability, window_days):
    """Every maximal silent run between active slots, walked slot by slot."""
    out = []
    s = 0
    n = len(activity)
    first_active = next(i for i in range(n) if activity[i] > 0)
    last_active = max(i for i in range(n) if activity[i] > 0)
    s = first_active
    while s < last_active:
        if activity[s] > 0:
            s += 1
            continue
        a = s
        while activity[s] == 0:
            s += 1
        b = s - 1
        begin, end = times[a - 1], times[b]
        w = window_days * 24
        events = sum(
            activity[i]
            for i in range(n)
            if (begin - w <= times[i] <= begin) or (end < times[i] <= end + w)
        )
        span = min(w, begin - times[0]) + min(w, times[-1] - end)
        if math.exp(-events / span * (end - begin)) < probability:
            out.append((a, b))
    return out


@pytest.mark.parametrize("case", range(6))
def test_rule_equals_brute_force(case):
    rng = rng_from(f"ota-silences-{case}")
    n = 400
    times = np.cumsum(rng.choice([6.0, 12.0], size=n)) + 1000.0
    rate = rng.uniform(0.2, 3.0)
    activity = rng.poisson(rate, size=n)
    for _ in range(4):  # outages of random length
        a = rng.integers(5, n - 30)
        activity[a : a + rng.integers(1, 25)] = 0
    activity[0] = activity[-1] = 1
    probability = float(rng.choice([1e-3, 1e-2, 0.2]))
    window = float(rng.choice([2.0, 10.0, 30.0]))
    got = [
        (s["first_slot"], s["last_slot"])
        for s in silent_stretches(activity, times, probability, window)
    ]
    assert got == brute_force_stretches(activity, times, probability, window)
    assert got, "the case should merge something"


def test_rule_rejects_bad_settings():
    with pytest.raises(ObservationError, match="silence_probability"):
        silent_stretches(np.ones(5), np.arange(5.0), 0.0, 30.0)


def synthetic_collection():
    """30 busy documents on a 6-hour grid; no run happens during OUTAGE.

    Changes are committed by the first run at or after they happen, so everything that
    changed during the outage is committed by the first run after it.
    """
    rng = rng_from("ota-silences-collection")
    grid = pd.date_range(START, END, freq="6h")
    ran = grid[(grid < OUTAGE[0]) | (grid > OUTAGE[1])]
    rows = []
    for d in range(30):
        path = f"Service{d % 5}/Terms {d}.md"
        rows.append((ran[0] + pd.Timedelta(minutes=5), "first_record", path))
        n = rng.poisson(0.4 * (END - START).days)
        seconds = np.round(rng.uniform(0, (END - START).total_seconds(), n))
        happened = START + pd.to_timedelta(seconds, "s")
        committed = ran[np.searchsorted(ran, happened, "left").clip(max=len(ran) - 1)]
        rows += [(t + pd.Timedelta(minutes=5), "change", path) for t in committed if t > ran[0]]
    log = pd.DataFrame(rows, columns=["time_utc", "event", "path"])
    log["service"] = log["path"].str.split("/").str[0]
    log["terms_type"] = "Terms"
    docs = log.drop_duplicates("path")[["path", "service", "terms_type"]].assign(present_in_head=1)
    return log.sort_values("time_utc").reset_index(drop=True), docs


def test_merging_the_outage_gives_the_schedule_that_ran():
    log, docs = synthetic_collection()
    nominal = (GridEra(str(START), None, 6.0),)
    merged = from_changelog(log, docs, grid=nominal)
    ran = (
        GridEra(str(START), str(OUTAGE[0]), 6.0),
        GridEra(str(OUTAGE[1] + pd.Timedelta(hours=1)), None, 6.0),
    )
    truth = from_changelog(log, docs, grid=ran, merge_silences=False)
    np.testing.assert_array_equal(merged.offsets, truth.offsets)
    np.testing.assert_array_equal(merged.time, truth.time)
    np.testing.assert_array_equal(merged.changed, truth.changed)
    (stretch,) = merged.meta["merged_silences"]
    assert stretch["runs"] == 24  # six days of four runs
    assert "merged 1 collection-wide silent stretch" in " ".join(merged.notes)

    kept = from_changelog(log, docs, grid=nominal, merge_silences=False)
    assert kept.n_visits == merged.n_visits + 24 * 30
    assert kept.n_changes == merged.n_changes
    assert kept.meta["merged_silences"] is None


def test_embedded_dataset_reports_merges_and_can_keep_every_run():
    merged = datasets.load("ota-pga")
    kept = datasets.load("ota-pga", merge_silences=False)
    stretches = merged.meta["merged_silences"]
    assert stretches and all(s["expected_events"] > -math.log(1e-3) for s in stretches)
    runs_dropped = kept.n_visits - merged.n_visits
    assert runs_dropped > 0 and merged.n_changes == kept.n_changes
    assert f"{sum(s['runs'] for s in stretches)} nominal run(s)" in " ".join(merged.notes)


def test_cli_input_option_keeps_silent_runs():
    import argparse

    from bayesrate.commands.common import add_input_options, load_observations

    parser = argparse.ArgumentParser()
    add_input_options(parser)
    merged = load_observations(parser.parse_args(["--dataset", "ota-pga"]))
    kept = load_observations(parser.parse_args(["--dataset", "ota-pga", "--keep-silent-runs"]))
    assert kept.n_visits == datasets.load("ota-pga", merge_silences=False).n_visits
    assert merged.n_visits == datasets.load("ota-pga").n_visits < kept.n_visits
