"""Which store a state's location names: a database URL or an SQLite file.

``postgresql://…`` (or ``postgres://…``) names a PostgreSQL database
(:class:`~bayesrate.scheduler.pgstore.PgStore`, imported only then: psycopg is not loaded
otherwise); anything else is a path to an SQLite file
(:class:`~bayesrate.scheduler.store.Store`, the embedded default). Every ``bayesrate
schedule`` command that takes a state file takes a database URL as well.
"""

from __future__ import annotations

from pathlib import Path

from bayesrate.priors import PriorSet
from bayesrate.scheduler.state import SchedulerConfig
from bayesrate.scheduler.statestore import StateStore

#: URL schemes of a PostgreSQL state
DATABASE_SCHEMES = ("postgresql://", "postgres://")


def is_database(location: str | Path) -> bool:
    """Whether ``location`` is a PostgreSQL URL (else: an SQLite file)."""
    return str(location).startswith(DATABASE_SCHEMES)


def create_store(
    location: str | Path, priors: PriorSet | None = None, config: SchedulerConfig | None = None
) -> StateStore:
    """Create a state at ``location`` (see the module docstring for what it may name)."""
    if is_database(location):
        from bayesrate.scheduler.pgstore import PgStore

        return PgStore.create(str(location), priors, config)
    from bayesrate.scheduler.store import Store

    return Store.create(location, priors, config)


def open_store(location: str | Path, *, readonly: bool = False) -> StateStore:
    """Open the state at ``location`` (``readonly``: queries only)."""
    if is_database(location):
        from bayesrate.scheduler.pgstore import PgStore

        return PgStore.open(str(location), readonly=readonly)
    from bayesrate.scheduler.store import Store

    return Store.open(location, readonly=readonly)
