"""The research dynamic models, dynamic_shocks and dynamic_edits (the dynamic model's page
walks with shared epoch effects and added rates on top), moved from tests/models/test_dynamic.py.

Oracles: every path enumerated (the forward algorithm's sum and the filtered
distribution), a per-interval Bernoulli sum for the cells' sufficient statistics, scipy's
Normal CDF for the bins; a simulated drifting world for recovery (slow).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from bayesrate_research.models.dynamic_edits import DynamicEditModel
from bayesrate_research.models.dynamic_shocks import DynamicShockModel
from scipy.stats import norm

from bayesrate import simulate as sim
from bayesrate.constants import DIM_DOMAIN
from bayesrate.models import get_model
from bayesrate.models.dynamic import (
    DynamicModel,
    end_epochs,
)
from tests.helpers import seed_of
from tests.recovery import assert_mixed

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401

L = 90 * 24.0
END = 500_000.0


def drift_world(
    seed: str, n_pages: int, n_domains: int, n_epochs: int, walk, start_sd=1.0, per_day=0.2
):
    """Daily visits over ``n_epochs`` epochs ending at END. A page's log-rate starts at
    ``Normal(mu_d, start_sd)`` (``mu_d`` around ``per_day`` changes a day) and walks by
    ``Normal(0, walk[domain])`` per epoch; an interval has the rate of the epoch its
    closing visit falls in (the rate switches at the last visit before each epoch
    boundary)."""
    rng = sim.rng_from(seed)
    dom = np.arange(n_pages) % n_domains
    mu_d = rng.normal(math.log(per_day / 24), 0.5, n_domains)
    path = np.empty((n_pages, n_epochs))
    path[:, 0] = rng.normal(mu_d[dom], start_sd)
    for e in range(1, n_epochs):
        path[:, e] = path[:, e - 1] + np.asarray(walk)[dom] * rng.standard_normal(n_pages)
    return crawl_paths(path, dom, rng), path, dom


def crawl_paths(path: np.ndarray, dom: np.ndarray, rng):
    """Daily visits of pages whose log-rates are ``path`` (pages, epochs) over the epochs
    ending at END, domains ``dom``: an interval has the rate of the epoch its closing visit
    falls in (the rate switches at the last visit before each epoch boundary)."""
    n_pages, n_epochs = path.shape
    bounds = END - L * np.arange(n_epochs, -1, -1)
    procs, visits = [], []
    for p in range(n_pages):
        v = np.arange(bounds[0] + rng.uniform(0, 24), END + 1e-9, 24.0)
        v = np.append(v[v < END], END)
        switch = v[np.searchsorted(v, bounds[1:-1], side="right") - 1]
        edges = np.concatenate([[v[0] - 1], switch, [END + 1]])
        procs.append(sim.PiecewiseConstant(edges, np.exp(path[p])))
        visits.append(v)
    data = sim.simulate_pages(procs, visits, domains=[f"d{k}" for k in dom], rng=rng)
    return data.observations


@pytest.fixture(scope="module")
def tiny():
    return tiny_world()


def tiny_world(domains=("a", "b", "a")):
    """3 pages, 2 domains, 3 epochs; page 2 starts in the second epoch, page 1 stops early."""
    rng = sim.rng_from("dyn-tiny")
    times = []
    for p in range(3):
        v = np.arange(END - 3 * L + 5 + 7 * p, END, 40.0 + 11 * p)
        if p == 1:
            v = v[v < END - 1.5 * L]
        if p == 2:
            v = v[v > END - 1.8 * L]
        times.append(np.append(v, END) if p != 1 else v)
    data = sim.simulate_pages(
        [1 / 90, 1 / 200, 1 / 60], times, domains=list(domains), rng=rng
    ).observations
    return data


def _paths_by_enumeration(
    model,
    data,
    mu_domain,
    sigma_page,
    sigma_walk,
    shock=None,
    posteriors=None,
    phi=None,
    added=None,
):
    """Per page: log Σ over all grid paths of prior × per-interval Bernoulli likelihood, and
    the posterior of the last column's state (scipy's Normal CDF for every bin); ``shock``
    (domains, columns) is added to each interval's log-rate, ``exp(added)`` (domains,
    columns) to its rate. ``posteriors``, a list, gets
    per page every path (states of columns −3, −2, −1) and its posterior probability;
    ``phi``: the walk reverts towards ``mu_domain`` by that factor per step."""
    grid = model.grid(data)
    edges = np.concatenate([[-np.inf], (grid[1:] + grid[:-1]) / 2, [np.inf]])
    anchor = float(data.time.max())
    totals, last = [], []
    for p in range(data.n_pages):
        sl = slice(data.offsets[p], data.offsets[p + 1])
        t, c = data.time[sl], data.changed[sl]
        epoch = np.ceil((t[1:] - anchor) / L).astype(int) - 1
        cols = np.arange(-3, 0)
        first = int(epoch.min())
        d = data.domain_codes[p]
        init = np.diff(norm.cdf(edges, mu_domain[d], sigma_page))
        mean = grid if phi is None else mu_domain[d] + phi * (grid - mu_domain[d])
        step = np.array([np.diff(norm.cdf(edges, m, sigma_walk[d])) for m in mean])
        weights, states = [], []
        for path in itertools.product(range(len(grid)), repeat=len(cols)):
            k0 = list(cols).index(first)
            prior = init[path[k0]]
            for a in range(k0 + 1, len(cols)):
                prior *= step[path[a - 1], path[a]]
            if any(path[a] != path[k0] for a in range(k0)):
                continue  # columns before the start carry no state: one path each
            log_lam = grid[np.array(path)[epoch - cols[0]]]
            if shock is not None:
                log_lam = log_lam + shock[d, epoch - cols[0]]
            lam = np.exp(log_lam)
            if added is not None:
                lam = lam + np.exp(added[d, epoch - cols[0]])
            lam = lam * np.diff(t)
            ll = np.sum(np.where(c[1:] > 0, np.log(-np.expm1(-lam)), -lam))
            weights.append(prior * math.exp(ll))
            states.append(path[-1])
        weights = np.array(weights)
        if posteriors is not None:
            paths = itertools.product(range(len(grid)), repeat=len(cols))
            paths = [q for q in paths if all(q[a] == q[k0] for a in range(k0))]
            posteriors.append((np.array(paths), weights / weights.sum()))
        totals.append(math.log(weights.sum()))
        last.append(np.bincount(states, weights=weights, minlength=len(grid)) / weights.sum())
    return np.array(totals), np.array(last)


def _random_points(pm_model, names, seed: str, n: int = 3):
    """The model's potential and the variables ``names`` at ``n`` random points around its
    initial point."""
    outputs = pm_model.replace_rvs_by_values(
        [pm_model.potentials[0], *(pm_model[name] for name in names)]
    )
    values = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(seed_of(seed))
    base = pm_model.initial_point()
    for _ in range(n):
        yield values({k: v + rng.normal(0, 0.6, np.shape(v)) for k, v in base.items()})


@pytest.mark.parametrize("own_shocks", [True, False], ids=["domain-shocks", "global-shocks"])
def test_shocked_logp_and_filter_equal_path_enumeration(tiny, own_shocks):
    """dynamic_shocks: each interval's log-rate is its path's state plus its domain's shock
    in the closing epoch (both domains have their own shocks, or both follow the global
    ones: one row of effects in the kernel)."""
    config = {"grid_size": 9, "domain_shock_min_pages": 1, "domain_shocks": own_shocks}
    model = DynamicShockModel(model_config=config)
    rows, code = model.effect_rows(tiny)
    assert len(rows) == (2 if own_shocks else 1) and len(code) == 2
    names = ["mu_domain", "sigma_page", "sigma_walk", "shock"]
    for potential, *params in _random_points(model.build_model(tiny), names, "dyn-shock-enumerate"):
        draw = dict(zip(names, params, strict=True))
        assert np.abs(draw["shock"]).max() > 0.2  # the shocks matter
        spread = np.ptp(draw["shock"][0] - draw["shock"][1])
        assert spread > 0.1 if own_shocks else spread == 0  # and differ by domain, or not
        total, last = _paths_by_enumeration(model, tiny, *params)
        assert float(potential) == pytest.approx(total.sum(), rel=1e-9)
        filtered = model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)[0]
        np.testing.assert_allclose(filtered, last, atol=1e-10)
    if not own_shocks:  # a domain's own shocks where the model has none: refused
        draw["shock"] = draw["shock"] + np.array([[0.0], [0.3]])
        with pytest.raises(ValueError, match="do not match the domains"):
            model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)


def test_edits_logp_and_filter_equal_path_enumeration(tiny):
    """dynamic_edits: each interval's rate is its path's state times its domain's shock,
    plus its domain's edit rate in the closing epoch."""
    model = DynamicEditModel(model_config={"grid_size": 9, "domain_shock_min_pages": 1})
    names = ["mu_domain", "sigma_page", "sigma_walk", "shock", "edit_log_rate"]
    points = _random_points(model.build_model(tiny), names, "dyn-edits-enumerate")
    for potential, *params in points:
        draw = dict(zip(names, params, strict=True))
        total, last = _paths_by_enumeration(model, tiny, *params[:4], added=params[4])
        assert float(potential) == pytest.approx(total.sum(), rel=1e-9)
        without, _ = _paths_by_enumeration(model, tiny, *params[:4])
        assert abs(total.sum() - without.sum()) > 0.05  # the edits matter here
        filtered = model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)[0]
        np.testing.assert_allclose(filtered, last, atol=1e-10)


def _tables_by_numpy(data, cells, grid, shift, added):
    """Each cell's emission row and log scale at the rates ``exp(grid + shift[g]) +
    exp(added[g])`` of its group ``g`` (domain, epoch), by :func:`loglik_grid` with the
    added rate as its integrated added exposure (independent of the kernel)."""
    from bayesrate.likelihood import CensoredGroups, loglik_grid

    groups = cells.groups
    g = cell_groups(data, cells)
    added_rate = np.exp(added[g])
    with_added = CensoredGroups(
        unchanged=groups.unchanged,
        group_page=groups.group_page,
        group_log_exposure=groups.group_log_exposure,
        group_count=groups.group_count,
        unchanged_added=groups.unchanged * added_rate,
        group_log_added=groups.group_log_exposure + added[g][groups.group_page],
    )
    ll = loglik_grid(with_added, grid[None, :] + shift[g][:, None])
    top = ll.max(axis=1)
    return np.exp(ll - top[:, None]), top


def cell_groups(data, cells):
    """The (domain, epoch) group of each cell."""
    return data.domain_codes[cells.cell_page] * cells.n_epochs + cells.cell_epoch


def test_shifted_kernel_gradient_equals_finite_differences(tiny):
    """The tables at a shift and added rate per (domain, epoch) against ``loglik_grid`` (at
    zero, against the unshifted emission table); the gradient with respect to each group's
    shift and added rate (posterior state marginals times the emission's slopes, summed
    over the group's cells) against central differences."""
    from bayesrate.models.dynamic import bin_edges, normal_bins, transition_matrices
    from bayesrate.models.hmm import ShiftedEmission, shifted_paths_logp_grad

    model = DynamicShockModel(model_config={"grid_size": 11})
    cells, grid = model.cells(tiny), model.grid(tiny)
    emission = ShiftedEmission.from_cells(
        cells.groups,
        cells.cell_page,
        cells.cell_epoch,
        cells.n_pages,
        cells.n_epochs,
        grid,
        cell_groups(tiny, cells),
        2 * cells.n_epochs,
    )
    table, log_top = model.emission(tiny)
    got, _, got_top = emission.tables(np.zeros(emission.n_groups))
    np.testing.assert_allclose(got, table, rtol=1e-12)
    np.testing.assert_allclose(got_top, log_top, rtol=1e-12)
    rng = np.random.default_rng(seed_of("dyn-shift-grad"))
    shift = rng.normal(0, 0.7, emission.n_groups)
    edits = rng.normal(-5.0, 0.7, emission.n_groups)
    got, _, got_top = emission.tables(shift, edits)
    rows, tops = _tables_by_numpy(tiny, cells, grid, shift, edits)
    np.testing.assert_allclose(got[cells.cell_page, cells.cell_epoch], rows, rtol=1e-10)
    want_top = np.bincount(cells.cell_page, weights=tops, minlength=cells.n_pages)
    np.testing.assert_allclose(got_top, want_top, rtol=1e-12)
    domain = tiny.domain_codes
    init = normal_bins(np.array([-5.0, -4.0, -5.5]), np.full(3, 0.8), bin_edges(grid))
    transitions = transition_matrices(np.array([0.5, 0.9]), grid)
    args = (domain, cells.first_column, cells.last_column)
    for added in (None, edits):
        got = shifted_paths_logp_grad(init, transitions, shift, emission, *args, added)
        h = 1e-6
        for which, x in ((0, shift), (1, added)):
            if x is None:
                assert np.all(got[4] == 0.0)
                continue
            for c in range(len(x)):
                up, down = x.copy(), x.copy()
                up[c] += h
                down[c] -= h
                moved = [(up, added), (down, added)] if which == 0 else [(shift, up), (shift, down)]
                hi, lo = (
                    shifted_paths_logp_grad(init, transitions, s, emission, *args, a)[0]
                    for s, a in moved
                )
                want = (hi - lo) / (2 * h)
                assert got[3 + which][c] == pytest.approx(want, rel=1e-5, abs=1e-6), (which, c)
            assert np.abs(got[3 + which]).max() > 0.5


def test_shifted_emission_refuses_wrong_groups(tiny):
    from bayesrate.models.hmm import ShiftedEmission

    model = DynamicShockModel(model_config={"grid_size": 11})
    cells, grid = model.cells(tiny), model.grid(tiny)
    emission = model.shifted_emission(tiny)
    with pytest.raises(ValueError, match="one value per group"):
        emission.tables(np.zeros(emission.n_groups + 1))
    args = (cells.groups, cells.cell_page, cells.cell_epoch, cells.n_pages, cells.n_epochs, grid)
    with pytest.raises(ValueError, match="must lie in"):
        ShiftedEmission.from_cells(*args, cell_groups(tiny, cells), 1)
    per_cell = ShiftedEmission.from_cells(*args)
    assert per_cell.n_groups == len(cells.cell_page)


def test_registered_and_unsupported_calls_say_so():
    assert get_model("dynamic_shocks") is DynamicShockModel
    assert get_model("dynamic_edits") is DynamicEditModel
    for model_class in (DynamicShockModel, DynamicEditModel):
        with pytest.raises(ValueError, match="independent"):
            model_class(model_config={"shock_process": "random_walk"})
    with pytest.raises(ValueError, match="walks of the 'dynamic' model"):
        DynamicShockModel(model_config={"path_integral": "laplace"})


@pytest.mark.parametrize("model_class", [DynamicShockModel, DynamicEditModel])
def test_model_gradient_equals_finite_differences(tiny, model_class):
    """The model's log-density gradient (through the binned Normals and the kernel)
    against central differences of its log-density, at random points."""
    model = model_class(model_config={"grid_size": 24})
    check_model_gradient(model.build_model(tiny), "dyn-model-grad")


def check_model_gradient(pm_model, seed: str) -> None:
    """``pm_model``'s log-density gradient against central differences of its log-density
    at two random points near its initial point; the NUMBA backend's (nutpie's) gradient
    and log-density equal the default backend's."""
    logp = pm_model.compile_logp()
    dlogp = pm_model.compile_dlogp()
    numba_logp = pm_model.compile_logp(mode="NUMBA")
    numba_dlogp = pm_model.compile_dlogp(mode="NUMBA")
    rng = np.random.default_rng(seed_of(seed))
    base = pm_model.initial_point()
    names = [v.name for v in pm_model.value_vars]
    h = 1e-5
    for _ in range(2):
        point = {k: v + rng.normal(0, 0.4, np.shape(v)) for k, v in base.items()}
        grad = dlogp(point)
        numeric = []
        for name in names:
            for index in np.ndindex(np.shape(point[name])):
                up = {k: np.array(v, dtype=float) for k, v in point.items()}
                down = {k: np.array(v, dtype=float) for k, v in point.items()}
                up[name][index] += h
                down[name][index] -= h
                numeric.append((logp(up) - logp(down)) / (2 * h))
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)
        assert np.abs(grad).max() > 1.0
        np.testing.assert_allclose(numba_dlogp(point), grad, rtol=1e-12)
        assert numba_logp(point) == pytest.approx(logp(point), rel=1e-12)


def mixed_posterior(model, obs):
    """``model`` fitted to ``obs`` (its warnings silenced): its posterior, the chains mixed
    (:func:`tests.recovery.assert_mixed`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    assert_mixed(model.diagnostics_)
    return model.idata_["posterior"]


# ---------------------------------------------------------------- checks: LOO and predictive
POINT = {
    "mu_domain": np.array([-4.6, -5.0]),
    "sigma_page": np.array(0.8),
    "sigma_walk": np.array([0.6, 1.1]),
    "mu_global": np.array(-4.8),
    "sigma_domain": np.array(0.5),
    "sigma_walk_global": np.array(0.7),
    "walk_domain_sd": np.array(0.4),
}
SHOCK = np.array([[0.5, -0.3, -0.2], [-0.6, 0.2, 0.4]])
#: edit log-rates per hour (domains, epochs): 1/60 to 1/500 per hour, as large as the pages'
EDIT = np.log(np.array([[1 / 60, 1 / 500, 1 / 200], [1 / 300, 1 / 80, 1 / 150]]))


def _fixed_posterior(model, data, n_draws: int, shock=None, extra=None, edits=None):
    """``model`` as if fitted to ``data``, every posterior draw the parameter point POINT
    (and ``shock``, ``edits``): the exact answers are then sums over that point's paths."""
    import xarray as xr

    from bayesrate.constants import DIM_EPOCH, DIM_PAGE

    coords = model.coords(data)
    values = dict(POINT) | dict(extra or {})
    if shock is not None:
        values |= {"shock": shock, "shock_global": shock.mean(axis=0)}
    if edits is not None:
        values |= {"edit_log_rate": edits, "edit_log_rate_global": edits.mean(axis=0)}
    dims = {"mu_domain": (DIM_DOMAIN,), "sigma_walk": (DIM_DOMAIN,),
            "shock": (DIM_DOMAIN, DIM_EPOCH), "shock_global": (DIM_EPOCH,),
            "edit_log_rate": (DIM_DOMAIN, DIM_EPOCH),
            "edit_log_rate_global": (DIM_EPOCH,)}  # fmt: skip

    def draws(v):
        return np.broadcast_to(v, (1, n_draws, *np.shape(v))).copy()

    post = xr.Dataset(
        {name: (("chain", "draw", *dims.get(name, ())), draws(v)) for name, v in values.items()},
        coords={k: v for k, v in coords.items() if k != DIM_PAGE},
    )
    const = xr.Dataset({"domain": ((DIM_PAGE,), np.asarray(data.pages["domain"]).astype(str))})
    model.idata_ = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    model.data_ = data
    return model


def _shocked(model_class):
    return SHOCK if issubclass(model_class, DynamicShockModel) else None


def _edited(model_class):
    return EDIT if model_class is DynamicEditModel else None


DYNAMIC_MODELS = [DynamicShockModel, DynamicEditModel]


def _fixed(model_class, data, n_draws: int, config: dict):
    """:func:`_fixed_posterior` of ``model_class`` with its shocks and edits, if any."""
    if model_class is not DynamicModel:
        config = {**config, "domain_shock_min_pages": 1}
    return _fixed_posterior(
        model_class(model_config=config), data, n_draws, _shocked(model_class),
        edits=_edited(model_class),
    )  # fmt: skip


@pytest.mark.parametrize("model_class", DYNAMIC_MODELS)
def test_leave_one_page_out_terms_equal_path_enumeration(tiny, model_class):
    """Each page's term of leave-one-page-out is its data's probability with its whole path
    summed out; with every draw the same point, PSIS-LOO's ELPD is their sum exactly."""
    from bayesrate.checks.compare import compare, marginal_idata

    model = _fixed(model_class, tiny, 40, {"grid_size": 9})
    want, _ = _paths_by_enumeration(
        model, tiny, POINT["mu_domain"], POINT["sigma_page"], POINT["sigma_walk"],
        _shocked(model_class), added=_edited(model_class),
    )  # fmt: skip
    got = model.marginal_page_loglik(model.thinned_posterior())
    np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), rtol=1e-10)
    # draws that differ: the terms per draw, and PSIS-LOO close to plain importance sampling
    rng = np.random.default_rng(seed_of("dyn-loo-draws"))
    post = model.idata_["posterior"]
    post["mu_domain"] = post["mu_domain"] + rng.normal(0, 0.05, post["mu_domain"].shape)
    terms = np.asarray(marginal_idata(model)["log_likelihood"]["loglik_marginal"])[0]
    mu = np.asarray(post["mu_domain"])[0]
    for s in (0, 17):
        want, _ = _paths_by_enumeration(
            model, tiny, mu[s], POINT["sigma_page"], POINT["sigma_walk"], _shocked(model_class),
            added=_edited(model_class),
        )  # fmt: skip
        np.testing.assert_allclose(terms[s], want, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = compare({"dyn": model}).table
    plain = -np.log(np.mean(np.exp(-terms), axis=0)).sum()
    assert float(table["elpd"].iloc[0]) == pytest.approx(plain, abs=0.05)


def _group_columns(model, data):
    """Each predictive group's page, fitted column, interval length and trials."""
    patterns = model.predictive_patterns(data)
    cells = model.cells(data)
    column = end_epochs(patterns.pattern_end, cells.anchor, cells.epoch_hours)
    column = column[patterns.group_pattern] - cells.first_epoch
    return patterns.group_page, column, patterns.pattern_length[patterns.group_pattern]


def _within(got: np.ndarray, want: np.ndarray, sd: np.ndarray) -> None:
    """Monte Carlo means within 4.5 standard errors (and 1e-4) of the exact values."""
    assert (np.abs(got - want) <= 4.5 * sd + 1e-4).all(), np.abs(got - want) / (sd + 1e-12)


@pytest.mark.parametrize("model_class", DYNAMIC_MODELS)
def test_conditional_predictive_equals_path_posterior(tiny, model_class):
    """``page_rates="posterior"``: every group's detection probability averaged over the
    draws equals its expectation over the page's path posterior (every path enumerated),
    and the replicated detections have that mean."""
    n = 3000
    model = _fixed(model_class, tiny, n, {"grid_size": 7})
    grid = model.grid(tiny)
    posteriors = []
    _paths_by_enumeration(
        model, tiny, POINT["mu_domain"], POINT["sigma_page"], POINT["sigma_walk"],
        _shocked(model_class), posteriors=posteriors, added=_edited(model_class),
    )  # fmt: skip
    page, column, length = _group_columns(model, tiny)
    domain = tiny.domain_codes[page]
    shift = np.zeros(len(page)) if _shocked(model_class) is None else SHOCK[domain, column]
    added = np.zeros(len(page)) if _edited(model_class) is None else np.exp(EDIT[domain, column])
    want = np.empty(len(page))
    for g in range(len(page)):
        paths, weights = posteriors[page[g]]
        lam = np.exp(grid[paths[:, column[g]]] + shift[g]) + added[g]
        want[g] = weights @ -np.expm1(-lam * length[g])
    tree = model.predict(tiny, n_draws=None, seed="dyn-conditional", page_rates="posterior")
    pred = tree["posterior_predictive"]
    prob = np.asarray(pred["detection_probability"])[0]
    _within(prob.mean(axis=0), want, prob.std(axis=0) / math.sqrt(n))
    trials = np.asarray(tree["constant_data"]["group_trials"])
    rate = np.asarray(pred["detections"])[0] / trials
    _within(rate.mean(axis=0), want, rate.std(axis=0) / math.sqrt(n))
    assert np.ptp(want) > 0.05  # the groups differ


def test_predictive_refuses_what_it_cannot_draw(tiny):
    """The conditional predictive of other data, and dynamic_shocks visits outside the
    fitted epochs, are errors that say why."""
    model = _fixed_posterior(DynamicModel(model_config={"grid_size": 5}), tiny, 4)
    with pytest.raises(ValueError, match="fitted observations"):
        model.predict(tiny_world(("a", "z", "a")), page_rates="posterior")
    shocked = _fixed_posterior(DynamicShockModel(model_config={"grid_size": 5}), tiny, 4, SHOCK)
    later = sim.simulate_pages(
        [1 / 50], [np.arange(END + 10.0, END + 1.5 * L, 30.0)], domains=["a"],
        rng=sim.rng_from("dyn-later"),
    ).observations  # fmt: skip
    with pytest.raises(ValueError, match="within the fitted epochs"):
        shocked.predict(later)
    assert model.predict(later, n_draws=2)["posterior_predictive"]["detections"].size
