"""Excursion model: each page has its own level, and its log-rate wanders around it.

The dynamic model's walk drifts without a home: a page's rate, once moved, stays moved.
Here each page keeps a level of its own (the hierarchical model's page log-rate) and its
log-rate makes excursions around it, a stationary AR(1) over epochs::

    mu_global, sigma_domain, mu_domain[d], sigma_page      as the hierarchical model's
    page_level[p]      ~ Normal(mu_domain[domain(p)], sigma_page)
    log λ[p, first(p)] ~ Normal(page_level[p], sigma_walk[domain(p)])   (first epoch with data)
    log λ[p, e + 1]    ~ Normal(page_level[p] + phi·(log λ[p, e] − page_level[p]),
                                sigma_walk[domain(p)]·√(1 − phi²))
    phi                ~ Beta(walk_phi_alpha, walk_phi_beta)   (one for all domains)
    sigma_walk[d]      the excursions' stationary sd, pooled per domain as the dynamic
                       model's walk sizes

So ``sigma_walk`` is how far a page's rate strays from its level in any epoch, and ``phi``
how long an excursion lasts (its correlation from one epoch to the next). The sampler sees
the population parameters and the page levels; each page's path is integrated out by the
Laplace approximation around its mode (:mod:`bayesrate.models.laplace`, the reverting walk
centred on the page's level), its cells' sufficient statistics as the dynamic model's.

Everything after the fit is the dynamic model's with per-page walks: the current
``log_rate`` from the Laplace paths, the predictive (new pages draw a level and a
stationary start), the Laplace check against the grid, and leave-one-page-out with the
page's level integrated out too (:meth:`ExcursionModel.marginal_page_loglik`, the paths by
the Laplace approximation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_PAGE
from bayesrate.models.dynamic import (
    DynamicModel,
    _each_draw,
    bin_edges,
    draw_states,
    normal_bins,
)

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations

#: the page-level variable
PAGE_LEVEL = "page_level"
#: the smallest posterior sd of a page's level the leave-one-page-out quadrature assumes
MIN_LEVEL_SCALE = 0.02
#: and its nodes span this many of the level's posterior sds either side of its mean
LEVEL_SPAN_SDS = 8.0


def innovation_sd(sd, phi, module=np):
    """The AR(1) step sd that keeps a stationary sd ``sd`` at correlation ``phi`` per
    epoch, ``sd·√(1 − phi²)`` (numpy or ``pytensor.tensor``, ``module``)."""
    return sd * module.sqrt(1.0 - phi**2)


class ExcursionModel(DynamicModel):
    """Page log-rates that make stationary excursions (AR(1) over epochs) around each
    page's own level; paths integrated by the Laplace approximation."""

    #: ``sigma_page`` mixes slowly: on ota-contrib (annual epochs) R-hat 1.036 with 300
    #: warm-up draws, 1.013 with 1,000, and 1.006 (bulk ESS 728) with 2,000 draws a chain
    #: after them (docs/models.md)
    sampler_defaults: ClassVar[dict[str, Any]] = {
        **DynamicModel.sampler_defaults,
        "tune": 1000,
        "draws": 2000,
    }

    model_type: ClassVar[str] = "excursion"
    filter_vars: ClassVar[tuple[tuple[str, ...], ...]] = (
        *DynamicModel.filter_vars,
        (PAGE_LEVEL, DIM_PAGE),
    )
    default_model_config: ClassVar[dict[str, Any]] = {
        **DynamicModel.default_model_config,
        "walk": "reverting",
        "path_integral": "laplace",
        #: prior scale of the excursions' stationary sd (``sigma_walk_global``)
        "walk_sd_scale": 1.0,
        #: Beta(2, 2): excursions from one epoch long to many
        "walk_phi_alpha": 2.0,
        "walk_phi_beta": 2.0,
        #: trapezoid nodes over each page's level in leave-one-page-out
        "level_nodes": 25,
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        cfg = self.model_config
        if cfg["walk"] != "reverting":
            raise ValueError("the excursion model's walk reverts to each page's level: "
                             f"walk must be 'reverting', got {cfg['walk']!r}")  # fmt: skip
        if cfg["path_integral"] != "laplace":
            raise ValueError("the excursion model integrates its paths by the Laplace "
                             f"approximation: path_integral must be 'laplace', got "
                             f"{cfg['path_integral']!r}")  # fmt: skip
        nodes = cfg["level_nodes"]
        if not isinstance(nodes, int) or nodes < 3:
            raise ValueError(f"level_nodes must be an integer ≥ 3, got {nodes!r}")

    def choose_parameterisation(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """The hierarchical rule's choice, but under ``"auto"`` every page level
        non-centred: the rule weighs what a page's data say about a constant rate, and a
        level is pinned far less (on ota-contrib, annual epochs, ``sigma_page`` mixed at
        R-hat 1.109 with the rule's 758 of 877 levels centred, 1.036 with none;
        docs/models.md)."""
        page_c, dom_c = super().choose_parameterisation(data)
        if self.model_config["parameterisation"] == "auto":
            page_c = np.zeros_like(page_c)
            notes = self._build_notes["parameterisation"]
            notes["pages_centred"], notes["pages_noncentred"] = 0, len(page_c)
            notes["rule"] = "auto (page levels all non-centred)"
        return page_c, dom_c

    # ------------------------------------------------------------------ graph
    def _path_prior_graph(self, data: Observations):
        import pytensor.tensor as pt

        domain = data.domain_codes
        level = self._page_log_rates(data, name=PAGE_LEVEL)
        sd = self._walk_sd(data)[domain]
        phi = self._walk_phi()
        return level, sd, innovation_sd(sd, phi, pt), phi * pt.ones(data.n_pages)

    def _path_prior(self, draws: dict[str, np.ndarray], i: int, data: Observations):
        sd = draws["sigma_walk"][i, data.domain_codes]
        phi = float(draws["walk_phi"][i])
        return draws[PAGE_LEVEL][i], sd, innovation_sd(sd, phi), phi

    # ------------------------------------------------------------------ grid side
    def _chain(self, draws, i: int, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``i``'s initial distributions and walk transitions, one per page
        (``(pages, K, K)``: each reverts to its own level)."""
        level, sd, step, _ = self._path_prior(draws, i, data)
        init = normal_bins(level, sd, bin_edges(self.grid(data)))
        return init, self._transitions(draws, i, level, step)

    def _walk_index(self, data: Observations) -> np.ndarray:
        return np.arange(data.n_pages)

    def _new_page_walk(self, draws, i: int, mu, walk, code, rng):
        """New pages draw a level ``Normal(mu, sigma_page)``, start from the stationary
        ``Normal(level, sd)`` and revert to their level."""
        level = mu[code] + draws["sigma_page"][i] * rng.standard_normal(len(code))
        sd = walk[code]
        phi = float(draws["walk_phi"][i])
        start = draw_states(normal_bins(level, sd, bin_edges(self.grid(self.data_))), rng)
        steps = self._transitions(draws, i, level, innovation_sd(sd, phi))
        return start, steps, np.arange(len(code))

    def forward_walk(self, draws: dict[str, np.ndarray]):
        """Steps of ``sigma_walk·√(1 − phi²)`` towards each page's level."""
        sd = draws["sigma_walk"][:, self._fitted_data().domain_codes]
        phi = draws["walk_phi"][:, None]
        return innovation_sd(sd, phi), draws[PAGE_LEVEL], phi

    drift_source: ClassVar[str] = (
        "the excursions' short-horizon diffusion, sigma_walk * sqrt(-2 ln walk_phi) per epoch"
    )

    def diffusion_per_epoch(self, walk: np.ndarray, posterior: xr.Dataset) -> np.ndarray:
        """An AR(1) of stationary sd ``s`` and correlation ``φ`` per epoch is, over times
        short against its memory, a random walk of ``s·√(−2 ln φ)`` per epoch (the
        Ornstein–Uhlenbeck process through its epochs: stationary variance ``σ²/(2κ)``,
        ``κ = −ln φ``). A scheduler revisits within days, so that is the drift it needs;
        over many epochs the excursions' spread stays ``s``."""
        from bayesrate.draws import stack_draws

        phi = stack_draws(posterior["walk_phi"])
        return walk * np.sqrt(-2.0 * np.log(phi)).reshape(-1, *[1] * (walk.ndim - 1))

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        """Besides the dynamic model's: a new page's log-rate in an epoch is its level
        plus an excursion, ``page_log_rate_sd = √(sigma_page² + sigma_walk²)`` per domain
        (``new_domain_page_log_rate_sd`` with ``sigma_walk_global``)."""
        post = super()._add_derived(post, data)
        post["page_log_rate_sd"] = np.sqrt(post["sigma_page"] ** 2 + post["sigma_walk"] ** 2)
        post["new_domain_page_log_rate_sd"] = np.sqrt(
            post["sigma_page"] ** 2 + post["sigma_walk_global"] ** 2
        )
        return post

    # ------------------------------------------------------------------ results
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        """The dynamic model's and the page levels."""
        return [*super().diagnostic_vars(idata), PAGE_LEVEL]

    def marginal_page_loglik(self, post: xr.Dataset) -> np.ndarray:
        """``(draws, pages)`` ``log p(y_p | population)``: each page's data with its path
        and its level integrated out (the unit of leave-one-page-out).

        Given its level, a page's path is integrated by the Laplace approximation, as in
        the fit (:mod:`bayesrate.models.laplace`). The level is integrated by the
        trapezoid rule on ``level_nodes`` evenly spaced nodes over the page's posterior
        (the mean ± ``LEVEL_SPAN_SDS`` sds of its ``page_level`` draws), each weighted by
        ``Normal(mu_domain, sigma_page)``. For a smooth integrand the rule converges
        geometrically (a Normal of sd ``σ`` at spacing ``h``: relative error ``≈
        2·exp(−2π²σ²/h²)``, 1e-19 at the default spacing of 2/3 sd, 3e-4 if the posterior
        is half as wide as its draws say)."""
        from scipy.special import logsumexp
        from scipy.stats import norm

        from bayesrate.draws import stack_draws
        from bayesrate.models.laplace import PathLayout, laplace_logp_grad

        data = self._fitted_data()
        draws = self._stacked(post)
        layout = PathLayout.from_cells(self.cells(data))
        nodes, log_step = self.level_nodes(stack_draws(post[PAGE_LEVEL], DIM_PAGE))
        dom = data.domain_codes
        out = np.empty((len(draws["sigma_page"]), data.n_pages))

        def one(i: int) -> None:
            _, sd, step, phi = self._path_prior(draws, i, data)
            mu, sigma = draws["mu_domain"][i, dom], draws["sigma_page"][i]
            terms = np.empty((len(nodes), data.n_pages))
            for q, node in enumerate(nodes):
                paths = laplace_logp_grad(node, sd, step, layout, order=1, rho=phi).per_page
                terms[q] = log_step + norm.logpdf(node, mu, sigma) + paths
            out[i] = logsumexp(terms, axis=0)

        _each_draw(one, len(out))
        return out

    def level_nodes(self, level_draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The trapezoid nodes ``(nodes, pages)`` over each page's level, from its
        ``page_level`` draws ``(draws, pages)``, and the log of each page's spacing (the
        end nodes' half weights are left out: their integrand is ``e^{−32}`` of the
        peak's for a Normal posterior)."""
        mean = level_draws.mean(axis=0)
        sd = np.maximum(level_draws.std(axis=0), MIN_LEVEL_SCALE)
        z = np.linspace(-LEVEL_SPAN_SDS, LEVEL_SPAN_SDS, self.model_config["level_nodes"])
        return mean + sd * z[:, None], np.log(sd * (z[1] - z[0]))
