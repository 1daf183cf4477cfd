"""The Dask scale-out path on a LocalCluster (2 workers) against the in-memory path.

Oracles: :class:`Observations` + :func:`interval_stats` / :func:`hour_of_week_stats` on the
whole log in memory; :func:`grid_posterior` on the in-memory statistics; and
:func:`optimal_rates` on the gathered posterior means.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")

from bayesrate import simulate as sim
from bayesrate.constants import HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.estimators.grid import gamma_log_prior, grid_posterior
from bayesrate.io.fetch_log import from_fetch_log
from bayesrate.observations import Observations
from bayesrate.priors import GammaPrior, PriorSet
from bayesrate.scaleout import aggregate as agg
from bayesrate.scaleout import logs
from bayesrate.scaleout import problems as P
from bayesrate.scaleout.posteriors import posteriors
from bayesrate.scaleout.rates import rates
from bayesrate.scaleout.staging import read_table
from bayesrate.scheduler.optimal import optimal_rates

START = 475_000.0  # hours since the epoch (2024-03)
N_PAGES = 120


@pytest.fixture(scope="module")
def client():
    from bayesrate.scaleout.cluster import connect

    with connect(workers=2, processes=True, memory_limit="2GiB") as c:
        yield c


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    """A crawl log: irregular visits, 5 domains, tz-aware timestamps, in time order."""
    rng = sim.rng_from("scaleout-log")
    visits = [
        START + np.cumsum(rng.choice([1.0, 2.5, 6.0, 24.0], int(rng.integers(1, 50))))
        for _ in range(N_PAGES)
    ]
    data = sim.simulate_pages(
        rng.gamma(0.8, 0.08, N_PAGES),
        visits,
        rng=rng,
        domains=[f"site{i % 5}.org" for i in range(N_PAGES)],
    )
    frame = data.observations.to_frame()
    frame["time"] = pd.to_datetime(np.round(frame["time"] * 3.6e12), unit="ns", utc=True)
    frame["changed"] = frame["changed"].astype("float64")
    return frame.sort_values(["time", "page"], kind="stable").reset_index(drop=True)


def in_memory(frame: pd.DataFrame) -> Observations:
    return Observations.from_frame(frame.sort_values(["page", "time"], kind="stable"))


def write_by_time(frame: pd.DataFrame, root: Path, n_files: int) -> Path:
    """Hive directories ``day=K`` of consecutive time slices: pages split across files."""
    for i, idx in enumerate(np.array_split(np.arange(len(frame)), n_files)):
        d = root / f"day={i:03d}"
        d.mkdir(parents=True)
        frame.iloc[idx].to_parquet(d / "part-0.parquet", index=False, row_group_size=97)
    return root


def write_by_host(frame: pd.DataFrame, root: Path) -> Path:
    """``host=X`` directories (X percent-encoded, as pyarrow writes Hive directories); the
    files hold ``url`` and no host column, rows shuffled."""
    from urllib.parse import quote

    rng = np.random.default_rng(5)
    for host, part in frame.groupby("domain"):
        d = root / f"host={quote(host, safe='')}"
        d.mkdir(parents=True)
        part = part.drop(columns="domain").rename(columns={"page": "url"})
        part.iloc[rng.permutation(len(part))].to_parquet(d / "log.parquet", index=False)
    return root


def write_csv(frame: pd.DataFrame, root: Path, n_files: int) -> Path:
    root.mkdir(parents=True)
    text = frame.assign(time=frame["time"].dt.strftime("%Y-%m-%dT%H:%M:%S+00:00"))
    for i, idx in enumerate(np.array_split(np.arange(len(frame)), n_files)):
        text.iloc[idx].to_csv(root / f"log-{i}.csv.gz", index=False)
    return root


def sorted_groups(stats) -> pd.DataFrame:
    return stats.to_frame().sort_values(["page", "tau_hours"]).reset_index(drop=True)


def check_same_statistics(out: Path, want: Observations, timezone: str = "UTC") -> None:
    got = agg.stats_from_tables(read_table(out, "pages"), read_table(out, "groups"))
    ws = want.interval_stats
    order = ws.pages.get_indexer(got.pages)
    assert (order >= 0).all() and got.n_pages == ws.n_pages
    assert np.array_equal(got.n_visits, ws.n_visits[order])
    assert np.array_equal(got.n_changes, ws.n_changes[order])
    np.testing.assert_allclose(got.exposure, ws.exposure[order], rtol=1e-12)
    assert list(ws.domains[ws.domain[order]]) == list(got.domains[got.domain])
    pd.testing.assert_frame_equal(sorted_groups(got), sorted_groups(ws), check_dtype=False)
    # per (domain, hour of week): the in-memory exact exposure summed over each domain
    how = want.hour_of_week_stats(timezone)
    unchanged = pd.DataFrame(how.unchanged_exposure).groupby(how.domain).sum()
    changed = np.zeros((len(how.domains), 168))
    per_group = how.pattern_overlap[how.changed_pattern] * how.changed_count[:, None]
    np.add.at(changed, how.domain[how.changed_page], per_group)
    table = pd.read_parquet(out / "hour_of_week.parquet")
    got_u = table.pivot(index="domain", columns="hour_of_week", values="unchanged_hours")
    got_c = table.pivot(index="domain", columns="hour_of_week", values="changed_hours")
    np.testing.assert_allclose(got_u.loc[how.domains].to_numpy(), unchanged.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(got_c.loc[how.domains].to_numpy(), changed, atol=1e-6)
    pages = read_table(out, "pages").set_index("page").loc[want.pages.index]
    last = want.time[want.offsets[1:] - 1]
    np.testing.assert_allclose(pages["last_visit"].to_numpy(), last, rtol=1e-12)


@pytest.mark.parametrize(
    ("layout", "partitions", "input_rows"),
    [("time", 1, None), ("time", 5, 1), ("time", 5, 300), ("host", 3, 250), ("csv", 4, None)],
)
@pytest.mark.slow
def test_same_statistics_as_in_memory(client, log, tmp_path, layout, partitions, input_rows):
    """Several partitionings of the same log, read one piece per partition (input_rows 1)
    or with pieces packed together across files (the default packs the whole log)."""
    if layout == "time":
        src = write_by_time(log, tmp_path / "log", n_files=6)
    elif layout == "host":
        src = write_by_host(log, tmp_path / "log")
    else:
        src = write_csv(log, tmp_path / "log", n_files=3)
    manifest = agg.aggregate(src, tmp_path / "stats", partitions=partitions, input_rows=input_rows)
    assert manifest["rows"] == len(log) and manifest["malformed_rows"]["rows"] == 0
    spec = logs.scan(src)
    rows = spec.estimated_rows()
    batches = logs.batches(spec, input_rows or logs.INPUT_ROWS_PER_PARTITION)
    assert manifest["input_partitions"] == len(batches)
    assert manifest["input_pieces"] == len(spec.pieces)
    if layout == "time":
        assert len(spec.pieces) > 6  # row groups of 97 rows: several per file
        # 1 row: a piece per partition; 300 rows: 3 row groups per partition, across files
        assert len(batches) == {None: 1, 1: len(spec.pieces), 300: -(-len(rows) // 3)}[input_rows]
    # auto: host layout for the host-partitioned log, URL-hash buckets otherwise
    assert manifest["layout"] == ("host" if layout == "host" else "url")
    saved = json.loads((tmp_path / "stats" / "_manifest.json").read_text())
    assert saved["layout"] == manifest["layout"] and saved["arguments"]["layout"] == saved["layout"]
    if layout == "host":
        # 5 hosts of ~1/5 of the rows each, parts of at most 1/3: one host per part
        assert manifest["partitions"] == 5 and manifest["host_plan"]["hosts_split"] == 0
        assert "Parquet metadata" in manifest["host_rows"]
    else:
        assert manifest["partitions"] == partitions
        assert "URL-hash buckets" in manifest["layout_reason"]
        if layout == "time":
            assert "by day, not by host" in manifest["layout_reason"]
    check_same_statistics(tmp_path / "stats", in_memory(log))


def test_batches_pack_consecutive_pieces():
    """Every piece once, in order; a batch over the target only when it is one piece."""
    rows = [5, 5, 20, 1, 1, 1, 7, 0, 3]
    spec = logs.LogSpec(
        kind="crawl",
        sources=("a.parquet",),
        pieces=tuple((0, g, 0) for g in range(len(rows))),
        piece_rows=tuple(rows),
    )
    assert logs.batches(spec, 10) == [(0, 1), (2,), (3, 4, 5, 6, 7), (8,)]
    assert logs.batches(spec, 1) == [(i,) for i in range(len(rows))]
    assert logs.batches(spec, 10**9) == [tuple(range(len(rows)))]
    with pytest.raises(ValueError, match=">= 1"):
        logs.batches(spec, 0)


def test_fetch_log_changes_from_digests(client, log, tmp_path):
    """Digests: the page's count of changes so far (a change makes a new digest)."""
    fetch = log.sort_values(["page", "time"]).copy()
    fetch["digest"] = (
        fetch.groupby("page")["changed"].cumsum().fillna(0).astype(int).map("v{}".format)
    )
    fetch = fetch.drop(columns="changed").sort_values("time")
    src = write_by_time(fetch, tmp_path / "log", n_files=4)
    agg.aggregate(src, tmp_path / "stats", kind="fetch", partitions=3)
    want = from_fetch_log(fetch.sort_values(["page", "time"]))
    assert np.array_equal(want.interval_stats.n_changes, in_memory(log).interval_stats.n_changes)
    check_same_statistics(tmp_path / "stats", want)


def malformed_log(log: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The log as CSV text with bad rows planted, and the log without them."""
    text = log.assign(time=log["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")).astype(object)
    text["changed"] = text["changed"].map(lambda v: "" if pd.isna(v) else str(int(v)))
    bad = [
        {"page": "p0003", "domain": "site3.org", "time": "next tuesday", "changed": "0"},
        {"page": "p0004", "domain": "site4.org", "time": "2024-05-01T00:00:00", "changed": "0"},
        {"page": None, "domain": "site1.org", "time": "2024-05-01T00:00:00Z", "changed": "1"},
        {"page": "p0005", "domain": "site0.org", "time": "2024-05-02T00:00:00Z", "changed": "2"},
    ]
    # a duplicate visit of p0007 (same time): the page's rows are excluded
    dup = text[text["page"] == "p0007"].iloc[[1]].copy()
    mixed = pd.concat([text, pd.DataFrame(bad), dup], ignore_index=True)
    # p0003 and p0004's bad rows have no usable time (they may lie between two visits):
    # those pages are excluded; p0005's is after its last visit, left out alone
    assert log.loc[log["page"] == "p0005", "time"].max() < pd.Timestamp("2024-05-02", tz="UTC")
    clean = log[~log["page"].isin(["p0003", "p0004", "p0007"])]
    return mixed, clean


@pytest.mark.parametrize("bad_rows", ["error", "skip"])
def test_malformed_rows_are_counted_and_sampled(client, log, tmp_path, bad_rows):
    mixed, clean = malformed_log(log)
    src = tmp_path / "log"
    src.mkdir()
    mixed.iloc[: len(mixed) // 2].to_csv(src / "a.csv", index=False)
    mixed.iloc[len(mixed) // 2 :].to_csv(src / "b.csv", index=False)
    n_dup_page = int((mixed["page"] == "p0007").sum())
    n_split = int(log["page"].isin(["p0003", "p0004"]).sum())
    if bad_rows == "error":
        with pytest.raises(ObservationError) as info:
            agg.aggregate(src, tmp_path / "stats", partitions=2)
        text = str(info.value)
        assert f"{4 + n_dup_page + n_split:,} malformed row(s)" in text
        for reason in (
            "neither a number nor a timestamp",
            "without a time zone offset",
            "missing page/url",
            "not 0 or 1",
            "duplicate visit",
        ):
            assert reason in text
        assert "b.csv row " in text and "--bad-rows skip" in text
        assert not (tmp_path / "stats").exists()
        return
    manifest = agg.aggregate(src, tmp_path / "stats", partitions=2, bad_rows="skip")
    report = manifest["malformed_rows"]
    assert report["rows"] == 4 + n_dup_page + n_split
    assert report["counts"][P.REASONS[P.ROW_BETWEEN_VISITS]] == n_split
    assert sum(report["counts"].values()) == report["rows"]
    assert (
        report["counts"]["duplicate visit (same page, same time): the page's rows are excluded"]
        == n_dup_page
    )
    files = {(r["file"].rsplit("/", 1)[1], r["reason"]) for r in report["sample"]}
    assert ("b.csv", "missing page/url") in files  # the planted rows are at the end
    assert manifest["rows"] == len(mixed)
    assert manifest["rows_used"] == len(clean)
    saved = json.loads((tmp_path / "stats" / "_manifest.json").read_text())
    assert saved["malformed_rows"] == report
    check_same_statistics(tmp_path / "stats", in_memory(clean))


def test_skipped_row_between_visits_excludes_its_page(client, tmp_path):
    """Issue 54 row 3: a malformed row between two visits, left out, merged the intervals
    under the next visit's flag (a page whose only change was on that row had 0 changes);
    now the page is excluded and counted; a bad row after a page's last visit is not."""
    rows = [
        ("a", "2024-03-01T00:00:00Z", ""),
        ("a", "2024-03-02T00:00:00Z", "0"),
        ("a", "2024-03-03T00:00:00", "1"),  # no time zone: malformed; the only change
        ("a", "2024-03-04T00:00:00Z", "0"),
        ("b", "2024-03-01T00:00:00Z", ""),
        ("b", "2024-03-02T00:00:00Z", "1"),
        ("b", "2024-03-03T00:00:00Z", "0"),
        ("b", "2024-03-05T00:00:00Z", "7"),  # bad flag after b's last good visit
        ("c", "2024-03-01T00:00:00Z", ""),
        ("c", "2024-03-02T00:00:00Z", "x"),  # bad flag between c's visits
        ("c", "2024-03-03T00:00:00Z", "0"),
    ]
    frame = pd.DataFrame(rows, columns=["page", "time", "changed"]).assign(domain="s.org")
    src = tmp_path / "log"
    src.mkdir()
    frame.to_csv(src / "log.csv", index=False)
    manifest = agg.aggregate(src, tmp_path / "stats", partitions=1, bad_rows="skip")
    pages = read_table(tmp_path / "stats", "pages").set_index("page")
    assert list(pages.index) == ["b"]  # before: a with 3 visits and 0 changes, c with 2
    assert pages.loc["b", "n_changes"] == 1 and pages.loc["b", "n_visits"] == 3
    report = manifest["malformed_rows"]
    assert report["counts"][P.REASONS[P.ROW_BETWEEN_VISITS]] == 3 + 2  # a's and c's others
    assert report["rows"] == 3 + 5 and manifest["rows_used"] == 3


def test_empty_and_header_only_csv_files_in_a_log(client, log, tmp_path):
    """Issue 54 row 7: a 0-byte CSV in the log's directory (KeyError) and a header-only one
    (IndexError on the empty partition) ended in tracebacks. Now: header-only files and
    empty partitions are fine, a 0-byte file or a log of headers only is one clear error."""
    src = tmp_path / "log"
    src.mkdir()
    text = log.assign(time=log["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    few = text[text["page"].isin(["p0001", "p0002"])]
    few.to_csv(src / "a.csv", index=False)
    (src / "b-header.csv").write_text(",".join(few.columns) + "\n")
    # more partitions than URLs: some partitions are empty
    manifest = agg.aggregate(src, tmp_path / "stats", partitions=6)
    assert manifest["pages"] == 2 and manifest["rows"] == len(few)
    check_same_statistics(tmp_path / "stats", in_memory(log[log["page"].isin(["p0001", "p0002"])]))
    (src / "c-empty.csv").write_bytes(b"")
    with pytest.raises(ObservationError, match=r"c-empty\.csv is empty"):
        agg.aggregate(src, tmp_path / "stats2", partitions=2)
    only = tmp_path / "headers"
    only.mkdir()
    (only / "h.csv").write_text(",".join(few.columns) + "\n")
    with pytest.raises(ObservationError, match="has no rows"):
        agg.aggregate(only, tmp_path / "stats3", partitions=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["headers", "log", "stats"]


PRIORS = PriorSet(
    GammaPrior(0.7, 2.0),
    {
        "site0.org": GammaPrior(1.5, 4.0),
        "site1.org": GammaPrior(0.4, 0.5),
        "site2.org": GammaPrior(2.0, 20.0),
    },
)


@pytest.fixture(scope="module")
def stats_dir(client, log, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stages")
    agg.aggregate(write_by_time(log, root / "log", 5), root / "stats", partitions=4)
    PRIORS.save(root / "priors")
    return root


def test_posteriors_equal_in_memory_grid(client, log, stats_dir):
    m = posteriors(stats_dir / "stats", stats_dir / "post", stats_dir / "priors", n_grid=201)
    assert m["pages"] == N_PAGES
    got = read_table(stats_dir / "post", "posteriors").set_index("page")
    assert list(got.columns[:5]) == [
        "n_visits",
        "n_changes",
        "rate_per_day",
        "lower_per_day",
        "upper_per_day",
    ]
    check_posteriors(got, log)


def check_posteriors(got: pd.DataFrame, log: pd.DataFrame) -> None:
    """Posteriors (indexed by page) against the in-memory grid posterior under PRIORS."""
    obs = in_memory(log)
    stats = obs.interval_stats
    alpha, beta_days = PRIORS.arrays(obs.pages["domain"].to_numpy())
    post = grid_posterior(stats, gamma_log_prior(alpha, beta_days * 24), n_grid=201)
    assert len(got) == stats.n_pages
    got = got.loc[stats.pages]
    np.testing.assert_allclose(got["rate_per_day"], post.mean() * 24, rtol=1e-10)
    np.testing.assert_allclose(got["lower_per_day"], post.quantile(0.05) * 24, rtol=1e-10)
    np.testing.assert_allclose(got["upper_per_day"], post.quantile(0.95) * 24, rtol=1e-10)
    # the scheduler state: the Gamma with the posterior's mean and variance (per day)
    mean, var = post.mean() * 24, post.var() * 24**2
    np.testing.assert_allclose(got["alpha"] / got["beta_days"], mean, rtol=1e-10)
    np.testing.assert_allclose(got["alpha"] / got["beta_days"] ** 2, var, rtol=1e-8)


@pytest.mark.parametrize(
    ("objective", "host_cap", "min_interval", "max_interval"),
    [
        ("freshness", None, None, None),
        ("freshness", 3.0, 2.0, 400.0),
        ("harmonic", 5.0, 1.0, None),
        ("periodic", 3.0, 2.0, 400.0),
    ],
)
@pytest.mark.slow
def test_rates_equal_in_memory_solver(
    client, stats_dir, objective, host_cap, min_interval, max_interval, tmp_path
):
    post_dir = stats_dir / "post"
    if not post_dir.exists():
        posteriors(stats_dir / "stats", post_dir, stats_dir / "priors")
    budget = 40.0
    m = rates(
        post_dir,
        tmp_path / "rates",
        budget_per_day=budget,
        objective=objective,
        min_interval_hours=min_interval or 0.0,
        max_interval_hours=max_interval or np.inf,
        host_cap_per_day=host_cap,
    )
    got = read_table(tmp_path / "rates", "rates").set_index("page")
    post = read_table(post_dir, "posteriors").set_index("page")
    check_rates(got, post, budget, objective, host_cap, min_interval, max_interval)
    if host_cap:
        assert m["hosts_at_cap"] >= 1
    assert m["objective"] == objective and m["objective_solved"]
    assert m["fetch_per_day"] == pytest.approx(got["fetch_per_day"].sum())


def check_rates(
    got: pd.DataFrame,
    post: pd.DataFrame,
    budget: float,
    objective: str,
    host_cap: float | None,
    min_interval: float | None,
    max_interval: float | None,
) -> None:
    """Rates (indexed by page) against :func:`optimal_rates` on the gathered posteriors."""
    assert sorted(got.index) == sorted(post.index)
    post = post.loc[got.index]
    _, codes = np.unique(post["domain"].to_numpy(dtype=str), return_inverse=True)
    want = (
        optimal_rates(
            np.ones(len(post)),
            post["rate_per_day"].to_numpy() / HOURS_PER_DAY,
            budget / 24,
            objective=objective,
            lower=0.0 if max_interval is None else 1 / max_interval,
            upper=np.inf if min_interval is None else 1 / min_interval,
            hosts=codes if host_cap else None,
            host_caps=None if host_cap is None else host_cap / 24,
        )
        * 24
    )
    np.testing.assert_allclose(got["fetch_per_day"].to_numpy(), want, rtol=1e-9, atol=1e-12)
    assert got["fetch_per_day"].sum() <= budget * (1 + 1e-12)
    if host_cap:
        per_host = got.groupby("domain")["fetch_per_day"].sum()
        assert (per_host <= host_cap * (1 + 1e-12)).all()


# ---------------------------------------------------------------------- the host layout
#: host names that need escaping in a directory name; "007" would become 7 if read as a number
ODD_HOSTS = ("a b", "x/y", "100%", "é.例え.jp", "../k=v")


def relabel(log: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The log with other hosts: ``giant`` puts 70% of the pages on one host, ``odd``
    gives the five hosts names that need escaping."""
    frame = log.copy()
    if variant == "giant":
        number = frame["page"].str[1:].astype(int)
        frame["domain"] = np.where(number < 0.7 * N_PAGES, "giant.org", frame["domain"])
    elif variant == "odd":
        frame["domain"] = frame["domain"].map(
            {f"site{i}.org": host for i, host in enumerate(ODD_HOSTS)}
        )
    return frame


def host_files(out: Path, table: str, log: pd.DataFrame) -> dict[str, list[str]]:
    """``{host: [part file names]}`` of a host-layout table; checks that each file holds
    pages of its directory's host only (the hosts of ``log``)."""
    from bayesrate.scaleout.layout import host_of_dir

    root = out / table
    assert not list(root.glob("*.parquet")), "flat files in a host layout table"
    found: dict[str, list[str]] = {}
    page_host = dict(zip(log["page"], log["domain"], strict=True))
    for directory in sorted(root.iterdir()):
        host = host_of_dir(directory.name)
        files = sorted(f.name for f in directory.iterdir())
        assert files and all(f.startswith("part-") and f.endswith(".parquet") for f in files)
        for f in files:
            pages = pd.read_parquet(directory / f, columns=["page"])["page"]
            assert {page_host[p] for p in pages} == {host}
        found[host] = files
    return found


def sorted_table(out: Path, table: str) -> pd.DataFrame:
    frame = read_table(out, table)
    keys = ["page", "tau_hours"] if table == "groups" else ["page"]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


@pytest.mark.parametrize(("variant", "partitions"), [("plain", 2), ("giant", 4), ("odd", 3)])
@pytest.mark.slow
def test_host_layout_equals_url_layout_and_in_memory(client, log, tmp_path, variant, partitions):
    """A host-partitioned log: every stage's output is partitioned by host (escaped
    ``host=H`` directories, a giant host split over several parts) and holds what the URL
    layout and the in-memory path give."""
    frame = relabel(log, variant)
    src = write_by_host(frame, tmp_path / "log")
    PRIORS.save(tmp_path / "priors")
    out = {}
    for layout in ("auto", "url"):
        m = agg.aggregate(src, tmp_path / f"stats-{layout}", partitions=partitions, layout=layout)
        assert m["layout"] == ("host" if layout == "auto" else "url")
        out[layout] = tmp_path / f"stats-{layout}"
    host_out = out["auto"]
    check_same_statistics(host_out, in_memory(frame))
    for table in ("pages", "groups"):
        pd.testing.assert_frame_equal(
            sorted_table(host_out, table), sorted_table(out["url"], table), check_dtype=False
        )
    hosts = set(frame["domain"])
    files = host_files(host_out, "pages", frame)
    assert set(files) == hosts
    assert set(host_files(host_out, "groups", frame)) <= hosts
    # read back as a Hive dataset: a host column, decoded to the exact host names
    import dask.dataframe as dd

    for back in (pd.read_parquet(host_out / "pages"), dd.read_parquet(host_out / "pages")):
        back = back.compute() if hasattr(back, "compute") else back
        assert (back["host"].astype(str) == back["domain"]).all() and len(back) == N_PAGES
    manifest = json.loads((host_out / "_manifest.json").read_text())
    if variant == "giant":
        # 0.7 of the rows on one host, parts of at most 1/4: split into ceil(0.7 * 4) = 3
        assert manifest["host_plan"]["hosts_split"] == 1
        assert manifest["host_plan"]["largest_split"] == 3
        assert len(files["giant.org"]) >= 2
        one = agg.aggregate(src, tmp_path / "stats-one", partitions=1)
        assert one["layout"] == "host" and one["partitions"] == 1
        for table in ("pages", "groups"):
            pd.testing.assert_frame_equal(
                sorted_table(host_out, table),
                sorted_table(tmp_path / "stats-one", table),
                check_dtype=False,
            )
    else:
        assert manifest["host_plan"]["hosts_split"] == 0
        assert all(len(f) == 1 for f in files.values())  # one part per host
    # later stages keep the layout, and equal the URL layout's and the in-memory path's
    post, rate = {}, {}
    for layout, stats in out.items():
        m = posteriors(stats, tmp_path / f"post-{layout}", tmp_path / "priors")
        assert m["layout"] == ("host" if layout == "auto" else "url")
        post[layout] = read_table(tmp_path / f"post-{layout}", "posteriors").set_index("page")
        m = rates(
            tmp_path / f"post-{layout}",
            tmp_path / f"rates-{layout}",
            budget_per_day=40.0,
            host_cap_per_day=6.0,
            max_interval_hours=500.0,
        )
        assert m["layout"] == ("host" if layout == "auto" else "url")
        rate[layout] = read_table(tmp_path / f"rates-{layout}", "rates").set_index("page")
    check_posteriors(post["auto"], frame)
    pd.testing.assert_frame_equal(
        post["auto"].sort_index(), post["url"].sort_index(), check_exact=False, rtol=1e-12
    )
    check_rates(rate["auto"], post["auto"], 40.0, "freshness", 6.0, None, 500.0)
    pd.testing.assert_frame_equal(
        rate["auto"].sort_index(), rate["url"].sort_index(), check_exact=False, rtol=1e-9
    )
    for table, root in (("posteriors", "post-auto"), ("rates", "rates-auto")):
        assert host_files(tmp_path / root, table, frame).keys() == files.keys()
        assert (tmp_path / root.replace("auto", "url") / table / "part-00000.parquet").is_file()


@pytest.mark.slow
def test_url_under_two_hosts_is_not_split_silently(client, log, tmp_path):
    """A URL whose rows sit under two host directories: the host layout fails naming it
    (its rows would be in two parts); the URL layout excludes it as 'domain varies'."""
    frame = log.copy()
    moved = (frame["page"] == "p0001") & (np.arange(len(frame)) % 2 == 0)
    assert frame.loc[frame["page"] == "p0001", "domain"].iloc[0] == "site1.org"
    frame.loc[moved, "domain"] = "site2.org"
    src = write_by_host(frame, tmp_path / "log")
    with pytest.raises(ObservationError) as info:
        agg.aggregate(src, tmp_path / "stats", partitions=5)
    assert "p0001 (site1.org, site2.org)" in str(info.value)
    assert not (tmp_path / "stats").exists() and not list(tmp_path.glob(".stats.staging-*"))
    m = agg.aggregate(src, tmp_path / "stats", partitions=5, layout="url", bad_rows="skip")
    assert m["malformed_rows"]["rows"] == int((frame["page"] == "p0001").sum())
    check_same_statistics(tmp_path / "stats", in_memory(log[log["page"] != "p0001"]))


def test_host_plan_splits_big_hosts_and_packs_small_ones():
    from bayesrate.scaleout.layout import host_dir, host_of_dir, plan_hosts

    rows = pd.Series({"big": 950, "a": 10, "b": 30, "c": 40, "d": 400})
    plan = plan_hosts(rows, 100)
    assert plan.n_sub.tolist() == [1, 1, 10, 1, 4]  # a, b, big, c, d (sorted)
    assert plan.parts_of("a") == plan.parts_of("b") == [0]  # small hosts share a part
    assert len(plan.parts_of("big")) >= 9 and len(plan.parts_of("d")) >= 3
    loads = np.zeros(plan.n_parts)
    np.add.at(loads, plan.slots, np.repeat(rows.sort_index().to_numpy() / plan.n_sub, plan.n_sub))
    assert loads.max() <= 100 and loads.sum() == rows.sum()
    for host in (*ODD_HOSTS, "007", ".", ""):
        name = host_dir(host)
        assert "/" not in name and name.startswith("host=") and host_of_dir(name) == host
    with pytest.raises(ObservationError, match="too long"):
        host_dir("x" * 300)


def read_all(out: Path) -> dict[str, pd.DataFrame]:
    tables = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir() and p.name != "_parts"):
        tables[directory.name] = read_table(out, directory.name)
    tables["hour_of_week"] = pd.read_parquet(out / "hour_of_week.parquet")
    return tables


class SimulatedKill(RuntimeError):
    """The process dies here (a worker's task fails; nothing after it runs)."""


@pytest.mark.parametrize("layout", ["url", "host"])
@pytest.mark.slow
def test_killed_run_resumes_to_the_same_output(log, tmp_path, monkeypatch, layout):
    """A run that dies after committing some parts (and leaves a half-written file), rerun
    with the same arguments, commits exactly what one clean run commits (both layouts:
    a time-partitioned log, and a host-partitioned one with a host split over parts)."""
    from bayesrate.scaleout import staging
    from bayesrate.scaleout.cluster import connect

    if layout == "url":
        src = write_by_time(log, tmp_path / "log", 4)
    else:
        src = write_by_host(relabel(log, "giant"), tmp_path / "log")
    with connect(workers=2, processes=False):
        clean_manifest = agg.aggregate(src, tmp_path / "clean", partitions=6)
        assert clean_manifest["layout"] == layout
        n_parts = clean_manifest["partitions"]
        real = staging.write_part
        calls = []

        def dying(path, k, tables, summary):
            calls.append(k)
            if len(calls) > 2:
                # the part's first file committed without its marker (garbage: a rerun
                # must rewrite it), a half-written one, then the process "dies"
                first = Path(path, next(iter(tables)))
                first.mkdir(parents=True, exist_ok=True)
                (first / f"part-{k:05d}.parquet").write_bytes(b"PAR1 garbage")
                Path(first, f".part-{k:05d}.deadbeef.tmp").write_bytes(b"PAR1 garbage")
                raise SimulatedKill("killed midway")
            return real(path, k, tables, summary)

        monkeypatch.setattr(agg, "write_part", dying)
        with pytest.raises(SimulatedKill):
            agg.aggregate(src, tmp_path / "resumed", partitions=6)
        assert not (tmp_path / "resumed").exists()
        staged = list(tmp_path.glob(".resumed.staging-*"))
        assert len(staged) == 1
        done_before = {p.name for p in (staged[0] / "_parts").iterdir()}
        assert 1 <= len(done_before) < n_parts
        monkeypatch.setattr(agg, "write_part", real)
        resumed = agg.aggregate(src, tmp_path / "resumed", partitions=6)
        assert resumed["layout"] == layout and resumed["partitions"] == n_parts
    clean = json.loads((tmp_path / "clean" / "_manifest.json").read_text())
    for key in ("rows", "pages", "visits", "changes", "groups", "run_key"):
        assert resumed[key] == clean[key] if key != "run_key" else True
    assert not list(tmp_path.glob(".resumed.staging-*"))
    a, b = read_all(tmp_path / "clean"), read_all(tmp_path / "resumed")
    assert a.keys() == b.keys()
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name])

    def files(out: Path) -> list[str]:
        return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())

    assert files(tmp_path / "resumed") == files(tmp_path / "clean")
    pages = [f for f in files(tmp_path / "resumed") if f.startswith("pages/")]
    if layout == "url":
        assert pages == [f"pages/part-{k:05d}.parquet" for k in range(6)]
    else:
        assert {f.rsplit("/", 1)[1] for f in pages} == {
            f"part-{k:05d}.parquet" for k in range(n_parts)
        }
        assert len([f for f in pages if f.startswith("pages/host=giant.org/")]) >= 2


@pytest.mark.slow
def test_cli_runs_the_stages_and_reports_errors(client, log, tmp_path, capsys):
    from bayesrate.cli import main

    src = write_by_time(log, tmp_path / "log", 3)
    address = client.scheduler.address
    assert (
        main(
            [
                "scale",
                "aggregate",
                "--input",
                str(src),
                "--out",
                str(tmp_path / "s"),
                "--partitions",
                "2",
                "--layout",
                "host",
                "--scheduler",
                address,
                "--no-progress",
            ]
        )
        == 0
    )
    # --layout host on a time-partitioned log: rows per host from a pass over the column
    stats = json.loads((tmp_path / "s" / "_manifest.json").read_text())
    assert stats["layout"] == "host" and stats["host_rows"] == "one pass over the domain column"
    assert stats["host_plan"]["hosts"] == 5 and stats["partitions"] >= 2
    PRIORS.save(tmp_path / "priors")
    assert (
        main(
            [
                "scale",
                "posteriors",
                "--input",
                str(tmp_path / "s"),
                "--out",
                str(tmp_path / "p"),
                "--priors",
                str(tmp_path / "priors"),
                "--scheduler",
                address,
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "scale",
                "rates",
                "--input",
                str(tmp_path / "p"),
                "--out",
                str(tmp_path / "r"),
                "--budget",
                "30",
                "--scheduler",
                address,
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["pages"] == N_PAGES and manifest["fetch_per_day"] == pytest.approx(30)
    assert manifest["layout"] == "host"
    assert sorted(d.name for d in (tmp_path / "r" / "rates").iterdir()) == [
        f"host=site{i}.org" for i in range(5)
    ]
    # expected failures: a message naming the problem, exit status 1
    code = main(
        [
            "scale",
            "posteriors",
            "--input",
            str(tmp_path / "nothing"),
            "--out",
            str(tmp_path / "p2"),
            "--priors",
            str(tmp_path / "priors"),
            "--scheduler",
            address,
        ]
    )
    assert code == 1
    assert "not a committed bayesrate scale output" in capsys.readouterr().err


def test_a_stage_given_another_stages_output_is_refused(client, stats_dir, tmp_path, capsys):
    """Issue 54 row 2: ``posteriors --input <posteriors output>`` and ``rates --input
    <aggregate output>`` exited 0 with an empty dataset / a plan of 0 URLs."""
    from bayesrate.cli import main

    post = tmp_path / "post"
    posteriors(stats_dir / "stats", post, stats_dir / "priors", n_grid=51)
    address = client.scheduler.address
    cases = [
        (["posteriors", "--input", post, "--priors", stats_dir / "priors"], "scale posteriors"),
        (["rates", "--input", stats_dir / "stats", "--budget", "30"], "scale aggregate"),
        (["fit", "--input", post], "scale posteriors"),
    ]
    for argv, got in cases:
        out = tmp_path / f"out-{argv[0]}"
        code = main(["scale", *map(str, argv), "--out", str(out), "--scheduler", address])
        err = capsys.readouterr().err
        assert code == 1, err
        assert f"is the output of '{got}'" in err and "Traceback" not in err
        assert not out.exists()
    with pytest.raises(ObservationError, match="reads the output of 'scale posteriors'"):
        rates(stats_dir / "stats", tmp_path / "r", budget_per_day=30.0)
    with pytest.raises(ObservationError, match="reads the output of 'scale aggregate'"):
        posteriors(post, tmp_path / "p", stats_dir / "priors")
    assert not (tmp_path / "r").exists() and not (tmp_path / "p").exists()


def test_rerun_repairs_a_deleted_part_and_stale_staging_is_removed(client, log, tmp_path):
    """Issue 54 row 10: a rerun over an output with a deleted part said "done" and left the
    hole; staging directories of failed or killed runs with other arguments stayed forever."""
    src = write_by_time(log, tmp_path / "log", 3)
    out = tmp_path / "stats"
    agg.aggregate(src, out, partitions=3)
    key = json.loads((out / "_manifest.json").read_text())["run_key"]
    want = read_all(out)
    # a killed run of other arguments into the same output, never resumed
    stale = tmp_path / ".stats.staging-0123456789abcdef"
    (stale / "_parts").mkdir(parents=True)
    (stale / "pages").mkdir()
    (stale / "pages" / "part-00000.parquet").write_bytes(b"PAR1 half")
    victim = out / "groups" / "part-00001.parquet"
    victim.unlink()
    agg.aggregate(src, out, partitions=3)
    assert victim.is_file()  # before: the missing part stayed missing
    assert json.loads((out / "_manifest.json").read_text())["run_key"] == key
    got = read_all(out)
    assert got.keys() == want.keys()
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name])
    assert not stale.exists()
    assert not list(tmp_path.glob(".stats.*"))
    # an intact output is still reused as it is
    stamp = (out / "_manifest.json").stat().st_mtime_ns
    agg.aggregate(src, out, partitions=3)
    assert (out / "_manifest.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_sample_pages_rebuild_the_same_statistics(client, log, stats_dir):
    """The fit stage's sample: stratified like the scale path, independent of the
    partitioning, and its pages' visits rebuilt from groups give the same statistics."""
    from bayesrate.models.scale import stratified_allocation
    from bayesrate.scaleout.fit import draw_sample, observations_from_groups

    pages, groups = draw_sample(stats_dir / "stats", 30, "seed-a")
    obs = in_memory(log)
    sizes = obs.pages["domain"].value_counts().sort_index()
    want = dict(zip(sizes.index, stratified_allocation(sizes.to_numpy(), 30), strict=True))
    assert pages["domain"].value_counts().to_dict() == {k: v for k, v in want.items() if v}
    other = tmp_dir = stats_dir / "stats-7"
    if not other.exists():
        agg.aggregate(stats_dir / "log", tmp_dir, partitions=7)
    again, _ = draw_sample(other, 30, "seed-a")
    assert set(again["page"]) == set(pages["page"])
    assert set(draw_sample(stats_dir / "stats", 30, "seed-b")[0]["page"]) != set(pages["page"])
    rebuilt = observations_from_groups(pages, groups).interval_stats
    full = obs.interval_stats
    sub = obs.subset(full.pages.get_indexer(rebuilt.pages)).interval_stats
    pd.testing.assert_frame_equal(sorted_groups(rebuilt), sorted_groups(sub), check_dtype=False)
    assert np.array_equal(rebuilt.n_visits, sub.n_visits)
    np.testing.assert_allclose(
        rebuilt.loglik(np.full(rebuilt.n_pages, 0.03)),
        sub.loglik(np.full(sub.n_pages, 0.03)),
        rtol=1e-12,
    )


@pytest.mark.slow
def test_fit_stage_writes_a_gated_artifact(client, stats_dir, tmp_path):
    import warnings

    from bayesrate.models import ConvergenceWarning
    from bayesrate.scaleout.fit import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tiny draws: judged below
        summary = fit(
            stats_dir / "stats",
            tmp_path / "priors",
            n_sample=60,
            seed="fit-test",
            sampler_config={"draws": 200, "tune": 300, "chains": 2},
            force=True,
        )
    priors = PriorSet.load(tmp_path / "priors")
    assert summary["pages_sampled"] == 60 and summary["domains"] == 5
    assert set(priors.domains) == {f"site{i}.org" for i in range(5)}
    assert priors.metadata["forced"] == (not summary["converged"])


def test_a_failed_compute_leaves_no_task_running(tmp_path):
    """When one task fails, the others have finished by the time the error reaches the
    caller: nothing of the failed call writes afterwards (the killed-run resume raced a
    part still being written into the staging directory)."""
    import time

    import dask

    from bayesrate.scaleout.cluster import compute, connect

    marker = tmp_path / "late"

    def slow():
        time.sleep(1.0)
        marker.write_text("done")
        return 1

    def fail():
        raise ValueError("boom")

    with connect(workers=2, processes=False):
        with pytest.raises(ValueError, match="boom"):
            compute([dask.delayed(slow, pure=False)(), dask.delayed(fail, pure=False)()])
        assert marker.exists()
