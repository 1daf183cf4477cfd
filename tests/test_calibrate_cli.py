"""``bayesrate calibrate`` end to end on a small simulated crawl."""

from __future__ import annotations

import json

import pytest

from bayesrate import simulate as sim
from bayesrate.cli import main
from bayesrate.priors import PriorSet, find_artifact


@pytest.mark.slow
def test_calibrate_writes_report_and_artifacts(tmp_path, capsys):
    data = sim.pages_like(n_pages=60, seed="calibrate-cli", history="short").observations
    path = tmp_path / "crawl.csv"
    data.to_frame().to_csv(path, index=False)
    out, models = tmp_path / "report", tmp_path / "models"
    argv = ["calibrate", "--input", str(path), "--out", str(out), "--models-dir", str(models),
            "--draws", "200", "--tune", "200", "--chains", "2", "--force"]  # fmt: skip
    assert main(argv) == 0
    report = (out / "report.md").read_text()
    for section in ("## Fits and diagnostics", "## Posterior predictive checks",
                    "## Model comparison", "## Exported priors", "Verdict:"):  # fmt: skip
        assert section in report
    for name in ("censored", "hierarchical", "modulated"):
        assert (out / f"ppc-{name}.png").stat().st_size > 10_000
        assert (out / f"fit-{name}.nc").exists()
    assert (out / "loo.png").exists() and (out / "hour-of-week-modulated.png").exists()
    # 200 draws cannot meet ESS >= 400: the export was forced and says so everywhere
    recommended = json.loads((models / "crawl" / "recommended.json").read_text())["model"]
    artifact = find_artifact(models, "crawl")
    assert artifact.parent.name == recommended
    priors = PriorSet.load(artifact)
    assert priors.forced and priors.metadata["gate_failures"]
    assert "FORCED EXPORT" in (artifact.parent / "README.md").read_text()
    assert "**forced**" in report
    assert not (models / "crawl" / "censored").exists()  # no domain structure to export
    assert str(out / "report.md") in capsys.readouterr().out


@pytest.mark.slow
def test_calibrate_refuses_without_force(tmp_path, capsys):
    data = sim.pages_like(n_pages=40, seed="calibrate-refuse", history="short").observations
    path = tmp_path / "small.csv"
    data.to_frame().to_csv(path, index=False)
    argv = ["calibrate", "--input", str(path), "--out", str(tmp_path / "r"),
            "--models-dir", str(tmp_path / "m"), "--models", "hierarchical",
            "--draws", "100", "--tune", "100", "--chains", "2"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "no prior artifact was exported" in captured.out
    assert "refusing to export hierarchical" in captured.err
    assert not (tmp_path / "m" / "small" / "hierarchical").exists()
    assert "not exported" in (tmp_path / "r" / "report.md").read_text()
