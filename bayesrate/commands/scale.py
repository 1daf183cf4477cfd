"""``bayesrate scale``: crawl logs bigger than one machine, on a Dask cluster.

Four stages, each reading the previous one's output (``docs/scale.md``)::

    bayesrate scale aggregate  --input LOG      --out STATS        # the one shuffle
    bayesrate scale fit        --input STATS    --out PRIORS_DIR   # NUTS on a sample
    bayesrate scale posteriors --input STATS    --out POSTERIORS --priors PRIORS_DIR
    bayesrate scale rates      --input POSTERIORS --out RATES --budget FETCHES_PER_DAY

Every stage runs on a local Dask cluster (one worker per core) unless ``--scheduler
ADDRESS`` names a running scheduler. Outputs are Parquet datasets with a
``_manifest.json``, partitioned by URL hash or, for a log partitioned by host, by host
(``--layout``); a killed run rerun with the same arguments resumes and commits the same
output as one clean run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from bayesrate.commands.common import (
    OBJECTIVE_CHOICES,
    OBJECTIVE_HELP,
    check_output_dir,
    memory_size,
    positive_float,
    positive_fraction,
    positive_int,
    print_json,
    progress,
    strict_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "scale",
        help="crawl logs bigger than one machine: statistics, priors, posteriors, rates on Dask",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ops = parser.add_subparsers(dest="op", metavar="STAGE")

    p = ops.add_parser("aggregate", help="a crawl or fetch log -> per-URL interval statistics")
    _common(
        p,
        "crawl log or fetch log: a .parquet/.csv file or a directory of them",
        "statistics dataset (directory)",
    )
    p.add_argument(
        "--kind",
        choices=("crawl", "fetch"),
        default="crawl",
        help="crawl: columns page/url, time, changed; fetch: page/url, time, digest",
    )
    from bayesrate.constants import DEFAULT_TIME_UNIT, TIME_UNITS

    p.add_argument(
        "--time-unit",
        default=DEFAULT_TIME_UNIT,
        choices=sorted(TIME_UNITS),
        help="unit of numeric times (default: hours since the epoch)",
    )
    p.add_argument("--timezone", default="UTC", help="clock of the hour-of-week exposure")
    p.add_argument(
        "--partitions",
        type=positive_int,
        help="partitions after the shuffle (default: ~2 M rows each)",
    )
    p.add_argument(
        "--input-rows",
        type=positive_int,
        help="rows per input partition: small row groups and files are read together up "
        "to this many (default: 1 M; sets the read's tasks and memory, not the output)",
    )
    p.add_argument(
        "--layout",
        choices=("auto", "url", "host"),
        default="auto",
        help="output partitioning: host (whole hosts per part, host=H/ directories), url "
        "(URL-hash buckets), or auto (default): host when the log is partitioned by host "
        "(host=H/ or domain=H/ directories), url otherwise; later stages keep it",
    )
    p.add_argument(
        "--bad-rows",
        choices=("error", "skip"),
        default="error",
        help="malformed rows: fail with counts and a sample (default), or exclude "
        "them and record counts and a sample in the manifest",
    )
    p.set_defaults(func=_aggregate)

    p = ops.add_parser("fit", help="the hierarchy on a stratified sample -> priors.json")
    _common(p, "statistics dataset from 'scale aggregate'", "artifact directory (priors.json)")
    p.add_argument("--sample", type=positive_int, default=2000, help="pages in the sample")
    p.add_argument("--seed", default="scale", help="seed of the sample and the sampler")
    p.add_argument("--draws", type=positive_int, default=1000)
    p.add_argument("--tune", type=positive_int, default=1000)
    p.add_argument("--chains", type=positive_int, default=4)
    p.add_argument(
        "--force",
        action="store_true",
        help="write the artifact even if the fit misses the convergence gates",
    )
    p.set_defaults(func=_fit)

    p = ops.add_parser("posteriors", help="every URL's posterior under its domain's prior")
    _common(p, "statistics dataset from 'scale aggregate'", "posteriors dataset (directory)")
    p.add_argument(
        "--priors", required=True, metavar="PATH", help="priors.json, or a directory holding it"
    )
    p.add_argument(
        "--grid-points",
        type=positive_int,
        default=201,
        help="log-rate grid points per URL (default 201)",
    )
    p.set_defaults(func=_posteriors)

    p = ops.add_parser("rates", help="budgeted optimal revisit rates for every URL")
    _common(p, "posteriors dataset from 'scale posteriors'", "rates dataset (directory)")
    p.add_argument(
        "--budget",
        type=positive_fraction,
        required=True,
        help="total fetches per day over all URLs (a number or a fraction such as 1/7)",
    )
    p.add_argument(
        "--objective", choices=OBJECTIVE_CHOICES, default="freshness", help=OBJECTIVE_HELP
    )
    p.add_argument(
        "--min-interval",
        type=positive_float,
        metavar="HOURS",
        help="fetch no URL more often than this",
    )
    p.add_argument(
        "--max-interval",
        type=positive_float,
        metavar="HOURS",
        help="fetch every URL at least this often (exploration)",
    )
    p.add_argument(
        "--host-cap",
        type=positive_float,
        metavar="PER_DAY",
        help="politeness: at most this many fetches per day per host (domain)",
    )
    p.set_defaults(func=_rates)


def _common(p: argparse.ArgumentParser, input_help: str, out_help: str) -> None:
    p.add_argument("--input", required=True, metavar="PATH", help=input_help)
    p.add_argument("--out", required=True, metavar="PATH", help=out_help)
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a running Dask scheduler (default: start a local cluster)",
    )
    p.add_argument("--workers", type=positive_int, help="local cluster workers (default: cores)")
    p.add_argument(
        "--memory-limit",
        type=memory_size,
        help="per local worker, e.g. 4GiB (default: Dask's)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


#: the stage whose output each stage reads (checked before the cluster starts)
UPSTREAM = {"fit": "aggregate", "posteriors": "aggregate", "rates": "posteriors"}


def _run(args: argparse.Namespace, stage: Callable[..., dict], *a: Any, **kw: Any) -> int:
    from bayesrate.scaleout.cluster import connect

    if args.op in UPSTREAM:
        from bayesrate.scaleout.staging import load_manifest

        load_manifest(args.input, stage=UPSTREAM[args.op])
    check_output_dir(args.out)
    where = args.scheduler or "a local cluster"
    progress(f"scale {args.op}: {args.input} -> {args.out} on {where}")
    with connect(args.scheduler, workers=args.workers, memory_limit=args.memory_limit):
        manifest = stage(*a, progress=not args.no_progress, **kw)
    _report(args, manifest)
    return 0


def _report(args: argparse.Namespace, manifest: dict) -> None:
    if args.json:
        print_json(manifest)
        return
    shown = {k: v for k, v in manifest.items() if k not in ("tables", "arguments")}
    bad = shown.pop("malformed_rows", None)
    progress(f"scale {args.op}: " + json.dumps(strict_json(shown), default=str))
    if bad and bad["rows"]:
        from bayesrate.scaleout.problems import describe

        progress("excluded " + describe(bad))


def _aggregate(args: argparse.Namespace) -> int:
    from bayesrate.scaleout.aggregate import aggregate

    return _run(
        args,
        aggregate,
        args.input,
        args.out,
        kind=args.kind,
        time_unit=args.time_unit,
        timezone=args.timezone,
        partitions=args.partitions,
        input_rows=args.input_rows,
        bad_rows=args.bad_rows,
        layout=args.layout,
    )


def _fit(args: argparse.Namespace) -> int:
    from bayesrate.scaleout.fit import fit

    sampler = {"draws": args.draws, "tune": args.tune, "chains": args.chains}
    return _run(
        args,
        _no_progress(fit),
        args.input,
        args.out,
        n_sample=args.sample,
        seed=args.seed,
        sampler_config=sampler,
        force=args.force,
    )


def _no_progress(stage: Callable[..., dict]) -> Callable[..., dict]:
    def run(*a: Any, progress: bool = False, **kw: Any) -> dict:
        return stage(*a, **kw)

    return run


def _posteriors(args: argparse.Namespace) -> int:
    from bayesrate.scaleout.posteriors import posteriors

    return _run(args, posteriors, args.input, args.out, args.priors, n_grid=args.grid_points)


def _rates(args: argparse.Namespace) -> int:
    import math

    from bayesrate.scaleout.rates import rates
    from bayesrate.scheduler.optimal import objective_name

    return _run(
        args,
        rates,
        args.input,
        args.out,
        budget_per_day=args.budget,
        objective=objective_name(args.objective),
        min_interval_hours=args.min_interval or 0.0,
        max_interval_hours=args.max_interval or math.inf,
        host_cap_per_day=args.host_cap,
    )
