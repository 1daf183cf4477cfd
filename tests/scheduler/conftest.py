"""Fixtures for the scheduler's two backends: an SQLite file and a PostgreSQL database.

PostgreSQL comes from ``BAYESRATE_TEST_POSTGRES`` (a server URL; ``.ci/run`` starts one with
``scripts/postgres_for_tests.sh``), else from a throwaway cluster this session starts with
the same script when Debian's server binaries are installed. Without either the PostgreSQL
tests skip with the reason, except under ``CI=true``, where they fail: CI must run them.
Each test gets its own schema (``search_path`` in the URL), dropped afterwards.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "postgres_for_tests.sh"
ENV = "BAYESRATE_TEST_POSTGRES"
BACKENDS = ("sqlite", "postgres")


def unavailable(reason: str) -> None:
    """Skip (fail under CI=true) for want of PostgreSQL."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}")
    pytest.skip(reason)


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster run by ``scripts/postgres_for_tests.sh``."""

    dir: Path
    url: str

    def _run(self, op: str) -> None:
        subprocess.run(["bash", str(SCRIPT), op, str(self.dir)], check=True, timeout=120)

    def kill(self) -> None:
        """Stop the server as a crash would (immediate shutdown)."""
        self._run("kill")

    def restart(self) -> None:
        """Start the stopped server again on the same port."""
        self._run("restart")

    def stop(self) -> None:
        """Stop the server and remove the cluster."""
        self._run("stop")


def need_psycopg() -> None:
    """Skip (fail under CI=true) without psycopg."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'psycopg[binary,pool]')")


def start_cluster() -> Cluster:
    """A new cluster in a new temporary directory (skips, or fails under CI, without
    server binaries). Not under pytest's ``tmp_path``: its parents are private to the
    caller, and the server runs as another user when the tests run as root."""
    need_psycopg()
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        unavailable(f"no PostgreSQL: set {ENV} to a server URL or install Debian's postgresql")
    base = Path(tempfile.mkdtemp(prefix="bayesrate-pg."))
    done = subprocess.run(
        ["bash", str(SCRIPT), "start", str(base)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode:
        subprocess.run(["bash", str(SCRIPT), "stop", str(base)], check=False, timeout=120)
        unavailable(f"could not start a PostgreSQL cluster: {done.stderr.strip()[-400:]}")
    return Cluster(base, done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of a PostgreSQL database the tests may create schemas in."""
    if os.environ.get(ENV):
        need_psycopg()
        yield os.environ[ENV]
        return
    cluster = start_cluster()
    try:
        yield cluster.url
    finally:
        cluster.stop()


def schema_url(server: str, schema: str) -> str:
    """``server`` with ``search_path`` set to ``schema``."""
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_location(postgres_server) -> Iterator[str]:
    """A database URL whose tables live in a fresh schema (dropped afterwards)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as con:
            con.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def location(request, tmp_path) -> str:
    """Where a test's state lives: an SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return request.getfixturevalue("pg_location")
