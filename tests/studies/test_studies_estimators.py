"""The estimate command and the estimator studies (fast smoke runs with checked numbers)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main
from tests.helpers import shared_dataset

ROWS = """page,time,changed,domain
a,0,0,x
a,1,1,x
a,2,0,x
a,4,1,x
b,0,0,y
b,10,1,y
c,5,0,y
"""


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "obs.csv"
    path.write_text(ROWS)
    return path


def test_estimate_naive_and_moment_by_hand(table, tmp_path):
    out = tmp_path / "est.csv"
    assert main(["estimate", "--input", str(table), "--method", "naive", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["page", "n_visits", "n_changes", "rate_per_day"]
    assert frame.page.tolist() == ["a", "b", "c"]
    assert frame.n_visits.tolist() == [4, 2, 1]
    # page a: 2 changes in 4 hours; b: 1 in 10 h; c: no interval
    np.testing.assert_allclose(frame.rate_per_day, [2 / 4 * 24, 1 / 10 * 24, 0.0])

    main(["estimate", "--input", str(table), "--method", "cho", "--out", str(out)])
    frame = pd.read_csv(out)
    # page a: n = 3, c = 2, mean interval 4/3 h
    expected = -math.log((3 - 2 + 0.5) / 3.5) / (4 / 3) * 24
    assert frame.rate_per_day[0] == pytest.approx(expected, rel=1e-12)


def test_estimate_time_unit_days(table, tmp_path):
    out = tmp_path / "est.csv"
    args = ["estimate", "--input", str(table), "--method", "naive", "--time-unit", "d"]
    assert main([*args, "--out", str(out)]) == 0
    # times are days now: page a has 2 changes in 4 days
    assert pd.read_csv(out).rate_per_day[0] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "method",
    ["moment", "mle", "mm", "lln", "sa", "sam", "gamma-exposure", "gamma-adf", "posterior-grid"],
)
def test_estimate_every_method(table, tmp_path, method):
    out = tmp_path / "est.parquet"
    args = ["estimate", "--input", str(table), "--method", method, "--out", str(out)]
    assert main(args) == 0
    frame = pd.read_parquet(out)
    assert len(frame) == 3
    assert np.all(np.isfinite(frame.rate_per_day)) and np.all(frame.rate_per_day >= 0)
    has_interval = method in ("mle", "gamma-exposure", "gamma-adf", "posterior-grid")
    assert ("lower_per_day" in frame) == has_interval
    if has_interval:
        assert np.all(frame.lower_per_day <= frame.rate_per_day)
        assert np.all(frame.rate_per_day <= frame.upper_per_day)


def test_gamma_prior_is_in_days(table, tmp_path):
    out = tmp_path / "est.csv"
    args = ["estimate", "--input", str(table), "--method", "gamma-exposure"]
    main([*args, "--prior-alpha", "2", "--prior-beta", "3", "--out", str(out)])
    frame = pd.read_csv(out)
    # page c: no interval, posterior = prior Gamma(2, 3 days): mean 2/3 per day
    assert frame.rate_per_day[2] == pytest.approx(2 / 3)
    # page a: Gamma(2 + 2, 3 days + 4 hours)
    assert frame.rate_per_day[0] == pytest.approx(4 / (3 + 4 / 24))


def test_estimate_to_stdout(table, capsys):
    assert main(["estimate", "--input", str(table), "--method", "mle"]) == 0
    text = capsys.readouterr().out
    assert (
        text.splitlines()[0] == "page,n_visits,n_changes,rate_per_day,lower_per_day,upper_per_day"
    )
    assert len(text.splitlines()) == 4


def test_bad_input_names_rows_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("page,time,changed\na,0,0\na,1,7\n")
    out = tmp_path / "est.csv"
    assert main(["estimate", "--input", str(bad), "--method", "mle", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "field: 'changed'" in err and "rows: 1" in err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_bad_prior_is_an_error(table, tmp_path, capsys):
    out = tmp_path / "est.csv"
    args = ["estimate", "--input", str(table), "--method", "gamma-adf", "--prior-beta", "0"]
    assert main([*args, "--out", str(out)]) == 2  # an invalid option value: usage error
    assert "--prior-beta: must be a finite number > 0" in capsys.readouterr().err
    assert not out.exists()


def test_light_imports():
    code = (
        "import sys, bayesrate.commands.estimate, bayesrate.studies.case_study, "
        "bayesrate.studies.online, bayesrate.studies.wikipedia, bayesrate.estimators.gamma; "
        "bad = [m for m in ('pymc', 'pytensor', 'arviz') if m in sys.modules]; print(bad)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


def test_estimators_never_import_pymc():
    code = (
        "import sys, bayesrate.estimators.batch, bayesrate.estimators.online, "
        "bayesrate.estimators.grid, bayesrate.estimators.mle; "
        "print([m for m in ('pymc', 'pytensor', 'arviz') if m in sys.modules])"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


# ------------------------------------------------------------------ studies


def test_case_study_fast(tmp_path, capsys):
    out = tmp_path / "cs"
    assert main(["study", "case-study", "--fast", "--out", str(out)]) == 0
    bias = pd.read_csv(out / "bias.csv").set_index(["rate_per_hour", "estimator"])
    # naive under hourly censoring converges to 1 - exp(-λ) per hour (closed form)
    assert bias.loc[(4.0, "naive"), "mean"] == pytest.approx(-math.expm1(-4.0), abs=2e-3)
    assert bias.loc[(0.25, "naive"), "mean"] == pytest.approx(-math.expm1(-0.25), abs=3e-3)
    assert bias.loc[(4.0, "moment"), "mean"] == pytest.approx(4.0, rel=0.03)
    assert bias.loc[(4.0, "full"), "sd"] == pytest.approx(math.sqrt(4 / 720), rel=0.15)
    revisit = pd.read_csv(out / "revisit_interval.csv")
    x_star = 0.355362  # 1 - e^-x (1 + x) = 0.05, solved independently
    np.testing.assert_allclose(
        revisit.interval_closed_form_hours, x_star / revisit.rate_per_hour, rtol=1e-5
    )
    sim = revisit.dropna(subset=["interval_simulated_hours"])
    fast = sim[sim.rate_per_hour >= 1.0]
    np.testing.assert_allclose(
        fast.interval_simulated_hours, fast.interval_closed_form_hours, rtol=0.2
    )
    assert (out / "bias.png").stat().st_size > 0 and (out / "revisit.png").exists()


def test_online_fast(tmp_path):
    out = tmp_path / "on"
    args = ["study", "online", "--fast", "--runs", "8", "--samples", "120", "--out", str(out)]
    assert main(args) == 0
    rmse = pd.read_csv(out / "rmse.csv")
    last = rmse[rmse.k == 120].set_index(["experiment", "estimator"])
    # Naive tends to pλ/(λ+p), far below λ = 500 at p = 3
    assert last.loc[("lam500_p3", "Naive"), "mean"] == pytest.approx(3 * 500 / 503, rel=0.05)
    assert last.loc[("lam5_p3", "LLN"), "rmse"] < last.loc[("lam5_p3", "Naive"), "rmse"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == 8 and summary["final_k"] == 120
    assert (out / "lam5_p3.png").exists() and (out / "sens_sam_beta.png").exists()


def test_wikipedia_fast(tmp_path):
    data_dir = shared_dataset("wikipedia-revisions-westhad").parent
    out = tmp_path / "wk"
    args = ["study", "wikipedia", "--fast", "--out", str(out), "--data-dir", str(data_dir)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    # SOURCE.md: the US article has 1,521 revisions
    us = summary["parse"]["Ebola_virus_disease_in_the_United_States"]
    assert us["revisions"] == 1521
    windows = pd.read_csv(out / "windows.csv")
    assert set(windows.method) >= {"naive", "mle", "gamma-adf"}
    # censoring only hides edits: naive never exceeds the uncensored rate
    assert np.all(windows[windows.method == "naive"].pooled_ratio <= 1.0 + 1e-12)
    articles = pd.read_csv(out / "articles.csv")
    us_naive = articles[(articles.article.str.endswith("States")) & (articles.method == "naive")]
    assert np.all(us_naive.ratio <= 1.0 + 1e-12)


def test_wikipedia_missing_data_is_a_clear_error(tmp_path, capsys):
    args = ["study", "wikipedia", "--fast", "--out", str(tmp_path / "o"), "--data-dir", "/nope"]
    assert main(args) == 1
    assert "Revisions.csv" in capsys.readouterr().err
