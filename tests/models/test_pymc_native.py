"""The models as PyMC sees them: observed interval groups, PyMC's pointwise log-likelihood
and predictive draws, ``predict`` for new pages, and a saved fit that carries its data.

Oracles: the raw-visit log-likelihoods of ``tests.helpers`` (interval by interval, the
modulated one with a minute-by-minute integral of the multipliers on pandas' clock), and
brute-force Monte Carlo from the posterior draws with one Bernoulli per interval.
"""

from __future__ import annotations

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

FAST = {"draws": 500, "tune": 500, "chains": 2, "seed": "pymc-native"}
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
