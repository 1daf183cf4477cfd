"""SQLite persistence of the scheduler state: durable, atomic, safe with many writers.

:class:`Store` mirrors a :class:`~bayesrate.scheduler.state.SchedulerState` in an SQLite file
(``journal_mode=WAL``, ``synchronous=FULL``). What it guarantees (``docs/reliability.md``):

- **Durable**: once :meth:`Store.observe` (or :meth:`~Store.add`, :meth:`~Store.reset`,
  :meth:`~Store.save_targets`) returns, the change is on disk and survives a crash of the
  process or the machine.
- **Atomic**: each call is one transaction; a crash mid-batch leaves the previous state,
  never half a batch; a rejected batch (:class:`~bayesrate.errors.ObservationError`)
  changes nothing.
- **Many writers**: every write takes the database's write lock first (``BEGIN
  IMMEDIATE``), then re-reads, inside that transaction, the rows it touches (by URL) and the
  host table, applies the batch to those rows (the maths of
  :meth:`SchedulerState.observe <bayesrate.scheduler.state.SchedulerState.observe>`) and
  writes back only those rows; new URLs and hosts get ids allocated from the database
  (its largest id + 1, under the lock), counters are advanced from their stored values. No
  in-memory copy is ever written over the file, so every acknowledged observation survives
  any interleaving of writers and no URL changes identity. ``save_targets`` writes only
  the ``target`` column. A writer that cannot get the lock waits up to ``timeout`` seconds
  (SQLite's busy timeout), then fails with :class:`~bayesrate.errors.ArtifactError` having
  applied nothing.
- **Readers** load a consistent snapshot (one read transaction); :attr:`Store.state` is
  loaded on first use. After a write the snapshot is patched when no other process wrote
  since it was loaded, else reloaded on next use.
- **Verified before use**: a file is opened read-only until ``meta.kind``,
  ``meta.schema_version`` (1: Gamma posteriors; 2: grid posteriors) and the tables are
  verified, so a foreign file is never modified; damaged metadata and rows that cannot be
  a scheduler state (α ≤ 0, host ids out of range, grid log-weights of the wrong size or
  not finite, ...) raise :class:`~bayesrate.errors.ArtifactError` naming the field and
  URLs.
- **Fetch times** must be plausible dates no later than now plus a clock-skew tolerance
  (:mod:`bayesrate.scheduler.wallclock`); :meth:`Store.reset` corrects a URL's state.

The file also records the scheduler configuration and the priors it was created with, so
``bayesrate schedule`` commands need nothing but the path. The ``urls`` table holds the
posterior's columns (:func:`~bayesrate.scheduler.state.storage_columns`): ``alpha, beta``
for a Gamma state (schema version 1), or ``log_weights`` for a grid state (schema version
2): the URL's ``K`` float32 log-probabilities as one little-endian BLOB, written in the
same transaction as the rest of the row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bayesrate.errors import ArtifactError
from bayesrate.priors import PriorSet
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState, storage_columns
from bayesrate.scheduler.statestore import (
    COUNTERS,
    KIND,
    Batch,
    StateStore,
    WriteResult,
    checked_hosts,
    initial_meta,
    parse_counters,
    parse_meta,
    sql_values,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "KIND",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_GRID",
    "Store",
    "WriteResult",
]

SCHEMA_VERSION = 1
#: schema version of a file holding grid posteriors (``log_weights`` BLOBs)
SCHEMA_VERSION_GRID = 2
#: seconds a writer waits for another writer's lock before giving up
DEFAULT_TIMEOUT = 60.0

_POSTERIOR_SQL = {
    "gamma": " alpha REAL NOT NULL, beta REAL NOT NULL,",
    "grid": " log_weights BLOB NOT NULL,",
}


def _tables(posterior: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE hosts (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)",
        "CREATE TABLE urls ("
        " id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, host INTEGER NOT NULL,"
        " weight REAL NOT NULL," + _POSTERIOR_SQL[posterior] + " last_fetch REAL,"
        " last_change REAL, n_fetch INTEGER NOT NULL, n_changed INTEGER NOT NULL,"
        " target REAL NOT NULL)",
        "CREATE TABLE fetch_log (host INTEGER NOT NULL, time REAL NOT NULL)",
    )


def _table_columns(posterior: str) -> dict[str, set[str]]:
    return {
        "meta": {"key", "value"},
        "hosts": {"id", "name"},
        "urls": {"id", "url", *storage_columns(posterior)},
        "fetch_log": {"host", "time"},
    }


def _schema_version(posterior: str) -> int:
    return SCHEMA_VERSION_GRID if posterior == "grid" else SCHEMA_VERSION


class Store(StateStore):
    """A scheduler state backed by an SQLite file; use :meth:`create` or :meth:`open`."""

    def __init__(
        self,
        path: Path,
        con: sqlite3.Connection,
        config: SchedulerConfig,
        priors: PriorSet,
        *,
        readonly: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(path, config, priors, readonly=readonly)
        self.con = con
        self.timeout = timeout

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(
        cls,
        path: str | Path,
        priors: PriorSet | None = None,
        config: SchedulerConfig | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Store:
        """Create a new state file (:class:`ArtifactError` if it exists or cannot be made)."""
        path = Path(path)
        state = SchedulerState(priors, config, capacity=16)  # validates the config
        if not path.parent.is_dir():
            raise ArtifactError(f"cannot create {path}: directory {path.parent} does not exist")
        try:  # claim the name atomically: two inits of one path cannot both succeed
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise ArtifactError(f"{path} already exists; open it or remove it first") from None
        except OSError as exc:
            raise ArtifactError(f"cannot create {path}: {exc.strerror}") from exc
        meta = initial_meta(state, _schema_version(state.config.posterior))
        try:
            con = sqlite3.connect(str(path), isolation_level=None, timeout=timeout)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("BEGIN IMMEDIATE")
            for statement in _tables(state.config.posterior):
                con.execute(statement)
            con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            con.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(path) + suffix).unlink(missing_ok=True)
            raise ArtifactError(f"cannot create {path}: {exc}") from exc
        store = cls(path, con, state.config, state.priors, timeout=timeout)
        store._state, store._state_revision = state, 0
        return store

    @classmethod
    def open(
        cls, path: str | Path, *, readonly: bool = False, timeout: float = DEFAULT_TIMEOUT
    ) -> Store:
        """Open an existing state file; the state itself is loaded on first use.

        The file is opened read-only until it is verified to be a scheduler state;
        ``readonly=True`` keeps it so (queries only; writes raise :class:`ArtifactError`).
        """
        path = Path(path)
        if not path.exists():
            raise ArtifactError(f"no scheduler state at {path} (run 'bayesrate schedule init')")
        if not path.is_file():
            raise ArtifactError(f"{path} is not a file (a scheduler state file was expected)")
        uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
        if readonly and _read_only_file_system(path):
            # no writer can exist, and SQLite cannot create the -shm file it reads through
            uri += "&immutable=1"
        try:
            ro = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout)
        except sqlite3.Error as exc:
            raise ArtifactError(f"cannot open {path}: {exc}") from exc
        try:
            config, priors = _verify(ro, path)
        except BaseException:
            ro.close()
            raise
        if readonly:
            return cls(path, ro, config, priors, readonly=True, timeout=timeout)
        ro.close()
        try:
            con = sqlite3.connect(str(path), isolation_level=None, timeout=timeout)
            if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise _access_error(path, exc) or ArtifactError(
                f"cannot open {path} for writing: {exc}"
            ) from exc
        return cls(path, con, config, priors, timeout=timeout)

    def close(self) -> None:
        self.con.close()

    def _load_all(self) -> tuple[SchedulerState, int]:
        con = self.con
        try:
            con.execute("BEGIN")  # one read transaction: rows, hosts, log and meta agree
            try:
                counters = self._read_counters(con)
                hosts = self._read_hosts(con)
                rows = con.execute(
                    "SELECT url, " + ", ".join(self.columns) + " FROM urls ORDER BY id"
                ).fetchall()
                log = con.execute("SELECT host, time FROM fetch_log ORDER BY time, host").fetchall()
            finally:
                con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise _access_error(self.path, exc) or ArtifactError(
                f"{self.path} is damaged: {exc}"
            ) from exc
        return self._state_from(hosts, rows, counters, log), counters["revision"]

    # ------------------------------------------------------------------ writes
    def save_targets(self) -> None:
        """Persist ``state.target`` (after :func:`~bayesrate.scheduler.decide.plan`).

        Writes only the ``target`` column (by URL): fetch results that other processes
        committed since the snapshot was loaded are kept.
        """
        st = self.state
        with self._writing() as con:
            counters = self._read_counters(con)
            con.executemany(
                "UPDATE urls SET target = ? WHERE url = ?",
                zip(sql_values(st.target), st.urls, strict=True),
            )
            self._write_counters(con, counters | {"revision": counters["revision"] + 1})
        if self._state_revision == counters["revision"]:
            self._state_revision += 1
        else:  # other writers changed other columns: reload on next use
            self._state = None

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the database's write lock from the start."""
        if self.readonly:
            raise ArtifactError(f"{self.path} was opened read-only")
        con = self.con
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise ArtifactError(
                f"{self.path}: could not get the write lock within {self.timeout:g} s "
                f"({exc}; another process is writing); nothing was applied, retry"
            ) from exc
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as exc:
            if con.in_transaction:
                con.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise ArtifactError(f"{self.path}: {exc}; nothing was applied") from exc
            raise

    def _transaction(self, body: Callable[[Any], Any], *, retry: bool = True) -> Any:
        with self._writing() as con:
            return body(con)

    def _read_counters(self, con: sqlite3.Connection) -> dict[str, int]:
        keys = ", ".join(f"'{k}'" for k in COUNTERS)
        meta = dict(con.execute(f"SELECT key, value FROM meta WHERE key IN ({keys})").fetchall())
        return parse_counters(meta, self.path)

    def _write_counters(self, con: sqlite3.Connection, counters: dict[str, int]) -> None:
        con.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in counters.items()]
        )

    def _read_hosts(self, con: sqlite3.Connection) -> list[str]:
        return checked_hosts(
            con.execute("SELECT id, name FROM hosts ORDER BY id").fetchall(), self.path
        )

    def _select_rows(self, con: sqlite3.Connection, urls: list[str]) -> list[tuple]:
        return con.execute(
            "SELECT id, url, " + ", ".join(self.columns) + " FROM urls "
            "WHERE url IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(urls),),
        ).fetchall()

    def _id_range(self, con: sqlite3.Connection) -> tuple[int, int]:
        return con.execute("SELECT COALESCE(MAX(id), -1) + 1, COUNT(*) FROM urls").fetchone()

    def _write_batch(self, con: sqlite3.Connection, batch: Batch, *, log: bool) -> None:
        work, n_known = batch.work, batch.n_known
        con.executemany(
            "INSERT INTO hosts VALUES (?, ?)",
            [(i, work.hosts[i]) for i in range(batch.n_hosts, len(work.hosts))],
        )
        columns = self.columns
        values = [sql_values(work.column(c)) for c in columns]
        con.executemany(
            "UPDATE urls SET " + ", ".join(f"{c} = ?" for c in columns) + " WHERE id = ?",
            zip(*[v[:n_known] for v in values], batch.ids, strict=True),
        )
        con.executemany(
            f"INSERT INTO urls (id, url, {', '.join(columns)}) "
            f"VALUES ({', '.join('?' * (len(columns) + 2))})",
            zip(
                range(batch.next_id, batch.next_id + batch.n_new),
                work.urls[n_known:],
                *[v[n_known:] for v in values],
                strict=True,
            ),
        )
        if log and len(work.log_time):
            con.executemany(
                "INSERT INTO fetch_log VALUES (?, ?)",
                zip(work.log_host.tolist(), work.log_time.tolist(), strict=True),
            )
            # the politeness log holds one window of fetches
            con.execute(
                "DELETE FROM fetch_log WHERE time <= (SELECT MAX(time) FROM fetch_log) - ?",
                (float(self.config.politeness_window),),
            )


# ---------------------------------------------------------------------- file checks
#: SQLite's primary result codes of failures to reach a file, not of its content
#: (PERM, BUSY, LOCKED, READONLY, IOERR, CANTOPEN)
ACCESS_CODES = frozenset({3, 5, 6, 8, 10, 14})


def _access_error(path: Path, exc: sqlite3.Error) -> ArtifactError | None:
    """An error saying the file could not be *reached* (its directory read-only, no
    permission, I/O), or ``None`` when ``exc`` is about the file's content.

    A state file in a read-only directory used to be reported as "not a scheduler state
    file", and an operator may then throw a good state away (issue 54).
    """
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in ACCESS_CODES:
        return None
    return ArtifactError(
        f"cannot access {path}: {exc}. The file itself may be a good state: do not delete "
        f"it. SQLite creates {path.name}-wal and {path.name}-shm beside it, also to read "
        "it: check that its directory is writable and on a writable file system"
    )


def _read_only_file_system(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only (nobody can write it)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _verify(con: sqlite3.Connection, path: Path) -> tuple[SchedulerConfig, PriorSet]:
    """Check that ``con`` holds a scheduler state of this schema; parse its metadata."""
    try:
        con.execute("BEGIN")
        try:
            tables = {
                name: {c[1] for c in con.execute(f"PRAGMA table_info({name})")}
                for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            meta = (
                dict(con.execute("SELECT key, value FROM meta").fetchall())
                if "meta" in tables
                else {}
            )
        finally:
            con.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise _access_error(path, exc) or ArtifactError(
            f"{path} is not a scheduler state file: {exc}"
        ) from exc
    if "meta" not in tables:
        raise ArtifactError(f"{path} is not a scheduler state file (no 'meta' table)")
    if meta.get("kind") != KIND:
        raise ArtifactError(f"{path} is not a scheduler state file (kind={meta.get('kind')})")
    versions = (str(SCHEMA_VERSION), str(SCHEMA_VERSION_GRID))
    config, priors = parse_meta(meta, path, versions, _schema_version)
    for table, columns in _table_columns(config.posterior).items():
        missing = columns - tables.get(table, set())
        if missing:
            raise ArtifactError(f"{path} is damaged: table {table!r} lacks {sorted(missing)}")
    return config, priors
