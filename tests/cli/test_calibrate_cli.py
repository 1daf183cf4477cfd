"""``bayesrate calibrate`` end to end on a small simulated crawl."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bayesrate import simulate as sim
from bayesrate.cli import main
from bayesrate.priors import PriorSet, find_artifact


@pytest.mark.slow
def test_calibrate_writes_report_and_artifacts(tmp_path, capsys):
    data = sim.pages_like(n_pages=40, seed="calibrate-cli", history="short").observations
    path = tmp_path / "crawl.csv"
    data.to_frame().to_csv(path, index=False)
    out, models = tmp_path / "report", tmp_path / "models"
    argv = ["calibrate", "--input", str(path), "--out", str(out), "--models-dir", str(models),
            "--draws", "50", "--tune", "50", "--chains", "2", "--force"]  # fmt: skip
    assert main(argv) == 0
    report = (out / "report.md").read_text()
    for section in ("## Fits and diagnostics", "## Posterior predictive checks",
                    "## Model comparison", "## Exported priors", "Verdict:"):  # fmt: skip
        assert section in report
    for name in ("censored", "hierarchical", "modulated"):
        assert (out / f"ppc-{name}.png").stat().st_size > 10_000
        assert (out / f"fit-{name}.nc").exists()
    assert (out / "loo.png").exists() and (out / "hour-of-week-modulated.png").exists()
    # 2 x 50 draws cannot meet ESS >= 400: the export was forced and says so everywhere
    recommended = json.loads((models / "crawl" / "recommended.json").read_text())["model"]
    artifact = find_artifact(models, "crawl")
    assert artifact.parent.name == recommended
    priors = PriorSet.load(artifact)
    assert priors.forced and priors.metadata["gate_failures"]
    assert "FORCED EXPORT" in (artifact.parent / "README.md").read_text()
    assert "**forced**" in report
    assert not (models / "crawl" / "censored").exists()  # no domain structure to export
    captured = capsys.readouterr()
    assert str(out / "report.md") in captured.out
    # each fit reported its sampling as it went; the models kept on the way are gone
    assert "modulated NUTS (target_accept" in captured.err
    assert not (tmp_path / "report.partial").exists()


@pytest.mark.slow
def test_calibrate_refuses_without_force(tmp_path, capsys):
    data = sim.pages_like(n_pages=40, seed="calibrate-refuse", history="short").observations
    path = tmp_path / "small.csv"
    frame = data.to_frame()
    # a page visited once has no interval: the excursion model's log-likelihood of it is 0
    # under every draw, where PSIS cannot fit a tail (ota-pga has one; calibrate crashed)
    once = frame.iloc[[0]].assign(page="visited-once")
    pd.concat([frame, once]).to_csv(path, index=False)
    argv = ["calibrate", "--input", str(path), "--out", str(tmp_path / "r"),
            "--models-dir", str(tmp_path / "m"), "--models", "hierarchical", "excursion",
            "--model-config", 'excursion={"epoch_days": 365}',
            "--draws", "50", "--tune", "50", "--chains", "2"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "no prior artifact was exported" in captured.out
    assert "refusing to export hierarchical" in captured.err
    assert not (tmp_path / "m" / "small" / "hierarchical").exists()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "not exported" in report and "## Model comparison" in report


# ---------------------------------------------------------------------- issue 11, item 4
@pytest.fixture
def calibrate_calls(monkeypatch):
    """Replace the (slow) calibration by a recorder: these tests are about what runs first."""
    import bayesrate.calibrate

    calls = []

    def record(obs, **kwargs):
        calls.append(kwargs)
        raise SystemExit(0)  # stop here: nothing after the call matters to these tests

    monkeypatch.setattr(bayesrate.calibrate, "calibrate", record)
    return calls


def _artifact(root, name, fingerprint):
    from bayesrate.priors import GammaPrior

    PriorSet(GammaPrior(1.0, 1.0), {}, metadata={"model": "hierarchical",
             "data_fingerprint": fingerprint}).save(root / name / "hierarchical")  # fmt: skip


def _crawl(path):
    data = sim.pages_like(n_pages=10, seed="calibrate-names", history="short").observations
    data.to_frame().to_csv(path, index=False)
    return path


def _calibrate(argv):
    try:
        return main(argv)
    except SystemExit as exc:  # the recorder's stop
        return exc.code


@pytest.mark.parametrize(
    ("file_name", "expected"),
    [
        (".mycrawl.csv", "mycrawl"),
        ("crawl.2024.csv.gz", "crawl.2024"),
        ("my crawl.csv", "my-crawl"),
        ("..csv", None),
        (".csv", None),
    ],
)
def test_artifact_name_from_a_file_never_falls_back_to_the_default(
    tmp_path, calibrate_calls, capsys, file_name, expected
):
    """``.mycrawl.csv`` used to give the name "" and then the shipped ``ota-contrib``: run at
    the repository root it overwrote models/ota-contrib/, which ``schedule init`` picks."""
    models = tmp_path / "models"
    _artifact(models, "ota-contrib", "f" * 64)
    path = _crawl(tmp_path / file_name)
    argv = ["calibrate", "--input", str(path), "--models-dir", str(models),
            "--out", str(tmp_path / "report")]  # fmt: skip
    rc = _calibrate(argv)
    if expected is None:
        assert rc == 1 and "pass --name" in capsys.readouterr().err
        assert calibrate_calls == []
    else:
        assert rc == 0 and calibrate_calls[0]["dataset"] == expected
    assert PriorSet.load(models / "ota-contrib" / "hierarchical").metadata["data_fingerprint"] == (
        "f" * 64
    )


def test_refuses_to_overwrite_an_artifact_of_other_data(tmp_path, calibrate_calls, capsys):
    from bayesrate.io import read_observations

    models = tmp_path / "models"
    path = _crawl(tmp_path / "crawl.csv")
    argv = ["calibrate", "--input", str(path), "--models-dir", str(models),
            "--out", str(tmp_path / "report")]  # fmt: skip
    _artifact(models, "crawl", "0" * 64)
    assert _calibrate(argv) == 1
    err = capsys.readouterr().err
    assert "fitted on other data" in err and "--force" in err and calibrate_calls == []
    assert not (tmp_path / "report").exists()
    assert _calibrate([*argv, "--force"]) == 0 and calibrate_calls[-1]["force"] is True
    # the same data again: no refusal
    _artifact(models, "crawl", read_observations(path).fingerprint)
    assert _calibrate(argv) == 0
    for bad in ("../escape", "a/b", "-x", ""):
        assert _calibrate([*argv, f"--name={bad}"]) == 1
        assert "--name" in capsys.readouterr().err


def test_name_that_cannot_be_an_artifact_directory_stops_before_any_work(
    tmp_path, calibrate_calls, capsys
):
    """Issue 54 row 8: ``--name README.md`` next to ``models/README.md`` (a file) failed
    only when the artifacts were written, after minutes of fitting."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "README.md").write_text("the models directory's readme\n")
    path = _crawl(tmp_path / "crawl.csv")
    argv = ["calibrate", "--input", str(path), "--models-dir", str(models),
            "--out", str(tmp_path / "report"), "--name", "README.md"]  # fmt: skip
    assert _calibrate(argv) == 1
    err = capsys.readouterr().err
    assert "--name README.md: artifact directory" in err and "not a directory" in err
    assert calibrate_calls == [] and not (tmp_path / "report").exists()
    assert (models / "README.md").read_text() == "the models directory's readme\n"


def test_out_dir_holds_models_and_reports(tmp_path, calibrate_calls, monkeypatch):
    """New-user list: ``calibrate`` wrote models/ and reports/ into the current directory;
    ``--out-dir`` puts both elsewhere (explicit --models-dir/--out still win)."""
    monkeypatch.chdir(tmp_path)
    path = _crawl(tmp_path / "crawl.csv")
    assert _calibrate(["calibrate", "--input", str(path), "--out-dir", "runs"]) == 0
    assert str(calibrate_calls[-1]["models_root"]) == "runs/models"
    assert str(calibrate_calls[-1]["out"]) == "runs/reports/crawl"
    argv = ["calibrate", "--input", str(path), "--out-dir", "runs", "--models-dir", "m"]
    assert _calibrate(argv) == 0 and str(calibrate_calls[-1]["models_root"]) == "m"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crawl.csv"]


def test_zero_sampler_options_are_not_replaced_by_defaults(tmp_path, calibrate_calls, capsys):
    path = _crawl(tmp_path / "crawl.csv")
    argv = ["calibrate", "--input", str(path), "--models-dir", str(tmp_path / "m"),
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert _calibrate([*argv, "--tune", "0", "--draws", "5", "--chains", "1"]) == 0
    assert calibrate_calls[-1]["sampler"] == {"tune": 0, "draws": 5, "chains": 1}
    for option in (["--draws", "0"], ["--chains", "0"], ["--tune", "-1"]):
        assert _calibrate([*argv, *option]) == 2
        assert option[0] in capsys.readouterr().err
    assert len(calibrate_calls) == 1


def test_model_config_reaches_the_models_and_bad_ones_stop_first(tmp_path, calibrate_calls, capsys):
    """``--model-config MODEL=JSON`` per model of ``--models``, merged with the modulated
    model's ``--timezone``; a config for another model, bad JSON or a key the model does
    not take stop with status 1 before any fit, naming the model."""
    path = _crawl(tmp_path / "crawl.csv")
    argv = ["calibrate", "--input", str(path), "--models-dir", str(tmp_path / "m"),
            "--out", str(tmp_path / "r"), "--models", "hierarchical", "dynamic", "modulated",
            "--timezone", "Europe/Paris"]  # fmt: skip
    laplace = 'dynamic={"epoch_days": 365, "path_integral": "laplace"}'
    assert _calibrate([*argv, "--model-config", laplace]) == 0
    assert calibrate_calls[-1]["model_configs"] == {
        "dynamic": {"epoch_days": 365, "path_integral": "laplace"},
        "modulated": {"timezone": "Europe/Paris"},
    }
    bad = {
        'bursty={"epoch_days": 30}': "not a model of this run",
        "dynamic={epoch_days: 3}": "not JSON",
        'dynamic={"epoch_dayz": 3}': "epoch_dayz",
        "dynamic": "NAME=JSON",
    }
    for text, message in bad.items():
        assert _calibrate([*argv, "--model-config", text]) == 1
        assert message in capsys.readouterr().err
    assert len(calibrate_calls) == 1


def test_library_calibrate_refuses_other_data_too(tmp_path):
    from bayesrate.calibrate import calibrate
    from bayesrate.errors import ArtifactError

    data = sim.pages_like(n_pages=10, seed="calibrate-library", history="short").observations
    _artifact(tmp_path / "models", "mine", "0" * 64)
    with pytest.raises(ArtifactError, match="other data"):
        calibrate(data, dataset="mine", models_root=tmp_path / "models", out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_calibrate_compares_and_exports_the_dynamic_model(tmp_path, capsys):
    """``--models hierarchical dynamic`` on pages whose rates drift: both are checked (their
    PPC figures), ranked by leave-one-page-out, and exported (forced: tiny fits); the
    dynamic artifact carries the walk as its drift block. A constant rate per page replicates
    gaps between detections that are too regular (p = 0); the walk does not."""
    from tests.models.test_dynamic import drift_world

    data, _, _ = drift_world("calibrate-dynamic", 40, 2, 4, [0.3, 0.6])
    path = tmp_path / "drifting.csv"
    data.to_frame().to_csv(path, index=False)
    out, models = tmp_path / "report", tmp_path / "models"
    argv = ["calibrate", "--input", str(path), "--out", str(out), "--models-dir", str(models),
            "--models", "hierarchical", "dynamic", "--draws", "100", "--tune", "100",
            "--chains", "2", "--force"]  # fmt: skip
    assert main(argv) == 0
    report = (out / "report.md").read_text()
    assert (out / "ppc-dynamic.png").stat().st_size > 10_000
    comparison = report[report.index("## Model comparison") :]
    assert "Verdict: dynamic predicts held-out pages better than hierarchical" in comparison
    gap = next(line for line in report.splitlines() if line.startswith("| gap_cv |"))
    hier_cond, _, dyn_cond, dyn_mixed = (cell.strip() for cell in gap.split("|")[2:6])
    assert hier_cond == "**0.000**"
    assert 0.025 < float(dyn_cond) < 0.975 and 0.025 < float(dyn_mixed) < 0.975
    priors = PriorSet.load(models / "drifting" / "dynamic" / "priors.json")
    assert priors.global_population.sigma_rw_per_day > 0
    assert priors.metadata["loo"]["table"].keys() == {"hierarchical", "dynamic"}
    assert (models / "drifting" / "hierarchical" / "priors.json").exists()
    capsys.readouterr()


def test_quiet_silences_the_progress_lines(tmp_path, calibrate_calls, capsys):
    """``--quiet``: the recorder receives a silent progress callback and nothing reaches
    stderr before the fits; without it the lines print and the CLI's printer is passed."""
    from bayesrate.commands.common import progress
    from bayesrate.models.progress import silent

    path = _crawl(tmp_path / "crawl.csv")
    argv = ["calibrate", "--input", str(path), "--out-dir", str(tmp_path / "runs")]
    assert _calibrate(argv) == 0
    assert calibrate_calls[-1]["progress"] is progress
    assert "[bayesrate] loading" in capsys.readouterr().err
    assert _calibrate([*argv, "--quiet"]) == 0
    assert calibrate_calls[-1]["progress"] is silent
    assert capsys.readouterr().err == ""
