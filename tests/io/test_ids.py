"""Ids are strings, always (issue 11, item 2).

Before the fix every loader let pandas guess: ``"007"``, ``"7"`` and ``"7.0"`` became one
page (intervals fabricated across pages, wrong rates, exit 0), domains ``"001"`` and ``"1"``
merged, and ids ``"NA"``, ``"null"``, ``"None"`` were rejected as missing. Now ids are read
as written and only empty cells are missing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main
from bayesrate.errors import ObservationError
from bayesrate.io import from_fetch_log, from_visit_grid, read_observations

TRICKY = ["007", "7", "7.0", "NA", "null", "None", "nan", "N/A", "#N/A", "TRUE", "1e3"]


def _tricky_csv(path):
    rows = ["page,domain,time,changed"]
    for k, page in enumerate(TRICKY):
        domain = ["001", "1", "NA"][k % 3]
        rows += [f"{page},{domain},{k},", f"{page},{domain},{k + 24},{k % 2}"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_canonical_files_keep_ids_as_written(tmp_path, suffix):
    frame = pd.read_csv(
        _tricky_csv(tmp_path / "ids.csv"), dtype={"page": str, "domain": str},
        keep_default_na=False, na_values=[""],
    )  # fmt: skip
    path = tmp_path / f"ids{suffix}"
    if suffix == ".parquet":
        frame.to_parquet(path)
    elif suffix == ".csv.gz":
        frame.to_csv(path, index=False)
    obs = read_observations(tmp_path / "ids.csv" if suffix == ".csv" else path)
    assert obs.pages.index.tolist() == TRICKY
    assert obs.visits_per_page.tolist() == [2] * len(TRICKY)
    assert sorted(obs.domains) == ["001", "1", "NA"]
    assert obs.pages.loc["7", "domain"] == "1" and obs.pages.loc["007", "domain"] == "001"


def test_issue_example_estimate_keeps_two_pages(tmp_path, capsys):
    path = tmp_path / "ids.csv"
    path.write_text("page,time,changed\n007,0,0\n007,24,1\n7,48,0\n7,72,0\n")
    assert main(["estimate", "--input", str(path), "--method", "mle"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(",")[:3] for line in out[1:]] == [["007", "2", "1"], ["7", "2", "0"]]


def test_only_empty_cells_are_missing(tmp_path):
    path = tmp_path / "gap.csv"
    path.write_text("page,time,changed\nNA,0,\n,24,1\nnull,0,\n")
    with pytest.raises(ObservationError, match="missing values in 'page'") as err:
        read_observations(path)
    assert err.value.rows == [1]
    path.write_text("page,time,changed\na,0,\na,NA,1\n")  # "NA" is not a time either
    with pytest.raises(ObservationError, match="time") as err:
        read_observations(path)
    assert err.value.rows == [1]


def test_parquet_numeric_ids_become_their_text(tmp_path):
    path = tmp_path / "n.parquet"
    pd.DataFrame({"page": [7, 7, 8], "domain": [1, 1, 2], "time": [0.0, 1.0, 0.0],
                  "changed": [None, 1, None]}).to_parquet(path)  # fmt: skip
    obs = read_observations(path)
    assert obs.pages.index.tolist() == ["7", "8"]
    assert obs.pages["domain"].tolist() == ["1", "2"]


def test_fetch_log_ids_are_strings():
    log = pd.DataFrame(
        {
            "url": ["007", "007", 7, 7, "NA", "NA"],
            "t": [0, 1, 0, 1, 0, 1],
            "digest": ["a", "b", "x", "x", "p", "q"],
            "site": ["001", "001", 1, 1, "null", "null"],
        }
    )
    obs = from_fetch_log(log, page="url", time="t", domain="site")
    assert obs.pages.index.tolist() == ["007", "7", "NA"]
    assert obs.changes_per_page.tolist() == [1, 0, 1]
    assert obs.pages["domain"].tolist() == ["001", "1", "null"]
    with pytest.raises(ObservationError, match="missing values in 'page'"):
        from_fetch_log(log.assign(url=["a", None, "b", "b", "c", "c"]), page="url", time="t")


def test_visit_grid_ids_are_strings_and_missing_domain_is_an_error():
    grid = pd.DataFrame(
        {
            "id": ["007", "7", "NA"],
            "domain": ["001", "1", "None"],
            "numVisits": [2, 2, 1],
            "visitsWChanges": [[1], [], [1]],
        }
    )
    obs = from_visit_grid(grid, page="id")
    assert obs.pages.index.tolist() == ["007", "7", "NA"]
    assert obs.pages["domain"].tolist() == ["001", "1", "None"]
    with pytest.raises(ObservationError, match="missing values in 'domain'") as err:
        from_visit_grid(grid.assign(domain=["a", None, "b"]), page="id")
    assert err.value.rows == [1]


def test_dask_csv_ids_are_strings(tmp_path):
    pytest.importorskip("dask.dataframe")
    from bayesrate.io.dask import interval_stats_from_dask, read_csv

    stats = interval_stats_from_dask(read_csv(str(_tricky_csv(tmp_path / "ids.csv"))))
    assert sorted(stats.pages) == sorted(TRICKY)
    assert stats.n_visits.tolist() == [2] * len(TRICKY)
    assert sorted(stats.domains) == ["001", "1", "NA"]


def test_scheduler_observe_csv_keeps_urls_and_hosts(tmp_path, capsys):
    from bayesrate.scheduler.store import Store

    db = tmp_path / "s.db"
    first = tmp_path / "f1.csv"
    first.write_text("url,time,changed,host\nNA,480000,0,NA\nnull,480000,0,007\n007,480000,0,7\n")
    again = tmp_path / "f2.csv"
    again.write_text("url,time,changed,host\nNA,480001,1,\nnull,480001,0,007\n")
    assert main(["schedule", "init", str(db)]) == 0
    assert main(["schedule", "observe", str(db), str(first)]) == 0
    assert main(["schedule", "observe", str(db), str(again)]) == 0, capsys.readouterr().err
    with Store.open(db) as store:
        st = store.state
        assert st.urls == ["NA", "null", "007"]
        assert [st.hosts[h] for h in st.host] == ["NA", "007", "7"]
        assert st.n_fetch.tolist() == [2, 2, 1]
    new_blank = tmp_path / "f3.csv"
    new_blank.write_text("url,time,changed,host\nfresh,480002,0,\n")
    assert main(["schedule", "observe", str(db), str(new_blank)]) == 1
    assert "unknown URLs" in capsys.readouterr().err
    np.testing.assert_equal(Store.open(db).state.n, 3)
