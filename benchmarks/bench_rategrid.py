"""Grid posterior vs Gamma-ADF state: observe throughput, due latency, plan time, bytes/URL.

Same URLs, same batches, same run: one batch of baselines (first fetches), then one batch of
fetch results for every URL (40% changed), for a Gamma-ADF state (the baseline) and a
grid state (48 nodes, float32 log-weights; with drift σ_rw = 0.1/√day, so every update also
diffuses). Prints fetches/s of each and the ratio grid / Gamma, ``due(now, k)`` latency
(priority from the posterior mean with drift growth), the plan (Azar from the posterior
mean vs the expected freshness gain over the grid posterior) and bytes per URL including
URL strings. Each state's one-time start-up (the grid's compiled kernel is imported and
loaded from numba's cache on the first update of a process) is timed apart and printed.

Usage: ``.venv/bin/python benchmarks/bench_rategrid.py [--n 1000000]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_scheduler import T0, synthetic_fetches, timed

from bayesrate.scheduler import SchedulerConfig, SchedulerState, decide


def warm_up(config: SchedulerConfig) -> float:
    """Seconds of the one-time start-up (the grid's compiled kernel: import, cache load)."""
    st = SchedulerState(config=config, capacity=2)
    t = time.perf_counter()
    st.observe(["https://warm.example/a"], [T0], [0], ["warm.example"])
    st.observe(["https://warm.example/a"], [T0 + 5.0], [1])
    return time.perf_counter() - t


def run(config: SchedulerConfig, urls, hosts, weights, t1, changed, now, k) -> dict:
    n = len(urls)
    start_up = warm_up(config)
    st = SchedulerState(config=config, capacity=n)
    st.observe(urls, np.full(n, T0), np.zeros(n, np.int8), hosts, weights)
    t_obs, _ = timed(st.observe, urls, t1, changed)
    t_due, _ = timed(decide.due, st, now, k)
    t_plan, _ = timed(decide.plan, st, 0.2 / 24 * n, now=now)
    return {
        "observe_per_s": n / t_obs,
        "due_s": t_due,
        "plan_s": t_plan,
        "bytes_per_url": sum(st.nbytes().values()) / n,
        "start_up_s": start_up,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=10_000)
    args = ap.parse_args()
    n, k = args.n, args.k
    urls, hosts, weights, t1, changed, now = synthetic_fetches(n, 20261201)
    print(f"# bench_rategrid: {n:,} URLs, due k={k:,}")
    configs = {
        "gamma-adf (baseline)": SchedulerConfig(
            posterior="gamma", plan_quantile=None, plan_expected=False
        ),
        "grid, 48 nodes, drift 0.1": SchedulerConfig(posterior="grid", drift=0.1),
    }
    out = {
        name: run(cfg, urls, hosts, weights, t1, changed, now, k) for name, cfg in configs.items()
    }
    for name, r in out.items():
        print(
            f"{name:28s} observe {r['observe_per_s']:12,.0f} fetches/s  due {r['due_s']:.3f} s  "
            f"plan {r['plan_s']:.2f} s  {r['bytes_per_url']:.0f} bytes/URL  "
            f"(one-time start-up {r['start_up_s']:.2f} s, not in the throughput)"
        )
    base, grid = out.values()
    print(
        f"ratio grid / gamma: observe {grid['observe_per_s'] / base['observe_per_s']:.3f}x, "
        f"due {grid['due_s'] / base['due_s']:.2f}x, plan {grid['plan_s'] / base['plan_s']:.2f}x, "
        f"bytes {grid['bytes_per_url'] / base['bytes_per_url']:.2f}x"
    )


if __name__ == "__main__":
    main()
