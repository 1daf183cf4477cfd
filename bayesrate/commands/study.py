"""``bayesrate study NAME``: run one of the reproduction studies.

Study modules import only light packages at module level (PyMC inside ``run``), so
building this parser stays cheap.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Callable

from bayesrate.commands.common import check_output_dir
from bayesrate.studies import STUDIES


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("study", help="run a study that reproduces a source document's result")
    studies = parser.add_subparsers(dest="study", metavar="NAME")
    for name, module_name in STUDIES.items():
        if importlib.util.find_spec(module_name) is None:
            continue  # not built yet
        module = importlib.import_module(module_name)
        sp = studies.add_parser(name, help=getattr(module, "DESCRIPTION", name))
        sp.add_argument("--out", default=f"out/study-{name}", help="output directory")
        sp.add_argument("--seed", default=f"bayesrate-{name}", help="seed (int or string)")
        sp.add_argument("--fast", action="store_true", help="smaller run for smoke tests")
        if hasattr(module, "add_arguments"):
            module.add_arguments(sp)
        sp.set_defaults(func=_checked(module.run))
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _checked(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` after checking that ``--out`` can be written (before any work)."""

    def checked(args: argparse.Namespace) -> int:
        check_output_dir(args.out)
        return run(args)

    return checked
