"""Dynamic model: every page's log-rate drifts, a random walk over epochs, marginalised exactly.

Epochs are spans of ``epoch_days`` counted back from the data's last visit (the grid of
:mod:`bayesrate.models.epochs`). A page's rate is constant within an epoch and moves
between epochs by a random walk whose step size is pooled per domain::

    mu_global, sigma_domain, mu_domain[d], sigma_page      as the hierarchical model's
    log λ[p, first(p)] ~ Normal(mu_domain[domain(p)], sigma_page)   (first epoch with data)
    log λ[p, e + 1]    ~ Normal(log λ[p, e], sigma_walk[domain(p)])
                          (walk "reverting": Normal(m + phi·(log λ[p, e] − m), sigma_walk),
                          m = mu_domain[domain(p)], phi ~ Beta(walk_phi_alpha, walk_phi_beta))
    log sigma_walk[d]   ~ Normal(log sigma_walk_global, walk_domain_sd)
                          (centred for domains whose pages pin it, else not)
    sigma_walk_global   ~ Gamma(2, 2/walk_sd_scale)
    walk_domain_sd      ~ Gamma(2, 2/walk_domain_sd_scale)

An interval belongs to the epoch its closing visit falls in (the rate a page has when the
crawler sees it): its change probability is ``1 − exp(−λ[p, e]·τ)``. So each (page,
epoch) cell has exact sufficient statistics, its intervals grouped by length, and its
log-likelihood on a grid of log-rates is computed once, before sampling
(:func:`bayesrate.likelihood.loglik_grid`).

**Marginalised paths.** The log-rate lives on an evenly spaced grid covering
every rate the data can tell apart (from ``0.05`` changes over the longest page exposure
to ``10`` changes per median interval); the outer bins take the tails. The walk's
Normal steps and the initial Normal are integrated over the bins, and each page's path is
summed out exactly by the forward algorithm (a hidden Markov chain over epochs;
:mod:`bayesrate.models.hmm`, a numba kernel with its exact gradient), so the sampler sees
only the population parameters (``2·domains + 5``), never pages × epochs. A page's walk
starts at its first epoch with data; after its last it walks on unobserved.

The grid's resolution is chosen from the data (``grid_size: "auto"``,
:func:`grid_size_rule`): its spacing a fraction of the narrowest page posterior sd and of
the walk step, so that neither the pages' posteriors nor the walk's steps fall between
its nodes.

``log_rate`` in the posterior is each page's log-rate in the last fitted epoch (the one
ending at the last visit), drawn from its filtered distribution given each draw's
population parameters, uniformly within the drawn state's cell (:func:`cell_draws`): the
rate a scheduler needs now. A page whose data ended earlier has walked on since, so its
distribution is wider. The forecast of a later epoch walks on from there
(:meth:`DynamicModel.walk_forward`).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH, DIM_PAGE, HOURS_PER_DAY
from bayesrate.models.base import RateModel, check_config_numbers, coord_labels
from bayesrate.models.epochs import EpochCells, end_epochs, epoch_cells
from bayesrate.models.hierarchical import COVERED_BY, HierarchicalModel
from bayesrate.seeds import draw_states

if TYPE_CHECKING:
    import pymc as pm
    import xarray as xr

    from bayesrate.observations import Observations

#: changes over the longest exposure / per shortest interval at the grid's ends
GRID_LOW_CHANGES = 0.05
GRID_HIGH_CHANGES = 10.0
#: ``grid_size: "auto"`` (:func:`grid_size_rule`): the node spacing is at most this
#: multiple of the plug-in walk step (a coarser grid sticks: a step well below the
#: spacing rarely leaves its bin, so the fitted walk size is biased upwards)
GRID_WALK_SPACING = 2.0
#: and of the lower bound on the narrowest page posterior sd (:func:`narrowest_page_sd`)
GRID_SD_SPACING = 1.0
#: the fewest and the most nodes the rule gives
GRID_MIN_SIZE = 48
GRID_MAX_SIZE = 128
#: and the kernels' work per page and step it allows at the plug-in walk step: nodes ×
#: the nodes a step spans (as far as the kernels' band reaches, at most all), twice a
#: dense 48-node grid's. The work grows as nodes² where the walk is wide
GRID_WORK = 2 * 48**2
#: posterior draws filtered at once when ``log_rate`` is drawn
FILTER_CHUNK = 64
#: the walks of ``model_config["walk"]``
WALKS = ("random", "reverting")
#: posterior draws :meth:`DynamicModel.laplace_check` weighs after a fit with Laplace paths
LAPLACE_CHECK_DRAWS = 200
#: and the largest Pareto ``k̂`` of its importance weights that passes
LAPLACE_MAX_K = 0.7
PATH_INTEGRALS = ("grid", "laplace")
#: log walk sizes :func:`walk_information` tries
WALK_INFORMATION_GRID = 400
#: the observed variable: each page's detections, its paths integrated out
PAGE_DETECTIONS = "page_detections"
#: what the predictive of new pages needs beyond :attr:`DynamicModel.filter_vars`
POPULATION_VARS = ("mu_global", "sigma_domain", "sigma_walk_global", "walk_domain_sd",
                   "shock_global", "edit_log_rate_global")  # fmt: skip


def walk_information(
    cells: EpochCells, domain_codes: np.ndarray, n_domains: int
) -> tuple[float, np.ndarray]:
    """The walk size that best explains the pages' successive cells, and per domain the
    information those cells carry about its log walk size at that size.

    A crude plug-in, enough to choose a parameterisation: each cell's log-rate estimate
    ``log((changes + ½)/exposure)`` has variance ``v = 1/(changes + ½)``, so the
    difference between a page's successive estimates ``g`` epochs apart is Normal with
    variance ``g·σ² + v₁ + v₂``. ``σ̂`` maximises that likelihood over every page (a grid
    of log σ from 1e-3 to 10), and each difference carries ``2·(g·σ̂²/(g·σ̂² + v₁ + v₂))²`` of
    Fisher information about ``log σ`` (no more than 2: the cells pin the walk only
    where their noise is small against it).
    """
    estimate = cells.groups.naive_log_rate
    noise = 1.0 / (cells.groups.n_changes + 0.5)
    same = cells.cell_page[1:] == cells.cell_page[:-1]  # cells sorted by (page, epoch)
    gap = np.diff(cells.cell_epoch)[same]
    step = np.diff(estimate)[same]
    both = (noise[1:] + noise[:-1])[same]
    if not len(step):
        return math.nan, np.zeros(n_domains)
    log_sigma = np.linspace(math.log(1e-3), math.log(10.0), WALK_INFORMATION_GRID)
    variance = np.exp(2 * log_sigma)[:, None] * gap + both
    loglik = -0.5 * (np.log(variance) + step**2 / variance).sum(axis=1)
    sigma = float(np.exp(log_sigma[np.argmax(loglik)]))
    share = gap * sigma**2 / (gap * sigma**2 + both)
    domain = domain_codes[cells.cell_page[1:][same]]
    return sigma, np.bincount(domain, weights=2.0 * share**2, minlength=n_domains)


def column_span(
    n_pages: int, page: np.ndarray, column: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Groups' columns counted from the earliest (``col``), their number, and each page's
    first and last such column (``n_cols`` and −1 for a page without groups)."""
    col = column - column.min()
    n_cols = int(col.max()) + 1
    first = np.full(n_pages, n_cols, dtype=np.int64)
    np.minimum.at(first, page, col)
    last = np.full(n_pages, -1, dtype=np.int64)
    np.maximum.at(last, page, col)
    return col, n_cols, first, last


def log_rate_range(data: Observations) -> tuple[float, float]:
    """The grid's ends, log-rates per hour: ``0.05`` changes over the longest exposure and
    ``10`` changes per median interval (a higher rate changes at nearly every visit)."""
    stats = data.interval_stats
    ends = np.flatnonzero(~data.is_baseline)
    tau = data.time[ends] - data.time[ends - 1]
    lo = math.log(GRID_LOW_CHANGES / float(np.max(stats.exposure)))
    hi = math.log(GRID_HIGH_CHANGES / float(np.median(tau[tau > 0])))
    return lo, hi


def narrowest_page_sd(cells: EpochCells, sigma: float) -> float:
    """A lower bound on the posterior sd of any page's log-rate in any epoch, for a walk of
    step ``sigma`` (NaN when no page has successive cells: then each page's cells pooled).

    As in :func:`walk_information`, a cell carries ``changes + ½`` of information about
    its log-rate. A page's log-rate in one epoch learns at most what all its cells carry
    (the rate held still), and at most what its best cell carries plus ``1/σ²`` from each
    neighbouring epoch (a walk of step ``σ`` passes no more), so its sd is at least
    ``1/√min(Σ_c (n_c + ½), max_c (n_c + ½) + 2/σ²)``.
    """
    if not len(cells.cell_page):
        return math.inf
    info = cells.groups.n_changes + 0.5
    pooled = np.bincount(cells.cell_page, weights=info, minlength=cells.n_pages)
    best = np.zeros(cells.n_pages)
    np.maximum.at(best, cells.cell_page, info)
    if math.isfinite(sigma) and sigma > 0:
        pooled = np.minimum(pooled, best + 2.0 / sigma**2)
    return float(1.0 / math.sqrt(pooled.max()))


def grid_size_rule(cells: EpochCells, lo: float, hi: float) -> tuple[int, dict[str, float]]:
    """The number of grid nodes over ``[lo, hi]`` chosen from the cells (``grid_size:
    "auto"``), and what chose it.

    The spacing is at most ``GRID_WALK_SPACING`` times the plug-in walk step σ̂
    (:func:`walk_information`) and ``GRID_SD_SPACING`` times the lower bound on the
    narrowest page posterior sd (:func:`narrowest_page_sd`); the nodes lie between
    ``GRID_MIN_SIZE`` and ``GRID_MAX_SIZE``, and no more than keep the kernels' work per
    step at σ̂ within ``GRID_WORK``. A walk step well below the spacing rarely leaves its
    bin, so the grid's walk sticks and the fitted walk size is biased upwards; a
    posterior narrower than the spacing sits on a node or two. On a simulated world of
    600 pages over 8 epochs of 90 days at 0.3 changes a day (research/docs/models-log.md,
    "Grid resolution from the data"), the walk
    size maximising the 48-node likelihood was 0.058 for a true 0.03 (0.027 on 128
    nodes and on 800). Where the walk is wide against the spacing (σ̂ 0.95 per year on
    ota-contrib) a finer grid barely moves it, and each node costs a full row.
    """
    from bayesrate.models._hmm_kernels import BAND_TOLERANCE

    sigma, _ = walk_information(cells, np.zeros(cells.n_pages, dtype=np.int64), 1)
    sd = narrowest_page_sd(cells, sigma)
    walk = GRID_WALK_SPACING * sigma if math.isfinite(sigma) else math.inf
    spacing = min(GRID_SD_SPACING * sd, walk)
    wanted = math.ceil((hi - lo) / spacing) + 1 if math.isfinite(spacing) else GRID_MIN_SIZE
    sizes = np.arange(GRID_MIN_SIZE, GRID_MAX_SIZE + 1)
    band_sds = math.sqrt(-2 * math.log(BAND_TOLERANCE))  # a step's reach, in sds
    reach = 2 * band_sds * (sigma if math.isfinite(sigma) else 0.0) / (hi - lo)
    work = sizes * np.minimum(sizes, reach * (sizes - 1) + 1)
    affordable = int(sizes[work <= GRID_WORK].max(initial=GRID_MIN_SIZE))
    size = int(min(max(wanted, GRID_MIN_SIZE), affordable))
    rule = {"plugin_walk_sd": sigma, "narrowest_sd": sd, "wanted_nodes": wanted,
            "affordable_nodes": affordable, "spacing": (hi - lo) / (size - 1)}  # fmt: skip
    return size, rule


def cell_draws(grid: np.ndarray, state: np.ndarray, rng) -> np.ndarray:
    """Log-rates of grid states ``state`` (any shape), each drawn uniformly within its
    node's cell (between the midpoints to its neighbours; the outer cells as wide as the
    next ones).

    The walk and the initial Normal are integrated over the cells, so a state stands for
    its cell: a draw at the node would put a page's draws on one or two nodes wherever its
    posterior sd is below the spacing (90% intervals that collapse)."""
    grid = np.asarray(grid, dtype=np.float64)
    half = np.diff(grid) / 2
    lower = grid - np.concatenate([half[:1], half])
    upper = grid + np.concatenate([half, half[-1:]])
    return lower[state] + rng.random(np.shape(state)) * (upper[state] - lower[state])


def bin_edges(grid: np.ndarray) -> np.ndarray:
    """Inner edges between grid points (midpoints); the outer bins are open."""
    return (grid[1:] + grid[:-1]) / 2


def emission_table(cells: EpochCells, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pages, epochs, K)`` likelihood of each cell at each grid log-rate, divided by its
    maximum over the grid (1 where a page has no interval), and per page the sum of its
    cells' log maxima."""
    from bayesrate.likelihood import loglik_grid

    table = np.ones((cells.n_pages, cells.n_epochs, len(grid)))
    if not len(cells.cell_page):
        return table, np.zeros(cells.n_pages)
    ll = loglik_grid(cells.groups, grid)
    top = ll.max(axis=1)
    table[cells.cell_page, cells.cell_epoch] = np.exp(ll - top[:, None])
    return table, np.bincount(cells.cell_page, weights=top, minlength=cells.n_pages)


def normal_bins(mu, sigma, edges, module=np):
    """Probability of each bin of a Normal(``mu``, ``sigma``) (``mu`` broadcasts over a new
    last axis; the outer bins take the tails). numpy or ``pytensor.tensor`` (``module``)."""
    z = (edges - mu[..., None]) / sigma[..., None]
    erf = module.erf if module is not np else _erf
    cdf = 0.5 * (1 + erf(z / math.sqrt(2.0)))
    zeros = module.zeros_like(cdf[..., :1])
    ones = module.ones_like(cdf[..., :1])
    full = module.concatenate([zeros, cdf, ones], axis=-1)
    return full[..., 1:] - full[..., :-1]


def _erf(x):
    from scipy.special import erf

    return erf(x)


def transition_matrices(sigma, grid: np.ndarray, module=np, centre=None, phi=None):
    """``(..., K, K)`` walk transitions: row ``i`` is Normal(``grid[i]``, ``sigma``) over the
    bins, or with ``centre`` and ``phi`` (a mean-reverting walk) Normal(``centre + phi ·
    (grid[i] − centre)``, ``sigma``). ``sigma`` (and ``centre``) have any leading shape,
    ``phi`` is a scalar. A random walk on an evenly spaced grid is Toeplitz inside the
    outer columns (:func:`_toeplitz_walk`: ``2K − 1`` Normal CDFs per ``sigma``, not ``K²``)."""
    if phi is None and _evenly_spaced(grid):
        return _toeplitz_walk(sigma, grid, module)
    edges = bin_edges(grid)
    sigma = sigma[..., None] * module.ones_like(sigma[..., None] * grid)  # (..., K)
    mu = module.ones_like(sigma) * grid
    if phi is not None:
        mu = centre[..., None] + phi * (mu - centre[..., None])
    return normal_bins(mu, sigma, edges, module)


def _evenly_spaced(grid: np.ndarray) -> bool:
    steps = np.diff(np.asarray(grid, dtype=np.float64))
    return len(steps) > 0 and bool(np.allclose(steps, steps[0], rtol=1e-9, atol=0.0))


def _toeplitz_walk(sigma, grid: np.ndarray, module=np):
    """:func:`transition_matrices` of a random walk on an evenly spaced grid (step ``h``).

    Row ``i``'s CDF at inner edge ``j`` is ``Φ((j − i + ½)·h/σ)``, a function of the offset
    ``m = j − i`` alone: bin ``j`` of row ``i`` is ``q(m) − q(m − 1)`` inside, ``q(−i)`` in
    the lowest (open) bin and ``1 − q(K − 2 − i)`` in the highest, ``q(m) = Φ((m + ½)h/σ)``
    for ``m = −K … K − 2``. One gather from those ``4K − 2`` bin values fills every row."""
    k = len(grid)
    step = (float(grid[-1]) - float(grid[0])) / (k - 1)
    z = (np.arange(-k, k - 1) + 0.5) * (step / math.sqrt(2.0)) / sigma[..., None]
    erf = module.erf if module is not np else _erf
    q = 0.5 * (1 + erf(z))  # q[..., n] = q(n − K)
    inner = q[..., 1:] - q[..., :-1]  # bins of offset m = 1 − K … K − 2, at m + K − 1
    lowest = q[..., 1 : k + 1][..., ::-1]  # row i: q(−i)
    highest = 1 - q[..., k - 1 :][..., ::-1]  # row i: 1 − q(K − 2 − i)
    values = module.concatenate([inner, lowest, highest], axis=-1)
    return values[..., _toeplitz_index(k)]


def _toeplitz_index(k: int) -> np.ndarray:
    """``(K, K)`` position of each transition in :func:`_toeplitz_walk`'s values."""
    i, j = np.arange(k)[:, None], np.arange(k)[None, :]
    index = np.broadcast_to(j - i + k - 1, (k, k)).copy()
    index[:, 0] = 2 * k - 2 + np.arange(k)
    index[:, k - 1] = 3 * k - 2 + np.arange(k)
    return index


def importance_summary(log_ratio: np.ndarray, draws: dict[str, np.ndarray]) -> dict[str, Any]:
    """Importance weights ``exp(log_ratio)`` on ``draws`` (Pareto-smoothed): the spread of
    the log ratios, the weights' ``k̂`` and effective sample fraction, and how far they
    move the mean of each scalar parameter of ``draws``, in its posterior sds. Equal
    ratios (an approximation exact at every draw) are equal weights, ``k̂`` 0: PSIS
    cannot fit a tail to them."""
    from arviz_stats.base import array_stats

    if np.ptp(log_ratio) == 0:
        log_w, k = np.zeros(len(log_ratio)), 0.0
    else:
        log_w, k = array_stats.psislw(log_ratio - log_ratio.max())
    weights = np.exp(log_w - np.logaddexp.reduce(log_w))
    shifts = {
        name: float(abs(weights @ values - values.mean()) / values.std())
        for name, values in draws.items()
        if values.ndim == 1 and values.std() > 0
    }
    return {
        "log_ratio_sd": float(log_ratio.std()),
        "pareto_k": float(k),
        "ess_fraction": float(1.0 / np.sum(weights**2) / len(weights)),
        "mean_shift_sd": shifts,
    }


def each_draw(one, n: int) -> None:
    """``one(i)`` for every draw ``i < n``, on a thread per core after the first (which
    fills the model's caches); the grid kernels release the GIL."""
    if n:
        one(0)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(one, range(1, n)))


class DynamicModel(HierarchicalModel):
    """Page log-rates that drift over epochs (a random walk per page, step size pooled per
    domain), each page's path marginalised exactly on a log-rate grid."""

    model_type: ClassVar[str] = "dynamic"
    conditional_pages: ClassVar[bool] = False
    #: leave-one-page-out with each page's whole path summed out (:meth:`marginal_page_loglik`)
    marginal_loo: ClassVar[bool] = True
    #: what ``rate`` in the posterior means
    rate_units: ClassVar[str] = "changes per hour (in the last fitted epoch)"
    #: the population parameters a page's filtered distribution depends on (name, dims)
    filter_vars: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("mu_domain", DIM_DOMAIN),
        ("sigma_page",),
        ("sigma_walk", DIM_DOMAIN),
    )
    default_model_config: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.default_model_config,
        "epoch_days": 90.0,
        "walk_sd_scale": 0.3,
        "walk_domain_sd_scale": 0.5,
        "walk_centre_pages": 10,
        #: log-rate grid nodes: "auto" (:func:`grid_size_rule`, chosen from the data) or a
        #: number (≥ 3; a reference or a test)
        "grid_size": "auto",
        #: "random" (a random walk) or "reverting": each step reverts towards the domain
        #: mean, ``x' ~ Normal(mu_domain + phi·(x − mu_domain), sigma_walk)``, one ``phi``
        #: ~ Beta(walk_phi_alpha, walk_phi_beta) for all domains
        "walk": "random",
        "walk_phi_alpha": 8.0,
        "walk_phi_beta": 2.0,
        #: how the fit integrates each page's path out: "grid" (exactly, on the log-rate
        #: grid) or "laplace" (a Laplace approximation per page, :mod:`bayesrate.models.laplace`;
        #: the ``dynamic`` model's random or reverting walk). Everything after the fit (filtered
        #: rates, predictions, LOO) uses the grid.
        "path_integral": "grid",
        #: the Laplace approximation's order: 1 (Gaussian about each page's mode) or 2 (plus
        #: the moments of the cells' third and fourth derivatives)
        "laplace_order": 1,
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        check_config_numbers(
            self.model_config,
            positive=("epoch_days", "walk_sd_scale", "walk_domain_sd_scale", "walk_centre_pages"),
        )
        size = self.model_config["grid_size"]
        if size != "auto" and (not isinstance(size, int) or isinstance(size, bool) or size < 3):
            raise ValueError(f"grid_size must be 'auto' or an integer ≥ 3, got {size!r}")
        if self.model_config["walk"] not in WALKS:
            raise ValueError(f"walk must be one of {WALKS}, got {self.model_config['walk']!r}")
        check_config_numbers(self.model_config, positive=("walk_phi_alpha", "walk_phi_beta"))
        integral = self.model_config["path_integral"]
        if integral not in PATH_INTEGRALS:
            raise ValueError(f"path_integral must be one of {PATH_INTEGRALS}, got {integral!r}")
        if self.model_config["laplace_order"] not in (1, 2):
            raise ValueError(
                f"laplace_order must be 1 or 2, got {self.model_config['laplace_order']!r}"
            )
        own_paths = type(self)._paths is DynamicModel._paths
        if integral == "laplace" and not own_paths:
            raise ValueError(
                f"path_integral 'laplace' takes the walks of the 'dynamic' model, not "
                f"{self.model_type!r}'s"
            )
        if integral == "laplace" and self.reverting and self.model_config["laplace_order"] != 1:
            raise ValueError("laplace_order 2 takes the random walk only")

    @property
    def reverting(self) -> bool:
        """Whether the walk reverts towards the domain means (``walk: "reverting"``)."""
        return self.model_config["walk"] == "reverting"

    @property
    def epoch_hours(self) -> float:
        return float(self.model_config["epoch_days"]) * HOURS_PER_DAY

    def cells(self, data: Observations) -> EpochCells:
        """``data``'s intervals per (page, epoch of the closing visit), anchored at its
        last visit."""
        cache = getattr(self, "_cells_cache", None)
        if cache is None or cache[0] is not data:
            ends = np.flatnonzero(~data.is_baseline)
            cells = epoch_cells(
                data.time[ends - 1],
                data.time[ends],
                data.page_of_visit[ends],
                data.changed[ends],
                data.n_pages,
                float(data.time.max()),
                self.epoch_hours,
            )
            lo, hi = log_rate_range(data)
            size = self.model_config["grid_size"]
            if size == "auto":
                size, self._grid_rule = grid_size_rule(cells, lo, hi)
            else:
                self._grid_rule = {"spacing": (hi - lo) / (size - 1)}
            cache = self._cells_cache = (data, cells, np.linspace(lo, hi, size))
        return cache[1]

    def grid(self, data: Observations) -> np.ndarray:
        """The log-rate grid (per hour) of ``data``."""
        self.cells(data)
        return self._cells_cache[2]

    def emission(self, data: Observations) -> tuple[np.ndarray, np.ndarray]:
        """:func:`emission_table` of ``data``'s cells on its grid (computed once per data)."""
        self.cells(data)
        if len(self._cells_cache) == 3:
            _, cells, grid = self._cells_cache
            self._cells_cache = (data, cells, grid, emission_table(cells, grid))
        return self._cells_cache[3]

    def coords(self, data: Observations) -> dict[str, Any]:
        from bayesrate.clock import to_timestamp

        coords = super().coords(data)
        cells = self.cells(data)
        k = cells.first_epoch + np.arange(cells.n_epochs)
        starts = cells.anchor + k * cells.epoch_hours
        coords[DIM_EPOCH] = np.array([to_timestamp(h).isoformat() for h in starts])
        return coords

    # ------------------------------------------------------------------ graph
    def _population(self, data: Observations):
        """``mu_domain`` (domain; centred or not by the hierarchical model's rule) and
        ``sigma_page`` of the current model."""
        import pymc as pm

        _, dom_c = self.choose_parameterisation(data)
        notes = self._build_notes["parameterisation"]
        del notes["pages_centred"], notes["pages_noncentred"]
        notes["pages"] = "no page variables (paths integrated out)"
        mu_domain = self._domain_means(data, dom_c)
        sigma_page = pm.Gamma(
            "sigma_page", alpha=2.0, beta=2.0 / self.model_config["page_sd_scale"]
        )
        return mu_domain, sigma_page

    def _walk_sd(self, data: Observations):
        """``sigma_walk`` (domain) of the current model: ``log sigma_walk[d] ~
        Normal(log sigma_walk_global, walk_domain_sd)``, centred for domains whose pages
        pin their own walk size, non-centred for the others.

        A domain is centred when it has at least ``walk_centre_pages`` pages and its
        cells' information about its log walk size (:func:`walk_information`) times the
        prior variance ``walk_domain_sd_scale²`` exceeds ``centre_threshold`` (the page
        rule's criterion). Non-centred, the global size and the domains' offsets mixed at
        bulk ESS 216 of 2,000 draws on a 4-domain, 240-page world whose walks the cells
        pin; centred, the walk sizes of tldr-pages' big domains, whose yearly cells hold a
        change or two and barely tell the walk from their noise, made a funnel with
        ``walk_domain_sd`` (134 divergences at target-accept 0.8, 7 non-centred)."""
        import pymc as pm
        import pytensor.tensor as pt

        cfg = self.model_config
        n_domains = len(data.domains)
        sigma_global = pm.Gamma("sigma_walk_global", alpha=2.0, beta=2.0 / cfg["walk_sd_scale"])
        if n_domains < 2:
            return pm.Deterministic(
                "sigma_walk", sigma_global * pt.ones(n_domains), dims=DIM_DOMAIN
            )
        spread = pm.Gamma("walk_domain_sd", alpha=2.0, beta=2.0 / cfg["walk_domain_sd_scale"])
        pages = np.bincount(data.domain_codes, minlength=n_domains)
        sigma_hat, information = walk_information(self.cells(data), data.domain_codes, n_domains)
        score = information * cfg["walk_domain_sd_scale"] ** 2
        centred = (pages >= cfg["walk_centre_pages"]) & (score > cfg["centre_threshold"])
        log_global = pt.log(sigma_global)
        log_sd = pt.zeros(n_domains)
        if centred.any():
            own = pm.Normal("log_sigma_walk_centred", log_global, spread, shape=int(centred.sum()))
            log_sd = pt.set_subtensor(log_sd[np.flatnonzero(centred)], own)
        if (~centred).any():
            z_walk = pm.Normal("z_walk", 0.0, 1.0, shape=int((~centred).sum()))
            log_sd = pt.set_subtensor(
                log_sd[np.flatnonzero(~centred)], log_global + spread * z_walk
            )
        self._build_notes["walk_parameterisation"] = {
            "criterion": f"at least {cfg['walk_centre_pages']:g} pages and information "
            f"about log sigma_walk x walk_domain_sd_scale^2 > {cfg['centre_threshold']:g}",
            "plugin_walk_sd": sigma_hat if math.isfinite(sigma_hat) else None,
            "largest_score": float(score.max()),
            "domains_centred": int(centred.sum()),
            "domains_noncentred": int((~centred).sum()),
        }
        return pm.Deterministic("sigma_walk", pt.exp(log_sd), dims=DIM_DOMAIN)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass with paths of its own (:meth:`_paths`, a scalar: the research
        package's shocks) adds them as a potential: no observed variable, so no pointwise
        log-likelihood or posterior predictive draws (:attr:`observed_groups` False)."""
        super().__init_subclass__(**kwargs)
        if cls._paths is not DynamicModel._paths and "observed_groups" not in vars(cls):
            cls.observed_groups = False

    def _build(self, data: Observations) -> pm.Model:
        import pymc as pm
        import pytensor.tensor as pt

        cells = self.cells(data)
        grid = self.grid(data)
        domain = data.domain_codes
        with pm.Model(coords=self.coords(data)) as model:
            if self.model_config["path_integral"] == "laplace":
                from bayesrate.models.laplace import PathLayout, laplace_page_logps

                m, s, w, phi, level_sd = self._path_prior_graph(data)
                layout = PathLayout.from_cells(cells)
                order = self.model_config["laplace_order"]
                params = [x for x in (m, s, w, phi, level_sd) if x is not None]

                def laplace_terms(*params):
                    rho = params[3] if phi is not None else None
                    level = params[4] if level_sd is not None else None
                    return laplace_page_logps(*params[:3], layout, order, rho, level)

                self._page_detections(data, params, laplace_terms, layout)
                return self._noted(model, cells, grid)
            mu_domain, sigma_page = self._population(data)
            sigma_walk = self._walk_sd(data)
            phi = self._walk_phi()
            ones = pt.ones(data.n_pages)
            init = normal_bins(mu_domain[domain], sigma_page * ones, bin_edges(grid), pt)
            transitions = transition_matrices(sigma_walk, grid, pt, mu_domain, phi)
            if type(self)._paths is not DynamicModel._paths:
                pm.Potential("page_paths", self._paths(data, init, transitions))
            else:
                self._page_detections(data, [init, transitions], self._page_paths(data))
        return self._noted(model, cells, grid)

    def _page_detections(self, data: Observations, params, terms, layout=None):
        """The observed :data:`PAGE_DETECTIONS` (dim ``page``) in the current model: each
        page's paths integrated out, ``terms(*params)`` its log-likelihood.

        Its value is each page's number of detections; its log-probability is not that
        count's but the likelihood of the page's whole record, its cells' sufficient
        statistics (intervals per epoch grouped by length: a ragged structure, not a
        tensor an observed variable can hold), of which the count is a summary. So the
        log-probability is defined at the observed counts only (any other value is an
        error, as ``quiet``'s of :mod:`bayesrate.models.likelihood`), and draws replicate
        the count: a path per page drawn given its data and the draw's parameters
        (:meth:`replicate_page_detections`), then a Binomial per group of the page's
        intervals. ``pm.compute_log_likelihood`` gives one term per page, the unit of
        leave-one-page-out (:meth:`marginal_page_loglik`'s terms at the fit's draws, but
        for the ``dynamic`` model's Laplace paths: those are on the grid), and their sum
        is the model's likelihood.
        """
        import pymc as pm
        import pytensor.tensor as pt
        from pymc.distributions.dist_math import check_parameters

        observed = self.replicated_groups(data)[4]

        def logp(value, *params):
            return check_parameters(
                terms(*params),
                pt.all(pt.eq(value, observed)),
                msg=f"{PAGE_DETECTIONS}: the log-probability is that of the fitted records",
            )

        def random(*params, rng=None, size=None):
            values = [np.asarray(p) for p in params]
            return self.replicate_page_detections(data, values, rng, layout)

        inputs = ["(p,k)", "(d,k,k)"] if layout is None else ["(p)"] * len(params)
        signature = ",".join(inputs) + "->(p)"
        return pm.CustomDist(
            PAGE_DETECTIONS,
            *params,
            logp=logp,
            random=random,
            signature=signature,
            dtype="int64",
            observed=observed,
            dims=DIM_PAGE,
        )

    def _page_paths(self, data: Observations):
        """Each page's log Σ over paths on the grid (a function of the initial
        distributions and the domains' transitions; PyTensor)."""
        from bayesrate.models.hmm import page_paths_logp

        cells = self.cells(data)
        emission, log_scale = self.emission(data)
        first, last = cells.first_column, cells.last_column

        def grid_terms(init, transitions):
            logp = page_paths_logp(init, transitions, emission, data.domain_codes, first, last)
            return logp + log_scale

        return grid_terms

    def replicated_groups(self, data: Observations):
        """``data``'s intervals grouped by (page, column of the closing visit's epoch,
        length): each group's page, column, length (hours) and number of intervals, and
        each page's number of detections (:data:`PAGE_DETECTIONS`' observed value)."""
        cache = getattr(self, "_replicated_cache", None)
        if cache is None or cache[0] is not data:
            from bayesrate.predictive import page_column_length_groups

            cells = self.cells(data)
            ends = np.flatnonzero(~data.is_baseline)
            page = data.page_of_visit[ends].astype(np.int64)
            tau = data.time[ends] - data.time[ends - 1]
            column = end_epochs(data.time[ends], cells.anchor, cells.epoch_hours)
            column = column - cells.first_epoch
            group_page, group_column, length, n = page_column_length_groups(page, column, tau)
            changed = data.changed[ends].astype(np.int64)
            counts = np.bincount(page, weights=changed, minlength=data.n_pages)
            cache = self._replicated_cache = (
                data, group_page, group_column, length, n, counts.astype(np.int64)
            )  # fmt: skip
        return cache[1:]

    def replicate_page_detections(
        self, data: Observations, params: list[np.ndarray], rng, layout=None
    ) -> np.ndarray:
        """One replicate of each page's detections (:data:`PAGE_DETECTIONS`) at one draw
        of the parameters of the fitted paths (``params``, numpy: the grid's initial
        distributions and transitions, or with ``layout`` the Laplace paths' per-page
        ``m, s, w[, rho[, level sd]]``, :meth:`_path_prior_graph`).

        A path per page is drawn on the grid from its posterior given the page's data
        (forward filtering, backward sampling; the Laplace paths' page level, where they
        have one, first from its Laplace posterior, as :meth:`level_draws`), and each
        group of its intervals (:meth:`replicated_groups`) ends in ``Binomial(n, 1 −
        exp(−λτ))`` detections, ``λ`` the path's rate in the group's column (the grid
        node's, the rate the emission table holds)."""
        from bayesrate.models.hmm import sample_paths

        cells = self.cells(data)
        grid = self.grid(data)
        if layout is None:
            init, transitions = params
            index = self._walk_index(data)
        else:
            init, transitions, index = self._laplace_chain(params, grid, layout, rng)
        states = sample_paths(
            init,
            transitions,
            self.emission(data)[0],
            index,
            cells.first_column,
            cells.last_column,
            rng,
        )
        page, column, length, n, _ = self.replicated_groups(data)
        probability = -np.expm1(-np.exp(grid[states[page, column]]) * length)
        detections = rng.binomial(n, probability)
        return np.bincount(page, weights=detections, minlength=data.n_pages).astype(np.int64)

    def _laplace_chain(self, params: list[np.ndarray], grid: np.ndarray, layout, rng):
        """The grid chain of the Laplace paths' per-page ``m, s, w[, rho[, level sd]]``:
        initial distributions, the distinct transition matrices and which each page
        takes (its level drawn from the level's Laplace posterior where it has one)."""
        from bayesrate.models.laplace import level_posterior

        m, s, w = (np.asarray(p, dtype=np.float64) for p in params[:3])
        rho = np.asarray(params[3], dtype=np.float64) if len(params) > 3 else np.ones_like(m)
        centre = m
        if len(params) > 4:
            level_sd = np.asarray(params[4], dtype=np.float64)
            _, mean, sd = level_posterior(m, s, w, layout, rho, level_sd)
            centre = mean + sd * rng.standard_normal(len(m))
        init = normal_bins(centre, s, bin_edges(grid))
        phi = float(rho[0]) if len(rho) else 1.0
        if phi == 1.0:
            rows, index = np.unique(w, return_inverse=True)
            transitions = transition_matrices(rows, grid, np)
        else:
            rows, index = np.unique(np.stack([centre, w], axis=1), axis=0, return_inverse=True)
            transitions = transition_matrices(rows[:, 1], grid, np, rows[:, 0], phi)
        return init, transitions, index.reshape(-1)

    def _walk_phi(self):
        """``walk_phi`` of a reverting walk (in the current model), else None."""
        import pymc as pm

        if not self.reverting:
            return None
        cfg = self.model_config
        return pm.Beta("walk_phi", cfg["walk_phi_alpha"], cfg["walk_phi_beta"])

    def _path_prior_graph(self, data: Observations):
        """Each page's path prior for the Laplace paths, in the current model: the
        walk's mean ``m``, first-column sd ``s``, step sd ``w`` (per page), its
        reversion (per page, None for the random walk) and the sd of a level of the page's
        own about ``m`` that the walk is centred on (per page; None: the walk is centred
        on ``m``)."""
        import pytensor.tensor as pt

        domain = data.domain_codes
        mu_domain, sigma_page = self._population(data)
        sigma_walk = self._walk_sd(data)
        phi = self._walk_phi()
        ones = pt.ones(data.n_pages)
        return (mu_domain[domain], sigma_page * ones, sigma_walk[domain],
                None if phi is None else phi * ones, None)  # fmt: skip

    def _path_prior(self, draws: dict[str, np.ndarray], i: int, data: Observations):
        """:meth:`_path_prior_graph` at draw ``i`` of ``draws``: ``(m, s, w, rho)``
        per page (``rho`` 1 for the random walk)."""
        dom = data.domain_codes
        return (draws["mu_domain"][i, dom], np.full(data.n_pages, draws["sigma_page"][i]),
                draws["sigma_walk"][i, dom], self._reversion(draws, i))  # fmt: skip

    def _walk_index(self, data: Observations) -> np.ndarray:
        """Which of :meth:`_chain`'s transition matrices each page of ``data`` walks by
        (its domain's)."""
        return data.domain_codes

    def _noted(self, model: pm.Model, cells: EpochCells, grid: np.ndarray) -> pm.Model:
        self._build_notes["epochs"] = {
            "epoch_days": self.model_config["epoch_days"],
            "epochs": cells.n_epochs,
            "cells": len(cells.cell_page),
            "grid": [float(grid[0]), float(grid[-1]), len(grid)],
            "grid_rule": {
                k: round(float(v), 6) if math.isfinite(v) else None
                for k, v in self._grid_rule.items()
            },
            "path_integral": self.model_config["path_integral"],
        }
        return model

    def _paths(self, data: Observations, init, transitions):
        """Σ over pages of log Σ over paths (the model's likelihood), in the current model."""
        from bayesrate.models.hmm import paths_logp

        cells = self.cells(data)
        emission, log_scale = self.emission(data)
        first, last = cells.first_column, cells.last_column
        return paths_logp(init, transitions, emission, data.domain_codes, first, last) + float(
            log_scale.sum()
        )

    # ------------------------------------------------------------------ posterior
    def filtered(self, draws: dict[str, np.ndarray], data: Observations) -> np.ndarray:
        """``(draws, pages, K)`` each page's distribution over the grid in the last fitted
        epoch, given the population parameters of each draw (``mu_domain`` (draws, domains),
        ``sigma_page`` (draws,), ``sigma_walk`` (draws, domains))."""
        from bayesrate.models.hmm import filter_last

        cells = self.cells(data)
        out = np.empty((len(draws["sigma_page"]), data.n_pages, len(self.grid(data))))

        def one(i: int) -> None:
            out[i] = filter_last(
                *self._chain(draws, i, data),
                self._draw_emission(draws, i, data)[0],
                self._walk_index(data),
                cells.first_column,
                cells.last_column,
                cells.n_epochs - 1,
            )

        each_draw(one, len(out))
        return out

    def _chain(
        self, draws: dict[str, np.ndarray], i: int, data: Observations
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``i``'s initial distributions ``(pages, K)`` and walk transitions
        ``(domains, K, K)`` on ``data``'s grid."""
        grid = self.grid(data)
        init = normal_bins(
            draws["mu_domain"][i, data.domain_codes],
            np.full(data.n_pages, draws["sigma_page"][i]),
            bin_edges(grid),
        )
        return init, self._transitions(draws, i, draws["mu_domain"][i], draws["sigma_walk"][i])

    def _transitions(self, draws, i: int, centre: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """Draw ``i``'s ``(domains, K, K)`` walk steps of domains with means ``centre`` and
        walk sizes ``sigma`` (the means matter for a reverting walk only)."""
        phi = float(draws["walk_phi"][i]) if self.reverting else None
        return transition_matrices(sigma, self.grid(self.data_), np, centre, phi)

    def _stacked(
        self, post: xr.Dataset, extra: tuple[str, ...] = (), names=None
    ) -> dict[str, np.ndarray]:
        """:attr:`filter_vars` (or ``names``, of the same form) of ``post`` and those of
        ``extra`` it has, chains and draws stacked."""
        from bayesrate.draws import stack_draws

        out = {name: stack_draws(post[name], *dims) for name, *dims in names or self.filter_vars}
        for name in (n for n in (*extra, "walk_phi") if n in post):
            dims = [d for d in post[name].dims if d not in ("chain", "draw")]
            out[name] = stack_draws(post[name], *dims)
        return out

    def _draw_emission(
        self, draws: dict[str, np.ndarray], i: int, data: Observations
    ) -> tuple[np.ndarray, np.ndarray]:
        """The emission table under draw ``i`` and its per-page log scale (here the same
        for every draw)."""
        return self.emission(data)

    def walk_forward(
        self, state: np.ndarray, sigma_walk: np.ndarray, rng, centre=None, phi=None
    ) -> np.ndarray:
        """One epoch's step of grid states ``state`` (draws, pages) with step sizes
        ``sigma_walk`` (draws, pages): a draw of the next epoch's states. A reverting walk
        needs each page's domain mean ``centre`` (draws, pages) and ``phi`` (draws, 1)."""
        grid = self.grid(self.data_)
        mean = grid[state]
        if self.reverting:
            mean = centre + phi * (mean - centre)
        return draw_states(normal_bins(mean, sigma_walk, bin_edges(grid)), rng)

    #: what the priors' drift block holds per epoch (:func:`bayesrate.export.drift_blocks`)
    drift_source: ClassVar[str] = "sigma_walk per epoch"

    def diffusion_per_epoch(self, walk: np.ndarray, posterior: xr.Dataset) -> np.ndarray:
        """The random-walk step sd per epoch that moves a page's log-rate as the model does
        over short times, from walk sizes ``walk`` ``(draws, ...)`` of ``posterior``: the
        walk size itself."""
        return walk

    def forward_walk(self, draws: dict[str, np.ndarray]):
        """What :meth:`walk_forward` takes for the fitted pages at ``draws``
        (:attr:`filter_vars`): step sizes and means ``(draws, pages)``, ``phi``
        ``(draws, 1)`` (None for the random walk)."""
        dom = self._fitted_data().domain_codes
        phi = draws["walk_phi"][:, None] if self.reverting else None
        return draws["sigma_walk"][:, dom], draws["mu_domain"][:, dom], phi

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        import xarray as xr

        from bayesrate.seeds import rng_from

        shape = (post.sizes["chain"], post.sizes["draw"])
        flat = self._stacked(post)
        grid = self.grid(data)
        rng = rng_from(f"{self.config_hash}-filtered-draws")
        if self.model_config["path_integral"] == "laplace":
            log_rate = self.laplace_log_rates(flat, data, rng)
        else:
            state = np.empty((len(flat["sigma_page"]), data.n_pages), dtype=np.int64)
            for lo in range(0, len(state), FILTER_CHUNK):
                part = {k: v[lo : lo + FILTER_CHUNK] for k, v in flat.items()}
                state[lo : lo + FILTER_CHUNK] = draw_states(self.filtered(part, data), rng)
            log_rate = cell_draws(grid, state, rng)
        post["log_rate"] = xr.DataArray(
            log_rate.reshape(*shape, data.n_pages),
            dims=("chain", "draw", DIM_PAGE),
            coords={DIM_PAGE: coord_labels(data.pages.index)},
        )
        post = super()._add_derived(post, data)
        post["rate"].attrs["units"] = self.rate_units
        return post

    def laplace_log_rates(self, draws: dict[str, np.ndarray], data: Observations, rng):
        """``(draws, pages)`` one draw of each page's log-rate in the last fitted epoch per
        draw of the population (:attr:`filter_vars`), from the Laplace approximation of its
        path: ``Normal(x̂_last − z_last/2, (H⁻¹)_last + k·σ_walk²)`` (the mean corrected
        for the cells' skew to first order, :mod:`bayesrate.models.laplace`; the correction
        capped at one sd of ``(H⁻¹)_last``, where that expansion has failed: pages without
        changes and large walks), clipped to the grid's range like the grid's own draws,
        ``k`` the epochs after the page's
        last cell (``Normal(mu_domain, sigma_page)`` for a page without intervals). A
        reverting walk moves the mean ``k`` steps towards ``mu_domain`` (``φᵏ``) and adds
        ``σ_walk²·(1 − φ²ᵏ)/(1 − φ²)`` to ``φ²ᵏ`` times the variance. The
        ``log_rate`` of a fit with ``path_integral: "laplace"``."""
        from bayesrate.models.laplace import PathLayout, corrected_mean, laplace_logp_grad

        cells = self.cells(data)
        grid = self.grid(data)
        layout = PathLayout.from_cells(cells)
        has = layout.page_start[1:] > layout.page_start[:-1]
        last_slot = np.maximum(layout.page_start[1:] - 1, 0)
        ahead = np.where(has, cells.n_epochs - 1 - cells.last_column, 0)
        noise = rng.standard_normal((len(draws["sigma_page"]), data.n_pages))
        out = np.empty_like(noise)

        def one(i: int) -> None:
            m, s, w, phi = self._path_prior(draws, i, data)
            result = laplace_logp_grad(m, s, w, layout, order=1, rho=phi)
            correction, variance = result.last_moments
            mean = np.where(has, corrected_mean(result.modes[last_slot], correction, variance), m)
            var = np.where(has, variance, s * s)
            if phi == 1.0:
                var = var + ahead * w * w
            else:
                decay = phi**ahead
                mean = m + decay * (mean - m)
                var = decay**2 * var + w * w * (1.0 - decay**2) / (1.0 - phi * phi)
            out[i] = np.clip(mean + np.sqrt(var) * noise[i], grid[0], grid[-1])

        each_draw(one, len(out))
        return out

    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        """The free variables and ``sigma_walk``/``mu_domain``: ``log_rate`` is drawn exactly
        from each draw's filtered distribution (on the grid, then within the drawn cell),
        so its mixing is the population parameters'."""
        names = [rv.name for rv in self.model.free_RVs if rv.name not in COVERED_BY]
        names += ["mu_domain", "sigma_walk"]
        return [n for n in names if n in idata["posterior"].data_vars]

    # ------------------------------------------------------------------ checks
    def marginal_page_loglik(
        self, post: xr.Dataset, data: Observations | None = None
    ) -> np.ndarray:
        """``(draws, pages)`` ``log p(y_p | θ_s)``: each page's data with its whole path
        summed out, given the population parameters of each draw of ``post`` (the unit of
        leave-one-page-out, :mod:`bayesrate.checks.compare`). On the model's grid, as
        fitted: the same per-interval Bernoulli likelihood (no Binomial constants) as the
        other models' terms; of the fitted data only (``data``, if given, must be them)."""
        data = self._loo_data(data, fitted_only=True)
        return self._page_loglik_on_grid(self._stacked(post), data)

    def _page_loglik_on_grid(self, draws: dict[str, np.ndarray], data: Observations):
        from bayesrate.models.hmm import page_log_likelihoods

        cells = self.cells(data)
        out = np.empty((len(draws["sigma_page"]), data.n_pages))

        def one(i: int) -> None:
            emission, log_scale = self._draw_emission(draws, i, data)
            out[i] = log_scale + page_log_likelihoods(
                *self._chain(draws, i, data),
                emission,
                self._walk_index(data),
                cells.first_column,
                cells.last_column,
            )

        each_draw(one, len(out))
        return out

    def laplace_check(
        self, post: xr.Dataset, data: Observations, max_draws: int = LAPLACE_CHECK_DRAWS
    ) -> dict[str, Any]:
        """How far the Laplace-integrated likelihood the fit sampled is from the grid's:
        on up to ``max_draws`` evenly spaced draws, the log ratios ``r = Σ_p (log p_grid −
        log p_Laplace)(y_p | θ)``, their Pareto-smoothed importance weights' ``k̂`` (≤ 0.7:
        the draws stand for the grid posterior) and effective sample fraction, and how far
        the weights move the means of the scalar population parameters, in posterior sds."""
        draws = self._spaced_draws(post, max_draws)
        grid = self._page_loglik_on_grid(draws, data).sum(axis=1)
        ratio = grid - self._laplace_loglik(draws, data)
        return {"draws": len(ratio), **importance_summary(ratio, draws)}

    def _spaced_draws(self, post: xr.Dataset, max_draws: int) -> dict[str, np.ndarray]:
        """Up to ``max_draws`` evenly spaced draws of :attr:`filter_vars` and the scalar
        population parameters (:data:`POPULATION_VARS`) of ``post``, chains stacked."""
        flat = self._stacked(post, extra=POPULATION_VARS)
        n = len(flat["sigma_page"])
        pick = np.unique(np.linspace(0, n - 1, min(int(max_draws), n)).round().astype(int))
        return {k: v[pick] for k, v in flat.items()}

    def _laplace_loglik(self, draws: dict[str, np.ndarray], data: Observations) -> np.ndarray:
        """``(draws,)`` the whole log's likelihood, paths integrated out by the Laplace
        approximation, at each draw of the population (:attr:`filter_vars`)."""
        from bayesrate.models.laplace import PathLayout, laplace_logp_grad

        layout = PathLayout.from_cells(self.cells(data))
        order = self.model_config["laplace_order"]
        return np.array([
            laplace_logp_grad(*(prior := self._path_prior(draws, i, data))[:3], layout, order,
                              rho=prior[3]).logp
            for i in range(len(draws["sigma_page"]))
        ])  # fmt: skip

    def _reversion(self, draws: dict[str, np.ndarray], i: int) -> float:
        """Draw ``i``'s ``walk_phi`` (1: the random walk)."""
        return float(draws["walk_phi"][i]) if self.reverting else 1.0

    def _fit_checks(self, idata: xr.DataTree, data: Observations) -> list[str]:
        """With Laplace paths: :meth:`laplace_check` on the fit, a failure when its ``k̂``
        exceeds ``LAPLACE_MAX_K``."""
        if self.model_config["path_integral"] != "laplace":
            return []
        check = self.laplace_check(idata["posterior"].to_dataset(), data)
        self._build_notes["laplace_check"] = check
        if check["pareto_k"] > LAPLACE_MAX_K:
            return [
                f"Laplace paths: Pareto k {check['pareto_k']:.2f} > {LAPLACE_MAX_K} against "
                "the grid's likelihood (fit with path_integral 'grid')"
            ]
        return []

    def _fitted_data(self) -> Observations:
        self._require_fit()
        if self.data_ is None:
            raise RuntimeError("the fitted data are needed: load the fit with data=...")
        return self.data_

    def _prediction_patterns(self, observations: Observations):
        """The visit patterns split by the epoch of the closing visit (on the fitted grid),
        so that each group has one rate and one hour of its detecting visits."""
        from bayesrate.models.groups import refined_patterns

        cells = self.cells(self._fitted_data())
        ends = np.flatnonzero(~observations.is_baseline)
        epoch = end_epochs(observations.time[ends], cells.anchor, cells.epoch_hours)
        return refined_patterns(observations, self.timezone, epoch)

    def predictive_patterns(self, observations: Observations):
        return self._prediction_patterns(observations)

    def _prediction(self, observations: Observations, patterns, out) -> xr.DataTree:
        # the base layout (not the shocks model's, whose patterns are epoch overlaps)
        return RateModel._prediction(self, observations, patterns, out)

    def predict(
        self,
        observations: Observations,
        *,
        n_draws: int | None = 500,
        seed: int | str = "predict",
        page_rates: str = "population",
    ) -> xr.DataTree:
        """Predictive detections of pages on their own visit times; the result is laid
        out as :meth:`RateModel.predict`'s (its groups split by the epoch of the closing
        visit).

        Paths are drawn exactly, per posterior draw: ``"posterior"`` (the fitted pages)
        draws each page's whole path from its posterior given its data and the draw's
        population parameters (forward filtering, backward sampling); ``"population"``
        treats the pages as new: a first state from the domain's population in the epoch
        of a page's first interval (a new domain's mean from ``Normal(mu_global,
        sigma_domain)``, its walk size from the walk-size population), then the walk. A
        group's intervals end in a detected change with probability ``1 − exp(−λτ)``,
        ``λ`` the rate of its closing epoch.
        """
        import xarray as xr

        from bayesrate.constants import DIM_GROUP
        from bayesrate.models.base import DETECTION_PROBABILITY, PAGE_RATES
        from bayesrate.models.likelihood import DETECTIONS
        from bayesrate.seeds import rng_from

        if page_rates not in PAGE_RATES:
            raise ValueError(f"page_rates must be one of {PAGE_RATES}, got {page_rates!r}")
        data = self._fitted_data()
        self.check_data(observations)
        if page_rates == "posterior" and observations.fingerprint != data.fingerprint:
            raise ValueError("page_rates='posterior' needs the fitted observations")
        post = self.thinned_posterior(n_draws)
        draws = self._stacked(post, POPULATION_VARS if page_rates == "population" else ())
        cells = self.cells(data)
        patterns = self._prediction_patterns(observations)
        page = patterns.group_page
        column = end_epochs(patterns.pattern_end, cells.anchor, cells.epoch_hours)
        column = column[patterns.group_pattern] - cells.first_epoch
        length = patterns.pattern_length[patterns.group_pattern]
        rng = rng_from(seed if isinstance(seed, str) else int(seed))
        n = len(draws["sigma_page"])
        detections = np.empty((n, patterns.n_groups), dtype=np.int64)
        probability = np.empty((n, patterns.n_groups))
        for i in range(n):
            if page_rates == "posterior":
                log_lam = self._posterior_log_rates(draws, i, page, column, rng)
            else:
                log_lam = self._new_page_log_rates(draws, i, observations, page, column, rng)
            probability[i] = -np.expm1(-np.exp(log_lam) * length)
            detections[i] = rng.binomial(patterns.group_n, probability[i])
        dims = ("chain", "draw", DIM_GROUP)
        coords = {"chain": [0], "draw": np.arange(n), DIM_GROUP: np.arange(patterns.n_groups)}
        predictive = xr.Dataset(
            {
                DETECTIONS: (dims, detections[None]),
                DETECTION_PROBABILITY: (dims, probability[None]),
            },
            coords=coords,
        )
        observed = xr.Dataset({DETECTIONS: ((DIM_GROUP,), patterns.group_changed)})
        out = xr.DataTree(
            children={
                "posterior_predictive": xr.DataTree(predictive),
                "observed_data": xr.DataTree(observed),
            }
        )
        return self._prediction(observations, patterns, out)

    def _posterior_log_rates(self, draws, i: int, page, column, rng) -> np.ndarray:
        """Log-rates of groups (``page``, ``column``) of the fitted pages: each page's path
        drawn from its posterior under draw ``i`` (forward filtering, backward sampling)."""
        from bayesrate.models.hmm import sample_paths

        data = self.data_
        cells = self.cells(data)
        states = sample_paths(
            *self._chain(draws, i, data),
            self._draw_emission(draws, i, data)[0],
            self._walk_index(data),
            cells.first_column,
            cells.last_column,
            rng,
        )
        domain = data.domain_codes[page]
        own = self.grid(data)[states[page, column]] + self._group_shift(draws, i, domain, column)
        return self._with_added(own, draws, i, domain, column)

    def _new_page_log_rates(self, draws, i: int, observations, page, column, rng) -> np.ndarray:
        """Log-rates of groups (``page``, ``column``) of ``observations``' pages as new
        pages under draw ``i`` (see :meth:`predict`)."""
        n_fitted, n_new, code = self._domain_codes(observations)
        mu, walk = draws["mu_domain"][i], draws["sigma_walk"][i]
        if n_new:
            new_mu = rng.normal(draws["mu_global"][i], draws["sigma_domain"][i], n_new)
            log_walk = np.full(n_new, math.log(draws["sigma_walk_global"][i]))
            if "walk_domain_sd" in draws:
                log_walk += draws["walk_domain_sd"][i] * rng.standard_normal(n_new)
            mu, walk = np.concatenate([mu, new_mu]), np.concatenate([walk, np.exp(log_walk)])
        grid = self.grid(self.data_)
        col, n_cols, first, last = column_span(observations.n_pages, page, column)
        start, steps, index = self._new_page_walk(draws, i, mu, walk, code, rng)
        states = np.full((observations.n_pages, n_cols), -1, dtype=np.int64)
        for c in range(n_cols):
            begins = first == c
            states[begins, c] = start[begins]
            walks = np.flatnonzero((first < c) & (last >= c))
            states[walks, c] = draw_states(steps[index[walks], states[walks, c - 1]], rng)
        domain = np.minimum(code[page], n_fitted)
        own = grid[states[page, col]] + self._group_shift(draws, i, domain, column)
        return self._with_added(own, draws, i, domain, column)

    def _domain_codes(self, observations: Observations) -> tuple[int, int, np.ndarray]:
        """The number of fitted domains, the number of ``observations``' domains that are
        new, and each page's domain code (fitted domains first, then the new ones sorted);
        kept for the last ``observations`` (:meth:`predict` asks once per draw)."""
        cache = getattr(self, "_domain_codes_cache", None)
        if cache is None or cache[0] is not observations or cache[1] is not self.idata_:
            fitted = [str(d) for d in self.idata_["posterior"][DIM_DOMAIN].values]
            labels = coord_labels(observations.pages["domain"]).astype(str)
            new = sorted(set(labels) - set(fitted))
            code = pd.Index([*fitted, *new]).get_indexer(labels)
            cache = self._domain_codes_cache = (observations, self.idata_, len(fitted),
                                                len(new), code)  # fmt: skip
        return cache[2:]

    def _new_page_walk(self, draws, i: int, mu, walk, code, rng):
        """New pages' walk under draw ``i``, their domains (code ``code``) with means
        ``mu`` and walk sizes ``walk``: each page's first state (a grid index), the walk's
        transition matrices and which of them each page takes."""
        sigma_page = np.full(len(code), draws["sigma_page"][i])
        edges = bin_edges(self.grid(self.data_))
        start = draw_states(normal_bins(mu[code], sigma_page, edges), rng)
        return start, self._transitions(draws, i, mu, walk), code

    def _group_shift(self, draws, i: int, domain: np.ndarray, column: np.ndarray):
        """The shared log-rate shift of groups in domain code ``domain`` (the number of
        fitted domains for a new one) and fitted column ``column`` (none here)."""
        return 0.0

    def _with_added(self, own, draws, i: int, domain: np.ndarray, column: np.ndarray):
        """Log-rates of groups whose own log-rates are ``own``, with draw ``i``'s added
        rates of their domains (code ``domain``, the number of fitted domains for a new
        one) and fitted columns (none here)."""
        return own

    def page_loglik(self, max_draws: int | None = None) -> np.ndarray:
        """``(draws, pages)`` each page's log-likelihood with its path integrated out, at
        each kept posterior draw: :meth:`marginal_page_loglik` (a page's likelihood
        depends on its whole path, never on one rate)."""
        self._require_fit()
        return self.marginal_page_loglik(self.thinned_posterior(max_draws))

    # ------------------------------------------------------------------ forecast predictive
    def forecast_groups(self, d, by_length):
        """Test intervals grouped by (page, column of the closing visit's epoch on the
        fitted grid, length): an interval has the rate of its closing epoch."""
        from bayesrate.predictive import column_groups

        cells = self.cells(self.data_)
        column = end_epochs(d.interval_end, cells.anchor, cells.epoch_hours) - cells.first_epoch
        return column_groups(d, column)

    def forecast_predictive(self, d, groups, keep, seed, walks: str = "summed"):
        """The page walks after the last fitted epoch summed out on the grid
        (``walks="summed"``: :func:`bayesrate.models.walk_forecast.walk_forecast`) or one
        sampled path per draw (``"sampled"``:
        :func:`bayesrate.predictive.sampled_walk_prediction`)."""
        from bayesrate.draws import stack_draws

        mean_rate = stack_draws(self.idata_["posterior"]["rate"], DIM_PAGE).mean(axis=0)
        if walks == "summed":
            from bayesrate.models.walk_forecast import walk_forecast

            return walk_forecast(self, d, groups, keep, mean_rate, seed)
        from bayesrate.predictive import sampled_walk_prediction

        return sampled_walk_prediction(self, d, groups, keep, mean_rate, seed)

    def future_log_effects(
        self, keep: np.ndarray, n_ahead: int, seed: int | str
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(draws, domains, n_ahead + 1)`` log-rate offsets (0) and log added rates (−inf)
        of the last fitted epoch and the ``n_ahead`` after it, for the kept draws: none
        here; a model with shared effects per epoch overrides this."""
        shape = (len(keep), len(self.data_.domains), n_ahead + 1)
        return np.zeros(shape), np.full(shape, -np.inf)
