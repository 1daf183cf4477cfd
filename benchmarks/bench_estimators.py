"""Throughput of the batch and online estimators vs a straightforward per-page Python loop.

Run:  .venv/bin/python benchmarks/bench_estimators.py [--pages 1000000]

Three workloads, all with ``--pages`` pages:

1. regular grids: ~720 intervals per page in 3-5 distinct lengths (so 3-5 groups per page);
2. irregular visits: ``--irregular-k`` intervals per page, every length distinct
   (one group per interval);
3. online updates: one step for all pages at once.

Baselines (timed in the same run): a per-page Python loop — plain arithmetic per page
for the closed forms and the online updates, ``scipy.optimize.brentq`` on the score per
page for the MLE and MM. Loops are timed on a subsample (``--loop-pages``) and their
per-page cost extrapolated; the table says so. For irregular visits the MLE is also
compared with the *floor* the issue sets: evaluating the score's derivative terms for
every interval 10 times (cache-blocked like the solver, nothing else), and with the
memory-bandwidth reference of one pass over the per-page arrays for the closed forms.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
from scipy.optimize import brentq

from bayesrate.estimators import batch, online
from bayesrate.estimators import gamma as gam
from bayesrate.estimators import mle as solver
from bayesrate.sufficient import IntervalStats


def timed(fn, repeat: int = 1):
    best = math.inf
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def make_stats(group_page, group_tau, group_n, group_changed, n_pages) -> IntervalStats:
    return IntervalStats.from_groups(group_page, group_tau, group_n, group_changed, n_pages)


def regular_data(rng, n_pages: int):
    """3-5 distinct interval lengths per page out of {0.5, 1, 2, 6, 24} h, ~720 intervals."""
    lengths = np.array([0.5, 1.0, 2.0, 6.0, 24.0])
    k = rng.integers(3, 6, n_pages)
    group_page = np.repeat(np.arange(n_pages), k)
    # pick k distinct lengths per page: ranks of random keys
    keys = rng.random((n_pages, 5))
    chosen = np.argsort(keys, axis=1)
    pos = np.arange(len(group_page)) - np.repeat(np.cumsum(k) - k, k)
    tau_idx = chosen[group_page, pos]
    group_tau = lengths[tau_idx]
    order = np.lexsort((group_tau, group_page))
    group_tau = group_tau[order]
    group_n = rng.integers(50, 300, len(group_page)).astype(np.float64)
    lam = np.exp(rng.uniform(np.log(1e-3), np.log(3.0), n_pages))
    prob = -np.expm1(-lam[group_page] * group_tau)
    group_changed = rng.binomial(group_n.astype(np.int64), prob).astype(np.float64)
    return group_page, group_tau, group_n, group_changed


def irregular_data(rng, n_pages: int, k: int):
    group_page = np.repeat(np.arange(n_pages), k)
    lam = np.exp(rng.uniform(np.log(1e-2), np.log(2.0), n_pages))
    group_tau = rng.exponential(1.0, n_pages * k) + 0.01
    group_changed = (rng.random(n_pages * k) < -np.expm1(-lam[group_page] * group_tau)).astype(
        np.float64
    )
    return group_page, group_tau, np.ones(n_pages * k), group_changed


# ------------------------------------------------------------------ per-page loops


def loop_closed(stats, pages, kind):
    n, c, t = stats.n_intervals, stats.n_changes, stats.exposure
    out = []
    for i in pages:
        ni, ci, ti = int(n[i]), int(c[i]), float(t[i])
        if ni == 0:
            out.append(0.0)
        elif kind == "naive":
            out.append(ci / ti)
        elif kind == "moment":
            tb = ti / ni
            out.append(-math.log(1 - ci / ni) / tb if ci < ni else math.log(2 * ni + 1) / tb)
        else:
            out.append(-math.log((ni - ci + 0.5) / (ni + 0.5)) / (ti / ni))
    return out


def loop_root(groups, offsets, pages, kind):
    """scipy.optimize.brentq per page on the score (MLE) or the MM equation."""
    _, tau, n, c = groups
    out = []
    for i in pages:
        lo, hi = offsets[i], offsets[i + 1]
        t, ng, cg = tau[lo:hi], n[lo:hi], c[lo:hi]
        ntot, ctot = ng.sum(), cg.sum()
        cap = math.log(2 * ntot + 1) / t.min()
        if ctot == 0:
            out.append(0.0)
            continue
        if ctot == ntot:
            out.append(cap)
            continue
        if kind == "mle":
            u = ((ng - cg) * t).sum()

            def f(lam, t=t, cg=cg, u=u):
                with np.errstate(over="ignore"):
                    return float(np.sum(cg * t / np.expm1(lam * t)) - u)
        else:

            def f(lam, t=t, ng=ng, target=ntot - ctot):
                return float(np.sum(ng * np.exp(-lam * t)) - target)

        if f(cap) > 0:
            out.append(cap)
        else:
            out.append(brentq(f, 1e-12, cap, xtol=1e-14, rtol=1e-10))
    return out


def loop_online(pages, flags, p, state, kind):
    """One update per page in a Python loop (state: dict of lists)."""
    for i in pages:
        f = flags[i]
        k = state["k"][i]
        if kind == "lln":
            state["ihat"][i] += f
            state["k"][i] = k + 1
            state["x"][i] = p * state["ihat"][i] / (k + 1 + 1 - state["ihat"][i])
        elif kind == "sa":
            y = state["y"][i]
            state["y"][i] = y + (k + 1) ** -0.75 * (f * (y + p) - y)
            state["k"][i] = k + 1
        elif kind == "sam":
            z, zp = state["z"][i], state["zp"][i]
            eta = (k + 1) ** -0.75
            zeta = ((k + 1) ** -0.6 - eta) / k**-0.6 if k > 0 else 0.0
            state["zp"][i] = z
            state["z"][i] = z + eta * (f * (z + p) - z) + zeta * (z - zp)
            state["k"][i] = k + 1
        elif kind == "gamma-adf":
            a, b, t = state["a"][i], state["b"][i], 1.0
            if f:
                lr = -math.log1p(t / b)
                z0 = -math.expm1(a * lr)
                z1 = -math.expm1((a + 1) * lr)
                z2 = -math.expm1((a + 2) * lr)
                m1 = a / b * z1 / z0
                var = a * (a + 1) / b**2 * z2 / z0 - m1 * m1
                state["a"][i], state["b"][i] = m1 * m1 / var, m1 / var
            else:
                state["b"][i] = b + t
        elif kind == "gamma-exposure":
            state["a"][i] += f
            state["b"][i] += 1.0


# ------------------------------------------------------------------ floor


def floor_derivative(groups, rate, evaluations=10, block=solver.BLOCK_GROUPS):
    """Evaluate the score ``Σ c τ/(e^{λτ} − 1)`` for every interval, cache-blocked."""
    page, tau, _, c = groups
    n_pages = len(rate)
    offsets = np.searchsorted(page, np.arange(n_pages + 1))
    for p0, p1 in solver._blocks(offsets, block):
        lo, hi = offsets[p0], offsets[p1]
        t, w = tau[lo:hi], c[lo:hi]
        seg = offsets[p0:p1] - lo
        lens = np.diff(offsets[p0 : p1 + 1])
        lam = np.repeat(rate[p0:p1], lens)
        for _ in range(evaluations):
            q = t / np.expm1(lam * t)
            np.add.reduceat(w * q, seg)


def row(label, n_pages, seconds, base_per_page=None, note=""):
    rate = n_pages / seconds
    if base_per_page is None:
        print(f"| {label} | {rate:,.0f} | — | — | {note} |")
        return
    base_rate = 1.0 / base_per_page
    print(f"| {label} | {rate:,.0f} | {base_rate:,.0f} | {rate / base_rate:,.1f}× | {note} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--irregular-k", type=int, default=90)
    ap.add_argument("--loop-pages", type=int, default=20_000)
    ap.add_argument("--loop-root-pages", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(20261130)
    P = args.pages
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}, cpus={os.cpu_count()}"
    )
    print(f"pages per workload: {P:,}; loops timed on subsamples, per-page cost extrapolated\n")
    print("| workload / estimator | vectorized pages/s | per-page loop pages/s | speed-up | note |")
    print("| --- | --- | --- | --- | --- |")

    sub = rng.choice(P, min(args.loop_pages, P), replace=False)
    bench_regular(args, rng, P, sub)
    bench_irregular(args, rng, P, sub)
    bench_online(rng, P, sub)


def bench_regular(args, rng, P, sub) -> None:
    groups = regular_data(rng, P)
    stats = make_stats(*groups, P)
    sub_root = sub[: args.loop_root_pages]
    # memory-bandwidth reference: one pass reading c, n, exposure and writing a result
    bw, _ = timed(lambda: np.divide(stats.n_changes, stats.exposure), args.repeat)
    row("regular: one numpy pass over c, T (bandwidth reference)", P, bw)
    for kind in ("naive", "moment", "cho"):
        secs, _ = timed(lambda kind=kind: batch.BATCH[kind](stats), args.repeat)
        loop_s, _ = timed(lambda kind=kind: loop_closed(stats, sub, kind))
        row(f"regular: {kind}", P, secs, loop_s / len(sub), f"{secs / bw:.1f}× the reference pass")
    n_groups = len(groups[0])
    for kind, fn in (("mle", solver.solve_mle), ("mm", solver.solve_mm)):
        secs, res = timed(lambda fn=fn: fn(stats), args.repeat)
        loop_s, ref = timed(
            lambda kind=kind: loop_root(groups, stats.group_offsets, sub_root, kind)
        )
        err = np.max(np.abs(res.rate[sub_root] - ref) / np.maximum(ref, 1e-300))
        row(
            f"regular: {kind} ({n_groups / P:.1f} groups/page)",
            P,
            secs,
            loop_s / len(sub_root),
            f"{res.iterations} Newton its; max rel. diff vs brentq {err:.1e}",
        )
    bench_interval("regular", stats, P, args.repeat)


def bench_interval(label, stats, P, repeat) -> None:
    secs, _ = timed(lambda: batch.mle(stats, interval="profile"), repeat)
    row(f"{label}: mle + profile-likelihood interval", P, secs, None, "point estimate included")


def bench_irregular(args, rng, P, sub) -> None:
    K = args.irregular_k
    groups = irregular_data(rng, P, K)
    stats = make_stats(*groups, P)
    offsets = np.arange(0, P * K + 1, K)
    secs, res = timed(lambda: solver.solve_mle(stats), args.repeat)
    floor_s, _ = timed(lambda: floor_derivative(groups, np.maximum(res.rate, 1e-3)), 1)
    sub_root = sub[: max(args.loop_root_pages // 2, 1)]
    loop_s, ref = timed(lambda: loop_root(groups, offsets, sub_root, "mle"))
    err = np.max(np.abs(res.rate[sub_root] - ref) / np.maximum(ref, 1e-300))
    row(
        f"irregular ({K} distinct τ/page): mle",
        P,
        secs,
        loop_s / len(sub_root),
        f"{res.iterations} its; floor (10 derivative evals/interval) {P / floor_s:,.0f} pages/s:"
        f" MLE takes {secs / floor_s:.2f}× the floor; max rel. diff vs brentq {err:.1e}",
    )
    row("irregular: floor alone", P, floor_s)
    bench_interval("irregular", stats, P, 1)
    secs, res = timed(lambda: solver.solve_mm(stats), args.repeat)
    loop_s, ref = timed(lambda: loop_root(groups, offsets, sub_root, "mm"))
    err = np.max(np.abs(res.rate[sub_root] - ref) / np.maximum(ref, 1e-300))
    row(
        "irregular: mm",
        P,
        secs,
        loop_s / len(sub_root),
        f"{res.iterations} its; max rel. diff {err:.1e}",
    )


def bench_online(rng, P, sub) -> None:
    p = 1.0
    flags = (rng.random(P) < 0.4).astype(np.float64)
    tau = np.ones(P)
    steps = 5
    for kind in ("lln", "sa", "sam", "gamma-exposure", "gamma-adf"):
        if kind.startswith("gamma"):
            st = online.GammaState.start(P, 1.0, 24.0, kind=kind.removeprefix("gamma-"))

            def step(st=st):
                st.update(flags, tau)
        else:
            st = online.make_state(kind, P, p=p)

            def step(st=st):
                st.update(flags)
                return st.estimate

        step()  # warm-up (k > 0 for SAM's momentum)
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        secs = (time.perf_counter() - t0) / steps
        m = len(sub)
        state = {
            "k": [1] * P,
            "ihat": [0.0] * P,
            "x": [0.0] * P,
            "y": [0.0] * P,
            "z": [0.0] * P,
            "zp": [0.0] * P,
            "a": [1.0] * P,
            "b": [24.0] * P,
        }
        fl = flags.tolist()
        loop_s, _ = timed(
            lambda kind=kind, state=state, fl=fl: loop_online(sub, fl, p, state, kind)
        )
        row(f"online step: {kind}", P, secs, loop_s / m, "one update of every page")
    _ = gam  # the ADF loop above re-implements gamma.adf_update's formula per page


if __name__ == "__main__":
    main()
