"""``bayesrate data``: inspect datasets and observation files."""

from __future__ import annotations

import argparse
import time

from bayesrate.commands.common import add_input_options, load_observations, print_json, progress


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="inspect datasets and observation files")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")

    summary = actions.add_parser(
        "summary", help="pages, visits, changes, span and changes per page of a dataset or file"
    )
    add_input_options(summary)
    summary.add_argument("--json", action="store_true", help="print a JSON object")
    summary.set_defaults(func=_summary)

    listing = actions.add_parser("list", help="list the embedded datasets and their provenance")
    listing.add_argument("--json", action="store_true", help="print a JSON object")
    listing.set_defaults(func=_list)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _summary(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    progress(f"loading {args.input or args.dataset or 'ota-contrib'} ...")
    obs = load_observations(args)
    progress(f"loaded {obs.n_visits:,} visits of {obs.n_pages:,} pages; computing statistics ...")
    stats = obs.interval_stats
    summary = obs.summary()
    summary["interval_groups"] = stats.n_groups
    summary["seconds"] = round(time.perf_counter() - start, 3)
    if args.json:
        print_json(summary)
        return 0
    cpp = summary["changes_per_page"]
    lines = [
        f"source        {summary['source']}",
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


def _list(args: argparse.Namespace) -> int:
    from bayesrate import datasets

    if args.json:
        print_json({"datasets": datasets.PROVENANCE, "default": datasets.DEFAULT})
        return 0
    for name in datasets.names():
        prov = datasets.PROVENANCE[name]
        default = " (default)" if name == datasets.DEFAULT else ""
        print(f"{name}{default}: {prov['repository']}@{prov['commit'][:12]}, {prov['licence']}")
        print(f"    attribution: {prov['attribution']}")
    return 0
