"""Throughput of bayesrate.simulate: vectorized fast path vs the exact sample-then-detect path.

Baseline: ``simulate_pages(..., exact=True)`` - every change time is sampled with
``process.sample`` and detected page by page (what a straightforward simulator does). The
exact path is timed on a subset of the pages and reported per interval, so the ratio is
throughput vs throughput measured in the same run.

Usage: .venv/bin/python benchmarks/bench_simulate.py [--pages 100000] [--baseline-pages 5000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesrate import simulate as sim


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--baseline-pages", type=int, default=5_000)
    args = parser.parse_args()

    rng = sim.rng_from("bench-simulate")
    n = args.pages
    rates = np.exp(rng.normal(-2.0, 1.5, n))  # changes per hour
    grid = sim.regular_grid(sim.CASE_STUDY_START, sim.CASE_STUDY_START + 99.0, 1.0)  # 100 visits
    per_page = [
        sim.CASE_STUDY_START + np.sort(rng.choice(2000, int(k), replace=False)) * 1.0
        for k in rng.integers(80, 121, n)
    ]
    m = 1.0 + 0.8 * np.sin(2 * np.pi * np.arange(168) / 24)
    modulated = [sim.HourOfWeekModulated(r, m) for r in rates]
    b = args.baseline_pages

    cases = [
        ("homogeneous, shared hourly grid", rates, grid),
        ("homogeneous, irregular visits per page", rates, per_page),
        ("hour-of-week modulated (UTC), shared grid", modulated, grid),
    ]
    print(f"pages: {n:,} (baseline on the first {b:,})")
    for name, procs, visits in cases:
        data, fast_s = _timed(
            lambda procs=procs, visits=visits: sim.simulate_pages(procs, visits, rng="fast")
        )
        n_int = data.observations.n_intervals
        sub_visits = visits if isinstance(visits, np.ndarray) else visits[:b]
        base, exact_s = _timed(
            lambda procs=procs, sub_visits=sub_visits: sim.simulate_pages(
                procs[:b], sub_visits, rng="exact", exact=True
            )
        )
        fast_rate = n_int / fast_s
        exact_rate = base.observations.n_intervals / exact_s
        print(
            f"{name}: fast {fast_s:.2f} s for {n_int:,} intervals "
            f"({fast_rate / 1e6:.2f} M intervals/s); exact baseline "
            f"{exact_rate / 1e6:.3f} M intervals/s; ratio {fast_rate / exact_rate:.1f}x"
        )

    data, s = _timed(lambda: sim.pages_like())
    print(f"pages_like() (1,000 pages, {data.observations.n_visits:,} visits): {s:.3f} s")


if __name__ == "__main__":
    main()
