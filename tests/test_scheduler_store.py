"""SQLite persistence: round trip, schema check, rejected batches, SIGKILL mid-batch."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from bayesrate.errors import ArtifactError, ObservationError
from bayesrate.priors import GammaPrior, PriorSet
from bayesrate.scheduler import SchedulerConfig, decide
from bayesrate.scheduler.store import Store

T0 = 480_000.0
COLS = (
    "alpha",
    "beta",
    "last_fetch",
    "last_change",
    "weight",
    "host",
    "n_fetch",
    "n_changed",
    "target",
)


def _assert_states_equal(a, b):
    assert a.urls == b.urls and a.hosts == b.hosts
    for c in COLS:
        np.testing.assert_array_equal(a.column(c), b.column(c))
    np.testing.assert_array_equal(a.log_time, b.log_time)
    assert a.version == b.version


def test_round_trip(tmp_path, rng):
    priors = PriorSet(
        GammaPrior(0.7, 3.0), {"a": GammaPrior(2.0, 1.0)}, hour_of_week=rng.uniform(0.5, 1.5, 168)
    )
    cfg = SchedulerConfig(politeness_limit=5, politeness_window=2.0, min_interval=0.5)
    path = tmp_path / "s.db"
    with Store.create(path, priors, cfg) as s:
        s.add(["x"], ["a"], [3.0])
        s.observe(["u1", "u2", "u3"], [T0, T0, T0], [0, 0, 0], hosts=["a", "b", "a"])
        s.observe(["u1", "u3", "u1"], [T0 + 1, T0 + 2, T0 + 5], [1, 0, 1], weights=[2.0, 1.0, 2.0])
        decide.plan(s.state, 0.5)
        s.save_targets()
        mem = s.state
    with Store.open(path) as s2:
        _assert_states_equal(mem, s2.state)
        assert s2.state.config == cfg
        np.testing.assert_allclose(s2.state.priors.hour_of_week, priors.hour_of_week)
        assert s2.state.modulation.active


def test_rejected_batch_changes_nothing(tmp_path):
    path = tmp_path / "s.db"
    with Store.create(path) as s:
        s.observe(["u1"], [T0], [0], hosts=["h"])
        with pytest.raises(ObservationError):
            s.observe(["u1", "ghost"], [T0 + 1, T0 + 1], [0, 0])
        with pytest.raises(ObservationError):
            s.observe(["u1"], [T0 - 1], [0])
        mem = s.state
    with Store.open(path) as s2:
        _assert_states_equal(mem, s2.state)
        assert s2.state.n_fetch.tolist() == [1]


def test_schema_version_and_kind_checked(tmp_path):
    path = tmp_path / "s.db"
    Store.create(path).close()
    with pytest.raises(ArtifactError):
        Store.create(path)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(ArtifactError, match="schema version 99"):
        Store.open(path)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE meta (key TEXT, value TEXT)").connection.close()
    with pytest.raises(ArtifactError, match="not a scheduler state"):
        Store.open(other)
    with pytest.raises(ArtifactError):
        Store.open(tmp_path / "missing.db")
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_WRITER = """
import sys
import numpy as np
from bayesrate.scheduler.store import Store
path, n = sys.argv[1], int(sys.argv[2])
_apply = Store._apply


def announced(self, *a, **k):
    print("WRITING", flush=True)  # the test kills the process after this line
    return _apply(self, *a, **k)


Store._apply = announced
s = Store.create(path)
urls = [f"https://h{i % 97}.example/p{i}" for i in range(n)]
hosts = [f"h{i % 97}" for i in range(n)]
s.observe(urls, np.full(n, 480000.0), np.zeros(n), hosts=hosts)
print("ACK 0", flush=True)
k = 0
while True:
    k += 1
    s.observe(urls, np.full(n, 480000.0 + k), np.full(n, k % 2))
    print(f"ACK {k}", flush=True)
"""


def test_sigkill_mid_batch_loses_nothing_acknowledged(tmp_path):
    path = tmp_path / "crash.db"
    n = 20_000
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(n)], stdout=subprocess.PIPE, text=True
    )
    acked = -1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("ACK"):
            acked = int(line.split()[1])
        elif acked >= 3:
            break  # batch acked+1 is writing its 20,000 rows (~0.2 s): kill it there
    assert acked >= 3, "writer did not get going"
    time.sleep(0.03)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for line in proc.stdout:  # anything acknowledged before the kill
        if line.startswith("ACK"):
            acked = int(line.split()[1])
    proc.stdout.close()
    with Store.open(path) as s:
        st = s.state
        assert st.n == n
        # every URL reflects the same number of batches: nothing half-applied
        assert len(np.unique(st.n_fetch)) == 1
        applied = int(st.n_fetch[0]) - 1
        assert applied >= acked  # nothing acknowledged is lost
        assert applied <= acked + 1
        assert st.version == applied + 1
        np.testing.assert_array_equal(st.last_fetch, 480000.0 + applied)
        # changes seen: batches 1..applied with flag k % 2
        assert (st.n_changed == (applied + 1) // 2).all()


def test_writer_with_stale_snapshot_applies_on_top_of_newer_rows(tmp_path):
    """A writer whose snapshot is older than the file re-reads the rows it touches under
    the write lock: its batch lands on top of the other writer's, nothing is overwritten."""
    path = tmp_path / "s.db"
    with Store.create(path) as s:
        s.observe(["u", "v"], [T0, T0], [0, 0], hosts=["h", "h"])
    a, b = Store.open(path), Store.open(path)
    assert a.state.n == b.state.n == 2  # both load their snapshot now
    a.observe(["u", "new-a"], [T0 + 1, T0 + 1], [1, 0], hosts=["h", "ha"])
    b.observe(["u", "new-b"], [T0 + 2, T0 + 2], [0, 0], hosts=["h", "hb"])
    # b's snapshot was stale: it is reloaded on use and holds both batches
    assert b.state.n_fetch[b.state.rows(["u"])].tolist() == [3]
    with pytest.raises(ObservationError, match="time goes backwards"):
        a.observe(["u"], [T0 + 1.5], [0])  # a's snapshot says T0 + 1; the file says T0 + 2
    a.close()
    b.close()
    with Store.open(path) as s:
        st = s.state
        row = st.rows(["u", "v", "new-a", "new-b"])
        assert st.n_fetch[row].tolist() == [3, 1, 1, 1]
        assert st.n_changed[row].tolist() == [1, 0, 0, 0]
        assert st.last_fetch[row].tolist() == [T0 + 2, T0, T0 + 1, T0 + 2]
        assert [st.hosts[h] for h in st.host[row]] == ["h", "h", "ha", "hb"]
        assert st.version == 3
