"""Dynamic mass-edit model: page walks, shared shocks and a shared added rate of edits.

The dynamic shocks model (:class:`~bayesrate_research.models.dynamic_shocks.DynamicShockModel`: each
page's log-rate a random walk over epochs, its path summed out on a grid, times shocks
shared per epoch) with the mass-edit model's added rate
(:class:`~bayesrate_research.models.mass_edits.MassEditModel`) on top::

    λ[p, e] = exp(x[p, e] + shock[d, e]) + exp(edit_log_rate[d, e])     d = domain(p)

The two models answer different misses: documents change their own rates over the years
(the page walks), and one commit or template edit reaches every page of a site whatever
its own rate (the added edits). The edit rates' priors, the total/share parameterisation
of the global level and the fresh edit rate of a future epoch are the mass-edit model's;
the walks, the grid and the closing-epoch cells the dynamic model's.

In the kernel a cell's rate at grid state ``k`` is ``exp(grid[k] + shift) + exp(added)``
(:class:`~bayesrate.models.hmm.ShiftedEmission`): the sufficient statistics stay the
cells' (interval lengths and counts per (page, epoch)), and the sampler sees the
population parameters, the shocks and the edit rates, never pages × epochs.

``log_rate`` is each page's own level in the last fitted epoch; ``rate`` its expected
rate in a future epoch, the shocks model's plus the expected edit rate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH
from bayesrate.models.dynamic import DynamicModel
from bayesrate_research.models.dynamic_shocks import DynamicShockModel
from bayesrate_research.models.mass_edits import EDIT_GLOBAL, EDIT_RATE, MassEditModel

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations


class DynamicEditModel(DynamicShockModel, MassEditModel):
    """Page walks, shared shocks and a shared added rate of edits per (domain, epoch)."""

    model_type: ClassVar[str] = "dynamic_edits"
    filter_vars: ClassVar[tuple[tuple[str, ...], ...]] = (
        *DynamicShockModel.filter_vars,
        (EDIT_RATE, DIM_DOMAIN, DIM_EPOCH),
    )
    default_model_config: ClassVar[dict[str, Any]] = {
        **MassEditModel.default_model_config,
        **DynamicModel.default_model_config,
    }

    def _added(self, data: Observations):
        return self._added_log_rates(data)

    def _draw_added(self, draws: dict[str, np.ndarray], i: int):
        return draws[EDIT_RATE][i]

    def _with_added(self, own, draws, i: int, domain: np.ndarray, column: np.ndarray):
        added = self._fitted_effects(draws, i, EDIT_RATE, EDIT_GLOBAL, domain, column)
        return np.logaddexp(own, added)

    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        return [*super().diagnostic_vars(idata), EDIT_RATE]

    def future_log_effects(self, keep, n_ahead: int, seed):
        """The shocks as the dynamic shocks model's, and the added rate: the last fitted
        epoch's edits, then fresh ones
        (:func:`bayesrate_research.forecast.fitted_and_future_edits`)."""
        from bayesrate_research.forecast import fitted_and_future_edits

        log_shift, _ = super().future_log_effects(keep, n_ahead, seed)
        last = self.cells(self.data_).n_epochs - 1
        return log_shift, fitted_and_future_edits(self, keep, n_ahead, seed)[:, :, last:]
