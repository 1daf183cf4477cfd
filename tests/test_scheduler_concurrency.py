"""Many scheduler writers at once (issue 11, item 1): real processes, many rounds, counted.

Each writer process loops: open the state file, load the whole state (the snapshot a
crawler would decide on), wait a little, then ``observe`` a batch of URLs that other
writers touch too (random overlap) plus new URLs of its own. A planner process meanwhile
runs ``plan`` + ``save_targets``. Every batch a writer acknowledges (``observe`` returned)
is printed; afterwards the file must hold exactly the acknowledged history:

- every URL's fetch count, change count and last fetch equal what the acknowledged batches
  imply (nothing lost, nothing applied twice, nothing applied that was not acknowledged);
- every URL that an acknowledged batch added exists, with its own host and weight (no URL
  changes identity), and no other URL exists;
- the batch counter equals the number of acknowledged batches.

In the ``ordered`` mode writers take the fetch time and call ``observe`` under a file lock
(their snapshots are still loaded outside it, so they go stale), so the times agree with
the commit order and every batch must be acknowledged. In the ``free`` mode nothing orders
them: a batch may be rejected only because another writer's later fetch of one of its URLs
committed first ("time goes backwards"); all other batches must be acknowledged.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from bayesrate.scheduler.store import Store

T0 = 480_000.0  # 2024-10-04, hours since the epoch
N_HOSTS = 50

_WRITER = r"""
import fcntl, json, random, sys, time, zlib
from bayesrate.scheduler.store import Store

path, lock, w, rounds, n_seed, n_shared, n_new, wall0 = sys.argv[1:9]
w, rounds, n_seed, n_shared, n_new = map(int, (w, rounds, n_seed, n_shared, n_new))
wall0 = float(wall0)
rng = random.Random(f"writer-{w}")
T0, N_HOSTS = 480000.0, 50


def seeded(i):
    return f"https://h{i % N_HOSTS}.example/p{i}"


def weight(url):
    return 1.0 + zlib.crc32(url.encode()) % 7


for r in range(rounds):
    store = Store.open(path)
    store.state  # the snapshot this writer decides on; it goes stale while we wait
    time.sleep(rng.uniform(0.0, 0.02))
    urls = [seeded(i) for i in rng.sample(range(n_seed), n_shared)]
    urls += [f"https://w{w}.example/r{r}/{j}" for j in range(n_new)]
    hosts = [u.split("/")[2] for u in urls]
    flags = [int(rng.random() < 0.4) for _ in urls]
    handle = open(lock, "w") if lock != "-" else None
    if handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        t = T0 + 1.0 + (time.time() - wall0) / 3600.0
        store.observe(urls, [t] * len(urls), flags, hosts, [weight(u) for u in urls])
        print("ACK " + json.dumps({"urls": urls, "time": t, "flags": flags}), flush=True)
    except Exception as exc:  # reported, then judged by the test
        print("REJECT " + json.dumps({"error": type(exc).__name__, "message": str(exc)}),
              flush=True)
    finally:
        if handle:
            handle.close()
        store.close()
"""

_PLANNER = r"""
import sys, time
from bayesrate.scheduler import decide
from bayesrate.scheduler.store import Store

path, rounds = sys.argv[1], int(sys.argv[2])
for r in range(rounds):
    store = Store.open(path)
    try:
        decide.plan(store.state, 50.0)
        store.save_targets()
        print("PLANNED", flush=True)
    except Exception as exc:  # a refused plan loses nothing; the counts will tell
        print("REJECT " + type(exc).__name__, flush=True)
    finally:
        store.close()
    time.sleep(0.01)
"""


def _seeded(i: int) -> str:
    return f"https://h{i % N_HOSTS}.example/p{i}"


def _weight(url: str) -> float:
    return 1.0 + zlib.crc32(url.encode()) % 7


def run_writers(
    path: Path,
    *,
    writers: int,
    rounds: int,
    n_seed: int,
    n_shared: int,
    n_new: int,
    ordered: bool,
    plans: int,
) -> dict:
    """Seed a state, run the writer and planner processes, check the file; returns counts."""
    seed_urls = [_seeded(i) for i in range(n_seed)]
    with Store.create(path) as store:
        store.observe(
            seed_urls,
            np.full(n_seed, T0),
            np.zeros(n_seed),
            [u.split("/")[2] for u in seed_urls],
            [_weight(u) for u in seed_urls],
        )
    lock = str(path) + ".order" if ordered else "-"
    wall0 = f"{time.time():.6f}"
    commands = [
        [sys.executable, "-c", _WRITER, str(path), lock, str(w), str(rounds), str(n_seed),
         str(n_shared), str(n_new), wall0]
        for w in range(writers)
    ] + ([[sys.executable, "-c", _PLANNER, str(path), str(plans)]] if plans else [])  # fmt: skip
    # outputs go to files: a pipe that fills up would block a writer holding the order lock
    logs = [(Path(f"{path}.{k}.out"), Path(f"{path}.{k}.err")) for k in range(len(commands))]
    procs = []
    for command, (out, err) in zip(commands, logs, strict=True):
        with out.open("w") as fout, err.open("w") as ferr:
            procs.append(subprocess.Popen(command, stdout=fout, stderr=ferr, text=True))
    for p, (_, err) in zip(procs, logs, strict=True):
        assert p.wait(timeout=900) == 0, err.read_text()[-3000:]
    outputs = [(out.read_text(), err.read_text()) for out, err in logs]
    acked, rejected = [], []
    for out, _ in outputs[:writers]:
        for line in out.splitlines():
            kind, _, payload = line.partition(" ")
            (acked if kind == "ACK" else rejected).append(json.loads(payload))
    planned = sum(out.count("PLANNED") for out, _ in outputs[writers:])

    # what the acknowledged batches imply, URL by URL
    fetches = defaultdict(list)  # url -> [(time, flag)]
    for url in seed_urls:
        fetches[url].append((T0, 0))
    for batch in acked:
        for url, flag in zip(batch["urls"], batch["flags"], strict=True):
            fetches[url].append((batch["time"], flag))
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with Store.open(path) as store:
        st = store.state
        missing = sorted(set(fetches) - set(st.urls))
        invented = sorted(set(st.urls) - set(fetches))
        kept = [u for u in fetches if u not in set(missing)]
        rows = st.rows(kept)
        history = [fetches[u] for u in kept]
        expected_n = np.array([len(h) for h in history])
        lost = sum(len(fetches[u]) for u in missing) + int(
            (expected_n - st.n_fetch[rows]).clip(min=0).sum()
        )
        swapped = int(
            (np.array(st.hosts)[st.host[rows]] != [u.split("/")[2] for u in kept]).sum()
            + (st.weight[rows] != [_weight(u) for u in kept]).sum()
        )
        assert (lost, len(missing), len(invented), swapped) == (0, 0, 0, 0), (
            f"{lost} acknowledged observations lost ({len(missing)} acknowledged URLs "
            f"missing), {len(invented)} URLs never acknowledged, {swapped} host/weight values "
            "of other URLs"
        )
        np.testing.assert_array_equal(st.n_fetch[rows], expected_n)
        np.testing.assert_array_equal(
            st.n_changed[rows], [sum(f for _, f in sorted(h)[1:]) for h in history]
        )
        np.testing.assert_array_equal(st.last_fetch[rows], [max(t for t, _ in h) for h in history])
        assert st.version == 1 + len(acked)
    return {
        "acked": len(acked),
        "rejected": rejected,
        "planned": planned,
        "observations": int(expected_n.sum()),
    }


def _legitimate(rejection: dict) -> bool:
    return (
        rejection["error"] == "ObservationError" and "time goes backwards" in (rejection["message"])
    )


def test_ordered_writers_and_a_planner_lose_nothing(tmp_path):
    got = run_writers(tmp_path / "s.db", writers=4, rounds=12, n_seed=20_000, n_shared=300,
                      n_new=20, ordered=True, plans=6)  # fmt: skip
    assert got["rejected"] == [] and got["acked"] == 4 * 12
    assert got["planned"] == 6


def test_free_writers_lose_nothing(tmp_path):
    got = run_writers(tmp_path / "s.db", writers=4, rounds=12, n_seed=20_000, n_shared=300,
                      n_new=20, ordered=False, plans=0)  # fmt: skip
    assert all(_legitimate(r) for r in got["rejected"]), got["rejected"][:3]
    assert got["acked"] + len(got["rejected"]) == 4 * 12


@pytest.mark.slow
@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "free"])
def test_many_writers_many_rounds(tmp_path, ordered):
    """The figures in docs/reliability.md: 8 writers x 50 rounds, plus a planner."""
    got = run_writers(tmp_path / "s.db", writers=8, rounds=50, n_seed=20_000, n_shared=300,
                      n_new=20, ordered=ordered, plans=20)  # fmt: skip
    assert all(_legitimate(r) for r in got["rejected"]), got["rejected"][:3]
    assert got["acked"] + len(got["rejected"]) == 8 * 50
    if ordered:
        assert got["rejected"] == []
    print(f"\n{'ordered' if ordered else 'free'}: {got['acked']} batches acknowledged, "
          f"{len(got['rejected'])} rejected (time goes backwards), {got['planned']} plans, "
          f"{got['observations']} observations, nothing lost")  # fmt: skip
