"""``bayesrate fit`` end to end on a tiny canonical CSV."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main
from tests.helpers import seed_of

with warnings.catch_warnings():
    # pymc 6.3 imports IfElse from its deprecated pytensor location (attributed to pymc)
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    rng = np.random.default_rng(seed_of("models-cli"))
    rows = []
    for i in range(6):
        rate = float(np.exp(rng.normal(-2.0, 0.8)))
        t = np.arange(0.0, 60.0, 3.0)
        flags = np.r_[0, (rng.random(len(t) - 1) < 1 - np.exp(-rate * 3.0)).astype(int)]
        rows.append(
            pd.DataFrame({"page": f"p{i}", "domain": f"d{i % 2}", "time": t, "changed": flags})
        )
    path = tmp_path_factory.mktemp("cli") / "obs.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path


def test_fit_command_writes_outputs(csv_path, tmp_path):
    out = tmp_path / "fit"
    code = main(
        [
            "fit",
            "--input",
            str(csv_path),
            "--model",
            "censored",
            "--draws",
            "300",
            "--tune",
            "300",
            "--chains",
            "2",
            "--seed",
            "cli",
            "--predictive-draws",
            "150",
            "--out",
            str(out),
        ]
    )
    diag = json.loads((out / "diagnostics.json").read_text())
    assert code == (0 if diag["converged"] else 3)
    for key in ("r_hat_max", "ess_bulk_min", "divergences", "seconds", "converged"):
        assert key in diag
    pages = pd.read_csv(out / "pages.csv")
    assert list(pages.columns) == [
        "page",
        "domain",
        "rate_per_day",
        "lower_per_day",
        "upper_per_day",
        "n_visits",
        "n_changes",
    ]
    assert len(pages) == 6 and (pages.n_visits == 20).all()
    assert (pages.lower_per_day <= pages.rate_per_day).all()
    from bayesrate.models import CensoredModel

    # the saved fit loads with no data: its observations come from its fit_data group
    loaded = CensoredModel.load(out / "fit.nc")
    assert loaded.idata_.attrs["bayesrate_data_fingerprint"] == diag["data_fingerprint"]
    assert loaded.data_.fingerprint == diag["data_fingerprint"]  # the CLI's own data
    tree = loaded.idata_
    assert {"observed_data", "log_likelihood", "posterior_predictive", "fit_data"} <= set(
        tree.children
    )
    # computed by PyMC on the (thinned) posterior draws, per interval group and page
    assert tree["log_likelihood"]["detections"].dims == ("chain", "draw", "interval_group")
    assert tree["posterior_predictive"]["quiet"].dims == ("chain", "draw", "page")
    assert tree["log_likelihood"].sizes["chain"] * tree["log_likelihood"].sizes["draw"] == 150
    assert int(tree["observed_data"]["detections"].sum()) == int(pages.n_changes.sum())
    # the rebuilt model evaluates PyMC's pointwise log-likelihood to the same numbers
    again = loaded.compute_log_likelihood(max_draws=150)
    np.testing.assert_allclose(
        again["detections"].values, tree["log_likelihood"]["detections"].values, rtol=1e-12
    )


def test_fit_command_rejects_timezone_for_non_modulated(csv_path, tmp_path, capsys):
    argv = ["fit", "--input", str(csv_path), "--model", "censored", "--timezone", "UTC",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 1
    assert "--timezone applies to --model modulated only" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_cli_help_does_not_import_pymc():
    code = (
        "import sys, bayesrate.cli as c; c.build_parser(); import bayesrate.commands.fit, "
        "bayesrate.studies.recovery; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pymc', 'pytensor', 'arviz')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_fit_command_dynamic_model_saves_and_loads(csv_path, tmp_path, capsys):
    """``--model dynamic``: the fit saved with each page's log-likelihood and predictive
    detections (paths integrated out) and loaded back with the same current rates."""
    out = tmp_path / "dyn"
    argv = ["fit", "--input", str(csv_path), "--model", "dynamic", "--draws", "100"]
    argv += ["--tune", "100", "--chains", "2", "--seed", "cli-dyn", "--out", str(out)]
    code = main(argv)
    diag = json.loads((out / "diagnostics.json").read_text())
    assert code == (0 if diag["converged"] else 3)
    assert "log-likelihood and posterior predictive on" in capsys.readouterr().err
    from bayesrate.models import DynamicModel

    loaded = DynamicModel.load(out / "fit.nc")
    for group in ("observed_data", "log_likelihood", "posterior_predictive"):
        assert loaded.idata_[group]["page_detections"].sizes["page"] == 6
    pages = pd.read_csv(out / "pages.csv")
    assert len(pages) == 6
    np.testing.assert_allclose(
        loaded.page_summary_["rate_per_day"].to_numpy(), pages["rate_per_day"].to_numpy()
    )
    # the walk size reaches the priors' drift block (and the scheduler) per √day
    from bayesrate.export import domain_priors
    from bayesrate.priors import PriorSet
    from bayesrate.scheduler.state import SchedulerState

    priors = PriorSet.load(domain_priors(loaded).save(tmp_path / "priors"))
    walk = loaded.idata_["posterior"]["sigma_walk"]
    state = SchedulerState(priors)
    for domain in walk["domain"].values:
        want = float(walk.sel(domain=domain).mean()) / np.sqrt(90.0)
        pop = priors.population_for(str(domain))
        assert pop.sigma_rw_per_day == pytest.approx(want, rel=1e-12)
        assert state.drift_variance(str(domain)) == pytest.approx(want**2 / 24.0, rel=1e-12)
    new_domain = priors.global_population.sigma_rw_per_day
    global_walk = float(loaded.idata_["posterior"]["sigma_walk_global"].mean()) / np.sqrt(90.0)
    assert new_domain > global_walk  # a new domain's walk size: lognormal around the global


def test_excursion_priors_hold_level_plus_excursion_and_their_diffusion(csv_path, tmp_path):
    """``--model excursion``: a new page's exported log-rate spread is its level's and its
    excursion's, ``√(sigma_page² + sigma_walk²)`` per domain (``sigma_walk_global`` for a
    new domain), and the drift block the excursions' short-horizon diffusion
    ``sigma_walk·√(−2 ln walk_phi) / √epoch_days`` per √day, averaged over the draws."""
    from bayesrate.export import domain_priors
    from bayesrate.models import ExcursionModel
    from bayesrate.priors import PriorSet
    from bayesrate.scheduler.state import SchedulerState

    out = tmp_path / "exc"
    argv = ["fit", "--input", str(csv_path), "--model", "excursion", "--draws", "100"]
    argv += ["--tune", "100", "--chains", "2", "--seed", "cli-exc", "--out", str(out)]
    main(argv)
    loaded = ExcursionModel.load(out / "fit.nc")
    post = loaded.idata_["posterior"]
    priors = PriorSet.load(domain_priors(loaded).save(tmp_path / "priors"))
    state = SchedulerState(priors)
    page_sd, phi = np.asarray(post["sigma_page"]), np.asarray(post["walk_phi"])
    for domain in post["domain"].values:
        sd = np.asarray(post["sigma_walk"].sel(domain=domain))
        pop = priors.population_for(str(domain))
        assert pop.scale.mean == pytest.approx(np.sqrt(page_sd**2 + sd**2).mean(), rel=1e-9)
        want = (sd * np.sqrt(-2 * np.log(phi))).mean() / np.sqrt(90.0)
        assert pop.sigma_rw_per_day == pytest.approx(want, rel=1e-9)
        assert state.drift_variance(str(domain)) == pytest.approx(want**2 / 24.0, rel=1e-9)
    new = np.sqrt(page_sd**2 + np.asarray(post["sigma_walk_global"]) ** 2)
    sd_domain = np.asarray(post["sigma_domain"])
    assert priors.global_population.scale.mean == pytest.approx(
        np.sqrt(sd_domain**2 + new**2).mean(), rel=1e-9
    )
