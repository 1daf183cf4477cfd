"""Short NUTS fits for the studies and the scheduler replay, and priors from a crawl log.

:func:`fit_model` fits a registered model with the given sampler settings (NUTS with
single-threaded BLAS, as every :meth:`RateModel.fit`) and with failed convergence gates
reported in ``diagnostics_``, not raised as warnings.

:func:`calibrate_priors` is the scheduler replay's calibration path (``bayesrate schedule
replay`` without ``--priors``): the hierarchical model fitted on the warm-up log's sufficient
statistics with short chains, each domain's predictive rate moment-matched to a Gamma
(:func:`bayesrate.export.domain_priors`). Short chains suffice for what the priors need — the
domain means and the page spread — but the diagnostics are reported, not assumed.

Imports PyMC (inside the functions): the scheduler imports this module only lazily, from
the command layer.
"""

from __future__ import annotations

import warnings
from typing import Any

from bayesrate.models.progress import Progress
from bayesrate.observations import Observations
from bayesrate.priors import PriorSet

#: NUTS settings of the quick fits (the priors' and the forecast study's): on the 6,907 tldr
#: pages (daily crawl) every fit meets the convergence gates with these, where 4 x 500 draws
#: after 500 tuning steps missed R-hat (docs/histories.md); nutpie's step size and mass
#: matrix settle within 300 tuning steps here
QUICK_SAMPLER = {"chains": 4, "draws": 1000, "tune": 300}


def fit_model(
    name: str,
    obs: Observations,
    sampler: dict[str, Any],
    model_config: dict[str, Any] | None = None,
    progress: Progress | None = None,
):
    """Fit model ``name`` (its defaults updated by ``model_config``) on ``obs`` by NUTS;
    failed gates in ``diagnostics_``, not raised; ``progress`` receives the fit's progress
    lines (:meth:`~bayesrate.models.base.RateModel.fit`)."""
    from bayesrate.models import get_model

    model = get_model(name)(model_config=model_config, sampler_config=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the gates are in model.diagnostics_
        model.fit(obs, progress=progress)
    return model


def calibrate_priors(
    obs: Observations, *, seed: int | str = "bayesrate-quick-priors", **sampler: Any
) -> tuple[PriorSet, dict[str, Any]]:
    """Priors per domain (per day) from a short hierarchical fit, and its diagnostics.

    Parameters
    ----------
    obs
        The crawl log (e.g. the replay's warm-up crawl).
    seed
        Sampler seed.
    **sampler
        Overrides of :data:`QUICK_SAMPLER` (``chains``, ``draws``, ``tune``).
    """
    from bayesrate.export import domain_priors

    model = fit_model("hierarchical", obs, {**QUICK_SAMPLER, **sampler, "seed": seed})
    diagnostics = model.diagnostics_.to_dict()
    meta = {"model": "hierarchical (quick fit on the warm-up log)", "quick_fit": diagnostics}
    return domain_priors(model, metadata=meta), diagnostics


def describe_fit(diag: dict[str, Any]) -> str:
    """One line: R-hat, ESS, divergences and whether the gates were met."""
    r_hat, ess = diag.get("r_hat_max"), diag.get("ess_bulk_min")
    return (
        f"R-hat max {r_hat if r_hat is None else round(r_hat, 4)}, bulk ESS min "
        f"{ess if ess is None else round(ess)}, divergences {diag.get('divergences')}"
        + ("" if diag.get("converged") else " — FAILED convergence gates")
    )
