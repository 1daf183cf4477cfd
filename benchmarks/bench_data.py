"""Load ota-contrib and compute both kinds of sufficient statistics; compare with pandas.

Baseline: the straightforward pandas version a user would write on the canonical table —
``groupby(page).diff()`` for interval lengths, then ``groupby([page, tau])`` counts, and for
the hour-of-week exposure of changed intervals a per-interval walk over hour cells.

Run: ``.venv/bin/python benchmarks/bench_data.py``
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    from bayesrate import datasets

    t0 = time.perf_counter()
    obs = datasets._load_cached.__wrapped__("ota-contrib")  # uncached: full load
    load_s = time.perf_counter() - t0

    def ours():
        fresh = obs.replace()  # drop cached statistics
        return fresh.interval_stats, fresh.hour_of_week_stats("UTC")

    stats_s, (istats, how) = best_of(ours)
    print(f"ota-contrib: {obs.n_pages} pages, {obs.n_visits:,} visits, {obs.n_changes:,} changes")
    print(f"load (parquet -> Observations on the nominal grid): {load_s:.3f} s")
    print(
        f"interval + hour-of-week statistics: {stats_s:.3f} s "
        f"({obs.n_visits / stats_s / 1e6:.1f} M visits/s); {istats.n_groups} groups, "
        f"{how.n_patterns} patterns"
    )
    print(f"total load + statistics: {load_s + stats_s:.3f} s")

    frame = pd.DataFrame({"page": obs.page_of_visit, "time": obs.time, "changed": obs.changed})

    def baseline():
        f = frame.copy()
        f["tau"] = f.groupby("page")["time"].diff()
        f = f.dropna(subset=["tau"])
        return f.groupby(["page", "tau"])["changed"].agg(["size", "sum"])

    base_s, base = best_of(baseline, repeat=1)
    assert len(base) == istats.n_groups and int(base["sum"].sum()) == istats.group_changed.sum()
    print(f"pandas groupby baseline, interval statistics only: {base_s:.3f} s")
    print(f"ratio (baseline interval-only / ours both kinds): {base_s / stats_s:.1f}x")

    # hour-of-week exposure of changed intervals, per-interval Python walk (subsample)
    changed = np.flatnonzero(obs.changed)
    sample = changed[:: max(1, len(changed) // 2000)]
    t0 = time.perf_counter()
    for k in sample:
        a, b = obs.time[k - 1], obs.time[k]
        out = np.zeros(168)
        h = np.floor(a)
        while h < b:
            lo, hi = max(a, h), min(b, h + 1)
            out[(int(h) + 72) % 168] += hi - lo
            h += 1
    per_interval = (time.perf_counter() - t0) / len(sample)
    walk_s = per_interval * len(changed)
    print(
        f"python per-interval hour walk for the {len(changed):,} changed intervals "
        f"(timed on {len(sample)}, extrapolated): {walk_s:.2f} s"
    )


if __name__ == "__main__":
    main()
