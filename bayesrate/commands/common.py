"""Options and helpers shared by several subcommands (light imports only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bayesrate.constants import DEFAULT_TIME_UNIT, TIME_UNITS

#: ``--objective`` of ``schedule plan`` and ``scale rates``: the names of
#: :data:`bayesrate.scheduler.optimal.OBJECTIVES` and their aliases (``poisson``)
OBJECTIVE_CHOICES = ("freshness", "poisson", "periodic", "harmonic")
OBJECTIVE_HELP = (
    "what the fetch rates maximise: freshness (or its synonym poisson, the default) for "
    "Poisson-timed fetches (Azar et al.), periodic for fetches on a fixed schedule (Cho & "
    "Garcia-Molina), harmonic for harmonic staleness (Kolobov et al.)"
)


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
    parser.add_argument(
        "--keep-silent-runs",
        action="store_true",
        help="Open Terms Archive datasets: keep every nominal run, even where the whole "
        "collection was improbably silent (by default such stretches, probable outages, "
        "are merged into single intervals)",
    )


def load_observations(args: argparse.Namespace, *, default_dataset: bool = True):
    """Observations named by ``--dataset``/``--input``."""
    from bayesrate import datasets
    from bayesrate.io import read_observations

    if getattr(args, "input", None):
        from bayesrate.errors import ObservationError

        try:
            return read_observations(args.input, time_unit=args.time_unit)
        except ObservationError as exc:
            if exc.field == "changed" and _is_history_table(args.input):
                raise ObservationError(
                    f"{args.input} is a change history (page,time,event), not a visit table: "
                    f"'bayesrate data crawl --input {args.input} --every HOURS --out visits.csv' "
                    "makes the visit table a crawl on that schedule would log",
                    field="changed",
                ) from exc
            raise
    name = getattr(args, "dataset", None)
    if name is None and default_dataset:
        name = datasets.DEFAULT
    return datasets.load(name, merge_silences=not getattr(args, "keep_silent_runs", False))


def _is_history_table(path: str) -> bool:
    """Whether ``path`` is an event table (``event`` column, no ``changed``)."""
    from bayesrate.constants import CHANGED
    from bayesrate.history import EVENT
    from bayesrate.io.table import load_table

    columns = load_table(path).columns
    return EVENT in columns and CHANGED not in columns


def progress(message: str) -> None:
    """One progress line on stderr (stdout stays clean for --json)."""
    print(f"[bayesrate] {message}", file=sys.stderr, flush=True)


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress lines on stderr (errors and the results still print)."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines on stderr (by default every fit reports its chains, draws, "
        "divergences and elapsed time as it goes)",
    )


def progress_for(args: argparse.Namespace) -> Callable[[str], None]:
    """:func:`progress`, or a callback that says nothing under ``--quiet``."""
    from bayesrate.models.progress import silent

    return silent if getattr(args, "quiet", False) else progress


def print_json(obj: Any) -> None:
    """Print strict JSON: NaN and infinities become ``null`` (no ``NaN``/``Infinity``)."""
    print(json.dumps(strict_json(obj), indent=2, allow_nan=False))


def strict_json(value: Any) -> Any:
    """``value`` with numpy types made plain and non-finite floats replaced by ``None``."""
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return [strict_json(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


# ---------------------------------------------------------------------- argument types
def _number(text: str, kind: type) -> Any:
    import math

    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def model_name(text: str) -> str:
    """argparse type: a registered model's name, its class loaded (a research model's entry
    point on first use); an unknown name says how to install the research models."""
    from bayesrate.models import get_model

    try:
        get_model(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def comparable_model_name(text: str) -> str:
    """argparse type: :func:`model_name` of a model with integrated leave-one-page-out."""
    from bayesrate.models import get_model

    if not get_model(model_name(text)).marginal_loo:
        raise argparse.ArgumentTypeError(
            f"the {text} model has no integrated leave-one-page-out to compare on"
        )
    return text


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def _fraction(text: str) -> float:
    """A number or a fraction ``a/b`` (``1/7``: once a week), finite."""
    import math

    if "/" not in text:
        return _number(text, float)
    top, _, bottom = text.partition("/")
    a, b = _number(top.strip(), float), _number(bottom.strip(), float)
    if b == 0 or not math.isfinite(a / b):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return a / b


def positive_fraction(text: str) -> float:
    """argparse type: a number > 0, or a fraction (``--budget 1/7``: once a week)."""
    value = _fraction(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0 (e.g. 0.5 or 1/7), got {text!r}")
    return value


def non_negative_fraction(text: str) -> float:
    """argparse type: a number >= 0, or a fraction (``--budget 1/7``: once a week)."""
    value = _fraction(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (e.g. 0.5 or 1/7), got {text!r}")
    return value


def unit_fraction(text: str) -> float:
    """argparse type: a share in ``[0, 1]``, as a number or a fraction (``--hedge 1/4``)."""
    value = non_negative_fraction(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a share in [0, 1], got {text!r}")
    return value


#: help text of options read by :func:`utc_time`
UTC_TIME_HELP = "an ISO time with a time zone, or a date alone meaning 00:00 UTC (2020-01-01)"


def utc_time(text: str) -> str:
    """argparse type: a time option; a date alone (``2020-01-01``) means 00:00 UTC.

    Other text is returned unchanged (a timestamp without a time zone is still refused
    where it is read, as in data files: only a bare date has an obvious meaning).
    """
    import re

    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
        return text.strip() + "T00:00:00Z"
    return text


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def memory_size(text: str) -> str:
    """argparse type: a memory size Dask understands (``4GiB``, ``500 MB``, ``1e9`` bytes)
    or ``auto``; refused at parse time instead of inside the cluster's start."""
    if text.strip().lower() == "auto":
        return text
    from dask.utils import parse_bytes

    try:
        size = parse_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a memory size such as 4GiB, 500MB or auto, got {text!r}"
        ) from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"must be a memory size > 0, got {text!r}")
    return text


# ---------------------------------------------------------------------- outputs
def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_dir(path: str | Path, what: str = "--out") -> Path:
    """Raise unless ``path`` is, or can be created as, a writable directory.

    Checked before any work, so that a run does not fail at its end (nothing is created).
    """
    from bayesrate.errors import ObservationError

    path = Path(path)
    base = _nearest_existing(path)
    if base == path.absolute() and not path.is_dir():
        raise ObservationError(f"{what} {path} exists and is not a directory")
    if not base.is_dir():
        raise ObservationError(f"{what} {path}: {base} is a file, not a directory")
    try:  # a real probe: permission bits do not tell (root, read-only mounts, /proc)
        tempfile.TemporaryFile(dir=base).close()
    except OSError as exc:
        raise ObservationError(f"{what} {path}: cannot write in {base} ({exc.strerror})") from exc
    return path


def check_output_file(path: str | Path, what: str = "--out") -> Path:
    """Raise unless a file can be written at ``path`` (checked before any work)."""
    from bayesrate.errors import ObservationError

    path = Path(path)
    if path.is_dir():
        raise ObservationError(f"{what} {path} is a directory; give a file name")
    if path.exists() and not path.is_file():  # /dev/full, a FIFO: never replaced by a file
        raise ObservationError(
            f"{what} {path} exists and is not a regular file (a device, pipe or socket); "
            "give a file name"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise ObservationError(f"{what} {path} exists and is not writable")
    check_output_dir(path.parent, what=f"{what} {path}: directory")
    return path
