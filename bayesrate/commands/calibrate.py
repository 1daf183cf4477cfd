"""``bayesrate calibrate``: data → models → checks → priors, with a report (the main job)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from bayesrate.commands.common import add_input_options, load_observations, progress

MODEL_CHOICES = ("censored", "hierarchical", "modulated")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="fit the models, check them, compare them, export per-domain priors, write a report",
    )
    add_input_options(parser)
    parser.add_argument("--name", help="name for the artifacts (default: dataset or file stem)")
    parser.add_argument("--models", nargs="+", choices=MODEL_CHOICES, default=list(MODEL_CHOICES))
    parser.add_argument("--out", help="report directory (default reports/<name>)")
    parser.add_argument("--models-dir", default="models", help="artifact root (default models/)")
    parser.add_argument("--method", default="nuts", choices=("nuts", "advi", "pathfinder"))
    parser.add_argument("--draws", type=int)
    parser.add_argument("--tune", type=int)
    parser.add_argument("--chains", type=int)
    parser.add_argument("--seed", default="bayesrate-calibrate", help="int or string")
    parser.add_argument("--timezone", default="UTC", help="clock of the modulated model")
    parser.add_argument(
        "--force", action="store_true", help="export even if gates fail (the artifact says so)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bayesrate.calibrate import calibrate

    start = time.perf_counter()
    progress(f"loading {args.input or args.dataset or 'ota-contrib'} ...")
    obs = load_observations(args)
    name = args.name or (Path(args.input).name.split(".")[0] if args.input else None)
    name = name or args.dataset or "ota-contrib"
    progress(f"{obs.n_pages:,} pages, {obs.n_visits:,} visits, {obs.n_changes:,} changes")
    sampler = {k: getattr(args, k) for k in ("draws", "tune", "chains") if getattr(args, k)}
    result = calibrate(
        obs,
        dataset=name,
        models=args.models,
        out=args.out,
        models_root=args.models_dir,
        method=args.method,
        sampler=sampler,
        model_configs={"modulated": {"timezone": args.timezone}},
        force=args.force,
        seed=args.seed,
        command="bayesrate " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "bayesrate calibrate",
        progress=progress,
    )
    progress(f"done in {time.perf_counter() - start:.0f} s; report: {result.report}")
    print(result.report)
    if result.recommended:
        print(f"recommended priors: {result.artifacts[result.recommended] / 'priors.json'}")
    else:
        print("no prior artifact was exported (see the report for why)")
    return 0
