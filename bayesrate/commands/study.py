"""``bayesrate study NAME``: run one of the reproduction studies."""

from __future__ import annotations

import argparse
import importlib

from bayesrate.studies import STUDIES


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("study", help="run a study that reproduces a source document's result")
    studies = parser.add_subparsers(dest="study", metavar="NAME")
    for name, module_name in STUDIES.items():
        try:
            spec = importlib.util.find_spec(module_name)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        sp = studies.add_parser(name, help=f"study {name!r} (see bayesrate study {name} --help)")
        sp.add_argument("--out", default=f"out/study-{name}", help="output directory")
        sp.add_argument("--seed", default=f"bayesrate-{name}", help="seed (int or string)")
        sp.add_argument("--fast", action="store_true", help="smaller run for smoke tests")
        sp.set_defaults(func=_run, study_module=module_name)
        sp.set_defaults(_add_args=module_name)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _run(args: argparse.Namespace) -> int:
    module = importlib.import_module(args.study_module)
    return int(module.run(args) or 0)
