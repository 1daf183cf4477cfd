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
from bayesrate.errors import ArtifactError, ObservationError

#: command modules, in help order
COMMAND_MODULES = (
    "data",
    "estimate",
    "fit",
    "calibrate",
    "study",
    "schedule",
    "scale",
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


#: failures the user can act on: a message and exit status 1, no traceback
EXPECTED_ERRORS = (ObservationError, ArtifactError, OSError)
#: exit status of unexpected failures (``EX_SOFTWARE``)
INTERNAL_ERROR = 70
BUG_REPORT = (
    "this is a bug in bayesrate {version}: please report it on the bayesrate issue tracker "
    "with the command line, a description of the input and the traceback above"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; the one error boundary: every failure becomes a message and an exit code.

    Invalid options (argparse: a bad number, ``--draws -1``) print ``bayesrate CMD: error:
    ...`` and return 2. Expected failures (bad input, unusable artifacts or state files,
    convergence, file system errors, running out of memory) print ``bayesrate CMD: error:
    ...`` and return 1; an
    interrupt returns 130; anything else prints its traceback, says where to report it,
    and returns 70.
    """
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:  # the subcommand's usage, not the top level's
            innermost(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:  # usage errors (status 2, message printed), --help, --version
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    name = innermost(parser, args).prog.removeprefix("bayesrate ")
    try:
        return int(args.func(args) or 0)
    except EXPECTED_ERRORS as exc:
        print(f"bayesrate {name}: error: {_message(exc)}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # a decompression bomb, options asking for too much
        detail = f" ({exc})" if str(exc) else ""
        print(
            f"bayesrate {name}: error: out of memory{detail}: the input or the options need "
            "more memory than this machine has (a smaller input, a coarser option, or "
            "'bayesrate scale' for logs bigger than memory)",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(f"bayesrate {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the boundary: nothing unexpected escapes without a report
        import traceback

        traceback.print_exc()
        print(
            f"bayesrate {name}: internal error: {type(exc).__name__}: {exc}\n"
            + BUG_REPORT.format(version=__version__),
            file=sys.stderr,
        )
        return INTERNAL_ERROR


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the deepest subcommand named in ``args`` (``schedule due``)."""
    current = parser
    while True:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, sub.dest, None) if sub is not None else None
        if chosen not in getattr(sub, "choices", {}):
            return current
        current = sub.choices[chosen]


def _message(exc: BaseException) -> str:
    """The exception as one line."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
