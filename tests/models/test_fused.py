"""The fused Binomial likelihood (``bayesrate.models.fused``) against independent
references: numpy's ``expm1``/``log`` (``bayesrate.likelihood.log1mexp_of_log``), the
unfused PyTensor graph, ``scipy``'s Binomial and central finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from bayesrate.likelihood import log1mexp_of_log
from bayesrate.models._binomial_kernels import (
    BinomialGroups,
    binomial_terms,
    binomial_total_kernel,
    exp_into,
    scatter_to_factors,
)
from bayesrate.simulate import pages_like
from tests.helpers import seed_of

ULP = np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def groups():
    """Changed groups of a small hourly-grid data set (one-hot patterns)."""
    return pages_like(40, seed="fused-groups").observations.hour_of_week_stats("UTC")


def _random_groups(rng, n_pages=30, n_patterns=20, n=600):
    page = np.sort(rng.integers(0, n_pages, n))
    pattern = rng.integers(0, n_patterns, n)
    detected = rng.integers(0, 6, n).astype(float)
    trials = detected + rng.integers(0, 4, n)
    return page, pattern, trials, detected


def _total_and_gradient(log_rate, log_pattern, page, pattern, trials, detected):
    """``Σ v`` and its gradient; the kernel's own sums equal the scatter of the slopes, and
    the sum-only kernel equals both."""
    values, slopes, g_rate, g_pattern = binomial_terms(
        log_rate, log_pattern, page, pattern, trials, detected
    )
    scattered = scatter_to_factors(slopes, page, pattern, len(log_rate), len(log_pattern))
    np.testing.assert_allclose(g_rate, scattered[0], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(g_pattern, scattered[1], rtol=1e-12, atol=1e-300)
    g = BinomialGroups(page, pattern, trials, detected)
    total = binomial_total_kernel(
        np.asarray(log_rate, dtype=float), np.asarray(log_pattern, dtype=float),
        g.page, g.pattern, g.unchanged, g.detected, g.constant_total,
    )  # fmt: skip
    assert total[0] == pytest.approx(values.sum(), rel=1e-12, abs=1e-12)
    np.testing.assert_array_equal(total[1], g_rate)
    np.testing.assert_array_equal(total[2], g_pattern)
    return values.sum(), g_rate, g_pattern


def test_vectorised_exp_matches_numpy_to_a_few_ulp():
    rng = np.random.default_rng(seed_of("fused-exp"))
    x = np.concatenate([rng.uniform(-708, 709, 200_000), [-708.0, 0.0, 1e-300, 709.0]])
    n = len(x)
    got = np.empty(n)
    exp_into(x, got, np.empty(n), np.empty(n, np.int64), n)
    want = np.exp(x)
    assert np.all(np.abs(got - want) <= 4 * ULP * want)


def test_every_term_matches_log1mexp_over_the_whole_range():
    """One detection of one interval per term: value and slope against numpy's formulas
    for log λ in [−800, 800].

    ``e^{−λ}`` has condition number ``λ``, so the tolerance grows with ``λ`` (the kernel
    forms ``λ`` as ``e^{log_rate}·e^{log_pattern}``, the reference as ``e^{log λ}``)."""
    grid = np.linspace(-800, 800, 40_001)
    near_ln2 = np.log(np.log(2.0)) + np.array([-1e-12, 0, 1e-12])
    n = len(grid) + 3
    page = np.arange(n)
    pattern = np.zeros(n, dtype=np.int64)
    ones = np.ones(n)
    for shift in (0.0, 345.0):  # exact products, and the clipped-factor path
        log_rate = np.concatenate([grid, near_ln2]) - shift
        log_lam = log_rate + shift  # what the kernel sees
        values, slope, *_ = binomial_terms(log_rate, np.array([shift]), page, pattern, ones, ones)
        want = log1mexp_of_log(log_lam)
        with np.errstate(over="ignore"):
            lam = np.exp(log_lam)
        tol = 4 * ULP * (1.0 + np.minimum(lam, 1e3)) * np.abs(want) + 1e-300
        assert np.all(np.abs(values - want) <= tol)
        with np.errstate(over="ignore", invalid="ignore"):
            want_slope = np.where(
                lam > 1.0, lam * np.exp(-lam) / -np.expm1(-lam), lam / np.expm1(lam)
            )
        want_slope[lam > 745] = 0.0
        want_slope[lam < 1e-300] = 1.0
        tol = 8 * ULP * (1.0 + np.minimum(lam, 1e3)) * want_slope + 1e-300
        assert np.all(np.abs(slope - want_slope) <= tol)


def test_terms_are_binomial_log_probabilities():
    """Against scipy's Binomial pmf where it is accurate (moderate p)."""
    rng = np.random.default_rng(seed_of("fused-binomial"))
    page, pattern, trials, detected = _random_groups(rng)
    log_rate = rng.normal(-1.0, 0.7, 30)
    log_pattern = rng.normal(0.0, 0.3, 20)
    values, *_ = binomial_terms(log_rate, log_pattern, page, pattern, trials, detected)
    p = -np.expm1(-np.exp(log_rate[page] + log_pattern[pattern]))
    np.testing.assert_allclose(values, stats.binom.logpmf(detected, trials, p), rtol=1e-11)


@pytest.mark.parametrize("spread", [0.3, 2.0, 8.0, 60.0])
def test_value_matches_unfused_formula_and_gradient_matches_differences(spread):
    rng = np.random.default_rng(seed_of(f"fused-value-{spread}"))
    page, pattern, trials, detected = _random_groups(rng)
    log_rate = rng.normal(-1.0, spread, 30)
    log_pattern = rng.normal(0.0, 0.4, 20)
    value, g_rate, g_pattern = _total_and_gradient(
        log_rate, log_pattern, page, pattern, trials, detected
    )
    log_lam = log_rate[page] + log_pattern[pattern]
    with np.errstate(over="ignore"):
        unchanged = (trials - detected) * np.exp(log_lam)
    constant = gammaln(trials + 1) - gammaln(detected + 1) - gammaln(trials - detected + 1)
    want = np.sum(detected * log1mexp_of_log(log_lam) - unchanged + constant)
    assert value == pytest.approx(want, rel=1e-13, abs=1e-10)

    def f(args, keep):  # the terms that depend on the perturbed factor
        return _total_and_gradient(*args, page[keep], pattern[keep], trials[keep], detected[keep])[
            0
        ]

    h = 1e-6
    for which, grad, owner in ((0, g_rate, page), (1, g_pattern, pattern)):
        for i in rng.choice(len(grad), 6, replace=False):
            up, down = [log_rate.copy(), log_pattern.copy()], [log_rate.copy(), log_pattern.copy()]
            up[which][i] += h
            down[which][i] -= h
            keep = owner == i
            difference = (f(up, keep) - f(down, keep)) / (2 * h)
            rounding = 1e-9 * abs(f(up, keep))  # ε·|f|/h
            assert grad[i] == pytest.approx(difference, rel=1e-5, abs=1e-6 + rounding)


def test_extreme_rates_stay_finite_and_exact():
    """Underflow (series branch), overflow (λ → ∞) and factors beyond ±340 in log."""
    log_lam = np.array([-900.0, -25.0, -20.0, np.log(np.log(2.0)), 3.0, 40.0, 700.0, 900.0])
    page = np.arange(len(log_lam))
    pattern = np.zeros(len(log_lam), dtype=np.int64)
    ones = np.ones(len(log_lam))
    for shift in (0.0, 400.0, -400.0):
        value, g_rate, g_pattern = _total_and_gradient(
            log_lam - shift, np.array([shift]), page, pattern, ones, ones
        )
        assert np.isfinite(value) and np.isfinite(g_rate).all() and np.isfinite(g_pattern).all()
        assert value == pytest.approx(np.sum(log1mexp_of_log(log_lam)), rel=1e-14)
        lam = np.exp(log_lam[1:5])
        np.testing.assert_allclose(g_rate[1:5], lam / np.expm1(lam), rtol=1e-13)
        assert g_rate[0] == pytest.approx(1.0)
        assert np.all(g_rate[5:] == 0.0)  # λ e^{-λ} underflows
        assert g_pattern[0] == pytest.approx(g_rate.sum(), rel=1e-14)
    # unchanged intervals: −(n − c)·λ with the exact λ, also beyond the clipped factors
    for shift in (0.0, 400.0):
        values, slopes, *_ = binomial_terms(
            np.array([np.log(50.0) - shift]), np.array([shift]), [0], [0], [3.0], [1.0]
        )
        want = np.log1p(-np.exp(-50.0)) - 2 * 50.0 + np.log(3.0)
        # log λ = (log 50 − 400) + 400 is rounded at ulp(400): λ is exact to ~6e-14
        assert values[0] == pytest.approx(want, rel=1e-13)
        assert slopes[0] == pytest.approx(-100.0, rel=1e-13)


def test_order_of_groups_does_not_matter_and_empty_is_zero():
    rng = np.random.default_rng(seed_of("fused-order"))
    page, pattern, trials, detected = _random_groups(rng)
    log_rate, log_pattern = rng.normal(-1, 2, 30), rng.normal(0, 0.5, 20)
    perm = rng.permutation(len(page))
    a = _total_and_gradient(log_rate, log_pattern, page, pattern, trials, detected)
    b = _total_and_gradient(
        log_rate, log_pattern, page[perm], pattern[perm], trials[perm], detected[perm]
    )
    assert a[0] == pytest.approx(b[0], rel=1e-13)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-14)
    empty = np.array([], dtype=np.int64)
    value, g_rate, g_pattern = _total_and_gradient(log_rate, log_pattern, empty, empty, [], [])
    assert value == 0.0 and not g_rate.any() and not g_pattern.any()


def test_op_in_a_pytensor_graph_equals_the_unfused_graph(groups):
    """Values and gradients of a plain sum (the model's log-density) and of a weighted
    sum (any cotangent), numba kernels and Python ``perform``."""
    import pytensor
    import pytensor.tensor as pt

    from bayesrate.models.fused import binomial_logp
    from bayesrate.models.likelihood import binomial_detection_logp

    rng = np.random.default_rng(seed_of("fused-op"))
    page, pattern = groups.changed_page, groups.changed_pattern
    detected = groups.changed_count.astype(float)
    trials = detected + rng.integers(0, 3, len(detected))
    a = pt.dvector("log_rate")
    b = pt.dvector("log_pattern")
    weights = rng.uniform(0.5, 2.0, len(page))
    fused = binomial_logp(a, b, page, pattern, trials, detected)
    unfused = binomial_detection_logp(detected, a[page] + b[pattern], trials)
    log_rate = rng.normal(-2.0, 2.0, groups.n_pages)
    log_pattern = rng.normal(0.0, 0.3, groups.n_patterns)
    from pytensor.graph.traversal import ancestors

    for reduce, scatters in ((pt.sum, False), (lambda v: pt.sum(weights * v), True)):
        want = pytensor.function([a, b], [reduce(unfused), *pt.grad(reduce(unfused), [a, b])])
        expected = want(log_rate, log_pattern)
        grads = pt.grad(reduce(fused), [a, b])
        # a plain sum takes the gradient the forward pass summed; a weighted one scatters
        ops = {type(v.owner.op).__name__ for v in ancestors(grads) if v.owner is not None}
        assert ("ScatterToFactors" in ops) == scatters
        for mode in ("NUMBA", "FAST_COMPILE"):  # numba kernels; Python ``perform``
            outputs = [reduce(fused), *grads]
            function = pytensor.function([a, b], outputs, mode=mode)
            got = function(log_rate, log_pattern)
            if mode == "NUMBA":  # a plain sum runs the sum-only kernel (graph rewrite)
                forms = [
                    n.op.elementwise
                    for n in function.maker.fgraph.toposort()
                    if type(n.op).__name__ == "BinomialTerms"
                ]
                assert forms == [scatters]
            assert float(got[0]) == pytest.approx(float(expected[0]), rel=1e-13)
            np.testing.assert_allclose(got[1], expected[1], rtol=1e-11, atol=1e-12)
            np.testing.assert_allclose(got[2], expected[2], rtol=1e-11, atol=1e-12)
    g = pt.grad(pt.sum(fused), a)
    with pytest.raises(NotImplementedError, match="second derivatives"):
        pt.grad(g.sum(), a)
