"""``bayesrate.calibrate``: a run keeps each model as soon as it is checked."""

from __future__ import annotations

import json
import time
import warnings

import pytest

from bayesrate import simulate as sim
from bayesrate.calibrate import calibrate, partial_directory


def test_an_interrupted_run_keeps_the_models_it_finished(tmp_path, monkeypatch):
    """The second model's fit is interrupted (Ctrl-C): the first model's fit and summary
    are on disk in ``<out>.partial``, the fit loads back with the same draws and the
    summary's diagnostics are the fit's own; no report and no artifact are written."""
    import bayesrate.calibrate as cal
    from bayesrate.models import CensoredModel

    obs = sim.pages_like(n_pages=10, seed="calibrate-partial", history="short").observations
    real = cal._fit_and_check
    fitted = {}

    def fit_then_interrupt(name, *args):
        if name == "hierarchical":
            raise KeyboardInterrupt
        fitted[name] = real(name, *args)
        return fitted[name]

    monkeypatch.setattr(cal, "_fit_and_check", fit_then_interrupt)
    out, lines = tmp_path / "reports" / "crawl", []
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate(
            obs,
            dataset="crawl",
            models=("censored", "hierarchical"),
            out=out,
            models_root=tmp_path / "models",
            sampler={"draws": 100, "tune": 100, "chains": 2},
            progress=lines.append,
        )
    partial = partial_directory(out)
    assert partial == tmp_path / "reports" / "crawl.partial"
    assert sorted(p.name for p in partial.iterdir()) == ["censored.json", "fit-censored.nc"]
    model = fitted["censored"][0]
    loaded = CensoredModel.load(partial / "fit-censored.nc")
    assert (
        loaded.idata_["posterior"]["rate"].values == model.idata_["posterior"]["rate"].values
    ).all()
    summary = json.loads((partial / "censored.json").read_text())
    assert summary["diagnostics"]["r_hat_max"] == pytest.approx(model.diagnostics_.r_hat_max)
    assert summary["diagnostics"]["divergences"] == model.diagnostics_.divergences
    assert set(summary["ppc_extreme"]) == set(fitted["censored"][1].replications)
    assert set(summary["seconds"]) == {"fit_censored", "ppc_censored"}
    assert any("finished models (censored) are kept in" in line for line in lines)
    assert not out.exists() and not (tmp_path / "models" / "crawl").exists()


#: calibrate in a child process with the fits, the comparison and the report's contents
#: faked (seconds, no sampler); the artifacts are written by the real ``_export`` and
#: atomic code into the models root ``calibrate`` gives.
_FAKE_CALIBRATE = r"""
import json, resource, sys, time, types
from pathlib import Path

import pandas as pd

import bayesrate.calibrate as cal
import bayesrate.checks.compare as compare_module
import bayesrate.export as export_module
import bayesrate.report as report_module
from bayesrate.atomic import atomic_directory
from bayesrate.observations import Observations

root = Path(sys.argv[1])
run = {"id": 0, "figure": 10, "report_seconds": 0.0}
obs = Observations.from_frame(pd.DataFrame({
    "page": ["a", "a", "b", "b"], "time": [0.0, 24.0, 0.0, 48.0], "changed": [0, 1, 0, 0]}))


class Fit:
    export_gates = {}

    def __init__(self, name):
        self.name = name

    def save(self, path):
        Path(path).write_bytes(f"fit {self.name} run {run['id']}".encode() * 100)


def write_artifact(model, *, dataset, root, **kwargs):
    target = Path(root) / dataset / model.name
    with atomic_directory(target) as directory:
        (directory / "run.json").write_text(json.dumps({"run": run["id"]}))
        model.save(directory / "fit.nc")
    return target


def write_report(staging, **kwargs):
    time.sleep(run["report_seconds"])
    text = f"run {run['id']}: " + ", ".join(map(str, kwargs["artifacts"].values()))
    (staging / "report.md").write_text(text)
    (staging / "rates.png").write_bytes(b"x" * run["figure"])
    return staging / "report.md"


cal._fit_and_check = lambda name, *args: (Fit(name), None)
cal._keep_finished = lambda *args: None
compare_module.compare = lambda fits: types.SimpleNamespace(
    verdict="v", table=pd.DataFrame(index=list(fits)))
export_module.write_artifact = write_artifact
report_module.write_report = write_report


def tree():
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def calibrate(models):
    cal.calibrate(obs, dataset="crawl", models=models, out=root / "out" / "reports" / "crawl",
                  models_root=root / "out" / "models")
"""

#: run 1 succeeds, run 2 fails while its report is written (a figure larger than
#: RLIMIT_FSIZE: EFBIG, as on a full disk), run 3 succeeds again
_FULL_DISK_CHILD = (
    _FAKE_CALIBRATE
    + r"""
out = {}
run.update(id=1)
calibrate(("hierarchical",))
out["first"] = tree()
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
run.update(id=2, figure=200_000)
try:
    calibrate(("hierarchical", "censored"))
    out["error"] = None
except OSError as exc:
    out["error"] = exc.errno
out["failed"] = tree()
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
run.update(id=3, figure=10)
calibrate(("hierarchical", "censored"))
out["third"] = tree()
(root / "fresh").mkdir()
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
run.update(id=4, figure=200_000)
root = root / "fresh"
try:
    calibrate(("hierarchical",))
except OSError:
    pass
out["fresh"] = tree()
print(json.dumps(out))
"""
)


def test_calibrate_on_a_full_disk_keeps_the_earlier_artifacts_and_report(tmp_path):
    """A run that fails while writing its report (a file over ``RLIMIT_FSIZE``: EFBIG, as
    on a full disk) leaves the earlier artifacts, ``recommended.json`` and report exactly as
    they were, none of its own (not even a new model's directory), and no temporary or
    staging file; the next run puts all of its outputs in place; a failed first run leaves
    no directory behind. Before the fix the artifacts were committed before the report:
    run 2's artifacts stayed, without a report."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    first = out["first"]
    models = "out/models/crawl"
    assert json.loads(first[f"{models}/hierarchical/run.json"]) == {"run": 1}
    assert json.loads(first[f"{models}/recommended.json"])["model"] == "hierarchical"
    assert first["out/reports/crawl/report.md"].startswith("run 1: ")
    assert out["error"] == 27  # EFBIG: the report's figure did not fit
    assert out["failed"] == first  # every file and directory as before, nothing added
    third = out["third"]
    assert json.loads(third[f"{models}/censored/run.json"]) == {"run": 3}
    assert json.loads(third[f"{models}/hierarchical/run.json"]) == {"run": 3}
    assert third["out/reports/crawl/report.md"] == (
        f"run 3: {tmp_path}/{models}/hierarchical, {tmp_path}/{models}/censored"
    )
    assert not [p for p in third if "/." in f"/{p}"]  # no hidden staging or old copies
    assert out["fresh"] == {}  # a failed first run into a new place leaves nothing


#: one run (``argv``: root, run id, seconds its report takes)
_ONE_RUN_CHILD = (
    _FAKE_CALIBRATE
    + r"""
run.update(id=int(sys.argv[2]), report_seconds=float(sys.argv[3]))
calibrate(("hierarchical", "censored"))
"""
)


def test_concurrent_calibrates_into_one_place_leave_one_runs_outputs(tmp_path):
    """Run 1 writes its report slowly (2 s); run 2 starts 0.5 s later and writes its report
    at once. Both succeed, and the artifacts, ``recommended.json`` and the report left are
    of one run. Before the lock, run 2's artifacts stayed beside run 1's report (run 1
    renamed its report in last)."""
    import subprocess
    import sys

    def child(run_id, seconds):
        return subprocess.Popen(
            [sys.executable, "-c", _ONE_RUN_CHILD, str(tmp_path), str(run_id), str(seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    first = child(1, 2.0)
    time.sleep(0.5)
    second = child(2, 0.0)
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    models = tmp_path / "out" / "models" / "crawl"
    report = (tmp_path / "out" / "reports" / "crawl" / "report.md").read_text()
    runs = {
        json.loads((models / m / "run.json").read_text())["run"]
        for m in ("hierarchical", "censored")
    }
    assert len(runs) == 1
    assert report.startswith(f"run {runs.pop()}: ")
    assert not [p for p in tmp_path.rglob(".*")]  # no staging or old copies left
