"""``bayesrate.calibrate``: a run keeps each model as soon as it is checked."""

from __future__ import annotations

import json
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
