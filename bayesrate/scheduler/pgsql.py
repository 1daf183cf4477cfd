"""Every SQL statement of the PostgreSQL scheduler state, and its versioned migrations.

Used by :mod:`~bayesrate.scheduler.pgstore` (the state) and
:mod:`~bayesrate.scheduler.frontier` (leases, reports, politeness); nothing else writes SQL
for PostgreSQL. Times are hours since the Unix epoch (``double precision``), as in the
SQLite file.

**Migrations.** :data:`MIGRATIONS` is an append-only list of ``(version, statements)``;
:func:`migrate` applies, in one transaction under an advisory lock, the versions that the
``schema_migrations`` table does not list, and refuses a database migrated by a newer
bayesrate. Version 1 holds the state (the SQLite file's tables); version 2 the fleet: due
times, leases, the fetch log that makes reports idempotent, and per-host politeness;
version 3 the content digest of each URL's last fetch; version 4 room on each page for
a lease's and a report's new row versions (``fillfactor``), so that they are HOT updates.
"""

from __future__ import annotations

from typing import Any

#: key of the advisory lock that serialises migrations and ``init``
MIGRATION_LOCK = 0x62617965  # "baye"

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE hosts (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)",
            "CREATE TABLE urls ("
            " id BIGINT PRIMARY KEY, url TEXT UNIQUE NOT NULL, host INTEGER NOT NULL,"
            " weight DOUBLE PRECISION NOT NULL, alpha DOUBLE PRECISION, beta DOUBLE PRECISION,"
            " log_weights BYTEA, last_fetch DOUBLE PRECISION, last_change DOUBLE PRECISION,"
            " n_fetch INTEGER NOT NULL, n_changed INTEGER NOT NULL,"
            " target DOUBLE PRECISION NOT NULL) WITH (fillfactor = 70)",  # room for HOT updates
            "CREATE TABLE fetch_log (host INTEGER NOT NULL, time DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX fetch_log_time ON fetch_log (time)",
        ),
    ),
    (
        2,
        (
            # due_after: hours after last_fetch when the URL is due (decide.due_times)
            "ALTER TABLE urls ADD COLUMN due_after DOUBLE PRECISION NOT NULL DEFAULT 0,"
            " ADD COLUMN lease_fetch BIGINT, ADD COLUMN lease_until DOUBLE PRECISION",
            "CREATE INDEX urls_due ON urls"
            " ((COALESCE(last_fetch + due_after, '-Infinity'::float8)), id)",
            # crawl_delay NULL: the state's politeness limit (window / limit), else none
            "ALTER TABLE hosts ADD COLUMN crawl_delay DOUBLE PRECISION,"
            " ADD COLUMN next_allowed DOUBLE PRECISION NOT NULL DEFAULT '-Infinity'",
            "CREATE TABLE fetches ("
            " id BIGSERIAL PRIMARY KEY, url BIGINT NOT NULL, worker TEXT NOT NULL,"
            " leased_at DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL,"
            " reported_at DOUBLE PRECISION, time DOUBLE PRECISION, changed SMALLINT,"
            " status TEXT)",
            "CREATE INDEX fetches_url ON fetches (url)",
        ),
    ),
    (
        3,
        # the content digest of the last applied fetch (workers detect changes by it)
        ("ALTER TABLE urls ADD COLUMN digest TEXT",),
    ),
    (
        4,
        # a lease writes a new version of each leased urls row (lease columns, not indexed)
        # and a report one of each fetches row: with room on the page for it the update is
        # HOT (no index entries); pages written from now on (a table's existing pages keep
        # their fill until rewritten); fetches are looked up by id only: no index by URL
        # (one index entry less per lease)
        (
            "ALTER TABLE urls SET (fillfactor = 50)",
            "ALTER TABLE fetches SET (fillfactor = 50)",
            "DROP INDEX fetches_url",
        ),
    ),
)
LATEST = MIGRATIONS[-1][0]


def migrate(cur: Any) -> int:
    """Apply the missing migrations inside the caller's transaction; the version reached.

    Raises
    ------
    RuntimeError
        The database lists a version this bayesrate does not know (a newer one wrote it).
    """
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    cur.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    done = {v for (v,) in cur.execute("SELECT version FROM schema_migrations").fetchall()}
    unknown = sorted(done - {v for v, _ in MIGRATIONS})
    if unknown:
        raise RuntimeError(
            f"schema version {unknown[-1]} is newer than this bayesrate knows ({LATEST})"
        )
    for version, statements in MIGRATIONS:
        if version not in done:
            for statement in statements:
                cur.execute(statement)
            cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    return LATEST


APPLIED = "SELECT version FROM schema_migrations ORDER BY version"
HAS_MIGRATIONS = "SELECT to_regclass('schema_migrations') IS NOT NULL"

# ---------------------------------------------------------------------- state
META_ALL = "SELECT key, value FROM meta"
META_INSERT = "INSERT INTO meta (key, value) VALUES (%s, %s)"
#: the counters, locked: every writer takes this lock first, so writers are serialised
COUNTERS_LOCK = "SELECT key, value FROM meta WHERE key = ANY(%s) ORDER BY key FOR UPDATE"
COUNTERS_READ = "SELECT key, value FROM meta WHERE key = ANY(%s)"
HOSTS = "SELECT id, name FROM hosts ORDER BY id"
#: the counters moved on by a write, last (the counters row is locked only until the commit)
COUNTERS_ADD = (
    "UPDATE meta SET value = (meta.value::bigint + v.delta)::text"
    " FROM unnest(%b::text[], %b::bigint[]) AS v(key, delta) WHERE meta.key = v.key"
    " RETURNING meta.key, meta.value"
)
#: whether any of the URLs exists (new URLs of a batch, checked under the counters lock)
ANY_URL = "SELECT EXISTS (SELECT 1 FROM urls WHERE url = ANY(%b::text[]))"
HOST_COUNT = "SELECT count(*) FROM hosts"
HOSTS_INSERT = "INSERT INTO hosts (id, name) SELECT * FROM unnest(%b::int[], %b::text[])"
URL_IDS = "SELECT COALESCE(MAX(id), -1) + 1 FROM urls"
FETCH_LOG = "SELECT host, time FROM fetch_log ORDER BY time, host"
FETCH_LOG_INSERT = "INSERT INTO fetch_log SELECT * FROM unnest(%b::int[], %b::float8[])"
FETCH_LOG_PRUNE = "DELETE FROM fetch_log WHERE time <= (SELECT MAX(time) FROM fetch_log) - %s"
TARGETS_UPDATE = (
    "UPDATE urls SET target = v.target, due_after = v.due_after"
    " FROM unnest(%b::text[], %b::float8[], %b::float8[]) AS v(url, target, due_after)"
    " WHERE urls.url = v.url"
)

#: SQL type of each stored column (the state's columns and ``due_after``)
COLUMN_TYPES = {
    "id": "bigint",
    "url": "text",
    "host": "int",
    "weight": "float8",
    "alpha": "float8",
    "beta": "float8",
    "log_weights": "bytea",
    "last_fetch": "float8",
    "last_change": "float8",
    "n_fetch": "int",
    "n_changed": "int",
    "target": "float8",
    "due_after": "float8",
    "clear_lease": "bool",
}


def select_rows(columns: tuple[str, ...], *, lock: bool = False) -> str:
    """``(id, url, *columns)`` of the rows whose URL is in the array parameter, by id
    (``lock``: locked in id order, the order every writer locks rows in)."""
    lock_clause = " FOR UPDATE" if lock else ""
    return (
        f"SELECT id, url, {', '.join(columns)} FROM urls WHERE url = ANY(%b::text[])"
        f" ORDER BY id{lock_clause}"
    )


def select_all(columns: tuple[str, ...]) -> str:
    """``(url, *columns)`` of every row, by id."""
    return "SELECT url, " + ", ".join(columns) + " FROM urls ORDER BY id"


def _unnest(names: tuple[str, ...]) -> str:
    types = ", ".join(f"%b::{COLUMN_TYPES[n]}[]" for n in names)
    return f"unnest({types}) AS v({', '.join(names)})"


def update_rows(columns: tuple[str, ...], *, clear_leases: bool = False) -> str:
    """Overwrite ``columns`` of rows by id; parameters: one array per column, then the ids.

    ``clear_leases``: one more array (booleans, before the ids) says which rows' leases to
    clear in the same update (a report's fetches: one row version instead of two).
    """
    sets = ", ".join(f"{c} = v.{c}" for c in columns)
    names = (*columns, "id")
    if clear_leases:
        sets += (
            ", lease_fetch = CASE WHEN v.clear_lease THEN NULL ELSE urls.lease_fetch END,"
            " lease_until = CASE WHEN v.clear_lease THEN NULL ELSE urls.lease_until END"
        )
        names = (*columns, "clear_lease", "id")
    return f"UPDATE urls SET {sets} FROM {_unnest(names)} WHERE urls.id = v.id"


def lock_rows_of_fetches(columns: tuple[str, ...]) -> str:
    """A report's first statement: ``(id, lease_fetch, url, *columns)`` of the rows of the
    URLs of the fetch ids in the array parameter, locked in id order (as every writer locks
    rows), with their current lease's fetch id."""
    return (
        f"SELECT id, lease_fetch, url, {', '.join(columns)} FROM urls"
        " WHERE id IN (SELECT url FROM fetches WHERE id = ANY(%b::bigint[]))"
        " ORDER BY id FOR UPDATE OF urls"
    )


def insert_rows(columns: tuple[str, ...]) -> str:
    """Insert rows; parameters: the ids, the URLs, then one array per column."""
    names = ("id", "url", *columns)
    return f"INSERT INTO urls ({', '.join(names)}) SELECT * FROM {_unnest(names)}"


# ---------------------------------------------------------------------- fleet
#: due time of a URL (never fetched: due at once)
DUE = "COALESCE(last_fetch + due_after, '-Infinity'::float8)"
#: due URLs not under a live lease, earliest due first, locked (skipping locked rows)
LEASE_CANDIDATES = (
    f"SELECT id, host FROM urls WHERE {DUE} <= %(now)s"
    " AND (lease_until IS NULL OR lease_until <= %(now)s)"
    f" ORDER BY {DUE}, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
)
#: the whole lease of URLs whose host has no crawl delay, in one statement (when the state
#: has no politeness limit): candidates locked, fetch ids made, leases set; rows
#: (due, url id, fetch id, url, host name, digest), to be sorted
LEASE_UNDELAYED = (
    "WITH picked AS ("
    f" SELECT id, {DUE} AS due FROM urls WHERE {DUE} <= %(now)s"
    " AND (lease_until IS NULL OR lease_until <= %(now)s)"
    " AND NOT EXISTS (SELECT 1 FROM hosts h WHERE h.id = urls.host AND h.crawl_delay > 0)"
    f" ORDER BY {DUE}, id LIMIT %(k)s FOR UPDATE SKIP LOCKED),"
    " made AS (INSERT INTO fetches (url, worker, leased_at, expires)"
    " SELECT id, %(worker)s, %(now)s, %(expires)s FROM picked ORDER BY due, id"
    " RETURNING id, url)"
    " UPDATE urls SET lease_fetch = made.id, lease_until = %(expires)s"
    " FROM made, picked, hosts"
    " WHERE urls.id = made.url AND picked.id = made.url AND hosts.id = urls.host"
    " RETURNING picked.due, urls.id, made.id, urls.url, hosts.name, urls.digest"
)
ANY_DELAYED = "SELECT EXISTS (SELECT 1 FROM hosts WHERE crawl_delay > 0)"
#: hosts of the candidates with a crawl delay, free now, locked (skipping locked rows)
POLITE_HOSTS = (
    "SELECT id, COALESCE(crawl_delay, %(default)s) FROM hosts WHERE id = ANY(%(hosts)s)"
    " AND COALESCE(crawl_delay, %(default)s) > 0 AND next_allowed <= %(now)s"
    " ORDER BY id FOR UPDATE SKIP LOCKED"
)
#: hosts with a crawl delay among the candidates (those not in POLITE_HOSTS are not free)
DELAYED_HOSTS = (
    "SELECT id FROM hosts WHERE id = ANY(%(hosts)s) AND COALESCE(crawl_delay, %(default)s) > 0"
)
HOSTS_NEXT_ALLOWED = (
    "UPDATE hosts SET next_allowed = v.t FROM unnest(%b::int[], %b::float8[]) AS v(id, t)"
    " WHERE hosts.id = v.id"
)
FETCHES_INSERT = (
    "INSERT INTO fetches (url, worker, leased_at, expires)"
    " SELECT v.url, %s, %s, %s FROM unnest(%b::bigint[]) WITH ORDINALITY AS v(url, k)"
    " ORDER BY v.k RETURNING id, url"
)
LEASE_SET = (
    "UPDATE urls SET lease_fetch = v.fid, lease_until = %s"
    " FROM unnest(%b::bigint[], %b::bigint[]) AS v(id, fid), hosts"
    " WHERE urls.id = v.id AND hosts.id = urls.host"
    " RETURNING urls.id, urls.url, hosts.name, urls.digest"
)
#: the fetches of a report ``(id, url id, reported)``, read after the report has locked
#: their URLs' rows (lock_rows_of_fetches): a retried report waits there for the first to
#: commit, and this statement's snapshot (READ COMMITTED: taken after the wait) sees the
#: first's reports
FETCHES_OF_REPORT = (
    "SELECT id, url, reported_at IS NOT NULL FROM fetches WHERE id = ANY(%b::bigint[])"
)
FETCHES_REPORTED = (
    "UPDATE fetches SET reported_at = %s, time = v.time, changed = v.changed, status = v.status"
    " FROM unnest(%b::bigint[], %b::float8[], %b::smallint[], %b::text[])"
    " AS v(id, time, changed, status) WHERE fetches.id = v.id"
)
#: clear the leases of reported fetches (by URL id, then fetch id: a URL leased again since
#: keeps its new lease)
LEASES_CLEAR = (
    "UPDATE urls SET lease_fetch = NULL, lease_until = NULL"
    " WHERE id = ANY(%b::bigint[]) AND lease_fetch = ANY(%b::bigint[])"
)
CRAWL_DELAY_SET = "UPDATE hosts SET crawl_delay = %s WHERE name = %s RETURNING id"
LEASE_COUNTS = (
    f"SELECT count(*) FILTER (WHERE lease_until > %s), count(*) FILTER (WHERE {DUE} <= %s"
    " AND (lease_until IS NULL OR lease_until <= %s)) FROM urls"
)
#: the digest of each URL's latest applied fetch (one row per URL)
DIGESTS_SET = (
    "UPDATE urls SET digest = v.digest FROM unnest(%b::text[], %b::text[]) AS v(url, digest)"
    " WHERE urls.url = v.url"
)
