"""Persistence: round trip, schema check, rejected batches, SIGKILL mid-batch.

Tests taking ``location`` run on both backends (an SQLite file, a PostgreSQL database;
``conftest.py``); the others are about the SQLite file itself."""

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
from bayesrate.scheduler import SchedulerConfig, SchedulerState, decide
from bayesrate.scheduler.location import create_store, open_store
from bayesrate.scheduler.store import Store

T0 = 480_000.0


def _assert_states_equal(a, b):
    assert a.urls == b.urls and a.hosts == b.hosts
    assert a.columns == b.columns
    for c in a.columns:
        np.testing.assert_array_equal(a.column(c), b.column(c))
    np.testing.assert_array_equal(a.log_time, b.log_time)
    assert a.version == b.version


@pytest.mark.parametrize("posterior", ["gamma", "grid"])
def test_round_trip(location, rng, posterior):
    priors = PriorSet(
        GammaPrior(0.7, 3.0), {"a": GammaPrior(2.0, 1.0)}, hour_of_week=rng.uniform(0.5, 1.5, 168)
    )
    cfg = SchedulerConfig(politeness_limit=5, politeness_window=2.0, min_interval=0.5,
                          posterior=posterior, drift=0.2)  # fmt: skip
    path = location
    with create_store(path, priors, cfg) as s:
        s.add(["x"], ["a"], [3.0])
        s.observe(["u1", "u2", "u3"], [T0, T0, T0], [0, 0, 0], hosts=["a", "b", "a"])
        s.observe(["u1", "u3", "u1"], [T0 + 1, T0 + 2, T0 + 5], [1, 0, 1], weights=[2.0, 1.0, 2.0])
        decide.plan(s.state, 0.5)
        s.save_targets()
        mem = s.state
    with open_store(path) as s2:
        _assert_states_equal(mem, s2.state)
        assert s2.state.config == cfg
        np.testing.assert_allclose(s2.state.priors.hour_of_week, priors.hour_of_week)
        assert s2.state.modulation.active
        # the same batches applied in memory only give the same posteriors
        mem_only = SchedulerState(priors, cfg)
        mem_only.add(["x"], ["a"], [3.0])
        mem_only.observe(["u1", "u2", "u3"], [T0, T0, T0], [0, 0, 0], hosts=["a", "b", "a"])
        mem_only.observe(["u1", "u3", "u1"], [T0 + 1, T0 + 2, T0 + 5], [1, 0, 1],
                         weights=[2.0, 1.0, 2.0])  # fmt: skip
        for c in mem_only.columns:
            if c != "target":
                np.testing.assert_array_equal(mem_only.column(c), s2.state.column(c))


def test_rejected_batch_changes_nothing(location):
    path = location
    with create_store(path) as s:
        s.observe(["u1"], [T0], [0], hosts=["h"])
        with pytest.raises(ObservationError):
            s.observe(["u1", "ghost"], [T0 + 1, T0 + 1], [0, 0])
        with pytest.raises(ObservationError):
            s.observe(["u1"], [T0 - 1], [0])
        mem = s.state
    with open_store(path) as s2:
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
from bayesrate.scheduler import SchedulerConfig
path, n, posterior = sys.argv[1], int(sys.argv[2]), sys.argv[3]
_apply = Store._apply


def announced(self, *a, **k):
    print("WRITING", flush=True)  # the test kills the process after this line
    return _apply(self, *a, **k)


Store._apply = announced
s = Store.create(path, config=SchedulerConfig(posterior=posterior, drift=0.3))
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


@pytest.mark.parametrize("posterior", ["gamma", "grid"])
@pytest.mark.slow
def test_sigkill_mid_batch_loses_nothing_acknowledged(tmp_path, posterior):
    path = tmp_path / "crash.db"
    n = 20_000
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(n), posterior],
        stdout=subprocess.PIPE,
        text=True,
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
        # the posterior columns hold exactly the acknowledged batches (one URL replayed)
        alone = SchedulerState(st.priors, st.config)
        for k in range(applied + 1):
            alone.observe(["u"], [480000.0 + k], [k % 2], hosts=["h0"])
        for c in st.columns:
            if c not in ("host", "target"):
                # (batched matrix products may differ from one row's in the last bit)
                want = np.repeat(alone.column(c), n, axis=0)
                np.testing.assert_allclose(st.column(c), want, rtol=1e-6)


def test_writer_with_stale_snapshot_applies_on_top_of_newer_rows(location):
    """A writer whose snapshot is older than the file re-reads the rows it touches under
    the write lock: its batch lands on top of the other writer's, nothing is overwritten."""
    path = location
    with create_store(path) as s:
        s.observe(["u", "v"], [T0, T0], [0, 0], hosts=["h", "h"])
    a, b = open_store(path), open_store(path)
    assert a.state.n == b.state.n == 2  # both load their snapshot now
    a.observe(["u", "new-a"], [T0 + 1, T0 + 1], [1, 0], hosts=["h", "ha"])
    b.observe(["u", "new-b"], [T0 + 2, T0 + 2], [0, 0], hosts=["h", "hb"])
    # b's snapshot was stale: it is reloaded on use and holds both batches
    assert b.state.n_fetch[b.state.rows(["u"])].tolist() == [3]
    with pytest.raises(ObservationError, match="time goes backwards"):
        a.observe(["u"], [T0 + 1.5], [0])  # a's snapshot says T0 + 1; the file says T0 + 2
    a.close()
    b.close()
    with open_store(path) as s:
        st = s.state
        row = st.rows(["u", "v", "new-a", "new-b"])
        assert st.n_fetch[row].tolist() == [3, 1, 1, 1]
        assert st.n_changed[row].tolist() == [1, 0, 0, 0]
        assert st.last_fetch[row].tolist() == [T0 + 2, T0, T0 + 1, T0 + 2]
        assert [st.hosts[h] for h in st.host[row]] == ["h", "h", "ha", "hb"]
        assert st.version == 3


# ---------------------------------------------------------------------- issue 11
def _now() -> float:
    return time.time() / 3600.0


def test_future_fetch_time_is_rejected_and_due_keeps_working(location):
    """A fetch time beyond now + the skew tolerance is an error naming the URL; before the
    fix it was stored and every later ``due`` failed until the clock passed it."""
    path = location
    now = _now()
    with create_store(path) as s:
        s.observe(["u", "v"], [now - 5, now - 5], [0, 0], hosts=["h", "h"])
        with pytest.raises(ObservationError, match="in the future") as err:
            s.observe(["u", "v"], [now - 1, now + 24], [0, 0])
        assert err.value.rows == [1] and err.value.pages == ["v"]
        s.observe(["u"], [now + 0.5], [1])  # within the one-hour clock-skew tolerance
        assert len(decide.due(s.state, _now() + 0.6, 5)) <= 2
    with open_store(path) as s:
        assert s.state.n_fetch.tolist() == [2, 1]
        decide.due(s.state, _now() + 0.6, 5)  # no "time going backwards"


def test_fetch_within_the_skew_tolerance_does_not_block_due(location):
    """Issue 54 row 1: a fetch 30 min in the future (accepted: within the skew) made every
    ``due`` at the wall clock fail ("now is before the last fetch"); now that URL is not
    eligible (just fetched) and the others are served. Beyond the tolerance is an error."""
    path = location
    now = _now()
    with create_store(path) as s:
        s.observe(["u", "v"], [now - 48, now - 48], [0, 0], hosts=["h", "h"])
        s.observe(["u"], [now + 0.5], [1])  # a crawler whose clock runs 30 min fast
    with open_store(path, readonly=True) as s:
        rows = decide.due(s.state, now, 5)
        assert [s.state.urls[i] for i in rows] == ["v"]
        score = decide.priority(s.state, now)
        assert score[s.state.urls.index("u")] == -np.inf
        with pytest.raises(ObservationError, match="clock-skew") as err:
            decide.due(s.state, now - 2.0, 5)  # u's fetch is 2.5 h later than this now
        assert err.value.pages == ["u"]


def test_observe_now_cannot_move_the_future_check_into_the_future(location):
    """Issue 54 row 1: ``observe --now <future>`` let any future fetch time in."""
    path = location
    later = _now() + 24 * 365
    with create_store(path) as s:
        with pytest.raises(ObservationError, match="later than the wall clock"):
            s.observe(["u"], [later], [0], hosts=["h"], now=later + 1)
        s.observe(["u"], [_now() - 1], [0], hosts=["h"], now=_now() + 0.5)  # within skew
    with open_store(path) as s:
        assert s.state.n_fetch.tolist() == [1]


def test_fetch_time_in_the_wrong_unit_names_the_unit(location):
    path = location
    with create_store(path) as s:
        with pytest.raises(ObservationError, match="not a plausible date") as err:
            s.observe(["u"], [1_700_000_000.0], [0], hosts=["h"])  # epoch seconds as hours
        assert "hours" in str(err.value) and "--time-unit s" in str(err.value)
        with pytest.raises(ObservationError, match="not a plausible date"):
            s.observe(["u"], [20_000.0], [0], hosts=["h"])  # days as hours: 1972
        with pytest.raises(ObservationError, match="finite"):
            s.observe(["u"], [float("nan")], [0], hosts=["h"])
        # an explicit clock: times up to now + 1 h are accepted
        s.observe(["u"], [T0 + 1.0], [0], hosts=["h"], now=T0)
        with pytest.raises(ObservationError, match="in the future"):
            s.observe(["u"], [T0 + 1.5], [0], now=T0)
    with open_store(path) as s:
        assert s.state.n_fetch.tolist() == [1]


def test_reset_corrects_a_url_in_the_future(tmp_path):
    """A state written before the check (or edited by hand) with a fetch in the future:
    ``due`` names the URL and says how to correct it; ``reset`` does."""
    path = tmp_path / "s.db"
    prior = PriorSet(GammaPrior(0.5, 2.0), {"h": GammaPrior(3.0, 1.0)})
    with Store.create(path, prior) as s:
        s.observe(["u", "v"], [T0, T0], [0, 0], hosts=["h", "x"])
        s.observe(["u", "v"], [T0 + 5, T0 + 5], [1, 1])
    con = sqlite3.connect(path)
    con.execute("UPDATE urls SET last_fetch = 1700000000 WHERE url IN ('u', 'v')")
    con.commit()
    con.close()
    with Store.open(path) as s:
        with pytest.raises(ObservationError, match="reset-url") as err:
            decide.due(s.state, T0 + 10, 5)
        assert err.value.pages == ["u", "v"]
        alpha_v = float(s.state.alpha[1])
        s.reset(["u"])
        s.reset(["v"], keep_rate=True)
        with pytest.raises(ObservationError, match="unknown URLs"):
            s.reset(["ghost"])
    with Store.open(path) as s:
        st = s.state
        assert np.isnan(st.last_fetch).all() and st.n_fetch.tolist() == [0, 0]
        np.testing.assert_allclose(st.alpha, [3.0, alpha_v])
        assert st.beta[0] == 24.0
        assert len(decide.due(st, T0 + 10, 5)) == 2  # never-fetched: urgent
        s.observe(["u"], [T0 + 11], [1])  # a new baseline: its flag carries no information
        assert s.state.n_changed.tolist() == [0, 0]


def test_foreign_files_are_opened_read_only(tmp_path):
    """An empty file or another application's SQLite database is refused without being
    changed (before the fix: switched to WAL mode, a header written into the empty file)."""
    empty = tmp_path / "empty.db"
    empty.touch()
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('kind', 'theirs')")
    con.commit()
    con.close()
    before = other.read_bytes()
    for path in (empty, other):
        for readonly in (False, True):
            with pytest.raises(ArtifactError, match="not a scheduler state"):
                Store.open(path, readonly=readonly)
    assert empty.stat().st_size == 0
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "other.db"]
    with pytest.raises(ArtifactError, match="not a file"):
        Store.open(tmp_path)


def _damage(path, sql):
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("UPDATE meta SET value = '{' WHERE key = 'config'", "meta 'config'"),
        ("UPDATE meta SET value = '{\"factor\": -1}' WHERE key = 'config'", "meta 'config'"),
        ("UPDATE meta SET value = '[]' WHERE key = 'priors'", "meta 'priors'"),
        ("UPDATE meta SET value = 'x' WHERE key = 'priors'", "meta 'priors'"),
        ("UPDATE meta SET value = 'abc' WHERE key = 'version'", "meta 'version'"),
        ("DELETE FROM meta WHERE key = 'config'", "meta 'config'"),
        ("UPDATE urls SET alpha = -1 WHERE url = 'u'", "impossible 'alpha'.*'u'"),
        ("UPDATE urls SET beta = 0 WHERE url = 'v'", "impossible 'beta'.*'v'"),
        ("UPDATE urls SET host = 7 WHERE url = 'u'", "impossible 'host'"),
        ("UPDATE urls SET log_weights = x'0000' WHERE url = 'u'", "impossible 'log_weights'.*'u'"),
        ("UPDATE urls SET log_weights = zeroblob(192) WHERE url = 'v'", "impossible 'log_w"),
        ("UPDATE meta SET value = '1' WHERE key = 'schema_version'", "does not hold 'grid'"),
        ("UPDATE urls SET weight = 'heavy' WHERE url = 'u'", "'weight' is not numeric"),
        ("UPDATE urls SET n_changed = 9 WHERE url = 'u'", "impossible 'n_changed'"),
        ("UPDATE hosts SET id = 5 WHERE name = 'h'", "host ids"),
        ("DROP TABLE fetch_log", "lacks"),
    ],
)
def test_damaged_state_is_an_error_naming_the_field(tmp_path, sql, match):
    path = tmp_path / "s.db"
    grid = "log_weights" in sql or "'grid'" in match
    if grid and ("alpha" in sql or "beta" in sql):
        pytest.skip("a grid state has no alpha/beta")
    config = SchedulerConfig(posterior="grid" if grid else "gamma")
    with Store.create(path, config=config) as s:
        s.observe(["u", "v"], [T0, T0], [0, 0], hosts=["h", "h"])
    _damage(path, sql)
    with pytest.raises(ArtifactError, match=match), Store.open(path) as s:
        s.state  # noqa: B018 - loading is what fails


def test_truncated_and_garbage_state_files(tmp_path):
    path = tmp_path / "s.db"
    with Store.create(path) as s:
        s.observe([f"u{i}" for i in range(3000)], np.full(3000, T0), np.zeros(3000),
                  hosts=["h"] * 3000)  # fmt: skip
    data = path.read_bytes()
    for name, content in (("half.db", data[: len(data) // 2]), ("head.db", data[:50]),
                          ("garbage.db", b"not a database at all" * 100)):  # fmt: skip
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(ArtifactError), Store.open(bad) as s:
            s.state  # noqa: B018


def test_hosts_are_strings_and_optional_for_known_urls(location):
    path = location
    with create_store(path) as s:
        s.observe(["a", "b", "c"], [T0] * 3, [0] * 3, hosts=["NA", "null", "007"])
        s.observe(["a", "b"], [T0 + 1] * 2, [1, 0], hosts=[None, ""])  # blank: not given
        s.observe(["c"], [T0 + 1], [0], hosts=[float("nan")])
        with pytest.raises(ObservationError, match="host differs"):
            s.observe(["a"], [T0 + 2], [0], hosts=["7"])
        with pytest.raises(ObservationError, match="unknown URLs"):
            s.observe(["new"], [T0 + 2], [0], hosts=[None])
        with pytest.raises(ObservationError, match="missing host"):
            s.add(["new"], [""])
    with open_store(path) as s:
        st = s.state
        assert [st.hosts[h] for h in st.host] == ["NA", "null", "007"]
        assert st.n_fetch.tolist() == [2, 2, 2]


def test_create_refuses_a_missing_directory_and_leaves_nothing(tmp_path):
    with pytest.raises(ArtifactError, match="does not exist"):
        Store.create(tmp_path / "missing" / "s.db")
    assert list(tmp_path.iterdir()) == []


def test_writer_that_cannot_get_the_lock_fails_clearly(tmp_path):
    path = tmp_path / "s.db"
    Store.create(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(path, timeout=0.2) as s:
            with pytest.raises(ArtifactError, match=r"write lock.*nothing was applied"):
                s.observe(["u"], [T0], [0], hosts=["h"])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with Store.open(path) as s:
        assert s.state.n == 0


def _read_only_mount_available() -> bool:
    import shutil

    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind -o ro / / 2>/dev/null || exit 1"],
        capture_output=True, check=False, timeout=30,
    )  # fmt: skip
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_mount_available(), reason="needs unshare -m and mount")
@pytest.mark.slow
def test_state_in_a_read_only_directory_is_not_called_damaged(tmp_path):
    """Issue 54 row 9: a good state file in a read-only directory was reported as "not a
    scheduler state file" (an operator may throw it away). Now readers work on a read-only
    file system, and writers say the directory is the problem and not to delete the file."""
    state_dir, mount = tmp_path / "state", tmp_path / "mnt"
    state_dir.mkdir()
    mount.mkdir()
    with Store.create(state_dir / "s.db") as s:
        s.observe(["u"], [_now() - 1], [0], hosts=["h"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = f"mount --bind -o ro {state_dir} {mount} || exit 99; " + "; ".join(
        f"{sys.executable} -m bayesrate.cli schedule {op} {mount / 's.db'} {extra}; echo rc=$?"
        for op, extra in (("stats", ""), ("due", "--json"), ("plan", "--budget 3"))
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env,
        check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode != 99, done.stderr
    codes = [line for line in done.stdout.splitlines() if line.startswith("rc=")]
    assert codes == ["rc=0", "rc=0", "rc=1"], done.stdout + done.stderr
    assert '"url": "u"' in done.stdout
    assert "not a scheduler state file" not in done.stderr
    assert "cannot access" in done.stderr and "do not delete it" in done.stderr
    with Store.open(state_dir / "s.db", readonly=True) as s:  # untouched
        assert s.state.n_fetch.tolist() == [1]
