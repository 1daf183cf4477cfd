"""Restartable Parquet output: parts committed one by one, the whole committed by rename.

A stage writes ``OUT`` as tables of parts (``OUT/<table>/part-00017.parquet``, one file per
partition, numbered like the stage's input partitions; in the host layout one file per
host of the part, ``OUT/<table>/host=<H>/part-00017.parquet``,
:mod:`~bayesrate.scaleout.layout`) plus ``OUT/_manifest.json``. A part's marker lists its
files, so a later stage finds part ``K``'s files without listing the host directories
(:func:`part_files`). While
it runs everything goes to a staging directory beside ``OUT``,
``.<name>.staging-<key>``, where ``<key>`` hashes the stage's arguments:

- a part's files are written under temporary names and renamed; then its *marker*
  (``_parts/part-00017.json``, the part's summary and its files) is renamed into place. A
  part is done exactly when its marker exists; files of a part without a marker are
  rewritten (their names depend only on the part's rows, so a rerun writes the same
  names: the host layout's ``host=H`` directories of a part come from its rows).
- when every part is done the manifest is written and the staging directory replaces
  ``OUT`` (:func:`bayesrate.atomic` style: the old ``OUT`` is moved aside, then removed).

A run killed at any point and rerun with the same arguments finds the same staging
directory, skips the parts that are done, and commits the same output as one clean run:
nothing is duplicated (a part has one file name) and nothing is lost (the commit waits
for every marker). Different arguments use a different staging directory. Workers write
the parts, so ``OUT`` must be on a file system every worker sees (docs/scale.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from bayesrate.atomic import lock_directory

MANIFEST = "_manifest.json"
MARKERS = "_parts"
#: the key of a part's file list in its marker
FILES = "files"


def part_name(k: int) -> str:
    return f"part-{k:05d}"


def run_key(arguments: Mapping[str, Any]) -> str:
    """A short stable hash of a stage's arguments (what makes a rerun "the same run")."""
    text = json.dumps(arguments, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: staging directories this process holds the lock of (path → descriptor)
_HELD: dict[str, int] = {}


def _release(path: str, fd: int) -> None:
    """Release the lock held by ``fd`` on the staging directory ``path`` (once: a
    descriptor another :class:`Staging` of this process released is not closed again)."""
    if _HELD.get(path) == fd:
        del _HELD[path]
        os.close(fd)


class Staging:
    """The staging directory of one stage run.

    Parameters
    ----------
    out
        Final output directory.
    arguments
        The stage's arguments; their hash names the staging directory.
    """

    def __init__(self, out: str | Path, arguments: Mapping[str, Any]) -> None:
        self.out = Path(out).absolute()
        self.arguments = dict(arguments)
        self.key = run_key(self.arguments)
        self.path = self.out.parent / f".{self.out.name}.staging-{self.key}"
        self._lock: int | None = None

    def open(self) -> Staging:
        """Create the staging directory if needed (a rerun keeps what is there) and lock it.

        The lock (:func:`~bayesrate.atomic.lock_directory`, held until :meth:`commit` or
        :meth:`discard`, or the process ends) makes a run in another process with the same
        arguments wait instead of writing into the same directory; if the first one
        committed it meanwhile (the directory became the output), the second starts a fresh
        one. Within one process, runs are one after the other: a rerun after a failure
        takes over the lock its failed run left.
        """
        if self._lock is not None:
            return self
        while True:
            (self.path / MARKERS).mkdir(parents=True, exist_ok=True)
            fd = _HELD.get(str(self.path))
            if fd is None:
                fd = lock_directory(self.path)
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._lock = _HELD[str(self.path)] = fd
                return self
            # committed or removed while we waited: start again
            if _HELD.get(str(self.path)) == fd:
                _release(str(self.path), fd)
            else:
                os.close(fd)

    def _unlock(self) -> None:
        if self._lock is not None:
            _release(str(self.path), self._lock)
            self._lock = None

    def pending(self, n_parts: int) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """Open the staging directory; the parts already done and those still to do."""
        self.open()
        done = self.done()
        return done, [k for k in range(n_parts) if k not in done]

    def is_committed(self) -> bool:
        """Whether ``out`` already holds this very run's output, whole.

        An output of the same run with a part's marker or file missing (deleted by hand,
        a damaged disk) is not: the rerun computes it again and replaces it, instead of
        saying "done" over a hole (issue 54).
        """
        manifest = self.out / MANIFEST
        if not manifest.is_file():
            return False
        try:
            doc = json.loads(manifest.read_text())
            return doc.get("run_key") == self.key and not missing_files(self.out, doc)
        except (OSError, json.JSONDecodeError, AttributeError, TypeError, ValueError):
            return False

    def done(self) -> dict[int, dict[str, Any]]:
        """Summaries of the parts already committed to staging, by part number."""
        out = {}
        directory = self.path / MARKERS
        if not directory.is_dir():
            return out
        for marker in sorted(directory.glob("part-*.json")):
            out[int(marker.stem.split("-")[1])] = json.loads(marker.read_text())
        return out

    def commit(self, manifest: Mapping[str, Any]) -> Path:
        """Write the manifest and make the staging directory the output, atomically."""
        for leftover in self.path.rglob(".*.tmp"):  # half-written files of a killed run
            leftover.unlink(missing_ok=True)
        doc = {"run_key": self.key, "arguments": self.arguments, **manifest}
        write_text(self.path / MANIFEST, json.dumps(doc, indent=2, default=str) + "\n")
        old = None
        if self.out.exists():
            old = Path(
                tempfile.mkdtemp(prefix=f".{self.out.name}.", suffix=".old", dir=self.out.parent)
            )
            os.replace(self.out, old / self.out.name)
        os.replace(self.path, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        # staging directories of earlier runs into this output with other arguments (failed
        # or killed and never resumed) would stay forever: this output supersedes them; one
        # that a running run holds is its own (it commits or discards it)
        self._unlock()
        for stale in self.out.parent.glob(f".{self.out.name}.staging-*"):
            try:  # this process's own failed runs are over; another process's may be running
                fd = _HELD.get(str(stale)) or lock_directory(stale, wait=False)
            except FileNotFoundError:  # removed meanwhile
                continue
            if fd is not None:
                shutil.rmtree(stale, ignore_errors=True)
                _release(str(stale), fd)
        return self.out

    def discard(self) -> None:
        """Remove the staging directory (and release its lock)."""
        shutil.rmtree(self.path, ignore_errors=True)
        self._unlock()


def missing_files(directory: str | Path, manifest: Mapping[str, Any]) -> list[str]:
    """Markers and part files of a committed output that are not there (relative paths).

    Every part ``0 .. partitions - 1`` of the manifest has a marker, and every file its
    marker lists exists.
    """
    root = Path(directory)
    missing = []
    for k in range(int(manifest.get("partitions", 0))):
        marker = root / MARKERS / f"{part_name(k)}.json"
        if not marker.is_file():
            missing.append(f"{MARKERS}/{marker.name}")
            continue
        listed = json.loads(marker.read_text()).get(FILES) or []
        missing.extend(f for f in listed if not (root / f).is_file())
    return missing


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` under a temporary name, then rename it into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_part(
    staging_path: str | Path,
    k: int,
    tables: Mapping[str, pd.DataFrame],
    summary: Mapping[str, Any],
) -> dict[str, Any]:
    """Commit part ``k``: each table's file, then the part's marker (runs on a worker).

    ``tables`` maps a directory relative to the output (``pages``, or
    ``pages/host=example.org``) to the rows written there as ``part-K.parquet``.

    Returns ``summary`` with ``files`` (the part's files, relative), what the marker holds.
    """
    root = Path(staging_path)
    name = part_name(k)
    files = []
    for table, frame in tables.items():
        directory = root / table
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{name}.parquet"
        tmp = directory / f".{name}.{uuid.uuid4().hex}.tmp"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, target)
        files.append(f"{table}/{name}.parquet")
    summary = {**summary, FILES: files}
    write_text(root / MARKERS / f"{name}.json", json.dumps(summary, default=str))
    return summary


def part_files(directory: str | Path, table: str, k: int) -> list[Path]:
    """The files of part ``k`` of ``table`` in a (staged or committed) stage output.

    From the part's marker; outputs whose markers do not list files (written before
    layouts) have one file, ``table/part-K.parquet``.
    """
    root = Path(directory)
    name = part_name(k)
    marker = root / MARKERS / f"{name}.json"
    listed = json.loads(marker.read_text()).get(FILES) if marker.is_file() else None
    if listed is None:
        return [root / table / f"{name}.parquet"]
    return [root / f for f in listed if f.split("/", 1)[0] == table]


def read_part(
    directory: str | Path, table: str, k: int, columns: list[str] | None = None
) -> pd.DataFrame:
    """Part ``k`` of ``table`` as one frame (all its hosts' files, in host order).

    A part without files (a host layout part whose table has no rows) is an empty frame
    with ``columns``.
    """
    frames = [pd.read_parquet(f, columns=columns) for f in part_files(directory, table, k)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns or []})
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def read_table(directory: str | Path, table: str, parts: list[int] | None = None) -> pd.DataFrame:
    """A committed table (all parts, or the given ones) as one pandas DataFrame.

    Files in path order (host directories, then parts); the host layout's files are read
    one by one, so the frame has no ``host`` column (``domain`` holds the host).
    """
    root = Path(directory) / table
    files = (
        sorted(root.rglob("part-*.parquet"))
        if parts is None
        else [f for k in parts for f in part_files(directory, table, k)]
    )
    frames = [pd.read_parquet(f) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_manifest(directory: str | Path, stage: str | None = None) -> dict[str, Any]:
    """The manifest of a committed stage output.

    Parameters
    ----------
    directory : str or Path
        The stage's output directory.
    stage : str, optional
        The stage that must have written it (``"aggregate"``, ``"posteriors"``,
        ``"rates"``): a later stage given another stage's output would commit an empty
        dataset or a plan of 0 URLs (issue 54).

    Raises
    ------
    ObservationError
        No manifest, an unreadable one, or one of another stage.
    """
    from bayesrate.errors import ObservationError

    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise ObservationError(
            f"{directory} is not a committed bayesrate scale output (no {MANIFEST}); "
            "run the previous stage first"
        )
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ObservationError(f"{path} is not a valid manifest ({exc})") from None
    if not isinstance(manifest, dict):
        raise ObservationError(f"{path} is not a valid manifest (not a JSON object)")
    if stage is not None and manifest.get("stage") != stage:
        got = manifest.get("stage")
        what = f"the output of 'scale {got}'" if isinstance(got, str) else "of no known stage"
        raise ObservationError(
            f"{directory} is {what}; this stage reads the output of 'scale {stage}'",
            field="input",
        )
    return manifest
