"""The canonical observation table: construction, validation errors, round trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrate.errors import ObservationError
from bayesrate.observations import Observations


def frame(**overrides):
    base = {
        "page": ["a", "a", "a", "b", "b"],
        "domain": ["x", "x", "x", "y", "y"],
        "time": [0.0, 1.0, 3.0, 0.5, 2.5],
        "changed": [None, 1, 0, None, 1],
    }
    base.update(overrides)
    return pd.DataFrame(base)


def test_basic_construction_and_views():
    obs = Observations.from_frame(frame())
    assert obs.n_pages == 2 and obs.n_visits == 5 and obs.n_intervals == 3
    assert obs.n_changes == 2
    assert list(obs.pages.index) == ["a", "b"]
    assert obs.offsets.tolist() == [0, 3, 5]
    assert obs.changes_per_page.tolist() == [1, 1]
    back = obs.to_frame()
    assert back["changed"].isna().tolist() == [True, False, False, True, False]
    assert back["time"].tolist() == [0.0, 1.0, 3.0, 0.5, 2.5]


def test_interleaved_pages_keep_each_pages_order():
    df = frame().iloc[[0, 3, 1, 4, 2]]
    obs = Observations.from_frame(df)
    assert obs.time.tolist() == [0.0, 1.0, 3.0, 0.5, 2.5]


def test_time_units_and_datetimes():
    hours = Observations.from_frame(frame(time=[0, 60, 180, 30, 150]), time_unit="min")
    assert hours.time.tolist() == [0.0, 1.0, 3.0, 0.5, 2.5]
    stamps = pd.to_datetime(
        [
            "2024-01-01T00:00Z",
            "2024-01-01T01:00Z",
            "2024-01-01T03:00Z",
            "2024-01-01T00:30Z",
            "2024-01-01T02:30Z",
        ],
        utc=True,
    )
    obs = Observations.from_frame(frame(time=stamps))
    assert obs.time_kind == "datetime"
    assert np.allclose(np.diff(obs.time[:3]), [1.0, 2.0])
    strings = Observations.from_frame(frame(time=[str(s) for s in stamps]))
    assert np.array_equal(strings.time, obs.time)


def test_numeric_times_must_be_plausible_in_their_unit():
    """Issue 54 row 5: the scheduler's plausibility check (``bayesrate.clock``) applies to
    every loader's numeric times; relative times (0, 24, ...) stay accepted."""
    frame = pd.DataFrame(
        {"page": ["a"] * 3, "time": [1.7e9, 1.7e9 + 86400, 1.7e9 + 2 * 86400], "changed": [0, 1, 0]}
    )
    frame.loc[0, "changed"] = None
    with pytest.raises(ObservationError, match="--time-unit s") as err:
        Observations.from_frame(frame)
    assert err.value.rows == [0, 1, 2] and "hours" in str(err.value)
    assert Observations.from_frame(frame, time_unit="s").n_changes == 1
    relative = frame.assign(time=[0.0, 24.0, 48.0])
    assert Observations.from_frame(relative).n_visits == 3
    with pytest.raises(ObservationError, match="not a plausible date") as err:
        Observations.from_frame(relative.assign(time=[0.0, 24.0, 1e300]))
    assert err.value.rows == [2]
    with pytest.raises(ObservationError, match="not a plausible date"):
        Observations.from_frame(relative.assign(time=[0.0, 24.0, np.inf]))


def test_domain_is_optional():
    obs = Observations.from_frame(frame().drop(columns="domain"))
    assert obs.pages["domain"].nunique() == 1


@pytest.mark.parametrize(
    ("df", "field", "rows", "words"),
    [
        (frame(time=[0.0, 1.0, 1.0, 0.5, 2.5]), "time", [2], "duplicate"),
        (frame(time=[0.0, 3.0, 1.0, 0.5, 2.5]), "time", [2], "out of order"),
        (frame(time=[0.0, np.nan, 3.0, 0.5, 2.5]), "time", [1], "missing"),
        (frame(changed=[None, 2, 0, None, 1]), "changed", [1], "0 or 1"),
        (frame(changed=[None, None, 0, None, 1]), "changed", [1], "baseline"),
        (frame(changed=[1, 1, 0, None, 1]), "changed", [0], "baseline"),
        (frame(page=["a", None, "a", "b", "b"]), "page", [1], "missing"),
        (frame(domain=["x", "z", "x", "y", "y"]), "domain", [1], "constant"),
    ],
)
def test_each_validation_error_names_field_and_rows(df, field, rows, words):
    with pytest.raises(ObservationError, match=words) as err:
        Observations.from_frame(df)
    assert err.value.field == field
    assert err.value.rows == rows
    for row in rows:
        assert str(row) in str(err.value)


def test_mixed_naive_and_aware_timestamps():
    df = frame(
        time=[
            "2024-01-01T00:00Z",
            "2024-01-01T01:00",
            "2024-01-01T03:00Z",
            "2024-01-01T00:30Z",
            "2024-01-01T02:30Z",
        ]
    )
    with pytest.raises(ObservationError, match="mixed") as err:
        Observations.from_frame(df)
    assert err.value.rows == [1]


def test_naive_timestamps_rejected():
    df = frame(time=pd.date_range("2024-01-01", periods=5, freq="h"))
    with pytest.raises(ObservationError, match="naive"):
        Observations.from_frame(df)


def test_unknown_unit_and_empty_and_missing_columns():
    with pytest.raises(ObservationError, match="unknown time unit"):
        Observations.from_frame(frame(), time_unit="fortnights")
    with pytest.raises(ObservationError, match="empty"):
        Observations.from_frame(frame().iloc[:0])
    with pytest.raises(ObservationError, match="missing required column") as err:
        Observations.from_frame(frame().drop(columns="changed"))
    assert err.value.field == "changed"


def test_fingerprint_stable_and_sensitive():
    a = Observations.from_frame(frame())
    b = Observations.from_frame(frame())
    c = Observations.from_frame(frame(changed=[None, 0, 0, None, 1]))
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_subset_matches_direct_construction():
    obs = Observations.from_frame(frame())
    sub = obs.subset([1])
    direct = Observations.from_frame(frame().iloc[3:])
    assert sub.fingerprint == direct.fingerprint


# ------------------------------------------------------------------ property-based

visits_strategy = st.lists(
    st.tuples(
        st.integers(0, 4),  # page
        st.floats(0, 1e4, allow_nan=False, allow_infinity=False),  # time
        st.booleans(),  # changed
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(visits_strategy)
@pytest.mark.slow
def test_builder_accepts_valid_tables_and_preserves_every_visit(visits):
    df = pd.DataFrame(visits, columns=["page", "time", "changed"]).drop_duplicates(["page", "time"])
    df = df.sort_values(["time"], kind="stable").reset_index(drop=True)
    df["page"] = df["page"].map(lambda p: f"p{p}")
    first = ~df.duplicated("page")
    df["changed"] = df["changed"].astype("Int8").mask(first)
    obs = Observations.from_frame(df)
    assert obs.n_visits == len(df)  # nothing dropped
    assert obs.n_changes == int(df["changed"].fillna(0).sum())
    for label, group in df.groupby("page"):
        pos = obs.pages.index.get_loc(label)
        times = obs.time[obs.offsets[pos] : obs.offsets[pos + 1]]
        assert np.array_equal(times, group["time"].to_numpy())
    back = obs.to_frame()
    again = Observations.from_frame(back)
    assert again.fingerprint == obs.fingerprint


@settings(max_examples=100, deadline=None)
@given(visits_strategy, st.data())
def test_builder_rejects_any_backwards_step(visits, data):
    df = pd.DataFrame(visits, columns=["page", "time", "changed"])
    df["changed"] = 0
    page_sizes = df["page"].value_counts()
    multi = page_sizes[page_sizes >= 2].index.tolist()
    if not multi:
        return
    page = data.draw(st.sampled_from(multi))
    rows = df.index[df["page"] == page].tolist()
    # make the page's second visit strictly earlier than its first
    df.loc[rows[1], "time"] = df.loc[rows[0], "time"] - 1.0
    with pytest.raises(ObservationError) as err:
        Observations.from_frame(df)
    assert err.value.field == "time"
    assert err.value.rows  # names offending rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 4)), max_size=8))
def test_concat_ranges_matches_a_loop(pairs):
    from bayesrate.ragged import concat_ranges

    starts = np.array([p[0] for p in pairs], dtype=np.int64)
    counts = np.array([p[1] for p in pairs], dtype=np.int64)
    want = [i for s, c in pairs for i in range(s, s + c)]
    assert concat_ranges(starts, counts).tolist() == want
