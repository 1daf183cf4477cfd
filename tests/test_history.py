"""Change histories: loader validation, lifetimes, and crawl replay against brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesrate import datasets
from bayesrate.errors import ObservationError
from bayesrate.history import (
    APPROXIMATE_NOTE,
    ChangeHistory,
    FixedInterval,
    PoissonVisits,
    VisitGrid,
    crawl,
    from_observations,
    hours_of,
    segment_searchsorted,
)
from bayesrate.io.history import read_history
from bayesrate.observations import Observations

H = 3600.0


def ts(hours: float) -> str:
    """ISO timestamp (UTC) ``hours`` after 2024-01-01."""
    return (pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(hours=hours)).isoformat()


def base_hours() -> float:
    return pd.Timestamp("2024-01-01", tz="UTC").value / 3.6e12


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["page", "domain", "time", "event"])


# ------------------------------------------------------------------------------ loading
def test_ids_stay_text_and_missing_cells_are_named(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text(
        "page,domain,time,event\n"
        f"007,NA,{ts(0)},created\n"
        f"7,NA,{ts(1)},created\n"
        f"007,NA,{ts(5)},changed\n"
        f"NA,001,{ts(2)},changed\n"
    )
    h = read_history(path)
    assert list(h.pages.index) == ["007", "7", "NA"]
    assert list(h.pages["domain"]) == ["NA", "NA", "001"]
    assert h.changes_per_page.tolist() == [1, 0, 1]
    path.write_text(f"page,time\n007,{ts(0)}\n,{ts(1)}\n7,{ts(2)}\n  ,{ts(3)}\n")
    with pytest.raises(ObservationError, match=r"missing values in 'page'.*rows: 1, 3"):
        read_history(path)


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([], "empty"),
        ([["a", "d", ts(0), "updated"]], r"unknown event.*rows: 0"),
        ([["a", "d", "2024-01-01T00:00", "created"]], r"timezone-naive.*rows: 0"),
        ([["a", "d", "yesterday", "created"]], r"neither numbers nor timestamps.*rows: 0"),
        (
            [["a", "d", ts(0), "created"], ["a", "e", ts(1), "changed"]],
            r"constant within a page.*rows: 1",
        ),
        (
            [
                ["a", "d", ts(0), "created"],
                ["a", "d", ts(1), "deleted"],
                ["a", "d", ts(2), "changed"],
            ],
            r"impossible event sequence.*rows: 2.*pages: 'a'",
        ),
        (
            [
                ["b", "d", ts(0), "created"],
                ["b", "d", ts(3), "created"],
                ["c", "d", ts(1), "changed"],
            ],
            r"impossible event sequence.*rows: 1",
        ),
    ],
)
def test_bad_tables_are_rejected_naming_rows(rows, match):
    with pytest.raises(ObservationError, match=match):
        ChangeHistory.from_frame(frame(rows))


def test_missing_columns_and_end_before_last_event():
    with pytest.raises(ObservationError, match="missing required column"):
        ChangeHistory.from_frame(pd.DataFrame({"page": ["a"]}))
    with pytest.raises(ObservationError, match=r"after the given end.*rows: 1"):
        ChangeHistory.from_frame(
            frame([["a", "d", ts(0), "created"], ["a", "d", ts(9), "changed"]]), end=ts(5)
        )


def test_page_time_only_means_every_row_is_a_change(tmp_path):
    path = tmp_path / "h.csv.gz"
    pd.DataFrame({"page": ["x", "x", "y"], "time": [ts(1), ts(2), ts(3)]}).to_csv(path, index=False)
    h = read_history(path)
    assert h.n_changes == 3 and h.changes_per_page.tolist() == [2, 1]
    assert any("every row is a change" in n for n in h.notes)
    # pages alive from the start of the record, to its end
    assert np.allclose(h.life_start, h.start) and np.allclose(h.life_end, h.end)


def test_lifetimes_recreation_and_same_instant_rules():
    t0 = base_hours()
    rows = [
        ["a", "d", ts(0), "created"],
        ["a", "d", ts(2), "changed"],
        ["a", "d", ts(2), "changed"],  # landed together: one change
        ["a", "d", ts(4), "deleted"],
        ["a", "d", ts(6), "created"],  # re-creation: a change at 6
        ["a", "d", ts(8), "changed"],
        ["b", "d", ts(1), "changed"],  # no creation: alive from the start of the record
        ["b", "d", ts(3), "deleted"],
        ["c", "d", ts(5), "changed"],  # listed before its creation at the same instant
        ["c", "d", ts(5), "created"],
        ["e", "d", ts(7), "created"],  # created and deleted at one instant
        ["e", "d", ts(7), "deleted"],
        ["f", "d", ts(0.5), "created"],
        ["f", "d", ts(9), "changed"],
        ["f", "d", ts(9), "deleted"],
        ["f", "d", ts(9), "created"],  # deleted and re-created at one instant: a change
    ]
    h = ChangeHistory.from_frame(frame(rows)[::-1])  # row order does not matter
    assert list(h.pages.index) == ["a", "b", "c", "f"]  # e never existed for any time
    by = {p: i for i, p in enumerate(h.pages.index)}

    def changes(p):
        i = by[p]
        return (h.times[h.offsets[i] : h.offsets[i + 1]] - t0).tolist()

    def lives(p):
        i = by[p]
        sl = slice(h.life_offsets[i], h.life_offsets[i + 1])
        starts, ends = (h.life_start[sl] - t0).tolist(), (h.life_end[sl] - t0).tolist()
        return list(zip(starts, ends, strict=True))

    assert changes("a") == [2, 6, 8] and lives("a") == [(0, 4), (6, 9)]
    assert changes("b") == [1] and lives("b") == [(0, 3)]
    assert changes("c") == [] and lives("c") == [(5, 9)]
    assert changes("f") == [9]
    joined = " | ".join(h.notes)
    for expected in ("into another change", "into a creation or deletion", "re-creation",
                     "zero-length", "no 'created' event", "at one instant count"):  # fmt: skip
        assert expected in joined
    assert h.alive_at(t0 + 5).tolist() == [False, False, True, True]


def test_parquet_round_trip(tmp_path):
    rows = frame([["a", "d", ts(0), "created"], ["a", "d", ts(3), "changed"]])
    rows["time"] = pd.to_datetime(rows["time"], utc=True)
    rows.to_parquet(tmp_path / "h.parquet")
    h = read_history(tmp_path / "h.parquet")
    assert h.n_changes == 1 and h.pages.index[0] == "a"


def test_segment_searchsorted_matches_numpy_per_segment(rng):
    sizes = rng.integers(0, 40, 200)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = np.concatenate([np.sort(rng.integers(0, 50, s)).astype(float) for s in sizes])
    seg = rng.integers(0, len(sizes), 3000)
    q = rng.integers(-2, 53, 3000).astype(float)
    q[:5] = [-np.inf, np.inf, -np.inf, 0.0, 49.0]
    # the whole-array search (many queries) and the one-by-one one (a few, or one)
    cases = [(seg, q), *((seg[i : i + k], q[i : i + k]) for i, k in ((0, 16), (7, 3), (20, 1)))]
    for side in ("left", "right"):
        for seg_, q_ in cases:
            got = segment_searchsorted(values, offsets, seg_, q_, side=side)
            want = [
                offsets[s] + np.searchsorted(values[offsets[s] : offsets[s + 1]], v, side=side)
                for s, v in zip(seg_, q_, strict=True)
            ]
            assert got.tolist() == want
        # a scalar query broadcast over the segments
        got = segment_searchsorted(values, offsets, seg[:4], 25.0, side=side)
        want = [offsets[s] + np.searchsorted(values[offsets[s] : offsets[s + 1]], 25.0, side=side)
                for s in seg[:4]]  # fmt: skip
        assert got.tolist() == want


# ------------------------------------------------------------------------------ crawl
def random_history(rng, n_pages=60) -> ChangeHistory:
    rows = []
    for i in range(n_pages):
        t = 0.0
        kinds = []
        if rng.random() < 0.7:
            kinds.append("created")
        for _ in range(rng.integers(0, 30)):
            kinds.append("changed")
        if rng.random() < 0.3:
            kinds += ["deleted", "created"] + ["changed"] * int(rng.integers(0, 4))
        if rng.random() < 0.3:
            kinds.append("deleted")
        for kind in kinds:
            t += rng.exponential(30.0)
            rows.append([f"p{i}", "d", ts(t), kind])
    rows.append(["anchor", "d", ts(2000), "changed"])  # the record runs to at least 2000 h
    return ChangeHistory.from_frame(frame(rows))


def brute_force_truth(h: ChangeHistory, c) -> None:
    """Per interval, count changes by scanning every change of the page (plain Python)."""
    obs = c.observations
    for j, hp in enumerate(c.history_page):
        times = h.times[h.offsets[hp] : h.offsets[hp + 1]]
        lives = list(
            zip(
                h.life_start[h.life_offsets[hp] : h.life_offsets[hp + 1]],
                h.life_end[h.life_offsets[hp] : h.life_offsets[hp + 1]],
                strict=True,
            )
        )
        visits = obs.time[obs.offsets[j] : obs.offsets[j + 1]]
        truth = c.true_changes[obs.offsets[j] : obs.offsets[j + 1]]
        assert truth[0] == 0 and obs.changed[obs.offsets[j]] == 0
        for v in visits:
            assert any(a <= v < b for a, b in lives)
        for k in range(1, len(visits)):
            want = sum(1 for x in times if visits[k - 1] < x <= visits[k])
            assert truth[k] == want
            assert obs.changed[obs.offsets[j] + k] == (want > 0)


@pytest.mark.parametrize(
    "schedule",
    [
        FixedInterval(24.0),
        FixedInterval(7.5, phase_step_hours=1.0),
        FixedInterval(24.0, phase=3.0),
        PoissonVisits(1 / 12),
        VisitGrid(tuple(np.sort(np.random.default_rng(5).uniform(0, 2100, 400)) + 0.0)),
    ],
    ids=["fixed", "fixed-hour-phase", "fixed-phase", "poisson", "grid"],
)
def test_crawl_matches_brute_force_per_interval(rng, schedule):
    h = random_history(rng)
    if isinstance(schedule, VisitGrid):  # grid times relative to the record's start
        schedule = VisitGrid(tuple(np.asarray(schedule.times) + base_hours()))
    c = crawl(h, schedule, seed="crawl-test")
    assert c.true_changes.sum() > 50
    brute_force_truth(h, c)
    # a change is either inside an observed interval or outside the page's visit span
    assert c.true_changes.sum() <= h.n_changes


def test_crawl_window_and_exact_intervals(rng):
    h = random_history(rng)
    lo, hi = h.start + 100.0, h.start + 900.0
    c = crawl(h, FixedInterval(24.0), seed="w", start=lo, end=hi)
    obs = c.observations
    assert obs.time.min() >= lo and obs.time.max() < hi
    # one interval length per page on a fixed grid (re-creation gaps aside)
    gaps = np.diff(obs.time)[~obs.is_baseline[1:]]
    assert np.isin(np.round(gaps % 24.0, 9), (0.0, 24.0)).all()
    brute_force_truth(h, c)


def test_from_observations_is_an_approximate_history():
    obs = Observations.from_arrays(
        np.array(["a"] * 4 + ["b"] * 3),
        np.array([0.0, 10, 20, 30, 5, 15, 25]) + base_hours(),
        np.array([0, 1, 0, 1, 0, 0, 1]),
        time_kind="datetime",
    )
    h = from_observations(obs)
    assert h.notes[0] == APPROXIMATE_NOTE
    assert (h.times - base_hours()).tolist() == [10.0, 30.0, 25.0]
    assert (h.life_start - base_hours()).tolist() == [0.0, 5.0]
    assert (h.life_end - base_hours()).tolist() == [30.0, 25.0]  # b stopped before the log's end


def test_embedded_tldr_history():
    h = datasets.load_history("tldr-pages")
    # SOURCE.md: 7,822 pages, 20,693 change rows; 6 pages exist only for zero time
    assert h.n_pages == 7816
    assert h.n_changes + 256 + 320 - 59 - 1 == 20693  # merges and re-creations, in the notes
    assert "CC-BY 4.0" in h.notes[0]
    assert set(h.pages["domain"]) >= {"common", "linux", "osx", "windows"}
    with pytest.raises(ObservationError, match="change history, not a crawl log"):
        datasets.load("tldr-pages")
    assert "tldr-pages" in datasets.history_names() and "tldr-pages" not in datasets.names()
    approx = datasets.load_history("ota-pga")
    assert approx.notes[0] == APPROXIMATE_NOTE


def test_a_crawl_asking_for_too_many_visits_is_refused_before_allocating():
    """Issue 54 row 7: ``study forecast --crawl-every 0.00001`` asked for 198 TiB."""
    history = datasets.load_history("tldr-pages")
    with pytest.raises(ObservationError, match=r"would make .* visits"):
        crawl(history, FixedInterval(1e-5, phase_step_hours=1e-5), seed=1)
    with pytest.raises(ObservationError, match=r"would make .* visits"):
        crawl(history, PoissonVisits(1e5), seed=1)


def test_an_empty_crawl_window_is_named_in_dates():
    """Issue 54 probe: the error gave hours since the epoch (525960.0 .. 496497.29)."""
    history = datasets.load_history("tldr-pages")
    with pytest.raises(ObservationError, match=r"2030-01-01 00:00:00\+00:00 \.\. .*spans"):
        crawl(history, FixedInterval(24.0), start=525_960.0)


def test_record_end_column_sets_the_end_and_must_be_one_time():
    frame = pd.DataFrame(
        {"page": ["a", "a"], "time": ["2024-01-01T00:00Z", "2024-01-02T00:00Z"],
         "event": ["created", "changed"]}
    )  # fmt: skip
    assert ChangeHistory.from_frame(frame).end == hours_of("2024-01-02T00:00Z")
    ended = frame.assign(record_end="2024-01-10T00:00Z")
    history = ChangeHistory.from_frame(ended)
    assert history.end == hours_of("2024-01-10T00:00Z") and history.alive_at(history.end - 1)[0]
    assert ChangeHistory.from_frame(ended, end="2024-01-05T00:00Z").end == hours_of(
        "2024-01-05T00:00Z"
    )  # an explicit end wins
    with pytest.raises(ObservationError, match="one time") as err:
        ChangeHistory.from_frame(ended.assign(record_end=["2024-01-10T00:00Z", "2024-01-11T00Z"]))
    assert err.value.rows == [1]
    with pytest.raises(ObservationError, match="not times") as err:
        ChangeHistory.from_frame(ended.assign(record_end=["2024-01-10T00:00Z", "soon"]))
    assert err.value.field == "record_end" and err.value.rows == [1]
    with pytest.raises(ObservationError, match="events after the given end"):
        ChangeHistory.from_frame(frame.assign(record_end="2024-01-01T12:00Z"))
