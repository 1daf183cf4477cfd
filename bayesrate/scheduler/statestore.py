"""What every durable scheduler store shares: the snapshot, batch writes by URL, row checks.

A store mirrors a :class:`~bayesrate.scheduler.state.SchedulerState` in a database: the
SQLite file of :class:`~bayesrate.scheduler.store.Store` (the embedded default) or a
PostgreSQL database (:class:`~bayesrate.scheduler.pgstore.PgStore`, for a crawler fleet).
Both keep the same tables (``meta``, ``hosts``, ``urls``, ``fetch_log``) and give the same
guarantees (``docs/reliability.md``): every write is one transaction that re-reads the rows
it touches (by URL) under the database's lock, applies the batch to those rows with the
maths of :meth:`SchedulerState.observe <bayesrate.scheduler.state.SchedulerState.observe>`
and writes back only those rows, so every acknowledged batch survives any interleaving of
writers. :class:`StateStore` holds that logic once; a backend supplies the transaction and
the few statements that read and write rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesrate.errors import ArtifactError
from bayesrate.priors import PriorSet
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState, storage_columns
from bayesrate.scheduler.wallclock import check_fetch_times

#: ``meta.kind`` of a scheduler state, in every backend
KIND = "bayesrate-scheduler-state"
COUNTERS = ("version", "revision", "baseline_flags_ignored")
INTEGER_COLUMNS = ("host", "n_fetch", "n_changed")


@dataclass(frozen=True)
class WriteResult:
    """What one write did: rows in the batch, URLs added, URLs in the store afterwards."""

    rows: int
    new_urls: int
    urls: int
    revision: int


@dataclass
class Batch:
    """One batch applied to the rows it touches (inside a write transaction).

    Attributes
    ----------
    work
        A state holding only the touched rows (and every host), after the change.
    ids
        Database ids of the rows that existed before (the first ``n_known`` of ``work``).
    next_id
        The id of the first new row (new rows get consecutive ids).
    n_hosts
        Hosts before the change (new hosts follow).
    n_urls
        URLs in the store before the change.
    counters
        The stored counters before the change; ``after`` the ones written.
    """

    work: SchedulerState
    ids: list[int]
    next_id: int
    n_hosts: int
    n_urls: int
    counters: dict[str, int]
    after: dict[str, int]

    @property
    def n_known(self) -> int:
        return len(self.ids)

    @property
    def n_new(self) -> int:
        return self.work.n - len(self.ids)


class StateStore:
    """A scheduler state in a database; the backend-independent half (see module docstring).

    Subclasses implement :meth:`_transaction` (one write transaction), :meth:`_load_all`,
    :meth:`save_targets`, :meth:`close` and the row statements :meth:`_read_hosts`,
    :meth:`_id_range` and :meth:`_write_batch`; :meth:`_apply_in` (one writers' lock taken
    first, as SQLite's ``BEGIN IMMEDIATE``) also needs :meth:`_read_counters`,
    :meth:`_select_rows` and :meth:`_write_counters`; a backend with row-level locks
    (:class:`~bayesrate.scheduler.pgstore.PgStore`) overrides it instead.

    Attributes
    ----------
    path
        Where the state is, as named in messages (a file, or a database URL without its
        password).
    """

    def __init__(
        self, path: Any, config: SchedulerConfig, priors: PriorSet, *, readonly: bool = False
    ) -> None:
        self.path = path
        self.config = config
        self.priors = priors
        self.readonly = readonly
        self.columns = storage_columns(config.posterior)
        self._state: SchedulerState | None = None
        self._state_revision = -1

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> StateStore:
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
        """Reload the snapshot from the database."""
        self._state = None
        return self.state

    def _load_all(self) -> tuple[SchedulerState, int]:
        raise NotImplementedError

    def _state_from(
        self,
        hosts: list[str],
        rows: Sequence[tuple],
        counters: dict[str, int],
        log: Sequence[tuple] = (),
    ) -> SchedulerState:
        """The whole state from its stored rows (url + :attr:`columns`) and politeness log."""
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
        return state

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
            columns = checked_columns(raw, urls, hosts, self.path, state.grid)
            state.set_rows([str(u) for u in urls], columns)
        return state

    # ------------------------------------------------------------------ writes
    def add(
        self, urls: Sequence[str], hosts: Sequence[str], weights: Sequence[float] | None = None
    ) -> WriteResult:
        """Register new URLs durably (see :meth:`SchedulerState.add`)."""
        urls = [str(u) for u in urls]
        return self._apply(urls, lambda work: work.add(urls, hosts, weights), retry=False)

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
            urls, lambda work: work.observe(urls, t, changed, hosts, weights), log=True, retry=False
        )

    def reset(self, urls: Sequence[str], *, keep_rate: bool = False) -> WriteResult:
        """Forget URLs' fetch history durably (see :meth:`SchedulerState.reset`)."""
        urls = [str(u) for u in urls]
        return self._apply(urls, lambda work: work.reset(urls, keep_rate=keep_rate))

    def save_targets(self) -> None:
        """Persist ``state.target`` (after :func:`~bayesrate.scheduler.decide.plan`)."""
        raise NotImplementedError

    def _transaction(self, body: Callable[[Any], Any], *, retry: bool = True) -> Any:
        """Run ``body(tx)`` in one write transaction that serialises writers; its result.

        ``retry=False``: the backend may not re-run ``body`` after a lost connection.
        """
        raise NotImplementedError

    def _apply(
        self,
        urls: list[str],
        change: Callable[[SchedulerState], Any],
        *,
        log: bool = False,
        retry: bool = True,
    ) -> WriteResult:
        """Re-read the rows of ``urls`` under the write lock, ``change`` them, write them.

        ``retry=False``: the change is not idempotent (see :meth:`_transaction`).
        """
        batch = self._transaction(lambda tx: self._apply_in(tx, urls, change, log=log), retry=retry)
        self._patch(batch.work, batch.counters["revision"], batch.after)
        return WriteResult(
            len(urls), batch.n_new, batch.n_urls + batch.n_new, batch.after["revision"]
        )

    def _apply_in(
        self, tx: Any, urls: list[str], change: Callable[[SchedulerState], Any], *, log: bool
    ) -> Batch:
        """:meth:`_apply`'s work inside the open transaction ``tx``."""
        counters = self._read_counters(tx)
        hosts = self._read_hosts(tx)
        found = self._select_rows(tx, list(dict.fromkeys(urls)))
        next_id, n_urls = self._id_range(tx)
        work = self._state_of(hosts, [r[1:] for r in found], dict.fromkeys(COUNTERS, 0))
        n_hosts = len(work.hosts)
        change(work)  # validates first: raises (and nothing is written) or mutates work
        after = {
            "version": counters["version"] + work.version,
            "revision": counters["revision"] + 1,
            "baseline_flags_ignored": counters["baseline_flags_ignored"]
            + work.baseline_flags_ignored,
        }
        batch = Batch(work, [r[0] for r in found], next_id, n_hosts, n_urls, counters, after)
        self._write_batch(tx, batch, log=log)
        self._write_counters(tx, after)
        return batch

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

    # ---------------------------------------------------------- backend statements
    def _read_counters(self, tx: Any) -> dict[str, int]:
        raise NotImplementedError

    def _read_hosts(self, tx: Any) -> list[str]:
        raise NotImplementedError

    def _select_rows(self, tx: Any, urls: list[str]) -> list[tuple]:
        """``(id, url, *columns)`` of the stored rows of ``urls``, by id."""
        raise NotImplementedError

    def _id_range(self, tx: Any) -> tuple[int, int]:
        """The next free URL id and the number of URLs."""
        raise NotImplementedError

    def _write_batch(self, tx: Any, batch: Batch, *, log: bool) -> None:
        """Insert the new hosts and URLs of ``batch``, update its known rows, log fetches."""
        raise NotImplementedError

    def _write_counters(self, tx: Any, counters: dict[str, int]) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------- metadata
def parse_meta(
    meta: dict[str, str], path: Any, versions: Sequence[str], version_of: Callable[[str], int]
) -> tuple[SchedulerConfig, PriorSet]:
    """Check a state's ``meta`` table (kind, schema version, counters); its config and priors.

    ``versions`` are the schema versions this backend reads; ``version_of(posterior)`` the
    one a state of that posterior family must have.
    """
    if meta.get("kind") != KIND:
        raise ArtifactError(f"{path} is not a scheduler state (kind={meta.get('kind')})")
    if meta.get("schema_version") not in versions:
        raise ArtifactError(
            f"{path} has schema version {meta.get('schema_version')}; this bayesrate "
            f"reads versions {', '.join(versions)}"
        )
    parse_counters(meta, path)
    try:
        config = SchedulerConfig(**json.loads(meta["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{path} is damaged: meta 'config' is unreadable ({exc})") from exc
    if meta["schema_version"] != str(version_of(config.posterior)):
        raise ArtifactError(
            f"{path} is damaged: schema version {meta['schema_version']} does not hold "
            f"{config.posterior!r} posteriors"
        )
    try:
        priors = PriorSet.from_json(json.loads(meta["priors"]))
    except (KeyError, TypeError, ValueError, AttributeError, ArtifactError) as exc:
        raise ArtifactError(f"{path} is damaged: meta 'priors' is unreadable ({exc})") from exc
    return config, priors


def initial_meta(state: SchedulerState, schema_version: int) -> dict[str, str]:
    """The ``meta`` rows of a new state."""
    return {
        "kind": KIND,
        "schema_version": str(schema_version),
        "config": json.dumps(state.config.to_dict()),
        "priors": json.dumps(state.priors.to_json()),
        "version": "0",
        "revision": "0",
        "baseline_flags_ignored": "0",
    }


def parse_counters(meta: dict[str, str], path: Any) -> dict[str, int]:
    """The counters of ``meta`` as integers; :class:`ArtifactError` for one that is not."""
    out = {}
    for key in COUNTERS:
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


def checked_hosts(rows: Sequence[tuple], path: Any) -> list[str]:
    """Host names from ``(id, name)`` rows by id; the ids must be ``0..n-1``."""
    ids = [r[0] for r in rows]
    if ids != list(range(len(rows))):
        raise ArtifactError(f"{path} is damaged: host ids are not 0..{len(rows) - 1}")
    names = [r[1] for r in rows]
    if not all(isinstance(n, str) and n for n in names):
        raise ArtifactError(f"{path} is damaged: host names must be non-empty text")
    return names


# ---------------------------------------------------------------------- row checks
def _log_weights(blobs: Sequence[Any], size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, size)`` float32 log-probabilities from BLOBs, and which rows are impossible
    (wrong length, not bytes, not finite, positive, or not summing to 1)."""
    out = np.zeros((len(blobs), size), dtype=np.float32)
    bad = np.zeros(len(blobs), dtype=bool)
    for i, blob in enumerate(blobs):
        if isinstance(blob, memoryview | bytearray):
            blob = bytes(blob)
        if not isinstance(blob, bytes) or len(blob) != 4 * size:
            bad[i] = True
            continue
        out[i] = np.frombuffer(blob, dtype="<f4")
    with np.errstate(invalid="ignore", over="ignore"):
        total = np.exp(out.astype(np.float64)).sum(axis=1)
    bad |= ~np.isfinite(out).all(axis=1) | (out > 0).any(axis=1) | ~(np.abs(total - 1) < 1e-3)
    return out, bad


def checked_columns(
    raw: dict[str, Sequence[Any]],
    urls: Sequence[str],
    hosts: Sequence[str],
    path: Any,
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
    for name in INTEGER_COLUMNS:
        problems[name] |= ~np.isfinite(cols[name]) | (cols[name] != np.round(cols[name]))
    for name, bad in problems.items():
        if bad.any():
            where = np.flatnonzero(bad)
            shown = ", ".join(repr(urls[i]) for i in where[:5])
            raise ArtifactError(
                f"{path} is damaged: impossible {name!r} for {len(where)} URL(s) "
                f"({shown}{', ...' if len(where) > 5 else ''}); restore a backup or reset them"
            )
    for name in INTEGER_COLUMNS:
        cols[name] = cols[name].astype(np.int32)
    return cols


def sql_values(col: np.ndarray) -> list[Any]:
    """Python values for SQL (NaN → NULL; rows of a 2-D column → little-endian BLOBs)."""
    if col.ndim == 2:
        data = np.ascontiguousarray(col, dtype="<f4")
        return [row.tobytes() for row in data]
    values = col.tolist()
    if col.dtype.kind == "f":
        for i in np.flatnonzero(np.isnan(col)).tolist():
            values[i] = None
    return values
