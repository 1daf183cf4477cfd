"""Property: every loader, fed a random malformed table, either raises a clear
:class:`ObservationError` or returns a result in which every input row is accounted for
(issue 11). Accounted for means: the number of visits (fetches) equals the number of rows,
the set of ids equals the set of ids as written, and each id has as many visits as rows.

Each table starts valid (ids drawn from values that loaders used to rewrite or drop:
``"007"``, ``"7.0"``, ``"NA"``, ``"null"``, quotes, commas, line breaks, a lone space) and
then gets zero to two corruptions: a cell replaced by a bad value (a word, ``inf``, a naive
timestamp, a flag of 2, ...), a blank cell, a dropped, repeated or extra column, two rows
swapped. About a third of the tables stay valid, so both outcomes are exercised; the
shares are printed by ``pytest --hypothesis-show-statistics``.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bayesrate.errors import ObservationError
from bayesrate.io import from_fetch_log, from_visit_grid, read_observations

IDS = ["007", "7", "7.0", "NA", "null", "None", "nan", "N/A", "TRUE", "1e3", "a b", "é",
       "x,y", 'q"uote', "line\nbreak", " ", "-1", "0"]  # fmt: skip
DOMAINS = ["001", "1", "NA", "null", "d"]
BAD = {
    "page": [""],
    "url": [""],
    "time": [
        "",
        "NA",
        "x",
        "inf",
        "-inf",
        "nan",
        "2024-01-01 00:00",
        "2024-01-01T00:00Z",
        "1e308",
        "1700000000",
        "-5",
    ],
    "changed": ["", "2", "-1", "yes", "NA", "1.5"],
    "domain": ["", *DOMAINS],
    "host": ["", "other"],
    "weight": ["", "0", "-1", "inf", "x"],
    "digest": ["", "NA"],
}
#: examples per loader (raise it with BAYESRATE_PROPERTY_EXAMPLES for a long search)
EXAMPLES = int(os.environ.get("BAYESRATE_PROPERTY_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def tables(draw, kind: str = "canonical"):
    """``(header, rows)`` of strings: a valid table of ``kind``, then corrupted."""
    id_col = "url" if kind == "fetches" else "page"
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=4, unique=True))
    per_id = []
    for label in ids:
        k = draw(st.integers(1, 4))
        times = sorted(draw(st.sets(st.integers(0, 200), min_size=k, max_size=k)))
        domain = draw(st.sampled_from(DOMAINS))
        visits = []
        for j, t in enumerate(times):
            row = {id_col: label}
            if kind == "fetches":
                row |= {"time": str(480_000 + t), "changed": draw(st.sampled_from("01")),
                        "host": domain if j == 0 else draw(st.sampled_from([domain, ""])),
                        "weight": draw(st.sampled_from(["1", "2.5"]))}  # fmt: skip
            elif kind == "fetch log":
                row |= {"time": str(t), "digest": draw(st.sampled_from("abc")), "domain": domain}
            else:
                flag = draw(st.sampled_from(["", "0"])) if j == 0 else draw(st.sampled_from("01"))
                row |= {"time": str(t), "changed": flag, "domain": domain}
            visits.append(row)
        per_id.append(visits)
    # interleave pages at random, keeping each page's visits in time order
    rows = []
    while any(per_id):
        pick = draw(st.sampled_from([i for i, v in enumerate(per_id) if v]))
        rows.append(per_id[pick].pop(0))
    header = list(rows[0])
    if kind == "canonical" and draw(st.booleans()):
        header.remove("domain")  # optional column
    table = [[r[c] for c in header] for r in rows]
    for corruption in draw(st.lists(st.sampled_from(["cell", "blank", "drop", "repeat",
                                                     "extra", "swap"]), max_size=2)):  # fmt: skip
        i = draw(st.integers(0, len(table) - 1))
        c = draw(st.integers(0, len(header) - 1))
        if corruption == "cell" and header[c] in BAD:
            table[i][c] = draw(st.sampled_from(BAD[header[c]]))
        elif corruption == "blank":
            table[i][c] = ""
        elif corruption == "drop" and len(header) > 1:
            del header[c]
            table = [r[:c] + r[c + 1 :] for r in table]
        elif corruption == "repeat":
            header.append(header[c])
            table = [[*r, r[c]] for r in table]
        elif corruption == "extra":
            header.append("note")
            table = [[*r, draw(st.sampled_from(["", "NA", "x"]))] for r in table]
        elif corruption == "swap":
            j = draw(st.integers(0, len(table) - 1))
            table[i], table[j] = table[j], table[i]
    return header, table


def _csv_text(header, rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _loaded(load, *args, **kwargs):
    """``load(...)``, or ``None`` once it has failed with a clear :class:`ObservationError`
    (any other exception fails the test)."""
    try:
        result = load(*args, **kwargs)
    except ObservationError as exc:
        assert str(exc).strip()
        event("ObservationError")  # --hypothesis-show-statistics shows the shares
        return None
    event("loaded: every row accounted for")
    return result


def _accounted(ids_in: list[str], labels: list[str], counts: list[int]) -> None:
    """Every input row is in the result, under its id as written."""
    assert sum(counts) == len(ids_in)
    assert dict(zip(labels, counts, strict=True)) == dict(Counter(ids_in))


def _check_observations(header, rows, obs) -> None:
    ids = [r[header.index("page")] for r in rows]
    _accounted(ids, [str(p) for p in obs.pages.index], obs.visits_per_page.tolist())
    assert np.isfinite(obs.time).all() and set(np.unique(obs.changed)) <= {0, 1}


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
        columns = {c: pd.Series([r[i] or None for r in rows], dtype=object)
                   for i, c in enumerate(header)}  # fmt: skip
        pd.DataFrame(columns).to_parquet(path)
    obs = _loaded(read_observations, path)
    if obs is not None:
        _check_observations(header, rows, obs)


@SETTINGS
@given(table=tables("fetch log"), failed=st.sampled_from(["error", "skip"]))
def test_fetch_log(table, failed):
    header, rows = table
    # one column per distinct name (a repeated one keeps its last values); blank = failed
    frame = pd.DataFrame({c: [r[i] or None for r in rows] for i, c in enumerate(header)})
    obs = _loaded(from_fetch_log, frame, failed=failed)
    if obs is None:
        return
    failed_rows = frame["digest"].isna().to_numpy()
    _accounted(
        frame["page"][~failed_rows].tolist(), list(obs.pages.index), obs.visits_per_page.tolist()
    )
    if failed_rows.any():  # skipped rows are accounted for in the notes
        assert f"excluded {int(failed_rows.sum())} fetch(es)" in " ".join(obs.notes)


@SETTINGS
@given(n=st.integers(1, 6), data=st.data())
def test_visit_grid(n, data):
    ids = data.draw(st.lists(st.sampled_from(IDS), min_size=n, max_size=n, unique=True))
    num = [data.draw(st.integers(0, 4)) for _ in ids]
    changes = [sorted(data.draw(st.sets(st.integers(1, max(v, 1)), max_size=v))) for v in num]
    domains = [data.draw(st.sampled_from(DOMAINS)) for _ in ids]
    for _ in range(data.draw(st.integers(0, 2))):  # corruptions
        i = data.draw(st.integers(0, n - 1))
        column, bad = data.draw(st.sampled_from([
            (num, [-1, 2.5, "4", "x", None, np.nan]),
            (changes, [[0], [9], [1, 1], "1 2", "[2]", None, "x"]),
            (ids, [None, ids[0]]),
            (domains, [None]),
        ]))  # fmt: skip
        column[i] = data.draw(st.sampled_from(bad))
    frame = pd.DataFrame({"id": ids, "numVisits": num, "visitsWChanges": changes,
                          "domain": domains})  # fmt: skip
    obs = _loaded(from_visit_grid, frame, page="id")
    if obs is None:
        return
    assert obs.pages.index.tolist() == ids
    assert obs.visits_per_page.tolist() == [int(float(v)) + 1 for v in num]
    assert obs.pages["domain"].tolist() == domains


@SETTINGS
@given(table=tables("fetches"))
def test_scheduler_observe_csv(tmp_path_factory, table):
    from bayesrate.commands.schedule import read_fetches
    from bayesrate.scheduler.store import Store

    header, rows = table
    directory = tmp_path_factory.mktemp("sched")
    path = directory / "f.csv"
    path.write_text(_csv_text(header, rows))
    with Store.create(directory / "s.db") as store:
        done = _loaded(lambda: store.observe(**read_fetches(str(path)), now=480_300.0))
        state = store.refresh()
    if done is None:
        assert state.n == 0  # a rejected batch writes nothing
        return
    urls = [r[header.index("url")] for r in rows]
    assert dict(zip(state.urls, state.n_fetch.tolist(), strict=True)) == dict(Counter(urls))
    given_host = {}  # hosts as written: a new URL takes the host its rows give
    for r in rows:
        if r[header.index("host")]:
            given_host.setdefault(r[header.index("url")], r[header.index("host")])
    assert [state.hosts[h] for h in state.host] == [given_host[u] for u in state.urls]


@settings(max_examples=max(EXAMPLES // 3, 20), deadline=None, derandomize=EXAMPLES <= 60,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(table=tables())
def test_dask_csv(tmp_path_factory, table):
    pytest.importorskip("dask.dataframe")
    from bayesrate.io.dask import interval_stats_from_dask, read_csv

    header, rows = table
    path = tmp_path_factory.mktemp("dask") / "t.csv"
    path.write_text(_csv_text(header, rows))
    stats = _loaded(lambda: interval_stats_from_dask(read_csv(str(path))))
    if stats is not None:
        ids = [r[header.index("page")] for r in rows]
        _accounted(ids, [str(p) for p in stats.pages], stats.n_visits.tolist())
