"""``bayesrate data``: inspect datasets and observation files."""

from __future__ import annotations

import argparse
import time
from typing import Any

from bayesrate.commands.common import (
    UTC_TIME_HELP,
    add_input_options,
    check_output_file,
    load_observations,
    positive_float,
    positive_fraction,
    print_json,
    progress,
    utc_time,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="inspect datasets and observation files")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")

    summary = actions.add_parser(
        "summary",
        help="pages, visits, changes, span and changes per page of a dataset or file "
        "(an observation table, or a change history: columns page,time,event)",
    )
    add_input_options(summary)
    summary.add_argument("--json", action="store_true", help="print a JSON object")
    summary.set_defaults(func=_summary)

    listing = actions.add_parser("list", help="list the embedded datasets and their provenance")
    listing.add_argument("--json", action="store_true", help="print a JSON object")
    listing.set_defaults(func=_list)

    git = actions.add_parser(
        "from-git",
        help="a git repository of documents -> a change history table (page,domain,time,event)",
        description="First-parent commit times per file (renames: deleted + created, "
        "deletions recorded); git is run as a subprocess. See docs/histories.md.",
    )
    git.add_argument("repo", help="path of the git repository")
    git.add_argument(
        "--pathspec", required=True, metavar="GLOB", help="files to follow, e.g. 'pages/**/*.md'"
    )
    git.add_argument(
        "--domain-depth",
        type=int,
        default=0,
        metavar="K",
        help="leading directories of the page id that form its domain (default 0: none)",
    )
    git.add_argument("--rev", default="HEAD", help="commit to read from (default HEAD)")
    git.add_argument(
        "--end",
        type=utc_time,
        help="when the record ends: 'rev' (the revision's commit time) or "
        f"{UTC_TIME_HELP}; written as the column record_end (default: the last event)",
    )
    git.add_argument("--out", required=True, metavar="FILE", help=".csv, .csv.gz or .parquet")
    git.set_defaults(func=_from_git)
    crawl = actions.add_parser(
        "crawl",
        help="a change history -> the observation table a crawler on a schedule would log",
        description="Censor an exact change history with a visit schedule (a fixed "
        "interval with a random phase per page, Poisson visits, or one explicit grid of "
        "visit times): the canonical observation table page,domain,time,changed plus "
        "true_changes, the exact number of changes in each interval (docs/histories.md).",
    )
    source = crawl.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", "--history", dest="history", metavar="FILE",
                        help="change-history table (.csv, .csv.gz, .parquet)")  # fmt: skip
    source.add_argument("--dataset", help="embedded history (tldr-pages)")
    schedule = crawl.add_mutually_exclusive_group(required=True)
    schedule.add_argument(
        "--every", type=positive_float, metavar="HOURS", help="a visit every HOURS per page"
    )
    schedule.add_argument(
        "--poisson",
        type=positive_fraction,
        metavar="PER_DAY",
        help="Poisson visits, PER_DAY per page (a number or a fraction such as 1/7)",
    )
    schedule.add_argument(
        "--grid", metavar="FILE", help="a table with a time column: every page's visit times"
    )
    crawl.add_argument("--start", type=utc_time, help=f"crawl from here: {UTC_TIME_HELP}")
    crawl.add_argument("--end", type=utc_time, help=f"crawl until here: {UTC_TIME_HELP}")
    crawl.add_argument("--seed", default="bayesrate-crawl", help="seed of phases / visit times")
    crawl.add_argument(
        "--out", required=True, metavar="FILE", help=".csv, .csv.gz, .tsv or .parquet"
    )
    crawl.set_defaults(func=_crawl)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


#: formats of an observation table that the loaders read back
TABLE_FORMATS = ("csv", "tsv", "parquet")


def _crawl(args: argparse.Namespace) -> int:
    """``data crawl``: a history censored by a schedule, written as an observation table."""
    from bayesrate.constants import HOURS_PER_DAY, TIME
    from bayesrate.history import FixedInterval, PoissonVisits, VisitGrid, crawl, hours_of
    from bayesrate.io.history import load_history
    from bayesrate.io.table import load_table, output_format, write_table
    from bayesrate.observations import times_to_hours

    output_format(args.out, TABLE_FORMATS)  # before any work
    check_output_file(args.out)
    start = None if args.start is None else hours_of(args.start, "start")
    end = None if args.end is None else hours_of(args.end, "end")
    if args.every is not None:
        schedule: Any = FixedInterval(args.every)
    elif args.poisson is not None:
        schedule = PoissonVisits(args.poisson / HOURS_PER_DAY)
    else:
        grid = load_table(args.grid)
        if TIME not in grid.columns:
            from bayesrate.errors import ObservationError

            raise ObservationError(f"{args.grid} has no {TIME!r} column", field=TIME)
        schedule = VisitGrid(tuple(times_to_hours(grid[TIME], "h", None)[0].tolist()))
    history = load_history(dataset=args.dataset, path=args.history)
    progress(f"crawling {history.n_pages:,} pages: {schedule.describe()} ...")
    result = crawl(history, schedule, args.seed, start=start, end=end)
    obs = result.observations
    frame = obs.to_frame().assign(true_changes=result.true_changes)
    write_table(frame, args.out)
    print(
        f"wrote {obs.n_visits:,} visits of {obs.n_pages:,} pages to {args.out} "
        f"({obs.n_changes:,} intervals with a change; "
        f"{int(result.true_changes.sum()):,} exact changes)"
    )
    for note in obs.notes:
        print(f"  - {note}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from bayesrate import datasets

    if args.dataset in datasets.PROVENANCE and (
        datasets.PROVENANCE[args.dataset]["kind"] == datasets.CHANGE_HISTORY
    ):
        return _history_summary(args, datasets.load_history(args.dataset))
    start = time.perf_counter()
    progress(f"loading {args.input or args.dataset or 'ota-contrib'} ...")
    if args.input:  # an observation table or a change history: say which
        from bayesrate.io.history import read_table_or_history
        from bayesrate.observations import Observations

        obs = read_table_or_history(args.input, time_unit=args.time_unit)
        if not isinstance(obs, Observations):
            return _history_summary(args, obs)
    else:
        obs = load_observations(args)
    progress(f"loaded {obs.n_visits:,} visits of {obs.n_pages:,} pages; computing statistics ...")
    stats = obs.interval_stats
    summary = {"kind": "observation table", **obs.summary()}
    summary["interval_groups"] = stats.n_groups
    summary["seconds"] = round(time.perf_counter() - start, 3)
    if args.json:
        print_json(summary)
        return 0
    cpp = summary["changes_per_page"]
    lines = [
        f"source        {summary['source']} (observation table)",
        f"pages         {summary['pages']:,} in {summary['domains']:,} domains",
        f"visits        {summary['visits']:,} ({summary['intervals']:,} intervals)",
        f"changes       {summary['changes']:,} detected",
        f"span          {summary['span_days']:,.1f} days"
        + (
            f" ({summary['first_visit']} .. {summary['last_visit']})"
            if "first_visit" in summary
            else ""
        ),
        "changes/page  "
        + "  ".join(f"{k}={v:g}" for k, v in cpp.items() if k.startswith("q"))
        + f"  mean={cpp['mean']:.1f}",
        f"never changed {summary['pages_never_changed']:,} pages; changed at every visit "
        f"{summary['pages_changed_every_visit']:,}",
        f"fingerprint   {summary['fingerprint'][:16]}",
    ]
    print("\n".join(lines))
    if summary["notes"]:
        print("notes:")
        for note in summary["notes"]:
            print(f"  - {note}")
    return 0


def _history_summary(args: argparse.Namespace, history: Any) -> int:
    summary = history.summary()
    if args.json:
        print_json(summary)
        return 0
    cpp = summary["changes_per_page"]
    print(
        f"source        {summary['source']} ({summary['kind']})\n"
        f"pages         {summary['pages']:,} in {summary['domains']:,} domains; "
        f"{summary['alive_at_end']:,} alive at the end\n"
        f"changes       {summary['changes']:,} exact\n"
        f"span          {summary['span_days']:,.1f} days ({summary['start']} .. {summary['end']})\n"
        "changes/page  " + "  ".join(f"{k}={v:g}" for k, v in cpp.items())
    )
    if summary["notes"]:
        print("notes:")
        for note in summary["notes"]:
            print(f"  - {note}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from bayesrate import datasets

    if args.json:
        print_json({"datasets": datasets.PROVENANCE, "default": datasets.DEFAULT})
        return 0
    for name in sorted(datasets.PROVENANCE):
        prov = datasets.PROVENANCE[name]
        default = " (default)" if name == datasets.DEFAULT else ""
        print(
            f"{name}{default} [{prov['kind']}]: {prov['repository']}@{prov['commit'][:12]}, "
            f"{prov['licence']}"
        )
        print(f"    attribution: {prov['attribution']}")
    return 0


def _from_git(args: argparse.Namespace) -> int:
    import pandas as pd

    from bayesrate.gitlog import (
        HISTORY_FORMATS,
        first_parent_warnings,
        history_frame,
        revision_time,
        write_history_table,
    )
    from bayesrate.history import ChangeHistory
    from bayesrate.io.table import output_format

    output_format(args.out, HISTORY_FORMATS)  # before any work
    check_output_file(args.out)
    start = time.perf_counter()
    frame = history_frame(args.repo, args.pathspec, domain_depth=args.domain_depth, rev=args.rev)
    if args.end is not None:
        from bayesrate.history import RECORD_END, hours_of

        if args.end == "rev":
            end = revision_time(args.repo, args.rev)
        else:
            hours_of(args.end, "end")  # a time with a zone, else a clear error
            end = pd.Timestamp(args.end).tz_convert("UTC")
        frame = frame.assign(**{RECORD_END: end.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
    history = ChangeHistory.from_frame(frame, source=str(args.repo))  # validate before writing
    for warning in first_parent_warnings(args.repo, args.pathspec, rev=args.rev):
        progress(f"warning: {warning}")
    path = write_history_table(frame, args.out)
    print(
        f"wrote {len(frame):,} events of {frame['page'].nunique():,} pages to {path} "
        f"({history.n_changes:,} changes after validation; "
        f"{time.perf_counter() - start:.1f} s)"
    )
    for note in history.notes:
        print(f"  - {note}")
    return 0
