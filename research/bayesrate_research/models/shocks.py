"""Shocks model: hierarchical page rates × shared epoch effects (mass edits, quiet years).

Real sites change many pages at once (template edits, mass reformatting, policy updates),
and their activity varies from year to year. The page level is
:class:`~bayesrate.models.hierarchical.HierarchicalModel`'s; on top of it every epoch (a span
of ``epoch_days``, counted back from the data's last visit: :mod:`bayesrate_research.models.epochs`)
has a log-rate effect shared by the pages of a domain::

    sigma_shock_global ~ Gamma(2, 2/shock_sd_scale)
    sigma_shock_domain ~ Gamma(2, 2/shock_sd_scale)
    shock[d, e] = sigma_shock_global·z_global[e] + sigma_shock_domain·z_domain[d, e]
                  (the domain part only for domains of ≥ domain_shock_min_pages pages)
    λ_p(t) = exp(log_rate[p] + shock[domain(p), epoch(t)])

(``z`` standard normal, non-centred, and summing to zero: over epochs, and for the
domain shocks over domains too, so that ``log_rate`` is a page's level averaged over the
fitted epochs and the global shock the domains' mean; a single epoch or domain has no
such effect). Each interval's integrated rate is exact,
``Λ = λ_p Σ_e hours_e·exp(shock[d, e])``, and intervals with the same hours per epoch form
one Binomial group per page: sufficient statistics per (page, epoch, interval length).

A future epoch draws fresh shocks from the same distribution, so the predictive of a
future window carries the uncertainty of a shock year; ``rate`` is a page's expected rate
in a future epoch, ``exp(log_rate + σ_global²/2 [+ σ_domain²/2]``). The posterior also holds
``shock`` (domain, epoch), its columns labelled by each epoch's start (ISO, UTC).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bayesrate.constants import (
    DIM_DOMAIN,
    DIM_EPOCH,
    DIM_FUTURE_EPOCH,
    DIM_PAGE,
    HOURS_PER_DAY,
)
from bayesrate.models.base import check_config_numbers
from bayesrate.models.hierarchical import PARAMETERISATIONS, HierarchicalModel

if TYPE_CHECKING:
    import pymc as pm
    import xarray as xr

    from bayesrate.models.groups import IntervalGroups
    from bayesrate.observations import Observations
    from bayesrate_research.models.epochs import EpochPatterns

#: ``iid``: a fresh shock per epoch around the page's average level; ``random_walk``: the
#: level moves by a step per epoch and the page's ``log_rate`` is its level now; ``ar1``:
#: the global shock is a stationary AR(1) path (persistence ``shock_persistence``), shown
#: around its mean over the fitted epochs, so ``log_rate`` is again the average level
SHOCK_PROCESSES = ("iid", "random_walk", "ar1")


def walk_back(steps):
    """Levels from steps, 0 at the last epoch: ``level[..., e] = −Σ_{j ≥ e} steps[..., j]``
    (``steps[..., j]`` is the move into epoch ``j + 1``); PyTensor or numpy."""
    import pytensor.tensor as pt

    steps = pt.as_tensor_variable(steps)
    back = pt.cumsum(steps[..., ::-1], axis=-1)[..., ::-1]
    last = pt.zeros((*(steps.shape[i] for i in range(steps.ndim - 1)), 1))
    return pt.concatenate([-back, last], axis=-1)


def ar1_weights(phi, n: int):
    """``(..., n, n)`` lower-triangular ``phi^(e − j)`` (0 above the diagonal): the weight of
    innovation ``j`` in the AR(1) value at ``e``; ``phi`` a PyTensor scalar or a numpy array
    of draws."""
    lag = np.subtract.outer(np.arange(n), np.arange(n))
    return phi[..., None, None] ** np.maximum(lag, 0) * (lag >= 0)


def ar1_path(phi, sigma, z, n: int):
    """A stationary AR(1) path (mean 0, marginal sd ``sigma``, persistence ``phi``) from
    ``n`` standard normal innovations ``z``: ``x_0 = sigma·z_0``,
    ``x_e = phi·x_{e−1} + sigma·√(1 − phi²)·z_e``; PyTensor or numpy (leading draw axes)."""
    first = (np.arange(n) == 0).astype(float)
    scale = sigma[..., None] * (first + (1.0 - first) * (1.0 - phi[..., None] ** 2) ** 0.5)
    return (ar1_weights(phi, n) @ (scale * z)[..., :, None])[..., 0]


def ar1_continue(last, mean, phi, sigma, z, n: int):
    """The next ``n`` values of a stationary AR(1) path (mean 0, marginal sd ``sigma``,
    persistence ``phi``) whose last value is ``last``, less ``mean``; ``z`` ``(..., n)``
    standard normal innovations. Arguments broadcast over leading (draw) axes; PyTensor or
    numpy.

    ``x_h = phi^h·last + sigma·√(1 − phi²)·Σ_{j ≤ h} phi^(h − j)·z_j``, so ``x_h`` given
    ``last`` is Normal(``phi^h·last``, ``sigma²(1 − phi^(2h))``).
    """
    decay = phi[..., None] ** np.arange(1, n + 1)
    innovation = sigma * (1.0 - phi**2) ** 0.5
    noise = (ar1_weights(phi, n) @ z[..., :, None])[..., 0]
    return decay * last[..., None] + innovation[..., None] * noise - mean[..., None]


def ar1_next_log_mean(deviation, phi, variance):
    """``log E[exp(x')]`` of a stationary AR(1) path's next value ``x'`` (mean 0, marginal
    variance ``variance``) given its last value ``deviation``: ``x'`` is
    Normal(``phi·deviation``, ``variance·(1 − phi²)``)."""
    return phi * deviation + variance * (1 - phi**2) / 2


def ar1_mean_given_deviations(deviation, phi, sigma, n: int):
    """Mean and sd of a stationary AR(1) path's average ``m`` given its deviations from it
    (``deviation`` sums to 0, ``n ≥ 2`` values): Normal, from the path's tridiagonal
    precision, ``mean = −φ(d_0 + d_{n−1})/k`` and ``sd = σ·√((1 + φ)/k)`` with
    ``k = (n − 2)(1 − φ) + 2``; PyTensor or numpy."""
    k = (n - 2) * (1.0 - phi) + 2.0
    mean = -phi * (deviation[..., 0] + deviation[..., -1]) / k
    return mean, sigma * ((1.0 + phi) / k) ** 0.5


class ShockModel(HierarchicalModel):
    """Pooled page rates with epoch effects shared globally and per domain."""

    model_type: ClassVar[str] = "shocks"
    #: research: no prior artifact (a hierarchical model underneath, not its gates)
    export_gates: ClassVar[None] = None
    conditional_pages: ClassVar[bool] = False
    #: leave-one-page-out: each page's rate integrated out under each draw's shocks
    marginal_loo: ClassVar[bool] = True
    #: nodes of each draw's own integration grid after a first pass on the shared one, or
    #: none (:func:`bayesrate.checks.marginal.integrated_loglik_per_draw`)
    marginal_refine_to: ClassVar[int | None] = None
    default_model_config: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.default_model_config,
        "epoch_days": 90.0,
        "shock_sd_scale": 0.5,
        "domain_shocks": True,
        "domain_shock_min_pages": 3,
        "shock_parameterisation": "auto",
        "shock_process": "iid",
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        check_config_numbers(
            self.model_config, positive=("epoch_days", "shock_sd_scale", "domain_shock_min_pages")
        )
        if not isinstance(self.model_config["domain_shocks"], bool):
            raise ValueError("domain_shocks must be true or false")
        if self.model_config["shock_process"] not in SHOCK_PROCESSES:
            raise ValueError(f"shock_process must be one of {SHOCK_PROCESSES}")
        if self.model_config["shock_parameterisation"] not in PARAMETERISATIONS:
            raise ValueError(f"shock_parameterisation must be one of {PARAMETERISATIONS}")

    @property
    def epoch_hours(self) -> float:
        return float(self.model_config["epoch_days"]) * HOURS_PER_DAY

    def epochs(self, data: Observations) -> EpochPatterns:
        """``data``'s intervals on the epoch grid anchored at its last visit."""
        from bayesrate_research.models.epochs import epoch_patterns

        return self._cached(data, "epochs", lambda: epoch_patterns(data, self.epoch_hours))

    def _cached(self, data: Observations, name: str, compute):
        """``compute()`` once per data object (the grid and what derives from it)."""
        cache = getattr(self, "_data_cache", None)
        if cache is None or cache[0] is not data:
            cache = self._data_cache = (data, {})
        if name not in cache[1]:
            cache[1][name] = compute()
        return cache[1][name]

    def epoch_labels(self, patterns: EpochPatterns) -> np.ndarray:
        """Start of each epoch column, ISO 8601 UTC."""
        from bayesrate.clock import to_timestamp

        k = patterns.first_epoch + np.arange(patterns.n_epochs)
        starts = patterns.anchor + k * patterns.epoch_hours
        return np.array([to_timestamp(h).isoformat() for h in starts])

    def coords(self, data: Observations) -> dict[str, Any]:
        coords = super().coords(data)
        coords[DIM_EPOCH] = self.epoch_labels(self.epochs(data))
        return coords

    def fitted_groups(self, data: Observations) -> IntervalGroups:
        """Groups by (page, hours per epoch): equal integrated rates."""
        return self.epochs(data).groups

    # ------------------------------------------------------------------ graph
    def _build(self, data: Observations) -> pm.Model:
        import pymc as pm

        from bayesrate.models import likelihood as lik
        from bayesrate_research.models import epochs as E

        patterns = self.epochs(data)
        with pm.Model(coords=self.coords(data)) as model:
            log_rate = self._page_log_rates(data)
            shock = self._shocks(data)
            added = self._added_log_rates(data)
            detected = patterns.groups.detected > 0
            busy, quiet = patterns.select(detected), patterns.select(~detected)
            lik.detections(
                busy.groups,
                log_rate,
                E.log_exposure(busy, shock),
                None if added is None else E.log_exposure(busy, added),
            )
            hours, domain = quiet.page_hours(), data.domain_codes

            def of_quiet(effect):  # (the effect, its patterns' log exposure, pages' exposure)
                return (
                    effect,
                    lambda s: E.log_exposure(quiet, s),
                    lambda s: E.page_exposure(hours, domain, s),
                )

            lik.quiet(
                quiet.groups,
                log_rate,
                effects=of_quiet(shock),
                added=None if added is None else of_quiet(added),
            )
        self._build_notes["epochs"] = {
            "epoch_days": self.model_config["epoch_days"],
            "epochs": patterns.n_epochs,
            "patterns": patterns.n_patterns,
            "straddling_patterns": int(np.sum(np.bincount(patterns.entry_pattern) > 1)),
        }
        return model

    def _added_log_rates(self, data: Observations):
        """``(domain, epoch)`` log-rates every page of the domain gets on top of its own (in
        the current model), or ``None`` (here: none; the mass-edit model's edits)."""
        return None

    def shock_information(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """Expected Fisher information about each shock at plug-in page rates (the Cho
        estimates): ``(epochs,)`` for the global shocks, ``(domains, epochs)`` per domain.

        Each group's ``n·x²/(eˣ − 1)`` (``x = λ̂τ``) counts for the epoch of its pattern's
        first piece (a straddling interval's split does not matter for the choice).
        """
        from bayesrate.models.hierarchical import interval_information, plugin_log_rates

        patterns = self.epochs(data)
        g = patterns.groups
        stats = data.interval_stats
        one_sided = (stats.n_changes == 0) | (stats.n_changes >= stats.n_intervals)
        plug = np.where(one_sided, -np.inf, plugin_log_rates(stats))
        term = interval_information(plug[g.page], g.basis[g.pattern, 0]) * g.trials
        first = np.searchsorted(patterns.entry_pattern, np.arange(patterns.n_patterns))
        epoch = patterns.entry_epoch[first][g.pattern]
        domain = patterns.pattern_domain[g.pattern]
        n_domains, n_epochs = len(data.domains), patterns.n_epochs
        cell = np.bincount(
            domain * n_epochs + epoch, weights=term, minlength=n_domains * n_epochs
        ).reshape(n_domains, n_epochs)
        return cell.sum(axis=0), cell

    def choose_shock_parameterisation(self, data: Observations) -> tuple[bool, bool]:
        """Whether the global and the domain shocks are centred.

        ``auto``: centred when the median shock's information (for the domain shocks: over
        the cells they have, active epochs of domains with shocks) times the prior variance
        (``shock_sd_scale²``) exceeds ``centre_threshold`` (the page rule's criterion): many
        pages per epoch pin the shocks, and a non-centred parameterisation then mixes
        slowly; few leave them to the prior, and a centred one makes a funnel.
        """
        choice = self.model_config["shock_parameterisation"]
        if choice != "auto":
            return choice == "centred", choice == "centred"
        info_global, info_domain = self.shock_information(data)
        prior_var = self.model_config["shock_sd_scale"] ** 2
        threshold = self.model_config["centre_threshold"]
        score_g = float(np.median(info_global)) * prior_var if info_global.size else 0.0
        own = self.active_cells(data) & self.shocked_domains(data)[:, None]
        score_d = float(np.median(info_domain[own])) * prior_var if own.any() else 0.0
        self._build_notes["shock_parameterisation"] = {
            "rule": choice,
            "global_score": score_g,
            "domain_score": score_d,
            "global_centred": score_g > threshold,
            "domain_centred": score_d > threshold,
        }
        return score_g > threshold, score_d > threshold

    def shocked_domains(self, data: Observations) -> np.ndarray:
        """Which domains have shocks of their own: those with at least
        ``domain_shock_min_pages`` pages (a shock shared by one or two pages is not told
        apart from their own changes of rate); the others follow the global shocks."""
        if not self.model_config["domain_shocks"]:
            return np.zeros(len(data.domains), dtype=bool)
        pages = np.bincount(data.domain_codes, minlength=len(data.domains))
        return pages >= self.model_config["domain_shock_min_pages"]

    def active_cells(self, data: Observations) -> np.ndarray:
        """``(domains, epochs)``: whether the domain has any interval hours in the epoch."""

        def compute() -> np.ndarray:
            patterns = self.epochs(data)
            hours = np.zeros((len(data.domains), patterns.n_epochs))
            np.add.at(hours, (data.domain_codes, slice(None)), patterns.page_hours())
            return hours > 0

        return self._cached(data, "active_cells", compute)

    def _domain_deviation(
        self,
        data: Observations,
        name: str,
        centred: bool,
        sigma_name: str = "sigma_shock_domain",
        scale: float | None = None,
    ):
        """``(domains, n_rows)`` domain parts, 0 for domains without shocks of their own;
        ``None`` if fewer than two domains have them. Their spread is ``sigma_name`` ~
        Gamma(2, 2/``scale``) (default ``shock_sd_scale``).

        Shocks (``name == "shock_domain"``): when every shocked domain has data in every
        epoch, zero-sum over domains and epochs. Otherwise one value per *active* cell (a
        domain's epoch with data), centred over the domain's active cells, so that its
        pages' level is their average over the epochs they were seen in (a zero-sum over
        every epoch leaves the level of a domain seen in a few epochs to the prior of the
        others: a ridge; on ota-contrib R-hat 1.036 against 1.027); the domains' mean per
        epoch is then not fixed (tied to the global shock through the prior only: on a
        240-page world with every cell active this version mixed at R-hat 1.05, the
        zero-sum one passes). Steps (``"step_domain"``): every step, zero-sum over the
        domains. Any other name (the mass-edit model's ``"edit_domain"``) is per epoch, like
        the shocks.
        """
        import pymc as pm
        import pytensor.tensor as pt

        shocked = self.shocked_domains(data)
        index = np.flatnonzero(shocked)
        n_domains, n_epochs = self.active_cells(data).shape
        per_epoch = name != "step_domain"
        n_rows = n_epochs if per_epoch else n_epochs - 1
        if len(index) < 2 or n_rows < 1:
            return None
        scale = self.model_config["shock_sd_scale"] if scale is None else scale
        sigma_d = pm.Gamma(sigma_name, alpha=2.0, beta=2.0 / scale)
        if per_epoch and self.active_cells(data)[index].all():
            # every cell has data: zero-sum over the domains and the epochs (exact)
            shape = (len(index), n_rows)
            if centred:
                part = pm.ZeroSumNormal(name, sigma=sigma_d, shape=shape, n_zerosum_axes=2)
            else:
                z = pm.ZeroSumNormal(f"z_{name}", sigma=1.0, shape=shape, n_zerosum_axes=2)
                part = sigma_d * z
            return pt.set_subtensor(pt.zeros((n_domains, n_rows))[index], part)
        if per_epoch:
            active = self.active_cells(data) & shocked[:, None]
            rows, cols = np.nonzero(active)
            if centred:
                values = pm.Normal(name, 0.0, sigma_d, shape=len(rows))
            else:
                values = sigma_d * pm.Normal(f"z_{name}", 0.0, 1.0, shape=len(rows))
            counts = np.maximum(active.sum(axis=1), 1)
            means = pt.zeros(n_domains)[rows].inc(values) / counts
            return pt.zeros((n_domains, n_rows))[rows, cols].set(values - means[rows])
        shape = (n_rows, len(index))  # zero-sum over the last axis: the domains
        if centred:
            part = pm.ZeroSumNormal(name, sigma=sigma_d, shape=shape)
        else:
            part = sigma_d * pm.ZeroSumNormal(f"z_{name}", sigma=1.0, shape=shape)
        return pt.set_subtensor(pt.zeros((n_domains, n_rows))[index], part.T)

    def _shocks(self, data: Observations):
        """``shock`` (domain, epoch) in the current model; returns the tensor."""
        import pymc as pm

        scale = self.model_config["shock_sd_scale"]
        coords = pm.modelcontext(None).coords
        n_domains, n_epochs = len(coords[DIM_DOMAIN]), len(coords[DIM_EPOCH])
        centred_g, centred_d = self.choose_shock_parameterisation(data)
        sigma_g = pm.Gamma("sigma_shock_global", alpha=2.0, beta=2.0 / scale)
        if self.model_config["shock_process"] == "random_walk":
            n_steps = max(n_epochs - 1, 0)
            if centred_g:
                step_g = pm.Normal("step_global", 0.0, sigma_g, shape=n_steps)
            else:
                step_g = sigma_g * pm.Normal("z_step_global", 0.0, 1.0, shape=n_steps)
            steps = pm.math.ones((n_domains, 1)) * step_g[None, :]
            step_d = self._domain_deviation(data, "step_domain", centred_d)
            if step_d is not None:
                steps = steps + step_d
            pm.Deterministic("shock_global", walk_back(step_g), dims=DIM_EPOCH)
            return pm.Deterministic("shock", walk_back(steps), dims=(DIM_DOMAIN, DIM_EPOCH))
        if self.model_config["shock_process"] == "ar1" and n_epochs >= 2:
            shock_global = self._ar1_global_shocks(sigma_g, n_epochs, centred_g)
        elif n_epochs < 2:
            shock_global = pm.Deterministic("shock_global", pm.math.zeros(n_epochs), dims=DIM_EPOCH)
        elif centred_g:
            shock_global = pm.ZeroSumNormal("shock_global", sigma=sigma_g, dims=DIM_EPOCH)
        else:
            z_g = pm.ZeroSumNormal("z_shock_global", sigma=1.0, dims=DIM_EPOCH)
            shock_global = pm.Deterministic("shock_global", sigma_g * z_g, dims=DIM_EPOCH)
        shock = pm.math.ones((n_domains, 1)) * shock_global[None, :]
        deviation = self._domain_deviation(data, "shock_domain", centred_d)
        if deviation is not None:
            shock = shock + deviation
        return pm.Deterministic("shock", shock, dims=(DIM_DOMAIN, DIM_EPOCH))

    def _ar1_global_shocks(self, sigma_g, n_epochs: int, centred: bool):
        """``shock_global``: a stationary AR(1) path (``shock_path_global``, marginal sd
        ``sigma_shock_global``, persistence ``shock_persistence`` ~ Beta(2, 2)) less its mean
        over the fitted epochs (``shock_mean_global``): the likelihood sees only the
        deviations (the mean is the pages' level's), and the mean, drawn from its prior
        given them, carries into the forecast (:func:`ar1_continue`)."""
        import pymc as pm
        import pytensor.tensor as pt

        phi = pm.Beta("shock_persistence", alpha=2.0, beta=2.0)
        if centred:
            # the path's mean is its own coordinate: the deviations (zero-sum) carry the AR(1)
            # density with the mean integrated out, the mean is drawn given them; sampling the
            # path itself left its mean, which the data do not see, to mix alone along the
            # diagonal (ota-contrib: R-hat 1.16-1.20 on the path, bulk ESS 18-31)
            deviation = pm.ZeroSumNormal("shock_global", sigma=1.0, dims=DIM_EPOCH)
            centre, spread = ar1_mean_given_deviations(deviation, phi, sigma_g, n_epochs)
            path = pm.AR.dist(
                rho=pt.stack([phi]),
                sigma=sigma_g * pt.sqrt(1.0 - phi**2),
                init_dist=pm.Normal.dist(0.0, sigma_g),
                ar_order=1,
                steps=n_epochs - 1,
            )
            pm.Potential(
                "shock_global_ar1_prior",
                pm.logp(path, deviation + centre)
                + pt.log(spread)
                + 0.5 * pt.sum(deviation**2),  # less ZeroSumNormal(1)'s own log density
            )
            z_mean = pm.Normal("z_shock_mean_global", 0.0, 1.0)
            mean = pm.Deterministic("shock_mean_global", centre + spread * z_mean)
            pm.Deterministic("shock_path_global", deviation + mean, dims=DIM_EPOCH)
            return deviation
        z = pm.Normal("z_shock_path_global", 0.0, 1.0, dims=DIM_EPOCH)
        path = pm.Deterministic(
            "shock_path_global", ar1_path(phi, sigma_g, z, n_epochs), dims=DIM_EPOCH
        )
        mean = pm.Deterministic("shock_mean_global", path.mean())
        return pm.Deterministic("shock_global", path - mean, dims=DIM_EPOCH)

    # ------------------------------------------------------------------ predictive
    def _prediction_patterns(self, observations: Observations) -> EpochPatterns:
        """The visit patterns split by epoch of the fitted grid (so that each group has one
        integrated rate and one hour of its detecting visits)."""
        from bayesrate.models.groups import visit_patterns
        from bayesrate_research.models.epochs import epoch_patterns

        fitted = self.fitted_grid()
        visits = visit_patterns(observations, self.timezone)
        refine = visits.group_pattern[visits.interval_group]
        try:
            return epoch_patterns(
                observations,
                fitted.epoch_hours,
                fitted.anchor,
                first_epoch=fitted.first_epoch,
                refine=refine,
            )
        except ValueError as exc:
            raise ValueError(f"cannot predict visits before the fitted epochs: {exc}") from exc

    def predictive_patterns(self, observations: Observations):
        return self._prediction_patterns(observations).visit_patterns(self.timezone)

    def _prediction(self, observations: Observations, patterns, out) -> xr.DataTree:
        return super()._prediction(observations, patterns.visit_patterns(self.timezone), out)

    def _predictive_model(self, data: Observations, patterns, page_rates: str) -> pm.Model:
        """Every group of ``data`` on the fitted epoch grid: fitted epochs keep their
        posterior shocks, later epochs draw fresh ones (:meth:`_predictive_shocks`)."""
        import pymc as pm

        from bayesrate.constants import DIM_GROUP
        from bayesrate.models.base import coord_labels
        from bayesrate_research.models import epochs as E

        coords = {
            DIM_PAGE: coord_labels(data.pages.index),
            DIM_GROUP: np.arange(patterns.groups.n_groups),
        }
        with pm.Model(coords=coords) as model:
            if page_rates == "posterior":
                log_rate = pm.Flat("log_rate", dims=DIM_PAGE)
            else:
                log_rate = self._population_log_rates(data)
            shock = self._predictive_shocks(data, patterns.n_epochs)
            added = self._predictive_added(data, patterns.n_epochs)
            self._add_predictive_detections(
                patterns.groups,
                log_rate,
                E.log_exposure(patterns, shock),
                None if added is None else E.log_exposure(patterns, added),
            )
        return model

    def _predictive_added(self, data: Observations, n_epochs: int):
        """The added log-rates of :meth:`_predictive_model` (after the shocks), or
        ``None``."""
        return None

    def _predictive_shocks(self, data: Observations, n_epochs: int):
        """``(data's domains, n_epochs)`` shocks: the fitted ones where the fit has them
        (placeholders whose values come from the posterior); a new domain follows the fitted
        global ones; epochs after the fit draw fresh shocks (the domain part for the
        domains that have their own)."""
        import pymc as pm
        import pytensor.tensor as pt

        model = pm.modelcontext(None)
        post = self.idata_["posterior"]
        fitted = pd.Index([str(d) for d in post[DIM_DOMAIN].values])
        n_fit = post.sizes[DIM_EPOCH]
        model.add_coords({DIM_DOMAIN: fitted, DIM_EPOCH: post[DIM_EPOCH].values})
        if n_epochs > n_fit:
            model.add_coords({DIM_FUTURE_EPOCH: np.arange(n_epochs - n_fit)})
        rows, own = self._domain_rows(
            data,
            pm.Flat("shock", dims=(DIM_DOMAIN, DIM_EPOCH)),
            pm.Flat("shock_global", dims=DIM_EPOCH),
        )
        sigma_g = pm.HalfFlat("sigma_shock_global")
        domains = [str(d) for d in data.domains]
        walk = self.model_config["shock_process"] == "random_walk"
        if n_epochs > n_fit:
            n_new = n_epochs - n_fit
            z_g = pm.Normal("future_z_shock_global", 0.0, 1.0, dims=DIM_FUTURE_EPOCH)
            if "shock_persistence" in post:  # ar1
                path = pm.Flat("shock_path_global", dims=DIM_EPOCH)
                mean = pm.Flat("shock_mean_global")
                phi = pm.Flat("shock_persistence")
                future_g = ar1_continue(path[-1], mean, phi, sigma_g, z_g, n_new)
            else:
                future_g = sigma_g * z_g
            future = pt.ones((len(domains), 1)) * future_g[None, :]
            if "sigma_shock_domain" in post and own.any():
                sigma_d = pm.HalfFlat("sigma_shock_domain")
                z_d = pm.Normal("future_z_shock_domain", 0.0, 1.0, shape=(len(domains), n_new))
                future = future + sigma_d * z_d * own[:, None]
            if walk:  # the level walks on from the last fitted epoch
                future = rows[:, -1:] + pt.cumsum(future, axis=1)
            rows = pt.concatenate([rows, future], axis=1)
        return rows[:, :n_epochs]

    def _domain_rows(self, data: Observations, fitted_rows, global_row):
        """``(data's domains, fitted epochs)`` rows of a fitted (domain, epoch) effect
        (``fitted_rows``), a domain the fit did not see taking ``global_row``; and whether
        each of data's domains has an effect of its own (:meth:`shocked_domains`)."""
        import pytensor.tensor as pt

        fitted = pd.Index([str(d) for d in self.idata_["posterior"][DIM_DOMAIN].values])
        row = fitted.get_indexer([str(d) for d in data.domains])
        rows = fitted_rows[np.maximum(row, 0)]
        new = np.flatnonzero(row < 0)
        if len(new):
            rows = pt.set_subtensor(rows[new], pt.ones((len(new), 1)) * global_row[None, :])
        return rows, (row >= 0) & self.shocked_domains(self.data_)[np.maximum(row, 0)]

    def fitted_grid(self) -> EpochPatterns:
        """The epoch grid of the fitted data."""
        if self.data_ is None:
            raise RuntimeError("the fitted data are needed: load the fit with data=...")
        return self.epochs(self.data_)

    # ------------------------------------------------------------------ results
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        names = super().diagnostic_vars(idata)
        return [*names, "shock"] if "shock" in idata["posterior"].data_vars else names

    def log_rate_offset(self, post: xr.Dataset):
        """The log mean of the next epoch's ``exp(global shock)``: ``σ_global²/2`` (``iid``,
        ``random_walk``); ``ar1``, from the last fitted value ``x`` of the path (its mean
        ``m``): ``φ·x − m + σ_global²(1 − φ²)/2``. A domain with shocks of its own adds
        ``σ_domain²/2`` (:meth:`_add_derived`)."""
        variance = post["sigma_shock_global"] ** 2
        if "shock_persistence" not in post:
            return variance / 2
        last = post["shock_path_global"].isel({DIM_EPOCH: -1}, drop=True)
        return (
            ar1_next_log_mean(last, post["shock_persistence"], variance) - post["shock_mean_global"]
        )

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        import xarray as xr

        post = super()._add_derived(post, data)
        if "sigma_shock_domain" in post:
            own = xr.DataArray(self.shocked_domains(data).astype(float), dims=DIM_DOMAIN)
            extra = own * post["sigma_shock_domain"] ** 2 / 2
            post["domain_log_rate_mean"] = post["domain_log_rate_mean"] + extra
            per_page = extra.isel({DIM_DOMAIN: xr.DataArray(data.domain_codes, dims=DIM_PAGE)})
            post["rate"] = post["rate"] * np.exp(per_page.drop_vars(DIM_DOMAIN, errors="ignore"))
            post["rate"].attrs["units"] = "changes per hour (expected in a future epoch)"
        return post

    def page_loglik(self, max_draws: int | None = None) -> np.ndarray:
        """``(draws, pages)`` exact log-likelihood at each kept draw (its own shocks)."""
        from bayesrate.likelihood import loglik

        post, log_rate = self._loglik_draws(max_draws)
        groups_of = self._groups_of_draws(post)
        return np.stack([loglik(groups_of(s), r) for s, r in enumerate(log_rate)])

    def _groups_of_draws(self, post: xr.Dataset):
        """``s ->`` the fitted pages' sufficient statistics under draw ``s``'s effects."""
        log_e = self._pattern_log_exposures(post)
        return lambda s: self._shocked_groups(log_e[s])

    def _marginal_grid(self, post: xr.Dataset, groups_of) -> np.ndarray:
        """Per-page log-rate grids of :meth:`marginal_page_loglik` (the likelihood's support
        at the draws' mean effects)."""
        from bayesrate.checks.marginal import N_GRID
        from bayesrate.estimators.grid import likelihood_support_grids as page_grids

        return page_grids(self._shocked_groups(self._pattern_log_exposures(post).mean(axis=0)),
                          N_GRID)  # fmt: skip

    def marginal_page_loglik(
        self, post: xr.Dataset, data: Observations | None = None
    ) -> np.ndarray:
        """``(draws, pages)`` ``log ∫ p(y_p | λ, shocks_s) Normal(log λ | mu_domain, sigma_page)``:
        each page's own rate integrated out under draw ``s``'s shocks and population (the
        unit of leave-one-page-out, :mod:`bayesrate.checks.compare`)."""
        from bayesrate.checks.marginal import integrated_loglik_per_draw
        from bayesrate.draws import stack_draws
        from bayesrate.likelihood import loglik_grid

        self._loo_data(data, fitted_only=True)  # its terms are of the fitted data
        groups_of = self._groups_of_draws(post)
        return integrated_loglik_per_draw(
            lambda s, grid: loglik_grid(groups_of(s), grid),
            self._marginal_grid(post, groups_of),
            stack_draws(post["mu_domain"], DIM_DOMAIN)[:, self.data_.domain_codes],
            stack_draws(post["sigma_page"]),
            self.marginal_refine_to,
        )

    def _pattern_log_exposures(self, post: xr.Dataset) -> np.ndarray:
        """``(draws, patterns)`` each fitted pattern's log exposure under each draw's shocks."""
        from bayesrate.draws import stack_draws
        from bayesrate_research.models.epochs import log_exposure_draws

        shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
        return log_exposure_draws(self.fitted_grid(), shock)

    def _shocked_groups(self, log_e: np.ndarray, log_added: np.ndarray | None = None):
        """The fitted pages' sufficient statistics at pattern log exposures ``log_e`` (and
        pattern log integrated added rates ``log_added``, the mass-edit model's)."""
        from bayesrate.likelihood import CensoredGroups

        g = self.fitted_grid().groups
        busy = g.detected > 0
        quiet = g.trials - g.detected

        def unchanged(log_pattern):
            weights = quiet * np.exp(log_pattern)[g.pattern]
            return np.bincount(g.page, weights=weights, minlength=g.n_pages)

        return CensoredGroups(
            unchanged=unchanged(log_e),
            group_page=g.page[busy],
            group_log_exposure=log_e[g.pattern[busy]],
            group_count=g.detected[busy].astype(np.float64),
            unchanged_added=None if log_added is None else unchanged(log_added),
            group_log_added=None if log_added is None else log_added[g.pattern[busy]],
        )

    # ------------------------------------------------------------------ forecast predictive
    def forecast_groups(self, d, by_length):
        """Test intervals grouped by (page, hours per epoch) on the fitted epoch grid."""
        from bayesrate_research.forecast import epoch_groups

        return epoch_groups(d, self)

    def forecast_predictive(self, d, groups, keep, seed, walks: str = "summed"):
        """Fitted shocks for the fitted epochs, fresh draws of the shock distribution for
        every later one (:func:`bayesrate_research.forecast.shock_prediction`)."""
        from bayesrate_research.forecast import shock_prediction

        base, mean_rate = self._forecast_rates(keep)
        return shock_prediction(self, d, groups, base, keep, mean_rate, seed)


class DriftModel(ShockModel):
    """The shocks model with random-walk shocks: the shared level drifts from epoch to
    epoch, ``log_rate`` is each page's level in the last fitted epoch, and a forecast's
    uncertainty grows with the number of epochs ahead."""

    model_type: ClassVar[str] = "drift"
    default_model_config: ClassVar[dict[str, Any]] = {
        **ShockModel.default_model_config,
        "shock_process": "random_walk",
    }


class PersistentShockModel(ShockModel):
    """The shocks model with AR(1) global shocks: a busy or quiet spell persists for some
    epochs and fades (persistence ``shock_persistence``, learned), between independent
    shocks (``φ → 0``) and a random walk (``φ → 1``); a forecast starts from the last
    fitted shock and widens towards the stationary spread. Domain shocks stay
    independent."""

    model_type: ClassVar[str] = "shocks_ar1"
    default_model_config: ClassVar[dict[str, Any]] = {
        **ShockModel.default_model_config,
        "shock_process": "ar1",
    }
