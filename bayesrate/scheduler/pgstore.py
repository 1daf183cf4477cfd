"""PostgreSQL persistence of the scheduler state, for a crawler fleet sharing one frontier.

:class:`PgStore` has the interface and the guarantees of the SQLite
:class:`~bayesrate.scheduler.store.Store` (:mod:`~bayesrate.scheduler.statestore`), with
row-level locks instead of one writers' lock: each write is one transaction that locks the
rows it touches (``FOR UPDATE``, in id order, so writers of disjoint URLs run in parallel
and writers of the same URLs take turns without deadlock), reads them, applies the batch
with the state's maths, writes back only those rows, and moves the counters of ``meta`` on
last (that row is locked only until the commit). A batch that adds URLs or hosts takes the
counters lock before allocating their ids, and starts over if another writer added any of
them meanwhile. A rejected batch changes nothing; once a write returns it is committed
(PostgreSQL's ``synchronous_commit``). The state is named by a database URL
(``postgresql://user@host:port/db``); one database holds one state. ``create`` applies the
versioned migrations (:mod:`~bayesrate.scheduler.pgsql`), and so does a writable ``open``
of a database migrated by an older bayesrate.

Connections come from a pool (``psycopg_pool``; not checked on checkout: a connection the
server dropped fails its first statement, and the transaction is retried on a new one). A
transaction that cannot reach the server
(stopped, restarting, partitioned) is retried with exponential backoff for up to
``reconnect_seconds``; then :class:`~bayesrate.errors.ArtifactError` says nothing was
applied. A connection lost *while committing* leaves the outcome unknown: writes that are
idempotent (:meth:`~bayesrate.scheduler.frontier.Frontier.report` per fetch id, targets,
resets) are retried; ``observe`` and ``add`` raise an error saying the batch may have been
applied (a fleet reports through the frontier, whose fetch ids make retries safe).

Each written row also stores ``due_after`` (:func:`~bayesrate.scheduler.decide.due_times`
minus the last fetch), the order in which the frontier leases URLs.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg_pool import ConnectionPool, PoolTimeout

from bayesrate.errors import ArtifactError
from bayesrate.priors import PriorSet
from bayesrate.scheduler import pgsql
from bayesrate.scheduler.decide import due_times
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState
from bayesrate.scheduler.statestore import (
    COUNTERS,
    Batch,
    StateStore,
    checked_hosts,
    initial_meta,
    parse_counters,
    parse_meta,
    sql_values,
)

#: ``meta.schema_version`` of a PostgreSQL state (its tables' level is in schema_migrations)
SCHEMA_VERSION = 1
#: seconds a transaction keeps retrying an unreachable server
DEFAULT_RECONNECT_SECONDS = 30.0
#: connections per pool
POOL_SIZE = 4

# the pool logs each failed connection attempt; our errors say what failed, once
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
logging.getLogger("psycopg.pool").propagate = False


def redact(location: str) -> str:
    """``location`` without its password, for messages."""
    try:
        parts = urllib.parse.urlsplit(location)
        password = parts.password
    except ValueError:  # unparsable: psycopg will say why
        return location
    if password is None:
        return location
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class PgArray:
    """A 1-D numeric array sent as one PostgreSQL binary array, built by numpy.

    psycopg dumps a Python list element by element in Python; a report's update sends a
    dozen arrays of ``k`` values, and at ``k = 1000`` that was most of the client's work.
    NaN (floats) is sent as NULL.
    """

    __slots__ = ("sqltype", "values")

    #: SQL element type -> (element oid, array oid, big-endian numpy dtype, bytes per element)
    TYPES: ClassVar[dict[str, tuple[int, int, str, int]]] = {
        "float8": (701, 1022, ">f8", 8),
        "bigint": (20, 1016, ">i8", 8),
        "int": (23, 1007, ">i4", 4),
        "smallint": (21, 1005, ">i2", 2),
        "bool": (16, 1000, "u1", 1),
    }

    def __init__(self, values: Any, sqltype: str) -> None:
        self.values = np.asarray(values).ravel()
        self.sqltype = sqltype

    def wire(self) -> bytes:
        oid, _, dtype, size = self.TYPES[self.sqltype]
        v = self.values
        n = len(v)
        if n == 0:
            return np.array([0, 0, oid], ">i4").tobytes()
        null = np.isnan(v) if v.dtype.kind == "f" else np.zeros(n, bool)
        rec = np.empty(n, dtype=[("len", ">i4"), ("v", dtype)])
        rec["len"] = np.where(null, -1, size)
        rec["v"] = np.where(null, 0, v) if null.any() else v
        body = rec.view(np.uint8).reshape(n, 4 + size)
        if null.any():  # a NULL is its length (-1) alone
            keep = np.ones(body.shape, bool)
            keep[null, 4:] = False
            data = body[keep].tobytes()
        else:
            data = body.tobytes()
        head = np.array([1, int(null.any()), oid, n, 1], ">i4").tobytes()
        return head + data


class _WireDumper(Dumper):
    """Dumps a :class:`PgArray` in binary (:meth:`PgArray.wire`)."""

    format = psycopg.pq.Format.BINARY

    def dump(self, obj: PgArray) -> bytes:
        return obj.wire()


def _array_dumper(sqltype: str) -> type[Dumper]:
    return type(f"_Dumper_{sqltype}", (_WireDumper,), {"oid": PgArray.TYPES[sqltype][1]})


class _ArrayDumper(_WireDumper):
    """Dumps a :class:`PgArray` (its array oid chosen by :meth:`upgrade`)."""

    _by_type: ClassVar[dict[str, type[Dumper]]] = {t: _array_dumper(t) for t in PgArray.TYPES}

    def get_key(self, obj: PgArray, format: Any) -> Any:
        return (PgArray, obj.sqltype)

    def upgrade(self, obj: PgArray, format: Any) -> Dumper:
        return self._by_type[obj.sqltype](PgArray)


psycopg.adapters.register_dumper(PgArray, _ArrayDumper)


def pg_array(col: np.ndarray, sqltype: str) -> PgArray | list[Any]:
    """``col`` as a statement parameter of SQL type ``sqltype``: a :class:`PgArray` for
    numbers, else a list (:func:`~bayesrate.scheduler.statestore.sql_values`)."""
    col = np.asarray(col)
    kinds = "fiub" if sqltype == "float8" else "iub"
    if sqltype in PgArray.TYPES and col.ndim == 1 and col.dtype.kind in kinds:
        return PgArray(col, sqltype)
    return sql_values(col)


class _Again(Exception):
    """Another writer added URLs or hosts of this batch: run the transaction again."""


def due_after(state: SchedulerState, *, as_list: bool = True) -> list[float] | np.ndarray:
    """Hours from each URL's last fetch until it is due (0 for never-fetched URLs)."""
    out = np.nan_to_num(due_times(state) - state.last_fetch, nan=0.0)
    return out.tolist() if as_list else out


class PgStore(StateStore):
    """A scheduler state in a PostgreSQL database; use :meth:`create` or :meth:`open`.

    Parameters
    ----------
    location
        The database URL.
    pool
        An open connection pool to it.
    config, priors
        The state's configuration and priors (from ``meta``).
    readonly
        Refuse writes.
    reconnect_seconds
        How long a transaction retries an unreachable server.
    """

    def __init__(
        self,
        location: str,
        pool: ConnectionPool,
        config: SchedulerConfig,
        priors: PriorSet,
        *,
        readonly: bool = False,
        reconnect_seconds: float = DEFAULT_RECONNECT_SECONDS,
    ) -> None:
        super().__init__(redact(location), config, priors, readonly=readonly)
        self.location = location
        self.pool = pool
        self.reconnect_seconds = reconnect_seconds

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def _pool(location: str, size: int = POOL_SIZE) -> ConnectionPool:
        try:
            psycopg.conninfo.conninfo_to_dict(location)
        except psycopg.ProgrammingError as exc:
            raise ArtifactError(f"{redact(location)} is not a PostgreSQL URL: {exc}") from None
        return ConnectionPool(
            location,
            min_size=1,
            max_size=size,
            open=True,
            timeout=5.0,
            kwargs={"autocommit": True, "connect_timeout": 5},
            name="bayesrate",
        )

    @classmethod
    def create(
        cls,
        location: str,
        priors: PriorSet | None = None,
        config: SchedulerConfig | None = None,
        *,
        reconnect_seconds: float = DEFAULT_RECONNECT_SECONDS,
    ) -> PgStore:
        """Create a state in an empty database (:class:`ArtifactError` if it holds one)."""
        state = SchedulerState(priors, config, capacity=16)  # validates the config
        pool = cls._pool(location)
        store = cls(location, pool, state.config, state.priors, reconnect_seconds=reconnect_seconds)

        def init(con: psycopg.Connection) -> None:
            try:
                pgsql.migrate(con)
            except RuntimeError as exc:
                raise ArtifactError(f"cannot create a state in {store.path}: {exc}") from exc
            if con.execute(pgsql.META_ALL).fetchone() is not None:
                raise ArtifactError(
                    f"{store.path} already holds a scheduler state; open it, or create the "
                    "state in another (empty) database"
                )
            meta = initial_meta(state, SCHEMA_VERSION)
            con.cursor().executemany(pgsql.META_INSERT, list(meta.items()))

        try:
            store._transaction(init, what="create the state")
        except BaseException:
            pool.close()
            raise
        store._state, store._state_revision = state, 0
        return store

    @classmethod
    def open(
        cls,
        location: str,
        *,
        readonly: bool = False,
        reconnect_seconds: float = DEFAULT_RECONNECT_SECONDS,
        pool_size: int = POOL_SIZE,
    ) -> PgStore:
        """Open the state in a database; the state itself is loaded on first use.

        A writable open applies the migrations the database lacks; ``readonly=True``
        changes nothing (writes raise :class:`ArtifactError`).
        """
        pool = cls._pool(location, pool_size)
        path = redact(location)

        def verify(con: psycopg.Connection) -> tuple[SchedulerConfig, PriorSet]:
            if not con.execute(pgsql.HAS_MIGRATIONS).fetchone()[0]:
                raise ArtifactError(
                    f"no scheduler state in {path} (run 'bayesrate schedule init {path}')"
                )
            applied = {v for (v,) in con.execute(pgsql.APPLIED).fetchall()}
            known = {v for v, _ in pgsql.MIGRATIONS}
            if applied - known:
                raise ArtifactError(
                    f"{path} has schema version {max(applied)}; this bayesrate knows "
                    f"versions up to {pgsql.LATEST}: upgrade bayesrate"
                )
            missing = sorted(known - applied)
            if missing and readonly:
                raise ArtifactError(
                    f"{path} lacks schema migrations {missing}; open it once for writing "
                    "(any schedule command that writes) to apply them"
                )
            if missing:
                pgsql.migrate(con)
            meta = dict(con.execute(pgsql.META_ALL).fetchall())
            if not meta:
                raise ArtifactError(
                    f"no scheduler state in {path} (run 'bayesrate schedule init {path}')"
                )
            return parse_meta(meta, path, (str(SCHEMA_VERSION),), lambda _: SCHEMA_VERSION)

        probe = cls(location, pool, SchedulerConfig(), PriorSet.default(), readonly=readonly)
        probe.reconnect_seconds = reconnect_seconds
        try:
            config, priors = probe._transaction(verify, what="open the state", write=not readonly)
        except BaseException:
            pool.close()
            raise
        return cls(
            location,
            pool,
            config,
            priors,
            readonly=readonly,
            reconnect_seconds=reconnect_seconds,
        )

    def close(self) -> None:
        self.pool.close()

    # ------------------------------------------------------------------ transactions
    def _transaction(
        self,
        body: Callable[[psycopg.Connection], Any],
        *,
        retry: bool = True,
        what: str = "write",
        write: bool = True,
    ) -> Any:
        """Run ``body(con)`` in one transaction; retry an unreachable server with backoff.

        ``retry=False``: a connection lost while committing is not retried (the outcome
        is unknown) and raises :class:`ArtifactError` saying so.
        """
        if write and self.readonly:
            raise ArtifactError(f"{self.path} was opened read-only")
        deadline = time.monotonic() + self.reconnect_seconds
        delay = 0.05
        while True:
            committing = False
            try:
                wait = min(5.0, max(0.1, deadline - time.monotonic()))
                with self.pool.connection(timeout=wait) as con:
                    # pipeline mode: statements whose results are not read go out together
                    with con.pipeline(), con.transaction():
                        result = body(con)
                        committing = True
                    return result
            except _Again:
                continue  # rolled back; the next attempt sees the other writer's rows
            except (psycopg.OperationalError, PoolTimeout) as exc:
                if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
                    raise ArtifactError(f"{self.path}: {exc}; nothing was applied") from exc
                if committing and not retry:
                    raise ArtifactError(
                        f"{self.path}: the connection was lost while committing ({exc}); the "
                        "batch may or may not have been applied: check before repeating it "
                        "(the frontier's reports carry fetch ids and are safe to repeat)"
                    ) from exc
                if time.monotonic() + delay > deadline:
                    reason = _unreachable(self.location) or _first_line(exc)
                    raise ArtifactError(
                        f"cannot reach {self.path} to {what} ({reason}) after "
                        f"{self.reconnect_seconds:g} s of retries; nothing was applied"
                    ) from exc
                time.sleep(delay)
                delay = min(2 * delay, 2.0)
            except psycopg.Error as exc:
                raise ArtifactError(
                    f"{self.path}: {_first_line(exc)}; nothing was applied"
                ) from exc

    def read(self, body: Callable[[psycopg.Connection], Any]) -> Any:
        """Run ``body(con)`` in one read transaction (retried like writes)."""
        return self._transaction(body, what="read", write=False)

    # ------------------------------------------------------------------ reads
    def _load_all(self) -> tuple[SchedulerState, int]:
        def load(con: psycopg.Connection) -> tuple:
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return (
                self._counters(con, lock=False),
                self._read_hosts(con),
                con.execute(pgsql.select_all(self.columns)).fetchall(),
                con.execute(pgsql.FETCH_LOG).fetchall(),
            )

        counters, hosts, rows, log = self.read(load)
        return self._state_from(hosts, rows, counters, log), counters["revision"]

    # ------------------------------------------------------------------ writes
    def save_targets(self) -> None:
        """Persist ``state.target`` and the due times it implies (by URL).

        Fetch results that other processes committed since the snapshot was loaded are
        kept; their due times follow the new targets from the snapshot's last fetches.
        """
        st = self.state
        after = due_after(st)

        def write(con: psycopg.Connection) -> dict[str, int]:
            con.execute(pgsql.TARGETS_UPDATE, (st.urls, sql_values(st.target), after))
            return self._add_counters(con, {"revision": 1})

        counters = self._transaction(write, what="save targets")
        if self._state_revision == counters["revision"] - 1:
            self._state_revision += 1
        else:
            self._state = None

    def _apply_in(
        self,
        con: psycopg.Connection,
        urls: list[str],
        change: Callable[[SchedulerState], Any],
        *,
        log: bool,
        locked: list[tuple] | None = None,
        clear_leases: set[int] | frozenset[int] = frozenset(),
    ) -> Batch:
        """:meth:`StateStore._apply_in` with row-level locks (see the module docstring).

        ``locked``: the stored rows ``(id, url, *columns)`` of all of ``urls``, by id, that
        the caller has locked and read (else they are locked and read here, by URL).
        ``clear_leases``: ids of rows whose lease the update clears too (a report's).
        """
        if locked is not None:
            found = locked
        else:
            found = con.execute(
                pgsql.select_rows(self.columns, lock=True), (list(dict.fromkeys(urls)),)
            ).fetchall()
        hosts = self._read_hosts(con)
        work = self._state_of(hosts, [r[1:] for r in found], dict.fromkeys(COUNTERS, 0))
        n_hosts, n_known = len(work.hosts), len(found)
        change(work)  # validates first: raises (and nothing is written) or mutates work
        if work.n > n_known or len(work.hosts) > n_hosts:  # ids are allocated under the lock
            self._counters(con, lock=True)
            hosts_now = con.execute(pgsql.HOST_COUNT).fetchone()[0]
            urls_now = con.execute(pgsql.ANY_URL, (work.urls[n_known:],)).fetchone()[0]
            if hosts_now != n_hosts or urls_now:
                raise _Again
        next_id, n_urls = self._id_range(con)
        batch = Batch(work, [r[0] for r in found], next_id, n_hosts, n_urls, {}, {})
        self._write_batch(con, batch, log=log, clear_leases=clear_leases)
        batch.after = self._add_counters(
            con,
            {
                "version": work.version,
                "revision": 1,
                "baseline_flags_ignored": work.baseline_flags_ignored,
            },
        )
        batch.counters = {"revision": batch.after["revision"] - 1}
        return batch

    def _add_counters(self, con: psycopg.Connection, deltas: dict[str, int]) -> dict[str, int]:
        """Move counters on by ``deltas`` (locking their row until the commit); all of them
        afterwards."""
        con.execute(pgsql.COUNTERS_ADD, (list(deltas), list(deltas.values())))
        return self._counters(con, lock=False)

    # ---------------------------------------------------------- backend statements
    def _counters(self, con: psycopg.Connection, *, lock: bool) -> dict[str, int]:
        sql = pgsql.COUNTERS_LOCK if lock else pgsql.COUNTERS_READ
        meta = dict(con.execute(sql, (list(COUNTERS),)).fetchall())
        return parse_counters(meta, self.path)

    def _read_hosts(self, con: psycopg.Connection) -> list[str]:
        return checked_hosts(con.execute(pgsql.HOSTS).fetchall(), self.path)

    def _id_range(self, con: psycopg.Connection) -> tuple[int, int]:
        (next_id,) = con.execute(pgsql.URL_IDS).fetchone()
        return next_id, next_id  # ids are 0..n-1: URLs are never deleted

    def _write_batch(
        self,
        con: psycopg.Connection,
        batch: Batch,
        *,
        log: bool,
        clear_leases: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        work, k = batch.work, batch.n_known
        if len(work.hosts) > batch.n_hosts:
            new = range(batch.n_hosts, len(work.hosts))
            con.execute(pgsql.HOSTS_INSERT, (list(new), [work.hosts[i] for i in new]))
        columns = (*self.columns, "due_after")
        cols = [work.column(c) for c in self.columns] + [due_after(work, as_list=False)]

        def part(rows: slice) -> list[Any]:
            return [
                pg_array(v[rows], pgsql.COLUMN_TYPES[c]) for c, v in zip(columns, cols, strict=True)
            ]

        ids = PgArray(batch.ids, "bigint")
        if k and clear_leases:
            clear = PgArray([i in clear_leases for i in batch.ids], "bool")
            con.execute(
                pgsql.update_rows(columns, clear_leases=True), [*part(slice(0, k)), clear, ids]
            )
        elif k:
            con.execute(pgsql.update_rows(columns), [*part(slice(0, k)), ids])
        if batch.n_new:
            new_ids = PgArray(np.arange(batch.next_id, batch.next_id + batch.n_new), "bigint")
            con.execute(pgsql.insert_rows(columns), [new_ids, work.urls[k:], *part(slice(k, None))])
        if log and len(work.log_time):
            con.execute(pgsql.FETCH_LOG_INSERT, (work.log_host.tolist(), work.log_time.tolist()))
            con.execute(pgsql.FETCH_LOG_PRUNE, (float(self.config.politeness_window),))


def _unreachable(location: str) -> str | None:
    """Why a direct connection to ``location`` fails now (``None`` if it does not)."""
    try:
        psycopg.connect(location, connect_timeout=3).close()
    except psycopg.Error as exc:
        return _first_line(exc)
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
