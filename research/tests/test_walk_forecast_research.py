"""The research dynamic variants' forecast with the page walks summed out, against the
core's oracles (:mod:`tests.models.walk_forecast_checks`) with the shared epoch effects
(dynamic_shocks) and edit rates (dynamic_edits) in every enumerated path."""

from __future__ import annotations

import numpy as np
import pytest
from bayesrate_research.models.dynamic_edits import DynamicEditModel
from bayesrate_research.models.dynamic_shocks import DynamicShockModel
from bayesrate_research.models.mass_edits import EDIT_MEAN, SIGMA_EDIT_GLOBAL

from tests.models.dynamic_checks import EDIT, SHOCK, fixed_posterior, tiny_world
from tests.models.walk_forecast_checks import (
    GRID,
    N_DRAWS,
    check_sampled_paths,
    check_summed_walks,
    check_worlds,
)

#: future shocks and edits drawn afresh per draw (so the draws differ)
FUTURE = {"sigma_shock_global": 0.5, EDIT_MEAN: -6.0, SIGMA_EDIT_GLOBAL: 0.7}


def _model(model_class, data):
    """A fixed posterior of a research variant with its shocks (and edits); future ones are
    drawn afresh per draw."""
    config = {"grid_size": GRID, "domain_shock_min_pages": 1}
    edits = EDIT if model_class is DynamicEditModel else None
    return fixed_posterior(model_class(model_config=config), data, N_DRAWS, SHOCK, FUTURE, edits)


@pytest.mark.parametrize("model_class", [DynamicShockModel, DynamicEditModel])
def test_summed_walks_equal_every_path_enumerated(model_class):
    """The core check with the fitted shocks (and edits) in every path, and future shocks
    drawn afresh per draw."""
    data = tiny_world()
    model = _model(model_class, data)
    edits = EDIT if model_class is DynamicEditModel else None
    wf = check_summed_walks(model, data, SHOCK, edits)
    assert np.ptp(wf.log_shift[:, :, 1:], axis=0).max() > 0.1  # they differ between draws


def test_worlds_are_draws_of_the_summed_predictive(monkeypatch):
    """The core check; the future shocks spread the worlds' counts beyond the 99% cap."""
    data = tiny_world()
    check_worlds(_model(DynamicShockModel, data), data, monkeypatch, spread=True)


def test_sampled_paths_draw_from_the_summed_law():
    """The core check on the same draws with fresh shocks."""
    n, data = 3000, tiny_world()
    model = fixed_posterior(
        DynamicShockModel(model_config={"grid_size": GRID, "domain_shock_min_pages": 1}),
        data, n, SHOCK, FUTURE,
    )  # fmt: skip
    check_sampled_paths(model, data, n)
