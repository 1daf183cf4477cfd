"""The calibration report's account of what the checks still miss."""

from __future__ import annotations

import numpy as np

from bayesrate.checks.ppc import ModelChecks, PPCResult, PPCStatistic
from bayesrate.report import _misses_section


def _result(statistics, dow_observed, dow_replicated) -> PPCResult:
    hours = np.ones(24)
    return PPCResult(
        statistics=statistics,
        timezone="UTC",
        changes_observed=np.zeros(3),
        changes_replicated=np.zeros((4, 3)),
        hour_observed=hours,
        hour_replicated=np.tile(hours, (4, 1)),
        dow_observed=np.asarray(dow_observed, dtype=float),
        dow_replicated=np.asarray(dow_replicated, dtype=float),
        gaps_observed=np.zeros(0),
    )


def test_misses_name_the_statistic_its_size_and_the_cells_that_miss():
    """A gap CV above every replicate and weekday counts crowded on Tuesday and missing on
    Sunday: the lines give observed, replicated mean and 90% interval (numpy's quantiles of
    the replicates), the direction, and the weekdays by their shares computed by hand."""
    gap_rep = np.linspace(1.0, 1.5, 201)
    dow_obs = [10, 40, 10, 10, 10, 10, 0]  # 90 detections: Tue 44.4%, Sun 0%
    dow_rep = np.tile([10, 10, 10, 10, 10, 10, 10], (4, 1))  # 1/7 = 14.3% each
    stats = [
        PPCStatistic("gap_cv", 1.9, gap_rep, "mean CV of gaps"),
        PPCStatistic("day_of_week_chi2", np.full(4, 80.0), np.full(4, 6.0), "chi2", "upper"),
        PPCStatistic("mean_changes", 5.0, np.linspace(4.0, 6.0, 201), "mean changes"),
    ]
    checks = {
        "plain": ModelChecks(conditional=_result(stats[2:], dow_obs, dow_rep)),
        "best": ModelChecks(conditional=_result(stats, dow_obs, dow_rep)),
    }
    lines = _misses_section(checks, recommended="best")
    text = "\n".join(lines)
    best = [line for line in lines if line.startswith("- **best** (recommended)")]
    assert text.index("**best**") < text.index("**plain**")  # recommended first
    assert len(best) == 2  # mean_changes (p = 0.5) is not extreme
    q05, q95 = np.quantile(gap_rep, [0.05, 0.95])
    assert f"observed 1.9, replicated {gap_rep.mean():.3g} ({q05:.3g}–{q95:.3g})" in best[0]
    assert "vary more than the model replicates" in best[0]
    assert "more than replicated on Tue 44.4% (replicated 14.3%)" in best[1]
    assert "fewer on Sun 0.0% (replicated 14.3%)" in best[1]
    assert "- **plain**, conditional: no statistic is extreme." in lines


def test_fits_table_names_the_settings_that_differ_from_the_defaults():
    """The main job's excursion model runs annual epochs: the report says so; a model at
    its defaults gets no config row."""
    from bayesrate.calibrate import DEFAULT_MODEL_CONFIGS
    from bayesrate.models import get_model
    from bayesrate.report import _config_changes

    annual = get_model("excursion")(DEFAULT_MODEL_CONFIGS["excursion"])
    assert _config_changes(annual) == "epoch_days 365.0"
    assert get_model("excursion").default_model_config["epoch_days"] != 365.0
    assert _config_changes(get_model("hierarchical")()) == ""
