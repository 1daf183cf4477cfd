"""Property: every loader, fed a random malformed table, either raises a clear
:class:`ObservationError` or returns a result in which every input row is accounted for
(issue 11). Accounted for means: the number of visits (fetches) equals the number of rows,
the set of ids equals the set of ids as written, and each id has as many visits as rows.

Cells are drawn from pools of values that broke loaders before: ids that look like numbers
or missing markers, times that are words, infinite, negative, huge, naive or aware
timestamps, flags that are not 0/1, blank cells; columns may be missing or repeated.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayesrate.errors import ObservationError
from bayesrate.io import from_fetch_log, from_visit_grid, read_observations

IDS = ["007", "7", "7.0", "NA", "null", "None", "nan", "N/A", "TRUE", "1e3", "a b", "é",
       "x,y", 'q"uote', "line\nbreak", " ", "-1", "0"]  # fmt: skip
TIMES = ["0", "1", "2.5", "24", "-3", "1e308", "inf", "-inf", "nan", "NA", "", "x",
         "2024-01-01T00:00Z", "2024-01-01T01:00:00+02:00", "2024-01-01 00:00",
         "480000", "480001.5", "1700000000"]  # fmt: skip
FLAGS = ["0", "1", "", "NA", "2", "-1", "1.0", "0.0", "yes", "True", "false", " 1"]
DOMAINS = ["001", "1", "NA", "", "null", "d"]
#: examples per loader (raise it with BAYESRATE_PROPERTY_EXAMPLES for a long search)
EXAMPLES = int(os.environ.get("BAYESRATE_PROPERTY_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def tables(draw, columns=("page", "time", "changed"), optional=("domain",), pools=None):
    """A table as a list of header names and rows of strings (CSV cells)."""
    pools = pools or {"page": IDS, "time": TIMES, "changed": FLAGS, "domain": DOMAINS}
    n = draw(st.integers(0, 10))
    header = [c for c in columns if draw(st.integers(0, 9)) > 0]  # sometimes missing
    header += [c for c in optional if draw(st.booleans())]
    if header and draw(st.integers(0, 9)) == 0:
        header.append(header[0])  # a repeated column
    header = draw(st.permutations(header))
    rows = [[draw(st.sampled_from(pools[c])) for c in header] for _ in range(n)]
    return list(header), rows


def _csv_text(header, rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _accounted(ids_in: list[str], labels: list[str], counts: list[int]) -> None:
    """Every input row is in the result, under its id as written."""
    assert sum(counts) == len(ids_in)
    assert dict(zip(labels, counts, strict=True)) == dict(Counter(ids_in))


def _check_observations(header, rows, obs) -> None:
    ids = [r[header.index("page")] for r in rows]
    _accounted(ids, [str(p) for p in obs.pages.index], obs.visits_per_page.tolist())
    assert np.isfinite(obs.time).all() and set(np.unique(obs.changed)) <= {0, 1}


def _loaded(load, *args, **kwargs):
    """``load(...)``, or ``None`` once it has failed with a clear :class:`ObservationError`
    (any other exception fails the test)."""
    try:
        return load(*args, **kwargs)
    except ObservationError as exc:
        assert str(exc).strip()
        return None


@SETTINGS
@given(table=tables())
def test_canonical_csv(tmp_path_factory, table):
    header, rows = table
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(_csv_text(header, rows))
    obs = _loaded(read_observations, path)
    if obs is not None:
        _check_observations(header, rows, obs)


@SETTINGS
@given(table=tables(), gz=st.booleans())
def test_canonical_parquet_and_gzip(tmp_path_factory, table, gz):
    header, rows = table
    directory = tmp_path_factory.mktemp("pq")
    if gz:
        path = directory / "t.csv.gz"
        pd.DataFrame(rows, columns=pd.Index(header)).to_csv(path, index=False)
    else:
        if len(set(header)) < len(header):
            return  # Parquet cannot hold repeated column names
        path = directory / "t.parquet"
        # strings as given, empty cells as nulls (what a Parquet writer would store)
        frame = pd.DataFrame(
            {c: pd.Series([r[i] or None for r in rows], dtype=object) for i, c in
             enumerate(header)}
        )  # fmt: skip
        frame.to_parquet(path)
    obs = _loaded(read_observations, path)
    if obs is not None:
        _check_observations(header, rows, obs)


@SETTINGS
@given(
    table=tables(
        columns=("page", "time", "digest"),
        pools={"page": IDS, "time": TIMES, "digest": ["a", "b", "", "NA"], "domain": DOMAINS},
    ),
    failed=st.sampled_from(["error", "skip"]),
)
def test_fetch_log(table, failed):
    header, rows = table
    frame = pd.DataFrame(
        {c: [r[i] or None for r in rows] for i, c in enumerate(header)}
    )  # one column per distinct name (a repeated one keeps its last values)
    obs = _loaded(from_fetch_log, frame, failed=failed)
    if obs is None:
        return
    failed_rows = frame["digest"].isna().to_numpy() if "digest" in frame else []
    _accounted(
        frame["page"][~failed_rows].tolist(), list(obs.pages.index), obs.visits_per_page.tolist()
    )
    if failed_rows.any():  # skipped rows are accounted for in the notes
        assert f"excluded {int(failed_rows.sum())} fetch(es)" in " ".join(obs.notes)


@SETTINGS
@given(
    n=st.integers(0, 6),
    data=st.data(),
)
def test_visit_grid(n, data):
    ids = [data.draw(st.sampled_from([*IDS, None])) for _ in range(n)]
    num = [data.draw(st.sampled_from([0, 1, 3, -1, 2.5, "4", "x", None, np.nan])) for _ in ids]
    changes = [
        data.draw(st.sampled_from([[], [1], [1, 3], [0], [5], "1 2", "[2]", None, "x", [1, 1]]))
        for _ in ids
    ]
    domains = [data.draw(st.sampled_from([*DOMAINS, None])) for _ in ids]
    frame = pd.DataFrame(
        {"id": ids, "numVisits": num, "visitsWChanges": changes, "domain": domains}
    )
    obs = _loaded(from_visit_grid, frame, page="id")
    if obs is None:
        return
    assert obs.pages.index.tolist() == ids
    assert obs.visits_per_page.tolist() == [int(float(v)) + 1 for v in num]
    assert obs.pages["domain"].tolist() == domains


@SETTINGS
@given(
    table=tables(
        columns=("url", "time", "changed"),
        optional=("host", "weight"),
        pools={
            "url": IDS,
            "time": [
                "480000",
                "480001",
                "480002.5",
                "2024-01-01T00:00Z",
                "x",
                "",
                "inf",
                "1700000000",
                "-5",
                "NA",
            ],
            "changed": FLAGS,
            "host": ["NA", "", "h", "007", "null"],
            "weight": ["1", "2.5", "", "0", "-1", "inf", "x"],
        },
    )
)
def test_scheduler_observe_csv(tmp_path_factory, table):
    from bayesrate.commands.schedule import read_fetches
    from bayesrate.scheduler.store import Store

    header, rows = table
    directory = tmp_path_factory.mktemp("sched")
    path = directory / "f.csv"
    path.write_text(_csv_text(header, rows))
    with Store.create(directory / "s.db") as store:
        done = _loaded(lambda: store.observe(**read_fetches(str(path)), now=480_010.0))
        st_ = store.refresh()
    if done is None:
        assert st_.n == 0  # a rejected batch writes nothing
        return
    urls = [r[header.index("url")] for r in rows]
    counts = dict(Counter(urls))
    assert dict(zip(st_.urls, st_.n_fetch.tolist(), strict=True)) == counts
    if "host" in header:  # hosts as written: a new URL takes the host its rows give
        given = {}
        for r in rows:
            host = r[header.index("host")]
            if host:
                given.setdefault(r[header.index("url")], host)
        assert [st_.hosts[h] for h in st_.host] == [given[u] for u in st_.urls]


@settings(max_examples=max(EXAMPLES // 3, 20), deadline=None, derandomize=EXAMPLES <= 60,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(table=tables())
def test_dask_csv(tmp_path_factory, table):
    pytest.importorskip("dask.dataframe")
    from bayesrate.distributed import interval_stats_from_dask, read_csv

    header, rows = table
    path = tmp_path_factory.mktemp("dask") / "t.csv"
    path.write_text(_csv_text(header, rows))
    stats = _loaded(lambda: interval_stats_from_dask(read_csv(str(path))))
    if stats is None:
        return
    ids = [r[header.index("page")] for r in rows]
    _accounted(ids, [str(p) for p in stats.pages], stats.n_visits.tolist())
