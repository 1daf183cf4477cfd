"""The bursts study end to end: a bursty history crawled, fitted, scored and checked."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main
from bayesrate.errors import ObservationError
from bayesrate.seeds import rng_from
from bayesrate.studies import bursts, forecast

DAYS = 3 * 365


def bursty_history(path, n_pages: int = 80, seed: str = "bursts-history") -> None:
    """Change times of an event-level MMPP per page (no crawl grid involved), as a CSV."""
    rng = rng_from(seed)
    ratio, q_in, q_out = 15.0, 1 / (50 * 24.0), 1 / (5 * 24.0)
    rows = []
    for p in range(n_pages):
        lam = np.exp(np.log(1 / (30 * 24.0)) + 0.4 * rng.standard_normal())
        t, state = 0.0, int(rng.random() < q_in / (q_in + q_out))
        while True:
            rate = lam * (ratio if state else 1.0)
            switch = q_out if state else q_in
            t += rng.exponential(1.0 / (rate + switch))
            if t >= DAYS * 24.0:
                break
            if rng.random() < rate / (rate + switch):
                rows.append((f"p{p}", t))
            else:
                state = 1 - state
        rows.append((f"p{p}", 0.0))  # every page exists from the start
    frame = pd.DataFrame(rows, columns=["page", "time"]).assign(domain="d")
    frame.to_csv(path, index=False)


@pytest.fixture(scope="module")
def history_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bursts") / "history.csv"
    bursty_history(path)
    return str(path)


@pytest.fixture(scope="module")
def bursty_result(history_file):
    return bursts.run(
        history=history_file,
        split=(DAYS - 365) * 24.0,
        horizon_days=300,
        replicates=30,
        max_evaluations=150,
    )


@pytest.mark.slow
def test_bursts_win_on_a_bursty_history(bursty_result):
    rows = bursty_result.tables["bursts"].set_index("model")
    mmpp_row, poisson_row = rows.loc["mmpp"], rows.loc["poisson"]
    assert mmpp_row["heldout_log_score_per_page"] > poisson_row["heldout_log_score_per_page"]
    assert bursty_result.summary["train_loglik_gain"]["mmpp"] > 20
    assert poisson_row["gap_cv_p"] < 0.025  # Poisson replicates are too regular
    assert 0.025 < mmpp_row["gap_cv_p"] < 0.975
    assert 6 < mmpp_row["ratio"] < 40 and 2 < mmpp_row["burst_days"] < 12
    # the history's chain (ratio 15, bursts of 5 days, quiet spells of 50) in the 90% intervals
    assert mmpp_row["identified"]
    assert mmpp_row["ratio_lo90"] < 15.0 < mmpp_row["ratio_hi90"]
    assert mmpp_row["burst_days_lo90"] < 5.0 < mmpp_row["burst_days_hi90"]
    assert mmpp_row["quiet_days_lo90"] < 50.0 < mmpp_row["quiet_days_hi90"]
    assert np.isnan(poisson_row["ratio_lo90"])  # the baseline has no chain
    mixture_row = rows.loc["mmpp_mixture"]  # its steady share at 0: held there
    assert mixture_row["ratio_lo90"] < 15.0 < mixture_row["ratio_hi90"]
    s = bursty_result.summary
    total = rows["heldout_log_score_per_interval"] * s["test_intervals"]
    np.testing.assert_allclose(total, rows["heldout_log_score_per_page"] * s["pages"])
    assert s["pages"] == 80 and 80 * 299 <= s["test_intervals"] <= 80 * 300  # page phases


@pytest.mark.slow
def test_weekly_checks_catch_a_scheduled_job(tmp_path):
    """Half the pages change only on Mondays at 03:00 UTC (a weekly job, each week with
    probability 0.6): neither model has a clock, so both miss the weekly checks; on the
    bursty history (no clock either) the MMPP passes them."""
    rng = rng_from("bursts-weekly")
    monday = 4 * 24.0 + 3.0  # 1970-01-05 is a Monday
    rows = [(f"p{p}", 0.0) for p in range(60)]
    for p in range(60):
        if p % 2:
            weeks = np.arange(DAYS // 7)
            rows += [(f"p{p}", monday + 168.0 * w) for w in weeks[rng.random(len(weeks)) < 0.6]]
        else:
            times = np.sort(rng.uniform(0, DAYS * 24.0, rng.poisson(DAYS / 10)))
            rows += [(f"p{p}", t) for t in times]
    path = tmp_path / "weekly.csv"
    pd.DataFrame(rows, columns=["page", "time"]).assign(domain="d").to_csv(path, index=False)
    result = bursts.run(
        history=str(path),
        split=(DAYS - 365) * 24.0,
        horizon_days=300,
        replicates=40,
        max_evaluations=60,
    )
    rows = result.tables["bursts"].set_index("model")
    for model in ("poisson", "mmpp"):
        assert rows.loc[model, "day_of_week_chi2_p"] < 0.025
        assert rows.loc[model, "top_hour_of_week_share_p"] < 0.025
        assert rows.loc[model, "top_hour_of_week_share_observed"] > 0.4


@pytest.mark.slow
def test_the_mmpp_passes_the_weekly_checks_of_a_clockless_history(bursty_result):
    row = bursty_result.tables["bursts"].set_index("model").loc["mmpp"]
    for name in ("day_of_week_chi2", "hour_of_day_chi2", "top_hour_of_week_share"):
        assert row[f"{name}_p"] > 0.025
    assert 0.025 < row["mean_detections_p"] < 0.975


def test_cli_writes_the_table_and_summary(tmp_path, capsys):
    out = tmp_path / "b"
    args = ["study", "bursts", "--fast", "--dataset", "ota-contrib", "--crawl-log"]
    args += ["--split", "2025-01-01T00:00Z", "--horizon-days", "180", "--out", str(out)]
    assert main(args) == 0
    assert "mmpp" in capsys.readouterr().out
    table = pd.read_csv(out / "bursts.csv")
    assert list(table["model"]) == ["poisson", "mmpp", "mmpp_mixture"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crawl_log"] is True and summary["pages"] == bursts.FAST["max_pages"]
    assert summary["split"].startswith("2025-01-01")


def test_crawl_log_needs_a_dataset():
    with pytest.raises(ObservationError, match="embedded dataset"):
        bursts.run(history="x.csv", crawl_log=True, fast=True)


@pytest.mark.slow
def test_forecast_scores_the_mmpp_with_its_own_predictive(history_file):
    result = forecast.run(
        history=history_file,
        split=(DAYS - 365) * 24.0,
        horizon_days=300,
        methods="mle,mmpp",
        worlds=400,
    )
    own, plug_in = result.methods["mmpp"], result.methods["mle"]
    assert own.log_score > plug_in.log_score + 0.3
    # the history is an MMPP world: its coverage90 is one of the model's own worlds
    assert 0.025 < own.worlds.observed_quantile < 0.975
    assert own.worlds.q05 < 0.9 < own.worlds.q95
    # page-independent worlds: the Binomial spread of 80 pages
    assert own.worlds.coverage.std() == pytest.approx(np.sqrt(0.9 * 0.1 / 80), rel=0.3)
    np.testing.assert_array_less(own.expected_count, result.test_intervals + 1e-9)
    assert own.diagnostics["converged"] and own.diagnostics["ratio"] > 3
