"""The models as PyMC sees them: observed interval groups, PyMC's pointwise log-likelihood
and predictive draws, ``predict`` for new pages, and a saved fit that carries its data.

Oracles: the raw-visit log-likelihoods of ``tests.helpers`` (interval by interval, the
modulated one with a minute-by-minute integral of the multipliers on pandas' clock), and
brute-force Monte Carlo from the posterior draws with one Bernoulli per interval.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import gammaln

from bayesrate.errors import ArtifactError
from bayesrate.models import (
    CensoredModel,
    ConvergenceWarning,
    HierarchicalModel,
    ModulatedModel,
    RateModel,
)
from bayesrate.observations import Observations
from tests.helpers import interval_exposures, raw_loglik, raw_loglik_modulated, seed_of

with warnings.catch_warnings():
    # pymc 6.3 imports IfElse from its deprecated pytensor location (attributed to pymc)
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401

#: short fits whose tests read the draws, not the convergence gates: no near-miss rerun
FAST = {"draws": 500, "tune": 500, "chains": 2, "seed": "pymc-native", "more_draws": False}
#: 2024-03-29T00:00Z in hours; Paris moves to summer time on 2024-03-31 01:00Z
FRIDAY = 475_464.0


def _world(rng, domains, n_pages, n_visits, start=FRIDAY) -> pd.DataFrame:
    """Pages on regular grids (shifted by half-hours) with rates and steps set per domain."""
    frames = []
    for d, (log_rate, step) in domains.items():
        for i in range(n_pages):
            times = start + 0.5 * i + step * np.arange(n_visits)
            rate = np.exp(log_rate + 0.5 * rng.standard_normal())
            p = -np.expm1(-rate * step)
            flags = np.r_[0, (rng.random(n_visits - 1) < p).astype(int)]
            frames.append(
                pd.DataFrame({"page": f"{d}{i}", "domain": d, "time": times, "changed": flags})
            )
    return pd.concat(frames, ignore_index=True)


def _fit(model, obs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # small fits; gates not tested
        return model.fit(obs)


@pytest.fixture(scope="module")
def obs() -> Observations:
    rng = np.random.default_rng(seed_of("pymc-native-world"))
    domains = {"x": (-2.5, 3.0), "y": (-1.0, 2.0), "z": (-4.0, 5.0)}
    frame = _world(rng, domains, n_pages=4, n_visits=40)
    return Observations.from_frame(frame, time_unit="h")


@pytest.fixture(scope="module")
def hier(obs):
    return _fit(HierarchicalModel(sampler_config=FAST), obs)


@pytest.fixture(scope="module")
def modulated(obs):
    model = ModulatedModel({"timezone": "Europe/Paris", "hour_sd": 0.8}, FAST)
    return _fit(model, obs)


def _binomial_constants(model) -> np.ndarray:
    """Σ log C(n, c) per page over the fitted groups (from the saved result)."""
    const, observed = model.idata_["constant_data"], model.idata_["observed_data"]
    n = np.asarray(const["group_trials"], dtype=float)
    c = np.asarray(observed["detections"], dtype=float)
    per_group = gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
    pages = list(model.idata_["posterior"]["page"].values)
    index = [pages.index(p) for p in np.asarray(const["group_page"])]
    return np.bincount(index, weights=per_group, minlength=len(pages))


def _pymc_page_loglik(model, ll: xr.Dataset, chain: int, draw: int) -> np.ndarray:
    """PyMC's pointwise log-likelihood at one draw, summed per page."""
    const = model.idata_["constant_data"]
    pages = list(model.idata_["posterior"]["page"].values)
    index = [pages.index(p) for p in np.asarray(const["group_page"])]
    detections = ll["detections"].isel(chain=chain, draw=draw).values
    quiet = ll["quiet"].isel(chain=chain, draw=draw).values
    return quiet + np.bincount(index, weights=detections, minlength=len(pages))


@pytest.mark.parametrize("kind", ["censored", "hierarchical", "modulated"])
def test_pymc_pointwise_loglik_sums_to_the_raw_visit_loglik(kind, obs, hier, modulated):
    """``pm.compute_log_likelihood`` per group, summed per page, is each page's exact
    log-likelihood plus the Binomial constants (modulated: across a DST change)."""
    if kind == "censored":
        model = _fit(CensoredModel({"alpha": 2.0, "beta_days": 0.5}, FAST), obs)
    else:
        model = hier if kind == "hierarchical" else modulated
    ll = model.compute_log_likelihood(max_draws=100)
    assert ll["detections"].dims == ("chain", "draw", "interval_group")
    assert ll["quiet"].dims == ("chain", "draw", "page")
    assert model.idata_["log_likelihood"] is not None
    post = model.thinned_posterior(100)
    for chain, draw in ((0, 3), (1, 17)):
        point = post.isel(chain=chain, draw=draw)
        rate = np.exp(point["log_rate"].values)
        if kind == "modulated":
            m = np.exp(point["log_multiplier"].values)
            want = [raw_loglik_modulated(obs, p, rate[p], m, "Europe/Paris") for p in range(12)]
        else:
            want = [raw_loglik(obs, p, rate[p]) for p in range(obs.n_pages)]
        got = _pymc_page_loglik(model, ll, chain, draw) - _binomial_constants(model)
        np.testing.assert_allclose(got, want, rtol=1e-9)


def test_fitted_graph_uses_the_fused_op(hier, modulated):
    """The observed Binomials' log-density runs through the numba Op, not a gather graph,
    and its gradient is the Op's own (measured: a separate scatter pass cost 19%)."""
    import pytensor
    from pytensor.graph.traversal import ancestors

    for model in (hier, modulated):
        logp = model.model.logp()
        ops = {type(v.owner.op).__name__ for v in ancestors([logp]) if v.owner is not None}
        assert "BinomialTerms" in ops
        # NUTS's gradient is the one the forward pass summed: no separate scatter pass
        grads = pytensor.grad(logp, model.model.value_vars)
        ops = {type(v.owner.op).__name__ for v in ancestors(grads) if v.owner is not None}
        assert "ScatterToFactors" not in ops


def test_posterior_predictive_of_the_fitted_model(hier, obs):
    """``pm.sample_posterior_predictive`` draws both observed variables; the quiet pages'
    draws have the mean the posterior implies for their unchanged intervals."""
    pred = hier.sample_posterior_predictive(max_draws=1000)
    assert set(pred.data_vars) == {"detections", "quiet"}
    assert "posterior_predictive" in hier.idata_.children
    trials = np.asarray(hier.idata_["constant_data"]["group_trials"])
    assert (pred["detections"].values <= trials).all()
    # oracle: every interval length a page never saw a change at, from the raw visits
    post = hier.thinned_posterior(1000)
    rate = np.exp(post["log_rate"].values.reshape(-1, obs.n_pages))
    quiet = pred["quiet"].values.reshape(-1, obs.n_pages)
    for page in range(obs.n_pages):
        sl = slice(obs.offsets[page], obs.offsets[page + 1])
        tau = np.round(np.diff(obs.time[sl]), 9)
        changed = obs.changed[sl][1:].astype(bool)
        quiet_tau = tau[~np.isin(tau, tau[changed])]
        p = -np.expm1(-rate[:, page, None] * quiet_tau[None, :])
        expected = p.sum(axis=1)
        se = np.sqrt((expected * (1 - expected / max(len(quiet_tau), 1))).mean() / len(rate))
        assert abs(quiet[:, page].mean() - expected.mean()) < 4 * se + 1e-12


def _new_pages() -> Observations:
    """Two pages of fitted domain ``x``... (one), and two of an unseen domain ``new``."""
    frames = []
    for label, domain, step, n in (("kx", "x", 2.0, 30), ("n1", "new", 2.0, 30),
                                   ("n2", "new", 5.0, 15)):  # fmt: skip
        times = FRIDAY + 24.0 + step * np.arange(n)
        frames.append(pd.DataFrame({"page": label, "domain": domain, "time": times, "changed": 0}))
    return Observations.from_frame(pd.concat(frames, ignore_index=True), time_unit="h")


def _brute_force_new_pages(model, new: Observations, rng, per_draw: int, exposures):
    """Page totals of new pages by Monte Carlo from the posterior draws: fresh domain
    means for unseen domains (one per draw, shared by its pages), fresh page log-rates,
    one Bernoulli per interval."""
    post = model.idata_["posterior"]
    mu_domain = post["mu_domain"].stack(s=("chain", "draw")).transpose("s", "domain")
    fitted = [str(d) for d in mu_domain["domain"].values]
    mu_global = post["mu_global"].values.reshape(-1)
    sd_domain = post["sigma_domain"].values.reshape(-1)
    sd_page = post["sigma_page"].values.reshape(-1)
    n = len(mu_global) * per_draw
    repeat = np.repeat(np.arange(len(mu_global)), per_draw)
    new_mean = mu_global[repeat] + sd_domain[repeat] * rng.standard_normal(n)
    totals = np.zeros((n, new.n_pages))
    for page in range(new.n_pages):
        domain = str(new.pages["domain"].iloc[page])
        if domain in fitted:
            mean = mu_domain.values[repeat, fitted.index(domain)]
        else:
            mean = new_mean
        log_rate = mean + sd_page[repeat] * rng.standard_normal(n)
        exposure = exposures(page, repeat)  # (n, intervals)
        p = -np.expm1(-np.exp(log_rate)[:, None] * exposure)
        totals[:, page] = (rng.random(p.shape) < p).sum(axis=1)
    return totals


def _compare_totals(predicted: np.ndarray, brute: np.ndarray) -> None:
    """Means, P(no detection) and the correlation of the unseen domain's two pages."""
    for page in range(predicted.shape[1]):
        a, b = predicted[:, page], brute[:, page]
        se = np.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 4 * se, (page, a.mean(), b.mean())
        pa, pb = (a == 0).mean(), (b == 0).mean()
        se0 = np.sqrt(pa * (1 - pa) / len(a) + pb * (1 - pb) / len(b))
        assert abs(pa - pb) < 4 * se0 + 1e-3, (page, pa, pb)
    ca = np.corrcoef(predicted[:, 1], predicted[:, 2])[0, 1]
    cb = np.corrcoef(brute[:, 1], brute[:, 2])[0, 1]
    assert abs(ca - cb) < 4 / np.sqrt(len(predicted)), (ca, cb)
    assert ca > 0.1  # pages of one new domain share its mean


def test_predict_new_pages_of_known_and_unknown_domains(hier):
    new = _new_pages()
    draws = []
    for seed in ("p1", "p2", "p3"):
        tree = hier.predict(new, n_draws=None, seed=seed)
        pred = tree["posterior_predictive"]
        draws.append(pred["page_detections"].values.reshape(-1, new.n_pages))
    predicted = np.concatenate(draws)
    const = tree["constant_data"]
    assert list(const["known_domain"].values) == [True, False, False]
    assert pred["detections"].dims == ("chain", "draw", "interval_group")
    assert (pred["detections"].sum("interval_group") == pred["page_detections"].sum("page")).all()

    def exposures(page, repeat):
        sl = slice(new.offsets[page], new.offsets[page + 1])
        return np.broadcast_to(np.diff(new.time[sl]), (len(repeat), new.visits_per_page[page] - 1))

    rng = np.random.default_rng(seed_of("predict-brute-force"))
    brute = _brute_force_new_pages(hier, new, rng, per_draw=10, exposures=exposures)
    _compare_totals(predicted, brute)


def test_modulated_predict_uses_each_draws_multipliers(modulated):
    """New pages across the DST change: the oracle integrates each draw's multipliers
    minute by minute on pandas' clock."""
    new = _new_pages()
    predicted = np.concatenate(
        [
            modulated.predict(new, n_draws=None, seed=s)["posterior_predictive"][
                "page_detections"
            ].values.reshape(-1, new.n_pages)
            for s in ("m1", "m2")
        ]
    )
    post = modulated.idata_["posterior"]
    m = np.exp(post["log_multiplier"].values.reshape(-1, 168))
    overlaps = []
    for page in range(new.n_pages):  # (intervals, 168) minute counts per bucket, oracle
        sl = slice(new.offsets[page], new.offsets[page + 1])
        overlaps.append(
            np.array(
                [
                    interval_exposures(new.time[sl], np.eye(168)[b], "Europe/Paris")
                    for b in range(168)
                ]
            ).T
        )

    def exposures(page, repeat):
        return m[repeat] @ overlaps[page].T

    rng = np.random.default_rng(seed_of("predict-modulated-brute-force"))
    brute = _brute_force_new_pages(modulated, new, rng, per_draw=6, exposures=exposures)
    _compare_totals(predicted, brute)


def test_predict_refuses_posterior_rates_for_other_pages(hier):
    with pytest.raises(ValueError, match="fitted pages"):
        hier.predict(_new_pages(), page_rates="posterior")
    with pytest.raises(ValueError, match="page_rates"):
        hier.predict(_new_pages(), page_rates="prior")


def test_saved_fit_carries_its_data_and_refuses_edited_data(hier, obs, tmp_path):
    path = hier.save(tmp_path / "fit.nc")
    loaded = RateModel.load(path)
    assert type(loaded) is HierarchicalModel
    assert loaded.data_.fingerprint == obs.fingerprint
    pd.testing.assert_frame_equal(loaded.page_summary_, hier.page_summary_)
    # the rebuilt model has the fitted model's variables and evaluates the same log-density
    assert sorted(v.name for v in loaded.model.free_RVs) == sorted(
        v.name for v in hier.model.free_RVs
    )
    point = hier.model.initial_point()
    assert loaded.model.compile_logp()(point) == pytest.approx(
        hier.model.compile_logp()(point), rel=1e-12
    )
    tree = xr.open_datatree(path, engine="h5netcdf").load()
    fit_data = tree["fit_data"].to_dataset()
    flags = fit_data["changed"].values.copy()
    flags[np.flatnonzero(flags)[0]] = 0
    tree["fit_data"] = fit_data.assign(changed=("visit", flags))
    tree.to_netcdf(tmp_path / "edited.nc", engine="h5netcdf")
    with pytest.raises(ArtifactError, match="fit_data do not match"):
        RateModel.load(tmp_path / "edited.nc")


@pytest.mark.parametrize("timezone", ["Europe/Paris", "America/New_York", "UTC"])
def test_quiet_span_is_each_pages_quiet_exposure(obs, timezone):
    """The modulated model's quiet exposure as span minus busy groups equals, per page, the
    sum over its intervals without a detection of the multiplier integrated on pandas'
    clock (independent of ``bayesrate.clock``); the obs cross the spring DST change of
    Paris (2024-03-31) and New York (2024-03-10 is before them: none there)."""
    import pytensor.tensor as pt

    from bayesrate.models.groups import visit_patterns
    from bayesrate.models.likelihood import QuietSpan

    rng = np.random.default_rng(seed_of(f"quiet-span-{timezone}"))
    m = np.exp(rng.normal(0.0, 0.7, 168))
    groups = visit_patterns(obs, timezone).groups("hour_of_week")
    busy = groups.select(groups.detected > 0)
    span = QuietSpan.of(obs, timezone, busy)
    got = span.exposure(pt.as_tensor_variable(m)).eval()
    want = np.zeros(obs.n_pages)
    for p in range(obs.n_pages):
        sl = slice(obs.offsets[p], obs.offsets[p + 1])
        exposures = interval_exposures(obs.time[sl], m, timezone)
        want[p] = sum(e for e, c in zip(exposures, obs.changed[sl][1:], strict=True) if not c)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_modulated_uses_the_span_where_it_is_cheaper(obs):
    """Regular crawls (few busy groups per page) take the span; irregular visits (the
    case study's shape: most intervals their own busy group) keep the pages × 168 product."""
    from bayesrate.models.groups import visit_patterns
    from bayesrate.simulate import pages_like

    model = ModulatedModel()
    irregular = pages_like(20, seed="span-choice", history="case-study").observations
    for data, expect_span in ((obs, True), (irregular, False)):
        groups = visit_patterns(data, "UTC").groups("hour_of_week")
        busy = groups.select(groups.detected > 0)
        assert (model._quiet_span(data, busy) is not None) == expect_span


# --------------------------------------------------------------------------- the dynamic family
#: the dynamic family's variants: model, config, whether its paths are integrated on the grid
DYNAMIC_VARIANTS = {
    "grid": ("dynamic", {"grid_size": 9}),
    "grid-reverting": ("dynamic", {"grid_size": 9, "walk": "reverting"}),
    "laplace": ("dynamic", {"grid_size": 9, "path_integral": "laplace"}),
    "excursion": ("excursion", {"grid_size": 9}),
}


def _as_fitted_to_prior_draws(model, data, n: int, seed: str):
    """``model`` as if fitted to ``data``, its posterior ``n`` prior draws of the
    population (every free variable and the deterministics the paths take)."""
    import pymc as pm

    pm_model = model.build_model(data)
    names = [rv.name for rv in pm_model.free_RVs]
    names += [n for n in ("mu_domain", "sigma_walk") if n not in names]
    prior = pm.sample_prior_predictive(
        draws=n, model=pm_model, var_names=names, random_seed=seed_of(seed) % 2**32
    )
    const = xr.Dataset({"domain": (("page",), np.asarray(data.pages["domain"]).astype(str))})
    model.idata_ = xr.DataTree.from_dict(
        {"posterior": prior["prior"].to_dataset(), "constant_data": const}
    )
    return model


@pytest.mark.parametrize("variant", list(DYNAMIC_VARIANTS))
def test_dynamic_page_terms_sum_to_the_former_potential(variant):
    """The observed ``page_detections``' terms, one per page, sum to the scalar kernel the
    model added as its potential before (on the same parameters of the graph), at points
    around the initial point."""
    from bayesrate.models import get_model
    from bayesrate.models.laplace import PathLayout, laplace_paths_logp
    from tests.models.dynamic_checks import tiny_world

    tiny = tiny_world()
    name, config = DYNAMIC_VARIANTS[variant]
    model = get_model(name)(config)
    pm_model = model.build_model(tiny)
    assert not pm_model.potentials
    rv = pm_model["page_detections"]
    params = rv.owner.op.dist_params(rv.owner)
    if variant.startswith("grid"):
        potential = model._paths(tiny, *params)
    else:
        rho, level = [*params[3:], None, None][:2]
        layout = PathLayout.from_cells(model.cells(tiny))
        potential = laplace_paths_logp(*params[:3], layout, 1, rho, level)
    terms = pm_model.logp(vars=[rv], sum=False, jacobian=False)[0]
    outputs = [terms, *pm_model.replace_rvs_by_values([potential])]
    values = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(seed_of(f"native-terms-{variant}"))
    base = pm_model.initial_point()
    for _ in range(3):
        got, want = values({k: v + rng.normal(0, 0.6, np.shape(v)) for k, v in base.items()})
        assert got.shape == (tiny.n_pages,)
        assert got.sum() == pytest.approx(float(want), rel=1e-12)


@pytest.mark.parametrize("variant", list(DYNAMIC_VARIANTS))
def test_dynamic_pointwise_loglik_is_each_pages_integrated_paths(variant):
    """``pm.compute_log_likelihood`` gives one term per page: on the grid every path's
    probability enumerated (:func:`paths_by_enumeration`, scipy's Normal CDFs and a
    Bernoulli per interval); with Laplace paths the kernel's per-page ``log Z``. Each term
    is :meth:`marginal_page_loglik`'s (and so ``page_loglik``'s)."""
    from bayesrate.models import DynamicModel, get_model
    from bayesrate.models.laplace import PathLayout, laplace_logp_grad
    from tests.models.dynamic_checks import paths_by_enumeration, tiny_world

    tiny = tiny_world()
    name, config = DYNAMIC_VARIANTS[variant]
    model = _as_fitted_to_prior_draws(get_model(name)(config), tiny, 4, f"native-{variant}")
    ll = model.compute_log_likelihood()
    assert list(ll.data_vars) == ["page_detections"]
    assert ll["page_detections"].dims == ("chain", "draw", "page")
    got = ll["page_detections"].values[0]
    post = model.thinned_posterior()
    draws = model._stacked(post, names=DynamicModel.filter_vars)  # the population's
    dom, cells = tiny.domain_codes, model.cells(tiny)
    for i in range(len(got)):
        if variant.startswith("grid"):
            phi = draws["walk_phi"][i] if "walk_phi" in draws else None
            want, _ = paths_by_enumeration(model, tiny, draws["mu_domain"][i],
                                           draws["sigma_page"][i], draws["sigma_walk"][i],
                                           phi=phi)  # fmt: skip
            np.testing.assert_allclose(got[i], want, rtol=1e-9)
        else:
            layout = PathLayout.from_cells(cells)
            sd, phi = draws["sigma_walk"][i, dom], draws.get("walk_phi", np.ones(4))[i]
            step = sd * np.sqrt(1 - phi**2) if variant == "excursion" else sd
            level_sd = draws["sigma_page"][i] if variant == "excursion" else 0.0
            first_sd = sd if variant == "excursion" else draws["sigma_page"][i]
            kernel = laplace_logp_grad(draws["mu_domain"][i, dom], first_sd, step, layout,
                                       rho=phi, level_sd=level_sd)  # fmt: skip
            np.testing.assert_allclose(got[i], kernel.per_page, rtol=1e-12)
    pred = model.sample_posterior_predictive()["page_detections"]
    assert pred.dims == ("chain", "draw", "page") and pred.dtype.kind == "i"
    intervals = np.diff(tiny.offsets) - 1
    assert ((pred.values >= 0) & (pred.values <= intervals)).all()
    if variant != "laplace":  # the dynamic model's LOO terms are the grid's
        np.testing.assert_allclose(model.marginal_page_loglik(post), got, rtol=1e-9)
        np.testing.assert_allclose(model.page_loglik(), got, rtol=1e-9)


@pytest.mark.parametrize("integral", ["grid", "laplace"])
@pytest.mark.parametrize("walk", ["random", "reverting"])
def test_dynamic_replicates_draw_each_path_given_the_data(integral, walk):
    """The observed variable's draws at one parameter point: each page's replicated
    detections have the mean of its intervals' detection probabilities over its path
    posterior given its data (every path enumerated), with either path integral's
    parameters."""
    import math

    from bayesrate.models import DynamicModel
    from tests.models.dynamic_checks import (
        POINT,
        fixed_posterior,
        paths_by_enumeration,
        tiny_world,
        within,
    )

    tiny = tiny_world()
    phi = 0.7 if walk == "reverting" else None
    config = {"grid_size": 7, "walk": walk, "path_integral": integral}
    extra = {} if phi is None else {"walk_phi": np.array(phi)}
    model = fixed_posterior(DynamicModel(model_config=config), tiny, 1, extra=extra)
    draws = model._stacked(model.thinned_posterior())
    dom = tiny.domain_codes
    if integral == "grid":
        params, layout = list(model._chain(draws, 0, tiny)), None
    else:
        from bayesrate.models.laplace import PathLayout

        ones = np.ones(tiny.n_pages)
        params = [POINT["mu_domain"][dom], POINT["sigma_page"] * ones, POINT["sigma_walk"][dom]]
        params += [] if phi is None else [phi * ones]
        layout = PathLayout.from_cells(model.cells(tiny))
    posteriors = []
    paths_by_enumeration(model, tiny, POINT["mu_domain"], POINT["sigma_page"],
                         POINT["sigma_walk"], posteriors=posteriors, phi=phi)  # fmt: skip
    grid = model.grid(tiny)
    page, column, length, trials, observed = model.replicated_groups(tiny)
    assert (np.bincount(page, weights=trials) == np.diff(tiny.offsets) - 1).all()
    assert (observed == np.bincount(tiny.page_of_visit, weights=tiny.changed)).all()
    want = np.zeros(tiny.n_pages)
    for g in range(len(page)):
        paths, weights = posteriors[page[g]]
        lam = np.exp(grid[paths[:, column[g]]])
        want[page[g]] += trials[g] * (weights @ -np.expm1(-lam * length[g]))
    rng = np.random.default_rng(seed_of(f"native-replicates-{integral}-{walk}"))
    n = 3000
    got = np.array([model.replicate_page_detections(tiny, params, rng, layout) for _ in range(n)])
    within(got.mean(axis=0), want, got.std(axis=0) / math.sqrt(n))
    assert got.std(axis=0).min() > 0


@pytest.fixture(scope="module")
def excursion_cli_fit(tmp_path_factory):
    """The recommended model fitted by ``bayesrate fit`` on a small world of excursions
    (12 pages, 4 epochs of daily visits), its saved fit and the observations."""
    from bayesrate.cli import main
    from tests.models.test_excursion import excursion_world

    obs, _, _ = excursion_world("pymc-native-exc", 12, 2, 4, [0.5, 0.8], 0.6)
    root = tmp_path_factory.mktemp("excursion-fit")
    obs.to_frame().to_csv(root / "obs.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a short fit; gates not tested
        code = main(["fit", "--input", str(root / "obs.csv"), "--model", "excursion",
                     "--draws", "300", "--tune", "300", "--chains", "2",
                     "--seed", "pymc-native-exc", "--no-more-draws",
                     "--predictive-draws", "600", "--quiet",
                     "--out", str(root / "fit")])  # fmt: skip
    assert code in (0, 3)
    return root / "fit" / "fit.nc", obs


def test_saved_excursion_fit_has_pymc_groups_and_round_trips(excursion_cli_fit):
    """The saved fit carries ``observed_data`` (each page's detections),
    ``log_likelihood`` (one term per page and draw) and ``posterior_predictive``; loaded,
    its log-likelihood is ``page_loglik``'s at the same draws and its rebuilt model
    evaluates the same."""
    from bayesrate.models import ExcursionModel

    path, obs = excursion_cli_fit
    tree = xr.open_datatree(path, engine="h5netcdf").load()
    assert {"observed_data", "log_likelihood", "posterior_predictive"} <= set(tree.children)
    counts = np.bincount(obs.page_of_visit, weights=obs.changed, minlength=obs.n_pages)
    np.testing.assert_array_equal(tree["observed_data"]["page_detections"].values, counts)
    for group in ("log_likelihood", "posterior_predictive"):
        var = tree[group]["page_detections"]
        assert var.dims == ("chain", "draw", "page") and var.shape == (2, 300, obs.n_pages)
    # `--no-more-draws`: this short fit misses R-hat and ESS narrowly (1.020, 224 with the
    # rerun on) and is kept as sampled
    assert json.loads(tree.attrs["bayesrate_sampler_config"])["more_draws"] is False
    diag = json.loads(tree.attrs["bayesrate_diagnostics"])
    assert diag["draws"] == 300 and "more_draws" not in diag["extra"]
    loaded = RateModel.load(path)
    assert type(loaded) is ExcursionModel and loaded.observed_groups
    saved = tree["log_likelihood"]["page_detections"].values.reshape(-1, obs.n_pages)
    np.testing.assert_allclose(loaded.page_loglik(600), saved, rtol=1e-10)
    again = loaded.compute_log_likelihood(max_draws=600)["page_detections"].values
    np.testing.assert_allclose(again.reshape(-1, obs.n_pages), saved, rtol=1e-12)


def test_excursion_posterior_predictive_reproduces_the_detection_rate(excursion_cli_fit):
    """``pm.sample_posterior_predictive`` on the saved fit (each page's path drawn given its
    data, then a Binomial per group of its intervals) reproduces the observed detection
    rate within 4 Monte Carlo standard errors of the replicates' mean (autocorrelation
    counted, ``arviz_stats.mcse``); a replicate that ignores the paths (every page at its
    domain's mean rate) is 12 of them away."""
    from arviz_stats import mcse

    path, obs = excursion_cli_fit
    loaded = RateModel.load(path)
    saved = loaded.idata_["posterior_predictive"].to_dataset()
    again = loaded.sample_posterior_predictive(max_draws=600, seed="native-exc-ppc")
    for pred in (saved, again):
        rate = pred["page_detections"].sum("page") / obs.n_intervals
        assert rate.dims == ("chain", "draw") and float(rate.std()) > 0
        error = float(mcse(rate, method="mean"))
        observed = obs.n_changes / obs.n_intervals
        assert abs(float(rate.mean()) - observed) < 4 * error, (float(rate.mean()), observed, error)
