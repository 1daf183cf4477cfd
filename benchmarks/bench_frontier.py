"""Fleet benchmark: W workers against one PostgreSQL frontier vs the SQLite store, one run.

PostgreSQL (:class:`~bayesrate.scheduler.frontier.Frontier`): a state of ``--urls`` URLs
(one fetch each already applied, so every report is a real posterior update), then
``--workers`` processes each loop ``--rounds`` times: lease ``--batch`` URLs (latency of
each call recorded), report them all in one call. Reported fetches per second are counted
over the wall time of the whole phase (leases and reports of all workers interleaved);
lease latency percentiles over every lease call. Then the same state in an SQLite file
(:class:`~bayesrate.scheduler.store.Store`), the same workers each ``observe`` the same
number of batches of ``--batch`` fetches (the SQLite store has no leases: ``due`` on a
snapshot is the single-process way).

**Ceiling** (first, on a copy of the populated ``urls`` table): what PostgreSQL itself does
on this machine, with the server's durability settings (``synchronous_commit``, ``fsync``:
reported), for the minimal statements a fetch needs, from the same workers: ``report``,
one set-based ``UPDATE`` of ``--batch`` rows (new posterior, counts, due time, lease
cleared) per committed transaction; ``lease``, one statement selecting ``--batch`` due rows
``FOR UPDATE SKIP LOCKED`` and marking them leased; ``cycle``, lease then report, as the
frontier's workers do (the bound for the frontier's reported fetches/s); ``cycle_1``, the
same with one worker (lease latency without our own workers' contention). The issue's
targets (:data:`TARGET_RATE`, :data:`TARGET_P99_MS`) are printed with the ratios of the
frontier's and the ceiling's numbers to them.

Usage::

    .venv/bin/python benchmarks/bench_frontier.py [--urls 1000000] [--workers 8]
        [--batch 1000] [--rounds 20] [--postgres URL] [--no-ceiling]

Without ``--postgres`` (or ``BAYESRATE_TEST_POSTGRES``) it starts a throwaway cluster
with ``scripts/postgres_for_tests.sh`` and removes it afterwards.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bayesrate.scheduler import SchedulerConfig
from bayesrate.scheduler.frontier import Frontier
from bayesrate.scheduler.pgstore import PgStore
from bayesrate.scheduler.store import Store

REPO = Path(__file__).resolve().parents[1]
T0 = 480_000.0
#: issue #55's targets
TARGET_RATE = 20_000
TARGET_P99_MS = 50.0
HOSTS = 1000


def _populate(store, n: int) -> None:
    """``n`` URLs on ``HOSTS`` hosts, each fetched once at ``T0`` (in batches)."""
    step = 100_000
    for lo in range(0, n, step):
        urls = [f"https://h{i % HOSTS}.example/{i}" for i in range(lo, min(n, lo + step))]
        store.observe(urls, np.full(len(urls), T0), np.zeros(len(urls), np.int8),
                      hosts=[u.split("/")[2] for u in urls], now=T0)  # fmt: skip


def _pg_worker(location: str, name: str, rounds: int, batch: int, go, out) -> None:
    lat, reported = [], 0
    with Frontier.open(location) as frontier:
        out.put("ready")
        go.wait()
        for r in range(rounds):
            now = T0 + 1000.0 + r  # every URL is due (revisit floor: 30 days)
            t = time.perf_counter()
            leases = frontier.lease(name, batch, now=now, hours=24.0)
            lat.append(time.perf_counter() - t)
            done = frontier.report([(x.fetch_id, now, r % 2) for x in leases], now=now)
            reported += done.applied
    out.put((lat, reported))


def _sqlite_worker(path: str, w: int, workers: int, rounds: int, batch: int, go, out) -> None:
    reported = 0
    with Store.open(path) as store:
        out.put("ready")
        go.wait()
        for r in range(rounds):
            lo = (r * workers + w) * batch
            urls = [f"https://h{i % HOSTS}.example/{i}" for i in range(lo, lo + batch)]
            store.observe(
                urls, np.full(batch, T0 + 1000.0 + r), np.full(batch, r % 2), now=T0 + 2000
            )
            reported += batch
    out.put(([], reported))


#: the ceiling's table: a copy of the state's ``urls`` rows (same width and fillfactor), its
#: primary key, the unique index on ``url`` (every URL lookup needs it, and a report's
#: update, which moves the due time, writes an entry in each index) and a due index; ``due``
#: is a plain column so that the statements are the minimal ones
CEILING_SETUP = (
    "CREATE TABLE ceiling WITH (fillfactor = 50) AS SELECT id, url, host, weight, alpha, beta,"
    " log_weights, last_fetch, last_change, n_fetch, n_changed, target,"
    " last_fetch + due_after AS due, lease_until FROM urls",
    "ALTER TABLE ceiling ADD PRIMARY KEY (id)",
    "ALTER TABLE ceiling ADD UNIQUE (url)",
    "CREATE INDEX ceiling_due ON ceiling (due, id)",
    "VACUUM ANALYZE ceiling",
)
#: the minimal lease: k due rows not under a live lease, locked skipping locked rows, marked
CEILING_LEASE = (
    "WITH picked AS (SELECT id FROM ceiling WHERE due <= %(now)s"
    " AND (lease_until IS NULL OR lease_until <= %(now)s)"
    " ORDER BY due, id LIMIT %(k)s FOR UPDATE SKIP LOCKED)"
    " UPDATE ceiling SET lease_until = %(expires)s FROM picked WHERE ceiling.id = picked.id"
    " RETURNING ceiling.id"
)
#: the minimal report: the new posterior, counts, fetch times and due time of each row, and
#: the lease cleared, one set-based statement
CEILING_REPORT = (
    "UPDATE ceiling SET alpha = v.alpha, beta = v.beta, last_fetch = v.t,"
    " last_change = CASE WHEN v.c = 1 THEN v.t ELSE last_change END,"
    " n_fetch = n_fetch + 1, n_changed = n_changed + v.c, due = v.due, lease_until = NULL"
    " FROM unnest(%b::bigint[], %b::float8[], %b::float8[], %b::float8[], %b::int[],"
    " %b::float8[]) AS v(id, alpha, beta, t, c, due) WHERE ceiling.id = v.id"
)


def _ceiling_worker(
    dsn: str, mode: str, w: int, workers: int, rounds: int, batch: int, go, out
) -> None:
    """The ceiling's client ``w``: ``lease``, ``report`` (of rows of its own id range, leased
    to nobody) or ``cycle`` (lease then report), each statement in its own committed
    transaction (autocommit, ``synchronous_commit`` on)."""
    import psycopg

    lat, done = [], 0
    rng = np.random.default_rng(os.getpid())
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("SELECT 1")
        out.put("ready")
        go.wait()
        for r in range(rounds):
            now = T0 + 1000.0 + r
            if mode == "report":
                lo = (r * workers + w) * batch
                ids = list(range(lo, lo + batch))
            if mode in ("lease", "cycle"):
                t = time.perf_counter()
                ids = [i for (i,) in con.execute(
                    CEILING_LEASE, {"now": now, "k": batch, "expires": now + 24.0}
                ).fetchall()]  # fmt: skip
                lat.append(time.perf_counter() - t)
                done += len(ids) if mode == "lease" else 0
            if mode in ("report", "cycle"):
                n = len(ids)
                c = rng.integers(0, 2, n)
                alpha, beta = (rng.random(n) + 1).tolist(), (rng.random(n) + 1).tolist()
                due = (now + 24.0 * rng.random(n) + 1.0).tolist()
                con.execute(CEILING_REPORT, (ids, alpha, beta, [now] * n, c.tolist(), due))
                done += n
    out.put((lat, done))


def _run(target, args_of, workers: int) -> tuple[float, list[float], int]:
    """Run the workers; the wall time counts from when all are connected and ready."""
    ctx = multiprocessing.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*args_of(w), go, out)) for w in range(workers)]
    for p in procs:
        p.start()
    assert [out.get() for _ in procs] == ["ready"] * workers
    t = time.perf_counter()
    go.set()
    results = [out.get() for _ in procs]
    wall = time.perf_counter() - t
    for p in procs:
        p.join()
    return wall, [x for lat, _ in results for x in lat], sum(n for _, n in results)


def _ceiling(location: str, args: argparse.Namespace) -> dict:
    """The ceiling rows: PostgreSQL's own rate for the minimal statements (see
    :data:`CEILING_LEASE`, :data:`CEILING_REPORT`) on a copy of the populated table, the
    same workers, batches and rounds, the server's durability settings unchanged."""
    import psycopg

    out = {}
    for mode, workers in (("report", args.workers), ("lease", args.workers),
                          ("cycle", args.workers), ("cycle_1", 1)):  # fmt: skip
        with psycopg.connect(location, autocommit=True) as con:
            con.execute("DROP TABLE IF EXISTS ceiling")
            for statement in CEILING_SETUP:
                con.execute(statement)
            out["synchronous_commit"] = con.execute("SHOW synchronous_commit").fetchone()[0]
            out["fsync"] = con.execute("SHOW fsync").fetchone()[0]
        wall, lat, rows = _run(
            _ceiling_worker,
            lambda w, mode=mode, n=workers: (
                location, mode.split("_")[0], w, n, args.rounds, args.batch
            ),
            workers,
        )  # fmt: skip
        row = {"rows_per_second": round(rows / wall), "wall_seconds": round(wall, 2)}
        if lat:
            lat_ms = np.array(lat) * 1000
            row["lease_ms_p50"] = round(float(np.percentile(lat_ms, 50)), 1)
            row["lease_ms_p99"] = round(float(np.percentile(lat_ms, 99)), 1)
        out[mode] = row
    with psycopg.connect(location, autocommit=True) as con:
        con.execute("DROP TABLE ceiling")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--postgres", default=os.environ.get("BAYESRATE_TEST_POSTGRES"))
    ap.add_argument("--no-ceiling", action="store_true", help="skip the ceiling rows")
    args = ap.parse_args()
    cluster = None
    if not args.postgres:
        cluster = tempfile.mkdtemp(prefix="bayesrate-pg.")
        script = REPO / "scripts" / "postgres_for_tests.sh"
        started = subprocess.run(
            ["bash", str(script), "start", cluster], check=True, capture_output=True, text=True
        )
        args.postgres = started.stdout.split()[-1]
    try:
        result = bench(args)
    finally:
        if cluster:
            subprocess.run(["bash", str(REPO / "scripts" / "postgres_for_tests.sh"), "stop",
                            cluster], check=False)  # fmt: skip
    print(json.dumps(result, indent=2))


def bench(args: argparse.Namespace) -> dict:
    import psycopg

    with psycopg.connect(args.postgres, autocommit=True) as con:
        con.execute("DROP SCHEMA IF EXISTS bench_frontier CASCADE")
        con.execute("CREATE SCHEMA bench_frontier")
    sep = "&" if "?" in args.postgres else "?"
    location = f"{args.postgres}{sep}options=-csearch_path%3Dbench_frontier"
    config = SchedulerConfig()
    t = time.perf_counter()
    with PgStore.create(location, config=config) as store:
        _populate(store, args.urls)
    pg_populate = time.perf_counter() - t
    need = args.workers * args.rounds * args.batch
    if need > args.urls:
        raise SystemExit(f"--urls must be at least workers x rounds x batch = {need}")
    ceiling = {} if args.no_ceiling else _ceiling(location, args)
    wall, lat, reported = _run(
        _pg_worker, lambda w: (location, f"w{w}", args.rounds, args.batch), args.workers
    )
    lat_ms = np.array(lat) * 1000
    pg = {
        "populate_seconds": round(pg_populate, 1),
        "reported_fetches": reported,
        "wall_seconds": round(wall, 2),
        "reported_fetches_per_second": round(reported / wall),
        "leases_per_second": round(len(lat) * args.batch / wall),
        "lease_ms_p50": round(float(np.percentile(lat_ms, 50)), 1),
        "lease_ms_p99": round(float(np.percentile(lat_ms, 99)), 1),
        "lease_calls": len(lat),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.db")
        t = time.perf_counter()
        with Store.create(path, config=config) as store:
            _populate(store, args.urls)
        sq_populate = time.perf_counter() - t
        wall, _, reported = _run(
            _sqlite_worker,
            lambda w: (path, w, args.workers, args.rounds, args.batch),
            args.workers,
        )
    sqlite = {
        "populate_seconds": round(sq_populate, 1),
        "reported_fetches": reported,
        "wall_seconds": round(wall, 2),
        "reported_fetches_per_second": round(reported / wall),
    }
    with psycopg.connect(args.postgres, autocommit=True) as con:
        con.execute("DROP SCHEMA bench_frontier CASCADE")
    targets = {
        "reported_fetches_per_second": TARGET_RATE,
        "lease_ms_p99": TARGET_P99_MS,
        "rate_over_target": round(pg["reported_fetches_per_second"] / TARGET_RATE, 3),
        "p99_over_target": round(pg["lease_ms_p99"] / TARGET_P99_MS, 2),
    }
    if ceiling:
        targets["ceiling_cycle_rate_over_target"] = round(
            ceiling["cycle"]["rows_per_second"] / TARGET_RATE, 3
        )
    return {
        "urls": args.urls,
        "workers": args.workers,
        "batch": args.batch,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "ceiling": ceiling,
        "postgres": pg,
        "sqlite": sqlite,
        "targets": targets,
    }


if __name__ == "__main__":
    main()
