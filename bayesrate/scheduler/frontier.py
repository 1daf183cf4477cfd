"""A frontier for a crawler fleet: leases of due URLs, idempotent reports, shared politeness.

Many fetch workers, on many hosts, share one PostgreSQL state
(:class:`~bayesrate.scheduler.pgstore.PgStore`) through a :class:`Frontier`:

- :meth:`Frontier.lease` hands a worker up to ``k`` due URLs, earliest due first (each row's
  due time is :func:`~bayesrate.scheduler.decide.due_times`), locking candidate rows with
  ``FOR UPDATE SKIP LOCKED`` so concurrent workers never wait for each other nor get the
  same URL. Each lease has a fetch id and an expiry; a URL under a live lease is not leased
  again, and an expired lease (a worker that died) returns the URL to the queue.
- :meth:`Frontier.report` applies fetch results by fetch id in one transaction with the
  state's maths. It is idempotent: a fetch id already reported is not counted again, so a
  worker that retries after a timeout (or a lost connection) counts each fetch once. A
  result that arrives after a newer fetch of the same URL was applied (its lease had
  expired and the URL was fetched again) is recorded as ``stale`` and not applied: the
  posterior takes fetches in time order.
- **Politeness across the fleet**: each host has a crawl delay (``hosts.crawl_delay``,
  hours; default ``politeness_window / politeness_limit`` of the state's configuration,
  none without a limit) and a next-allowed time, both in the database. A lease takes at
  most one URL of a delayed host, only once its next-allowed time has come, and moves that
  time on by the delay, holding the host's row lock: the fleet together leases a host's
  URLs at least one delay apart, as one worker would.

Times are hours since the epoch; ``now`` defaults to the wall clock (tests pass it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesrate.errors import ObservationError
from bayesrate.scheduler import pgsql
from bayesrate.scheduler.pgstore import PgArray, PgStore
from bayesrate.scheduler.statestore import Batch
from bayesrate.scheduler.wallclock import check_fetch_times, now_hours

#: hours a lease lasts unless the caller says otherwise (10 minutes)
DEFAULT_LEASE_HOURS = 1.0 / 6.0


@dataclass(frozen=True)
class Lease:
    """One URL leased to a worker: fetch it and report the result under ``fetch_id``.

    ``digest`` is the content digest reported with the URL's last applied fetch (``None``:
    none yet): a worker compares it with the digest of what it fetched to tell a change.
    """

    fetch_id: int
    url: str
    host: str
    expires: float
    digest: str | None = None


@dataclass(frozen=True)
class FetchResult:
    """A worker's result: the fetch ``fetch_id`` happened at ``time`` and saw a change or
    not; ``digest`` (optional) is stored with the URL and handed out with its next lease."""

    fetch_id: int
    time: float
    changed: int
    digest: str | None = None


@dataclass(frozen=True)
class ReportResult:
    """What a report did.

    Attributes
    ----------
    applied
        Fetches applied to the state now.
    duplicates
        Fetch ids reported before (a retried report): not counted again.
    stale
        Fetches older than their URL's last applied fetch: recorded, not applied.
    revision
        The state's revision afterwards (unchanged when nothing was applied).
    """

    applied: int
    duplicates: int
    stale: int
    revision: int


class Frontier:
    """Leases and reports over a PostgreSQL scheduler state (see the module docstring).

    Parameters
    ----------
    store
        The state.
    lease_hours
        Default lease duration.
    """

    def __init__(self, store: PgStore, *, lease_hours: float = DEFAULT_LEASE_HOURS) -> None:
        _positive(lease_hours, "lease_hours")
        self.store = store
        self.lease_hours = float(lease_hours)
        limit = store.config.politeness_limit
        #: crawl delay (hours) of hosts without their own
        self.default_delay = 0.0 if limit is None else store.config.politeness_window / limit

    @classmethod
    def open(cls, location: str, **kwargs: Any) -> Frontier:
        """Open the frontier of the state at a database URL (``kwargs`` go to :class:`Frontier`)."""
        return cls(PgStore.open(location), **kwargs)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ leases
    def lease(
        self, worker: str, k: int, *, now: float | None = None, hours: float | None = None
    ) -> list[Lease]:
        """Lease up to ``k`` due URLs to ``worker`` for ``hours`` (default :attr:`lease_hours`).

        Returns the leases, earliest due first; fewer than ``k`` (or none) when fewer URLs
        are due, leased elsewhere, or held back by their host's crawl delay.
        """
        if not isinstance(worker, str) or not worker:
            raise ObservationError("worker must be a non-empty name", field="worker")
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ObservationError(f"k must be an integer >= 0, got {k!r}", field="k")
        now = now_hours() if now is None else float(now)
        hours = self.lease_hours if hours is None else _positive(hours, "hours")
        if k == 0:
            return []
        expires = now + hours

        def take(con: Any) -> list[Lease]:
            leases: list[Lease] = []
            if self.default_delay == 0:  # one statement for the URLs of undelayed hosts
                args = {"now": now, "k": int(k), "worker": worker, "expires": expires}
                rows = sorted(con.execute(pgsql.LEASE_UNDELAYED, args).fetchall())
                leases = [Lease(r[2], r[3], r[4], expires, r[5]) for r in rows]
                if len(leases) == k or not con.execute(pgsql.ANY_DELAYED).fetchone()[0]:
                    return leases
            picked, next_allowed = self._pick(con, int(k) - len(leases), now)
            if not picked:
                return leases
            fetches = con.execute(pgsql.FETCHES_INSERT, (worker, now, expires, picked)).fetchall()
            fetch_of = dict((u, f) for f, u in fetches)
            rows = con.execute(
                pgsql.LEASE_SET, (expires, picked, [fetch_of[u] for u in picked])
            ).fetchall()
            if next_allowed:
                con.execute(
                    pgsql.HOSTS_NEXT_ALLOWED, (list(next_allowed), list(next_allowed.values()))
                )
            by_id = {r[0]: r for r in rows}
            return leases + [
                Lease(fetch_of[u], by_id[u][1], by_id[u][2], expires, by_id[u][3]) for u in picked
            ]

        return self.store._transaction(take, what="lease URLs")

    def _pick(self, con: Any, k: int, now: float) -> tuple[list[int], dict[int, float]]:
        """Ids of the URLs to lease (locked) and the hosts' new next-allowed times.

        Takes the ``k`` first due URLs, and more (4 times as many each time) only when
        crawl delays hold some back: every candidate row is locked until the commit.
        """
        limit = k
        while True:
            cands = con.execute(pgsql.LEASE_CANDIDATES, {"now": now, "limit": limit}).fetchall()
            hosts = sorted({h for _, h in cands})
            args = {"hosts": hosts, "default": self.default_delay, "now": now}
            delayed = {h for (h,) in con.execute(pgsql.DELAYED_HOSTS, args).fetchall()}
            free = dict(con.execute(pgsql.POLITE_HOSTS, args).fetchall()) if delayed else {}
            picked: list[int] = []
            next_allowed: dict[int, float] = {}
            for url, host in cands:
                if host in delayed:
                    if host not in free or host in next_allowed:
                        continue
                    next_allowed[host] = now + free[host]
                picked.append(url)
                if len(picked) == k:
                    break
            if len(picked) == k or len(cands) < limit:
                return picked, next_allowed
            limit *= 4

    def set_crawl_delay(self, host: str, hours: float | None) -> None:
        """Set a host's crawl delay in hours (``None``: back to the state's default)."""
        if hours is not None:
            hours = _positive(hours, "crawl delay", zero=True)

        def write(con: Any) -> None:
            if not con.execute(pgsql.CRAWL_DELAY_SET, (hours, str(host))).fetchall():
                raise ObservationError(f"unknown host {host!r}", field="host")

        self.store._transaction(write, what="set a crawl delay")

    def counts(self, now: float | None = None) -> dict[str, int]:
        """URLs under a live lease, and URLs due and free to lease, at ``now``."""
        now = now_hours() if now is None else float(now)
        leased, due = self.store.read(
            lambda con: con.execute(pgsql.LEASE_COUNTS, (now, now, now)).fetchone()
        )
        return {"leased": int(leased), "due": int(due)}

    # ------------------------------------------------------------------ reports
    def report(
        self, results: Sequence[FetchResult | tuple], *, now: float | None = None
    ) -> ReportResult:
        """Apply fetch results by fetch id, once each (see the module docstring).

        ``results`` are :class:`FetchResult` or ``(fetch_id, time, changed[, digest])``
        tuples. Unknown
        fetch ids, a fetch id twice in one report, flags other than 0/1 and times in the
        future are errors that apply nothing.
        """
        ids, times, changed, digests = _checked_results(results)
        now = check_fetch_times(times, now=now)
        if not ids:
            return ReportResult(0, 0, 0, self.store._state_revision)

        def apply(con: Any) -> tuple[ReportResult, Batch | None]:
            store = self.store
            # lock the URLs' rows first (in id order, as every writer), then the fetches
            id_array = PgArray(ids, "bigint")
            sql = pgsql.lock_rows_of_fetches(store.columns)
            rows = {r[0]: r for r in con.execute(sql, (id_array,)).fetchall()}
            lease_of = {u: r[1] for u, r in rows.items()}
            last = 3 + store.columns.index("last_fetch")
            # per fetch id: (URL, reported before, the URL's last fetch, URL id)
            found = {
                f: (rows[u][2], reported, rows[u][last], u)
                for f, u, reported in con.execute(pgsql.FETCHES_OF_REPORT, (id_array,)).fetchall()
                if u in rows
            }
            unknown = [i for i, f in enumerate(ids) if f not in found]
            if unknown:
                raise ObservationError(
                    "unknown fetch ids (not handed out by lease)",
                    field="fetch_id",
                    rows=unknown,
                    pages=[str(ids[i]) for i in unknown],
                )
            status = _statuses(ids, times, found)
            fresh = [i for i, s in enumerate(status) if s == "applied"]
            new = [i for i, s in enumerate(status) if s != "duplicate"]
            # rows whose live lease is one of the reported fetches: cleared (a URL leased
            # again since keeps its new lease), by the state update for the applied ones
            new_ids = {ids[i] for i in new}
            clear = {u for u, f in lease_of.items() if f is not None and f in new_ids}
            batch = None
            if fresh:
                urls = [found[ids[i]][0] for i in fresh]
                fresh_ids = sorted({found[ids[i]][3] for i in fresh})
                t, c = times[fresh], changed[fresh]
                batch = store._apply_in(
                    con,
                    urls,
                    lambda work: work.observe(urls, t, c),
                    log=True,
                    locked=[(u, *rows[u][2:]) for u in fresh_ids],
                    clear_leases=clear,
                )
                clear -= set(fresh_ids)
                latest: dict[str, tuple[float, str]] = {}  # per URL: its latest fetch's
                for i in fresh:
                    url = found[ids[i]][0]
                    if digests[i] is not None and times[i] > latest.get(url, (-math.inf,))[0]:
                        latest[url] = (float(times[i]), digests[i])
                if latest:
                    con.execute(pgsql.DIGESTS_SET, (list(latest), [d for _, d in latest.values()]))
            if new:
                con.execute(
                    pgsql.FETCHES_REPORTED,
                    (
                        now,
                        PgArray([ids[i] for i in new], "bigint"),
                        PgArray(times[new], "float8"),
                        PgArray(changed[new], "smallint"),
                        [status[i] for i in new],
                    ),
                )
            if clear:  # leases of stale fetches only
                con.execute(pgsql.LEASES_CLEAR, (sorted(clear), [ids[i] for i in new]))
            revision = (
                batch.after["revision"] if batch else store._counters(con, lock=False)["revision"]
            )
            out = ReportResult(
                len(fresh), status.count("duplicate"), status.count("stale"), revision
            )
            return out, batch

        out, batch = self.store._transaction(apply, what="report fetches")
        if batch is not None:
            self.store._patch(batch.work, batch.counters["revision"], batch.after)
        return out


def _positive(value: Any, name: str, *, zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (math.isfinite(v) and (v > 0 or (zero and v == 0))):
        raise ObservationError(
            f"{name} must be a {'non-negative' if zero else 'positive'} number of hours, "
            f"got {value!r}",
            field=name,
        )
    return v


def _checked_results(
    results: Sequence[FetchResult | tuple],
) -> tuple[list[int], np.ndarray, np.ndarray, list[str | None]]:
    """Fetch ids, times, flags and digests of ``results``; :class:`ObservationError` naming
    bad rows."""
    ids, times, flags, digests = [], [], [], []
    for r in results:
        f, t, c, d = (
            (r.fetch_id, r.time, r.changed, r.digest)
            if isinstance(r, FetchResult)
            else (*r, None)[:4]
        )
        ids.append(f)
        times.append(t)
        flags.append(c)
        digests.append(None if d is None else str(d))
    bad = [
        i for i, f in enumerate(ids) if isinstance(f, bool) or not isinstance(f, int | np.integer)
    ]
    if bad:
        raise ObservationError("fetch ids must be integers", field="fetch_id", rows=bad)
    ids = [int(f) for f in ids]
    seen: dict[int, int] = {}
    twice = [i for i, f in enumerate(ids) if seen.setdefault(f, i) != i]
    if twice:
        raise ObservationError("a fetch id comes twice in one report", field="fetch_id", rows=twice)
    try:
        t = np.asarray(times, dtype=np.float64)
        c = np.asarray(flags, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ObservationError(f"times and flags must be numbers ({exc})", field="time") from None
    bad = np.flatnonzero(~np.isin(c, (0.0, 1.0))).tolist()
    if bad:
        raise ObservationError("'changed' must be 0 or 1", field="changed", rows=bad)
    return ids, t, c.astype(np.int8), digests


def _statuses(ids: list[int], times: np.ndarray, found: dict[int, tuple]) -> list[str]:
    """``applied``, ``duplicate`` (reported before) or ``stale`` (not after the URL's last
    fetch, in the state or earlier in this report) per result."""
    status = ["applied"] * len(ids)
    last: dict[str, float] = {}
    for i in np.argsort(times, kind="stable").tolist():
        url, reported, stored_last, _ = found[ids[i]]
        if reported:
            status[i] = "duplicate"
            continue
        before = last.get(url, -math.inf if stored_last is None else stored_last)
        if not times[i] > before:
            status[i] = "stale"
            continue
        last[url] = float(times[i])
    return status
