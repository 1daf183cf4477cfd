"""Every loader: canonical files, fetch logs, visit grids, R .rda, Open Terms Archive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesrate import datasets
from bayesrate.errors import ObservationError
from bayesrate.io import from_fetch_log, from_visit_grid, read_observations, read_rda, to_visit_grid
from bayesrate.io.ota import DEFAULT_GRIDS, GridEra, from_changelog
from tests.helpers import TEST_DATA

DATA = TEST_DATA


def canonical():
    return pd.DataFrame(
        {
            "page": ["u1", "u1", "u1", "u2", "u2"],
            "domain": ["a.com", "a.com", "a.com", "b.org", "b.org"],
            "time": [
                "2024-01-01T00:00Z",
                "2024-01-01T06:00Z",
                "2024-01-02T00:00Z",
                "2024-01-01T00:00Z",
                "2024-01-03T00:00Z",
            ],
            "changed": [None, 1, 0, None, 1],
        }
    )


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_read_canonical_files(tmp_path, suffix):
    df = canonical()
    path = tmp_path / f"obs{suffix}"
    if suffix == ".parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False)
    obs = read_observations(path)
    assert obs.n_pages == 2 and obs.n_visits == 5 and obs.n_changes == 2
    assert obs.time_kind == "datetime"
    assert np.allclose(np.diff(obs.time[:3]), [6.0, 18.0])


def test_read_rejects_unknown_suffix_and_missing_file(tmp_path):
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(ObservationError, match="unsupported"):
        read_observations(tmp_path / "x.xlsx")
    with pytest.raises(ObservationError, match="no such file"):
        read_observations(tmp_path / "nope.csv")


def test_fetch_log_digest_comparison():
    log = pd.DataFrame(
        {
            "page": ["a", "a", "a", "a", "b", "b"],
            "time": [0, 1, 2, 3, 0, 5],
            "digest": ["x", "x", "y", "x", "q", "q"],
        }
    )
    obs = from_fetch_log(log, domain=None)
    # a: x→x unchanged, x→y changed, y→x changed (a revert is still a change at fetch time)
    assert obs.changed.tolist() == [0, 0, 1, 1, 0, 0]


def test_fetch_log_failed_fetches():
    log = pd.DataFrame({"page": ["a"] * 4, "time": [0, 1, 2, 3], "digest": ["x", None, "x", "y"]})
    with pytest.raises(ObservationError, match="missing digest") as err:
        from_fetch_log(log)
    assert err.value.rows == [1]
    obs = from_fetch_log(log, failed="skip")
    assert obs.n_visits == 3 and obs.changed.tolist() == [0, 0, 1]
    assert any("excluded 1 fetch" in n for n in obs.notes)


def test_visit_grid_round_trip():
    grid = pd.DataFrame(
        {"domain": ["com", "org"], "numVisits": [5, 3], "visitsWChanges": [[1, 4], []]}
    )
    obs = from_visit_grid(grid, interval=2.0, start="2024-01-01T00:00Z")
    assert obs.visits_per_page.tolist() == [6, 4]
    assert obs.changed[:6].tolist() == [0, 1, 0, 0, 1, 0]
    assert np.allclose(np.diff(obs.time[:6]), 2.0)
    back = to_visit_grid(obs)
    assert back["numVisits"].tolist() == [5, 3]
    assert [list(v) for v in back["visitsWChanges"]] == [[1, 4], []]


@pytest.mark.parametrize(
    ("changes", "num", "words"),
    [
        ([[0, 2]], [5], "outside"),
        ([[6]], [5], "outside"),
        ([[2, 2]], [5], "repeats"),
        ([[1.5]], [5], "outside"),
        ([[1]], [-1], "non-negative"),
    ],
)
def test_visit_grid_errors(changes, num, words):
    grid = pd.DataFrame({"numVisits": num, "visitsWChanges": changes})
    with pytest.raises(ObservationError, match=words) as err:
        from_visit_grid(grid)
    assert err.value.rows == [0]


def test_read_rda_fixture():
    obs = read_rda(DATA / "pages_small.rda")
    # the case study's first two published pages
    assert obs.visits_per_page.tolist() == [379, 708, 6, 720]
    assert obs.changes_per_page.tolist() == [13, 3, 0, 719]
    first = np.flatnonzero(obs.changed[obs.offsets[0] : obs.offsets[1]]).tolist()
    assert first == [35, 134, 155, 157, 177, 204, 314, 315, 319, 350, 366, 369, 371]
    assert obs.pages["domain"].tolist() == ["com", "org", "jp", "com"]


def test_grid_era_follows_local_clock():
    era = GridEra("2025-03-28", "2025-04-02", 12.0, anchor="00:30", timezone="Europe/Paris")
    times = pd.to_datetime(
        np.round(era.times(pd.Timestamp("2026-01-01", tz="UTC")) * 3.6e12), unit="ns", utc=True
    )
    local = times.tz_convert("Europe/Paris")
    assert set(local.strftime("%H:%M")) == {"00:30", "12:30"}
    # the UTC hour moves by one across the 2025-03-30 DST change
    assert {t.hour for t in times} == {23, 11, 22, 10}


@pytest.fixture(scope="module")
def pga_raw():
    src = DATA / "open-terms-archive"  # shipped with the tests (ODC-BY 1.0, see ATTRIBUTION.md)
    return (
        pd.read_csv(src / "pga-versions-changelog.csv.gz"),
        pd.read_csv(src / "pga-versions-documents.csv"),
    )


def test_ota_from_shared_csv_equals_embedded(pga_raw):
    log, docs = pga_raw
    from_csv = from_changelog(log, docs, grid="pga", source="ota-pga")
    embedded = datasets.load("ota-pga")
    assert from_csv.fingerprint == embedded.fingerprint


def test_ota_detections_match_independent_count(pga_raw):
    log, docs = pga_raw
    obs = from_changelog(log, docs, grid="pga")
    t = pd.to_datetime(log["time_utc"], utc=True)
    # independent: the grid slot of each event by flooring to the era's period
    period = np.where(t < pd.Timestamp("2024-07-01", tz="UTC"), "6h", "12h")
    slot = pd.Series([ts.floor(p) for ts, p in zip(t, period, strict=True)], index=log.index)
    for path in ["Facebook/Privacy Policy.md", "BeReal/Community Guidelines.md"]:
        rows = log["path"] == path
        first = slot[rows & (log["event"] == "first_record")].min()
        changes = slot[rows & (log["event"] == "change")]
        expected = changes[changes > first].nunique()
        pos = obs.pages.index.get_loc(path[:-3])
        assert obs.changes_per_page[pos] == expected
        assert obs.time[obs.offsets[pos]] == pytest.approx(first.value / 3.6e12)


def test_ota_reports_every_exclusion(pga_raw):
    log, docs = pga_raw
    obs = from_changelog(log, docs, grid="pga")
    notes = " ".join(obs.notes)
    assert f"excluded {(log['event'] == 'technical').sum()} 'technical'" in notes
    assert "visit grid (pga)" in notes
    # every first_record document is a page; every detection sits on a grid visit
    assert obs.n_pages == log.loc[log["event"] == "first_record", "path"].nunique()


def test_ota_bad_input(pga_raw):
    log, docs = pga_raw
    with pytest.raises(ObservationError, match="unknown event"):
        from_changelog(
            log.assign(event=log["event"].where(log.index != 3, "oops")), docs, grid="pga"
        )
    with pytest.raises(ObservationError, match="no default grid"):
        from_changelog(log, docs, grid="nope")
    with pytest.raises(ObservationError, match="before the visit grid"):
        from_changelog(log, docs, grid=(GridEra("2024-01-01", None, 6.0),))


def test_all_embedded_datasets_load():
    for name in datasets.names():
        obs = datasets.load(name)
        assert obs.n_pages > 50 and obs.n_changes > 500
        assert set(obs.pages.columns) >= {"domain", "terms_type"}
    assert set(DEFAULT_GRIDS) == {"contrib", "pga", "genai-eu"}
    with pytest.raises(ObservationError, match="unknown dataset"):
        datasets.load("wikipedia")
