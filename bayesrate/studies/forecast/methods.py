"""The forecast study's methods and run options: the point estimators, the core models (and
any registered model), the MMPP; the methods run by default, the NUTS settings of the fits,
and the checks of what a run is asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bayesrate.errors import ObservationError
from bayesrate.quick_fit import QUICK_SAMPLER

#: the batch estimators, scored with a plug-in Binomial (:func:`.predictions.point_prediction`)
POINT_METHODS = ("naive", "cho", "mle")
#: fitted by maximum marginal likelihood, scored with their own exact predictive
#: (:func:`.burst.burst_forecast`)
BURST_METHODS = ("mmpp", "mmpp_mixture")
#: the core's models; any other registered model (``bayesrate.models.register``, e.g. the
#: research package's) is a method too, on request
MODEL_METHODS = ("censored", "hierarchical", "modulated", "dynamic", "excursion")
METHODS = (*POINT_METHODS, *MODEL_METHODS, *BURST_METHODS)
#: the model ``bayesrate calibrate`` recommends on the embedded default data (its
#: ``recommended.json``): the one model whose 90% intervals are calibrated on real histories,
#: so a study run with no methods named scores it beside the baselines
RECOMMENDED_METHOD = "excursion"
#: the methods run when none are named: everything but these (the random-walk model and the
#: MMPP, on request)
ON_REQUEST = ("dynamic", *BURST_METHODS)
DEFAULT_METHODS = tuple(m for m in METHODS if m not in ON_REQUEST)
#: point estimates are floored at this many changes over the page's training exposure
RATE_FLOOR_CHANGES = 0.5

DEFAULT_HORIZON_DAYS = 180.0
#: NUTS settings of the study's fits unless given: 4 x 2000 draws after the quick fits' 300
#: tuning steps (:data:`bayesrate.quick_fit.QUICK_SAMPLER`). On all 6,907 tldr pages 4 x 1000
#: draws left R-hat at 1.0105-1.0173 in one run and under 1.01 in another: the worst of
#: ~14,000 parameters sits on the gate by chance
STUDY_SAMPLER = {**QUICK_SAMPLER, "draws": 2000}
#: how a dynamic model's predictive treats the page walks after the last fitted epoch
#: (:func:`.predictions.model_prediction`): summed out on the grid (default) or one sampled
#: path per draw
WALKS = ("summed", "sampled")

FAST = {"max_pages": 300, "draws": 200, "tune": 300, "chains": 2, "predictive_draws": 200}


def method_configs(
    given: Mapping[str, Mapping[str, Any]] | Sequence[str] | None, methods: list[str]
) -> dict[str, dict[str, Any]]:
    """``{method: model_config overrides}`` for the model methods of this run
    (:func:`bayesrate.models.parse_model_configs`)."""
    from bayesrate.models import parse_model_configs

    return parse_model_configs(
        given,
        [m for m in methods if m not in (*POINT_METHODS, *BURST_METHODS)],
        what="model method of this run",
    )


def checked_walks(walks: str) -> None:
    """``ObservationError`` unless ``walks`` is one of :data:`WALKS`."""
    if walks not in WALKS:
        raise ObservationError(f"walks must be one of {WALKS}, got {walks!r}", field="walks")


def checked_methods(methods: Sequence[str] | str, horizon_days: float) -> list[str]:
    """The methods as a list (from a sequence or comma-separated text), all known."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    from bayesrate.models import RESEARCH_HINT, model_names

    known = (*POINT_METHODS, *model_names(), *BURST_METHODS)
    unknown = [m for m in methods if m not in known]
    if unknown or not methods:
        raise ObservationError(
            f"unknown method(s) {unknown}; choose from {list(known)} ({RESEARCH_HINT})",
            field="methods",
        )
    if not (np.isfinite(horizon_days) and horizon_days > 0):
        raise ObservationError("horizon must be > 0 days", field="horizon_days")
    return list(methods)


def study_sampler(
    draws: int | None, tune: int | None, chains: int | None, seed: int | str, fast: bool
) -> dict[str, int | str]:
    """NUTS settings: the given ones, else :data:`FAST` (fast runs) or :data:`STUDY_SAMPLER`."""
    defaults = FAST if fast else STUDY_SAMPLER
    given = {"draws": draws, "tune": tune, "chains": chains}
    sampler: dict[str, int | str] = {k: v if v else defaults[k] for k, v in given.items()}
    sampler["seed"] = str(seed)
    return sampler
