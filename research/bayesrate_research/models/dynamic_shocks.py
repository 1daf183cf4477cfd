"""The dynamic model with the shocks model's shared epoch effects on top (``dynamic_shocks``).

Moved out of :mod:`bayesrate.models.dynamic` (issue #51): it is in no main job of the
product. Each page's log-rate walks as in :class:`~bayesrate.models.dynamic.DynamicModel`;
every epoch moves the pages of a domain together by the shocks model's effects
(:class:`~bayesrate_research.models.shocks.ShockModel`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH
from bayesrate.models.dynamic import DynamicModel, end_epochs
from bayesrate_research.models.shocks import ShockModel

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.models.hmm import ShiftedEmission
    from bayesrate.observations import Observations


class DynamicShockModel(DynamicModel, ShockModel):
    """The dynamic model with the shocks model's shared epoch effects on top: page
    log-rates walk, and every epoch moves the pages of a domain together::

        log λ[p, e] = x[p, e] + shock[domain(p), e]

    ``x`` is the dynamic model's per-page walk (its paths summed out on the grid) and
    ``shock`` the shocks model's (global, and per domain for domains of at least
    ``domain_shock_min_pages`` pages; zero-sum, independent per epoch). A cell's
    likelihood is evaluated at the shifted grid inside the kernel
    (:class:`~bayesrate.models.hmm.ShiftedEmission`), so the shocks are sampled with the
    population parameters and the paths stay summed out.

    ``log_rate`` is each page's own level ``x`` in the last fitted epoch (its filtered
    distribution under each draw's shocks), and ``rate`` its expected rate in a future
    epoch (a fresh shock: ``exp(log_rate + σ_global²/2 [+ σ_domain²/2])``), as in the
    shocks model. The forecast walks ``x`` on and draws fresh shocks per future epoch.
    """

    model_type: ClassVar[str] = "dynamic_shocks"
    #: research: no prior artifact (a hierarchical model underneath, not its gates)
    export_gates: ClassVar[None] = None
    rate_units: ClassVar[str] = "changes per hour (expected in a future epoch)"
    filter_vars: ClassVar[tuple[tuple[str, ...], ...]] = (
        *DynamicModel.filter_vars,
        ("shock", DIM_DOMAIN, DIM_EPOCH),
    )
    default_model_config: ClassVar[dict[str, Any]] = {
        **ShockModel.default_model_config,
        **DynamicModel.default_model_config,
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        if self.model_config["shock_process"] != "iid":
            raise ValueError(f"{self.model_type} has independent shocks (the pages walk already)")

    def effect_rows(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """The distinct rows of the ``(domain, epoch)`` effects: a domain of each (one that
        follows the global effects, then every domain with effects of its own,
        :meth:`shocked_domains`), and per domain the index of its row among them."""

        def compute() -> tuple[np.ndarray, np.ndarray]:
            own = self.shocked_domains(data)
            key = np.where(own, np.arange(len(own)) + 1, 0)
            _, first, code = np.unique(key, return_index=True, return_inverse=True)
            return first, code.reshape(-1)

        return self._cached(data, "effect_rows", compute)

    def shifted_emission(self, data: Observations) -> ShiftedEmission:
        """The cells' likelihood terms on the grid, grouped by (distinct effect row, epoch)
        (computed once per data)."""
        from bayesrate.models.hmm import ShiftedEmission

        def compute() -> ShiftedEmission:
            cells = self.cells(data)
            first, code = self.effect_rows(data)
            return ShiftedEmission.from_cells(
                cells.groups,
                cells.cell_page,
                cells.cell_epoch,
                cells.n_pages,
                cells.n_epochs,
                self.grid(data),
                code[data.domain_codes[cells.cell_page]] * cells.n_epochs + cells.cell_epoch,
                len(first) * cells.n_epochs,
            )

        return self._cached(data, "shifted_emission", compute)

    def active_cells(self, data: Observations) -> np.ndarray:
        """``(domains, epochs)``: whether any page of the domain has a cell in the epoch."""
        cells = self.cells(data)
        active = np.zeros((len(data.domains), cells.n_epochs), dtype=bool)
        active[data.domain_codes[cells.cell_page], cells.cell_epoch] = True
        return active

    def shock_information(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """The shocks model's information per shock, each interval counted in the epoch of
        its closing visit."""
        from bayesrate.models.hierarchical import interval_information, plugin_log_rates

        cells = self.cells(data)
        stats = data.interval_stats
        one_sided = (stats.n_changes == 0) | (stats.n_changes >= stats.n_intervals)
        plug = np.where(one_sided, -np.inf, plugin_log_rates(stats))
        ends = np.flatnonzero(~data.is_baseline)
        page = data.page_of_visit[ends]
        tau = data.time[ends] - data.time[ends - 1]
        column = end_epochs(data.time[ends], cells.anchor, cells.epoch_hours) - cells.first_epoch
        n_domains = len(data.domains)
        cell = np.bincount(
            data.domain_codes[page] * cells.n_epochs + column,
            weights=interval_information(plug[page], tau),
            minlength=n_domains * cells.n_epochs,
        ).reshape(n_domains, cells.n_epochs)
        return cell.sum(axis=0), cell

    def _added(self, data: Observations):
        """The added log-rates ``(domains, epochs)`` in the current model, or ``None``
        (here: none; the dynamic mass-edit model's edits)."""
        return None

    def _paths(self, data: Observations, init, transitions):
        from bayesrate.models.hmm import paths_logp

        cells = self.cells(data)
        rows, _ = self.effect_rows(data)
        added = self._added(data)
        return paths_logp(
            init,
            transitions,
            self.shifted_emission(data),
            data.domain_codes,
            cells.first_column,
            cells.last_column,
            self._shocks(data)[rows],
            None if added is None else added[rows],
        )

    def _group_shift(self, draws, i: int, domain: np.ndarray, column: np.ndarray):
        """Draw ``i``'s fitted shocks of the groups (a new domain follows the global ones)."""
        return self._fitted_effects(draws, i, "shock", "shock_global", domain, column)

    def _fitted_effects(
        self, draws, i: int, name: str, global_name: str, domain: np.ndarray, column
    ) -> np.ndarray:
        """Draw ``i``'s fitted ``(domain, epoch)`` effect ``name`` at the groups (a new
        domain, code ``n_domains``, takes ``global_name``); a column outside the fitted
        epochs is an error (the forecast study draws fresh effects for later epochs)."""
        effect = draws[name][i]
        if len(column) and (column.min() < 0 or column.max() >= effect.shape[1]):
            raise ValueError(
                f"{self.model_type} predicts visits within the fitted epochs only; "
                "`bayesrate study forecast` draws the effects of later epochs"
            )
        if global_name in draws:
            effect = np.vstack([effect, draws[global_name][i][None]])
        return effect[domain, column]

    def _draw_emission(self, draws: dict[str, np.ndarray], i: int, data: Observations):
        added = self._draw_added(draws, i)
        shift = self._distinct_rows(draws["shock"][i], data)
        added = None if added is None else self._distinct_rows(added, data)
        tables = self.shifted_emission(data).tables(shift, added)
        return tables[0], tables[2]

    def _distinct_rows(self, effect: np.ndarray, data: Observations) -> np.ndarray:
        """The :meth:`effect_rows` of a drawn ``(domain, epoch)`` effect; ``ValueError`` if
        domains that share a row differ (effects not drawn on ``data``'s domains)."""
        rows, code = self.effect_rows(data)
        if effect.shape[0] != len(code) or not np.array_equal(effect[rows][code], effect):
            raise ValueError(
                "the drawn (domain, epoch) effects do not match the domains of the data "
                "(pass the fitted data)"
            )
        return effect[rows]

    def _draw_added(self, draws: dict[str, np.ndarray], i: int):
        """Draw ``i``'s added log-rates ``(domains, epochs)``, or ``None`` (here: none)."""
        return None

    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        return [*super().diagnostic_vars(idata), "shock"]

    def future_log_effects(self, keep, n_ahead: int, seed):
        """The last fitted epoch's shocks, then fresh ones, as log-rate offsets
        (:func:`bayesrate_research.forecast.fitted_and_future_shocks`); no added rate."""
        from bayesrate_research.forecast import fitted_and_future_shocks

        _, log_added = DynamicModel.future_log_effects(self, keep, n_ahead, seed)
        last = self.cells(self.data_).n_epochs - 1
        return fitted_and_future_shocks(self, keep, n_ahead, seed)[:, :, last:], log_added
