"""The forecast study with the research models (moved from tests/studies/test_forecast.py):
each model answers for its own predictive (``forecast_groups`` / ``forecast_predictive``)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesrate import datasets
from bayesrate.errors import ObservationError
from bayesrate.studies import forecast

#: the research models whose fits are quick enough for every page of the fast run
RESEARCH_METHODS = ("bursty", "shocks", "drift", "shocks_ar1", "mass_edits")


def test_research_models_are_methods_once_registered():
    assert forecast.checked_methods("mle,shocks,dynamic_edits", 30.0) == [
        "mle",
        "shocks",
        "dynamic_edits",
    ]


#: the slowest fits: page paths summed out under sampled shared effects
PATHS_WITH_SHOCKS = ("dynamic_shocks", "dynamic_edits")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("methods", "max_pages"),
    [
        # the plumbing on a real history (the scores' quality is the study's): 60 pages
        (RESEARCH_METHODS, 60),
        # the slowest models (~60 gradients of ~7 ms per draw on 150 pages) on fewer pages,
        # with yearly epochs
        *(((m,), 30) for m in PATHS_WITH_SHOCKS),
    ],
)
def test_models_in_fast_mode_on_tldr_pages(methods, max_pages):
    h = datasets.load_history("tldr-pages")
    configs = {m: {"epoch_days": 365.0} for m in PATHS_WITH_SHOCKS if m in methods}
    if "shocks" in methods:
        configs["shocks"] = {"epoch_days": 180.0}
    result = forecast.run(
        history=h,
        fast=True,
        methods=methods,
        crawl_every=168.0,
        max_pages=max_pages,
        model_config=configs,
    )
    if "shocks" in methods:  # the override reached the fit (its epochs are 180 days)
        d = result.methods["shocks"].diagnostics
        assert d["model_config_overrides"] == {"epoch_days": 180.0}
        assert d["extra"]["epochs"]["epoch_days"] == 180.0
    table = result.table()
    assert list(table.index) == list(methods)
    assert np.isfinite(table[["log_score", "brier", "coverage90", "rate_log_rmse"]]).all().all()
    for name in set(RESEARCH_METHODS) & set(methods):
        d = result.methods[name].diagnostics
        assert {"r_hat_max", "ess_bulk_min", "divergences"} <= set(d)


def test_model_config_overrides_are_checked_before_any_fit():
    """``--model-config METHOD=JSON``: per model method of the run, a JSON object whose keys
    the model accepts; anything else is an error naming the method."""
    methods = ["mle", "shocks", "hierarchical"]
    got = forecast.method_configs(['shocks={"epoch_days": 365}', "hierarchical={}"], methods)
    assert got == {"shocks": {"epoch_days": 365}, "hierarchical": {}}
    assert forecast.method_configs(None, methods) == {}
    bad = {
        "mle={}": "not a model method",
        'drift={"epoch_days": 30}': "not a model method",
        "shocks": "NAME=JSON",
        "shocks={epoch_days: 3}": "not JSON",
        "shocks=[1]": "JSON object",
        'shocks={"epoch_dayz": 3}': "epoch_dayz",
        'shocks={"epoch_days": -1}': "epoch_days",
    }
    for text, message in bad.items():
        with pytest.raises(ObservationError, match=message):
            forecast.method_configs([text], methods)
