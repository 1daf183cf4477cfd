"""Throughput of the history tools on ``tldr-pages``, each against a per-page Python loop.

- ``crawl``: a daily and a weekly crawl of the whole history (random phase per page) with
  the exact count per interval; baseline: per page, ``np.arange`` of its visits and
  ``np.searchsorted`` of its change times, the same outputs concatenated (timed on a subset
  of pages, extrapolated).
- ``staleness_integrals``: exact freshness and harmonic staleness of a fetch log; baseline:
  per page, a Python walk over its merged fetch and change times.
- replay loop: fetch decisions (live pages scored per tick and policy) per second for the
  seven policies at one budget (no baseline: the figure the issue asks for).

Run: ``.venv/bin/python benchmarks/bench_histories.py [--replay-days 30]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesrate import datasets
from bayesrate.constants import HOURS_PER_DAY
from bayesrate.history import FixedInterval, crawl
from bayesrate.priors import PriorSet
from bayesrate.scheduler import replay


def loop_crawl(h, every, phases, pages):
    """Per-page reference with the same output: visit times and exact changes per visit."""
    times_out, counts_out = [], []
    for p in pages:
        times = h.times[h.offsets[p] : h.offsets[p + 1]]
        for j in range(h.life_offsets[p], h.life_offsets[p + 1]):
            a, b = h.life_start[j], h.life_end[j]
            k0 = np.ceil((a - phases[p]) / every)
            visits = phases[p] + np.arange(k0, np.ceil((b - phases[p]) / every)) * every
            if len(visits) == 0:
                continue
            cum = np.searchsorted(times, visits, side="left")
            times_out.append(visits)
            counts_out.append(np.concatenate([[0], np.diff(cum)]))
    return np.concatenate(times_out), np.concatenate(counts_out)


def loop_staleness(h, fetch_page, fetch_time, lo, hi, copy):
    """Per-page Python walk over merged change and fetch times: stale hours while alive."""
    stale_hours = np.zeros(h.n_pages)
    order = np.lexsort((fetch_time, fetch_page))
    fp, ft = fetch_page[order], fetch_time[order]
    f_off = np.searchsorted(fp, np.arange(h.n_pages + 1))
    for p in range(h.n_pages):
        lives = list(
            zip(
                h.life_start[h.life_offsets[p] : h.life_offsets[p + 1]].tolist(),
                h.life_end[h.life_offsets[p] : h.life_offsets[p + 1]].tolist(),
                strict=True,
            )
        )
        changes = h.times[h.offsets[p] : h.offsets[p + 1]].tolist()
        if not np.isfinite(copy[p]) and lives[0][0] > h.start:
            changes.append(lives[0][0])  # never fetched: stale from its creation
        fetches = ([copy[p]] if np.isfinite(copy[p]) else []) + ft[f_off[p] : f_off[p + 1]].tolist()
        events = sorted([(t, 0) for t in changes] + [(t, 1) for t in fetches])
        spans, since = [], None
        for t, is_fetch in events:
            if is_fetch and since is not None:
                spans.append((since, t))
                since = None
            elif not is_fetch and since is None:
                since = t
        if since is not None:
            spans.append((since, np.inf))
        for a, b in spans:
            for la, lb in lives:
                stale_hours[p] += max(0.0, min(b, lb, hi) - max(a, la, lo))
    return stale_hours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replay-days", type=float, default=30.0)
    parser.add_argument("--sample", type=int, default=500, help="pages timed in the loop baseline")
    args = parser.parse_args()
    h = datasets.load_history("tldr-pages")
    print(f"tldr-pages: {h.n_pages:,} pages, {h.n_changes:,} changes")

    rng = np.random.default_rng(0)
    sample = rng.choice(h.n_pages, args.sample, replace=False)
    for every in (24.0, 168.0):
        fast, slow = np.inf, np.inf
        phases = rng.uniform(0, every, h.n_pages)
        for _ in range(2):  # best of two: the first pays for page faults of fresh memory
            t = time.perf_counter()
            c = crawl(h, FixedInterval(every), "bench")
            fast = min(fast, time.perf_counter() - t)
            t = time.perf_counter()
            loop_crawl(h, every, phases, sample)
            slow = min(slow, (time.perf_counter() - t) * h.n_pages / len(sample))
        n_visits = c.observations.n_visits
        print(
            f"crawl every {every:g} h (exact counts): {fast:.2f} s for {n_visits:,} visits "
            f"({n_visits / fast / 1e6:.1f} M visits/s); per-page loop {slow:.2f} s "
            f"(extrapolated from {len(sample)} pages); ratio {slow / fast:.2f}x (best of 2)"
        )

    start = h.end - 120 * HOURS_PER_DAY
    warm = replay.warmup_crawl(h, start, 24.0, "bench")
    setup = replay.prepare(h, warm, start=start, days=args.replay_days)
    policies = [
        replay.IntervalReplay(name, setup, 0.1, np.random.default_rng(1))
        for name in replay.BASELINES
    ]
    policies.append(
        replay.PlannedReplay(
            "bayesrate", setup, PriorSet.default(), 1 / 7, np.random.default_rng(2)
        )
    )
    policies.append(
        replay.PlannedReplay(
            "oracle-hindsight", setup, PriorSet.default(), 1 / 7, np.random.default_rng(3),
            rates=replay.hindsight_rates(setup, 1 / 7),
        )
    )  # fmt: skip
    fetches, timing = replay.run_policies(setup, policies, 1 / 7)
    print(
        f"replay loop: {setup.n:,} pages x {args.replay_days:g} days x {len(policies)} policies "
        f"at 1/7 fetch/page/day: {timing['loop_seconds']:.2f} s, "
        f"{timing['decisions'] / timing['loop_seconds']:,.0f} fetch decisions/s, "
        f"{sum(len(p) for p, _ in fetches.values()) / timing['loop_seconds']:,.0f} fetches/s"
    )
    pages, times = fetches["bayesrate"]
    t = time.perf_counter()
    fresh, _, live = replay.staleness_integrals(
        setup.history, pages, times, (setup.start, setup.end), setup.copy_time
    )
    fast = time.perf_counter() - t
    t = time.perf_counter()
    stale_loop = loop_staleness(
        setup.history, pages, times, setup.start, setup.end, setup.copy_time
    )
    slow = time.perf_counter() - t
    agree = np.abs((live - fresh) - stale_loop).max()
    print(
        f"exact staleness of {len(pages):,} fetches over {setup.n:,} pages: {fast * 1e3:.1f} ms; "
        f"per-page Python walk {slow * 1e3:.1f} ms; ratio {slow / fast:.1f}x "
        f"(max |difference| {agree:.2e} h)"
    )


if __name__ == "__main__":
    main()
