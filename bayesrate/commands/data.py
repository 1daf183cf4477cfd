"""``bayesrate data``: inspect datasets and observation files."""

from __future__ import annotations

import argparse
import time
from typing import Any

from bayesrate.commands.common import (
    add_input_options,
    check_output_file,
    load_observations,
    print_json,
    progress,
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
    git.add_argument("--out", required=True, metavar="FILE", help=".csv, .csv.gz or .parquet")
    git.set_defaults(func=_from_git)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


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
    from bayesrate.gitlog import HISTORY_FORMATS, history_frame, write_history_table
    from bayesrate.history import ChangeHistory
    from bayesrate.io.table import output_format

    output_format(args.out, HISTORY_FORMATS)  # before any work
    check_output_file(args.out)
    start = time.perf_counter()
    frame = history_frame(args.repo, args.pathspec, domain_depth=args.domain_depth, rev=args.rev)
    history = ChangeHistory.from_frame(frame, source=str(args.repo))  # validate before writing
    path = write_history_table(frame, args.out)
    print(
        f"wrote {len(frame):,} events of {frame['page'].nunique():,} pages to {path} "
        f"({history.n_changes:,} changes after validation; "
        f"{time.perf_counter() - start:.1f} s)"
    )
    for note in history.notes:
        print(f"  - {note}")
    return 0
