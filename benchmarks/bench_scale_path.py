"""The single-machine scale path (``bayesrate.models.scale``) at 10 M and 1 M pages (issue 16).

Usage::

    .venv/bin/python benchmarks/bench_scale_path.py [--stats-pages 10000000]
        [--raw-pages 1000000] [--raw-visits 100] [--baseline-pages 20000] [--only stats,raw]

1. **From sufficient statistics** (target: 10 M pages to per-page posteriors in ≤ 10 min,
   peak memory ≤ 8 GiB): synthetic :class:`IntervalStats` of ``--stats-pages`` pages in
   1,000 domains (hourly visits, 10–700 intervals, half the pages with a second, daily
   interval group; rates from a log-normal hierarchy), then stage 1 (NUTS on a stratified
   2,000-page sample, whose visits are rebuilt from the groups) and stages 2–3
   (:func:`grid_domain_and_pages`). Baseline in the same run: the previous implementation
   of stages 2–3 (``git show 2c6110b:bayesrate/models/scale.py``: numpy, 96 × 64 nodes,
   grid scans) on ``--baseline-pages`` of the same pages, and the new one on the same
   subset.
2. **From the raw log** (target: 1 M pages × 100 visits to posteriors in ≤ 5 min): the
   canonical visit table in memory (string page ids, hours, flags) → validated
   :class:`Observations` → statistics → :func:`fit_scale` (stages 1–3).

Peak memory is the process's maximum resident set size (``getrusage``).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

SEED = "bench-scale-path"
HYPER = (math.log(0.05), 0.8, 1.5)  # the simulated population: μ_g, σ_d, σ_p (log per hour)


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def synthetic_stats(n_pages: int, n_domains: int, rng: np.random.Generator):
    """IntervalStats of a two-level log-normal population, built from groups directly."""
    from bayesrate.sufficient import IntervalStats

    mu_g, sd_d, sd_p = HYPER
    domain = rng.integers(0, n_domains, n_pages)
    mu_d = mu_g + sd_d * rng.standard_normal(n_domains)
    lam = np.exp(mu_d[domain] + sd_p * rng.standard_normal(n_pages))
    n_hourly = rng.integers(10, 701, n_pages)
    daily = rng.random(n_pages) < 0.5
    n_daily = np.where(daily, rng.integers(1, 31, n_pages), 0)
    c_hourly = rng.binomial(n_hourly, -np.expm1(-lam))
    c_daily = rng.binomial(n_daily, -np.expm1(-24 * lam))
    has_daily = np.flatnonzero(n_daily > 0)
    page = np.concatenate([np.arange(n_pages), has_daily])
    tau = np.concatenate([np.ones(n_pages), np.full(len(has_daily), 24.0)])
    n = np.concatenate([n_hourly, n_daily[has_daily]])
    c = np.concatenate([c_hourly, c_daily[has_daily]])
    stats = IntervalStats.from_groups(page, tau, n, c, n_pages)
    labels = pd.Index([f"d{d:04d}" for d in range(n_domains)], name="domain")
    return replace(stats, domain=domain.astype(np.int64), domains=labels)


def stage1(stats, n_sample: int, seed: str) -> tuple[dict, float, dict]:
    """NUTS on a stratified sample (visits rebuilt from its groups)."""
    from bayesrate.models import HierarchicalModel
    from bayesrate.models.scale import stratified_sample
    from bayesrate.scaleout.aggregate import group_table
    from bayesrate.scaleout.fit import observations_from_groups

    t0 = time.perf_counter()
    rng = np.random.default_rng(7)
    sample = stratified_sample(stats.domain, n_sample, rng)
    labels = stats.pages.to_numpy()
    # the sample's groups by page code: a table of every page's groups first (15 M rows of
    # object strings at 10 M pages) cost minutes here before the fit began
    groups = group_table(_subset(stats, np.asarray(sample)))
    pages = pd.DataFrame(
        {"page": labels[sample], "domain": stats.domains.to_numpy()[stats.domain[sample]]}
    )
    obs = observations_from_groups(pages, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HierarchicalModel(sampler_config={"seed": seed}).fit(obs)
    post = model.idata_["posterior"]
    hyper = {k: float(post[k].mean()) for k in ("mu_global", "sigma_domain", "sigma_page")}
    d = model.diagnostics_
    diag = {
        "fit_seconds": round(d.seconds, 1),
        "converged": d.converged,
        "r_hat_max": d.r_hat_max,
        "ess_bulk_min": d.ess_bulk_min,
        "divergences": d.divergences,
    }
    return hyper, time.perf_counter() - t0, diag


def previous_implementation():
    """The scale path's stages 2–3 as of 2c6110b (the baseline), from git."""
    repo = Path(__file__).resolve().parents[1]
    try:
        text = subprocess.run(
            ["git", "show", "2c6110b:bayesrate/models/scale.py"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "scale_2c6110b.py"
    path.write_text(text)
    sys.path.insert(0, str(path.parent))
    import scale_2c6110b

    return scale_2c6110b


def bench_stats(n_pages: int, baseline_pages: int, n_sample: int) -> dict:
    from bayesrate.models import scale

    rng = np.random.default_rng(20261201)
    t0 = time.perf_counter()
    stats = synthetic_stats(n_pages, 1000, rng)
    t_build = time.perf_counter() - t0
    mem_stats = peak_gib()
    print(
        f"[stats] {n_pages:,} pages, {stats.n_groups:,} groups built in {t_build:.1f} s "
        f"(peak RSS {mem_stats:.2f} GiB)"
    )
    out: dict = {"pages": n_pages, "groups": stats.n_groups, "peak_gib_after_stats": mem_stats}
    # baseline on a subset, same run
    old = previous_implementation()
    sub_pos = np.sort(rng.choice(n_pages, size=min(baseline_pages, n_pages), replace=False))
    sub = _subset(stats, sub_pos)
    scale.grid_domain_and_pages(_subset(stats, sub_pos[:100]), *HYPER)  # compile/load kernels
    t = time.perf_counter()
    _, new_pages = scale.grid_domain_and_pages(sub, *HYPER)
    t_new = time.perf_counter() - t
    if old is not None:
        t = time.perf_counter()
        _, old_pages = old.grid_domain_and_pages(sub, *HYPER)
        t_old = time.perf_counter() - t
        rel = {
            k: float(np.max(np.abs(new_pages[k] / old_pages[k] - 1)))
            for k in ("mean", "lower", "upper")
        }
        out["baseline"] = {
            "pages": len(sub_pos),
            "previous_us_per_page": 1e6 * t_old / len(sub_pos),
            "new_us_per_page": 1e6 * t_new / len(sub_pos),
            "speedup": t_old / t_new,
            "max_rel_diff": rel,
        }
        print(
            f"[stats] stages 2-3 on {len(sub_pos):,} pages: previous "
            f"{1e6 * t_old / len(sub_pos):.0f} us/page, new "
            f"{1e6 * t_new / len(sub_pos):.0f} us/page: {t_old / t_new:.1f}x; "
            f"max rel. diff mean {rel['mean']:.1e}, 5% {rel['lower']:.1e}, 95% {rel['upper']:.1e}"
        )
    del sub
    hyper, t1, diag = stage1(stats, n_sample, SEED)
    print(f"[stats] stage 1 (NUTS, {n_sample} pages): {t1:.0f} s, {diag}; hyper {hyper}")
    t = time.perf_counter()
    _, pages = scale.grid_domain_and_pages(
        stats, hyper["mu_global"], hyper["sigma_domain"], hyper["sigma_page"]
    )
    t23 = time.perf_counter() - t
    peak = peak_gib()
    ok = bool(np.isfinite(pages["mean"]).all() and np.isfinite(pages["lower"]).all())
    out.update(
        stage1_seconds=t1,
        stage1=diag,
        hyper=hyper,
        stages23_seconds=t23,
        us_per_page=1e6 * t23 / n_pages,
        total_seconds=t1 + t23,
        peak_gib=peak,
        all_finite=ok,
    )
    print(
        f"[stats] stages 2-3: {t23:.0f} s ({1e6 * t23 / n_pages:.1f} us/page); stage 1 + 2-3: "
        f"{t1 + t23:.0f} s (target <= 600); peak RSS {peak:.2f} GiB (target <= 8); "
        f"all summaries finite: {ok}"
    )
    return out


def _subset(stats, positions):
    from bayesrate.sufficient import IntervalStats

    g = stats.group_offsets
    take = np.concatenate([np.arange(g[p], g[p + 1]) for p in positions]) if len(positions) else []
    counts = g[positions + 1] - g[positions]
    gp = np.repeat(np.arange(len(positions)), counts)
    return IntervalStats(
        pages=stats.pages[positions],
        domain=stats.domain[positions],
        domains=stats.domains,
        group_page=gp,
        group_tau=stats.group_tau[take],
        group_n=stats.group_n[take],
        group_changed=stats.group_changed[take],
        group_offsets=np.concatenate([[0], np.cumsum(counts)]),
        n_visits=stats.n_visits[positions],
        n_intervals=stats.n_intervals[positions],
        n_changes=stats.n_changes[positions],
        exposure=stats.exposure[positions],
    )


def bench_raw(n_pages: int, n_visits: int, n_sample: int) -> dict:
    from bayesrate.models.scale import fit_scale
    from bayesrate.observations import Observations

    rng = np.random.default_rng(20261202)
    mu_g, sd_d, sd_p = HYPER
    n_domains = 1000
    domain = rng.integers(0, n_domains, n_pages)
    mu_d = mu_g + sd_d * rng.standard_normal(n_domains)
    lam = np.exp(mu_d[domain] + sd_p * rng.standard_normal(n_pages))
    gaps = rng.choice([1.0, 2.0, 6.0, 24.0], size=(n_pages, n_visits - 1), p=[0.5, 0.2, 0.2, 0.1])
    times = np.concatenate([np.zeros((n_pages, 1)), np.cumsum(gaps, axis=1)], axis=1) + 475_000
    changed = np.zeros((n_pages, n_visits), dtype=np.int8)
    changed[:, 1:] = rng.random(gaps.shape) < -np.expm1(-lam[:, None] * gaps)
    del gaps
    labels = np.array(
        [f"https://site{d:04d}.example/page/{i:08d}" for i, d in enumerate(domain)], dtype=object
    )
    frame = pd.DataFrame(
        {
            "page": np.repeat(labels, n_visits),
            "domain": np.repeat(
                np.array([f"site{d:04d}.example" for d in domain], object), n_visits
            ),
            "time": times.ravel(),
            "changed": changed.ravel(),
        }
    )
    del times, changed
    print(
        f"[raw] {len(frame):,} visits of {n_pages:,} pages in memory "
        f"(peak RSS {peak_gib():.2f} GiB)"
    )
    t0 = time.perf_counter()
    obs = Observations.from_frame(frame, time_unit="h")
    del frame
    t_obs = time.perf_counter() - t0
    _ = obs.interval_stats
    t_stats = time.perf_counter() - t0 - t_obs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_scale(obs, n_sample=n_sample, seed=SEED)
    total = time.perf_counter() - t0
    d = res.stage1.diagnostics_
    out = {
        "pages": n_pages,
        "visits": obs.n_visits,
        "observations_seconds": t_obs,
        "statistics_seconds": t_stats,
        "scale_seconds": res.seconds,
        "total_seconds": total,
        "stage1_converged": d.converged,
        "stage1_r_hat_max": d.r_hat_max,
        "stage1_divergences": d.divergences,
        "peak_gib": peak_gib(),
    }
    print(
        f"[raw] table -> Observations {t_obs:.0f} s, statistics {t_stats:.0f} s, stage 1 "
        f"{res.seconds['stage1']:.0f} s, stages 2-3 {res.seconds['grid']:.0f} s: total "
        f"{total:.0f} s (target <= 300); peak RSS {out['peak_gib']:.2f} GiB; stage 1 converged "
        f"{d.converged}"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stats-pages", type=int, default=10_000_000)
    parser.add_argument("--raw-pages", type=int, default=1_000_000)
    parser.add_argument("--raw-visits", type=int, default=100)
    parser.add_argument("--baseline-pages", type=int, default=20_000)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--only", default="stats,raw")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    only = set(args.only.split(","))
    results = {}
    if "stats" in only:
        results["stats"] = bench_stats(args.stats_pages, args.baseline_pages, args.sample)
    if "raw" in only:
        results["raw"] = bench_raw(args.raw_pages, args.raw_visits, args.sample)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
