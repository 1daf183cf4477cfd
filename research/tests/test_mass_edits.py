"""Tests of the mass-edit model (shocks plus an added rate per domain and epoch) against
independent oracles.

Oracles: a per-interval Bernoulli log-likelihood from the raw visits, with each interval's
integrated rate from :class:`bayesrate.simulate.PiecewiseConstant` (the page's
``exp(θ + shock) + exp(edit)`` per epoch); finite differences of the numpy likelihood;
scipy's adaptive quadrature for the leave-one-page-out terms; recovery of known edit rates
on a simulated world.
"""

from __future__ import annotations

import math
import warnings
from typing import ClassVar

import numpy as np
import pytest
from bayesrate_research.models.mass_edits import (
    EDIT_GLOBAL,
    EDIT_MEAN,
    EDIT_PERSISTENCE,
    EDIT_RATE,
    SIGMA_EDIT_DOMAIN,
    SIGMA_EDIT_GLOBAL,
    MassEditModel,
    future_global_edits,
)
from bayesrate_research.models.shocks import ShockModel

from bayesrate import simulate as sim
from bayesrate.constants import DIM_DOMAIN, DIM_EPOCH, DIM_PAGE
from bayesrate.draws import stack_draws
from bayesrate.likelihood import CensoredGroups, loglik_derivatives, loglik_grid
from bayesrate.models import get_model
from tests.helpers import seed_of
from tests.recovery import (
    assert_coverage,
    assert_inside_count,
    assert_mixed,
    assert_truths_within,
    seed_name,
)

L = 90 * 24.0
END = 475_000.0


# ---------------------------------------------------------------- numpy likelihood
def _interval_loglik(lam, exposure, added, changed) -> float:
    """Σ over single intervals of log P(outcome), integrated rate ``lam·E + A``."""
    x = lam * exposure + added
    return float(np.sum(np.where(changed, np.log(-np.expm1(-x)), -x)))


def test_added_rate_likelihood_against_intervals_and_finite_differences():
    """``CensoredGroups`` with an added rate: value against a sum over single intervals,
    score and information against central differences (the information may be negative:
    the likelihood is not concave in log λ with an added rate)."""
    rng = np.random.default_rng(seed_of("added-loglik"))
    n_pages = 5
    page = np.sort(rng.integers(0, n_pages, 80))
    exposure = rng.choice([1.0, 24.0, 200.0], 80)
    added = rng.choice([0.0, 0.01, 0.3, 2.0], 80)
    changed = rng.random(80) < 0.5
    busy = changed
    with np.errstate(divide="ignore"):
        log_added = np.log(added[busy])  # −inf where nothing is added
    groups = CensoredGroups(
        unchanged=np.bincount(page, weights=exposure * ~changed, minlength=n_pages),
        group_page=page[busy],
        group_log_exposure=np.log(exposure[busy]),
        group_count=np.ones(busy.sum()),
        unchanged_added=np.bincount(page, weights=added * ~changed, minlength=n_pages),
        group_log_added=log_added,
    )
    theta = rng.normal(-3.0, 1.5, n_pages)
    want = [
        _interval_loglik(math.exp(theta[p]), exposure[page == p], added[page == p],
                         changed[page == p])
        for p in range(n_pages)
    ]  # fmt: skip
    value, score, info = loglik_derivatives(groups, theta, order=2)
    np.testing.assert_allclose(value, want, rtol=1e-12)
    grid = loglik_grid(groups, theta[:, None] + np.array([-1e-4, 0.0, 1e-4]))
    np.testing.assert_allclose(grid[:, 1], want, rtol=1e-12)
    np.testing.assert_allclose(score, (grid[:, 2] - grid[:, 0]) / 2e-4, rtol=1e-6, atol=1e-8)
    second = (grid[:, 2] - 2 * grid[:, 1] + grid[:, 0]) / 1e-8
    np.testing.assert_allclose(info, -second, rtol=1e-3, atol=1e-4)
    # the same groups without the added rate are the plain likelihood
    plain = CensoredGroups(groups.unchanged, groups.group_page, groups.group_log_exposure,
                           groups.group_count)  # fmt: skip
    zero = CensoredGroups(
        groups.unchanged, groups.group_page, groups.group_log_exposure, groups.group_count,
        np.zeros(n_pages), np.full(busy.sum(), -np.inf),
    )  # fmt: skip
    for order in range(3):
        for a, b in zip(loglik_derivatives(plain, theta, order),
                        loglik_derivatives(zero, theta, order), strict=True):  # fmt: skip
            np.testing.assert_allclose(a, b, rtol=1e-12)
    # one added part alone is refused; selection keeps both
    with pytest.raises(ValueError, match="both"):
        CensoredGroups(groups.unchanged, groups.group_page, groups.group_log_exposure,
                       groups.group_count, unchanged_added=np.zeros(n_pages))  # fmt: skip
    part = groups.select(np.array([3, 1]))
    np.testing.assert_allclose(loglik_grid(part, theta[[3, 1]][:, None])[:, 0],
                               np.array(want)[[3, 1]], rtol=1e-12)  # fmt: skip


# ---------------------------------------------------------------- a world with mass edits
def _edit_world(
    seed: str,
    n_pages: int,
    n_domains: int,
    n_epochs: int,
    shock_sd: float = 0.3,
    edit_mean: float = math.log(0.02 / 24),
    edit_sd: float = 0.8,
):
    """Daily visits (random phase) over ``n_epochs`` epochs ending at END; a page's rate in
    epoch ``e`` is ``exp(θ_p + shock[d, e]) + exp(edit[d, e])``, ``edit`` the same for
    every page of the domain; domain means of ``θ`` spread by 0.5, pages by 1.0."""
    rng = sim.rng_from(seed)
    edges = END - L * np.arange(n_epochs, -1, -1)
    shock = shock_sd * rng.standard_normal((n_domains, n_epochs))
    # the model's structure: global levels, domain deviations summing to 0 over domains and
    # over epochs
    deviation = 0.3 * edit_sd * rng.standard_normal((n_domains, n_epochs))
    deviation = deviation - deviation.mean(0) - deviation.mean(1)[:, None] + deviation.mean()
    edit = edit_mean + edit_sd * rng.standard_normal((1, n_epochs)) + deviation
    dom = np.arange(n_pages) % n_domains
    domain_mean = math.log(0.1 / 24) + 0.5 * rng.standard_normal(n_domains)
    theta = rng.normal(domain_mean[dom], 1.0)
    procs = [
        sim.PiecewiseConstant(edges, np.exp(theta[p] + shock[dom[p]]) + np.exp(edit[dom[p]]))
        for p in range(n_pages)
    ]
    visits = []
    for _ in range(n_pages):
        v = np.arange(edges[0] + rng.uniform(0, 24), END + 1e-9, 24.0)
        visits.append(np.append(v[v < END], END))
    data = sim.simulate_pages(procs, visits, domains=[f"d{k}" for k in dom], rng=rng)
    return data.observations, theta, shock, edit, edges


def _brute_force(obs, log_rate, shock, edit, edges) -> np.ndarray:
    """Per page: Σ over raw intervals of log P(detected) or log P(not)."""
    out = np.zeros(obs.n_pages)
    for p in range(obs.n_pages):
        sl = slice(obs.offsets[p], obs.offsets[p + 1])
        t, c = obs.time[sl], obs.changed[sl]
        d = obs.domain_codes[p]
        rates = np.exp(log_rate[p] + shock[d]) + np.exp(edit[d])
        lam = sim.PiecewiseConstant(edges, rates).integrated_rate(t[:-1], t[1:])
        out[p] = np.sum(np.where(c[1:] > 0, np.log(-np.expm1(-lam)), -lam))
    return out


@pytest.fixture(scope="module")
def small():
    return _edit_world("mass-edits-small", 12, 3, 4)


@pytest.mark.parametrize(
    ("parameterisation", "shock_process", "edit_process"),
    [
        ("centred", "iid", "iid"),
        ("noncentred", "iid", "iid"),
        ("noncentred", "random_walk", "iid"),
        ("centred", "iid", "ar1"),
        ("noncentred", "iid", "ar1"),
    ],
)
def test_model_logp_equals_brute_force(small, parameterisation, shock_process, edit_process):
    """The observed log-probability (detections + quiet) at random points moves with the
    per-interval Bernoulli sum (the Binomial constants cancel in the differences), with
    iid shocks and with shocks that walk, iid edit levels and AR(1) ones."""
    obs, _, _, _, edges = small
    model = MassEditModel(
        model_config={
            "edit_parameterisation": parameterisation,
            "shock_process": shock_process,
            "edit_process": edit_process,
        }
    )
    pm_model = model.build_model(obs)
    wanted = [pm_model[name] for name in ("log_rate", "shock", EDIT_RATE)]
    values = pm_model.compile_fn(
        pm_model.replace_rvs_by_values(wanted), inputs=pm_model.value_vars,
        on_unused_input="ignore",
    )  # fmt: skip
    loglik = pm_model.compile_fn(
        pm_model.logp(vars=pm_model.observed_RVs, sum=True),
        inputs=pm_model.value_vars,
        on_unused_input="ignore",
    )
    rng = np.random.default_rng(
        seed_of(f"mass-edits-point-{parameterisation}-{shock_process}-{edit_process}")
    )
    base = pm_model.initial_point()
    got, want = [], []
    for _ in range(3):
        point = {k: v + rng.normal(0, 0.5, np.shape(v)) for k, v in base.items()}
        log_rate, shock, edit = values(point)
        assert np.ptp(edit) > 0.3 and np.ptp(shock) > 0.3  # effects that matter
        got.append(float(loglik(point)))
        want.append(_brute_force(obs, log_rate, shock, edit, edges).sum())
    for i in (1, 2):
        assert got[i] - got[0] == pytest.approx(want[i] - want[0], rel=1e-9, abs=1e-7)


@pytest.fixture(scope="module")
def fitted(small):
    model = MassEditModel(sampler_config={"draws": 200, "tune": 200, "chains": 2, "seed": "me"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(small[0])
    return model


def test_page_loglik_equals_brute_force(small, fitted):
    obs, _, _, _, edges = small
    post = fitted.thinned_posterior(4)
    log_rate = stack_draws(post["log_rate"], DIM_PAGE)
    shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    edit = stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH)
    got = fitted.page_loglik(4)
    for i in range(len(log_rate)):
        want = _brute_force(obs, log_rate[i], shock[i], edit[i], edges)
        np.testing.assert_allclose(got[i], want, rtol=1e-10)


def test_leave_one_page_out_terms_equal_quadrature(small, fitted):
    """Each page's rate integrated out under the draw's shocks and edit rates, against
    scipy's adaptive quadrature of the per-interval likelihood times Normal(mu_domain,
    sigma_page), over the whole real line (the likelihood flattens at low rates)."""
    from scipy.integrate import quad
    from scipy.stats import norm

    obs, _, _, _, edges = small
    post = fitted.thinned_posterior(2)
    got = fitted.marginal_page_loglik(post)
    mu = stack_draws(post["mu_domain"], DIM_DOMAIN)
    sigma = stack_draws(post["sigma_page"])
    shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    edit = stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH)
    # the quietest page (its own rate least pinned) and two others
    for p in (int(np.argmin(obs.changes_per_page)), 4, 9):
        for i in range(len(got)):
            d = obs.domain_codes[p]

            def ll(u, i=i, p=p):
                return _brute_force(obs, np.full(obs.n_pages, u), shock[i], edit[i], edges)[p]

            scale = ll(mu[i, d])

            def integrand(u, i=i, d=d, scale=scale, ll=ll):
                return math.exp(ll(u) - scale) * norm.pdf(u, mu[i, d], sigma[i])

            lo, hi = mu[i, d] - 12 * sigma[i], mu[i, d] + 12 * sigma[i]
            value, _ = quad(integrand, lo, hi, epsabs=0, epsrel=1e-10, limit=400)
            assert got[i, p] == pytest.approx(scale + math.log(value), abs=1e-6)


def test_checks_and_comparison_take_it(small, fitted):
    """The predictive checks count by the model's own groups (every observed detection
    once; its own pages replicated without an extreme mean) and PSIS-LOO compares it with
    the shocks model on the same data."""
    from bayesrate.checks.compare import compare
    from bayesrate.checks.ppc import ppc_for

    obs = small[0]
    checks = ppc_for(fitted, obs, seed="mass-edits-ppc", n_draws=40)
    for replication in checks.replications:
        result = checks.result(replication)
        assert result.hour_observed.sum() == obs.changes_per_page.sum()
        assert result.changes_replicated.shape == (40, obs.n_pages)
    assert 0.025 < checks.conditional.p_values()["mean_changes"] < 0.975
    shocks = ShockModel(sampler_config={"draws": 200, "tune": 200, "chains": 2, "seed": "me"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shocks.fit(obs)
        table = compare({"mass_edits": fitted, "shocks": shocks}).table
    assert set(table.index) == {"mass_edits", "shocks"}
    assert np.isfinite(table["elpd"]).all()


def test_rate_is_the_future_epoch_mean(fitted):
    post = fitted.idata_["posterior"]
    assert fitted.shocked_domains(fitted.data_).all()  # 4 pages per domain
    shocks = post["sigma_shock_global"] ** 2 + post["sigma_shock_domain"] ** 2
    edits = post[SIGMA_EDIT_GLOBAL] ** 2 + post[SIGMA_EDIT_DOMAIN] ** 2
    want = np.exp(post["log_rate"] + shocks / 2) + np.exp(post[EDIT_MEAN] + edits / 2)
    np.testing.assert_allclose(post["rate"].values, want.transpose(*post["rate"].dims).values)


def test_predict_inside_the_fit_and_after_it(small, fitted):
    """Inside the fit each page's predictive mean count is the expected count of its raw
    intervals under the draws' rates, edits included (within 5 Monte Carlo standard
    errors); after it the pages' counts move together from draw to draw (fresh edit rates
    and shocks shared by the pages)."""
    obs, _, _, _, edges = small
    n_draws = 100
    inside = fitted.predict(obs, n_draws=n_draws, page_rates="posterior", seed="in")
    counts = inside["posterior_predictive"]["page_detections"].stack(s=("chain", "draw")).values
    post = fitted.thinned_posterior(n_draws)
    log_rate = stack_draws(post["log_rate"], DIM_PAGE)
    shock = stack_draws(post["shock"], DIM_DOMAIN, DIM_EPOCH)
    edit = stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH)
    expected = np.zeros(obs.n_pages)
    for p in range(obs.n_pages):
        t = obs.time[obs.offsets[p] : obs.offsets[p + 1]]
        d = obs.domain_codes[p]
        for s in range(n_draws):
            rates = np.exp(log_rate[s, p] + shock[s, d]) + np.exp(edit[s, d])
            lam = sim.PiecewiseConstant(edges, rates).integrated_rate(t[:-1], t[1:])
            expected[p] += np.sum(-np.expm1(-lam)) / n_draws
    error = counts.std(axis=1) / np.sqrt(n_draws)
    assert np.all(np.abs(counts.mean(axis=1) - expected) < 5 * error + 1e-9)
    later = obs.replace(time=obs.time + 2 * L)  # two of the four epochs after the fit
    future = fitted.predict(later, n_draws=200, page_rates="posterior", seed="out")
    counts = future["posterior_predictive"]["page_detections"].stack(s=("chain", "draw")).values
    assert np.nanmean(np.corrcoef(counts)[np.triu_indices(obs.n_pages, 1)]) > 0.1


def _fitted_stub(post, shocked: list[bool]):
    """A stand-in for a fitted model: its posterior and which domains have effects of
    their own."""

    class Fitted:
        idata_: ClassVar[dict] = {"posterior": post}
        data_ = None

        @staticmethod
        def shocked_domains(_):
            return np.array(shocked)

    return Fitted()


def test_future_edits_in_the_forecast_continue_each_draw():
    """The forecast's edit rates: the fitted epochs are the posterior's, each later epoch a
    fresh draw of edit_log_rate_mean + σ_global·z (+ σ_domain·z for a domain of its own)."""
    import xarray as xr
    from bayesrate_research.forecast import fitted_and_future_edits as _fitted_and_future_edits

    rng = np.random.default_rng(seed_of("future-edits"))
    n_draws, n_domains, n_epochs = 4000, 3, 2
    fitted = rng.normal(-8, 1, (1, n_draws, n_domains, n_epochs))
    mean, sg, sd = (
        rng.normal(-8, 0.5, n_draws),
        rng.uniform(0.2, 1, n_draws),
        rng.uniform(0.1, 0.5, n_draws),
    )
    post = xr.Dataset({
        EDIT_RATE: (("chain", "draw", DIM_DOMAIN, DIM_EPOCH), fitted),
        EDIT_MEAN: (("chain", "draw"), mean[None]),
        SIGMA_EDIT_GLOBAL: (("chain", "draw"), sg[None]),
        SIGMA_EDIT_DOMAIN: (("chain", "draw"), sd[None]),
    })  # fmt: skip

    fitted_model = _fitted_stub(post, [True, True, False])

    keep = np.arange(n_draws)
    got = _fitted_and_future_edits(fitted_model, keep, 3, "s")
    assert got.shape == (n_draws, n_domains, n_epochs + 3)
    np.testing.assert_array_equal(got[:, :, :n_epochs], fitted[0])
    future = got[:, :, n_epochs:]
    total = np.sqrt(sg**2 + sd**2)
    for d, sd_d in ((0, total), (1, total), (2, sg)):
        z = (future[:, d, :] - mean[:, None]) / sd_d[:, None]
        assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    # a domain without effects of its own takes the global draw alone: shared with the
    # others, correlation E[σ_global / total]
    z0 = (future[:, 0, :] - mean[:, None]) / total[:, None]
    z2 = (future[:, 2, :] - mean[:, None]) / sg[:, None]
    assert np.corrcoef(z0.ravel(), z2.ravel())[0, 1] == pytest.approx(np.mean(sg / total), abs=0.03)


@pytest.mark.parametrize("parameterisation", ["centred", "noncentred"])
def test_ar1_edit_level_prior_has_the_stationary_moments(small, parameterisation):
    """Prior draws of ``edit_log_rate_global − edit_log_rate_mean`` over the 4 epochs:
    divided by ``σ_global`` they have variance 1 at every epoch, and lag-``k`` products
    average ``E[φ^k]`` under φ ~ Beta(2, 2) (0.5, 0.3, 0.2), both parameterisations."""
    import pymc as pm

    model = MassEditModel(
        model_config={"edit_process": "ar1", "edit_parameterisation": parameterisation}
    )
    with model.build_model(small[0]):
        prior = pm.sample_prior_predictive(
            draws=20_000,
            var_names=[EDIT_GLOBAL, EDIT_MEAN, SIGMA_EDIT_GLOBAL, EDIT_PERSISTENCE],
            random_seed=seed_of(f"ar1-edit-prior-{parameterisation}"),
        )["prior"]
    x = stack_draws(prior[EDIT_GLOBAL], DIM_EPOCH) - stack_draws(prior[EDIT_MEAN])[:, None]
    x = x / stack_draws(prior[SIGMA_EDIT_GLOBAL])[:, None]
    np.testing.assert_allclose((x**2).mean(axis=0), 1.0, atol=0.04)
    for k, want in ((1, 0.5), (2, 0.3), (3, 0.2)):  # E[φ^k] = Π_{j<k} (2 + j)/(4 + j)
        assert (x[:, :-k] * x[:, k:]).mean() == pytest.approx(want, abs=0.03)


def test_ar1_future_edits_continue_the_last_fitted_level():
    """With ``edit_persistence`` in the posterior the forecast's global edit level ``h``
    epochs after the fit is, given the draw's last fitted level ``x``, Normal(``m +
    φ^h(x − m)``, ``σ²(1 − φ^(2h))``) (Monte Carlo over 20,000 draws); ``rate``'s edit part
    (:meth:`future_edit_log_mean`) is the log of the first future epoch's mean
    ``E[exp(level)]`` per draw (200,000 normal draws each for 3 draws)."""
    import xarray as xr
    from bayesrate_research.forecast import fitted_and_future_edits as _fitted_and_future_edits

    rng = np.random.default_rng(seed_of("ar1-future-edits"))
    n_draws, n_domains, n_epochs = 20_000, 2, 3
    mean = rng.normal(-8, 0.5, n_draws)
    sg, phi = rng.uniform(0.3, 1.2, n_draws), rng.uniform(0.1, 0.95, n_draws)
    level = mean[:, None] + rng.normal(0, 1, (n_draws, n_epochs)) * sg[:, None]
    fitted = np.broadcast_to(level[:, None, :], (n_draws, n_domains, n_epochs))
    post = xr.Dataset({
        EDIT_RATE: (("chain", "draw", DIM_DOMAIN, DIM_EPOCH), fitted[None]),
        EDIT_GLOBAL: (("chain", "draw", DIM_EPOCH), level[None]),
        EDIT_MEAN: (("chain", "draw"), mean[None]),
        SIGMA_EDIT_GLOBAL: (("chain", "draw"), sg[None]),
        EDIT_PERSISTENCE: (("chain", "draw"), phi[None]),
    })  # fmt: skip

    fitted_model = _fitted_stub(post, [False, False])

    got = _fitted_and_future_edits(fitted_model, np.arange(n_draws), 3, "s")
    np.testing.assert_array_equal(got[:, :, :n_epochs], fitted)
    np.testing.assert_array_equal(got[:, 0], got[:, 1])  # global only: shared
    gap = level[:, -1] - mean
    for h in (1, 2, 3):
        centre = mean + phi**h * gap
        sd = sg * np.sqrt(1 - phi ** (2 * h))
        z = (got[:, 0, n_epochs + h - 1] - centre) / sd
        assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    import pytensor.tensor as pt  # the graph of the model's own predictive, same values

    m, x, p, s_g = (pt.scalar(k) for k in ("m", "x", "p", "s"))
    zz = pt.vector("z")
    z3 = rng.standard_normal(3)
    graph = future_global_edits(m, s_g, zz, 3, x, p).eval(
        {m: mean[0], s_g: sg[0], zz: z3, x: level[0, -1], p: phi[0]}
    )
    numpy = future_global_edits(mean[:1], sg[:1], z3[None], 3, level[:1, -1], phi[:1])[0]
    np.testing.assert_allclose(graph, numpy, rtol=1e-12)
    want = MassEditModel.future_edit_log_mean(fitted_model, post, None).isel(domain=0)
    for s in range(3):
        centre, sd = mean[s] + phi[s] * gap[s], sg[s] * np.sqrt(1 - phi[s] ** 2)
        one = rng.normal(centre, sd, 200_000)
        assert np.log(np.exp(one).mean()) == pytest.approx(float(want.values[0, s]), abs=0.01)


def test_registered_and_validated():
    assert get_model("mass_edits") is MassEditModel and issubclass(MassEditModel, ShockModel)
    with pytest.raises(ValueError, match="edit_sd_scale"):
        MassEditModel(model_config={"edit_sd_scale": 0})
    with pytest.raises(ValueError, match="edit_parameterisation"):
        MassEditModel(model_config={"edit_parameterisation": "auto"})
    with pytest.raises(ValueError, match="ar1"):
        MassEditModel(model_config={"shock_process": "ar1"})
    with pytest.raises(ValueError, match="edit_process"):
        MassEditModel(model_config={"edit_process": "random_walk"})


@pytest.mark.slow
def test_recovers_edit_rates_and_page_rates(recovery_seed):
    """A world with known edit rates (8 epochs, 6 domains, 240 pages, shocks of sd 0.3):
    the page log-rates' 90% intervals cover the truth for 85-95% of pages, the edit
    log-rates' for at least 75% of the 48 cells, the mean edit rate's and its spread's hold
    their truth. The hierarchical rule for pages and domains (``auto``: 40 pages per
    domain pin the domain means), 4 × 3000 draws (non-centred edit effects of quiet epochs
    mix slowly: bulk ESS 172 of 4 × 1000) after 2000 tuning steps (with 1000, the packages
    installed on 2026-12-04 (pymc 6.3.2, nutpie 0.16.11) left R-hat 1.021 on
    ``sigma_shock_global``; the same code passed with the earlier install)."""
    world = seed_name("mass-edits-recovery", recovery_seed)
    obs, theta, shock, edit, _ = _edit_world(world, 240, 6, 8)
    model = MassEditModel(
        {"parameterisation": "auto"},
        sampler_config={"draws": 3000, "tune": 2000, "chains": 4, "seed": world},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    assert_mixed(model.diagnostics_)
    post = model.idata_["posterior"]
    level = shock.mean(axis=1)  # the shocks' zero-sum decomposition
    true_rate = theta + level[obs.domain_codes]
    order = np.argsort(obs.pages.index.to_numpy())
    lo, hi = np.quantile(stack_draws(post["log_rate"], DIM_PAGE), [0.05, 0.95], axis=0)
    assert_coverage((lo <= true_rate[order]) & (true_rate[order] <= hi), "page log-rates")
    lo, hi = np.quantile(stack_draws(post[EDIT_RATE], DIM_DOMAIN, DIM_EPOCH), [0.05, 0.95], axis=0)
    assert_inside_count((lo <= edit) & (edit <= hi))
    draws = np.column_stack(
        [stack_draws(post[EDIT_MEAN]), np.log(stack_draws(post[SIGMA_EDIT_GLOBAL]))]
    )
    assert_truths_within(draws, [math.log(0.02 / 24), math.log(0.8)], "edit mean, log spread")
