"""The priors.json artifact: schema, validation, lookup, and the recommended choice."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from bayesrate.errors import ArtifactError
from bayesrate.priors import (
    GLOBAL_KEY,
    GammaPrior,
    NormalMixture,
    Population,
    PriorSet,
    Summary,
    compression_kl,
    find_artifact,
    gamma_view_fidelity,
    lognormal_moments,
)


def make(multipliers=None):
    return PriorSet(
        global_prior=GammaPrior(0.5, 2.0),
        domains={"a.com": GammaPrior(2.0, 4.0), "b.org": GammaPrior(1.0, 10.0)},
        hour_of_week=multipliers,
        metadata={
            "model": "hierarchical",
            "dataset": "x",
            "domain_extra": {"a.com": {"n_pages": 3}},
        },
    )


def test_round_trip_and_units(tmp_path):
    week = np.linspace(0.5, 1.5, 168)
    priors = make(week / week.mean())
    path = priors.save(tmp_path / "m")
    doc = json.loads(path.read_text())
    assert doc["units"]["rate"] == "changes per day"
    assert doc["domains"]["a.com"] == {"alpha": 2.0, "beta": 4.0, "n_pages": 3}
    back = PriorSet.load(tmp_path / "m")
    assert back.for_domain("a.com") == GammaPrior(2.0, 4.0)
    assert back.for_domain("unseen.net") == GammaPrior(0.5, 2.0)
    assert np.allclose(back.hour_of_week, week / week.mean())
    alpha, beta = back.arrays(["b.org", "zzz", "a.com"])
    assert alpha.tolist() == [1.0, 0.5, 2.0] and beta.tolist() == [10.0, 2.0, 4.0]


def test_moment_matching():
    p = GammaPrior.from_moments(0.3, 0.05)
    assert p.mean == pytest.approx(0.3) and p.variance == pytest.approx(0.05)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(kind="other"),
        lambda d: d.update(schema_version=99),
        lambda d: d["global"].update(alpha=-1),
        lambda d: d.pop("global"),
        lambda d: d.update(hour_of_week={"multipliers": [1.0] * 5}),
    ],
)
def test_malformed_artifacts_are_refused(tmp_path, edit):
    path = make().save(tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        PriorSet.load(path)


def test_find_artifact_prefers_recommended(tmp_path):
    assert find_artifact(tmp_path) is None
    make().save(tmp_path / "ota-contrib" / "hierarchical")
    make().save(tmp_path / "ota-contrib" / "modulated")
    (tmp_path / "ota-contrib" / "recommended.json").write_text('{"model": "hierarchical"}')
    assert find_artifact(tmp_path) == tmp_path / "ota-contrib" / "hierarchical" / "priors.json"
    (tmp_path / "ota-contrib" / "recommended.json").write_text('{"model": "modulated"}')
    assert find_artifact(tmp_path).parent.name == "modulated"


def test_default_prior_is_weak_in_beta():
    default = PriorSet.default().global_prior
    assert default.beta <= 1.0  # at most one pseudo-day of exposure


# ---------------------------------------------------------------------- schema version 2
def _population(rng, location=-3.98, scale=1.4, n=400):
    loc = rng.normal(location, 0.05, n)
    sc = np.abs(rng.normal(scale, 0.02, n))
    mixture = NormalMixture.from_draws(loc, sc)
    return Population(
        location=Summary.from_draws(loc),
        scale=Summary.from_draws(sc),
        predictive=mixture,
        n_pages=7,
        compression_kl=compression_kl(loc, sc, mixture),
    ), (loc, sc)


def _v2(rng, multipliers=None):
    pops = {"a.com": _population(rng)[0], "b.org": _population(rng, -1.0, 0.8)[0]}
    glob = _population(rng, -2.0, 1.6)[0]
    gammas = {d: GammaPrior.from_moments(*p.predictive.rate_moments()) for d, p in pops.items()}
    g = GammaPrior.from_moments(*glob.predictive.rate_moments())
    fid = {d: gamma_view_fidelity(p.predictive, gammas[d]) for d, p in pops.items()}
    fid[GLOBAL_KEY] = gamma_view_fidelity(glob.predictive, g)
    uncertainty = None if multipliers is None else {"sd": np.full(168, 0.1)}
    return PriorSet(g, gammas, hour_of_week=multipliers, metadata={"model": "hierarchical"},
                    populations=pops, global_population=glob, gamma_fidelity=fid,
                    hour_of_week_uncertainty=uncertainty)  # fmt: skip


def test_version_2_round_trips_with_populations_and_gamma_views(tmp_path, rng):
    week = np.linspace(0.5, 1.5, 168)
    priors = _v2(rng, week / week.mean())
    path = priors.save(tmp_path / "m")
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2
    entry = doc["domains"]["a.com"]
    assert entry["population"]["family"] == "log-normal"
    assert set(entry["gamma_view"]["fidelity"]) >= {"kl_population_to_gamma", "log_quantile_error"}
    back = PriorSet.load(tmp_path / "m")
    assert back.schema_version == 2
    assert back.populations == priors.populations
    assert back.global_population == priors.global_population
    assert back.for_domain("a.com") == priors.domains["a.com"]
    assert back.population_for("unseen.net") == priors.global_population
    assert back.pages_of("a.com") == 7
    np.testing.assert_allclose(back.hour_of_week, week / week.mean())
    np.testing.assert_allclose(back.hour_of_week_uncertainty["sd"], np.full(168, 0.1))


def test_version_1_files_still_load_and_have_no_population(tmp_path):
    doc = {"schema_version": 1, "kind": "bayesrate-priors", "global": {"alpha": 0.5, "beta": 2.0},
           "domains": {"a.com": {"alpha": 2.0, "beta": 4.0, "n_pages": 3}},
           "hour_of_week": None}  # fmt: skip
    (tmp_path / "priors.json").write_text(json.dumps(doc))
    back = PriorSet.load(tmp_path / "priors.json")
    assert back.schema_version == 1 and back.population_for("a.com") is None
    assert back.for_domain("a.com") == GammaPrior(2.0, 4.0) and back.pages_of("a.com") == 3


def test_mixture_keeps_the_draws_mean_and_variance_of_the_log_rate(rng):
    pop, (loc, sc) = _population(rng)
    w, m, s = (np.asarray(x) for x in (pop.predictive.weights, pop.predictive.means,
                                       pop.predictive.sds))  # fmt: skip
    assert (w * m).sum() == pytest.approx(loc.mean(), rel=1e-12)
    var = (w * (s**2 + m**2)).sum() - (w * m).sum() ** 2
    assert var == pytest.approx((sc**2).mean() + loc.var(), rel=1e-10)
    # E[λ] of the draws' log-normals, averaged (closed form per draw): close, not exact
    assert pop.predictive.rate_moments()[0] == pytest.approx(np.exp(loc + sc**2 / 2).mean(),
                                                             rel=1e-3)  # fmt: skip
    assert 0 <= pop.compression_kl < 1e-3


def test_mixture_spread_and_tails_follow_the_draws_when_one_draw_is_wide():
    """Six of 800 draws with a page sd of 5 (the others 1.2): the mixture's log-rate sd and
    its probabilities 3 nats either side of the mean against a Monte Carlo sample of the
    draws' own mixture (pick a draw, then a Normal). Matching each stratum's mean *rate*
    let ``e^{25/2}`` of one wide draw set its stratum's sd (3.27 overall against 1.31; 15%
    of the mass 3 nats below the mean against 1%)."""
    rng = np.random.default_rng(53)
    n = 800
    loc = rng.normal(-4.0, 0.3, n)
    sd = np.abs(rng.normal(1.2, 0.05, n))
    sd[rng.choice(n, 6, replace=False)] = 5.0
    mixture = NormalMixture.from_draws(loc, sd)
    pick = rng.integers(0, n, 2_000_000)
    sample = loc[pick] + sd[pick] * rng.standard_normal(pick.size)
    w, m, s = (np.asarray(x) for x in (mixture.weights, mixture.means, mixture.sds))
    mixture_sd = np.sqrt((w * (s**2 + m**2)).sum() - (w * m).sum() ** 2)
    assert mixture_sd == pytest.approx(sample.std(), rel=0.01)
    for log_rate in (loc.mean() - 3, loc.mean() + 3):
        below = float(mixture.cdf(log_rate))
        # the eight Normals spread six wide draws over their strata: 16% off at most here
        assert below == pytest.approx((sample < log_rate).mean(), rel=0.25, abs=1e-3)


def test_gamma_view_fidelity_matches_a_direct_computation():
    # the example: log-normal population with σ = 1.4 and mean 0.05/day
    sigma, mean = 1.4, 0.05
    mu = np.log(mean) - sigma**2 / 2
    mixture = NormalMixture((1.0,), (mu,), (sigma,))
    gamma = GammaPrior.from_moments(*mixture.rate_moments())
    fid = gamma_view_fidelity(mixture, gamma)
    pop = stats.lognorm(sigma, scale=np.exp(mu))
    gam = stats.gamma(gamma.alpha, scale=1 / gamma.beta)
    for level, err in fid["log_quantile_error"].items():
        assert err == pytest.approx(np.log(gam.ppf(float(level)) / pop.ppf(float(level))), abs=1e-6)

    # KL(population ‖ Gamma) by scipy quadrature over u = log λ (the Jacobians cancel)
    def integrand(u):
        x = np.exp(u)
        return pop.pdf(x) * x * (pop.logpdf(x) - gam.logpdf(x))

    kl = integrate.quad(integrand, mu - 12 * sigma, mu + 12 * sigma, limit=500)[0]
    assert fid["kl_population_to_gamma"] == pytest.approx(kl, rel=1e-3)
    below = fid["prob_below_mean_over_100"]
    assert below["population"] == pytest.approx(pop.cdf(mean / 100), rel=1e-9)
    assert below["gamma"] == pytest.approx(gam.cdf(mean / 100), rel=1e-9)
    # and the numbers: the Gamma puts ~40% below mean/100, the population 0.5%
    assert below["population"] < 0.01 < 0.3 < below["gamma"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["domains"]["a.com"].pop("population"),
        lambda d: d["domains"]["a.com"]["population"]["predictive"].update(sds=[-1.0] * 8),
        lambda d: d["domains"]["a.com"].pop("gamma_view"),
        lambda d: d["global"]["population"]["location"].update(mean="x"),
    ],
)
def test_malformed_version_2_artifacts_are_refused(tmp_path, rng, edit):
    path = _v2(rng).save(tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        PriorSet.load(path)


@pytest.mark.parametrize("alpha, beta", [(0.02, 3.0), (0.7, 0.05), (40.0, 900.0)])
def test_gamma_from_log_moments_recovers_the_gamma(alpha, beta):
    """The Gamma whose ``log λ`` has a given mean and variance: the moments of a known Gamma's
    ``log λ`` by quadrature of its density give back its α and β."""

    def log_pdf(u):  # density of u = log λ, λ ~ Gamma(α, β)
        return alpha * np.log(beta) - special.gammaln(alpha) + alpha * u - beta * np.exp(u)

    # P(λ < x) ≈ (βx)^α / Γ(α + 1) in the lower tail: 1e-12 of the mass below lo
    lo = (np.log(1e-12) + special.gammaln(alpha + 1)) / alpha - np.log(beta)
    hi = np.log((40 + 60 * alpha) / beta)
    mean = integrate.quad(lambda u: u * np.exp(log_pdf(u)), lo, hi, limit=500)[0]
    second = integrate.quad(lambda u: u * u * np.exp(log_pdf(u)), lo, hi, limit=500)[0]
    gamma = GammaPrior.from_log_moments(mean, second - mean**2)
    assert gamma.alpha == pytest.approx(alpha, rel=1e-5)
    assert gamma.beta == pytest.approx(beta, rel=1e-4)
    with pytest.raises(ArtifactError, match="log-rate moments"):
        GammaPrior.from_log_moments(mean, 0.0)
    with pytest.raises(ArtifactError, match="no Gamma has a log-rate variance"):
        GammaPrior.from_log_moments(mean, 1e-30)


def test_compression_kl_matches_quadrature(rng):
    """``KL(draws' mixture ‖ mixture)`` against adaptive quadrature of ``p log(p / q)`` with
    scipy's Normal densities, at a compression that loses a lot (two clusters of draws, one
    Normal) and one that loses little (the 8-component mixture of the same draws)."""
    loc = np.concatenate([rng.normal(-3.0, 0.4, 150), rng.normal(1.5, 0.3, 150)])
    sd = rng.uniform(0.3, 2.0, loc.size)
    spread = np.sqrt(loc.var() + (sd**2).mean())

    def oracle(mixture):
        def f(x):
            p = stats.norm.pdf(x, loc, sd).mean()
            q = np.exp(mixture.log_density(np.array([x])))[0]
            return p * np.log(p / q)

        lo, hi = loc.mean() - 10 * spread, loc.mean() + 10 * spread
        return integrate.quad(f, lo, hi, limit=400, epsabs=1e-12)[0]

    for mixture in (NormalMixture((1.0,), (0.0,), (2.0,)), NormalMixture.from_draws(loc, sd)):
        expected = oracle(mixture)
        assert compression_kl(loc, sd, mixture) == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_compression_kl_resolves_draws_much_narrower_than_their_spread(rng):
    """Draws 600-1,500 times narrower than their spread (a fixed 2,001-node grid, spaced
    0.03, steps over their peaks): against adaptive quadrature broken at every draw's
    location, and the default rule (capped at 40,001 nodes here) agrees with 16 nodes per
    narrowest sd."""
    loc = rng.normal(0.0, 3.0, 40)
    sd = rng.uniform(0.002, 0.005, loc.size)
    mixture = NormalMixture.from_draws(loc, sd)

    def f(x):
        p = stats.norm.pdf(x, loc, sd).mean()
        return p * np.log(p / np.exp(mixture.log_density(np.array([x])))[0]) if p > 0 else 0.0

    breaks = np.sort(np.concatenate([loc - 3 * sd, loc, loc + 3 * sd]))
    expected = integrate.quad(f, breaks[0] - 1, breaks[-1] + 1, points=breaks, limit=4000)[0]
    assert compression_kl(loc, sd, mixture) == pytest.approx(expected, rel=1e-6)
    spread = np.sqrt(loc.var() + (sd**2).mean())
    finer = math.ceil(20 * spread * 16 / sd.min()) + 1
    assert compression_kl(loc, sd, mixture, points=finer) == pytest.approx(expected, rel=1e-6)
    assert abs(compression_kl(loc, sd, mixture, points=2001) - expected) > 0.01 * expected


def test_lognormal_moments_match_quadrature_and_overflow_to_inf():
    # a three-component mixture of log-rates, weights with a zero, moments by quadrature
    weights = np.array([0.5, 0.0, 0.5])
    means, sds = np.array([-3.0, 50.0, 1.0]), np.array([0.4, 1.0, 1.3])

    def moment(k):
        def integrand(x):
            return np.exp(k * x) * sum(
                w * stats.norm.pdf(x, m, s) for w, m, s in zip(weights, means, sds, strict=True)
            )

        return integrate.quad(integrand, -20.0, 25.0, epsabs=0, epsrel=1e-12, limit=200)[0]

    first, variance = lognormal_moments(means, sds**2, weights, scale=24.0)
    assert first == pytest.approx(24.0 * moment(1), rel=1e-10)
    assert variance == pytest.approx(24.0**2 * (moment(2) - moment(1) ** 2), rel=1e-10)
    # equal weights along an axis (draws x domains), as the export's predictive moments
    m = np.array([[-1.0, 0.0], [0.5, 2.0]])
    v = np.array([[0.3, 0.1], [0.2, 0.4]])
    first, variance = lognormal_moments(m, v)
    lam1, lam2 = np.exp(m + v / 2).mean(axis=0), np.exp(2 * m + 2 * v).mean(axis=0)
    np.testing.assert_allclose(first, lam1, rtol=1e-13)
    np.testing.assert_allclose(variance, lam2 - lam1**2, rtol=1e-12)
    # sd 30: E[λ²] = e^{1800} has no float, E[λ] = e^{450} has one
    first, variance = lognormal_moments(np.array([0.0]), np.array([900.0]))
    assert first == pytest.approx(np.exp(450.0), rel=1e-12)
    assert variance == np.inf
    mixture = NormalMixture((1.0,), (0.0,), (30.0,))
    assert mixture.rate_moments() == (pytest.approx(np.exp(450.0), rel=1e-12), np.inf)


def _kl_closed_forms(m: float, s: float, alpha: float, beta: float) -> tuple[float, float]:
    """``KL(N ‖ G)`` and ``KL(G ‖ N)`` for ``log λ ~ N(m, s)`` and ``λ ~ Gamma(α, β)``, from
    the Gamma's log-moments (``E log λ = ψ(α) − log β``, ``Var log λ = ψ'(α)``,
    ``E λ = α/β``) and the log-normal's ``E λ = e^{m + s²/2}``."""
    log_norm = -0.5 * np.log(2 * np.pi * s * s)
    entropy_n = -log_norm + 0.5
    cross_ng = -(alpha * np.log(beta) - special.gammaln(alpha) + alpha * m
                 - beta * np.exp(m + s * s / 2))  # fmt: skip
    mean_g = special.digamma(alpha) - np.log(beta)
    neg_entropy_g = -special.gammaln(alpha) + alpha * special.digamma(alpha) - alpha
    cross_gn = -log_norm + (special.polygamma(1, alpha) + (mean_g - m) ** 2) / (2 * s * s)
    return cross_ng - entropy_n, neg_entropy_g + cross_gn


@pytest.mark.parametrize(
    "m, s, alpha, beta",
    [
        (0.0, 1.0, 0.05, 1e4),  # the Gamma's density is ~e^{-10^4} in the population's bulk
        (-3.0, 1.4, 0.02, 5e3),  # tiny α: mass spread over hundreds of nats to the left
        (1.0, 0.5, 0.3, 200.0),  # the Gamma underflows on the population's upper half
        (-3.98, 1.4, 0.6, 20.0),  # a mild case (nothing underflows)
    ],
)
def test_gamma_view_fidelity_keeps_every_term_where_the_gamma_underflows(m, s, alpha, beta):
    """Both divergences against closed forms (a Normal log-rate against a Gamma rate) and
    adaptive quadrature of scipy's log-densities (``loggamma`` is ``log`` of a Gamma
    variate): today's code dropped the terms where ``e^{log q}`` underflows."""
    mixture = NormalMixture((1.0,), (m,), (s,))
    gamma = GammaPrior(alpha, beta)
    fid = gamma_view_fidelity(mixture, gamma)
    pq, qp = _kl_closed_forms(m, s, alpha, beta)
    norm = stats.norm(m, s)
    lgam = stats.loggamma(alpha, loc=-np.log(beta))

    def pq_integrand(u):
        return np.exp(norm.logpdf(u)) * (norm.logpdf(u) - lgam.logpdf(u))

    def qp_integrand(u):
        return np.exp(lgam.logpdf(u)) * (lgam.logpdf(u) - norm.logpdf(u))

    quad_pq = integrate.quad(pq_integrand, m - 40 * s, m + 40 * s, limit=800, epsrel=1e-10)[0]
    lo, hi = lgam.ppf(1e-15), lgam.isf(1e-15)
    # the log-Gamma's mode is at log(α/β): split there so quad sees the peak
    mode = np.log(alpha / beta)
    quad_qp = sum(
        integrate.quad(qp_integrand, a, b, limit=800, epsrel=1e-10)[0]
        for a, b in ((lo, mode), (mode, hi))
    )
    assert quad_pq == pytest.approx(pq, rel=1e-7)
    assert quad_qp == pytest.approx(qp, rel=1e-6)
    assert fid["kl_population_to_gamma"] == pytest.approx(pq, rel=1e-6)
    assert fid["kl_gamma_to_population"] == pytest.approx(qp, rel=1e-5)


def test_gamma_view_fidelity_of_a_mixture_matches_quadrature():
    """A two-component population against a Gamma that underflows on its upper component."""
    mixture = NormalMixture((0.7, 0.3), (-4.0, 1.0), (1.0, 0.6))
    gamma = GammaPrior(0.1, 300.0)
    fid = gamma_view_fidelity(mixture, gamma)
    lgam = stats.loggamma(0.1, loc=-np.log(300.0))

    def log_p(u):
        return np.logaddexp(np.log(0.7) + stats.norm.logpdf(u, -4.0, 1.0),
                            np.log(0.3) + stats.norm.logpdf(u, 1.0, 0.6))  # fmt: skip

    def integrand(u):
        return np.exp(log_p(u)) * (log_p(u) - lgam.logpdf(u))

    pieces = ((-45.0, -4.0), (-4.0, 1.0), (1.0, 25.0))
    kl = sum(integrate.quad(integrand, a, b, limit=800, epsrel=1e-10)[0] for a, b in pieces)
    assert kl > 100  # the Gamma's density is below e^{-300} on the upper component
    assert fid["kl_population_to_gamma"] == pytest.approx(kl, rel=1e-6)
