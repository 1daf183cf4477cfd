"""Tests of the bursty model (Gamma-mixed interval exposures) against independent oracles.

Oracles: the negative-binomial probability of zero events written out per interval in
high-precision arithmetic (``mpmath``-free: ``Decimal``), a brute-force per-interval
Bernoulli log-likelihood from the raw visits, the Poisson limit ``κ → ∞``, and recovery of
``κ`` on visits simulated with a fresh Gamma draw of each interval's exposure.
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, getcontext

import numpy as np
import pandas as pd
import pytest
from bayesrate_research.models.bursty import BurstyModel
from scipy.stats import norm

from bayesrate.draws import stack_draws
from bayesrate.likelihood import log1mexp_of_log, mixed_log_detection, mixed_log_quiet
from bayesrate.models import HierarchicalModel, get_model
from bayesrate.observations import Observations
from tests.helpers import seed_of
from tests.recovery import ALPHA, assert_mixed, assert_truths_within, seed_name

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401


def _decimal_log_quiet(lam_tau: float, kappa: float) -> Decimal:
    """``−κ·ln(1 + Λ/κ)`` with 60 significant digits."""
    getcontext().prec = 60
    x, k = Decimal(lam_tau), Decimal(kappa)
    return -k * (1 + x / k).ln()


def _decimal_log_detection(lam_tau: float, kappa: float) -> Decimal:
    getcontext().prec = 60
    return (1 - _decimal_log_quiet(lam_tau, kappa).exp()).ln()


GRID = [
    (lam_tau, kappa)
    for lam_tau in (1e-30, 1e-12, 1e-6, 0.01, 0.7, 3.0, 50.0, 1e4)
    for kappa in (1e-3, 0.05, 1.0, 7.0, 1e3, 1e9, 1e20)
]


@pytest.mark.parametrize(("lam_tau", "kappa"), GRID)
def test_numpy_formulas_against_high_precision(lam_tau, kappa):
    a, b = math.log(lam_tau), math.log(kappa)
    quiet = float(mixed_log_quiet(a, b))
    detect = float(mixed_log_detection(a, b))
    want_q = float(_decimal_log_quiet(lam_tau, kappa))
    want_d = float(_decimal_log_detection(lam_tau, kappa))
    assert quiet == pytest.approx(want_q, rel=1e-12, abs=1e-300)
    assert detect == pytest.approx(want_d, rel=1e-10, abs=1e-13)


@pytest.mark.parametrize("lam_tau", [1e-25, 1e-8, 0.3, 2.0, 40.0])
def test_large_shape_is_the_poisson(lam_tau):
    """κ → ∞ recovers P(0) = e^{−Λ} and log(1 − e^{−Λ}), to double precision."""
    a = math.log(lam_tau)
    for kappa in (1e12, 1e16, 1e100):
        b = math.log(kappa)
        assert float(mixed_log_quiet(a, b)) == pytest.approx(-lam_tau, rel=1e-9)
        assert float(mixed_log_detection(a, b)) == pytest.approx(
            float(log1mexp_of_log(a)), rel=1e-9
        )
    # at a moderate κ the two differ (the limit is a real limit, not an identity)
    if lam_tau > 0.1:
        assert abs(float(mixed_log_quiet(a, math.log(2.0))) + lam_tau) > 0.01 * lam_tau


def test_pytensor_twins_equal_numpy():
    import pytensor.tensor as pt

    from bayesrate.models.likelihood import mixed_log_detection as pt_detection
    from bayesrate.models.likelihood import mixed_log_quiet as pt_quiet

    a_vals = np.log(np.array([t for t, _ in GRID]))
    b_vals = np.log(np.array([k for _, k in GRID]))
    a, b = pt.dvector("a"), pt.dvector("b")
    quiet = pt_quiet(a, b).eval({a: a_vals, b: b_vals})
    detect = pt_detection(a, b).eval({a: a_vals, b: b_vals})
    np.testing.assert_allclose(quiet, mixed_log_quiet(a_vals, b_vals), rtol=1e-12)
    np.testing.assert_allclose(detect, mixed_log_detection(a_vals, b_vals), rtol=1e-10)
    grads = pt.grad(pt.sum(pt_quiet(a, b) + pt_detection(a, b)), [a, b])
    for g in grads:
        assert np.isfinite(g.eval({a: a_vals, b: b_vals})).all()


# --------------------------------------------------------------------------- data
def _mixed_visits(
    rng: np.random.Generator,
    rates: np.ndarray,
    kappa: dict[str, float],
    domains: np.ndarray,
    lengths: tuple[float, ...],
    n_intervals: int,
) -> Observations:
    """Visits whose every interval draws its own exposure ``G ~ Gamma(κ, κ)``: changes in
    it are Poisson(λτG), detected when at least one (a small simulator, not the model)."""
    rows = []
    for p, (rate, dom) in enumerate(zip(rates, domains, strict=True)):
        tau = rng.choice(lengths, n_intervals)
        k = kappa[dom]
        g = rng.gamma(k, 1.0 / k, n_intervals)
        changed = rng.poisson(rate * tau * g) > 0
        t = np.concatenate([[0.0], np.cumsum(tau)])
        rows.append(
            pd.DataFrame(
                {
                    "page": f"p{p}",
                    "time": t,
                    "changed": np.concatenate([[0], changed.astype(int)]),
                    "domain": dom,
                }
            )
        )
    return Observations.from_frame(pd.concat(rows, ignore_index=True), time_unit="h")


def _brute_force_loglik(obs: Observations, log_rate: np.ndarray, kappa_of_page) -> np.ndarray:
    """Per page, the sum over raw intervals of log P(detected) or log P(not detected)."""
    out = np.zeros(obs.n_pages)
    for p in range(obs.n_pages):
        sl = slice(obs.offsets[p], obs.offsets[p + 1])
        t, c = obs.time[sl], obs.changed[sl]
        k = kappa_of_page[p]
        for j in range(1, len(t)):
            x = math.exp(log_rate[p]) * (t[j] - t[j - 1])
            q = (1.0 + x / k) ** (-k)
            out[p] += math.log(1.0 - q) if c[j] else math.log(q)
    return out


@pytest.fixture(scope="module")
def small_obs() -> Observations:
    rng = np.random.default_rng(seed_of("bursty-small"))
    rates = np.exp(rng.normal(math.log(0.05), 1.0, 12))
    domains = np.array(["a"] * 6 + ["b"] * 6)
    return _mixed_visits(rng, rates, {"a": 0.5, "b": 5.0}, domains, (2.0, 24.0, 200.0), 30)


def test_model_logp_equals_brute_force(small_obs):
    """The model's joint log-likelihood (detections + quiet, without the Binomial constants)
    equals the per-interval Bernoulli sum at a point where κ matters."""
    from scipy.special import gammaln

    model = BurstyModel()
    pm_model = model.build_model(small_obs)
    rng = np.random.default_rng(seed_of("bursty-point"))
    point = pm_model.initial_point()
    point = {k: v + rng.normal(0, 0.3, np.shape(v)) for k, v in point.items()}
    # κ = e^{0 ∓ 1.5}: 0.22 and 4.5, far from the Poisson
    point.update(mu_log_kappa=np.array(0.0), sigma_log_kappa_log__=np.array(0.0))
    point["z_log_kappa"] = np.array([-1.5, 1.5])
    outputs = pm_model.replace_rvs_by_values([pm_model["log_rate"], pm_model["log_kappa"]])
    fn = pm_model.compile_fn(outputs, inputs=pm_model.value_vars, on_unused_input="ignore")
    log_rate, log_kappa = fn(point)
    loglik = pm_model.compile_fn(
        pm_model.logp(vars=pm_model.observed_RVs, sum=True),
        inputs=pm_model.value_vars,
        on_unused_input="ignore",
    )(point)
    kappa_of_page = np.exp(log_kappa)[small_obs.domain_codes]
    assert np.ptp(np.log(kappa_of_page)) > 1.0  # two different κ in play
    want = _brute_force_loglik(small_obs, log_rate, kappa_of_page).sum()
    stats = small_obs.interval_stats
    n, c = stats.group_n, stats.group_changed
    constants = float(np.sum(gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)))
    assert float(loglik) - constants == pytest.approx(want, rel=1e-10)
    # and the numpy page log-likelihood
    from bayesrate.likelihood import mixed_pointwise_loglik

    per_page = mixed_pointwise_loglik(
        stats.group_page,
        np.log(stats.group_tau),
        n,
        c,
        log_rate[None, :],
        np.log(kappa_of_page)[None, :],
    )[0]
    np.testing.assert_allclose(
        per_page, _brute_force_loglik(small_obs, log_rate, kappa_of_page), rtol=1e-10
    )


def test_calibrate_offers_it_but_not_by_default():
    """``bayesrate calibrate --models`` takes every model with leave-one-page-out terms;
    the default stays the three quick ones (``make main``'s time)."""
    from bayesrate.calibrate import DEFAULT_MODELS
    from bayesrate.cli import build_parser

    parser = build_parser()
    names = ["bursty", "shocks", "drift", "shocks_ar1", "dynamic", "dynamic_shocks", "mass_edits",
             "dynamic_edits"]  # fmt: skip
    assert parser.parse_args(["calibrate", "--models", *names]).models == names
    assert parser.parse_args(["calibrate"]).models == list(DEFAULT_MODELS)


def test_registered_and_predicts(small_obs):
    assert get_model("bursty") is BurstyModel
    assert issubclass(BurstyModel, HierarchicalModel)
    with pytest.raises(ValueError, match="log_shape_sd"):
        BurstyModel({"log_shape_sd": 0.0})


@pytest.mark.slow
def test_kappa_recovered_on_gamma_mixed_visits(recovery_seed):
    """Simulated with κ = 0.3, 1, 5 and 40 in four domains on intervals of 1 h to two weeks:
    the three κ the data identify (0.3, 1, 5) each within its Bonferroni band of the
    posterior on the log scale, with medians in order; the near-Poisson domain (κ = 40)
    only from below: its truth not under its band, and its median above κ = 1's.

    κ = 40 is not identified from above at this design: even an oracle that knows every
    page's rate finds the log-likelihood at κ = 40 within 1.4 nats of κ = ∞ in 20 of 20
    simulated worlds (the maximum at κ = ∞ in 7), so the posterior above κ ≈ 10 is the
    hierarchical prior's, pooled toward the other domains (seed 3: 90% interval
    [2.7, 10.5]), and κ = 5 and 40 are not ordered by the data (seed 5: medians 12.6 and
    11.7). ``tests/recovery.py`` holds the bands; the draws at a seed used to depend on the
    compile cache (numba fast-math; now off, ``tests/models/test_reproducible.py``)."""
    world = seed_name("bursty-recovery", recovery_seed)
    rng = np.random.default_rng(seed_of(world))
    truth = {"a": 0.3, "b": 1.0, "c": 5.0, "d": 40.0}
    domains = np.repeat(list(truth), 20)
    domain_log_mean = np.repeat(np.log([0.02, 0.05, 0.03, 0.1]), 20)
    rates = np.exp(domain_log_mean + rng.normal(0.0, 0.7, len(domains)))
    obs = _mixed_visits(rng, rates, truth, domains, (1.0, 6.0, 24.0, 96.0, 336.0), 80)
    # κ far apart: a wide prior on the spread of log κ (truth 2.1)
    config = {"shape_parameterisation": "centred", "shape_sd_scale": 2.0}
    model = BurstyModel(config).fit(
        obs, draws=2000, tune=1000, chains=4, seed=world, target_accept=0.95
    )
    assert_mixed(model.diagnostics_)
    kappa = model.idata_["posterior"]["kappa"]
    draws = np.log(stack_draws(kappa.sel(domain=list(truth)), "domain"))
    identified = 3
    assert_truths_within(
        draws[:, :identified], np.log(list(truth.values())[:identified]), "log kappa"
    )
    # the near-Poisson domain, one-sided at the same Bonferroni level over the 4 domains
    z = norm.isf(ALPHA / (2 * len(truth)))
    score = (np.log(truth["d"]) - draws[:, -1].mean()) / draws[:, -1].std()
    assert score >= -z, f"log kappa of the near-Poisson domain: z {score:.2f} below -{z:.2f}"
    median = np.median(draws, axis=0)
    assert np.all(np.diff(median[:identified]) > 0), median
    assert median[-1] > median[1], median
    # the posterior predictive of every group draws from the mixed detection probability
    pred = model.predict(obs, page_rates="posterior", n_draws=50, seed="bursty-predict")
    p = pred["posterior_predictive"]["detection_probability"].values
    assert np.all((p > 0) & (p <= 1))
    trials = pred["constant_data"]["group_trials"].values
    expected = float((p * trials).sum(axis=-1).mean())
    assert expected == pytest.approx(obs.n_changes, rel=0.05)


def test_fit_command_save_load_and_predict(small_obs, tmp_path):
    """``bayesrate fit --model bursty`` writes its fit; the loaded fit's predictive uses each
    draw's own ``κ`` (checked against the numpy formula), and a page of a new domain draws
    its ``κ`` from the fitted population."""
    from bayesrate.cli import main
    from bayesrate.draws import stack_draws
    from bayesrate.likelihood import mixed_log_quiet

    frame = pd.DataFrame(
        {
            "page": np.repeat(small_obs.pages.index, small_obs.visits_per_page),
            "domain": np.repeat(small_obs.pages["domain"], small_obs.visits_per_page),
            "time": small_obs.time,
            "changed": small_obs.changed.astype(int),
        }
    )
    path = tmp_path / "obs.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "fit"
    args = ["fit", "--input", str(path), "--model", "bursty", "--draws", "200", "--tune", "300"]
    args += ["--chains", "2", "--seed", "cli", "--predictive-draws", "50", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(args)
    assert code in (0, 3)  # 3: a tiny fit may miss the gates; the outputs are written anyway
    assert {"kappa", "log_kappa", "rate"} <= set(
        BurstyModel.load(out / "fit.nc").idata_["posterior"]
    )
    model = BurstyModel.load(out / "fit.nc")
    pred = model.predict(model.data_, page_rates="posterior", n_draws=20, seed="p")
    post = model.thinned_posterior(20)
    log_rate = stack_draws(post["log_rate"], "page")
    log_kappa = stack_draws(post["log_kappa"], "domain")[:, model.data_.domain_codes]
    const = pred["constant_data"]
    page = pd.Index(model.data_.pages.index.astype(str)).get_indexer(
        const["group_page"].values.astype(str)
    )
    tau = const["group_length_hours"].values
    want = -np.expm1(mixed_log_quiet(log_rate[:, page] + np.log(tau), log_kappa[:, page]))
    got = stack_draws(pred["posterior_predictive"]["detection_probability"], "interval_group")
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # leave-one-page-out: each page's rate integrated out under the draw's κ, against
    # adaptive quadrature of the per-interval Bernoulli sum times the page's prior
    from scipy.integrate import quad
    from scipy.stats import norm

    two = model.thinned_posterior(2)
    terms = model.marginal_page_loglik(two)
    mu = stack_draws(two["mu_domain"], "domain")[:, model.data_.domain_codes]
    sigma = stack_draws(two["sigma_page"])
    kappa = np.exp(stack_draws(two["log_kappa"], "domain")[:, model.data_.domain_codes])
    peaks = stack_draws(two["log_rate"], "page")
    for i in range(2):
        for p in (0, 7):

            def ll(u, i=i, p=p):
                return _brute_force_loglik(model.data_, np.full(12, u), kappa[i])[p]

            top = ll(peaks[i, p])
            value, _ = quad(lambda u, i=i, p=p, top=top: math.exp(ll(u) - top) * norm.pdf(
                u, mu[i, p], sigma[i]), peaks[i, p] - 8, peaks[i, p] + 8, epsrel=1e-10,
                limit=200)  # fmt: skip
            assert terms[i, p] == pytest.approx(top + math.log(value), abs=1e-6)
    # a new domain's page: its κ is drawn, so the predictive runs and is a probability
    new = small_obs.pages.copy()
    new["domain"] = "unseen"
    fresh = small_obs.replace(pages=new)
    pop = model.predict(fresh, page_rates="population", n_draws=20, seed="q")
    p = pop["posterior_predictive"]["detection_probability"].values
    assert np.all((p >= 0) & (p <= 1)) and np.isfinite(p).all()
