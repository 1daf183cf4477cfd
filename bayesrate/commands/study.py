"""``bayesrate study NAME``: run one of the reproduction studies and write what it produced.

A thin layer over each study's ``run(*, seed, fast, progress, ...)`` (:mod:`bayesrate.studies`):
the options below map onto its keyword arguments; the result's tables, summary and figures
go to ``--out``. Study modules are imported only when a study runs.
"""

from __future__ import annotations

import argparse
import importlib

from bayesrate.commands.common import (
    UTC_TIME_HELP,
    add_quiet_option,
    check_output_dir,
    non_negative_int,
    positive_float,
    positive_int,
    print_json,
    progress_for,
    utc_time,
)

#: per study, its options (flag, argparse keywords): the flag's name is the keyword of the
#: study's ``run``; an option not given is not passed, so ``run``'s own default applies
OPTIONS: dict[str, list[tuple[str | tuple[str, ...], dict]]] = {
    "case-study": [
        ("--replications", {"type": positive_int, "help": "replications (default 2,000)"})
    ],
    "online": [
        ("--runs", {"type": positive_int, "help": "runs per experiment (default 100)"}),
        ("--samples", {"type": positive_int, "help": "crawls per run (default 2,000)"}),
        ("--prior-alpha", {"type": positive_float, "help": "Gamma prior α (default 1)"}),
        (
            "--prior-beta-intervals",
            {
                "type": positive_float,
                "help": "Gamma prior β in mean crawl intervals 1/p (default 0.1)",
            },
        ),
    ],
    "wikipedia": [
        (
            "--data-dir",
            {
                "required": True,
                "help": "directory holding wikipedia-revisions-westhad/ (not shipped: the "
                "traces have no licence)",
            },
        ),
    ],
    "recovery": [
        ("--pages", {"type": positive_int, "help": "pages per simulated data set (default 1,000)"}),
        (
            "--modulation-pages",
            {"type": positive_int, "help": "pages per modulation scenario (200)"},
        ),
        ("--draws", {"type": positive_int, "help": "NUTS draws per chain (default 1,000)"}),
        ("--tune", {"type": non_negative_int, "help": "NUTS tuning steps (default 1,000)"}),
        ("--chains", {"type": positive_int, "help": "chains (default 4)"}),
    ],
    "forecast": [
        ("--dataset", {"help": "embedded history (tldr-pages) or crawl log as approximate one"}),
        (
            ("--input", "--history"),
            {
                "dest": "history",
                "metavar": "FILE",
                "help": "change-history table (.csv, .parquet); --history is the same",
            },
        ),
        ("--crawl-every", {"type": positive_float, "metavar": "HOURS", "help": "default 24"}),
        (
            "--split",
            {
                "type": utc_time,
                "help": f"training/test split: {UTC_TIME_HELP} (default: end - horizon)",
            },
        ),
        ("--horizon-days", {"type": positive_float, "help": "test window (default 180)"}),
        (
            "--methods",
            {
                "help": "comma-separated: naive, cho, mle, the core models, mmpp, mmpp_mixture, "
                "any registered model (the research models: pip install -e research); default "
                "naive, cho, mle, censored, hierarchical, modulated, excursion (the recommended "
                "model)"
            },
        ),
        ("--max-pages", {"type": positive_int, "help": "score a random subset of pages"}),
        ("--draws", {"type": positive_int, "help": "NUTS draws per chain (default 2,000)"}),
        ("--tune", {"type": non_negative_int, "help": "NUTS tuning steps (default 300)"}),
        ("--chains", {"type": positive_int, "help": "chains (default 4)"}),
        (
            "--worlds",
            {
                "type": non_negative_int,
                "help": "worlds drawn from each method's predictive: the spread of coverage90 "
                "if it were the truth (default 500; 0: none)",
            },
        ),
        (
            "--model-config",
            {
                "action": "append",
                "metavar": "METHOD=JSON",
                "help": "model_config overrides of one model method, e.g. "
                "'shocks={\"epoch_days\": 365}' (repeat for several methods)",
            },
        ),
        (
            "--walks",
            {
                "choices": ("summed", "sampled"),
                "help": "dynamic models' walks after the last fitted epoch: summed out on "
                "the grid (default) or one sampled path per posterior draw",
            },
        ),
        ("--json", {"action": "store_true", "help": "print the scores as JSON"}),
    ],
    "bursts": [
        ("--dataset", {"help": "embedded dataset (default ota-contrib)"}),
        (
            ("--input", "--history"),
            {
                "dest": "history",
                "metavar": "FILE",
                "help": "change-history table (.csv, .parquet); --history is the same",
            },
        ),
        (
            "--crawl-log",
            {
                "action": "store_true",
                "help": "the dataset's crawl log as recorded, not a crawl of its history",
            },
        ),
        ("--crawl-every", {"type": positive_float, "metavar": "HOURS", "help": "default 24"}),
        (
            "--split",
            {
                "type": utc_time,
                "help": f"training/test split: {UTC_TIME_HELP} (default: end - horizon)",
            },
        ),
        ("--horizon-days", {"type": positive_float, "help": "test window (default 365)"}),
        ("--max-pages", {"type": positive_int, "help": "a random subset of pages"}),
        ("--replicates", {"type": positive_int, "help": "gap-check replicates (default 200)"}),
        (
            "--max-evaluations",
            {"type": positive_int, "help": "cap on the MMPP's Nelder-Mead steps (default 300)"},
        ),
    ],
}


def register(sub: argparse._SubParsersAction) -> None:
    from bayesrate.studies import STUDIES

    parser = sub.add_parser("study", help="run a study that reproduces a source document's result")
    studies = parser.add_subparsers(dest="study", metavar="NAME")
    for name, module_name in STUDIES.items():
        description = importlib.import_module(module_name).DESCRIPTION
        sp = studies.add_parser(name, help=description, description=description)
        sp.add_argument("--out", default=f"out/study-{name}", help="output directory")
        sp.add_argument("--seed", default=f"bayesrate-{name}", help="seed (int or string)")
        sp.add_argument("--fast", action="store_true", help="smaller run for smoke tests")
        add_quiet_option(sp)
        for flag, kwargs in OPTIONS.get(name, []):
            sp.add_argument(*((flag,) if isinstance(flag, str) else flag), **kwargs)
        sp.set_defaults(func=run)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def run(args: argparse.Namespace) -> int:
    from bayesrate.studies import STUDIES

    check_output_dir(args.out)  # before any work
    progress = progress_for(args)
    module = importlib.import_module(STUDIES[args.study])
    names = [_keyword(flag, kwargs) for flag, kwargs in OPTIONS.get(args.study, [])]
    keywords = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    as_json = bool(keywords.pop("json", False))  # a way of printing, not a study option
    result = module.run(seed=args.seed, fast=args.fast, progress=progress, **keywords)
    result.save(args.out)
    if as_json:
        print_json(result.json)
    elif result.text:
        print(result.text)
    progress(f"{args.study}: wrote {args.out}")
    return 0


def _keyword(flag: str | tuple[str, ...], kwargs: dict) -> str:
    """The study's keyword of an option: its ``dest``, else its (first) flag's name."""
    first = flag if isinstance(flag, str) else flag[0]
    return kwargs.get("dest") or first.removeprefix("--").replace("-", "_")
