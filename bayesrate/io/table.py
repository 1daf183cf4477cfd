"""The canonical observation table from CSV, CSV.gz, TSV or Parquet files; tables out.

Columns ``page``, ``time``, ``changed`` and optionally ``domain`` (``docs/data.md``).
Identifiers are read as text exactly as written and no cell is guessed to be missing.
:func:`write_table` writes a result table in the format its file name says (atomically),
:func:`output_format` checks that name before any work.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bayesrate.constants import DEFAULT_TIME_UNIT
from bayesrate.errors import ObservationError
from bayesrate.observations import ID_COLUMNS, Observations, ids_as_strings


def load_table(path: str | Path, *, id_columns: Iterable[str] = ID_COLUMNS) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame (no validation of its content).

    Identifier columns (``id_columns``) are read as strings exactly as written. No cell is
    guessed to be missing: only empty cells are (``"NA"``, ``"null"``, ``"None"`` are kept
    as text, so that an id is never rewritten and a stray word in a numeric column is
    reported by row instead of becoming a silent missing value).

    Raises
    ------
    ObservationError
        Naming the file, when it does not exist, is a directory, has an unsupported type,
        is empty, or cannot be read as its type (truncated or non-gzip ``.gz``, garbage).
    """
    path = Path(path)
    id_columns = tuple(id_columns)
    if not path.exists():
        raise ObservationError(f"no such file: {path}")
    if path.is_dir():
        raise ObservationError(f"{path} is a directory, not a table file")
    suffixes = "".join(path.suffixes).lower()
    if suffixes.endswith((".parquet", ".pq")):
        kind = "Parquet"
    elif suffixes.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")):
        kind = "TSV" if ".tsv" in suffixes else "CSV"
    else:
        raise ObservationError(
            f"unsupported file type {path.suffix!r} for {path}; use .csv, .csv.gz or .parquet"
        )
    try:
        if kind == "Parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(
                path,
                sep="\t" if kind == "TSV" else ",",
                dtype=dict.fromkeys(id_columns, str),
                keep_default_na=False,
                na_values=[""],
            )
    except pd.errors.EmptyDataError as exc:
        raise ObservationError(f"{path} is empty (no header, no rows)") from exc
    except (OSError, ValueError, EOFError, zlib.error, pd.errors.ParserError) as exc:
        raise ObservationError(f"cannot read {path} as {kind}: {exc}") from exc
    return ids_as_strings(frame, id_columns)


def read_observations(
    path: str | Path,
    *,
    time_unit: str = DEFAULT_TIME_UNIT,
    origin: pd.Timestamp | str | None = None,
) -> Observations:
    """Read a canonical observation table (``page``, ``time``, ``changed``, ``domain``).

    Parameters
    ----------
    path
        ``.csv``, ``.csv.gz`` or ``.parquet`` file.
    time_unit
        Unit of numeric times (default hours); ISO timestamps need an offset or ``Z``.
    origin
        Timestamp that numeric time 0 stands for (default: the Unix epoch).
    """
    frame = load_table(path)
    return Observations.from_frame(frame, time_unit=time_unit, origin=origin, source=str(path))


#: output formats by the file name's ending (lower case)
OUTPUT_FORMATS = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".tsv": "tsv",
    ".tsv.gz": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
}


def output_format(path: str | Path, allowed: Iterable[str] | None = None) -> str:
    """The format of an output table from its file name (no suffix: CSV).

    Parameters
    ----------
    path : str or Path
        The output file.
    allowed : iterable of str, optional
        Formats the caller writes (default: every one of :data:`OUTPUT_FORMATS`).

    Raises
    ------
    ObservationError
        An ending that is not a supported format (``rates.xlsx``), so that a file's
        name never says one format while it holds another.
    """
    path = Path(path)
    allowed = tuple(allowed) if allowed is not None else tuple(set(OUTPUT_FORMATS.values()))
    suffixes = "".join(path.suffixes).lower()
    if not suffixes:
        return "csv"
    for ending, kind in sorted(OUTPUT_FORMATS.items(), key=lambda kv: -len(kv[0])):
        if suffixes.endswith(ending) and kind in allowed:
            return kind
    endings = ", ".join(e for e, k in OUTPUT_FORMATS.items() if k in allowed)
    raise ObservationError(f"unsupported output type for {path}: use one of {endings}", field="out")


def write_table(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` in the format of ``path``'s name, atomically (:mod:`bayesrate.atomic`).

    CSV (``.gz``: compressed), TSV, Parquet, or JSON (a list of records; NaN and infinities
    become ``null``). A failed write leaves any existing file untouched.
    """
    from bayesrate.atomic import atomic_path

    path = Path(path)
    kind = output_format(path)
    gz = "".join(path.suffixes).lower().endswith(".gz")
    with atomic_path(path) as tmp:
        if kind == "parquet":
            frame.to_parquet(tmp, index=False)
        elif kind == "json":
            frame.to_json(tmp, orient="records", indent=2, double_precision=15)
        else:
            frame.to_csv(
                tmp,
                index=False,
                sep="\t" if kind == "tsv" else ",",
                compression="gzip" if gz else None,
            )
    return path
