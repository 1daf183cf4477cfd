"""SQLite persistence of the scheduler state (WAL, one transaction per batch).

:class:`Store` keeps the whole :class:`~bayesrate.scheduler.state.SchedulerState` in memory
and mirrors every change into an SQLite file:

- ``journal_mode=WAL`` and ``synchronous=FULL``: once :meth:`Store.observe` returns, the
  batch is on disk and survives a crash of the process (or of the machine);
- each batch is one transaction (rows touched, new hosts, politeness log, batch counter):
  a crash mid-batch leaves the previous state, never half a batch;
- a rejected batch (:class:`~bayesrate.errors.ObservationError`) changes nothing;
- a writer whose in-memory state is older than the file (another process committed since
  it opened) gets :class:`~bayesrate.errors.ArtifactError` and writes nothing (``revision``
  counter checked inside the write transaction);
- ``meta.schema_version`` is checked on open (:class:`~bayesrate.errors.ArtifactError`
  when it does not match), as is ``meta.kind``.

The file also records the scheduler configuration and the priors it was created with, so
``bayesrate schedule`` commands need nothing but the path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.errors import ArtifactError
from bayesrate.priors import PriorSet
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState

SCHEMA_VERSION = 1
KIND = "bayesrate-scheduler-state"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS urls (
    id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, host INTEGER NOT NULL,
    weight REAL NOT NULL, alpha REAL NOT NULL, beta REAL NOT NULL,
    last_fetch REAL, last_change REAL, n_fetch INTEGER NOT NULL, n_changed INTEGER NOT NULL,
    target REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS fetch_log (host INTEGER NOT NULL, time REAL NOT NULL);
"""
_COLUMNS = (
    "host",
    "weight",
    "alpha",
    "beta",
    "last_fetch",
    "last_change",
    "n_fetch",
    "n_changed",
    "target",
)


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), isolation_level=None)  # explicit BEGIN/COMMIT
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    return con


class Store:
    """A scheduler state backed by an SQLite file; use :meth:`create` or :meth:`open`."""

    def __init__(self, path: Path, con: sqlite3.Connection, state: SchedulerState) -> None:
        self.path = path
        self.con = con
        self.state = state
        row = con.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
        self.revision = int(row[0]) if row else 0

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(
        cls,
        path: str | Path,
        priors: PriorSet | None = None,
        config: SchedulerConfig | None = None,
    ) -> Store:
        """Create a new state file (:class:`ArtifactError` if it already exists)."""
        path = Path(path)
        if path.exists():
            raise ArtifactError(f"{path} already exists; open it or remove it first")
        state = SchedulerState(priors, config)
        con = _connect(path)
        con.executescript(_SCHEMA)
        meta = {
            "kind": KIND,
            "schema_version": str(SCHEMA_VERSION),
            "config": json.dumps(state.config.to_dict()),
            "priors": json.dumps(state.priors.to_json()),
            "version": "0",
            "revision": "0",
            "baseline_flags_ignored": "0",
        }
        con.execute("BEGIN")
        con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        con.execute("COMMIT")
        return cls(path, con, state)

    @classmethod
    def open(cls, path: str | Path) -> Store:
        """Open an existing state file and load it into memory."""
        path = Path(path)
        if not path.exists():
            raise ArtifactError(f"no scheduler state at {path} (run 'bayesrate schedule init')")
        con = _connect(path)
        try:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise ArtifactError(f"{path} is not a scheduler state file: {exc}") from exc
        if meta.get("kind") != KIND:
            raise ArtifactError(f"{path} is not a scheduler state file (kind={meta.get('kind')})")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise ArtifactError(
                f"{path} has schema version {meta.get('schema_version')}; this bayesrate "
                f"reads version {SCHEMA_VERSION}"
            )
        config = SchedulerConfig(**json.loads(meta["config"]))
        priors = PriorSet.from_json(json.loads(meta["priors"]))
        return cls(path, con, _load_state(con, priors, config, meta))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes
    def add(
        self, urls: Sequence[str], hosts: Sequence[str], weights: Sequence[float] | None = None
    ) -> np.ndarray:
        """Register new URLs durably (see :meth:`SchedulerState.add`)."""
        n_hosts = len(self.state.hosts)
        rows = self.state.add(urls, hosts, weights)
        self._commit(rows, n_hosts)
        return rows

    def observe(
        self,
        urls: Sequence[str],
        times: Sequence[float],
        changed: Sequence[int],
        hosts: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
    ) -> np.ndarray:
        """Apply and persist a batch; when this returns, the batch is durable."""
        n_hosts = len(self.state.hosts)
        rows = self.state.observe(urls, times, changed, hosts, weights)
        self._commit(rows, n_hosts, log=True)
        return rows

    def save_targets(self) -> None:
        """Persist ``state.target`` (after :func:`~bayesrate.scheduler.decide.plan`)."""
        self._commit(np.arange(self.state.n), len(self.state.hosts))

    def _commit(self, rows: np.ndarray, n_hosts_before: int, log: bool = False) -> None:
        st = self.state
        try:
            con = self.con
            con.execute("BEGIN IMMEDIATE")
            row = con.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
            on_disk = int(row[0]) if row else 0
            if on_disk != self.revision:
                raise ArtifactError(
                    f"{self.path} was changed by another process since it was opened "
                    f"(revision {on_disk}, expected {self.revision}); this batch was not "
                    "applied — the state has been reloaded, retry"
                )
            if len(st.hosts) > n_hosts_before:
                con.executemany(
                    "INSERT INTO hosts VALUES (?, ?)",
                    [(i, st.hosts[i]) for i in range(n_hosts_before, len(st.hosts))],
                )
            cols = [st.column(c)[rows] for c in _COLUMNS]
            records = zip(
                rows.tolist(),
                [st.urls[i] for i in rows.tolist()],
                *[_sql_values(c) for c in cols],
                strict=True,
            )
            con.executemany(
                "INSERT INTO urls (id, url, "
                + ", ".join(_COLUMNS)
                + ") VALUES ("
                + ", ".join("?" * (len(_COLUMNS) + 2))
                + ") ON CONFLICT(id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS),
                records,
            )
            if log and st.config.politeness_limit is not None:
                # the politeness log holds one window of fetches: rewrite it whole
                con.execute("DELETE FROM fetch_log")
                con.executemany(
                    "INSERT INTO fetch_log VALUES (?, ?)",
                    zip(st.log_host.tolist(), st.log_time.tolist(), strict=True),
                )
            con.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [
                    ("version", str(st.version)),
                    ("revision", str(self.revision + 1)),
                    ("baseline_flags_ignored", str(st.baseline_flags_ignored)),
                ],
            )
            con.execute("COMMIT")
            self.revision += 1
        except BaseException:
            if self.con.in_transaction:
                self.con.execute("ROLLBACK")
            # the in-memory state went ahead of the file: reload what is durable
            meta = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
            self.state = _load_state(self.con, st.priors, st.config, meta)
            self.revision = int(meta.get("revision", 0))
            raise


def _sql_values(col: np.ndarray) -> list[Any]:
    if col.dtype.kind == "f":
        return [None if np.isnan(x) else x for x in col.tolist()]
    return col.tolist()


def _load_state(
    con: sqlite3.Connection, priors: PriorSet, config: SchedulerConfig, meta: dict[str, str]
) -> SchedulerState:
    hosts = [name for _, name in con.execute("SELECT id, name FROM hosts ORDER BY id")]
    cur = con.execute("SELECT url, " + ", ".join(_COLUMNS) + " FROM urls ORDER BY id")
    rows = cur.fetchall()
    n = len(rows)
    state = SchedulerState(priors, config, capacity=max(n, 16))
    state.hosts = hosts
    state.host_index = {h: i for i, h in enumerate(hosts)}
    if n:
        urls, *cols = zip(*rows, strict=True)
        state.urls = list(urls)
        state.index = {u: i for i, u in enumerate(state.urls)}
        for name, values in zip(_COLUMNS, cols, strict=True):
            arr = getattr(state, "_" + name)
            arr[:n] = np.array([np.nan if v is None else v for v in values], dtype=arr.dtype)
        state.n = n
    log = con.execute("SELECT host, time FROM fetch_log ORDER BY time").fetchall()
    if log:
        h, t = zip(*log, strict=True)
        state.log_host = np.array(h, dtype=np.int32)
        state.log_time = np.array(t, dtype=np.float64)
    state.version = int(meta.get("version", 0))
    state.baseline_flags_ignored = int(meta.get("baseline_flags_ignored", 0))
    return state
