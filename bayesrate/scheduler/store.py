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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.errors import ArtifactError
from bayesrate.priors import PriorSet
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState, storage_columns
from bayesrate.scheduler.wallclock import check_fetch_times

SCHEMA_VERSION = 1
#: schema version of a file holding grid posteriors (``log_weights`` BLOBs)
SCHEMA_VERSION_GRID = 2
KIND = "bayesrate-scheduler-state"
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


_COUNTERS = ("version", "revision", "baseline_flags_ignored")
_INTEGER_COLUMNS = ("host", "n_fetch", "n_changed")


@dataclass(frozen=True)
class WriteResult:
    """What one write did: rows in the batch, URLs added, URLs in the file afterwards."""

    rows: int
    new_urls: int
    urls: int
    revision: int


class Store:
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
        self.path = path
        self.con = con
        self.config = config
        self.priors = priors
        self.readonly = readonly
        self.timeout = timeout
        self.columns = storage_columns(config.posterior)
        self._state: SchedulerState | None = None
        self._state_revision = -1

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
        meta = {
            "kind": KIND,
            "schema_version": str(_schema_version(state.config.posterior)),
            "config": json.dumps(state.config.to_dict()),
            "priors": json.dumps(state.priors.to_json()),
            "version": "0",
            "revision": "0",
            "baseline_flags_ignored": "0",
        }
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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reads
    @property
    def state(self) -> SchedulerState:
        """The whole state (a consistent snapshot, loaded on first use)."""
        if self._state is None:
            self._state, self._state_revision = self._load_all()
        return self._state

    def refresh(self) -> SchedulerState:
        """Reload the snapshot from the file."""
        self._state = None
        return self.state

    def _load_all(self) -> tuple[SchedulerState, int]:
        con = self.con
        try:
            con.execute("BEGIN")  # one read transaction: rows, hosts, log and meta agree
            try:
                counters = _read_counters(con, self.path)
                hosts = _read_hosts(con, self.path)
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
        state = self._state_of(hosts, rows, counters)
        if log:
            h, t = (np.asarray(v, dtype=np.float64) for v in zip(*log, strict=True))
            bad = np.flatnonzero(~np.isfinite(t) | (h < 0) | (h >= len(hosts)) | (h != h.round()))
            if len(bad):
                raise ArtifactError(
                    f"{self.path} is damaged: fetch_log rows {bad[:10].tolist()} have an "
                    "unknown host id or a non-finite time"
                )
            state.log_host = h.astype(np.int32)
            state.log_time = t
        return state, counters["revision"]

    def _state_of(
        self, hosts: list[str], rows: Sequence[tuple], counters: dict[str, int]
    ) -> SchedulerState:
        """A state holding ``rows`` (url + :attr:`columns`), checked for impossible values."""
        state = SchedulerState(self.priors, self.config, capacity=max(len(rows), 16))
        state.hosts = list(hosts)
        state.host_index = {h: i for i, h in enumerate(hosts)}
        state.version = counters["version"]
        state.baseline_flags_ignored = counters["baseline_flags_ignored"]
        if rows:
            urls, *values = zip(*rows, strict=True)
            raw = dict(zip(self.columns, values, strict=True))
            columns = _checked_columns(raw, urls, hosts, self.path, state.grid)
            state.set_rows([str(u) for u in urls], columns)
        return state

    # ------------------------------------------------------------------ writes
    def add(
        self, urls: Sequence[str], hosts: Sequence[str], weights: Sequence[float] | None = None
    ) -> WriteResult:
        """Register new URLs durably (see :meth:`SchedulerState.add`)."""
        urls = [str(u) for u in urls]
        return self._apply(urls, lambda work: work.add(urls, hosts, weights))

    def observe(
        self,
        urls: Sequence[str],
        times: Sequence[float],
        changed: Sequence[int],
        hosts: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
        *,
        now: float | None = None,
        time_unit: str = "h",
    ) -> WriteResult:
        """Apply and persist a batch; when this returns, the batch is durable.

        Times are hours since the epoch; they must be plausible dates no later than
        ``now`` (default: the wall clock) plus
        :data:`~bayesrate.scheduler.wallclock.CLOCK_SKEW_HOURS` (``time_unit`` names the
        unit the caller's numbers were in, for the error message). Otherwise as
        :meth:`SchedulerState.observe <bayesrate.scheduler.state.SchedulerState.observe>`.
        """
        urls = [str(u) for u in urls]
        t = np.asarray(times, dtype=np.float64)
        if t.shape == (len(urls),):  # other shapes: the state's validation names them
            check_fetch_times(t, now=now, unit=time_unit, urls=urls)
        return self._apply(
            urls, lambda work: work.observe(urls, t, changed, hosts, weights), log=True
        )

    def reset(self, urls: Sequence[str], *, keep_rate: bool = False) -> WriteResult:
        """Forget URLs' fetch history durably (see :meth:`SchedulerState.reset`)."""
        urls = [str(u) for u in urls]
        return self._apply(urls, lambda work: work.reset(urls, keep_rate=keep_rate))

    def save_targets(self) -> None:
        """Persist ``state.target`` (after :func:`~bayesrate.scheduler.decide.plan`).

        Writes only the ``target`` column (by URL): fetch results that other processes
        committed since the snapshot was loaded are kept.
        """
        st = self.state
        with self._writing() as con:
            counters = _read_counters(con, self.path)
            con.executemany(
                "UPDATE urls SET target = ? WHERE url = ?",
                zip(_sql_values(st.target), st.urls, strict=True),
            )
            _write_counters(con, counters | {"revision": counters["revision"] + 1})
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

    def _apply(
        self, urls: list[str], change: Callable[[SchedulerState], Any], *, log: bool = False
    ) -> WriteResult:
        """Re-read the rows of ``urls`` under the write lock, ``change`` them, write them."""
        with self._writing() as con:
            counters = _read_counters(con, self.path)
            hosts = _read_hosts(con, self.path)
            distinct = list(dict.fromkeys(urls))
            found = con.execute(
                "SELECT id, url, " + ", ".join(self.columns) + " FROM urls "
                "WHERE url IN (SELECT value FROM json_each(?)) ORDER BY id",
                (json.dumps(distinct),),
            ).fetchall()
            next_id, n_urls = con.execute(
                "SELECT COALESCE(MAX(id), -1) + 1, COUNT(*) FROM urls"
            ).fetchone()
            work = self._state_of(hosts, [r[1:] for r in found], dict.fromkeys(_COUNTERS, 0))
            n_known, n_hosts = work.n, len(work.hosts)
            change(work)  # validates first: raises (and nothing is written) or mutates work
            con.executemany(
                "INSERT INTO hosts VALUES (?, ?)",
                [(i, work.hosts[i]) for i in range(n_hosts, len(work.hosts))],
            )
            columns = self.columns
            values = [_sql_values(work.column(c)) for c in columns]
            con.executemany(
                "UPDATE urls SET " + ", ".join(f"{c} = ?" for c in columns) + " WHERE id = ?",
                zip(*[v[:n_known] for v in values], [r[0] for r in found], strict=True),
            )
            n_new = work.n - n_known
            con.executemany(
                f"INSERT INTO urls (id, url, {', '.join(columns)}) "
                f"VALUES ({', '.join('?' * (len(columns) + 2))})",
                zip(
                    range(next_id, next_id + n_new),
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
            after = {
                "version": counters["version"] + work.version,
                "revision": counters["revision"] + 1,
                "baseline_flags_ignored": counters["baseline_flags_ignored"]
                + work.baseline_flags_ignored,
            }
            _write_counters(con, after)
        self._patch(work, counters["revision"], after)
        return WriteResult(len(urls), n_new, n_urls + n_new, after["revision"])

    def _patch(self, work: SchedulerState, revision_before: int, after: dict[str, int]) -> None:
        """Bring the snapshot up to date with a write (or drop it if others wrote too)."""
        st = self._state
        if st is None:
            return
        if self._state_revision != revision_before:
            self._state = None  # another process wrote since the snapshot: reload on use
            return
        for name in work.hosts[len(st.hosts) :]:
            st.host_index[name] = len(st.hosts)
            st.hosts.append(name)
        st.set_rows(work.urls, {c: work.column(c) for c in self.columns})
        if len(work.log_time):
            st._log(work.log_host, work.log_time)
        st.version = after["version"]
        st.baseline_flags_ignored = after["baseline_flags_ignored"]
        self._state_revision = after["revision"]


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
    if meta.get("schema_version") not in versions:
        raise ArtifactError(
            f"{path} has schema version {meta.get('schema_version')}; this bayesrate "
            f"reads versions {', '.join(versions)}"
        )
    _parse_counters(meta, path)
    try:
        config = SchedulerConfig(**json.loads(meta["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{path} is damaged: meta 'config' is unreadable ({exc})") from exc
    if meta["schema_version"] != str(_schema_version(config.posterior)):
        raise ArtifactError(
            f"{path} is damaged: schema version {meta['schema_version']} does not hold "
            f"{config.posterior!r} posteriors"
        )
    for table, columns in _table_columns(config.posterior).items():
        missing = columns - tables.get(table, set())
        if missing:
            raise ArtifactError(f"{path} is damaged: table {table!r} lacks {sorted(missing)}")
    try:
        priors = PriorSet.from_json(json.loads(meta["priors"]))
    except (KeyError, TypeError, ValueError, AttributeError, ArtifactError) as exc:
        raise ArtifactError(f"{path} is damaged: meta 'priors' is unreadable ({exc})") from exc
    return config, priors


def _parse_counters(meta: dict[str, str], path: Path) -> dict[str, int]:
    out = {}
    for key in _COUNTERS:
        try:
            value = int(meta.get(key, "0"))
        except (TypeError, ValueError):
            value = -1
        if value < 0:
            raise ArtifactError(
                f"{path} is damaged: meta {key!r} = {meta.get(key)!r} is not a count"
            )
        out[key] = value
    return out


def _read_counters(con: sqlite3.Connection, path: Path) -> dict[str, int]:
    keys = ", ".join(f"'{k}'" for k in _COUNTERS)
    meta = dict(con.execute(f"SELECT key, value FROM meta WHERE key IN ({keys})").fetchall())
    return _parse_counters(meta, path)


def _write_counters(con: sqlite3.Connection, counters: dict[str, int]) -> None:
    con.executemany(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in counters.items()]
    )


def _read_hosts(con: sqlite3.Connection, path: Path) -> list[str]:
    rows = con.execute("SELECT id, name FROM hosts ORDER BY id").fetchall()
    ids = [r[0] for r in rows]
    if ids != list(range(len(rows))):
        raise ArtifactError(f"{path} is damaged: host ids are not 0..{len(rows) - 1}")
    names = [r[1] for r in rows]
    if not all(isinstance(n, str) and n for n in names):
        raise ArtifactError(f"{path} is damaged: host names must be non-empty text")
    return names


def _log_weights(blobs: Sequence[Any], size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, size)`` float32 log-probabilities from BLOBs, and which rows are impossible
    (wrong length, not bytes, not finite, positive, or not summing to 1)."""
    out = np.zeros((len(blobs), size), dtype=np.float32)
    bad = np.zeros(len(blobs), dtype=bool)
    for i, blob in enumerate(blobs):
        if not isinstance(blob, bytes) or len(blob) != 4 * size:
            bad[i] = True
            continue
        out[i] = np.frombuffer(blob, dtype="<f4")
    with np.errstate(invalid="ignore", over="ignore"):
        total = np.exp(out.astype(np.float64)).sum(axis=1)
    bad |= ~np.isfinite(out).all(axis=1) | (out > 0).any(axis=1) | ~(np.abs(total - 1) < 1e-3)
    return out, bad


def _checked_columns(
    raw: dict[str, Sequence[Any]],
    urls: Sequence[str],
    hosts: Sequence[str],
    path: Path,
    grid: Any = None,
) -> dict[str, np.ndarray]:
    """Per-URL columns as arrays; :class:`ArtifactError` naming URLs for impossible values."""
    cols: dict[str, np.ndarray] = {}
    problems: dict[str, np.ndarray] = {}
    if "log_weights" in raw:
        cols["log_weights"], problems["log_weights"] = _log_weights(
            raw.pop("log_weights"), grid.size
        )
    for name, values in raw.items():
        try:
            cols[name] = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ArtifactError(f"{path} is damaged: column {name!r} is not numeric") from exc
    last, changed_at = cols["last_fetch"], cols["last_change"]
    for name in ("alpha", "beta"):
        if name in cols:
            problems[name] = ~(np.isfinite(cols[name]) & (cols[name] > 0))
    problems |= {
        "host": (cols["host"] < 0) | (cols["host"] >= len(hosts)),
        "weight": ~(np.isfinite(cols["weight"]) & (cols["weight"] > 0)),
        "last_fetch": np.isinf(last),
        "last_change": np.isinf(changed_at) | (~np.isnan(changed_at) & ~(changed_at <= last)),
        "n_fetch": cols["n_fetch"] < 0,
        "n_changed": (cols["n_changed"] < 0) | (cols["n_changed"] > cols["n_fetch"]),
        "target": ~(np.isfinite(cols["target"]) & (cols["target"] >= 0)),
    }
    for name in _INTEGER_COLUMNS:
        problems[name] |= ~np.isfinite(cols[name]) | (cols[name] != np.round(cols[name]))
    for name, bad in problems.items():
        if bad.any():
            where = np.flatnonzero(bad)
            shown = ", ".join(repr(urls[i]) for i in where[:5])
            raise ArtifactError(
                f"{path} is damaged: impossible {name!r} for {len(where)} URL(s) "
                f"({shown}{', ...' if len(where) > 5 else ''}); restore a backup or reset them"
            )
    for name in _INTEGER_COLUMNS:
        cols[name] = cols[name].astype(np.int32)
    return cols


def _sql_values(col: np.ndarray) -> list[Any]:
    """Python values for SQLite (NaN → NULL; rows of a 2-D column → little-endian BLOBs)."""
    if col.ndim == 2:
        data = np.ascontiguousarray(col, dtype="<f4")
        return [row.tobytes() for row in data]
    values = col.tolist()
    if col.dtype.kind == "f":
        for i in np.flatnonzero(np.isnan(col)).tolist():
            values[i] = None
    return values
