"""The Dask scale-out path on a synthetic crawl log on disk (issue 16).

Usage::

    .venv/bin/python benchmarks/bench_dask.py [--rows 50000000] [--visits 100]
        [--memory-rows 10000000] [--workers 2] [--memory-limit 6GiB] [--dir /tmp/bench-dask]
        [--layouts url,host,host-url] [--input-rows N]

1. Writes a crawl log of ``--rows`` rows (``--rows / --visits`` URLs on 1,000 hosts, gaps of
   1–24 h, log-normal change rates) as Parquet partitioned by time: ``round=K/`` holds the
   URLs' visits number ``2K`` and ``2K + 1``, so every URL is split across all files.
   ``page`` is a URL string, ``domain`` its host, ``time`` a UTC timestamp, ``changed``
   empty on each URL's first visit.
2. Runs ``aggregate`` → ``posteriors`` → ``rates`` on a local cluster (``--workers``
   processes, one thread each, ``--memory-limit`` each) and reports each stage's wall
   time, input rows per second and the peak resident memory of every worker (sampled
   every 0.5 s).
   With ``host`` in ``--layouts`` the same log is also rewritten partitioned by host
   (``domain=H/``, one directory per host, one row group per host file, by
   ``pyarrow.dataset.write_dataset``; not timed as part of the path) and the three stages
   run on it in the host layout, the output partitioned by host like the input: the same
   stages' time and memory in both layouts. ``host-url`` runs the URL layout on the
   by-host log: the layout's own cost on the same input. ``--input-rows`` is passed to
   ``aggregate`` (rows per input partition; 1 reads every row group as its own partition,
   as the reader did before it packed small pieces together).
3. Baseline: the in-memory path on the first ``--memory-rows`` rows' URLs (the same
   generator): ``pd.read_parquet`` → :meth:`Observations.from_frame` → interval
   statistics → :func:`grid_posterior` (201 points) → :func:`optimal_rates`, rows/s per
   stage and peak RSS, run first in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

N_HOSTS = 1000
START = np.datetime64("2024-03-01T00:00:00", "ns")


def write_log(root: Path, rows: int, visits: int, seed: int = 16) -> dict:
    """The synthetic log, two visit rounds per file; returns its shape."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n_pages = rows // visits
    host = rng.integers(0, N_HOSTS, n_pages)
    lam = np.exp(
        np.log(0.05) + 0.8 * rng.standard_normal(N_HOSTS)[host] + 1.5 * rng.standard_normal(n_pages)
    )
    urls = pa.array([f"https://host{h:04d}.example/page/{i:08d}" for i, h in enumerate(host)])
    hosts = pa.array([f"host{h:04d}.example" for h in host])
    clock = rng.uniform(0, 24, n_pages)  # hours after START of each URL's first visit
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    for k in range(0, visits, 2):
        d = root / f"round={k // 2:03d}"
        d.mkdir()
        times, flags = [], []
        for r in (k, k + 1):
            if r >= visits:
                break
            if r == 0:
                flags.append(np.full(n_pages, np.nan))
            else:
                gap = rng.choice([1.0, 2.0, 6.0, 24.0], n_pages, p=[0.5, 0.2, 0.2, 0.1])
                clock = clock + gap
                flags.append((rng.random(n_pages) < -np.expm1(-lam * gap)).astype(float))
            times.append(START + (clock * 3.6e12).astype("timedelta64[ns]"))
        n_rounds = len(times)
        table = pa.table(
            {
                "page": pa.concat_arrays([urls] * n_rounds),
                "domain": pa.concat_arrays([hosts] * n_rounds),
                "time": pa.array(np.concatenate(times)).cast(pa.timestamp("ns", tz="UTC")),
                "changed": pa.array(np.concatenate(flags), from_pandas=True),
            }
        )
        pq.write_table(table, d / "part-0.parquet", row_group_size=1_000_000)
    return {
        "rows": n_pages * visits,
        "pages": n_pages,
        "files": -(-visits // 2),
        "write_seconds": time.perf_counter() - t0,
        "bytes": sum(p.stat().st_size for p in root.rglob("*.parquet")),
    }


class WorkerMemory:
    """Peak RSS per worker, sampled in a thread while a stage runs."""

    def __init__(self, client, every: float = 0.5) -> None:
        self.client, self.every, self.peak = client, every, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        def rss() -> int:
            return psutil.Process().memory_info().rss

        while not self._stop.is_set():
            try:
                for worker, value in self.client.run(rss).items():
                    self.peak[worker] = max(self.peak.get(worker, 0), value)
            except Exception:  # a worker restarting: sample again
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def gib(self) -> list[float]:
        return sorted(round(v / 2**30, 2) for v in self.peak.values())


def in_memory(log: Path, rows: int, visits: int) -> dict:
    """The in-memory path on the URLs of the first ``rows`` rows (run in its own process)."""
    from bayesrate.estimators.grid import gamma_log_prior, grid_posterior
    from bayesrate.observations import Observations
    from bayesrate.scheduler.optimal import optimal_rates

    n_pages = rows // visits
    out = {}
    t0 = time.perf_counter()
    frames = []
    for path in sorted(log.rglob("*.parquet")):
        frame = pd.read_parquet(path)
        frames.append(
            frame.iloc[np.flatnonzero(frame["page"].str.slice(-8).astype(int).to_numpy() < n_pages)]
        )
    frame = pd.concat(frames, ignore_index=True)
    del frames
    out["read_seconds"] = time.perf_counter() - t0
    t = time.perf_counter()
    obs = Observations.from_frame(frame)
    n_rows = len(frame)
    del frame
    stats = obs.interval_stats
    out["statistics_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    post = grid_posterior(stats, gamma_log_prior(0.5, 10.0), n_grid=201)
    mean = post.mean()
    post.quantiles((0.05, 0.95))
    out["posteriors_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    optimal_rates(
        np.ones(len(mean)), mean, 0.5 * len(mean) / 24, hosts=obs.domain_codes, host_caps=50 / 24
    )
    out["rates_seconds"] = time.perf_counter() - t
    out["rows"] = n_rows
    out["pages"] = int(stats.n_pages)
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    for stage in ("read", "statistics", "posteriors", "rates"):
        out[f"{stage}_rows_per_second"] = n_rows / out[f"{stage}_seconds"]
    return out


def write_by_host(log: Path, out: Path) -> dict:
    """The same log partitioned by host (Hive ``domain=H/`` directories), one row group per
    file (pyarrow's writer flushes several on large logs; every row group is an input
    partition of the reader, so each file is rewritten whole)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    source = ds.dataset(log, format="parquet", partitioning="hive")
    ds.write_dataset(
        source.scanner(columns=["page", "domain", "time", "changed"]),
        out,
        format="parquet",
        partitioning=["domain"],
        partitioning_flavor="hive",
        existing_data_behavior="error",
    )
    files = sorted(out.rglob("*.parquet"))
    for f in files:
        table = pq.read_table(f, partitioning=None)
        tmp = f.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=max(1, table.num_rows))
        tmp.replace(f)
    return {"write_seconds": time.perf_counter() - t0, "files": len(files)}


#: variant -> (input log directory, layout, output suffix)
VARIANTS = {
    "url": ("log", "url", ""),
    "host": ("log-by-host", "host", "-host"),
    "host-url": ("log-by-host", "url", "-host-url"),
}


def scale_out(
    root: Path,
    shape: dict,
    workers: int,
    memory_limit: str,
    variant: str = "url",
    input_rows: int | None = None,
) -> dict:
    from bayesrate.priors import GammaPrior, PriorSet
    from bayesrate.scaleout.aggregate import aggregate
    from bayesrate.scaleout.cluster import connect
    from bayesrate.scaleout.posteriors import posteriors
    from bayesrate.scaleout.rates import rates

    PriorSet(GammaPrior(0.5, 10.0 / 24)).save(root / "priors")
    out = {}
    rows = shape["rows"]
    directory, layout, tag = VARIANTS[variant]
    log = root / directory
    with connect(workers=workers, memory_limit=memory_limit) as client:
        stages = (
            (
                "aggregate",
                lambda: aggregate(log, root / f"stats{tag}", layout=layout, input_rows=input_rows),
            ),
            (
                "posteriors",
                lambda: posteriors(root / f"stats{tag}", root / f"post{tag}", root / "priors"),
            ),
            (
                "rates",
                lambda: rates(
                    root / f"post{tag}",
                    root / f"rates{tag}",
                    budget_per_day=0.5 * shape["pages"],
                    host_cap_per_day=50.0,
                ),
            ),
        )
        for name, run in stages:
            t = time.perf_counter()
            with WorkerMemory(client) as mem:
                manifest = run()
            seconds = time.perf_counter() - t
            out[name] = {
                "seconds": seconds,
                "rows_per_second": rows / seconds,
                "peak_worker_rss_gib": mem.gib(),
                "manifest": {
                    k: v for k, v in manifest.items() if k not in ("tables", "arguments", "priors")
                },
            }
            print(
                f"[dask {variant}] {name}: {seconds:.0f} s, {rows / seconds:,.0f} log rows/s, "
                f"peak worker RSS {mem.gib()} GiB, {manifest.get('partitions', '?')} parts"
                + (
                    f", {manifest['input_partitions']} input partitions"
                    if "input_partitions" in manifest
                    else ""
                )
            )
    return out


def ratios(dask: dict, memory: dict, rows: int, total: float) -> dict[str, float]:
    """Throughput of each Dask stage over the in-memory path's on its (smaller) log.

    ``aggregate`` is compared with the in-memory read + statistics, ``whole`` with the sum
    of the in-memory stages.
    """
    mem_rows = memory["rows"]
    mem = {
        "aggregate": memory["read_seconds"] + memory["statistics_seconds"],
        "posteriors": memory["posteriors_seconds"],
        "rates": memory["rates_seconds"],
    }
    out = {k: dask[k]["rows_per_second"] / (mem_rows / mem[k]) for k in mem}
    out["whole"] = (rows / total) / (mem_rows / sum(mem.values()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--visits", type=int, default=100)
    parser.add_argument("--memory-rows", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="6GiB")
    parser.add_argument("--dir", default="/tmp/bench-dask")
    parser.add_argument("--keep", action="store_true", help="keep the log and outputs")
    parser.add_argument("--in-memory-only", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write results here")
    parser.add_argument(
        "--layouts",
        default="url",
        help="comma list: url (time log), host (by-host log), host-url (by-host log, URL layout)",
    )
    parser.add_argument("--input-rows", type=int, help="rows per input partition of aggregate")
    args = parser.parse_args()
    layouts = [x for x in args.layouts.split(",") if x]
    unknown = set(layouts) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown layouts {sorted(unknown)}; use {sorted(VARIANTS)}")
    root = Path(args.dir)
    if args.in_memory_only:  # the baseline's own process
        print(json.dumps(in_memory(root / "log", int(args.in_memory_only), args.visits)))
        return
    shutil.rmtree(root, ignore_errors=True)
    shape = write_log(root / "log", args.rows, args.visits)
    print(
        f"[log] {shape['rows']:,} rows, {shape['pages']:,} URLs, {shape['files']} files, "
        f"{shape['bytes'] / 2**30:.2f} GiB on disk, written in {shape['write_seconds']:.0f} s"
    )
    results = {"log": shape}
    base = subprocess.run(
        [
            sys.executable,
            __file__,
            "--dir",
            str(root),
            "--visits",
            str(args.visits),
            "--in-memory-only",
            str(args.memory_rows),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    results["in_memory"] = json.loads(base.stdout.strip().splitlines()[-1])
    m = results["in_memory"]
    print(
        f"[memory] {m['rows']:,} rows: read {m['read_rows_per_second']:,.0f} rows/s, "
        f"statistics {m['statistics_rows_per_second']:,.0f}, posteriors "
        f"{m['posteriors_rows_per_second']:,.0f}, rates {m['rates_rows_per_second']:,.0f}; "
        f"peak RSS {m['peak_rss_gib']:.2f} GiB"
    )
    if any(VARIANTS[x][0] == "log-by-host" for x in layouts):
        results["log_by_host"] = write_by_host(root / "log", root / "log-by-host")
        print(
            f"[log] rewritten by host: {results['log_by_host']['files']} files in "
            f"{results['log_by_host']['write_seconds']:.0f} s"
        )
    for layout in layouts:
        key = "dask" if layout == "url" else f"dask_{layout}"
        results[key] = scale_out(
            root, shape, args.workers, args.memory_limit, layout, args.input_rows
        )
        total = sum(v["seconds"] for v in results[key].values())
        print(f"[dask {layout}] whole path: {total:.0f} s, {shape['rows'] / total:,.0f} log rows/s")
        results[f"ratio_to_in_memory_{layout}"] = ratios(results[key], m, shape["rows"], total)
        print(
            f"[ratio {layout}] Dask rows/s / in-memory rows/s: "
            + ", ".join(f"{k} {v:.2f}" for k, v in results[f"ratio_to_in_memory_{layout}"].items())
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
