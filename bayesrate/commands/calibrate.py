"""``bayesrate calibrate``: data → models → checks → priors, with a report (the main job)."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time

from bayesrate.commands.common import (
    add_input_options,
    add_quiet_option,
    check_output_dir,
    load_observations,
    non_negative_int,
    positive_int,
    progress_for,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="fit the models, check them, compare them, export per-domain priors, write a report",
    )
    add_input_options(parser)
    parser.add_argument(
        "--name",
        help="name for the artifacts (default: the dataset's, or the input file's name without "
        "its extensions); letters, digits, '.', '_', '-'",
    )
    from bayesrate.calibrate import DEFAULT_MODELS
    from bayesrate.commands.common import comparable_model_name

    # models whose pages' rates are integrated out for leave-one-page-out
    parser.add_argument(
        "--models",
        nargs="+",
        type=comparable_model_name,
        metavar="MODEL",
        default=list(DEFAULT_MODELS),
        help=f"models to fit and compare (default: {' '.join(DEFAULT_MODELS)}; excursion with "
        "annual epochs unless --model-config says otherwise)",
    )
    parser.add_argument(
        "--out-dir",
        metavar="DIR",
        help="where models/ and reports/ go (default: the current directory)",
    )
    parser.add_argument("--out", help="report directory (default OUT_DIR/reports/<name>)")
    parser.add_argument("--models-dir", help="artifact root (default OUT_DIR/models)")
    parser.add_argument("--method", default="nuts", choices=("nuts", "advi", "pathfinder"))
    parser.add_argument("--draws", type=positive_int, help="posterior draws per chain")
    parser.add_argument("--tune", type=non_negative_int, help="warm-up draws per chain")
    parser.add_argument("--chains", type=positive_int)
    parser.add_argument("--seed", default="bayesrate-calibrate", help="int or string")
    parser.add_argument("--timezone", default="UTC", help="clock of the modulated model")
    parser.add_argument(
        "--model-config",
        action="append",
        metavar="MODEL=JSON",
        help="model_config overrides of one of --models, e.g. "
        '\'dynamic={"epoch_days": 365, "path_integral": "laplace"}\' (repeat for '
        "several models)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="export even if gates fail (the artifact says so), and overwrite artifacts of the "
        "same name that were fitted on other data",
    )
    add_quiet_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bayesrate.calibrate import calibrate, check_artifact_owner
    from bayesrate.models import parse_model_configs

    start = time.perf_counter()
    progress = progress_for(args)
    # validate everything before any work
    name = artifact_name(args)
    configs = parse_model_configs(args.model_config, args.models)
    if "modulated" in args.models:
        configs["modulated"] = {"timezone": args.timezone, **configs.get("modulated", {})}
    base = Path(args.out_dir) if args.out_dir else Path()
    models_dir = Path(args.models_dir) if args.models_dir else base / "models"
    out = Path(args.out) if args.out else base / "reports" / name
    check_output_dir(models_dir, what="--models-dir")
    # the artifacts' own directory too (--name README.md next to a models/README.md file)
    check_output_dir(models_dir / name, what=f"--name {name}: artifact directory")
    check_output_dir(out)
    progress(f"loading {args.input or args.dataset or 'ota-contrib'} ...")
    obs = load_observations(args)
    check_artifact_owner(models_dir, name, obs.fingerprint, force=args.force)
    progress(f"{obs.n_pages:,} pages, {obs.n_visits:,} visits, {obs.n_changes:,} changes")
    sampler = {
        k: getattr(args, k) for k in ("draws", "tune", "chains") if getattr(args, k) is not None
    }
    result = calibrate(
        obs,
        dataset=name,
        models=args.models,
        out=out,
        models_root=models_dir,
        method=args.method,
        sampler=sampler,
        model_configs=configs,
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


#: artifact names: a directory name, never a path
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TABLE_SUFFIXES = (".gz", ".csv", ".tsv", ".txt", ".parquet", ".pq")


def artifact_name(args: argparse.Namespace) -> str:
    """The artifacts' name: ``--name``, else the dataset's, else the input file's stem.

    A file's name loses its table extensions and leading dots (``.mycrawl.csv.gz`` →
    ``mycrawl``); other characters outside ``[A-Za-z0-9._-]`` become ``-``. User data never
    falls back to a default name: if nothing usable is left, ``--name`` is required.
    """
    from pathlib import Path

    from bayesrate import datasets
    from bayesrate.errors import ObservationError

    if args.name is not None:
        if not NAME_PATTERN.fullmatch(args.name):
            raise ObservationError(
                f"--name {args.name!r}: use letters, digits, '.', '_' and '-' (starting with a "
                "letter or digit)",
                field="name",
            )
        return args.name
    if not args.input:
        return args.dataset or datasets.DEFAULT
    stem = Path(args.input).name
    while stem.lower().endswith(_TABLE_SUFFIXES):
        stem = stem[: stem.rfind(".")]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).lstrip("._-").rstrip(".")
    if not NAME_PATTERN.fullmatch(stem):
        raise ObservationError(
            f"cannot derive an artifact name from {args.input!r}; pass --name NAME", field="name"
        )
    return stem
