"""Options and helpers shared by several subcommands (light imports only)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bayesrate.constants import DEFAULT_TIME_UNIT, TIME_UNITS


def add_input_options(parser: argparse.ArgumentParser, *, default_dataset: bool = True) -> None:
    """``--dataset NAME | --input FILE`` plus ``--time-unit``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--dataset",
        help="embedded dataset name (see 'bayesrate data list')"
        + ("; default ota-contrib" if default_dataset else ""),
    )
    group.add_argument(
        "--input", metavar="FILE", help="canonical observation table (.csv, .csv.gz, .parquet)"
    )
    parser.add_argument(
        "--time-unit",
        default=DEFAULT_TIME_UNIT,
        choices=sorted(TIME_UNITS),
        help="unit of numeric times in --input (default: hours)",
    )


def load_observations(args: argparse.Namespace, *, default_dataset: bool = True):
    """Observations named by ``--dataset``/``--input``."""
    from bayesrate import datasets
    from bayesrate.io import read_observations

    if getattr(args, "input", None):
        return read_observations(args.input, time_unit=args.time_unit)
    name = getattr(args, "dataset", None)
    if name is None and default_dataset:
        name = datasets.DEFAULT
    return datasets.load(name)


def progress(message: str) -> None:
    """One progress line on stderr (stdout stays clean for --json)."""
    print(f"[bayesrate] {message}", file=sys.stderr, flush=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=_default))


def _default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
