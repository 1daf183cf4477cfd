"""Lazy readers of crawl logs and fetch logs: Parquet or CSV files → a Dask DataFrame.

A *crawl log* has one row per visit: ``page`` (or ``url``), ``time``, ``changed`` and
optionally ``domain`` (or ``host``). A *fetch log* has a content ``digest`` instead of
``changed``; ``changed`` is derived after the shuffle, per URL in time order
(:func:`bayesrate.io.fetch_log.changed_from_digests`). The input is a file or a directory
tree of ``.parquet`` / ``.csv`` / ``.csv.gz`` files, e.g. partitioned by time
(``date=2024-05-01/part-0.parquet``) or by host (``host=example.org/...``): Hive-style
``key=value`` directory names become columns (percent-decoded, as pyarrow, Dask and Spark
write them: ``host=a%20b`` is host ``a b``), so a log partitioned by host needs no host
column in its files. :attr:`LogSpec.hosts` records, per file, the host its directory gives
every one of its rows (a file with its own ``domain``/``host`` column keeps that column's
values, as the reader does), and :attr:`LogSpec.piece_rows` each piece's row count from
the Parquet metadata: together the rows per host of a host-partitioned log, without
reading it (:mod:`~bayesrate.scaleout.layout`).

Every Parquet row group (every CSV file) is one *piece*. Consecutive pieces (in file order:
a host directory's files together) are packed into input partitions of at most
:data:`INPUT_ROWS_PER_PARTITION` rows (:func:`batches`; a larger piece is a partition of its
own; a file's consecutive row groups are read in one call), each read only when a task
needs it (:func:`dask.dataframe.from_map`): a log of many small files or row groups costs
no more tasks than one written in large ones. Identifiers are read as text exactly as
written (no missing-value guessing, as :func:`bayesrate.io.table.load_table`). Each row
gets its file
(``source``, an index into :attr:`LogSpec.sources`) and row number (``row``), and a
``problem`` code for what is wrong with it on its own (:mod:`~bayesrate.scaleout.problems`):
bad rows travel with the others and are counted, never dropped silently.

Times become float hours since the Unix epoch: timezone-aware timestamps (Parquet
timestamps with a zone, ISO text with an offset or ``Z``), or numbers in ``time_unit``.
A timestamp without an offset is a problem, as in memory.
"""

from __future__ import annotations

import re
import urllib.parse
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.clock import NS_PER_HOUR
from bayesrate.constants import CHANGED, DEFAULT_TIME_UNIT, DOMAIN, PAGE, TIME, TIME_UNITS
from bayesrate.errors import ObservationError
from bayesrate.observations import DEFAULT_DOMAIN
from bayesrate.scaleout import problems as P

KINDS = ("crawl", "fetch")
DIGEST = "digest"
#: accepted names of the page and domain columns, in order of preference
PAGE_NAMES = (PAGE, "url")
DOMAIN_NAMES = (DOMAIN, "host")
_SUFFIXES = (".parquet", ".pq", ".csv", ".csv.gz")
#: identifiers: the Arrow-backed string type (no Python object per row)
ID_DTYPE = pd.StringDtype("pyarrow")
_OFFSET = re.compile(r"(?:[zZ]|[+-]\d\d(?::?\d\d)?)\s*$")
_UNREADABLE = (OSError, ValueError, EOFError, zlib.error, pd.errors.ParserError)
#: rows per partition after the shuffle, when the number of partitions is not given
ROWS_PER_PARTITION = 2_000_000
#: rows per input partition at most (small row groups and files packed together): half the
#: shuffle's, so the read adds little to a worker's peak memory
INPUT_ROWS_PER_PARTITION = 1_000_000
#: bytes of a CSV row, to estimate a CSV file's rows from its size
CSV_ROW_BYTES = 40


@dataclass(frozen=True)
class LogSpec:
    """What a log is and where its pieces are.

    Attributes
    ----------
    kind
        ``"crawl"`` (``changed`` given) or ``"fetch"`` (``digest`` given).
    sources
        The files, sorted (``source`` codes index this list).
    pieces
        ``(source, row_group or -1, first row)`` per partition.
    time_unit
        Unit of numeric times.
    hosts
        Per source: the host (domain) that a Hive directory ``host=H`` or ``domain=H`` of
        its path gives every row of the file, or ``None`` (no such directory, or the file
        has its own ``domain``/``host`` column, which the reader prefers).
    piece_rows
        Per piece: its row count from the Parquet metadata, or -1 (CSV: unknown unread).
    """

    kind: str
    sources: tuple[str, ...]
    pieces: tuple[tuple[int, int, int], ...]
    time_unit: str = DEFAULT_TIME_UNIT
    hosts: tuple[str | None, ...] = ()
    piece_rows: tuple[int, ...] = ()

    @property
    def value_column(self) -> str:
        return CHANGED if self.kind == "crawl" else DIGEST

    def meta(self) -> pd.DataFrame:
        """Empty frame with the canonical columns and dtypes."""
        cols = {
            PAGE: pd.Series(dtype=ID_DTYPE),
            DOMAIN: pd.Series(dtype=ID_DTYPE),
            TIME: pd.Series(dtype=np.float64),
            self.value_column: pd.Series(dtype=np.float64 if self.kind == "crawl" else ID_DTYPE),
            "problem": pd.Series(dtype=np.uint8),
            "source": pd.Series(dtype=np.int32),
            "row": pd.Series(dtype=np.int64),
        }
        return pd.DataFrame(cols)

    def estimated_rows(self) -> np.ndarray:
        """Rows per piece: the Parquet metadata's count, or a CSV file's size /
        :data:`CSV_ROW_BYTES` (at least 1)."""
        import os

        return np.array(
            [
                n if n >= 0 else max(1, os.path.getsize(self.sources[s]) // CSV_ROW_BYTES)
                for (s, _, _), n in zip(self.pieces, self.piece_rows, strict=True)
            ],
            dtype=np.int64,
        )


def find_files(path: str | Path) -> list[str]:
    """The log's data files: ``path`` itself, or every data file below it, sorted."""
    path = Path(path)
    if not path.exists():
        raise ObservationError(f"no such file or directory: {path}")
    if path.is_file():
        files = [path]
    else:
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and p.name.lower().endswith(_SUFFIXES)
            and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
        )
    if not files:
        raise ObservationError(f"no .parquet or .csv files under {path}")
    return [str(p) for p in files]


def scan(path: str | Path, *, kind: str = "crawl", time_unit: str = DEFAULT_TIME_UNIT) -> LogSpec:
    """Find the files of a log and its partitions (one per Parquet row group / CSV file)."""
    if kind not in KINDS:
        raise ObservationError(f"log kind must be one of {KINDS}, got {kind!r}")
    if time_unit not in TIME_UNITS:
        raise ObservationError(f"unknown time unit {time_unit!r}; use one of {sorted(TIME_UNITS)}")
    files = find_files(path)
    pieces: list[tuple[int, int, int]] = []
    piece_rows: list[int] = []
    hosts: list[str | None] = []
    for i, name in enumerate(files):
        hive = hive_values(name)
        host_key = next((k for k in DOMAIN_NAMES if k in hive), None)
        if name.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            try:
                file = pq.ParquetFile(name)
                meta = file.metadata
                columns = file.schema_arrow.names
            except _UNREADABLE as exc:
                raise ObservationError(f"cannot read {name} as Parquet: {exc}") from exc
            first = 0
            for g in range(meta.num_row_groups):
                pieces.append((i, g, first))
                rows = meta.row_group(g).num_rows
                piece_rows.append(rows)
                first += rows
        else:
            pieces.append((i, -1, 0))
            piece_rows.append(-1)
            columns = _csv_header(name)
            if not columns:  # 0 bytes: not even a header (a failed or truncated export?)
                raise ObservationError(
                    f"{name} is empty (no header, no rows): remove it from the log, or write "
                    "at least its header line"
                )
        own = any(c in columns for c in DOMAIN_NAMES)
        hosts.append(hive[host_key] if host_key and not own else None)
    return LogSpec(
        kind=kind,
        sources=tuple(files),
        pieces=tuple(pieces),
        time_unit=time_unit,
        hosts=tuple(hosts),
        piece_rows=tuple(piece_rows),
    )


def _csv_header(name: str) -> list[str]:
    try:
        return list(pd.read_csv(name, nrows=0, dtype=str, compression="infer").columns)
    except pd.errors.EmptyDataError:
        return []
    except _UNREADABLE as exc:
        raise ObservationError(f"cannot read {name}: {exc}") from exc


def batches(spec: LogSpec, rows: int = INPUT_ROWS_PER_PARTITION) -> list[tuple[int, ...]]:
    """Consecutive pieces packed into input partitions of at most ``rows`` rows.

    Returns piece indices per partition, in order; every piece appears exactly once (a
    piece larger than ``rows`` is a partition of its own).
    """
    if rows < 1:
        raise ValueError(f"rows per input partition must be >= 1, got {rows}")
    out: list[tuple[int, ...]] = []
    current: list[int] = []
    filled = 0
    for i, n in enumerate(spec.estimated_rows().tolist()):
        if current and filled + n > rows:
            out.append(tuple(current))
            current, filled = [], 0
        current.append(i)
        filled += n
    if current:
        out.append(tuple(current))
    return out


def read_log(spec: LogSpec, rows: int = INPUT_ROWS_PER_PARTITION) -> Any:
    """The log as a lazy Dask DataFrame of canonical rows with problem codes.

    One partition per batch of pieces (:func:`batches`, at most ``rows`` rows each).
    """
    import dask.dataframe as dd

    return dd.from_map(
        read_batch,
        batches(spec, rows),
        spec=spec,
        meta=spec.meta(),
        divisions=None,
        enforce_metadata=False,
    )


def read_batch(batch: tuple[int, ...], spec: LogSpec) -> pd.DataFrame:
    """One input partition: the pieces of a batch (indices into ``spec.pieces``), read and
    concatenated in order; a file's consecutive row groups are read in one call."""
    frames = []
    i = 0
    while i < len(batch):
        source, first_group, first_row = spec.pieces[batch[i]]
        groups = [first_group]
        while (
            first_group >= 0
            and i + len(groups) < len(batch)
            and spec.pieces[batch[i + len(groups)]][0] == source
        ):
            groups.append(spec.pieces[batch[i + len(groups)]][1])
        frames.append(read_rows(source, groups, first_row, spec))
        i += len(groups)
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True)


def read_rows(source: int, row_groups: list[int], first_row: int, spec: LogSpec) -> pd.DataFrame:
    """Consecutive row groups of one file (``[-1]``: a CSV file), starting at row
    ``first_row``: read, name the columns, convert times and flags, set problem codes."""
    name = spec.sources[source]
    raw = _read_raw(name, row_groups)
    raw = _with_hive_columns(raw, name)
    page_col = _pick(raw, PAGE_NAMES, name, required=True)
    domain_col = _pick(raw, DOMAIN_NAMES, name, required=False)
    value = spec.value_column
    _pick(raw, (TIME,), name, required=True)
    _pick(raw, (value,), name, required=True)
    n = len(raw)
    page = _ids(raw[page_col])
    domain = (
        _ids(raw[domain_col]) if domain_col else pd.Series([DEFAULT_DOMAIN] * n, dtype=ID_DTYPE)
    )
    hours, time_problem = time_hours(raw[TIME], spec.time_unit)
    page_problem = np.where(page.isna().to_numpy(), P.MISSING_PAGE, 0).astype(np.uint8)
    # a missing domain is reported as part of the page's identity
    domain_missing = domain.isna().to_numpy()
    page_problem[domain_missing & (page_problem == 0)] = P.MISSING_PAGE
    if spec.kind == "crawl":
        flags, bad = changed_flags(raw[CHANGED])
        value_problem = np.where(bad, P.BAD_CHANGED, 0).astype(np.uint8)
        values: Any = flags
    else:
        values = _ids(raw[DIGEST])
        value_problem = np.where(values.isna().to_numpy(), P.MISSING_DIGEST, 0).astype(np.uint8)
    return pd.DataFrame(
        {
            PAGE: page,
            DOMAIN: domain,
            TIME: hours,
            value: values,
            "problem": P.first_problem(page_problem, time_problem, value_problem),
            "source": np.full(n, source, dtype=np.int32),
            "row": first_row + np.arange(n, dtype=np.int64),
        }
    )


def _read_raw(name: str, row_groups: list[int]) -> pd.DataFrame:
    try:
        if row_groups[0] >= 0:
            import pyarrow.parquet as pq

            return pq.ParquetFile(name).read_row_groups(row_groups).to_pandas()
        return pd.read_csv(
            name,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            compression="infer",
        )
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except _UNREADABLE as exc:
        raise ObservationError(f"cannot read {name}: {exc}") from exc


def hive_values(name: str) -> dict[str, str]:
    """The ``key=value`` directory names of a file's path, values percent-decoded.

    A key repeated deeper in the path takes the deeper value.
    """
    out = {}
    for part in Path(name).parent.parts:
        key, sep, value = part.partition("=")
        if sep and key:
            out[key] = urllib.parse.unquote(value)
    return out


def _with_hive_columns(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Add ``key=value`` directory names of the file's path as columns (if absent)."""
    extra = {k: v for k, v in hive_values(name).items() if k not in frame.columns}
    return frame.assign(**extra) if extra else frame


def piece_domains(piece: tuple[int, int, int], spec: LogSpec) -> pd.Series:
    """Rows per domain of one piece, reading only its domain column (if it has one).

    The domains are those :func:`read_rows` gives the rows (missing ones are not
    counted: those rows are problems, wherever they go).
    """
    source, row_group, _ = piece
    name = spec.sources[source]
    try:
        if row_group >= 0:
            import pyarrow.parquet as pq

            file = pq.ParquetFile(name)
            wanted = [c for c in DOMAIN_NAMES if c in file.schema_arrow.names][:1]
            raw = file.read_row_group(row_group, columns=wanted).to_pandas()
            n = file.metadata.row_group(row_group).num_rows
        else:
            header = _csv_header(name)
            wanted = [c for c in DOMAIN_NAMES if c in header][:1] or header[:1]
            raw = pd.read_csv(
                name, usecols=wanted, dtype=str, keep_default_na=False, na_values=[""]
            )
            n = len(raw)
            raw = raw[[c for c in wanted if c in DOMAIN_NAMES]]
    except pd.errors.EmptyDataError:
        return pd.Series(dtype=np.int64)
    except _UNREADABLE as exc:
        raise ObservationError(f"cannot read {name}: {exc}") from exc
    if not len(raw.columns):
        raw = pd.DataFrame(index=pd.RangeIndex(n))
    raw = _with_hive_columns(raw, name)
    domain_col = _pick(raw, DOMAIN_NAMES, name, required=False)
    domain = (
        _ids(raw[domain_col]) if domain_col else pd.Series([DEFAULT_DOMAIN] * n, dtype=ID_DTYPE)
    )
    counts = domain.dropna().value_counts()
    return pd.Series(counts.to_numpy(dtype=np.int64), index=counts.index.astype(object))


def _pick(frame: pd.DataFrame, names: tuple[str, ...], source: str, *, required: bool) -> str:
    for n in names:
        if n in frame.columns:
            return n
    if required and len(frame.columns):
        raise ObservationError(
            f"{source} lacks column {' or '.join(map(repr, names))}; has {list(frame.columns)}",
            field=names[0],
        )
    return "" if not required else names[0]


def _ids(col: pd.Series) -> pd.Series:
    """Identifiers as a string column (bytes decoded, numbers as text), missing as NA."""
    if isinstance(col.dtype, pd.StringDtype):
        return col.reset_index(drop=True)
    missing = col.isna().to_numpy()
    values = col.to_numpy(dtype=object)
    if pd.api.types.is_object_dtype(col.dtype) and pd.api.types.infer_dtype(col, skipna=True) in (
        "string",
        "empty",
    ):
        return pd.Series(values, dtype=ID_DTYPE)
    out = np.array(
        [
            None if m else (v.decode() if isinstance(v, bytes) else str(v))
            for v, m in zip(values, missing, strict=True)
        ],
        dtype=object,
    )
    return pd.Series(out, dtype=ID_DTYPE)


def time_hours(col: pd.Series, time_unit: str) -> tuple[np.ndarray, np.ndarray]:
    """A time column as float hours since the epoch, and a problem code per row."""
    n = len(col)
    problem = np.zeros(n, dtype=np.uint8)
    missing = col.isna().to_numpy()
    if isinstance(col.dtype, pd.DatetimeTZDtype):
        ns = col.dt.tz_convert("UTC").dt.as_unit("ns").to_numpy(dtype="int64", na_value=0)
        hours = np.where(missing, np.nan, ns / NS_PER_HOUR)
    elif pd.api.types.is_datetime64_dtype(col.dtype):
        hours = np.full(n, np.nan)
        problem[:] = P.NAIVE_TIME
    elif pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        hours = col.to_numpy(dtype=np.float64, na_value=np.nan) * TIME_UNITS[time_unit]
        problem[~missing & ~np.isfinite(hours)] = P.NONFINITE_TIME
    else:
        text = col.astype(object).where(~missing, None)
        numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
        is_number = ~np.isnan(numbers) | text.isin(["nan", "NaN", "inf", "-inf"]).to_numpy()
        hours = numbers * TIME_UNITS[time_unit]
        problem[is_number & ~np.isfinite(hours)] = P.NONFINITE_TIME
        rest = ~missing & ~is_number
        if rest.any():
            strings = text[rest].astype(str)
            has_offset = strings.str.contains(_OFFSET).to_numpy()
            parsed = pd.to_datetime(strings, format="ISO8601", utc=True, errors="coerce")
            ok = parsed.notna().to_numpy()
            ns = parsed.dt.as_unit("ns").to_numpy(dtype="int64", na_value=0)
            sub = np.where(ok & has_offset, ns / NS_PER_HOUR, np.nan)
            hours[rest] = sub
            codes = np.where(~ok, P.BAD_TIME, np.where(has_offset, 0, P.NAIVE_TIME))
            problem[rest] = codes
            if (ok & has_offset).any():
                problem[is_number & (problem == 0)] = P.MIXED_TIME
    problem[missing] = P.MISSING_TIME
    return np.where(problem == 0, hours, np.nan), problem


def changed_flags(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``changed`` as float (NaN where missing) and a mask of values that are not 0/1."""
    if pd.api.types.is_bool_dtype(col.dtype):
        values = col.astype("float64").to_numpy(na_value=np.nan)
        return values, np.zeros(len(values), dtype=bool)
    present = col.notna().to_numpy()
    if pd.api.types.is_numeric_dtype(col.dtype):
        numeric = col.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        text = col.astype("string").str.strip().str.lower()
        text = text.replace({"true": "1", "false": "0"})
        numeric = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    invalid = present & ~np.isin(numeric, (0.0, 1.0))
    return np.where(invalid, np.nan, numeric), invalid
