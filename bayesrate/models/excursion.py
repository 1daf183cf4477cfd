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
the population parameters only: each page's level and path are integrated out together by
the Laplace approximation around their joint mode (:mod:`bayesrate.models.laplace`, the
reverting walk centred on a level ``Normal(mu_domain, sigma_page)``; its Hessian the
path's tridiagonal one bordered by the level, so a page stays ``O(epochs)``), its cells'
sufficient statistics as the dynamic model's.

After the fit each draw gets ``page_level`` drawn from the level's Laplace posterior
(``Normal(mode + skew correction, variance)``) and, given it, the current ``log_rate``
from the path's. Everything else is the dynamic model's with per-page walks: the
predictive (new pages draw a level and a stationary start), the Laplace check against
the grid (importance ratios of the joint draws of population and levels), and
leave-one-page-out with level and path integrated out (:meth:`ExcursionModel.marginal_page_loglik`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.constants import DIM_PAGE
from bayesrate.models.dynamic import (
    DynamicModel,
    bin_edges,
    draw_states,
    each_draw,
    normal_bins,
)

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations

#: the page-level variable (drawn after the fit from its Laplace posterior)
PAGE_LEVEL = "page_level"


def innovation_sd(sd, phi, module=np):
    """The AR(1) step sd that keeps a stationary sd ``sd`` at correlation ``phi`` per
    epoch, ``sd·√(1 − phi²)`` (numpy or ``pytensor.tensor``, ``module``)."""
    return sd * module.sqrt(1.0 - phi**2)


class ExcursionModel(DynamicModel):
    """Page log-rates that make stationary excursions (AR(1) over epochs) around each
    page's own level; levels and paths integrated by the Laplace approximation."""

    #: ``sigma_page`` mixes slowest: on ota-contrib (annual epochs, seed 0) bulk ESS 382 and
    #: R-hat 1.014 with 1,000 draws a chain, 801 and 1.005 with 2,000 (docs/models.md)
    sampler_defaults: ClassVar[dict[str, Any]] = {**DynamicModel.sampler_defaults, "draws": 2000}

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

    # ------------------------------------------------------------------ graph
    def _path_prior_graph(self, data: Observations):
        import pytensor.tensor as pt

        domain = data.domain_codes
        mu_domain, sigma_page = self._population(data)
        sd = self._walk_sd(data)[domain]
        phi = self._walk_phi()
        ones = pt.ones(data.n_pages)
        return (mu_domain[domain], sd, innovation_sd(sd, phi, pt), phi * ones,
                sigma_page * ones)  # fmt: skip

    def _level_prior(self, draws: dict[str, np.ndarray], i: int, data: Observations):
        """:meth:`_path_prior_graph` at draw ``i`` of ``draws``: ``(mu_domain, sd, step sd,
        phi, sigma_page)`` of each page, the Laplace kernel's arguments with the level
        integrated."""
        dom = data.domain_codes
        sd = draws["sigma_walk"][i, dom]
        phi = float(draws["walk_phi"][i])
        return draws["mu_domain"][i, dom], sd, innovation_sd(sd, phi), phi, draws["sigma_page"][i]

    def _path_prior(self, draws: dict[str, np.ndarray], i: int, data: Observations):
        """The path's prior given draw ``i``'s page levels (the grid's and the current
        log-rates')."""
        _, sd, step, phi, _ = self._level_prior(draws, i, data)
        return draws[PAGE_LEVEL][i], sd, step, phi

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
        """``page_level`` (:meth:`level_draws`), then the dynamic model's, then a new
        page's log-rate in an epoch, its level plus an excursion: ``page_log_rate_sd =
        √(sigma_page² + sigma_walk²)`` per domain (``new_domain_page_log_rate_sd`` with
        ``sigma_walk_global``)."""
        import xarray as xr

        from bayesrate.models.base import coord_labels
        from bayesrate.seeds import rng_from

        population = self._stacked(post, names=DynamicModel.filter_vars)
        rng = rng_from(f"{self.config_hash}-page-levels")
        levels = self.level_draws(population, data, rng)[0]
        post[PAGE_LEVEL] = xr.DataArray(
            levels.reshape(post.sizes["chain"], post.sizes["draw"], data.n_pages),
            dims=("chain", "draw", DIM_PAGE),
            coords={DIM_PAGE: coord_labels(data.pages.index)},
        )
        post = super()._add_derived(post, data)
        post["page_log_rate_sd"] = np.sqrt(post["sigma_page"] ** 2 + post["sigma_walk"] ** 2)
        post["new_domain_page_log_rate_sd"] = np.sqrt(
            post["sigma_page"] ** 2 + post["sigma_walk_global"] ** 2
        )
        return post

    def level_draws(
        self, draws: dict[str, np.ndarray], data: Observations, rng=None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each page's level at each draw of the population ``draws``: ``(draws, pages)``
        one draw (with ``rng``; else None), and the mean and sd of the Normal it comes
        from (:meth:`_level_posterior`)."""
        _, mean, sd = self._level_posterior(draws, data)
        drawn = None if rng is None else mean + sd * rng.standard_normal(mean.shape)
        return drawn, mean, sd

    def _level_posterior(
        self, draws: dict[str, np.ndarray], data: Observations
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(draws, pages)`` each page's ``log Z`` (level and path integrated, as in the
        fit) and the mean and sd of its level's Laplace posterior, from one kernel call per
        draw (:func:`~bayesrate.models.laplace.level_posterior`)."""
        from bayesrate.models.laplace import PathLayout, level_posterior

        layout = PathLayout.from_cells(self.cells(data))
        shape = (len(draws["sigma_page"]), data.n_pages)
        log_z, mean, sd = np.empty(shape), np.empty(shape), np.empty(shape)

        def one(i: int) -> None:
            mu, sd_walk, step, phi, sigma = self._level_prior(draws, i, data)
            log_z[i], mean[i], sd[i] = level_posterior(mu, sd_walk, step, layout, phi, sigma)

        each_draw(one, shape[0])
        return log_z, mean, sd

    # ------------------------------------------------------------------ results
    def marginal_page_loglik(
        self, post: xr.Dataset, data: Observations | None = None
    ) -> np.ndarray:
        """``(draws, pages)`` ``log p(y_p | population)``: each page's data with its level
        and path integrated out, as in the fit (the unit of leave-one-page-out; of the
        fitted data only)."""
        data = self._loo_data(data, fitted_only=True)
        draws = self._stacked(post, names=DynamicModel.filter_vars)
        return self._integrated(draws, data)

    def _integrated(self, draws: dict[str, np.ndarray], data: Observations) -> np.ndarray:
        """``(draws, pages)`` each page's ``log Z`` with its level integrated."""
        return self._level_posterior(draws, data)[0]

    def _laplace_loglik(self, draws: dict[str, np.ndarray], data: Observations) -> np.ndarray:
        """``(draws,)`` what the Laplace check divides the grid's likelihood given the
        levels by, so that the ratio is the importance ratio of the joint draws of
        population and levels: ``Σ_p log Z_p − log Normal(level; mu_domain, sigma_page)
        + log q(level)``, ``q`` the Normal the levels were drawn from."""
        from scipy.stats import norm

        levels = draws[PAGE_LEVEL]
        log_z, mean, sd = self._level_posterior(draws, data)
        mu = draws["mu_domain"][:, data.domain_codes]
        sigma = draws["sigma_page"][:, None]
        terms = log_z - norm.logpdf(levels, mu, sigma) + norm.logpdf(levels, mean, sd)
        return terms.sum(axis=1)
