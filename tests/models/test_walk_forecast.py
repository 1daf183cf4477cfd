"""The dynamic model's forecast with the page walks summed out (``walks="summed"``),
against the oracles of :mod:`tests.models.walk_forecast_checks` (every future path
enumerated; worlds against the predictive they are drawn from)."""

from __future__ import annotations

import pytest

from bayesrate.models.dynamic import DynamicModel
from bayesrate.studies import forecast
from tests.models.dynamic_checks import fixed_posterior, tiny_world
from tests.models.walk_forecast_checks import (
    GRID,
    N_DRAWS,
    check_sampled_paths,
    check_summed_walks,
    check_worlds,
)


def _model(data):
    """A fixed posterior of the dynamic model on ``data`` (the research package's tests
    add the shared epoch effects and edit rates of dynamic_shocks and dynamic_edits)."""
    return fixed_posterior(DynamicModel(model_config={"grid_size": GRID}), data, N_DRAWS)


def test_unknown_walks_are_refused_before_any_work():
    from bayesrate.errors import ObservationError
    from bayesrate.history import ChangeHistory

    with pytest.raises(ObservationError, match="walks must be one of"):
        forecast.run(history=object.__new__(ChangeHistory), methods="mle", walks="drawn")


def test_summed_walks_equal_every_path_enumerated():
    """The count distribution (whole, and truncated below a page's count), the probability
    of a change in the window and the expected count, against every future path
    (:func:`~tests.models.walk_forecast_checks.check_summed_walks`)."""
    data = tiny_world()
    check_summed_walks(_model(data), data)


def test_worlds_are_draws_of_the_summed_predictive(monkeypatch):
    """Worlds sample paths and Binomials; their counts follow the summed-out pmf."""
    data = tiny_world()
    check_worlds(_model(data), data, monkeypatch)


def test_sampled_paths_draw_from_the_summed_law():
    """One sampled path per draw has the summed predictive's law."""
    n, data = 3000, tiny_world()
    model = fixed_posterior(DynamicModel(model_config={"grid_size": GRID}), data, n)
    check_sampled_paths(model, data, n)
