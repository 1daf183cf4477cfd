"""Per-domain Gamma priors from a crawl log in one short hierarchical fit.

The scheduler replay's calibration path (``bayesrate schedule replay`` without
``--priors``): fit :class:`~bayesrate.models.hierarchical.HierarchicalModel` on the warm-up
log's sufficient statistics with short NUTS chains, then moment-match each domain's
predictive rate to a Gamma (:func:`bayesrate.export.domain_priors`). Short chains suffice for
what the priors need — the domain means and the page spread, a few dozen parameters — but
the convergence diagnostics are reported, not assumed. Imports PyMC: the scheduler imports
this module only lazily, from the command layer.
"""

from __future__ import annotations

import warnings
from typing import Any

from bayesrate.observations import Observations
from bayesrate.priors import PriorSet

#: NUTS settings of the quick fit
QUICK_SAMPLER = {"chains": 4, "draws": 300, "tune": 400}


def calibrate_priors(
    obs: Observations, *, seed: int | str = "bayesrate-quick-priors", **sampler: Any
) -> tuple[PriorSet, dict[str, Any]]:
    """Priors per domain (per day) from a short hierarchical fit; and its diagnostics.

    Parameters
    ----------
    obs
        The crawl log (e.g. the replay's warm-up crawl).
    seed
        Sampler seed.
    **sampler
        Overrides of :data:`QUICK_SAMPLER` (``chains``, ``draws``, ``tune``).
    """
    from threadpoolctl import threadpool_limits

    from bayesrate.export import domain_priors
    from bayesrate.models import get_model

    config = {**QUICK_SAMPLER, **sampler, "seed": seed}
    model = get_model("hierarchical")(sampler_config=config)
    # single-threaded BLAS: nutpie's chain threads would contend with BLAS threads
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")  # gates are reported below, not raised
        model.fit(obs)
    d = model.diagnostics_
    diagnostics = {
        "model": "hierarchical",
        "converged": bool(model.converged_),
        "r_hat_max": float(d.r_hat_max),
        "ess_bulk_min": float(d.ess_bulk_min),
        "ess_tail_min": float(d.ess_tail_min),
        "divergences": int(d.divergences),
        "chains": int(d.chains),
        "draws": int(d.draws),
        "seconds": float(d.seconds),
        "failures": list(d.failures),
    }
    priors = domain_priors(
        model,
        metadata={"model": "hierarchical (quick fit on the warm-up log)", "quick_fit": diagnostics},
    )
    return priors, diagnostics
