"""Scheduler benchmark: 1 M URLs, columnar numpy state vs a dict + heapq implementation.

Measures, in one run, for ours and for a straightforward pure-Python implementation of the
same rules (Gamma ADF update per URL in a dict of records; priority w·λ·elapsed and
``heapq.nlargest``; Azar's closed form with a sorted list and a loop):

- observe throughput (fetch results per second, one batch of all URLs),
- ``due(now, 10_000)`` latency,
- optimal-rate solve time (Azar closed form; ours also with bounds + per-host caps),
- bytes of state per URL (ours: numpy columns + URL strings + index; theirs: tracemalloc),
- SQLite ``Store.observe`` throughput (200,000 rows per batch),
- import time of ``bayesrate.scheduler`` (fresh interpreter, minus bare interpreter start).

Usage: ``.venv/bin/python benchmarks/bench_scheduler.py [--n 1000000]``
"""

from __future__ import annotations

import argparse
import heapq
import math
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from bayesrate.scheduler import SchedulerState, azar_rates, decide, optimal_rates
from bayesrate.scheduler.store import Store

T0 = 482_256.0


# ---------------------------------------------------------------------- the dict + heapq way
def ref_adf(alpha: float, beta: float, tau: float, changed: int) -> tuple[float, float]:
    if not changed:
        return alpha, beta + tau
    log_r = -math.log1p(tau / beta)
    z = -math.expm1(alpha * log_r)
    z1 = -math.expm1((alpha + 1) * log_r)
    z2 = -math.expm1((alpha + 2) * log_r)
    m1 = alpha / beta * z1 / z
    m2 = alpha * (alpha + 1) / beta**2 * z2 / z
    var = max(m2 - m1 * m1, 1e-300)
    return m1 * m1 / var, m1 / var


class RefScheduler:
    """One dict record per URL: [alpha, beta, last_fetch, weight, host]."""

    def __init__(self) -> None:
        self.urls: dict[str, list] = {}

    def add(self, urls, hosts, weights, t) -> None:
        for u, h, w in zip(urls, hosts, weights, strict=True):
            self.urls[u] = [1.0, 24.0, t, w, h]

    def observe(self, urls, times, changed) -> None:
        for u, t, c in zip(urls, times, changed, strict=True):
            rec = self.urls[u]
            rec[0], rec[1] = ref_adf(rec[0], rec[1], t - rec[2], c)
            rec[2] = t

    def due(self, now: float, k: int) -> list[str]:
        return heapq.nlargest(
            k, self.urls, key=lambda u: (r := self.urls[u])[3] * r[0] / r[1] * (now - r[2])
        )


def ref_azar(w: list[float], lam: list[float], budget: float) -> list[float]:
    order = sorted(range(len(w)), key=lambda i: -w[i] / lam[i])
    sa = sl = 0.0
    k = 0
    root = 0.0
    for i in order:
        s2, l2 = sa + math.sqrt(w[i] * lam[i]), sl + lam[i]
        r = s2 / (budget + l2)
        if math.sqrt(w[i] / lam[i]) <= r:
            break
        sa, sl, root, k = s2, l2, r, k + 1
    p = [0.0] * len(w)
    for i in order[:k]:
        p[i] = max(0.0, math.sqrt(w[i] * lam[i]) / root - lam[i])
    return p


def timed(fn, *args, repeat: int = 1, **kwargs):
    best = math.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t)
    return best, out


def synthetic_fetches(n: int, seed: int) -> tuple:
    """``n`` URLs on 5,000 hosts with Pareto weights, one fetch each 1–48 h after ``T0``
    (40% changed), and the ``now`` of the decisions: ``(urls, hosts, weights, t1, changed,
    now)``."""
    rng = np.random.default_rng(seed)
    urls = [f"https://host{i % 5000}.example/page/{i}" for i in range(n)]
    hosts = [f"host{i % 5000}.example" for i in range(n)]
    weights = rng.pareto(1.5, n) + 1.0
    t1 = T0 + rng.uniform(1, 48, n)
    changed = (rng.random(n) < 0.4).astype(np.int8)
    return urls, hosts, weights, t1, changed, T0 + 72.0


def import_time() -> float:
    """Best of 5: wall time of ``import bayesrate.scheduler`` inside a fresh interpreter."""
    code = (
        "import time; t = time.perf_counter(); import bayesrate.scheduler; "
        "print(time.perf_counter() - t)"
    )
    return min(
        float(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(5)
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=10_000)
    args = ap.parse_args()
    n, k = args.n, args.k
    urls, hosts, weights, t1, changed, now = synthetic_fetches(n, 20261130)
    print(f"# bench_scheduler: {n:,} URLs, due k={k:,}")

    # ---- ours
    st = SchedulerState(capacity=n)
    t_add, _ = timed(st.observe, urls, np.full(n, T0), np.zeros(n, np.int8), hosts, weights)
    t_obs, _ = timed(st.observe, urls, t1, changed)
    t_due, rows = timed(decide.due, st, now, k, repeat=3)
    lam = st.posterior_mean()
    budget = 0.2 / 24 * n
    t_azar, p = timed(azar_rates, st.weight, lam, budget, repeat=3)
    t_caps, _ = timed(
        optimal_rates,
        st.weight,
        lam,
        budget,
        lower=1 / (60 * 24),
        upper=2.0,
        hosts=st.host,
        host_caps=budget / 5000 * 3,
    )
    nb = st.nbytes()
    bytes_ours = sum(nb.values()) / n

    # ---- dict + heapq
    tracemalloc.start()
    ref = RefScheduler()
    ref_urls = list(urls)  # same strings; their memory counted in both
    t_radd, _ = timed(ref.add, ref_urls, hosts, weights.tolist(), T0)
    mem_ref = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    t_robs, _ = timed(ref.observe, ref_urls, t1.tolist(), changed.tolist())
    t_rdue, ref_rows = timed(ref.due, now, k)
    lam_l, w_l = lam.tolist(), weights.tolist()
    t_razar, p_ref = timed(ref_azar, w_l, lam_l, budget)
    # same answers
    same_due = len(set(ref_rows) & {st.urls[i] for i in rows}) / k
    max_dp = float(np.max(np.abs(np.asarray(p_ref) - p)))
    string_bytes = sum(sys.getsizeof(u) for u in urls)
    bytes_ref = (mem_ref + string_bytes) / n  # tracemalloc missed the pre-existing strings

    # ---- SQLite store
    m = min(n, 200_000)
    with tempfile.TemporaryDirectory() as d:
        store = Store.create(Path(d) / "bench.db")
        t_sadd, _ = timed(
            store.observe, urls[:m], np.full(m, T0), np.zeros(m, np.int8), hosts[:m], weights[:m]
        )
        t_sobs, _ = timed(store.observe, urls[:m], t1[:m], changed[:m])
        size = (Path(d) / "bench.db").stat().st_size + sum(
            f.stat().st_size for f in Path(d).glob("bench.db-*")
        )
        store.close()
        t_open, reopened = timed(lambda: Store.open(Path(d) / "bench.db").state)
        assert reopened.n == m
    t_imp = import_time()

    rows_out = [
        ("observe (fetches/s)", n / t_obs, n / t_robs, "higher"),
        ("add new URLs (URLs/s)", n / t_add, n / t_radd, "higher"),
        (f"due(now, {k}) latency (s)", t_due, t_rdue, "lower"),
        ("Azar solve (s)", t_azar, t_razar, "lower"),
        ("bytes of state per URL", bytes_ours, bytes_ref, "lower"),
    ]
    print(f"{'metric':32s} {'bayesrate':>14s} {'dict+heapq':>14s} {'ratio':>8s}")
    for name, ours, theirs, better in rows_out:
        ratio = theirs / ours if better == "lower" else ours / theirs
        print(f"{name:32s} {ours:14.4g} {theirs:14.4g} {ratio:7.1f}x")
    print(f"optimal rates with floors + per-host caps (5,000 hosts): {t_caps:.3f} s")
    print(
        "state bytes per URL, ours by part: "
        + ", ".join(f"{k2} {v / n:.1f}" for k2, v in nb.items())
    )
    print(
        f"SQLite store: add {m / t_sadd:,.0f} URLs/s, observe {m / t_sobs:,.0f} fetches/s "
        f"(batch of {m:,}, WAL, synchronous=FULL); file {size / m:.0f} bytes/URL; "
        f"open (load {m:,} URLs) {t_open:.2f} s"
    )
    print(
        f"import bayesrate.scheduler: {t_imp * 1000:.0f} ms (in a fresh interpreter; "
        "includes numpy)"
    )
    print(f"agreement: due top-{k} overlap {same_due:.4f}; Azar max |dp| {max_dp:.2e}")


if __name__ == "__main__":
    main()
