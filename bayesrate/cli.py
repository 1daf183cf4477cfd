"""The ``bayesrate`` command line.

Each subcommand lives in :mod:`bayesrate.commands` as a module with ``register(sub)``
that adds its parser and sets ``func``. Command modules import nothing heavy at module
level, so ``bayesrate --help`` never imports PyMC.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from bayesrate import __version__
from bayesrate.errors import ArtifactError, ConvergenceError, ObservationError

#: command modules, in help order
COMMAND_MODULES = (
    "data",
    "estimate",
    "fit",
    "calibrate",
    "study",
    "schedule",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesrate",
        description="Bayesian change-rate models for interval-censored crawl observations.",
    )
    parser.add_argument("--version", action="version", version=f"bayesrate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"bayesrate.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ObservationError, ArtifactError, ConvergenceError) as exc:
        print(f"bayesrate {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
