"""The two-state MMPP under interval censoring against independent oracles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.special import logsumexp

from bayesrate.checks.ppc import gap_cv
from bayesrate.errors import ObservationError
from bayesrate.estimators import mmpp
from bayesrate.likelihood import CensoredGroups, loglik_grid
from bayesrate.seeds import rng_from

CASES = [
    # lam, ratio, q_in, q_out, tau (hours)
    (0.01, 5.0, 0.001, 0.02, 24.0),
    (0.5, 3.0, 0.1, 0.3, 1000.0),  # entries near 1e-200: the scaling matters
    (0.02, 10.0, 1e-4, 0.01, 24.0 * 365),
    (2e-6, 1.0, 0.0, 0.0, 24.0),  # Poisson: no switching
    (0.03, 4.0, 0.2, 0.2, 1e-3),  # short interval: the series branch
]


def expm_oracle(lam, ratio, q_in, q_out, tau):
    generator = np.array([[-q_in, q_in], [q_out, -q_out]])
    quiet = expm((generator - np.diag([lam, ratio * lam])) * tau)
    return quiet, expm(generator * tau) - quiet


@pytest.mark.parametrize("case", CASES)
def test_transfer_matrices_match_scipy_expm(case):
    quiet, change = mmpp.transfer_matrices(*case)
    quiet_ref, change_ref = expm_oracle(*case)
    np.testing.assert_allclose(quiet, quiet_ref, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(change, change_ref, rtol=1e-9, atol=1e-15)
    # the rows of M0 + M1 are the switching chain's, so they sum to 1
    np.testing.assert_allclose((quiet + change).sum(axis=1), 1.0, rtol=1e-12)


def random_world(seed: str, n_pages: int = 12, max_intervals: int = 40):
    """Intervals drawn from a few lengths (so runs form) with random flags."""
    rng = rng_from(seed)
    sizes = rng.integers(0, max_intervals, n_pages)
    page = np.repeat(np.arange(n_pages), sizes)
    tau = rng.choice([6.0, 24.0, 24.0, 24.0, 72.5], size=len(page))
    changed = (rng.random(len(page)) < 0.3).astype(np.int8)
    changed[rng.random(len(page)) < 0.5] = 0  # long unchanged runs
    return page, tau, changed, n_pages


def brute_force_loglik(page, tau, changed, n_pages, lam, ratio, q_in, q_out):
    """``log π·Π M·1`` interval by interval with scipy's expm (no runs, no closed form)."""
    total = q_in + q_out
    pi = np.array([q_out, q_in]) / total if total > 0 else np.array([1.0, 0.0])
    out = np.zeros(n_pages)
    for p in range(n_pages):
        alpha, log_scale = pi.copy(), 0.0
        for t, c in zip(tau[page == p], changed[page == p], strict=True):
            quiet, change = expm_oracle(lam, ratio, q_in, q_out, t)
            alpha = alpha @ (change if c else quiet)
            log_scale += np.log(alpha.sum())
            alpha /= alpha.sum()
        out[p] = log_scale
    return out


def test_runs_compress_without_losing_intervals():
    page, tau, changed, n_pages = random_world("mmpp-runs")
    runs = mmpp.VisitRuns.from_intervals(page, tau, changed, n_pages)
    assert runs.n_runs < len(tau)
    np.testing.assert_array_equal(runs.n_intervals, np.bincount(page, minlength=n_pages))
    expanded_tau = np.repeat(runs.tau, runs.count)
    expanded_flag = np.repeat(runs.changed, runs.count)
    np.testing.assert_array_equal(expanded_tau, tau)
    np.testing.assert_array_equal(expanded_flag, changed)


@pytest.mark.parametrize("params", [(5.0, 0.01, 0.05), (1.0, 0.0, 0.0), (30.0, 1e-3, 0.2)])
def test_grid_loglik_matches_interval_by_interval_product(params):
    page, tau, changed, n_pages = random_world("mmpp-brute")
    runs = mmpp.VisitRuns.from_intervals(page, tau, changed, n_pages)
    theta = np.log([1e-4, 0.01, 0.3])
    got = mmpp.grid_loglik(runs, theta, *params)
    for k, th in enumerate(theta):
        ref = brute_force_loglik(page, tau, changed, n_pages, np.exp(th), *params)
        np.testing.assert_allclose(got[:, k], ref, rtol=1e-9, atol=1e-9)


def test_without_bursts_it_is_the_poisson_likelihood():
    page, tau, changed, n_pages = random_world("mmpp-poisson")
    runs = mmpp.VisitRuns.from_intervals(page, tau, changed, n_pages)
    theta = np.linspace(-12, 0, 9)
    groups = poisson_groups(page, tau, changed, n_pages)
    ref = loglik_grid(groups, theta)
    # r = 1: the states are the same; no switching at all: the quiet state alone
    np.testing.assert_allclose(mmpp.grid_loglik(runs, theta, 1.0, 0.3, 0.7), ref, rtol=1e-10)
    np.testing.assert_allclose(mmpp.grid_loglik(runs, theta, 7.0, 0.0, 0.5), ref, rtol=1e-10)


def poisson_groups(page, tau, changed, n_pages) -> CensoredGroups:
    """The home formula's statistics, built by hand: one changed group per interval."""
    hit = changed == 1
    unchanged = np.bincount(page[~hit], weights=tau[~hit], minlength=n_pages)
    return CensoredGroups(
        unchanged=unchanged,
        group_page=page[hit],
        group_log_exposure=np.log(tau[hit]),
        group_count=np.ones(int(hit.sum())),
    )


def gillespie_flags(lam, ratio, q_in, q_out, taus, n, rng):
    """Event-level simulation of the chain and its changes; one row of flags per world."""
    rates = np.array([lam, ratio * lam])
    switch = np.array([q_in, q_out])
    state = (rng.random(n) < q_in / (q_in + q_out)).astype(int)
    flags = np.zeros((n, len(taus)), dtype=np.int8)
    for i, tau in enumerate(taus):
        left = np.full(n, tau)
        active = np.ones(n, dtype=bool)
        while active.any():
            idx = np.flatnonzero(active)
            total = rates[state[idx]] + switch[state[idx]]
            wait = rng.exponential(1.0 / total)
            done = wait >= left[idx]
            active[idx[done]] = False
            go = idx[~done]
            left[go] -= wait[~done]
            is_change = rng.random(len(go)) < rates[state[go]] / total[~done]
            flags[go[is_change], i] = 1
            state[go[~is_change]] = 1 - state[go[~is_change]]
    return flags


def pattern_probabilities(taus, lam, params):
    """exp(loglik) of every flag pattern on the visit grid ``taus``, one page per pattern."""
    patterns = np.array(list(itertools.product([0, 1], repeat=len(taus))), dtype=np.int8)
    page = np.repeat(np.arange(len(patterns)), len(taus))
    runs = mmpp.VisitRuns.from_intervals(
        page, np.tile(taus, len(patterns)), patterns.ravel(), len(patterns)
    )
    return patterns, np.exp(mmpp.grid_loglik(runs, [np.log(lam)], *params)[:, 0])


def frequencies(flags, patterns):
    code = flags @ (2 ** np.arange(flags.shape[1])[::-1])
    ref = patterns @ (2 ** np.arange(patterns.shape[1])[::-1])
    counts = np.bincount(code, minlength=len(patterns))
    return counts[ref] / len(flags)


TAUS = np.array([1.0, 1.0, 0.5, 2.0])
LAM, PARAMS = 0.25, (8.0, 0.4, 1.0)


def test_likelihood_matches_event_level_simulation():
    patterns, prob = pattern_probabilities(TAUS, LAM, PARAMS)
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    n = 200_000
    freq = frequencies(gillespie_flags(LAM, *PARAMS, TAUS, n, rng_from("mmpp-gillespie")), patterns)
    sd = np.sqrt(prob * (1 - prob) / n)
    assert np.all(np.abs(freq - prob) < 4.5 * sd), np.c_[freq, prob, sd]
    # the test has power: the Poisson with the same long-run rate is far off
    share = PARAMS[1] / (PARAMS[1] + PARAMS[2])
    _, poisson = pattern_probabilities(TAUS, LAM * (1 + share * (PARAMS[0] - 1)), (1.0, 0, 0))
    assert np.max(np.abs(freq - poisson) / sd) > 20


def test_simulated_changes_follow_the_likelihood():
    patterns, prob = pattern_probabilities(TAUS, LAM, PARAMS)
    n = 100_000
    runs = mmpp.VisitRuns.from_intervals(
        np.repeat(np.arange(n), len(TAUS)), np.tile(TAUS, n), np.zeros(n * len(TAUS)), n
    )
    params = mmpp.BurstParameters(*PARAMS, mu=0.0, sigma=1.0)
    flags = mmpp.simulate_changes(runs, np.full(n, LAM), params, rng_from("mmpp-sim"))
    freq = frequencies(flags.reshape(n, len(TAUS)), patterns)
    sd = np.sqrt(prob * (1 - prob) / n)
    assert np.all(np.abs(freq - prob) < 4.5 * sd), np.c_[freq, prob, sd]


def bursty_world(seed: str, n_pages: int = 150, days: int = 365):
    """Daily visits; quiet rates log-normal around one change per 20 days; bursts."""
    rng = rng_from(seed)
    truth = mmpp.BurstParameters(
        ratio=12.0,
        q_in=1 / (40 * 24.0),
        q_out=1 / (4 * 24.0),
        mu=float(np.log(1 / (20 * 24.0))),
        sigma=0.5,
    )
    lam = np.exp(truth.mu + truth.sigma * rng.standard_normal(n_pages))
    page = np.repeat(np.arange(n_pages), days)
    tau = np.full(len(page), 24.0)
    grid = mmpp.VisitRuns.from_intervals(page, tau, np.zeros(len(page)), n_pages)
    flags = mmpp.simulate_changes(grid, lam, truth, rng)
    return mmpp.VisitRuns.from_intervals(page, tau, flags, n_pages), page, flags, truth


THETA = np.linspace(np.log(1e-5), np.log(0.5), 61)


@pytest.fixture(scope="module")
def bursty_fits():
    runs, page, flags, truth = bursty_world("mmpp-recovery")
    return (
        runs,
        page,
        flags,
        truth,
        mmpp.fit(runs, theta=THETA),
        mmpp.fit(runs, theta=THETA, poisson=True),
    )


def test_fit_recovers_bursts_and_the_gap_check_tells_the_models_apart(bursty_fits):
    runs, _, flags, truth, fitted, poisson = bursty_fits
    est = fitted.params
    assert est.ratio == pytest.approx(truth.ratio, rel=0.35)
    assert est.burst_days == pytest.approx(truth.burst_days, rel=0.35)
    assert est.quiet_days == pytest.approx(truth.quiet_days, rel=0.35)
    assert est.mu == pytest.approx(truth.mu, abs=0.25)
    assert fitted.loglik - poisson.loglik > 50
    # gap CV of the world against each fit's replicates on the same visits
    n_pages = runs.n_pages
    offsets = np.arange(0, (365 + 1) * (n_pages + 1), 366)
    time = np.tile(np.arange(366) * 24.0, n_pages)
    visit_flags = np.zeros(len(time), dtype=np.int8)
    keep = np.ones(len(time), dtype=bool)
    keep[offsets[:-1]] = False
    visit_flags[keep] = flags
    observed = gap_cv(visit_flags, time, offsets)[0]
    rng = rng_from("mmpp-gap")
    reps = {}
    for name, fit in [("mmpp", fitted), ("poisson", poisson)]:
        values = []
        for _ in range(20):
            visit_flags[keep] = mmpp.replicate_changes(fit, runs, rng)
            values.append(gap_cv(visit_flags, time, offsets)[0])
        reps[name] = np.array(values)
    assert np.mean(reps["poisson"] >= observed) == 0.0  # the Poisson misses the clustering
    assert 0.05 < np.mean(reps["mmpp"] >= observed) < 0.95


def test_heldout_score_of_the_poisson_is_its_posterior_predictive():
    page, tau, changed, n_pages = random_world("mmpp-heldout", n_pages=8, max_intervals=60)
    split = np.array(
        [
            np.flatnonzero(page == p)[: (page == p).sum() // 2].max(initial=-1)
            for p in range(n_pages)
        ]
    )
    before = np.zeros(len(page), dtype=bool)
    for p in range(n_pages):
        before[(page == p) & (np.arange(len(page)) <= split[p])] = True
    keep = np.bincount(page[before], minlength=n_pages) > 0
    keep &= np.bincount(page[~before], minlength=n_pages) > 0
    sel = keep[page]
    page, tau, changed, before = page[sel], tau[sel], changed[sel], before[sel]
    page = np.cumsum(np.r_[0, np.diff(page) != 0]) if len(page) else page
    n = int(page.max()) + 1
    train = mmpp.VisitRuns.from_intervals(page[before], tau[before], changed[before], n)
    full = mmpp.VisitRuns.from_intervals(page, tau, changed, n)
    theta = np.linspace(-10, 0, 41)
    fitted = mmpp.fit(train, theta=theta, poisson=True)
    got = mmpp.heldout_log_score(fitted, train, full)
    # oracle: the test intervals are independent of the training ones given λ
    post = fitted.page_posterior()
    test = loglik_grid(poisson_groups(page[~before], tau[~before], changed[~before], n), theta)
    np.testing.assert_allclose(got, logsumexp(test, b=post, axis=1), rtol=1e-9)


def test_bad_intervals_are_named():
    with pytest.raises(ObservationError, match=r"positions \[2\]"):
        mmpp.VisitRuns.from_intervals([0, 0, 0], [1.0, 2.0, -1.0], [0, 1, 0], 1)
    with pytest.raises(ObservationError, match=r"not 0/1 \(positions \[1\]"):
        mmpp.VisitRuns.from_intervals([0, 0], [1.0, 2.0], [0, 2], 1)
    with pytest.raises(ObservationError, match="grouped by page"):
        mmpp.VisitRuns.from_intervals([1, 0], [1.0, 2.0], [0, 1], 2)
    with pytest.raises(ObservationError, match="one quiet rate per page"):
        mmpp.simulate_changes(
            mmpp.VisitRuns.from_intervals([0, 1], [1.0, 1.0], [0, 0], 2),
            np.ones(3),
            mmpp.BurstParameters(2.0, 0.1, 0.1, 0.0, 1.0),
            rng_from("x"),
        )


@pytest.mark.parametrize("steady_share", [0.0, 0.4])
def test_window_predictive_matches_pattern_enumeration(steady_share):
    page, tau, changed, n_pages = random_world("mmpp-window", n_pages=5, max_intervals=30)
    train = mmpp.VisitRuns.from_intervals(page, tau, changed, n_pages)
    theta = np.linspace(-8, 0, 25)
    params = mmpp.BurstParameters(6.0, 0.02, 0.1, mu=-3.0, sigma=1.5)
    chains = [params, mmpp.BurstParameters(1.0, 0.0, 0.0, -3.0, 1.5)]
    ll_train = [mmpp.grid_loglik(train, theta, c.ratio, c.q_in, c.q_out) for c in chains]
    fitted = mmpp.BurstFit(
        params,
        0.0,
        theta,
        ll_train[0],
        1,
        True,
        steady_share,
        ll_train[1] if steady_share else None,
    )
    test_tau = np.array([24.0, 24.0, 6.0, 48.0, 24.0])
    lead, window = 10.0, 30.0
    m = len(test_tau)
    pred = mmpp.window_predictive(
        fitted,
        train,
        np.arange(0, m * (n_pages + 1), m),
        np.tile(test_tau, n_pages),
        np.full(n_pages, lead),
        np.full(n_pages, window),
        np.full(n_pages, m),
    )
    # oracle: Bayes' rule by hand over class and grid, each tail scored by the forward
    # likelihood of the whole sequence
    logw = -0.5 * ((theta - params.mu) / params.sigma) ** 2
    logw -= logsumexp(logw)
    prior_class = np.log([1.0 - steady_share, max(steady_share, 1e-300)])

    def conditional(tails):
        """P(tail | training sequence) per page, each tail ``(taus, flags)``."""
        seq_page, seq_tau, seq_flag = [], [], []
        for p in range(n_pages):
            for j, (t_tail, f_tail) in enumerate(tails):
                sel = page == p
                seq_page.append(np.full(sel.sum() + len(t_tail), p * len(tails) + j))
                seq_tau.append(np.r_[tau[sel], t_tail])
                seq_flag.append(np.r_[changed[sel], f_tail])
        runs = mmpp.VisitRuns.from_intervals(
            np.concatenate(seq_page),
            np.concatenate(seq_tau),
            np.concatenate(seq_flag),
            n_pages * len(tails),
        )
        joint = []  # log P(class, θ, train + tail) per (page, tail, class, θ)
        for c, chain in enumerate(chains):
            ll = mmpp.grid_loglik(runs, theta, chain.ratio, chain.q_in, chain.q_out)
            joint.append(ll.reshape(n_pages, len(tails), len(theta)) + logw + prior_class[c])
        joint = np.stack(joint, axis=2)
        evidence = logsumexp(
            np.stack(ll_train, axis=1) + logw + prior_class[None, :, None], axis=(1, 2)
        )
        return np.exp(logsumexp(joint, axis=(2, 3)) - evidence[:, None])

    patterns = np.array(list(itertools.product([0, 1], repeat=m)))
    prob = conditional([(test_tau, f) for f in patterns])
    for p in range(n_pages):
        expected = np.bincount(patterns.sum(axis=1), weights=prob[p], minlength=m + 1)
        np.testing.assert_allclose(pred.pmf[p], expected, rtol=1e-9, atol=1e-14)
    quiet = conditional([([lead, window], [0, 0]), ([lead, window], [1, 0])]).sum(axis=1)
    np.testing.assert_allclose(pred.prob_change, 1.0 - quiet, rtol=1e-9)
    # the held-out score of one tail is its conditional probability
    tail_flags = np.array([1, 0, 0, 1, 0])
    page_full = np.r_[page, np.repeat(np.arange(n_pages), m)]
    order = np.argsort(page_full, kind="stable")
    full = mmpp.VisitRuns.from_intervals(
        page_full[order],
        np.r_[tau, np.tile(test_tau, n_pages)][order],
        np.r_[changed, np.tile(tail_flags, n_pages)][order],
        n_pages,
    )
    np.testing.assert_allclose(
        mmpp.heldout_log_score(fitted, train, full),
        np.log(conditional([(test_tau, tail_flags)])[:, 0]),
        rtol=1e-9,
    )
    # P(K = k), P(K < k), including a count beyond the support
    k = np.array([0, 2, 5, 6, 1])
    at_k, below = pred.at(k)
    for p in range(n_pages):
        pmf = np.r_[pred.pmf[p], 0.0, 0.0]
        assert at_k[p] == pytest.approx(pmf[k[p]])
        assert below[p] == pytest.approx(pmf[: k[p]].sum())


def test_the_grid_scan_leaves_out_only_negligible_points(bursty_fits):
    runs, *_ = bursty_fits
    theta = np.linspace(mmpp.THETA_LOW, mmpp.THETA_HIGH, mmpp.GRID_POINTS)
    args = (runs, theta, 12.0, 1 / (40 * 24.0), 1 / (4 * 24.0))
    full = mmpp.grid_loglik(*args)
    scan = mmpp.grid_loglik(*args, stride=mmpp.SCAN_STRIDE)
    done = np.isfinite(scan)
    assert done.mean() < 0.6  # the scan saves work
    np.testing.assert_array_equal(scan[done], full[done])
    assert np.all(
        full[~done]
        < full.max(axis=1, keepdims=True).repeat(len(theta), 1)[~done] - mmpp.SCAN_DROP + 1e-9
    )
    np.testing.assert_allclose(
        mmpp.marginal_loglik(scan, theta, -6.0, 1.0),
        mmpp.marginal_loglik(full, theta, -6.0, 1.0),
        rtol=1e-14,
    )


def test_mixture_finds_the_steady_pages():
    """Half the pages steady (Poisson), half bursty: the share, the chain and each page's
    class are recovered, and the mixture fits better than one chain for all."""
    runs, page, flags, truth = bursty_world("mmpp-mixture", n_pages=200)
    rng = rng_from("mmpp-mixture-steady")
    steady = np.arange(200) % 2 == 0
    lam = np.exp(truth.mu + truth.sigma * rng.standard_normal(200))
    grid = mmpp.VisitRuns.from_intervals(page, np.full(len(page), 24.0), np.zeros(len(page)), 200)
    poisson_flags = mmpp.simulate_changes(grid, lam, mmpp.BurstParameters(1, 0, 0, 0, 1), rng)
    flags = np.where(steady[page], poisson_flags, flags)
    runs = mmpp.VisitRuns.from_intervals(page, np.full(len(page), 24.0), flags, 200)
    mixed = mmpp.fit(runs, theta=THETA, mixture=True)
    single = mmpp.fit(runs, theta=THETA)
    assert mixed.loglik > single.loglik + 5
    assert mixed.steady_share == pytest.approx(0.5, abs=0.15)
    assert mixed.params.ratio == pytest.approx(truth.ratio, rel=0.35)
    assert mixed.params.burst_days == pytest.approx(truth.burst_days, rel=0.35)
    prob = mixed.steady_probability()
    assert prob[steady].mean() > 0.6 > 0.4 > prob[~steady].mean()
    result = mmpp.information(mixed, runs)
    assert result.identified and result.at_boundary == ()
    bounds = result.interval(0.9)
    assert bounds["steady_share"][0] < 0.5 < bounds["steady_share"][1]
    assert bounds["ratio"][0] < truth.ratio < bounds["ratio"][1]


def _louis_hessian(ll: np.ndarray, theta: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    """Hessian in ``(μ, log σ)`` of ``Σ_p log Σ_g exp(ll[p, g]) w_g`` for grid-normalised
    Normal weights ``w``, by Louis's identity (moments of the weights' derivatives under
    each page's posterior and under the prior), not by differences."""
    u = (theta - mu) / sigma
    a = -0.5 * u**2
    grad = np.stack([u / sigma, u**2], axis=1)  # ∂a/∂μ, ∂a/∂log σ
    hess = np.empty((len(theta), 2, 2))
    hess[:, 0, 0] = -1.0 / sigma**2
    hess[:, 0, 1] = hess[:, 1, 0] = -2.0 * u / sigma
    hess[:, 1, 1] = -2.0 * u**2

    def moments(logp):
        w = np.exp(logp - logsumexp(logp))
        mean = w @ grad
        centred = grad - mean
        return np.einsum("g,gij->ij", w, hess) + np.einsum("g,gi,gj->ij", w, centred, centred)

    prior = moments(a)
    return sum(moments(row + a) - prior for row in ll)


def test_information_of_the_population_matches_louis_identity():
    rng = rng_from("mmpp-louis")
    n_pages, days = 60, 200
    lam = np.exp(np.log(1 / (15 * 24.0)) + 0.8 * rng.standard_normal(n_pages))
    page = np.repeat(np.arange(n_pages), days)
    tau = np.full(len(page), 24.0)
    flags = (rng.random(len(page)) < -np.expm1(-lam[page] * 24.0)).astype(np.int8)
    runs = mmpp.VisitRuns.from_intervals(page, tau, flags, n_pages)
    fitted = mmpp.fit(runs, theta=THETA, poisson=True)
    result = mmpp.information(fitted, runs)
    assert result.names == ("mu", "log_sigma")
    p = fitted.params
    expected = np.linalg.inv(-_louis_hessian(fitted.page_loglik, THETA, p.mu, p.sigma))
    np.testing.assert_allclose(result.covariance, expected, rtol=2e-3)
    # the natural-scale intervals are the images of the transformed ones
    se = np.sqrt(np.diag(expected))
    z = 1.6448536269514722
    bounds = result.interval(0.9)
    assert bounds["mu"] == pytest.approx((p.mu - z * se[0], p.mu + z * se[0]), rel=1e-3)
    assert bounds["sigma"] == pytest.approx(
        (p.sigma * np.exp(-z * se[1]), p.sigma * np.exp(z * se[1])), rel=1e-3
    )


def _pit(posterior: np.ndarray, theta: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Each page's posterior CDF at its true log-rate, the grid points as bin centres."""
    step = theta[1] - theta[0]
    below = np.clip(np.floor((value - theta[0]) / step + 0.5).astype(int), 0, len(theta) - 1)
    cdf = np.cumsum(posterior, axis=1)
    rows = np.arange(len(value))
    inside = np.clip((value - (theta[below] - step / 2)) / step, 0.0, 1.0)
    return cdf[rows, below] - posterior[rows, below] * (1.0 - inside)


@pytest.mark.slow
def test_intervals_cover_the_truth_at_their_nominal_rate():
    """Over 40 simulated bursty worlds: the shared parameters' 90% intervals and the
    pages' 90% posterior intervals of their quiet log-rates cover the truth at 85–95%,
    and the standard errors match the spread of the estimates across worlds."""
    truth_hits, estimates, errors, page_pit = [], [], [], []
    for w in range(40):
        seed = f"mmpp-coverage-{w}"
        runs, _, _, truth = bursty_world(seed, n_pages=100)
        rng = rng_from(seed)  # bursty_world's first draws are the quiet rates
        log_lam = truth.mu + truth.sigma * rng.standard_normal(runs.n_pages)
        fitted = mmpp.fit(runs, theta=THETA)
        result = mmpp.information(fitted, runs)
        assert result.identified
        bounds = result.interval(0.9)
        truth_values = {
            "ratio": truth.ratio,
            "q_in": truth.q_in,
            "q_out": truth.q_out,
            "mu": truth.mu,
            "sigma": truth.sigma,
        }
        truth_hits.append([bounds[k][0] <= v <= bounds[k][1] for k, v in truth_values.items()])
        estimates.append(result.estimate)
        errors.append(np.sqrt(np.diag(result.covariance)))
        page_pit.append(_pit(fitted.page_posterior(), THETA, log_lam))
    hits = np.array(truth_hits)
    assert 0.85 <= hits.mean() <= 0.95, hits.mean(axis=0)
    spread = np.std(np.array(estimates), axis=0, ddof=1) / np.mean(np.array(errors), axis=0)
    assert np.all((spread > 0.75) & (spread < 1.33)), spread
    pit = np.concatenate(page_pit)
    assert 0.85 <= np.mean((pit > 0.05) & (pit < 0.95)) <= 0.95


def test_population_weights_are_scipys_logsumexp_bit_for_bit():
    """The population search's own 1-d logsumexp (scipy's overhead was ~80% of a fit) is
    scipy's to the last bit: Normal weights on the grid, ties at the top, random arrays,
    and the non-finite cases handed back to scipy."""
    rng = rng_from("mmpp-logsumexp")
    step = THETA[1] - THETA[0]
    cases = [np.array([-np.inf, -np.inf]), np.array([np.inf, 1.0]), np.array([np.nan, 0.0])]
    for i in range(3000):
        mu = rng.uniform(THETA[0] - 2, THETA[-1] + 2)
        if i % 3 == 0:  # two grid points equally far from μ: two terms at the top
            mu = THETA[rng.integers(len(THETA) - 1)] + step / 2
        cases.append(-0.5 * ((THETA - mu) / np.exp(rng.uniform(-6, 3))) ** 2)
        cases.append(rng.normal(size=int(rng.integers(1, 300))) * 10)
    with np.errstate(invalid="ignore"):
        for a in cases:
            got, want = mmpp._logsumexp_1d(a), logsumexp(a)
            assert got == want or (np.isnan(got) and np.isnan(want)), (a, got, want)
    mu, sigma = -6.0, 1.3
    want = -0.5 * ((THETA - mu) / sigma) ** 2
    assert np.array_equal(mmpp._log_weights(THETA, mu, sigma), want - logsumexp(want))


def test_a_world_without_bursts_keeps_the_search_in_its_box():
    """Detections more regular than a Poisson's (a weekly job, each week with probability
    0.6, on a daily crawl) pull the chain towards a degenerate one (without the box the
    switching rates ran to 1e17 per hour, where every likelihood underflows); the search
    stays inside its box and every likelihood it returns is finite."""
    rng = rng_from("mmpp-no-bursts")
    n_pages, weeks = 30, 100
    page = np.repeat(np.arange(n_pages), 7 * weeks)
    tau = np.full(len(page), 24.0)
    weekly = (rng.random((n_pages, weeks)) < 0.6).astype(np.int8)
    flags = np.zeros((n_pages, weeks, 7), dtype=np.int8)
    flags[:, :, 0] = weekly
    runs = mmpp.VisitRuns.from_intervals(page, tau, flags.reshape(-1), n_pages)
    fitted = mmpp.fit(runs, theta=THETA, max_evaluations=150)
    p = fitted.params
    x = np.log([p.ratio - 1.0, p.q_in, p.q_out])
    assert np.all(x >= mmpp.SEARCH_LOW) and np.all(x <= mmpp.SEARCH_HIGH)
    assert np.isfinite(fitted.loglik)
    assert np.all(np.isfinite(fitted.page_marginal()))
