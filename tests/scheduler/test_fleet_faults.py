"""Faults of a fleet: a worker killed holding leases, PostgreSQL restarted mid-run, the
server unreachable (a partition). Nothing acknowledged is lost and no fetch counts twice:
checked against the workers' own logs of acknowledged fetch ids and the lease log.

The restart and partition tests run their own throwaway cluster (``conftest.start_cluster``)
so that stopping it disturbs no other test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from bayesrate.errors import ArtifactError
from bayesrate.scheduler.frontier import Frontier
from bayesrate.scheduler.pgstore import PgStore
from tests.helpers import REPO
from tests.scheduler.conftest import start_cluster
from tests.scheduler.fleet_worker import T0


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster()
    try:
        yield c
    finally:
        c.stop()


def _state(location: str, hosts: int = 10, per_host: int = 20) -> None:
    with PgStore.create(location) as s:
        urls = [f"https://h{h}/{i}" for h in range(hosts) for i in range(per_host)]
        s.add(urls, [u.split("/")[2] for u in urls])


def _worker(location: str, name: str, rounds: int, k: int, log: Path, *extra: str):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scheduler.fleet_worker", location, name,
         str(rounds), str(k), "1.5", str(log), *extra],
        cwd=REPO,
    )  # fmt: skip


def _wait_for_lines(log: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().split()) >= n:
            return
        assert proc.poll() is None, "the worker ended early"
        time.sleep(0.05)
    raise AssertionError(f"{log} did not reach {n} fetch ids")


def _applied(location: str) -> list[int]:
    with psycopg.connect(location) as con:
        rows = con.execute("SELECT id FROM fetches WHERE status = 'applied' ORDER BY id")
        return [r[0] for r in rows]


def _urls_of(location: str, fetch_ids: list[int]) -> set[int]:
    with psycopg.connect(location) as con:
        rows = con.execute("SELECT url FROM fetches WHERE id = ANY(%s)", (fetch_ids,))
        return {r[0] for r in rows}


def _fetched(location: str) -> int:
    with PgStore.open(location, readonly=True) as s:
        return int(s.state.n_fetch.sum())


@pytest.mark.slow
def test_worker_killed_holding_leases(pg_location, tmp_path):
    """kill -9 of a worker holding 10 leases: the URLs stay leased until the leases expire,
    then another worker gets them; the reports acknowledged before are all kept."""
    _state(pg_location, hosts=2, per_host=15)
    good = _worker(pg_location, "good", 1, 10, tmp_path / "good.log")
    assert good.wait(timeout=60) == 0
    acked = [int(x) for x in (tmp_path / "good.log").read_text().split()]
    holder = _worker(pg_location, "holder", 1, 10, tmp_path / "held.log", "--hold")
    _wait_for_lines(tmp_path / "held.log", 10, holder)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    held = [int(x) for x in (tmp_path / "held.log").read_text().split()]
    with Frontier.open(pg_location) as f:
        before = f.lease("other", 30, now=T0 + 0.1)  # the held leases are still live
        assert len(before) == 10
        f.report([(x.fetch_id, T0 + 0.1, 0) for x in before], now=T0 + 0.1)
        after = f.lease("other", 30, now=T0 + 0.2)  # expired (10 minutes): handed out again
        assert len(after) == 10
        assert _urls_of(pg_location, [x.fetch_id for x in after]) == _urls_of(pg_location, held)
        f.report([(x.fetch_id, T0 + 0.2, 0) for x in after], now=T0 + 0.2)
    assert _applied(pg_location) == sorted(acked + [x.fetch_id for x in before + after])
    assert _fetched(pg_location) == 30


@pytest.mark.slow
def test_postgres_restart_mid_run(cluster, tmp_path):
    """The server crashes (immediate shutdown) and comes back while 2 workers lease and
    report: they reconnect with backoff and finish; every acknowledged fetch is applied
    once, and no fetch is applied that no worker saw acknowledged."""
    location = cluster.url
    _state(location)
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    workers = [_worker(location, f"w{i}", 30, 4, log) for i, log in enumerate(logs)]
    _wait_for_lines(logs[0], 8, workers[0])
    assert all(w.poll() is None for w in workers)  # mid-run
    cluster.kill()
    time.sleep(1.0)
    cluster.restart()
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    acked = sorted(int(x) for log in logs for x in log.read_text().split())
    assert len(acked) == len(set(acked)) > 100  # no fetch id acknowledged to two workers
    assert _applied(location) == acked
    assert _fetched(location) == len(acked)
    with psycopg.connect(location, autocommit=True) as con:
        con.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


@pytest.mark.slow
def test_unreachable_server_applies_nothing_then_recovers(cluster):
    """A partition (the server stopped): a report fails after its retries saying nothing
    was applied, and is applied once the same frontier reaches the server again."""
    location = cluster.url
    _state(location, hosts=1, per_host=3)
    with Frontier(PgStore.open(location, reconnect_seconds=1.0)) as f:
        leases = f.lease("w", 3, now=T0)
        results = [(x.fetch_id, T0, 0) for x in leases]
        cluster.kill()
        try:
            with pytest.raises(ArtifactError, match=r"cannot reach .*nothing was applied"):
                f.report(results, now=T0)
        finally:
            cluster.restart()
        f.store.reconnect_seconds = 30.0  # the worker keeps retrying, with backoff
        assert f.report(results, now=T0).applied == 3
        assert f.report(results, now=T0).duplicates == 3
    assert _fetched(location) == 3
    with psycopg.connect(location, autocommit=True) as con:
        con.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
