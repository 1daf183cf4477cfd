"""Tests of bayesrate.models against independent oracles.

Oracles: per-interval likelihoods written out from the raw visits (not the sufficient
statistics), scipy quadrature of 1-D posteriors, scipy root finding for the MLE, and
high-precision arithmetic for log(1 - exp(-x)). Fits are tiny and module-scoped.
"""

from __future__ import annotations

import json
import math
import warnings
from decimal import Decimal, getcontext

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, stats

from bayesrate.errors import ArtifactError, ObservationError
from bayesrate.models import (
    CensoredModel,
    ConvergenceWarning,
    HierarchicalModel,
    ModulatedModel,
    get_model,
)
from bayesrate.models.base import target_accepts
from bayesrate.observations import Observations
from tests.helpers import raw_loglik, raw_loglik_modulated, seed_of

with warnings.catch_warnings():
    # pymc 6.3 imports IfElse from its deprecated pytensor location (attributed to pymc,
    # so pyproject's pytensor.* filter misses it); import once here, narrowly silenced
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401

FAST = {"draws": 1000, "tune": 800, "chains": 2, "seed": "tests"}


# --------------------------------------------------------------------------- data


def _pages_with_intervals(rng: np.random.Generator) -> Observations:
    """Three pages with unequal intervals and known-ish rates (per hour)."""
    rows = []
    for label, rate, n, spread in (
        ("a", 0.02, 40, (5, 60)),
        ("b", 0.3, 25, (1, 8)),
        ("c", 0.05, 12, (2, 30)),
    ):
        t = np.concatenate([[0.0], np.cumsum(rng.uniform(*spread, n))])
        p = 1 - np.exp(-rate * np.diff(t))
        flags = np.concatenate([[0], (rng.random(n) < p).astype(int)])
        rows.append(pd.DataFrame({"page": label, "time": t, "changed": flags, "domain": "d"}))
    return Observations.from_frame(pd.concat(rows, ignore_index=True))


def _degenerate_obs(rng: np.random.Generator) -> Observations:
    """Pages that never change, change at every visit, have one visit; a one-page domain
    whose only page has one visit; plus ordinary pages so the hierarchy has something."""
    frames = []

    def add(label, domain, times, flags):
        frames.append(
            pd.DataFrame({"page": label, "domain": domain, "time": times, "changed": flags})
        )

    grid = np.arange(0.0, 48.0, 2.0)
    add("never", "x", grid, np.zeros(len(grid), int))
    add("always", "x", grid, np.r_[0, np.ones(len(grid) - 1, int)])
    add("single", "x", [5.0], [0])
    add("lonely", "empty", [3.0], [0])
    for i in range(8):
        rate = float(np.exp(rng.normal(-2.5, 1.0)))
        p = 1 - np.exp(-rate * 2.0)
        flags = np.r_[0, (rng.random(len(grid) - 1) < p).astype(int)]
        add(f"p{i}", "y" if i % 2 else "x", grid + 0.5 * i, flags)
    return Observations.from_frame(pd.concat(frames, ignore_index=True))


@pytest.fixture(scope="module")
def small_obs() -> Observations:
    return _pages_with_intervals(np.random.default_rng(seed_of("models-small")))


@pytest.fixture(scope="module")
def gamma_fit(small_obs):
    model = CensoredModel({"prior": "gamma", "alpha": 2.0, "beta_days": 0.5}, FAST)
    return model.fit(small_obs)


@pytest.fixture(scope="module")
def degenerate_obs() -> Observations:
    return _degenerate_obs(np.random.default_rng(seed_of("models-degenerate")))


def _fit_allowing_gate_failures(model, obs):
    """Degenerate data may miss the strict 0-divergence gate by a few transitions; the
    tests assert "no divergence storm" explicitly instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(obs)


@pytest.fixture(scope="module")
def hier_fit(degenerate_obs):
    return _fit_allowing_gate_failures(HierarchicalModel(sampler_config=FAST), degenerate_obs)


@pytest.fixture(scope="module")
def modulated_fit(degenerate_obs):
    model = ModulatedModel({"timezone": "Europe/Paris"}, FAST)
    return _fit_allowing_gate_failures(model, degenerate_obs)


# --------------------------------------------------------------------------- numerics


def test_log1mexp_tensor_matches_high_precision_and_has_finite_gradient():
    import pytensor
    import pytensor.tensor as pt

    from bayesrate.models.likelihood import log1mexp_of_log

    getcontext().prec = 200
    x = pt.dvector("x")
    y = log1mexp_of_log(x)
    f = pytensor.function([x], [y, pytensor.grad(y.sum(), x)])
    grid = np.array([-800.0, -40.0, -25.0, -20.5, -20.0, -19.5, -5.0, -0.7, 0.0, 1.0, 4.0, 30.0])
    val, grad = f(grid)
    for a, got in zip(grid, val, strict=True):
        lam = Decimal(a).exp()
        if lam > Decimal("1e-50"):
            want = float((1 - (-lam).exp()).ln())
        else:  # 1 - e^-λ = λ(1 - λ/2 + λ²/6 - ...): beyond 200 digits of 1 - e^-λ
            want = float(Decimal(a) + (1 - lam / 2 + lam * lam / 6).ln())
        assert got == pytest.approx(want, rel=1e-12, abs=1e-300)
    assert np.isfinite(grad).all()
    # d/da log(1 - exp(-e^a)) = e^a / expm1(e^a)
    lam = np.exp(grid[3:-1])
    np.testing.assert_allclose(grad[3:-1], lam / np.expm1(lam), rtol=1e-9)
    assert abs(grad[-1]) < 1e-300


# --------------------------------------------------------------------------- censored


def _quadrature_posterior(obs, page, log_prior):
    """Posterior mean, sd and 5/95% quantiles of λ (per hour) by scipy quadrature in log λ."""

    def unnorm(theta):
        return math.exp(raw_loglik(obs, page, math.exp(theta)) + log_prior(theta) - shift)

    grid = np.linspace(-15, 5, 400)
    logs = [raw_loglik(obs, page, math.exp(t)) + log_prior(t) for t in grid]
    shift = max(logs)
    peak = grid[int(np.argmax(logs))]
    lo, hi = peak - 12, peak + 12
    z = integrate.quad(unnorm, lo, hi, limit=200, points=[peak])[0]
    m1 = integrate.quad(lambda t: math.exp(t) * unnorm(t), lo, hi, limit=200, points=[peak])[0]
    m2 = integrate.quad(lambda t: math.exp(2 * t) * unnorm(t), lo, hi, limit=200, points=[peak])[0]
    mean = m1 / z
    sd = math.sqrt(m2 / z - mean**2)

    def cdf(t):
        return integrate.quad(unnorm, lo, t, limit=200)[0] / z

    q = [math.exp(optimize.brentq(lambda t, p=p: cdf(t) - p, lo, hi)) for p in (0.05, 0.95)]
    return mean, sd, q


def test_censored_posterior_matches_quadrature_oracle(gamma_fit, small_obs):
    import arviz as az

    alpha, beta_h = 2.0, 0.5 * 24
    # Gamma(α, β) on λ, as a density of θ = log λ: α θ − β e^θ (+ const)
    log_prior = lambda t: alpha * t - beta_h * math.exp(t)  # noqa: E731
    rate = gamma_fit.idata_["posterior"]["rate"]
    ess = az.ess(gamma_fit.idata_["posterior"].to_dataset()[["rate"]])["rate"].values
    draws = rate.values.reshape(-1, small_obs.n_pages)
    for page in range(small_obs.n_pages):
        mean, sd, (q05, q95) = _quadrature_posterior(small_obs, page, log_prior)
        mcse = sd / math.sqrt(ess[page])
        assert abs(draws[:, page].mean() - mean) < 4 * mcse, (page, draws[:, page].mean(), mean)
        assert np.quantile(draws[:, page], 0.05) == pytest.approx(q05, rel=0.1)
        assert np.quantile(draws[:, page], 0.95) == pytest.approx(q95, rel=0.1)


def test_censored_lognormal_prior_mean_matches_oracle(small_obs):
    model = CensoredModel({"prior": "lognormal", "log_mean_per_day": 0.0, "log_sd": 1.5}, FAST)
    model.fit(small_obs)
    mu = -math.log(24)
    log_prior = lambda t: stats.norm.logpdf(t, mu, 1.5)  # noqa: E731
    draws = model.rate_draws().values.reshape(-1, small_obs.n_pages)
    for page in range(small_obs.n_pages):
        mean, sd, _ = _quadrature_posterior(small_obs, page, log_prior)
        assert abs(draws[:, page].mean() - mean) < 4 * sd / math.sqrt(400), page


def test_flat_prior_mode_is_the_mle(small_obs):
    """With Gamma(1, β→0) the model's density in λ (no Jacobian) peaks at the MLE."""
    model = CensoredModel({"prior": "gamma", "alpha": 1.0, "beta_days": 1e-12})
    pm_model = model.build_model(small_obs)
    logp = pm_model.compile_logp(jacobian=False)
    value_name = pm_model.rvs_to_values[pm_model["rate"]].name  # log-transformed λ
    start = pm_model.initial_point()

    def neg(x):
        point = dict(start)
        point[value_name] = x
        return -logp(point)

    found = optimize.minimize(neg, np.full(small_obs.n_pages, -3.0), method="BFGS")
    mode = np.exp(found.x)
    for page in range(small_obs.n_pages):
        sl = slice(small_obs.offsets[page], small_obs.offsets[page + 1])
        tau = np.diff(small_obs.time[sl])
        c = small_obs.changed[sl][1:].astype(bool)
        # score equation of the MLE: Σ_changed τ/(e^{λτ} − 1) = Σ_unchanged τ
        score = lambda lam, tau=tau, c=c: np.sum(tau[c] / np.expm1(lam * tau[c])) - tau[~c].sum()  # noqa: E731
        mle = optimize.brentq(score, 1e-6, 10.0)
        assert mode[page] == pytest.approx(mle, rel=1e-4)


def test_fit_result_layout_and_page_loglik(gamma_fit, small_obs):
    idata = gamma_fit.idata_
    groups = {"posterior", "sample_stats", "observed_data", "constant_data", "fit_data"}
    assert groups == set(idata.children)
    assert list(idata["posterior"]["rate"]["page"].values) == ["a", "b", "c"]
    observed = idata["observed_data"]
    assert observed["detections"].dims == ("interval_group",)
    assert int(observed["detections"].sum()) == small_obs.n_changes
    assert (observed["quiet"].values == 0).all() and observed["quiet"].dims == ("page",)
    ll = gamma_fit.page_loglik()  # (draws, pages), chains stacked
    rate = idata["posterior"]["rate"].isel(chain=1, draw=7).values
    want = [raw_loglik(small_obs, p, rate[p]) for p in range(3)]
    np.testing.assert_allclose(ll[idata["posterior"].sizes["draw"] + 7], want, rtol=1e-10)
    summary = gamma_fit.page_summary_
    assert list(summary.columns) == [
        "page",
        "domain",
        "rate_per_day",
        "lower_per_day",
        "upper_per_day",
        "n_visits",
        "n_changes",
    ]
    assert (summary.lower_per_day < summary.rate_per_day).all()
    assert (summary.rate_per_day < summary.upper_per_day).all()
    d = gamma_fit.diagnostics_
    assert d.method == "nuts" and d.chains == 2 and d.draws == 1000
    assert d.grad_evals_per_draw >= 1 and d.seconds > 0
    assert d.converged == (not d.failures)


# --------------------------------------------------------------------------- persistence


def test_save_load_roundtrip_and_refusals(gamma_fit, small_obs, degenerate_obs, tmp_path):
    path = gamma_fit.save(tmp_path / "fit.nc")
    loaded = CensoredModel.load(path, data=small_obs)
    assert loaded.config_hash == gamma_fit.config_hash and loaded.data_ is small_obs
    pd.testing.assert_frame_equal(loaded.page_summary_, gamma_fit.page_summary_)
    versions = json.loads(loaded.idata_.attrs["bayesrate_versions"])
    assert {"pymc", "arviz", "nutpie", "bayesrate"} <= set(versions)
    assert loaded.idata_.attrs["bayesrate_data_fingerprint"] == small_obs.fingerprint
    assert type(get_model("censored").load(path)) is CensoredModel
    with pytest.raises(ArtifactError, match=r"holds a .censored. fit"):
        HierarchicalModel.load(path)
    with pytest.raises(ArtifactError, match="different data"):
        CensoredModel.load(path, data=degenerate_obs)
    with pytest.raises(ArtifactError, match="config"):
        CensoredModel.load(path, model_config={"alpha": 3.0})
    with pytest.raises(ArtifactError):
        CensoredModel.load(tmp_path / "missing.nc")


def test_a_fit_saved_before_an_option_existed_loads_with_its_default(gamma_fit, tmp_path):
    """A saved config without a key the model gained later (its default keeps the old
    model) loads, with that default; a saved config edited without its hash does not."""
    import xarray as xr

    from bayesrate.models.base import config_hash

    tree = xr.open_datatree(gamma_fit.save(tmp_path / "fit.nc"), engine="h5netcdf").load()
    old = json.loads(tree.attrs["bayesrate_model_config"])
    defaults = CensoredModel.default_model_config
    dropped = next(k for k in sorted(old) if old[k] == defaults[k])
    del old[dropped]
    tree.attrs["bayesrate_model_config"] = json.dumps(old)
    tree.attrs["bayesrate_config_hash"] = config_hash("censored", old)
    tree.to_netcdf(tmp_path / "older.nc", engine="h5netcdf")
    loaded = CensoredModel.load(tmp_path / "older.nc")
    assert loaded.model_config == gamma_fit.model_config
    assert dropped in loaded.model_config
    old["alpha"] = 3.5  # a valid value, not the one its hash was made of
    tree.attrs["bayesrate_model_config"] = json.dumps(old)
    tree.to_netcdf(tmp_path / "edited.nc", engine="h5netcdf")
    with pytest.raises(ArtifactError, match="edited file"):
        CensoredModel.load(tmp_path / "edited.nc")


def test_failed_fit_warns_and_is_marked(small_obs, tmp_path):
    model = CensoredModel(sampler_config={"draws": 30, "tune": 30, "chains": 2})
    with pytest.warns(ConvergenceWarning, match="FAILED"):
        model.fit(small_obs)
    assert model.diagnostics_.converged is False and model.diagnostics_.failures
    loaded = CensoredModel.load(model.save(tmp_path / "bad.nc"))
    assert loaded.idata_.attrs["converged"] == 0 and loaded.converged_ is False


def test_config_merging_and_validation():
    model = HierarchicalModel({"page_sd_scale": 0.7})
    assert model.model_config["page_sd_scale"] == 0.7
    assert (
        model.model_config["domain_sd_scale"]
        == HierarchicalModel.default_model_config["domain_sd_scale"]
    )
    assert model.config_hash != HierarchicalModel().config_hash
    with pytest.raises(ValueError, match="unknown model_config key"):
        CensoredModel({"alpah": 1.0})
    with pytest.raises(ValueError, match="prior"):
        CensoredModel({"prior": "flat"})
    with pytest.raises(ValueError, match="unknown method"):
        CensoredModel().fit(None, method="mcmc")


def test_nuts_reruns_at_higher_target_accept_after_divergences(small_obs, monkeypatch):
    """A run with divergent transitions is repeated at the next target_accept; the kept
    result is the first run without any (here the first run's divergences are planted)."""
    import nutpie

    real_sample = nutpie.sample
    seen = []

    def sample(compiled, **kwargs):
        idata = real_sample(compiled, **kwargs)
        seen.append(kwargs["target_accept"])
        if len(seen) == 1:
            idata["sample_stats"]["diverging"].values[0, :3] = True
        return idata

    monkeypatch.setattr(nutpie, "sample", sample)
    sampler = {**FAST, "target_accept_retry": [0.9, 0.97]}
    model = CensoredModel({"prior": "gamma", "alpha": 2.0, "beta_days": 0.5}, sampler)
    model.fit(small_obs)
    assert seen == [0.8, 0.9]
    runs = model.diagnostics_.extra["nuts_runs"]
    assert [(r["target_accept"], r["divergences"]) for r in runs] == [(0.8, 3), (0.9, 0)]
    assert model.diagnostics_.divergences == 0
    # the hierarchical defaults start at 0.8; a user's 0.96 keeps only the retries above it
    assert HierarchicalModel().sampler_config["target_accept"] == 0.8
    assert target_accepts({"target_accept": 0.96, "target_accept_retry": [0.99, 0.95]}) == [
        0.96,
        0.99,
    ]
    with pytest.raises(ValueError, match="within"):
        HierarchicalModel(sampler_config={"target_accept_retry": [1.2]})


def test_divergences_at_every_target_accept_tune_longer_once(small_obs, monkeypatch):
    """Divergences planted in every run with the configured 300 tuning steps (the censored
    model has no parameterisation to switch): NUTS runs once more at the last
    target_accept with ``LONGER_TUNE`` steps and keeps that run; a fit whose longer run
    still diverges stops there and fails its gate."""
    import nutpie

    from bayesrate.models.base import LONGER_TUNE

    real_sample = nutpie.sample
    seen, plant = [], {"up_to_tune": 300}

    def sample(compiled, **kwargs):
        idata = real_sample(compiled, **kwargs)
        seen.append((kwargs["target_accept"], kwargs["tune"]))
        if kwargs["tune"] <= plant["up_to_tune"]:
            idata["sample_stats"]["diverging"].values[0, :2] = True
        return idata

    monkeypatch.setattr(nutpie, "sample", sample)
    sampler = {**FAST, "tune": 300, "target_accept_retry": [0.9]}
    prior = {"prior": "gamma", "alpha": 2.0, "beta_days": 0.5}
    model = CensoredModel(prior, sampler).fit(small_obs)
    assert seen == [(0.8, 300), (0.9, 300), (0.9, LONGER_TUNE)]
    extra = model.diagnostics_.extra
    runs = [(r["target_accept"], r["divergences"], r.get("tune")) for r in extra["nuts_runs"]]
    assert runs == [(0.8, 2, None), (0.9, 2, None), (0.9, 0, LONGER_TUNE)]
    assert extra["longer_tuning"] == LONGER_TUNE and "fallback" not in extra
    assert model.diagnostics_.divergences == 0 and model.diagnostics_.converged
    seen.clear()
    plant["up_to_tune"] = 10**6
    with pytest.warns(ConvergenceWarning, match="divergent"):
        failed = CensoredModel(prior, sampler).fit(small_obs)
    assert seen == [(0.8, 300), (0.9, 300), (0.9, LONGER_TUNE)]  # once
    assert failed.diagnostics_.divergences == 2 and not failed.diagnostics_.converged


def _stick(posterior, target_ess: float) -> None:
    """Repeat each posterior draw ``k`` times in place (``x[t] = x[k * (t // k)]``, every
    variable and chain alike), ``k`` chosen so that the smallest ESS falls to about
    ``target_ess``: the draws stay those of the posterior, only the chains mix slower."""
    from bayesrate.models import convergence

    def stats(values):
        chains, draws = values.shape[:2]
        return convergence.summary(values.reshape(chains, draws, -1))[1:]

    names = list(posterior.data_vars)
    low = min(float(stats(np.asarray(posterior[n].values)).min()) for n in names)
    k = math.ceil(low / target_ess)
    for name in names:
        values = posterior[name].values
        index = k * (np.arange(values.shape[1]) // k)
        values[:] = values[:, index]


@pytest.mark.parametrize("seen_in", ["sampled", "derived"])
def test_near_miss_of_ess_or_r_hat_runs_again_with_twice_the_draws(small_obs, monkeypatch, seen_in):
    """A fit without divergences whose ESS misses the gate by less than half (the planted
    draws repeat each draw so the smallest ESS is about 300 < 400) samples once more with
    twice the draws at the same settings, and keeps that fit; one that misses by more (ESS
    about 120) is not helped by doubling, so it is not rerun and fails its gate. The rerun
    samples the model compiled for the first run. A near miss the sampled variables show
    is rerun before the post-processing, so only the kept draws are post-processed; one
    only a derived variable shows (here the gates are made to read one variable alone,
    which the post-processing adds) is rerun after it. ``sampler_config["more_draws"]``
    False switches the rerun off."""
    import nutpie

    from bayesrate.models.base import MORE_DRAWS

    real_postprocess, processed = CensoredModel._postprocess, []

    def postprocess(self, idata, data):
        processed.append(int(idata["posterior"].sizes["draw"]))
        return real_postprocess(self, idata, data)

    monkeypatch.setattr(CensoredModel, "_postprocess", postprocess)
    if seen_in == "derived":
        real_derived = CensoredModel._add_derived

        def add_derived(self, post, data):
            post = real_derived(self, post, data)
            post["derived"] = post["rate"].copy()
            return post

        monkeypatch.setattr(CensoredModel, "_add_derived", add_derived)
        monkeypatch.setattr(
            CensoredModel,
            "diagnostic_vars",
            lambda self, idata: [n for n in ["derived"] if n in idata["posterior"]],
        )

    real_sample = nutpie.sample
    seen, plant = [], {"ess": 300.0}

    def sample(compiled, **kwargs):
        idata = real_sample(compiled, **kwargs)
        seen.append((kwargs["target_accept"], kwargs["draws"]))
        if kwargs["draws"] == FAST["draws"]:
            _stick(idata["posterior"], plant["ess"])
        return idata

    real_compile, compiled = nutpie.compile_pymc_model, []

    def compile_pymc_model(model, **kwargs):
        compiled.append(model)
        return real_compile(model, **kwargs)

    monkeypatch.setattr(nutpie, "sample", sample)
    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_pymc_model)
    prior = {"prior": "gamma", "alpha": 2.0, "beta_days": 0.5}
    model = CensoredModel(prior, FAST).fit(small_obs)
    more = MORE_DRAWS * FAST["draws"]
    assert seen == [(0.8, FAST["draws"]), (0.8, more)]
    assert len(compiled) == 1  # the second run samples the same compiled model
    diag = model.diagnostics_
    runs = [(r["target_accept"], r["divergences"], r.get("draws")) for r in diag.extra["nuts_runs"]]
    assert runs == [(0.8, 0, None), (0.8, 0, more)]
    assert diag.extra["more_draws"] == more and diag.draws == more
    assert diag.converged and diag.ess_bulk_min >= 400 and diag.ess_tail_min >= 400
    assert processed == ([more] if seen_in == "sampled" else [FAST["draws"], more])
    seen.clear()
    processed.clear()
    plant["ess"] = 120.0
    with pytest.warns(ConvergenceWarning, match="ESS"):
        failed = CensoredModel(prior, FAST).fit(small_obs)
    assert seen == [(0.8, FAST["draws"])]
    assert processed == [FAST["draws"]]
    assert "more_draws" not in failed.diagnostics_.extra
    assert failed.diagnostics_.ess_tail_min < 200 or failed.diagnostics_.ess_bulk_min < 200
    if seen_in == "sampled":  # the same near miss as above, with the rerun switched off
        seen.clear()
        plant["ess"] = 300.0
        with pytest.warns(ConvergenceWarning, match="ESS"):
            off = CensoredModel(prior, {**FAST, "more_draws": False}).fit(small_obs)
        assert seen == [(0.8, FAST["draws"])]
        assert "more_draws" not in off.diagnostics_.extra


def test_near_miss_rule_at_its_boundaries():
    """Doubling the draws is tried only where it is expected to pass: ESS at least half the
    gate, R-hat - 1 at most twice the gate's, and no divergence or method failure."""
    from bayesrate.constants import ESS_MIN, R_HAT_MAX
    from bayesrate.models.diagnostics import Diagnostics, gate_failures, near_miss

    def diag(r_hat=1.0, bulk=1000.0, tail=1000.0, divergences=0, extra=None, method="nuts"):
        d = Diagnostics(method=method, r_hat_max=r_hat, ess_bulk_min=bulk, ess_tail_min=tail,
                        divergences=divergences, extra=extra or {})  # fmt: skip
        d.failures = gate_failures(d)
        return d

    edge = 1 + 2 * (R_HAT_MAX - 1)
    assert not near_miss(diag(), 2)  # passes: nothing to do
    assert near_miss(diag(r_hat=edge - 1e-9), 2)
    assert not near_miss(diag(r_hat=edge + 1e-3), 2)
    assert near_miss(diag(bulk=ESS_MIN / 2), 2) and near_miss(diag(tail=ESS_MIN / 2), 2)
    assert not near_miss(diag(tail=ESS_MIN / 2 - 1), 2)
    assert near_miss(diag(tail=ESS_MIN / 4), 4)
    assert not near_miss(diag(r_hat=1.015, divergences=1), 2)
    assert not near_miss(diag(r_hat=1.015, extra={"method_failures": ["Laplace k 0.8"]}), 2)
    assert not near_miss(diag(r_hat=float("nan")), 2)
    assert not near_miss(diag(bulk=300.0, method="advi"), 2)


def test_unusable_input_raises(degenerate_obs):
    single = degenerate_obs.subset([2, 3])  # one visit each
    with pytest.raises(ObservationError, match="single visit"):
        HierarchicalModel().fit(single)


# --------------------------------------------------------------------------- hierarchical


def test_hierarchical_degenerate_pages_fit_cleanly(hier_fit, degenerate_obs):
    post = hier_fit.idata_["posterior"]
    for name in ("rate", "log_rate", "mu_domain", "sigma_page"):
        assert np.isfinite(post[name].values).all(), name
    # no divergence storm (0.5% of draws, as for the modulated fit; seeds "tests", "a",
    # "b", "c" gave 0, 1, 0, 1 with the Potential likelihood and 4, 0, 0, 0 with the
    # observed Binomials: the same posterior, other trajectories)
    assert hier_fit.diagnostics_.divergences <= 0.005 * 2000
    ll = hier_fit.page_loglik()
    assert np.isfinite(ll).all()
    # single-visit pages have no intervals: log-likelihood exactly 0
    labels = list(degenerate_obs.pages.index)
    assert (ll[:, [labels.index("single"), labels.index("lonely")]] == 0).all()
    rate = post["rate"].isel(chain=0, draw=3).values
    want = [raw_loglik(degenerate_obs, p, rate[p]) for p in range(degenerate_obs.n_pages)]
    np.testing.assert_allclose(ll[3], want, rtol=1e-10)
    summary = hier_fit.page_summary_.set_index("page")
    # the page that changed at every 2-h visit is estimated faster than the one that never did
    assert summary.loc["always", "lower_per_day"] > summary.loc["never", "upper_per_day"]
    par = hier_fit.diagnostics_.extra["parameterisation"]
    assert par["pages_centred"] + par["pages_noncentred"] == degenerate_obs.n_pages


def test_hierarchical_page_summary_averages_conditionals_and_agrees_with_draws(hier_fit):
    """The default page summary (each page's exact conditional posterior averaged over the
    population draws) estimates the posterior the pages' own draws sample: the means agree
    within the draws' Monte Carlo error, and the draws fall below the reported 5% and 95%
    quantiles at those rates."""
    from arviz_stats.base.array import array_stats

    conditional = hier_fit.page_summary_
    draws = hier_fit.page_summary("draws")
    assert conditional.attrs["method"] == "conditional" and draws.attrs["method"] == "draws"
    pd.testing.assert_frame_equal(
        conditional.drop(columns=["rate_per_day", "lower_per_day", "upper_per_day"]),
        draws.drop(columns=["rate_per_day", "lower_per_day", "upper_per_day"]),
    )
    rate = np.asarray(hier_fit.rate_draws().transpose("chain", "draw", "page")) * 24.0
    mcse = np.asarray(array_stats.mcse(rate, chain_axis=0, draw_axis=1, method="mean"))
    z = (conditional.rate_per_day - draws.rate_per_day).to_numpy() / mcse
    # a page without intervals has its prior for posterior, log-normal with an uncertain
    # σ_p: the mean of its draws has no usable Monte Carlo error (tail-dominated), so its
    # mean is checked against the log-normal mean exp(μ_d + σ_p²/2) over the draws instead
    has_data = (conditional.n_visits >= 2).to_numpy()
    assert has_data.sum() >= 8 and (~has_data).sum() == 2
    assert np.all(np.abs(z[has_data]) < 4.5), z
    post = hier_fit.idata_["posterior"]
    for page in np.flatnonzero(~has_data):
        mu = post["mu_domain"].sel(domain=conditional.domain[page]).values
        exact = np.mean(np.exp(mu + post["sigma_page"].values ** 2 / 2.0)) * 24.0
        np.testing.assert_allclose(conditional.rate_per_day[page], exact, rtol=1e-12)
    flat = rate.reshape(-1, rate.shape[-1])
    for column, level in (("lower_per_day", 0.05), ("upper_per_day", 0.95)):
        below = np.mean(flat < conditional[column].to_numpy(), axis=0)
        np.testing.assert_allclose(below, level, atol=0.035, err_msg=column)
    # max_draws averages every k-th draw of each chain (2 chains x 1,000 -> every 10th)
    from bayesrate.models.page_posterior import conditional_average

    post = hier_fit.idata_["posterior"].isel(draw=slice(None, None, 10))
    want = conditional_average(
        hier_fit.data_.interval_stats.groups,
        hier_fit.data_.domain_codes,
        post["mu_domain"].stack(s=("chain", "draw")).transpose("s", "domain").values,
        post["sigma_page"].stack(s=("chain", "draw")).values,
    )
    thinned = hier_fit.page_summary(max_draws=200)
    np.testing.assert_allclose(thinned.rate_per_day, want.mean * 24.0, rtol=1e-12)


def test_page_summary_method_follows_the_model(hier_fit, modulated_fit):
    assert modulated_fit.page_summary_.attrs["method"] == "draws"
    with pytest.raises(ValueError, match="no conditional page posteriors"):
        modulated_fit.page_summary("conditional")
    with pytest.raises(ValueError, match="method must be one of"):
        hier_fit.page_summary("median")
    # the cached frame is not the caller's to change
    first = hier_fit.page_summary_
    first["rate_per_day"] = -1.0
    assert (hier_fit.page_summary_.rate_per_day > 0).all()


def test_hierarchical_gates_cover_every_free_variable_once(hier_fit):
    """Leaving the centred sampler variables out of the gates loses nothing: their draws
    are elements of ``log_rate``/``mu_domain``; ArviZ over every variable is the oracle."""
    from arviz_stats.base.array import array_stats

    post = hier_fit.idata_["posterior"]
    used = hier_fit.diagnostic_vars(hier_fit.idata_)
    free = [rv.name for rv in hier_fit.model.free_RVs]
    assert "log_rate_centred" in free and "log_rate_centred" not in used
    assert {"log_rate", "mu_domain", "sigma_page", "mu_global"} <= set(used)
    centred = post["log_rate_centred"].values
    pages = list(post["page"].values)
    columns = [pages.index(p) for p in post["page_centred"].values]
    np.testing.assert_array_equal(centred, post["log_rate"].values[..., columns])
    rhat, ess = [], []
    for name in dict.fromkeys([*free, "log_rate", "mu_domain"]):
        x = np.asarray(post[name].transpose("chain", "draw", ...).values)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        for k in range(x.shape[2]):
            rhat.append(array_stats.rhat(x[..., k], chain_axis=0, draw_axis=1, method="rank"))
            ess.append(array_stats.ess(x[..., k], chain_axis=0, draw_axis=1, method="bulk"))
    diag = hier_fit.diagnostics_
    assert diag.r_hat_max == pytest.approx(max(rhat), rel=1e-10)
    assert diag.ess_bulk_min == pytest.approx(min(ess), rel=1e-10)


def test_parameterisation_follows_information(degenerate_obs, rng):
    """Long, informative histories are centred; one-visit / one-sided pages are not."""
    model = HierarchicalModel()
    page_c, _ = model.choose_parameterisation(degenerate_obs)
    labels = list(degenerate_obs.pages.index)
    for name in ("never", "always", "single", "lonely"):
        assert not page_c[labels.index(name)]
    # a page observed 2000 times at λτ ≈ 1 carries Fisher information ≈ 2000·0.58
    t = np.arange(0, 2001.0)
    flags = np.r_[0, (rng.random(2000) < 1 - np.exp(-1.0)).astype(int)]
    frame = pd.DataFrame(
        {
            "page": ["long"] * 2001 + ["short"] * 3,
            "time": np.r_[t, 0.0, 1.0, 2.0],
            "changed": np.r_[flags, 0, 1, 0],
            "domain": "z",
        }
    )
    obs = Observations.from_frame(frame)
    page_c, _ = model.choose_parameterisation(obs)
    assert page_c[0] and not page_c[1]


@pytest.mark.parametrize(("n_domains", "scale"), [(4, 1.0), (12, 0.5), (40, 2.0)])
def test_spread_quantile_matches_the_closed_form_posterior(n_domains, scale):
    """Means without noise: the restricted likelihood of ``σ`` is ``σ^{−(D−1)}
    exp(−S/2σ²)`` (``S`` the sum of squares about the mean); times the ``Gamma(2,
    2/scale)`` prior, its 5% quantile by adaptive quadrature and root finding."""
    from bayesrate.models.hierarchical import spread_quantile

    means = np.random.default_rng(seed_of(f"spread-{n_domains}")).normal(0.0, 0.6, n_domains)
    ss = float(((means - means.mean()) ** 2).sum())

    def density(sigma):
        return (
            sigma ** -(n_domains - 1)
            * np.exp(-ss / (2 * sigma**2))
            * stats.gamma.pdf(sigma, 2.0, scale=scale / 2)
        )

    total = integrate.quad(density, 0, np.inf, limit=200)[0]

    def cdf(x):
        return integrate.quad(density, 0, x, limit=200)[0] / total - 0.05

    want = optimize.brentq(cdf, 1e-4, 50.0)
    got = spread_quantile(means, np.zeros(n_domains), scale)
    assert got == pytest.approx(want, rel=0.005)
    # noisy means make the spread's lower quantile smaller
    assert spread_quantile(means, np.full(n_domains, 0.3), scale) < got


def _pinned_domains(n_pages: int, n_visits: int) -> Observations:
    """Four domains of busy pages, means a log-unit apart: the rule centres every domain."""
    rng = np.random.default_rng(seed_of("pinned-domains"))
    rows = []
    t = np.arange(0.0, n_visits + 1.0)
    for d in range(4):
        for k in range(n_pages):
            lam = np.exp(d - 1.5 + 0.3 * rng.standard_normal())
            flags = np.r_[0, (rng.random(n_visits) < 1 - np.exp(-lam)).astype(int)]
            rows.append(pd.DataFrame({"page": f"d{d}p{k}", "time": t, "changed": flags,
                                      "domain": f"d{d}"}))  # fmt: skip
    return Observations.from_frame(pd.concat(rows))


def test_divergences_at_every_target_accept_fall_back_to_noncentred_domains(monkeypatch, tmp_path):
    """Divergences planted in every run of the rule's (all domains centred) model: the fit
    runs again with the domain means non-centred, reports both attempts, keeps the second;
    the saved fit rebuilds the graph it was fitted with. A forced parameterisation and a
    fit without centred domains do not fall back."""
    import nutpie

    real_sample = nutpie.sample
    model = HierarchicalModel(sampler_config={**FAST, "draws": 200, "tune": 300})

    def sample(compiled, **kwargs):
        idata = real_sample(compiled, **kwargs)
        if model._fallback is None:
            idata["sample_stats"]["diverging"].values[0, :2] = True
        return idata

    monkeypatch.setattr(nutpie, "sample", sample)
    obs = _pinned_domains(12, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    extra = model.diagnostics_.extra
    runs = [(r["target_accept"], r["divergences"], r.get("parameterisation")) for r in
            extra["nuts_runs"]]  # fmt: skip
    fallback = "domain means non-centred"
    assert runs == [(0.8, 2, None), (0.95, 2, None), (0.99, 2, None), (0.8, 0, fallback)]
    assert extra["fallback"] == fallback
    assert extra["parameterisation"]["domains_centred"] == 0
    assert model.diagnostics_.divergences == 0
    post = model.idata_["posterior"]
    assert "z_domain" in post and "mu_domain_centred" not in post
    loaded = HierarchicalModel.load(model.save(tmp_path / "fit.nc"))
    assert {rv.name for rv in loaded.model.free_RVs} == {rv.name for rv in model.model.free_RVs}
    assert not HierarchicalModel({"parameterisation": "centred"})._fall_back()
    plain = HierarchicalModel()
    plain.build_model(obs)
    assert plain._build_notes["parameterisation"]["domains_centred"] == 4
    assert plain._fall_back() and not plain._fall_back()  # once


def test_domain_means_centred_only_where_pages_pin_them_over_the_spread():
    """Twelve domains of a few pages (ota-genai-eu, shipped): the spread of their means is
    poorly known, and no domain is centred (the plug-in spread centred four, and the fit
    diverged). Four domains of 60 busy pages each, means a log-unit apart: pinned over
    the spread's range, all centred."""
    from bayesrate import datasets

    model = HierarchicalModel()
    _, domain_c = model.choose_parameterisation(datasets.load("ota-genai-eu"))
    assert len(domain_c) == 12 and not domain_c.any()
    notes = model._build_notes["parameterisation"]
    assert notes["domain_sd_q05"] < 0.5 * notes["plugin_domain_sd"]
    _, domain_c = model.choose_parameterisation(_pinned_domains(60, 400))
    assert domain_c.all()


# --------------------------------------------------------------------------- modulated


def test_modulated_loglik_and_multipliers(modulated_fit, degenerate_obs):
    post = modulated_fit.idata_["posterior"]
    m = post["hour_of_week_multiplier"]
    assert m.sizes["hour_of_week"] == 168
    np.testing.assert_allclose(m.mean("hour_of_week").values, 1.0, rtol=1e-12)
    assert m.attrs["timezone"] == "Europe/Paris"
    # time-averaged rate = base rate x mean raw multiplier
    raw = np.exp(post["log_multiplier"]).mean("hour_of_week")
    np.testing.assert_allclose(
        post["rate"].values, (np.exp(post["log_rate"]) * raw).values, rtol=1e-12
    )
    # the page log-likelihood at one draw, against the raw-visit oracle on that clock
    draw = {"chain": 1, "draw": 11}
    rate = np.exp(post["log_rate"].isel(**draw).values)
    m = np.exp(post["log_multiplier"].isel(**draw).values)
    want = [
        raw_loglik_modulated(degenerate_obs, p, rate[p], m, "Europe/Paris")
        for p in range(degenerate_obs.n_pages)
    ]
    got = modulated_fit.page_loglik()[post.sizes["draw"] + 11]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert np.isfinite(post["rate"].values).all()
    assert modulated_fit.diagnostics_.divergences <= 0.005 * 2000  # no divergence storm


# --------------------------------------------------------------------------- other methods


def test_advi_runs_and_reports(small_obs):
    model = CensoredModel(sampler_config={"advi_iterations": 3000, "vi_draws": 500, "seed": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(small_obs, method="advi")
    assert model.diagnostics_.method == "advi"
    assert model.idata_["posterior"].sizes["draw"] == 500
    assert np.isfinite(model.page_summary_.rate_per_day).all()
    assert "advi_final_loss" in model.diagnostics_.extra


@pytest.mark.slow
def test_pathfinder_runs_and_is_close_to_nuts(small_obs, gamma_fit):
    model = CensoredModel(
        {"prior": "gamma", "alpha": 2.0, "beta_days": 0.5},
        sampler_config={"vi_draws": 1000, "seed": 2},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(small_obs, method="pathfinder")
    assert model.diagnostics_.method == "pathfinder"
    assert "pathfinder_pareto_k" in model.diagnostics_.extra
    got = model.page_summary_.rate_per_day.to_numpy()
    want = gamma_fit.page_summary_.rate_per_day.to_numpy()
    np.testing.assert_allclose(got, want, rtol=0.15)


def test_save_on_a_full_disk_is_an_oserror_not_a_crash(tmp_path):
    """Issue 54 row 4: disk full while saving a fit crashed the process inside h5py
    (segfault, exit 139) and left a temporary file. Now an OSError naming the file; an
    existing fit file is kept and no temporary is left. (A child process with a file size
    limit stands in for the full disk.)"""
    import subprocess
    import sys

    target = tmp_path / "fit.nc"
    target.write_bytes(b"an earlier fit")
    code = f"""
import resource, types
import numpy as np, xarray as xr
from bayesrate.models.base import RateModel
values = np.random.default_rng(1).random((2, 500, 100))
post = xr.Dataset({{"x": (("chain", "draw", "page"), values)}})
stub = types.SimpleNamespace(_require_fit=lambda: None,
                             idata_=xr.DataTree.from_dict({{"posterior": post}}))
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
try:
    RateModel.save(stub, {str(target)!r})
except OSError as exc:
    print("OSError", exc.errno, exc.filename)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["OSError", "27", str(target)]
    assert target.read_bytes() == b"an earlier fit"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.nc"]
