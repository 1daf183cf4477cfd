"""The recovery study on a tiny simulated world (slow: eight small fits)."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    # pymc 6.3 imports IfElse from its deprecated pytensor location (attributed to pymc)
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401


@pytest.mark.slow
def test_recovery_study_small(tmp_path):
    from bayesrate.studies import recovery

    study = recovery.run(
        seed="recovery-test", pages=60, modulation_pages=30, draws=150, tune=150, chains=2
    )
    study.save(tmp_path)
    result = study.summary
    assert set(result["targets"]) >= {
        "coverage_hierarchical_short",
        "pooling_gain_short",
        "hour_corr",
        "day_corr",
        "loo_prefers_modulated_when_present",
        "loo_not_modulated_when_absent",
    }
    assert (tmp_path / "recovery.json").is_file()
    mod = result["modulation"]["modulated"]
    # a strong, known modulation over 30 days of hourly visits is recovered even here
    assert mod["hour_corr"] > 0.9 and mod["day_corr"] > 0.9
    assert mod["loo_best"] == "modulated"
    assert (tmp_path / "pages_short.csv").is_file() and (tmp_path / "effects.csv").is_file()
    # the pooling target reports the oracle Bayes bound next to the model's gain
    assert result["targets"]["pooling_gain_short"]["oracle_bound"] is not None
    assert result["short"]["oracle_rmse_log_le50_changed"] > 0


def test_oracle_bayes_estimator_beats_cho_on_short_histories():
    """The pooling bound of the recovery study is a Bayes estimator: on fresh data from the
    same simulator it has lower RMSE in log-rate than Cho (oracle: the simulated truth)."""
    import numpy as np

    from bayesrate.estimators.batch import cho
    from bayesrate.simulate import pages_like
    from bayesrate.studies.recovery import oracle_posterior_mean_log_rate

    sim = pages_like(400, seed="oracle-test-data", history="short")
    stats = sim.observations.interval_stats
    truth = np.log(sim.truth["rate_per_hour"].to_numpy())
    sel = stats.n_changes >= 1
    oracle = oracle_posterior_mean_log_rate(stats, "short", seed="oracle-test-population")
    rmse_oracle = np.sqrt(np.mean((oracle[sel] - truth[sel]) ** 2))
    rmse_cho = np.sqrt(np.mean((np.log(cho(stats).rate[sel]) - truth[sel]) ** 2))
    assert rmse_oracle < rmse_cho
    assert np.all(np.isfinite(oracle))
