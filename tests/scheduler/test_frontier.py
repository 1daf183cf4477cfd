"""The fleet's frontier on PostgreSQL: leases, idempotent reports, politeness, migrations.

Oracles are independent of the code under test: the ``fetches`` table (the lease log) read
with plain SQL, the workers' own logs of acknowledged fetch ids, and counts derived by hand.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import psycopg
import pytest

from bayesrate.errors import ArtifactError, ObservationError
from bayesrate.scheduler import SchedulerConfig, pgsql
from bayesrate.scheduler.frontier import Frontier
from bayesrate.scheduler.pgstore import PgArray, PgStore
from tests.helpers import REPO
from tests.scheduler.fleet_worker import T0


def _frontier(location, urls_per_host, config=None, **kwargs) -> Frontier:
    """A frontier over a new state holding ``urls_per_host`` never-fetched URLs per host."""
    store = PgStore.create(location, config=config or SchedulerConfig())
    urls = [f"https://{h}/{i}" for h, n in urls_per_host.items() for i in range(n)]
    hosts = [h for h, n in urls_per_host.items() for _ in range(n)]
    store.add(urls, hosts)
    return Frontier(store, **kwargs)


def _fetches(location) -> list[tuple]:
    """The lease log: (fetch id, url id, worker, leased_at, expires, reported_at, status)."""
    with psycopg.connect(location) as con:
        return con.execute(
            "SELECT id, url, worker, leased_at, expires, reported_at, status FROM fetches"
            " ORDER BY id"
        ).fetchall()


def _assert_never_leased_twice_at_once(fetches) -> None:
    """A URL's next lease starts only after the previous one ended (reported or expired)."""
    by_url = defaultdict(list)
    for f in fetches:
        by_url[f[1]].append(f)
    for leases in by_url.values():
        for a, b in itertools.pairwise(leases):
            end = a[4] if a[5] is None else min(a[4], a[5])
            assert b[3] >= end, f"fetch {b[0]} leased while fetch {a[0]} held the URL"


def test_lease_hands_each_due_url_once_and_expiry_returns_it(pg_location):
    with _frontier(pg_location, {"a": 3, "b": 3}) as f:
        first = f.lease("w1", 4, now=T0, hours=0.5)
        second = f.lease("w2", 10, now=T0 + 0.1, hours=0.5)
        assert len(first) == 4 and len(second) == 2
        urls = [x.url for x in first + second]
        assert len(set(urls)) == 6  # every URL once
        assert f.lease("w3", 10, now=T0 + 0.2) == []  # all under a live lease
        assert f.counts(T0 + 0.2) == {"leased": 6, "due": 0}
        f.report([(x.fetch_id, T0 + 0.2, 0) for x in first], now=T0 + 0.2)
        # w2 died: its leases expire at T0 + 0.6 and the URLs are handed out again
        assert f.lease("w3", 10, now=T0 + 0.55) == []
        again = f.lease("w3", 10, now=T0 + 0.6)
        assert sorted(x.url for x in again) == sorted(x.url for x in second)
        assert {x.fetch_id for x in again}.isdisjoint(x.fetch_id for x in second)
    _assert_never_leased_twice_at_once(_fetches(pg_location))


def test_report_counts_each_fetch_once(pg_location):
    with _frontier(pg_location, {"a": 4}) as f:
        leases = f.lease("w", 4, now=T0)
        results = [(x.fetch_id, T0, 0) for x in leases]
        assert f.report(results, now=T0).applied == 4
        again = f.report(results, now=T0)  # a retry after a lost acknowledgement
        assert (again.applied, again.duplicates, again.stale) == (0, 4, 0)
        assert f.store.refresh().n_fetch.tolist() == [1, 1, 1, 1]
        # the second fetch of each URL, reported in two overlapping batches
        later = f.lease("w", 4, now=T0 + 25 * 24)  # past the 30-day revisit floor? no: due
        assert len(later) == 4
        r1 = f.report([(x.fetch_id, T0 + 600, 1) for x in later[:3]], now=T0 + 600)
        r2 = f.report([(x.fetch_id, T0 + 600, 1) for x in later[1:]], now=T0 + 600)
        assert (r1.applied, r2.applied, r2.duplicates) == (3, 1, 2)
        st = f.store.refresh()
        assert st.n_fetch.tolist() == [2, 2, 2, 2]
        assert st.n_changed.tolist() == [1, 1, 1, 1]
    statuses = Counter(f[6] for f in _fetches(pg_location))
    assert statuses == {"applied": 8}


def test_late_report_after_reissue_is_recorded_not_applied(pg_location):
    with _frontier(pg_location, {"a": 1}) as f:
        (slow,) = f.lease("slow", 1, now=T0, hours=0.1)
        (fast,) = f.lease("fast", 1, now=T0 + 0.2)  # slow's lease expired
        assert slow.digest is None
        assert f.report([(fast.fetch_id, T0 + 0.3, 1, "new")], now=T0 + 0.3).applied == 1
        late = f.report([(slow.fetch_id, T0 + 0.05, 1, "old")], now=T0 + 0.3)
        assert (late.applied, late.stale) == (0, 1)
        assert f.store.refresh().n_fetch.tolist() == [1]
        assert f.report([(slow.fetch_id, T0 + 0.05, 1)], now=T0 + 0.3).duplicates == 1
        (next_lease,) = f.lease("w", 1, now=T0 + 1000)
        assert next_lease.digest == "new"  # the applied fetch's digest, not the stale one's


def test_bad_reports_apply_nothing_and_name_the_problem(pg_location):
    with _frontier(pg_location, {"a": 2}) as f:
        a, _ = f.lease("w", 2, now=T0)
        cases = [
            ([(a.fetch_id, T0, 0), (999, T0, 0)], "unknown fetch ids"),
            ([(a.fetch_id, T0, 0), (a.fetch_id, T0, 1)], "twice in one report"),
            ([(a.fetch_id, T0, 2)], "'changed' must be 0 or 1"),
            ([(a.fetch_id, T0 + 5, 0)], "in the future"),
            ([("x", T0, 0)], "integers"),
        ]
        for results, match in cases:
            with pytest.raises(ObservationError, match=match):
                f.report(results, now=T0)
        assert f.store.refresh().n_fetch.tolist() == [0, 0]
        with pytest.raises(ObservationError, match="k must be"):
            f.lease("w", -1, now=T0)
        with pytest.raises(ObservationError, match="worker"):
            f.lease("", 1, now=T0)
        with pytest.raises(ObservationError, match="unknown host"):
            f.set_crawl_delay("nowhere", 1.0)
    assert all(r[5] is None for r in _fetches(pg_location))


def test_crawl_delay_holds_across_workers(pg_location):
    """Hosts with a 1 h crawl delay (politeness limit 1 per hour): 4 workers leasing every
    15 minutes for 3 hours get each host's URLs at T0, T0+1, T0+2 only, as one worker."""
    cfg = SchedulerConfig(politeness_limit=1, politeness_window=1.0)
    with _frontier(pg_location, {"a": 20, "b": 20, "free": 5}, cfg) as f:
        f.set_crawl_delay("free", 0)  # a host without a delay: all at once
        for r in range(12):
            now = T0 + 0.25 * r
            for w in range(4):
                for x in f.lease(f"w{w}", 10, now=now):
                    f.report([(x.fetch_id, now, 0)], now=now)
    with psycopg.connect(pg_location) as con:
        rows = con.execute(
            "SELECT h.name, f.leased_at FROM fetches f JOIN urls u ON u.id = f.url"
            " JOIN hosts h ON h.id = u.host ORDER BY f.leased_at"
        ).fetchall()
    times = defaultdict(list)
    for host, t in rows:
        times[host].append(t - T0)
    assert times["a"] == times["b"] == [0.0, 1.0, 2.0]
    assert times["free"] == [0.0] * 5


@pytest.mark.slow
def test_concurrent_workers_never_share_a_url_and_count_each_fetch_once(pg_location, tmp_path):
    """4 worker processes lease/report 6 rounds on one clock, retrying half their reports."""
    n_urls = 200
    cfg = SchedulerConfig(min_interval=1.0)
    with _frontier(pg_location, {f"h{i}": n_urls // 10 for i in range(10)}, cfg) as f:
        f.store.close()
    logs = [tmp_path / f"w{i}.log" for i in range(4)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.scheduler.fleet_worker",
                pg_location,
                f"w{i}",
                "6",
                "25",
                "1.5",
                str(log),
            ],
            cwd=REPO,
        )
        for i, log in enumerate(logs)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    acked = [int(x) for log in logs for x in log.read_text().split()]
    assert len(acked) == len(set(acked)) > 0  # no fetch id handed to two workers
    fetches = _fetches(pg_location)
    _assert_never_leased_twice_at_once(fetches)
    pairs = Counter((f[1], f[3]) for f in fetches)
    assert max(pairs.values()) == 1  # no URL leased twice in one round
    assert sorted(acked) == [f[0] for f in fetches if f[6] == "applied"]
    with PgStore.open(pg_location, readonly=True) as s:
        st = s.state
        assert int(st.n_fetch.sum()) == len(acked)  # each fetch counted exactly once
        assert int(st.n_changed.sum()) == sum(x % 2 for x in acked if _not_baseline(x, fetches))


def _not_baseline(fetch_id, fetches) -> bool:
    """Whether the fetch was not its URL's first (a first fetch carries no change flag)."""
    url = next(f[1] for f in fetches if f[0] == fetch_id)
    first = min(f[0] for f in fetches if f[1] == url and f[6] == "applied")
    return fetch_id != first


def test_state_commands_on_a_database_need_an_initialised_state(pg_location):
    with pytest.raises(ArtifactError, match="no scheduler state"):
        PgStore.open(pg_location)
    PgStore.create(pg_location).close()
    with pytest.raises(ArtifactError, match="already holds a scheduler state"):
        PgStore.create(pg_location)
    with pytest.raises(ArtifactError, match="not a PostgreSQL URL"):
        PgStore.open("postgresql://[bad")


def test_migrations_are_versioned_and_applied_on_open(pg_location):
    """A database migrated to version 1 only (before the fleet's tables) is migrated by a
    writable open, refused by a read-only one; a version newer than this bayesrate is
    refused."""
    PgStore.create(pg_location).close()
    with psycopg.connect(pg_location, autocommit=True) as con:
        con.execute("DROP TABLE fetches")
        con.execute("DROP INDEX urls_due")
        con.execute("ALTER TABLE urls DROP COLUMN due_after, DROP COLUMN lease_fetch,"
                    " DROP COLUMN lease_until, DROP COLUMN digest")  # fmt: skip
        con.execute("ALTER TABLE hosts DROP COLUMN crawl_delay, DROP COLUMN next_allowed")
        con.execute("DELETE FROM schema_migrations WHERE version > 1")
    with pytest.raises(ArtifactError, match=r"lacks schema migrations \[2, 3, 4\]"):
        PgStore.open(pg_location, readonly=True)
    PgStore.open(pg_location).close()
    with psycopg.connect(pg_location, autocommit=True) as con:
        levels = [v for (v,) in con.execute("SELECT version FROM schema_migrations ORDER BY 1")]
        assert levels == [v for v, _ in pgsql.MIGRATIONS]
        fill = con.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN ('urls', 'fetches')"
            " AND relnamespace = to_regnamespace(current_schema()) ORDER BY 1"
        ).fetchall()
        assert fill == [("fetches", ["fillfactor=50"]), ("urls", ["fillfactor=50"])]
        con.execute("INSERT INTO schema_migrations (version) VALUES (99)")
    with pytest.raises(ArtifactError, match="schema version 99; this bayesrate knows"):
        PgStore.open(pg_location)


def test_unreachable_server_is_a_clear_error_after_retries():
    with pytest.raises(ArtifactError, match=r"cannot reach .*nothing was applied"):
        PgStore.open("postgresql://nobody@127.0.0.1:1/none", reconnect_seconds=0.5)


def test_due_times_order_the_frontier_like_priority(pg_location):
    """Leases come earliest-due first: after a plan, URLs with higher planned rates (due
    sooner) are leased first once due; none is leased before its due time."""
    with _frontier(pg_location, {"a": 6}) as f:
        first = f.lease("w", 6, now=T0)
        f.report([(x.fetch_id, T0, 0) for x in first], now=T0)
        st = f.store.refresh()
        st.target[:] = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) / 24.0  # per hour
        f.store.save_targets()
        # URL i is due 24 / (6 - i) hours after T0
        assert f.lease("w", 6, now=T0 + 3.9) == []
        got = f.lease("w", 6, now=T0 + 5.9)
        assert [x.url for x in got] == ["https://a/0", "https://a/1"]  # due at 4 h, 4.8 h


def test_psycopg_is_imported_only_for_a_database(tmp_path):
    """``import bayesrate.scheduler`` and ``bayesrate --help`` load neither PyMC nor
    psycopg; opening a file state does not load psycopg either."""
    code = (
        "import sys, bayesrate.scheduler, bayesrate.scheduler.location as loc\n"
        "from bayesrate.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "loc.create_store(sys.argv[1]).close()\n"
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'pymc') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("values", "sqltype"),
    [
        ([1.5, float("nan"), -2.0, 1e300, float("inf")], "float8"),
        ([], "float8"),
        ([0, -1, 2**40], "bigint"),
        (np.array([3, -7], np.int32), "int"),
        (np.array([1, 0], np.int8), "smallint"),
        ([True, False, True], "bool"),
    ],
)
def test_binary_arrays_read_back_as_lists_do(pg_location, values, sqltype):
    """A :class:`PgArray` parameter reaches the server as the same array (NaN as NULL) as
    psycopg's own dumping of the list, in and out of pipeline mode."""
    as_list = [None if isinstance(v, float) and v != v else v for v in np.asarray(values).tolist()]
    with psycopg.connect(pg_location) as con:
        sql = f"SELECT %b::{sqltype}[] = %b::{sqltype}[], %b::{sqltype}[]"
        args = (PgArray(values, sqltype), as_list, PgArray(values, sqltype))
        assert con.execute(sql, args).fetchone() == (True, as_list)
        with con.pipeline():
            assert con.execute(sql, args).fetchone()[1] == as_list
