"""Worlds, exact oracles and shared checks of the dynamic model's tests, imported by
``tests/models`` and by the research package's tests of its dynamic variants.

Oracles: every path enumerated (the forward algorithm's sum and the filtered
distribution, scipy's Normal CDF for the bins), a per-interval Bernoulli sum for the
cells' sufficient statistics; simulated drifting worlds.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from bayesrate import simulate as sim
from bayesrate.constants import DIM_DOMAIN
from bayesrate.models.dynamic import end_epochs
from tests.helpers import seed_of
from tests.recovery import assert_mixed, assert_read_mixed

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


def paths_by_enumeration(
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


def paths_term(pm_model):
    """The paths' log-likelihood summed over pages, in terms of the value variables: the
    observed ``page_detections``' (a potential for the research models' paths)."""
    if pm_model.potentials:
        return pm_model.replace_rvs_by_values([pm_model.potentials[0]])[0]
    return pm_model.logp(vars=[pm_model["page_detections"]], jacobian=False)


def random_points(pm_model, names, seed: str, n: int = 3):
    """The paths' log-likelihood (:func:`paths_term`) and the variables ``names`` at ``n``
    random points around the model's initial point."""
    outputs = [
        paths_term(pm_model),
        *pm_model.replace_rvs_by_values([pm_model[name] for name in names]),
    ]
    values = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(seed_of(seed))
    base = pm_model.initial_point()
    for _ in range(n):
        yield values({k: v + rng.normal(0, 0.6, np.shape(v)) for k, v in base.items()})


def tables_by_numpy(data, cells, grid, shift, added):
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


def fixed_posterior(model, data, n_draws: int, shock=None, extra=None, edits=None):
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


def group_columns(model, data):
    """Each predictive group's page, fitted column, interval length and trials."""
    patterns = model.predictive_patterns(data)
    cells = model.cells(data)
    column = end_epochs(patterns.pattern_end, cells.anchor, cells.epoch_hours)
    column = column[patterns.group_pattern] - cells.first_epoch
    return patterns.group_page, column, patterns.pattern_length[patterns.group_pattern]


def within(got: np.ndarray, want: np.ndarray, sd: np.ndarray) -> None:
    """Monte Carlo means within 4.5 standard errors (and 1e-4) of the exact values."""
    assert (np.abs(got - want) <= 4.5 * sd + 1e-4).all(), np.abs(got - want) / (sd + 1e-12)


def fixed(model_class, data, n_draws: int, config: dict, shock=None, edits=None):
    """:func:`fixed_posterior` of ``model_class(config)`` with the shared epoch effects
    ``shock`` and edit log-rates ``edits`` of the research models (none in the core)."""
    return fixed_posterior(model_class(model_config=config), data, n_draws, shock, edits=edits)


def check_leave_one_page_out(tiny, model_class, shock=None, edits=None, config=None) -> None:
    """Each page's term of leave-one-page-out is its data's probability with its whole path
    summed out; with every draw the same point, PSIS-LOO's ELPD is their sum exactly."""
    from bayesrate.checks.compare import compare, marginal_idata

    model = fixed(model_class, tiny, 40, {"grid_size": 9, **(config or {})}, shock, edits)
    want, _ = paths_by_enumeration(
        model, tiny, POINT["mu_domain"], POINT["sigma_page"], POINT["sigma_walk"],
        shock, added=edits,
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
        want, _ = paths_by_enumeration(
            model, tiny, mu[s], POINT["sigma_page"], POINT["sigma_walk"], shock,
            added=edits,
        )  # fmt: skip
        np.testing.assert_allclose(terms[s], want, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = compare({"dyn": model}).table
    plain = -np.log(np.mean(np.exp(-terms), axis=0)).sum()
    assert float(table["elpd"].iloc[0]) == pytest.approx(plain, abs=0.05)


def check_conditional_predictive(tiny, model_class, shock=None, edits=None, config=None) -> None:
    """``page_rates="posterior"``: every group's detection probability averaged over the
    draws equals its expectation over the page's path posterior (every path enumerated),
    and the replicated detections have that mean."""
    n = 3000
    model = fixed(model_class, tiny, n, {"grid_size": 7, **(config or {})}, shock, edits)
    grid = model.grid(tiny)
    posteriors = []
    paths_by_enumeration(
        model, tiny, POINT["mu_domain"], POINT["sigma_page"], POINT["sigma_walk"],
        shock, posteriors=posteriors, added=edits,
    )  # fmt: skip
    page, column, length = group_columns(model, tiny)
    domain = tiny.domain_codes[page]
    shift = np.zeros(len(page)) if shock is None else shock[domain, column]
    added = np.zeros(len(page)) if edits is None else np.exp(edits[domain, column])
    want = np.empty(len(page))
    for g in range(len(page)):
        paths, weights = posteriors[page[g]]
        lam = np.exp(grid[paths[:, column[g]]] + shift[g]) + added[g]
        want[g] = weights @ -np.expm1(-lam * length[g])
    tree = model.predict(tiny, n_draws=None, seed="dyn-conditional", page_rates="posterior")
    pred = tree["posterior_predictive"]
    prob = np.asarray(pred["detection_probability"])[0]
    within(prob.mean(axis=0), want, prob.std(axis=0) / math.sqrt(n))
    trials = np.asarray(tree["constant_data"]["group_trials"])
    rate = np.asarray(pred["detections"])[0] / trials
    within(rate.mean(axis=0), want, rate.std(axis=0) / math.sqrt(n))
    assert np.ptp(want) > 0.05  # the groups differ


def mixed_posterior(model, obs, read: list[str] | None = None):
    """``model`` fitted to ``obs`` (its warnings silenced): its posterior, the chains mixed
    (:func:`tests.recovery.assert_mixed`; only the variables ``read``, when given:
    :func:`tests.recovery.assert_read_mixed`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    if read is None:
        assert_mixed(model.diagnostics_)
    else:
        assert_read_mixed(model, read)
    return model.idata_["posterior"]
