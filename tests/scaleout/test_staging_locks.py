"""Staging directories of ``scale`` stages under concurrent runs (issue 54's probe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from bayesrate.scaleout.staging import Staging, load_manifest, read_table, write_part


def _part(staging: Staging, k: int) -> None:
    write_part(staging.path, k, {"pages": pd.DataFrame({"page": [f"p{k}"], "n": [k]})}, {"k": k})


_SECOND_RUN = r"""
import json, sys
import pandas as pd
from bayesrate.scaleout.staging import Staging, write_part

staging = Staging(sys.argv[1], {"stage": "test", "input": "log"})
print("ready", flush=True)
todo = staging.pending(2)[1]
for k in todo:
    write_part(staging.path, k, {"pages": pd.DataFrame({"page": [f"p{k}"], "n": [k]})}, {"k": k})
staging.commit({"stage": "test"})
print(json.dumps(todo))
"""


@pytest.mark.slow
def test_a_second_run_with_the_same_arguments_waits_for_the_first(tmp_path):
    """Two runs (processes) of one stage with the same arguments share a staging directory:
    the second waits for the first's lock, then, the first having committed, stages
    afresh; the output is whole and no staging is left. Before: the second wrote into the
    directory the first renamed into the output ("No such file or directory", a
    traceback)."""
    out = tmp_path / "agg"
    first = Staging(out, {"stage": "test", "input": "log"})
    assert first.pending(2)[1] == [0, 1]
    _part(first, 0)
    second = subprocess.Popen(
        [sys.executable, "-c", _SECOND_RUN, str(out)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert second.stdout.readline() == "ready\n"  # imported, about to open the staging
    time.sleep(1.0)
    assert second.poll() is None  # waiting for the first run's lock
    _part(first, 1)
    first.commit({"stage": "test"})
    stdout, stderr = second.communicate(timeout=60)
    assert second.returncode == 0, stderr[-2000:]
    assert json.loads(stdout) == [0, 1]  # a fresh staging directory, not the committed one
    assert load_manifest(out)["run_key"] == first.key
    table = read_table(out, "pages").sort_values("page")
    assert table["page"].tolist() == ["p0", "p1"]
    assert not list(tmp_path.glob(".agg.*"))


def test_a_rerun_in_the_same_process_takes_over_a_failed_runs_lock(tmp_path):
    """A run that failed in this process (its staging left, never committed) does not block
    the rerun: it resumes the staged parts and commits."""
    out = tmp_path / "agg"
    failed = Staging(out, {"stage": "test"})
    failed.pending(2)
    _part(failed, 0)
    rerun = Staging(out, {"stage": "test"})
    assert rerun.pending(2)[1] == [1]
    _part(rerun, 1)
    rerun.commit({"stage": "test"})
    assert read_table(out, "pages")["page"].tolist() == ["p0", "p1"]


_OTHER_RUN = r"""
import sys
import pandas as pd
from bayesrate.scaleout.staging import Staging, write_part

staging = Staging(sys.argv[1], {"stage": "test", "seed": 2})
staging.pending(1)
print(staging.path, flush=True)
sys.stdin.readline()  # the other run commits meanwhile
write_part(staging.path, 0, {"pages": pd.DataFrame({"page": ["q0"], "n": [0]})}, {"k": 0})
staging.commit({"stage": "test"})
"""


def test_commit_removes_abandoned_staging_but_not_a_running_one(tmp_path):
    """A commit removes staging directories of other runs into the same output that no
    process holds (killed runs), and leaves the one a running process holds; that run then
    commits. Before: the running run's directory was removed under it."""
    out = tmp_path / "agg"
    running = subprocess.Popen(
        [sys.executable, "-c", _OTHER_RUN, str(out)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    running_path = running.stdout.readline().strip()
    abandoned = tmp_path / ".agg.staging-0123456789abcdef"
    (abandoned / "_parts").mkdir(parents=True)
    first = Staging(out, {"stage": "test", "seed": 1})
    first.pending(1)
    _part(first, 0)
    first.commit({"stage": "test"})
    assert not abandoned.exists()
    assert os.path.isdir(running_path)
    _, stderr = running.communicate("go\n", timeout=60)
    assert running.returncode == 0, stderr[-2000:]
    assert read_table(out, "pages")["page"].tolist() == ["q0"]
    assert not list(tmp_path.glob(".agg.*"))
