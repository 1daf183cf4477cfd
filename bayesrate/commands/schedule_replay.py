"""``bayesrate schedule replay``: every policy on what really happened (thin CLI layer).

The library is :mod:`bayesrate.scheduler.replay` (no PyMC); calibrating ours' priors on the
warm-up log (:mod:`bayesrate.quick_fit`, PyMC) is imported here, lazily, only when
``--priors`` is not given.
"""

from __future__ import annotations

import argparse
import time

from bayesrate.commands.common import (
    UTC_TIME_HELP,
    positive_fraction,
    positive_int,
    print_json,
    progress,
    unit_fraction,
    utc_time,
)
from bayesrate.errors import ObservationError


def register(ops: argparse._SubParsersAction) -> None:
    p = ops.add_parser(
        "replay",
        help="replay every policy on an exact change history at equal budget",
        description="Every policy sees the same censored crawl log before --start, then "
        "spends the same budget for --days; freshness and harmonic staleness are computed "
        "exactly from the true change times (docs/histories.md).",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dataset", help="embedded history (tldr-pages) or crawl log as approximate history"
    )
    source.add_argument(
        "--input",
        "--history",
        dest="history",
        metavar="FILE",
        help="change-history table (--history is the same)",
    )
    p.add_argument(
        "--start", type=utc_time, required=True, help=f"start of the replay window: {UTC_TIME_HELP}"
    )
    p.add_argument("--days", type=float, required=True, help="length of the window")
    p.add_argument(
        "--budget",
        type=positive_fraction,
        required=True,
        help="fetches per live page per day (e.g. 0.333 or 1/3)",
    )
    p.add_argument("--weights", metavar="FILE", help="CSV page,weight (default: equal weights)")
    p.add_argument(
        "--warmup-crawl-every",
        type=float,
        default=24.0,
        metavar="HOURS",
        help="crawl interval of the log every policy sees before --start (default 24)",
    )
    p.add_argument(
        "--priors", metavar="PATH", help="priors.json for ours (default: calibrated on the warm-up)"
    )
    p.add_argument(
        "--save-priors",
        metavar="DIR",
        help="write the priors calibrated on the warm-up log to DIR/priors.json (reuse: --priors)",
    )
    p.add_argument(
        "--ours",
        default="bayesrate",
        help="comma-separated variants of ours: bayesrate (Gamma-ADF, expected freshness gain "
        "for Poisson-timed fetches; default), periodic (the same for periodic fetches), "
        "unhedged (bayesrate with --hedge 0), gamma-q0.3, gamma-mean, grid, grid-drift "
        "(docs/histories.md)",
    )
    p.add_argument(
        "--hedge",
        type=hedge_share,
        default="auto",
        metavar="auto|SHARE",
        help="share of ours' budget spread uniformly over the live pages (0: the plain plan, "
        "1: uniform), or 'auto' (default): per seed and variant, the share that would have "
        "kept the last stretch of the warm-up log freshest (never the window)",
    )
    p.add_argument(
        "--drift",
        default="auto",
        help="σ_rw per √day for grid-drift, or 'auto': the value maximising the grid "
        "filter's evidence on the warm-up log (default)",
    )
    p.add_argument("--tick", type=float, default=0.5, help="fetch tick in hours (default 0.5)")
    p.add_argument("--seed", default="bayesrate-schedule-replay")
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=5,
        help="replays with different warm-up phases and policy randomness (default 5; the "
        "first uses --seed itself): each policy's mean and sd, and ours paired against each "
        "production policy (mean difference, its standard error, wins)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def hedge_share(text: str) -> float | str:
    """``--hedge``: ``auto`` or a share in ``[0, 1]`` (a number or a fraction such as 1/4)."""
    if text.strip().lower() == "auto":
        return "auto"
    return unit_fraction(text)


def _weights(path: str) -> dict[str, float]:
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(path, dtype={"page": str}, keep_default_na=False)
    if not {"page", "weight"} <= set(frame.columns):
        raise ObservationError(f"{path} needs columns page,weight", field="weight")
    w = pd.to_numeric(frame["weight"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if len(bad):
        raise ObservationError("weights must be finite numbers > 0", field="weight", rows=bad)
    dup = frame["page"].duplicated().to_numpy()
    if dup.any():
        raise ObservationError("pages repeat in --weights", field="page", rows=np.flatnonzero(dup))
    return dict(zip(frame["page"], w, strict=True))


def run(args: argparse.Namespace) -> int:
    from bayesrate.history import hours_of
    from bayesrate.io.history import load_history
    from bayesrate.priors import resolve_priors
    from bayesrate.scheduler import replay

    t0 = time.perf_counter()
    history = load_history(dataset=args.dataset, path=args.history)
    for note in history.notes:
        if "approximate" in note:
            progress(f"note: {note}")
    start = hours_of(args.start, "start")
    weights = _weights(args.weights) if args.weights else None
    seeds = replay.seed_names(args.seed, args.seeds)

    def setup_for(seed: str):
        warm = replay.warmup_crawl(history, start, args.warmup_crawl_every, seed)
        setup = replay.prepare(
            history, warm, start=start, days=args.days, weights=weights, tick_hours=args.tick
        )
        return warm, setup

    warm, setup = setup_for(seeds[0])
    progress(
        f"replay: {setup.n:,} pages, warm-up log {len(setup.warmup_time):,} visits "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    calibration = None
    if args.priors:
        priors, where = resolve_priors(args.priors)
        progress(f"priors: {where}")
    else:
        from bayesrate.quick_fit import calibrate_priors, describe_fit

        t = time.perf_counter()
        priors, calibration = calibrate_priors(warm.observations, seed=f"{args.seed}-priors")
        took = time.perf_counter() - t
        progress(f"priors: hierarchical quick fit on the warm-up log, {took:.0f} s")
        progress(f"  {describe_fit(calibration)}")
        if len(seeds) > 1:
            progress("  (fitted on the first seed's warm-up log, used for every seed)")
        if args.save_priors:
            progress(f"priors written to {priors.save(args.save_priors)}")
    ours = tuple(v.strip() for v in args.ours.split(",") if v.strip())
    drift = None
    if "grid-drift" in ours:
        if args.drift == "auto":
            t = time.perf_counter()
            drift, evidence = replay.drift_by_evidence(setup, priors)
            shown = ", ".join(f"{k:g}: {v:.1f}" for k, v in evidence.items())
            progress(f"drift σ_rw = {drift:g}/√day by warm-up evidence ({shown}; "
                     f"{time.perf_counter() - t:.0f} s)")  # fmt: skip
        else:
            drift = float(args.drift)
    results = []
    for i, seed in enumerate(seeds):
        if i:
            setup = setup_for(seed)[1]
        progress(f"seed {i + 1}/{len(seeds)}: {seed}")
        result = replay.replay_policies(
            setup, budget=args.budget, priors=priors, seed=seed, progress=progress,
            ours=ours, drift=drift, hedge=args.hedge,
        )  # fmt: skip
        results.append(result)
    summary = replay.summarize_seeds(results, ours)
    total = time.perf_counter() - t0
    loop = sum(r.seconds["replay_loop"] for r in results)
    progress(
        f"replay: {total:.1f} s in all; replay loops {loop:.1f} s, "
        f"{results[0].setup['decisions_per_second']:,.0f} fetch decisions/s"
    )
    if args.json:
        print_json(summary)
        return 0
    s = results[0].setup
    print(
        f"{s['pages']:,} pages x {s['days']:g} days from {s['start']}, budget "
        f"{s['budget_per_live_page_per_day']:.4g} fetches/live page/day, "
        f"{s['changes_in_window']:,} changes in the window; {len(seeds)} seeds"
    )

    def mean_sd(stat: dict) -> str:
        sd = "" if stat["sd"] is None else f" ± {stat['sd']:.4f}"
        return f"{stat['mean']:.4f}{sd}"

    target = s["budget_fetches"]
    print(f"{'policy':24s} {'freshness (mean ± sd)':>22s} {'harmonic (mean ± sd)':>22s} "
          f"{'fetches':>9s} {'vs budget':>9s}")  # fmt: skip
    for name, r in summary["policies"].items():
        print(
            f"{name:24s} {mean_sd(r['freshness']):>22s} {mean_sd(r['harmonic_staleness']):>22s} "
            f"{r['fetches']:9.0f} {r['fetches'] / target:9.3f}"
        )
    for name, r in summary["policies"].items():
        if "hedge" in r:
            how = "by backtest on the warm-up log" if args.hedge == "auto" else "given"
            if name == "unhedged":
                how = "never hedged"
            shares = ", ".join(f"{h:g}" for h in r["hedge"])
            print(f"{name}: share of the budget spread uniformly per seed: {shares} ({how})")
    for mine, against in summary["paired"].items():
        print(f"{mine} − each production policy, freshness (paired over seeds):")
        for base, d in against.items():
            se = "" if d["se"] is None else f" (se {d['se']:.4f})"
            print(f"  vs {base:22s} {d['mean']:+.4f}{se}, fresher in {d['wins']}/{d['seeds']}")
    if calibration is not None and not calibration["converged"]:
        print(f"note: the priors' quick fit missed its gates: {'; '.join(calibration['failures'])}")
    return 0
