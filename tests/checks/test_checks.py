"""Posterior predictive checks, leave-one-page-out comparison, prior export, artifacts."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from bayesrate import simulate as sim
from bayesrate.checks import marginal
from bayesrate.checks.compare import compare
from bayesrate.checks.ppc import ppc_for
from bayesrate.errors import ArtifactError
from bayesrate.export import (
    POPULATION_GATES,
    domain_priors,
    predictive_moments,
    write_artifact,
)
from bayesrate.models import get_model
from bayesrate.priors import PriorSet

MONDAY = 473_352.0  # 2024-01-01T00:00Z in hours since the epoch
#: short fits whose tests read the draws, not the convergence gates: no near-miss rerun
FAST = {"draws": 500, "tune": 500, "chains": 2, "seed": 7, "more_draws": False}
WEAK = {"prior": "gamma", "alpha": 1.0, "beta_days": 0.01}


def fit(name, obs, config=None, **sampler):
    model = get_model(name)(config or {}, {**FAST, **sampler})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are checked explicitly
        model.fit(obs)
    return model


@pytest.fixture(scope="module")
def poisson_world():
    """Pages whose changes are homogeneous Poisson with rates from a weak Gamma prior."""
    rng = sim.rng_from("checks-poisson-world")
    rates = rng.gamma(1.0, 0.05, 80)  # per hour
    visits = sim.regular_grid(MONDAY, MONDAY + 24 * 21, 2.0)
    return sim.simulate_pages(rates, visits, rng=rng).observations


@pytest.fixture(scope="module")
def periodic_world():
    """Pages that change once a week at a fixed time: a planted misfit for a Poisson model."""
    rng = sim.rng_from("checks-periodic-world")
    procs = [sim.Periodic(168.0, phase=float(rng.uniform(0, 168)), jitter=0.5) for _ in range(60)]
    visits = sim.regular_grid(MONDAY, MONDAY + 24 * 7 * 12, 2.0)
    return sim.simulate_pages(procs, visits, rng=rng).observations


@pytest.fixture(scope="module")
def censored_fit(poisson_world):
    return fit("censored", poisson_world, WEAK)


@pytest.fixture(scope="module")
def hierarchical_fit():
    data = sim.pages_like(n_pages=120, seed="checks-hier", history="short").observations
    return fit("hierarchical", data, draws=400, chains=2)


def test_ppc_on_data_from_the_model_is_not_extreme(poisson_world):
    # the model's prior is the simulator's population: neither replication is extreme
    true_prior = {"prior": "gamma", "alpha": 1.0, "beta_days": 20.0 / 24.0}
    result = ppc_for(fit("censored", poisson_world, true_prior), poisson_world, seed="null")
    table = result.table(alpha=0.01)
    assert set(table["replication"]) == {"conditional", "mixed"}
    assert not table["extreme"].any(), table[["replication", "statistic", "p_value"]]
    assert np.isfinite(table["p_value"]).all()


def test_ppc_flags_planted_weekly_periodicity(periodic_world):
    model = fit("censored", periodic_world, WEAK)
    result = ppc_for(model, periodic_world, seed="misfit")
    pv = result.p_values()
    # weekly updates at one time: detections crowd into one day/hour, gaps too regular
    assert pv["day_of_week_chi2"] < 0.01
    assert pv["gap_cv"] > 0.99
    assert pv["top_hour_of_week_share"] < 0.01
    assert {"day_of_week_chi2", "gap_cv", "top_hour_of_week_share"} <= set(result.failures())
    # per page: nearly every page's detections crowd into one or two cells
    pages = result.conditional.periodic_pages
    assert len(pages) == 60 and (pages["p_value"] < 0.05).mean() > 0.9


def test_periodicity_per_page_equals_brute_force(periodic_world, poisson_world):
    """Observed top-cell shares and cells against a direct count of each page's detecting
    visits by hour of week (UTC, the fixtures' clock); the Poisson world is not flagged."""
    for world, seed in ((periodic_world, "misfit"), (poisson_world, "null-periodicity")):
        result = ppc_for(fit("censored", world, WEAK, draws=100), world, seed=seed)
        table = result.conditional.periodic_pages.set_index("page")
        shares, cells = {}, {}
        for i, page in enumerate(world.pages.index):
            t = world.time[world.offsets[i] : world.offsets[i + 1]]
            flags = world.changed[world.offsets[i] : world.offsets[i + 1]].astype(bool)
            if flags.sum() < 5:
                continue
            how = np.floor((t[flags] - MONDAY) % 168).astype(int)
            counts = np.bincount(how, minlength=168)
            shares[str(page)] = counts.max() / counts.sum()
            day = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[counts.argmax() // 24]
            cells[str(page)] = f"{day} {counts.argmax() % 24:02d}h"
        assert set(table.index) == set(shares)
        for page, share in shares.items():
            assert table.loc[page, "observed_share"] == pytest.approx(share)
            assert table.loc[page, "top_cell"] == cells[page]
    assert result.p_values()["top_hour_of_week_share"] > 0.01  # the Poisson world


def test_mixed_replication_sees_a_wrong_population(censored_fit, poisson_world):
    """A prior of 100 changes a day for pages that change about once a day: each page's 252
    intervals outweigh the prior, so its own posterior reproduces its count and the
    conditional checks pass; fresh rates from that prior change at every visit."""
    checks = ppc_for(censored_fit, poisson_world, seed="population")
    assert not checks.failures(replication="conditional", only=POPULATION_GATES)
    mixed = checks.p_values("mixed")
    assert mixed["mean_changes"] > 0.999 and mixed["frac_changed_every_visit"] > 0.999
    gates = " ".join(checks.gate_failures({"mixed": POPULATION_GATES}))
    assert "mean_changes (mixed" in gates and "frac_changed_every_visit (mixed" in gates
    assert set(checks.table()["replication"]) == {"conditional", "mixed"}


def test_ppc_plot_writes_png(censored_fit, poisson_world, tmp_path):
    paths = ppc_for(censored_fit, poisson_world, seed="plot").plot(tmp_path)
    assert paths and paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_integrated_loglik_matches_quadrature(poisson_world):
    st = poisson_world.interval_stats
    mu = np.full((1, poisson_world.n_pages), np.log(0.03))
    ours = marginal.integrated_loglik_normal(st, mu, np.array([1.3]))[0]
    for page in (0, 5, 17):

        def integrand(u, page=page):
            rates = np.full(poisson_world.n_pages, np.exp(u))
            return np.exp(st.loglik(rates)[page]) * stats.norm.pdf(u, np.log(0.03), 1.3)

        exact = integrate.quad(integrand, -25, 8, limit=400, epsabs=0, epsrel=1e-10)[0]
        assert ours[page] == pytest.approx(np.log(exact), abs=2e-3)


def test_exact_loo_of_fixed_prior_model(censored_fit, poisson_world):
    result = compare({"censored": censored_fit})
    st = poisson_world.interval_stats
    beta = WEAK["beta_days"] * 24

    def integrand(lam, page):
        rates = np.full(poisson_world.n_pages, lam)
        return np.exp(st.loglik(rates)[page]) * stats.gamma.pdf(lam, 1.0, scale=1 / beta)

    brute = sum(
        np.log(integrate.quad(integrand, 0, 50, args=(p,), limit=400, points=[0.01, 0.1, 1])[0])
        for p in range(poisson_world.n_pages)
    )
    assert result.table.loc["censored", "elpd"] == pytest.approx(brute, rel=1e-3)
    assert result.pareto_k["censored"]["very_bad"] == 0


def test_loo_prefers_pooling_and_has_reliable_k(hierarchical_fit):
    data = hierarchical_fit.data_
    weak = fit("censored", data, WEAK)
    result = compare({"hierarchical": hierarchical_fit, "censored": weak})
    assert result.best == "hierarchical"
    k = result.pareto_k["hierarchical"]
    assert k["very_bad"] == 0 and k["bad"] <= 0.05 * data.n_pages
    assert "hierarchical" in result.verdict


def test_loo_puts_pages_with_a_constant_loglik_back_exactly(hierarchical_fit):
    import xarray as xr

    from bayesrate.checks.compare import LOGLIK_VAR, loo, marginal_idata

    tree = marginal_idata(hierarchical_fit)
    ll = tree["log_likelihood"][LOGLIK_VAR]
    # two pages whose terms do not depend on the draw (visited once: 0), put among the others
    extra = xr.full_like(ll.isel(page=[0, 1]), 0.0).assign_coords(page=["once-a", "once-b"])
    extra[dict(page=1)] = -2.5
    whole = xr.concat([extra.isel(page=[0]), ll, extra.isel(page=[1])], dim="page")
    with_constant = xr.DataTree.from_dict(
        {"posterior": tree["posterior"].to_dataset(), "log_likelihood": whole.to_dataset()}
    )
    result, _ = loo(with_constant)
    plain, _ = loo(tree)
    assert list(result.elpd_i["page"].values) == list(whole["page"].values)
    assert result.elpd_i.sel(page="once-a") == 0.0 and result.elpd_i.sel(page="once-b") == -2.5
    assert float(result.pareto_k.sel(page=["once-a", "once-b"]).max()) == 0.0
    np.testing.assert_allclose(result.elpd_i.isel(page=slice(1, -1)), plain.elpd_i, rtol=1e-12)
    assert result.elpd == pytest.approx(plain.elpd - 2.5, rel=1e-12)
    assert result.p == pytest.approx(plain.p, rel=1e-12)
    assert result.n_data_points == ll.sizes["page"] + 2
    # the oracle: plain importance-sampling LOO, log of the harmonic mean of each page's
    # likelihood over the draws (PSIS smooths its largest weights, close where k is small)
    draws = whole.stack(sample=("chain", "draw")).transpose("page", "sample").values
    is_loo = -(special.logsumexp(-draws, axis=1) - np.log(draws.shape[1]))
    good = np.asarray(result.pareto_k) < 0.5
    np.testing.assert_allclose(np.asarray(result.elpd_i)[good], is_loo[good], atol=0.02)
    np.testing.assert_allclose(is_loo[[0, -1]], [0.0, -2.5], atol=1e-12)
    assert result.se == pytest.approx(np.sqrt(len(is_loo) * np.asarray(result.elpd_i).var()))
    log_w = result.log_weights.sel(page="once-b")
    assert special.logsumexp(log_w.values) == pytest.approx(0.0, abs=1e-12)


def test_loo_treats_a_loglik_constant_up_to_float_noise_as_constant():
    """Issue 54: a page visited once whose term varies by 8.9e-16 over the draws crashed
    PSIS ("All tail values are the same"); it is exact, like an exactly constant one."""
    import xarray as xr

    from bayesrate.checks.compare import LOGLIK_VAR, loo

    rng = np.random.default_rng(54)
    ll = rng.normal(-5.0, 0.3, (2, 200, 5))
    ll[:, :, 1] = -1.2 + rng.choice([0.0, 8.9e-16], size=(2, 200))  # noise of the integration
    ll[:, :, 3] = rng.choice([0.0, 8.9e-16], size=(2, 200))  # visited once: 0 plus noise
    coords = {"chain": [0, 1], "draw": np.arange(200), "page": list("abcde")}
    loglik = xr.DataArray(ll, dims=("chain", "draw", "page"), coords=coords)
    post = xr.Dataset({"mu_global": (("chain", "draw"), rng.normal(size=(2, 200)))})
    tree = xr.DataTree.from_dict(
        {"posterior": post, "log_likelihood": loglik.to_dataset(name=LOGLIK_VAR)}
    )
    result, _ = loo(tree)  # raised ValueError before
    assert float(result.elpd_i.sel(page="b")) == pytest.approx(-1.2, abs=1e-15)
    assert float(result.elpd_i.sel(page="d")) == pytest.approx(0.0, abs=1e-15)
    assert float(result.pareto_k.sel(page=["b", "d"]).max()) == 0.0
    assert np.isfinite(result.elpd)

    from bayesrate.checks.compare import constant_pages

    assert list(constant_pages(loglik)) == [False, True, False, True, False]
    # a real but small spread (2e-10) is not noise
    assert not constant_pages(loglik + xr.DataArray(np.arange(200) * 1e-12, dims="draw")).any()


def test_exported_gamma_view_has_the_predictive_log_rate_moments(hierarchical_fit):
    post = hierarchical_fit.idata_["posterior"]
    priors = domain_priors(hierarchical_fit)
    moments = priors.metadata["predictive_moments_per_day"]
    d0 = next(iter(priors.domains))
    m = post["domain_log_rate_mean"].sel(domain=d0).values.ravel()
    s = post["page_log_rate_sd"].values.ravel()
    # the Gamma view: E log λ = ψ(α) − log β and Var log λ = ψ'(α) (closed forms) are the
    # draws' mean and variance of log λ (per day)
    view = priors.domains[d0]
    assert special.digamma(view.alpha) - np.log(view.beta) == pytest.approx(
        m.mean() + np.log(24.0), rel=1e-9
    )
    assert special.polygamma(1, view.alpha) == pytest.approx(m.var() + np.mean(s**2), rel=1e-9)
    assert priors.gamma_fidelity[d0]["match"] == "log-rate moments"

    # the rate moments kept in the metadata: numerical integration of λ and λ² over each
    # draw's log-normal (a different route from the closed forms), averaged over the draws
    def moment(k, mu, sd):
        f = lambda u: np.exp(k * u) * stats.norm.pdf(u, mu, sd)  # noqa: E731
        return integrate.quad(f, mu - 12 * sd, mu + 12 * sd + 2 * k * sd * sd, limit=200)[0]

    first = np.mean([moment(1, mu, sd) for mu, sd in zip(m, s, strict=True)]) * 24
    second = np.mean([moment(2, mu, sd) for mu, sd in zip(m, s, strict=True)]) * 24**2
    assert moments[d0]["mean"] == pytest.approx(first, rel=1e-6)
    assert moments[d0]["variance"] == pytest.approx(second - first**2, rel=1e-6)
    assert predictive_moments(post)[d0][0] == pytest.approx(first, rel=1e-6)


@pytest.mark.parametrize("wide_sd", [30.0, 10.0])
def test_gamma_view_falls_back_to_log_moments_where_rate_moments_overflow(
    hierarchical_fit, tmp_path, wide_sd
):
    """One draw with a page sd of 30 (its λ² moment e^{1800} is no float) or 10 (the
    rate-moment α ≈ e^{-100}: the Gamma's median rate underflows): the rate-moment Gamma is
    no view, so every view matches the mean and variance of ``log λ``,
    checked against quadrature of the Gamma's log-density and the draws' own moments; the
    artifact says so and round-trips."""
    import copy

    fit = copy.deepcopy(hierarchical_fit)
    post = fit.idata_["posterior"]
    post["page_log_rate_sd"][0, 0] = wide_sd
    priors = domain_priors(fit)
    d0 = next(iter(priors.domains))
    assert priors.gamma_fidelity[d0]["match"] == "log-rate moments"
    loc = post["domain_log_rate_mean"].sel(domain=d0).values.ravel() + np.log(24.0)
    s = post["page_log_rate_sd"].values.ravel()
    g = priors.domains[d0]
    log_pdf = lambda u: stats.gamma.logpdf(np.exp(u), g.alpha, scale=1 / g.beta) + u  # noqa: E731
    mean = integrate.quad(lambda u: u * np.exp(log_pdf(u)), -400, 50, limit=500)[0]
    second = integrate.quad(lambda u: u * u * np.exp(log_pdf(u)), -400, 50, limit=500)[0]
    assert mean == pytest.approx(loc.mean(), rel=1e-6)
    assert second - mean**2 == pytest.approx(loc.var() + np.mean(s**2), rel=1e-6)
    again = PriorSet.load(priors.save(tmp_path / "p"))
    assert again.gamma_fidelity[d0]["match"] == "log-rate moments"
    variance = again.metadata["predictive_moments_per_day"][d0]["variance"]
    assert variance is None if wide_sd == 30.0 else variance > 1e80
    from bayesrate.export import _priors_section

    n_log = sum(f["match"] == "log-rate moments" for f in priors.gamma_fidelity.values())
    card = "\n".join(_priors_section(priors))
    assert f"{n_log - 1} of the {len(priors.domains)} domains' views on log-rate moments" in card
    # the unmodified fit's views are on log-rate moments too
    assert domain_priors(hierarchical_fit).gamma_fidelity[d0]["match"] == "log-rate moments"


def test_exported_population_is_the_fitted_one(hierarchical_fit):
    post = hierarchical_fit.idata_["posterior"]
    priors = domain_priors(hierarchical_fit)
    assert priors.schema_version == 2
    d0 = next(iter(priors.domains))
    loc = post["domain_log_rate_mean"].sel(domain=d0).values.ravel() + np.log(24.0)
    s = post["page_log_rate_sd"].values.ravel()
    pop = priors.populations[d0]
    assert pop.location.mean == pytest.approx(loc.mean(), rel=1e-9)
    assert pop.scale.mean == pytest.approx(s.mean(), rel=1e-9)
    assert pop.location.quantiles["0.05"] == pytest.approx(np.quantile(loc, 0.05))
    g = post["global_log_rate_mean"].values.ravel() + np.log(24.0)
    glob = priors.global_population
    assert glob.location.mean == pytest.approx(g.mean(), rel=1e-9)
    scale = np.sqrt(post["domain_log_rate_sd"].values.ravel() ** 2 + s**2)
    assert glob.scale.mean == pytest.approx(scale.mean(), rel=1e-9)
    # the predictive mixture's mean log-rate is the Gamma view's (ψ(α) − log β, both E log λ)
    w, mu = np.asarray(pop.predictive.weights), np.asarray(pop.predictive.means)
    view = priors.domains[d0]
    assert (w * mu).sum() == pytest.approx(special.digamma(view.alpha) - np.log(view.beta),
                                           rel=1e-9)  # fmt: skip
    # the stated fidelity: KL(predictive mixture ‖ Gamma view) by quadrature; against the
    # draws' own mixture it differs by the compression's upper tail, which the Gamma's
    # e^{−βλ} magnifies (0.79 against 0.94 nats here)
    gam = stats.gamma(priors.domains[d0].alpha, scale=1 / priors.domains[d0].beta)
    sds = np.asarray(pop.predictive.sds)

    def integrand(u, draws=False):
        dens = stats.norm.pdf(u, loc, s) if draws else w * stats.norm.pdf(u, mu, sds)
        p = np.mean(dens) if draws else np.sum(dens)
        return p * (np.log(p) - gam.logpdf(np.exp(u)) - u)

    lo, hi = loc.mean() - 10 * s.mean(), loc.mean() + 10 * s.mean()
    kl = integrate.quad(integrand, lo, hi, limit=200)[0]
    stated = priors.gamma_fidelity[d0]["kl_population_to_gamma"]
    assert stated == pytest.approx(kl, rel=1e-4, abs=1e-6)
    kl_draws = integrate.quad(integrand, lo, hi, args=(True,), limit=200)[0]
    assert stated == pytest.approx(kl_draws, abs=0.25)


def test_artifact_refused_unless_forced_and_round_trips(hierarchical_fit, tmp_path):
    data = hierarchical_fit.data_
    result = ppc_for(hierarchical_fit, data, seed="export")
    if hierarchical_fit.converged_ and not result.failures():
        pytest.fail("expected the 400-draw fit to miss the ESS gate; test needs a failing fit")
    with pytest.raises(ArtifactError, match="refusing to export"):
        write_artifact(hierarchical_fit, dataset="sim", root=tmp_path, ppc=result)
    assert not (tmp_path / "sim").exists()  # nothing written when refused
    path = write_artifact(hierarchical_fit, dataset="sim", root=tmp_path, ppc=result, force=True)
    loaded = PriorSet.load(path)
    direct = domain_priors(hierarchical_fit)
    assert loaded.forced and json.loads((path / "priors.json").read_text())["forced"] is True
    assert "FORCED EXPORT" in (path / "README.md").read_text()
    assert "Schema version 2" in (path / "README.md").read_text()
    assert loaded.populations == direct.populations
    assert loaded.global_prior.alpha == pytest.approx(direct.global_prior.alpha)
    for d, p in direct.domains.items():
        assert loaded.domains[d].alpha == pytest.approx(p.alpha)
        assert loaded.domains[d].beta == pytest.approx(p.beta)
    # the saved fit loads back against the same data
    from bayesrate.models.base import RateModel

    again = RateModel.load(path / "fit.nc", data=data)
    assert again.config_hash == hierarchical_fit.config_hash


def test_censored_model_is_not_exportable(censored_fit, poisson_world, tmp_path):
    result = ppc_for(censored_fit, poisson_world, seed="x")
    with pytest.raises(ArtifactError, match="no domain structure"):
        write_artifact(censored_fit, dataset="sim", root=tmp_path, ppc=result, force=False)


def test_replicated_detections_fall_on_uniform_subsets_of_their_group():
    """The gap check places each group's replicated count on its intervals: every subset
    of the right size equally likely (chi-square over the 10 subsets of 2 among 5), and
    the counts are exact."""
    from itertools import combinations

    from bayesrate.checks.ppc import _place_detections

    rng = np.random.default_rng(20261201)
    group = np.array([0, 1, 0, 0, 1, 0, 0, 1])  # group 0: five intervals, group 1: three
    sizes = np.array([5, 3])
    seen = {c: 0 for c in combinations(np.flatnonzero(group == 0), 2)}
    n = 20_000
    for _ in range(n):
        flags = _place_detections(group, np.array([2, 3]), sizes, rng.random(len(group)))
        assert flags[group == 1].sum() == 3 and flags[group == 0].sum() == 2
        seen[tuple(np.flatnonzero(flags & (group == 0)))] += 1
    observed = np.array(list(seen.values()))
    assert stats.chisquare(observed).pvalue > 1e-3


def gap_cv_by_brute_force(obs, min_detections):
    """Mean over pages with at least ``min_detections`` detections of the CV (population
    SD over mean) of the gaps between the visits that detected a change."""
    page = np.repeat(np.arange(obs.n_pages), np.diff(obs.offsets))
    frame = pd.DataFrame({"page": page, "time": obs.time, "changed": obs.changed.astype(bool)})
    cvs = []
    for _, visits in frame[frame["changed"]].groupby("page"):
        if len(visits) >= min_detections:
            gaps = np.diff(visits["time"].to_numpy())
            cvs.append(gaps.std() / gaps.mean())
    return float(np.mean(cvs)), len(cvs)


def test_gap_check_reads_every_eligible_page_below_the_cap(censored_fit, poisson_world):
    """Below the cap the observed gap CV is the data's own (every page with enough
    detections, whatever the seed); above it a subsample of the cap's size, drawn per seed."""
    from bayesrate.checks.ppc import (
        MIN_DETECTIONS_FOR_GAPS,
        posterior_predictive_checks,
        replicate,
    )

    expected, n_eligible = gap_cv_by_brute_force(poisson_world, MIN_DETECTIONS_FOR_GAPS)
    assert 20 < n_eligible < poisson_world.n_pages
    reps = replicate(censored_fit, poisson_world, "posterior", 20, seed="gaps")

    def observed(seed, **kwargs):
        result = posterior_predictive_checks(poisson_world, reps, seed=seed, **kwargs)
        return next(s.observed for s in result.statistics if s.name == "gap_cv")

    assert observed("one") == pytest.approx(expected, rel=1e-12)
    assert observed("two") == pytest.approx(expected, rel=1e-12)
    capped = {observed(seed, n_gap_pages=10) for seed in ("one", "two", "three")}
    assert len(capped) == 3 and expected not in capped
