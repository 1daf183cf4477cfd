"""Tests of the epoch statistics and the shocks model against independent oracles.

Oracles: interval/epoch overlaps by a double loop over epochs; the integrated rate of
:class:`bayesrate.simulate.PiecewiseConstant` (a page's rate times ``exp(shock)`` per
epoch) for a per-interval Bernoulli log-likelihood from the raw visits; and recovery of
the shocks and page rates on a world simulated with known shocks.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from bayesrate_research.models import epochs as E
from bayesrate_research.models.shocks import (
    PersistentShockModel,
    ShockModel,
    ar1_continue,
    ar1_mean_given_deviations,
    ar1_path,
    ar1_weights,
    walk_back,
)

from bayesrate import simulate as sim
from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH, DIM_PAGE
from bayesrate.draws import stack_draws
from bayesrate.models import HierarchicalModel, get_model
from tests.helpers import seed_of
from tests.recovery import (
    assert_coverage,
    assert_inside_count,
    assert_mixed,
    assert_truths_within,
    seed_name,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc

L = 90 * 24.0
END = 475_000.0


def _overlaps_by_loop(start, end, anchor, epoch_hours, lo=-20, hi=20):
    """{(interval, epoch): hours > 0} by checking every epoch in [lo, hi)."""
    out = {}
    for i, (s, t) in enumerate(zip(start, end, strict=True)):
        for k in range(lo, hi):
            a, b = anchor + k * epoch_hours, anchor + (k + 1) * epoch_hours
            h = min(t, b) - max(s, a)
            if h > 0:
                out[(i, k)] = h
    return out


def test_epoch_overlap_against_a_loop():
    rng = np.random.default_rng(seed_of("epoch-overlap"))
    anchor, epoch_hours = 1000.0, 50.0
    start = anchor + rng.uniform(-400, 200, 300)
    end = start + rng.choice([0.5, 3.0, 49.0, 120.0, 333.0], 300)
    # ends and starts exactly on boundaries, and an interval ending at the anchor
    start[:3] = [anchor - 100.0, anchor - 50.0, anchor - 7.0]
    end[:3] = [anchor - 50.0, anchor, anchor + 50.0]
    owner, epoch, hours = E.epoch_overlap(start, end, anchor, epoch_hours)
    want = _overlaps_by_loop(start, end, anchor, epoch_hours)
    got = {(int(i), int(k)): h for i, k, h in zip(owner, epoch, hours, strict=True) if h > 0}
    assert got.keys() == want.keys()
    for key, h in want.items():
        assert got[key] == pytest.approx(h, abs=1e-9)
    assert (hours >= 0).all() and np.allclose(np.bincount(owner, hours), end - start)
    # the boundary cases: one piece each, in the epoch that holds them
    assert [int(k) for k in epoch[:3]] == [-2, -1, -1]  # (a−100, a−50], (a−50, a]
    assert np.array_equal(np.sort(epoch[owner == 2]), [-1, 0])


def test_patterns_group_equal_exposures():
    """Every interval's group has its page, and its pattern its own hours per epoch."""
    rng = np.random.default_rng(seed_of("epoch-patterns"))
    n_pages, n = 7, 400
    page = rng.integers(0, n_pages, n)
    start = END - rng.uniform(0, 4 * L, n)
    end = np.minimum(start + rng.choice([24.0, 24.0, 24.0, 168.0, 500.0], n), END)
    changed = rng.random(n) < 0.4
    page_domain = np.array([0, 0, 1, 1, 2, 2, 2])
    pat = E.interval_patterns(start, end, page, changed, page_domain, n_pages, END, L)
    g = pat.groups
    assert g.trials.sum() == n and (np.diff(g.page) >= 0).all()
    assert np.array_equal(np.bincount(pat.interval_group, changed, len(g.page)), g.detected)
    want = _overlaps_by_loop(start, end, END, L, lo=-6, hi=1)
    for i in range(n):
        grp = pat.interval_group[i]
        assert g.page[grp] == page[i]
        q = g.pattern[grp]
        assert pat.pattern_domain[q] == page_domain[page[i]]
        rows = pat.entry_pattern == q
        pieces = zip(pat.entry_epoch[rows], pat.entry_hours[rows], strict=True)
        mine = {pat.first_epoch + int(k): h for k, h in pieces if h > 0}
        theirs = {k: h for (j, k), h in want.items() if j == i}
        assert mine.keys() == theirs.keys()
        assert all(mine[k] == pytest.approx(theirs[k], abs=1e-6) for k in theirs)
    # (page, epoch, length) sufficiency: fewer groups than intervals
    assert len(g.page) < n


def test_log_exposure_numpy_and_pytensor_agree_with_the_sum():
    rng = np.random.default_rng(seed_of("epoch-exposure"))
    start = END - rng.uniform(0, 3 * L, 60)
    end = np.minimum(start + rng.choice([24.0, 400.0], 60), END)
    pat = E.interval_patterns(
        start, end, np.arange(60) % 4, np.zeros(60), np.array([0, 1, 1, 0]), 4, END, L
    )
    shock = rng.normal(0, 0.7, (3, 2, pat.n_epochs))
    got = E.log_exposure_draws(pat, shock)
    want = np.zeros_like(got)
    for q in range(pat.n_patterns):
        rows = pat.entry_pattern == q
        d = pat.pattern_domain[q]
        want[:, q] = np.log(
            (pat.entry_hours[rows] * np.exp(shock[:, d, pat.entry_epoch[rows]])).sum(axis=1)
        )
    np.testing.assert_allclose(got, want, rtol=1e-12)
    tensor = E.log_exposure(pat, shock[1]).eval()
    np.testing.assert_allclose(tensor, want[1], rtol=1e-12)


def _shock_world(
    seed: str, n_pages: int, n_domains: int, n_epochs: int, sg: float, sd: float, phi: float = 0.0
):
    """Daily visits (random phase) over ``n_epochs`` epochs ending at END; a page's rate is
    ``exp(θ_p + g_e + d_{domain, e})`` in epoch ``e``; ``g`` a stationary AR(1) path (sd
    ``sg``, persistence ``phi``: independent at 0)."""
    rng = sim.rng_from(seed)
    edges = END - L * np.arange(n_epochs, -1, -1)
    g = sg * rng.standard_normal(n_epochs)
    for e in range(1, n_epochs):
        g[e] = phi * g[e - 1] + math.sqrt(1 - phi**2) * g[e]
    d = sd * rng.standard_normal((n_domains, n_epochs))
    theta = rng.normal(math.log(0.3 / 24), 1.0, n_pages)
    dom = np.arange(n_pages) % n_domains
    shock = g[None, :] + d
    procs = [sim.PiecewiseConstant(edges, np.exp(theta[p] + shock[dom[p]])) for p in range(n_pages)]
    visits = []
    for _ in range(n_pages):
        v = np.arange(edges[0] + rng.uniform(0, 24), END + 1e-9, 24.0)
        visits.append(np.append(v[v < END], END))
    data = sim.simulate_pages(procs, visits, domains=[f"d{k}" for k in dom], rng=rng)
    return data.observations, theta, shock, edges


def _brute_force(obs, log_rate, shock, edges) -> np.ndarray:
    """Per page: Σ over raw intervals of log P(detected) or log P(not), the integrated rate
    from :class:`PiecewiseConstant` (``exp(log_rate) · exp(shock)`` per epoch)."""
    out = np.zeros(obs.n_pages)
    for p in range(obs.n_pages):
        sl = slice(obs.offsets[p], obs.offsets[p + 1])
        t, c = obs.time[sl], obs.changed[sl]
        rates = np.exp(log_rate[p] + shock[obs.domain_codes[p]])
        lam = sim.PiecewiseConstant(edges, rates).integrated_rate(t[:-1], t[1:])
        out[p] = np.sum(np.where(c[1:] > 0, np.log(-np.expm1(-lam)), -lam))
    return out


@pytest.fixture(scope="module")
def small():
    return _shock_world("shocks-small", 12, 3, 4, 0.8, 0.5)


def _logp_moves_with_brute_force(model, obs, edges, seed: str, n_points: int = 3):
    """The model's observed log-probability (detections + quiet) at random points, less its
    value at the first, against the per-interval Bernoulli sum's (the Binomial constants
    cancel); returns the shocks of each point."""
    pm_model = model.build_model(obs)
    outputs = pm_model.replace_rvs_by_values([pm_model["log_rate"], pm_model["shock"]])
    values = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    loglik = pm_model.compile_fn(
        pm_model.logp(vars=pm_model.observed_RVs, sum=True),
        inputs=pm_model.value_vars,
        on_unused_input="ignore",
    )
    rng = np.random.default_rng(seed_of(seed))
    base = pm_model.initial_point()
    got, want, shocks = [], [], []
    for _ in range(n_points):
        point = {k: v + rng.normal(0, 0.5, np.shape(v)) for k, v in base.items()}
        log_rate, shock = values(point)
        assert np.ptp(shock) > 0.3  # shocks that matter
        got.append(float(loglik(point)))
        want.append(_brute_force(obs, log_rate, shock, edges).sum())
        shocks.append(shock)
    for i in range(1, n_points):
        assert got[i] - got[0] == pytest.approx(want[i] - want[0], rel=1e-9, abs=1e-7)
    return shocks


def test_model_logp_equals_brute_force(small):
    """Independent shocks on the epoch grid anchored at the last visit."""
    obs, _, _, edges = small
    model = ShockModel(model_config={"parameterisation": "noncentred"})
    _logp_moves_with_brute_force(model, obs, edges, "shocks-point")
    grid = model.fitted_grid()
    assert grid.anchor == END and grid.first_epoch == -4 and grid.n_epochs == 4


@pytest.fixture(scope="module")
def fitted(small):
    obs = small[0]
    model = ShockModel(sampler_config={"draws": 200, "tune": 200, "chains": 2, "seed": "shk"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    return model


def test_page_loglik_equals_brute_force(small, fitted):
    obs, _, _, edges = small
    post = fitted.thinned_posterior(5)
    log_rate = stack_draws(post["log_rate"], DIM_PAGE)
    shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    got = fitted.page_loglik(5)
    assert got.shape == (len(log_rate), obs.n_pages)
    for i in range(len(log_rate)):
        want = _brute_force(obs, log_rate[i], shock[i], edges)
        np.testing.assert_allclose(got[i], want, rtol=1e-10)


def test_leave_one_page_out_terms_equal_quadrature(small, fitted):
    """Each page's term integrates its rate out under the draw's shocks: against scipy's
    adaptive quadrature of the per-interval Bernoulli likelihood times the page's prior
    Normal(mu_domain, sigma_page); PSIS-LOO takes them (``compare``)."""
    from scipy.integrate import quad
    from scipy.stats import norm

    from bayesrate.checks.compare import compare

    obs, _, _, edges = small
    post = fitted.thinned_posterior(3)
    got = fitted.marginal_page_loglik(post)
    mu = stack_draws(post["mu_domain"], DIM_DOMAIN)
    sigma = stack_draws(post["sigma_page"])
    shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    for i in range(len(got)):
        for p in (0, 5, 10):
            d = obs.domain_codes[p]
            peak = float(stack_draws(post["log_rate"], DIM_PAGE)[i, p])
            lo, hi = peak - 6.0, peak + 6.0  # the likelihood is negligible beyond

            scale = _brute_force(obs, np.full(obs.n_pages, peak), shock[i], edges)[p]

            def integrand(u, i=i, p=p, d=d, scale=scale):
                rates = np.full(obs.n_pages, u)
                ll = _brute_force(obs, rates, shock[i], edges)[p]
                return math.exp(ll - scale) * norm.pdf(u, mu[i, d], sigma[i])

            value, _ = quad(integrand, lo, hi, epsabs=0, epsrel=1e-10, limit=200)
            assert got[i, p] == pytest.approx(scale + math.log(value), abs=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = compare({"shocks": fitted}).table
    assert np.isfinite(table["elpd"].iloc[0])


def test_predictive_checks_count_by_the_models_own_groups(small, fitted):
    """The checks take the shocks model's predictive groups (visit patterns split by
    epoch): every observed detection is counted once, and its own pages are replicated
    without an extreme mean."""
    from bayesrate.checks.ppc import ppc_for

    obs = small[0]
    checks = ppc_for(fitted, obs, seed="shocks-ppc", n_draws=40)
    for replication in checks.replications:
        result = checks.result(replication)
        assert result.hour_observed.sum() == obs.changes_per_page.sum()
        assert result.changes_replicated.shape == (40, obs.n_pages)
    assert 0.025 < checks.conditional.p_values()["mean_changes"] < 0.975


def test_rate_is_the_future_epoch_mean(fitted):
    post = fitted.idata_["posterior"]
    assert fitted.shocked_domains(fitted.data_).all()  # 4 pages per domain
    variance = post["sigma_shock_global"] ** 2 + post["sigma_shock_domain"] ** 2
    want = np.exp(post["log_rate"] + variance / 2)
    np.testing.assert_allclose(post["rate"].values, want.transpose(*post["rate"].dims).values)
    # zero-sum shocks: every domain's shocks average 0 over the epochs
    np.testing.assert_allclose(post["shock"].mean(DIM_EPOCH).values, 0.0, atol=1e-9)


def test_predict_draws_fresh_shocks_after_the_fit(small, fitted):
    """Visits inside the fit use its shocks (the posterior predictive mean of a page's
    detections follows its observed count); visits after it draw new shocks per draw."""
    obs = small[0]
    inside = fitted.predict(obs, n_draws=100, page_rates="posterior", seed="in")
    mean = inside["posterior_predictive"]["page_detections"].mean(("chain", "draw")).values
    assert np.corrcoef(mean, obs.changes_per_page)[0, 1] > 0.95
    # the same pages one year later, daily: two fresh epochs per draw
    later = obs.replace(time=obs.time + 2 * L)
    future = fitted.predict(later, n_draws=100, page_rates="posterior", seed="out")

    def shared(tree) -> float:
        """Mean correlation across pages of their per-draw counts (a shared shock: > 0)."""
        counts = tree["posterior_predictive"]["page_detections"].stack(s=("chain", "draw"))
        return float(np.nanmean(np.corrcoef(counts.values)[np.triu_indices(obs.n_pages, 1)]))

    # fresh shocks shared by the pages make their counts move together from draw to draw
    assert shared(future) > shared(inside) + 0.1
    with pytest.raises(ValueError, match="before the fitted epochs"):
        fitted.predict(obs.replace(time=obs.time - 10 * L), n_draws=10)


def test_save_load_keeps_the_grid(small, fitted, tmp_path):
    """A loaded fit rebuilds the same epoch grid from its saved data and predicts alike."""
    path = fitted.save(tmp_path / "shocks.nc")
    loaded = ShockModel.load(path)
    a, b = fitted.fitted_grid(), loaded.fitted_grid()
    assert (a.anchor, a.first_epoch, a.n_epochs) == (b.anchor, b.first_epoch, b.n_epochs)
    assert list(loaded.idata_["posterior"][DIM_EPOCH].values) == list(
        fitted.idata_["posterior"][DIM_EPOCH].values
    )
    later = small[0].replace(time=small[0].time + L)
    x = fitted.predict(later, n_draws=20, page_rates="posterior", seed="same")
    y = loaded.predict(later, n_draws=20, page_rates="posterior", seed="same")
    np.testing.assert_array_equal(
        x["posterior_predictive"]["page_detections"].values,
        y["posterior_predictive"]["page_detections"].values,
    )


def _shocks_at_a_random_point(pm_model, seed: str):
    """``shock`` and ``shock_global`` at the initial point moved by N(0, 0.5) noise."""
    values = pm_model.compile_fn(
        pm_model.replace_rvs_by_values([pm_model["shock"], pm_model["shock_global"]]),
        inputs=pm_model.value_vars,
        on_unused_input="ignore",
    )
    rng = np.random.default_rng(seed_of(seed))
    point = {k: v + rng.normal(0, 0.5, np.shape(v)) for k, v in pm_model.initial_point().items()}
    return values(point)


def test_small_domains_follow_the_global_shocks():
    """Domains of fewer than ``domain_shock_min_pages`` pages have no shocks of their own."""
    obs, _, _, _ = _shock_world("shocks-small-domains", 9, 3, 3, 0.5, 0.5)
    model = ShockModel(model_config={"domain_shock_min_pages": 4})
    assert not model.shocked_domains(obs).any()  # 3 pages each
    pm_model = model.build_model(obs)
    assert "sigma_shock_domain" not in pm_model.named_vars
    shock, shock_global = _shocks_at_a_random_point(pm_model, "small-domains")
    assert np.ptp(shock_global) > 0.1
    np.testing.assert_allclose(shock, np.broadcast_to(shock_global, shock.shape))
    assert ShockModel(model_config={"domain_shock_min_pages": 3}).shocked_domains(obs).all()


def test_registered_and_validated():
    assert get_model("shocks") is ShockModel and issubclass(ShockModel, HierarchicalModel)
    assert get_model("shocks_ar1") is PersistentShockModel
    assert PersistentShockModel().model_config["shock_process"] == "ar1"
    with pytest.raises(ValueError, match="epoch_days"):
        ShockModel(model_config={"epoch_days": 0})
    with pytest.raises(ValueError, match="shock_parameterisation"):
        ShockModel(model_config={"shock_parameterisation": "sideways"})
    with pytest.raises(ValueError, match="shock_process"):
        ShockModel(model_config={"shock_process": "ar2"})
    with pytest.raises(ValueError, match="domain_shocks"):
        ShockModel(model_config={"domain_shocks": "yes"})


@pytest.mark.slow
def test_recovers_shocks_and_page_rates(recovery_seed):
    """A world with known shocks (σ_global 0.6, σ_domain 0.3; 240 pages, 6 domains, 8
    epochs): the 90% intervals of the page log-rates cover the truth for 85-95% of pages,
    the shocks' for at least 75% of the 48 cells, and each σ's holds its truth."""
    world = seed_name("shocks-recovery", recovery_seed)
    obs, theta, shock, _ = _shock_world(world, 240, 6, 8, 0.6, 0.3)
    model = ShockModel(sampler_config={"draws": 1000, "tune": 500, "chains": 4, "seed": world})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    assert_mixed(model.diagnostics_)
    post = model.idata_["posterior"]
    # the model's zero-sum decomposition of the truth
    level = shock.mean(axis=1)
    true_shock = shock - level[:, None]
    true_rate = theta + level[obs.domain_codes]
    order = np.argsort(obs.pages.index.to_numpy())  # simulated pages are labelled in order
    lr = stack_draws(post["log_rate"], DIM_PAGE)
    lo, hi = np.quantile(lr, [0.05, 0.95], axis=0)
    assert_coverage((lo <= true_rate[order]) & (true_rate[order] <= hi), "page log-rates")
    s = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    lo, hi = np.quantile(s, [0.05, 0.95], axis=0)
    assert_inside_count((lo <= true_shock) & (true_shock <= hi))
    draws = np.column_stack(
        [stack_draws(post["sigma_shock_global"]), stack_draws(post["sigma_shock_domain"])]
    )
    assert_truths_within(draws, [0.6, 0.3], "shock sds", log=True)


def test_walk_back_levels():
    steps = np.array([[0.5, -0.2, 0.1], [1.0, 0.0, -1.0]])
    got = walk_back(steps).eval()
    # level[e + 1] − level[e] = steps[e]; the last level is 0
    np.testing.assert_allclose(np.diff(got, axis=1), steps)
    np.testing.assert_allclose(got[:, -1], 0.0)
    assert got.shape == (2, 4)
    assert walk_back(np.zeros(0)).eval().tolist() == [0.0]


def test_random_walk_logp_equals_brute_force(small):
    """Random-walk shocks: 0 in the last epoch."""
    obs, _, _, edges = small
    model = ShockModel(model_config={"shock_process": "random_walk"})
    for shock in _logp_moves_with_brute_force(model, obs, edges, "walk-point", n_points=2):
        np.testing.assert_allclose(shock[:, -1], 0.0)


def test_domain_shocks_centre_over_their_active_epochs():
    """A domain seen only in the last two of four epochs has domain shocks there only,
    averaging zero over them (its pages' level is their average over those epochs)."""
    from bayesrate.observations import Observations

    obs, _, _, _ = _shock_world("shocks-active", 12, 3, 4, 0.5, 0.5)
    frame = obs.to_frame()
    late = frame["domain"].eq("d2").to_numpy() & (frame["time"].to_numpy() <= END - 2 * L)
    frame = frame.loc[~late]
    first = ~frame.duplicated("page")
    frame.loc[first, "changed"] = np.nan
    obs = Observations.from_frame(frame.sort_values(["page", "time"]))
    model = ShockModel(model_config={"domain_shock_min_pages": 1})
    active = model.active_cells(obs)
    assert active[:2].all() and active[2].tolist() == [False, False, True, True]
    pm_model = model.build_model(obs)
    shock, shock_global = _shocks_at_a_random_point(pm_model, "active-cells")
    deviation = shock - shock_global[None, :]
    np.testing.assert_allclose(deviation[2, :2], 0.0, atol=1e-12)
    np.testing.assert_allclose(deviation.sum(axis=1), 0.0, atol=1e-9)
    assert np.ptp(deviation[2, 2:]) > 0.01


# ---------------------------------------------------------------------- AR(1) shocks
def test_ar1_path_follows_the_recursion_and_is_stationary():
    """Against ``x_0 = σ·z_0``, ``x_e = φ·x_{e−1} + σ√(1 − φ²)·z_e`` step by step (numpy
    over draws, and the PyTensor graph), and (Monte Carlo, 200,000 paths) the stationary
    moments: sd ``σ`` at every epoch, lag-``k`` correlation ``φ^k``."""
    import pytensor.tensor as pt

    rng = np.random.default_rng(seed_of("ar1-path"))
    phi, sigma = np.array([0.2, 0.85]), np.array([0.7, 1.4])
    z = rng.standard_normal((2, 5))
    got = ar1_path(phi, sigma, z, 5)
    x = sigma * z[:, 0]
    want = [x]
    for e in range(1, 5):
        x = phi * x + sigma * np.sqrt(1 - phi**2) * z[:, e]
        want.append(x)
    np.testing.assert_allclose(got, np.array(want).T, rtol=1e-12)
    p, s, zz = pt.scalar("phi"), pt.scalar("sigma"), pt.vector("z")
    graph = ar1_path(p, s, zz, 5).eval({p: 0.85, s: 1.4, zz: z[1]})
    np.testing.assert_allclose(graph, got[1], rtol=1e-12)
    n = 200_000
    many = ar1_path(np.full(n, 0.6), np.full(n, 2.0), rng.standard_normal((n, 4)), 4)
    np.testing.assert_allclose(many.std(axis=0), 2.0, rtol=0.01)
    for k in (1, 2, 3):
        assert np.corrcoef(many[:, 0], many[:, k])[0, 1] == pytest.approx(0.6**k, abs=0.01)


def test_ar1_continue_follows_the_recursion_and_its_moments():
    """Against the recursion ``x_h = φ·x_{h−1} + σ√(1 − φ²)·z_h`` step by step, and (Monte
    Carlo, 200,000 paths) the closed-form conditional moments ``φ^h·x_0`` and
    ``σ²(1 − φ^(2h))``; the PyTensor graph gives the numpy values."""
    rng = np.random.default_rng(seed_of("ar1-continue"))
    phi, sigma = np.array([0.3, 0.9]), np.array([0.5, 1.2])
    last, mean = np.array([0.4, -1.0]), np.array([0.1, 0.3])
    z = rng.standard_normal((2, 6))
    got = ar1_continue(last, mean, phi, sigma, z, 6)
    x, want = last.copy(), []
    for h in range(6):
        x = phi * x + sigma * np.sqrt(1 - phi**2) * z[:, h]
        want.append(x - mean)
    np.testing.assert_allclose(got, np.array(want).T, rtol=1e-12)
    import pytensor.tensor as pt

    p = pt.scalar("phi")
    graph = ar1_continue(
        pt.as_tensor(0.4), pt.as_tensor(0.1), p, pt.as_tensor(0.5), pt.as_tensor(z[0]), 6
    )
    np.testing.assert_allclose(graph.eval({p: 0.3}), got[0], rtol=1e-12)
    many = ar1_continue(
        np.full(200_000, 0.8),
        np.zeros(200_000),
        np.full(200_000, 0.7),
        np.full(200_000, 0.5),
        rng.standard_normal((200_000, 4)),
        4,
    )
    h = np.arange(1, 5)
    np.testing.assert_allclose(many.mean(axis=0), 0.8 * 0.7**h, atol=0.005)
    np.testing.assert_allclose(many.var(axis=0), 0.25 * (1 - 0.7 ** (2 * h)), rtol=0.02)
    weights = ar1_weights(np.array([0.5]), 3)[0]
    np.testing.assert_allclose(weights, [[1, 0, 0], [0.5, 1, 0], [0.25, 0.5, 1]])


def test_ar1_prior_path_is_stationary():
    """Prior draws of the non-centred ``shock_path_global`` over σ and φ: ``path/σ`` has
    variance 1 in every epoch and lag-k correlation ``E[φ^k]`` (Beta(2, 2): 1/2, 3/10); the
    shocks are the path less its mean. (The centred version's prior is a potential:
    :func:`test_ar1_centred_prior_is_the_path_density_with_its_mean_integrated_out`.)"""
    obs, _, _, _ = _shock_world("ar1-prior", 9, 3, 6, 0.5, 0.5)
    model = PersistentShockModel(model_config={"shock_parameterisation": "noncentred"})
    pm_model = model.build_model(obs)
    assert {"shock_persistence", "shock_path_global"} <= set(pm_model.named_vars)
    with pm_model:
        prior = pymc.sample_prior_predictive(
            draws=20_000,
            var_names=[
                "shock_path_global",
                "shock_global",
                "sigma_shock_global",
                "shock_persistence",
            ],
            random_seed=seed_of("ar1-prior"),
        )["prior"]
    path = stack_draws(prior["shock_path_global"], DIM_EPOCH)
    sigma = stack_draws(prior["sigma_shock_global"])
    u = path / sigma[:, None]
    np.testing.assert_allclose(u.var(axis=0), 1.0, atol=0.05)
    np.testing.assert_allclose(np.mean(u[:, 1:] * u[:, :-1], axis=0), 0.5, atol=0.03)
    np.testing.assert_allclose(np.mean(u[:, 2:] * u[:, :-2], axis=0), 0.3, atol=0.03)
    shock = stack_draws(prior["shock_global"], DIM_EPOCH)
    np.testing.assert_allclose(shock, path - path.mean(axis=1, keepdims=True), atol=1e-12)


def _ar1_covariance(phi: float, sigma: float, n: int) -> np.ndarray:
    lag = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    return sigma**2 * phi**lag


def test_ar1_mean_given_deviations_is_the_gaussian_conditional():
    """Against the conditional of the joint Normal of (deviations, mean) built from the
    stationary covariance ``σ²φ^|i−j|`` by linear algebra, at several n and φ."""
    rng = np.random.default_rng(seed_of("ar1-conditional"))
    for n, phi, sigma in ((2, 0.4, 0.7), (5, 0.9, 1.3), (12, 0.2, 0.5)):
        cov = _ar1_covariance(phi, sigma, n)
        a = np.vstack([np.eye(n) - 1.0 / n, np.full((1, n), 1.0 / n)])  # (deviations, mean)
        joint = a @ cov @ a.T
        d = rng.multivariate_normal(np.zeros(n), cov)
        d = d - d.mean()
        s_dd, s_md = joint[: n - 1, : n - 1], joint[n, : n - 1]  # n − 1 deviations suffice
        want_mean = s_md @ np.linalg.solve(s_dd, d[: n - 1])
        want_sd = np.sqrt(joint[n, n] - s_md @ np.linalg.solve(s_dd, s_md))
        mean, sd = ar1_mean_given_deviations(d, phi, sigma, n)
        assert mean == pytest.approx(want_mean, rel=1e-9, abs=1e-12)
        assert sd == pytest.approx(want_sd, rel=1e-9)


def test_ar1_centred_prior_is_the_path_density_with_its_mean_integrated_out():
    """The centred model's prior on the zero-sum ``shock_global`` (its ZeroSumNormal(1)
    term plus the potential) moves between random points as ``log ∫ N(d + m·1; 0, Σ) dm``
    (scipy's multivariate normal, adaptive quadrature over m); ``shock_path_global`` is the
    deviations plus ``shock_mean_global``."""
    import pytensor
    from scipy.integrate import quad
    from scipy.stats import multivariate_normal

    obs, _, _, _ = _shock_world("ar1-centred", 9, 3, 6, 0.5, 0.5)
    model = PersistentShockModel(model_config={"shock_parameterisation": "centred"})
    pm_model = model.build_model(obs)
    assert "shock_global_ar1_prior" in pm_model.named_vars
    rv = pm_model["shock_global"]
    terms = [
        pm_model.logp(vars=[rv], sum=True),
        *pm_model.replace_rvs_by_values(pm_model.potentials),
    ]
    prior = pm_model.compile_fn(pytensor.tensor.add(*[pytensor.tensor.sum(t) for t in terms]),
                                inputs=pm_model.value_vars, on_unused_input="ignore")  # fmt: skip
    outputs = pm_model.replace_rvs_by_values(
        [rv, pm_model["shock_persistence"], pm_model["sigma_shock_global"],
         pm_model["shock_path_global"], pm_model["shock_mean_global"]]
    )  # fmt: skip
    values = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(seed_of("ar1-centred-points"))
    base = pm_model.initial_point()
    moved = ("shock_global", "shock_persistence", "sigma_shock_global")  # d, φ and σ
    keys = [k for k in base if k.startswith(moved)]
    assert len(keys) == 3
    got, want = [], []
    for _ in range(3):
        point = dict(base)
        for key in keys:
            point[key] = base[key] + rng.normal(0, 0.6, np.shape(base[key]))
        d, phi, sigma, path, mean = values(point)
        np.testing.assert_allclose(path, d + mean, atol=1e-12)
        density = multivariate_normal(np.zeros(len(d)), _ar1_covariance(phi, sigma, len(d)))
        value, _ = quad(lambda m, d=d, f=density: f.pdf(d + m), -20, 20, epsabs=0, epsrel=1e-11)
        got.append(float(prior(point)))
        want.append(math.log(value))
    for i in (1, 2):
        assert got[i] - got[0] == pytest.approx(want[i] - want[0], rel=1e-7, abs=1e-8)


def test_ar1_logp_equals_brute_force(small):
    """AR(1) global shocks (both parameterisations): the likelihood sees the path less its
    mean plus the domain parts."""
    obs, _, _, edges = small
    for centred in ("centred", "noncentred"):
        model = PersistentShockModel(model_config={"shock_parameterisation": centred})
        for shock in _logp_moves_with_brute_force(model, obs, edges, f"ar1-{centred}", 2):
            np.testing.assert_allclose(shock.mean(axis=1), 0.0, atol=1e-9)


def test_ar1_rate_offset_is_the_next_epochs_log_mean():
    """``log_rate_offset`` against Monte Carlo of ``log E[exp(next global shock)]`` given
    each draw (200,000 continuations of its path)."""
    import xarray as xr

    rng = np.random.default_rng(seed_of("ar1-offset"))
    phi, sigma = np.array([0.2, 0.85]), np.array([0.6, 0.4])
    path = rng.normal(0, 0.5, (2, 5))
    mean = path.mean(axis=1)
    post = xr.Dataset(
        {
            "shock_persistence": ("draw", phi),
            "sigma_shock_global": ("draw", sigma),
            "shock_path_global": (("draw", DIM_EPOCH), path),
            "shock_mean_global": ("draw", mean),
        }
    )
    got = PersistentShockModel().log_rate_offset(post).values
    for i in range(2):
        n = 200_000
        nxt = ar1_continue(
            np.full(n, path[i, -1]),
            np.full(n, mean[i]),
            np.full(n, phi[i]),
            np.full(n, sigma[i]),
            rng.standard_normal((n, 1)),
            1,
        )[:, 0]
        assert got[i] == pytest.approx(math.log(np.mean(np.exp(nxt))), abs=0.005)
    iid = ShockModel().log_rate_offset(post.drop_vars("shock_persistence")).values
    np.testing.assert_allclose(iid, sigma**2 / 2)


@pytest.fixture(scope="module")
def fitted_ar1(small):
    model = PersistentShockModel(
        model_config={"domain_shocks": False},
        sampler_config={"draws": 200, "tune": 200, "chains": 2, "seed": "ar1"},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(small[0])
    return model


def test_ar1_future_shocks_continue_each_draws_path(fitted_ar1):
    """The forecast's future global shocks, standardised by each draw's conditional
    moments (mean ``φ^h·x − m``, sd ``σ√(1 − φ^(2h))``), are standard normal over the
    draws; the fitted epochs keep the posterior shocks."""
    from bayesrate_research.forecast import fitted_and_future_shocks as _fitted_and_future_shocks

    post = fitted_ar1.idata_["posterior"]
    keep = np.arange(post.sizes["chain"] * post.sizes["draw"])
    out = _fitted_and_future_shocks(fitted_ar1, keep, 3, "ar1-future")
    n_fit = post.sizes[DIM_EPOCH]
    np.testing.assert_allclose(out[:, :, :n_fit], stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH))
    phi = stack_draws(post["shock_persistence"])
    sigma = stack_draws(post["sigma_shock_global"])
    last = stack_draws(post["shock_path_global"], DIM_EPOCH)[:, -1]
    m = stack_draws(post["shock_mean_global"])
    for h in (1, 2, 3):
        centre = phi**h * last - m
        r = (out[:, 0, n_fit + h - 1] - centre) / (sigma * np.sqrt(1 - phi ** (2 * h)))
        assert abs(r.mean()) < 0.15 and 0.9 < r.std() < 1.1, (h, r.mean(), r.std())
    np.testing.assert_allclose(out[:, 1:, n_fit:], out[:, :1, n_fit:].repeat(2, axis=1))


def test_ar1_predict_after_the_fit_moves_pages_together(small, fitted_ar1):
    """The PyMC predictive continues the path for visits after the fit: counts a year on
    move together from draw to draw (a shared shock), and the rate is the next epoch's."""
    obs = small[0]
    later = obs.replace(time=obs.time + 2 * L)
    tree = fitted_ar1.predict(later, n_draws=100, page_rates="posterior", seed="ar1-out")
    counts = tree["posterior_predictive"]["page_detections"].stack(s=("chain", "draw")).values
    corr = np.corrcoef(counts)[np.triu_indices(obs.n_pages, 1)]
    assert np.nanmean(corr) > 0.1
    post = fitted_ar1.idata_["posterior"]
    phi, sigma = post["shock_persistence"], post["sigma_shock_global"]
    last = post["shock_path_global"].isel({DIM_EPOCH: -1}, drop=True)
    offset = phi * last - post["shock_mean_global"] + sigma**2 * (1 - phi**2) / 2  # written out
    want = np.exp(post["log_rate"] + offset).transpose(*post["rate"].dims)
    np.testing.assert_allclose(post["rate"].values, want.values)
