"""The fused changed-interval likelihood (``bayesrate.models.fused``) against independent
references: numpy's ``expm1``/``log``, the unfused PyTensor graph of ``log1mexp_of_log``,
central finite differences and ``HourOfWeekStats.loglik``."""

from __future__ import annotations

import numpy as np
import pytest

from bayesrate.models.fused import (
    _exp_into,
    changed_loglik_by_page,
    changed_loglik_numpy,
)
from bayesrate.models.likelihood import np_log1mexp_of_log
from bayesrate.simulate import pages_like
from tests.helpers import seed_of

ULP = np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def groups():
    """Changed groups of a small hourly-grid data set (one-hot patterns) plus its stats."""
    stats = pages_like(40, seed="fused-groups").observations.hour_of_week_stats("UTC")
    return stats


def _random_groups(rng, n_pages=30, n_patterns=20, n=600):
    page = np.sort(rng.integers(0, n_pages, n))
    pattern = rng.integers(0, n_patterns, n)
    count = rng.integers(1, 6, n).astype(float)
    return page, pattern, count


def test_vectorised_exp_matches_numpy_to_a_few_ulp():
    rng = np.random.default_rng(seed_of("fused-exp"))
    x = np.concatenate([rng.uniform(-708, 709, 200_000), [-708.0, 0.0, 1e-300, 709.0]])
    n = len(x)
    got = np.empty(n)
    _exp_into(x, got, np.empty(n), np.empty(n, np.int64), n)
    want = np.exp(x)
    assert np.all(np.abs(got - want) <= 4 * ULP * want)


def test_every_term_matches_log1mexp_over_the_whole_range():
    """One page per term: per-term value and slope against numpy's formulas.

    ``e^{−λ}`` has condition number ``λ``, so the tolerance grows with ``λ`` (the kernel
    forms ``λ`` as ``e^{log_rate}·e^{log_pattern}``, the reference as ``e^{log λ}``)."""
    grid = np.linspace(-800, 800, 40_001)
    near_ln2 = np.log(np.log(2.0)) + np.array([-1e-12, 0, 1e-12])
    n = len(grid) + 3
    page = np.arange(n)
    pattern = np.zeros(n, dtype=np.int64)
    count = np.ones(n)
    for shift in (0.0, 345.0):  # exact products, and the clipped-factor path
        log_rate = np.concatenate([grid, near_ln2]) - shift
        log_lam = log_rate + shift  # what the kernel sees
        by_term = changed_loglik_by_page(
            log_rate[None, :], np.array([[shift]]), page, pattern, count
        )[0]
        want = np_log1mexp_of_log(log_lam)
        with np.errstate(over="ignore"):
            lam = np.exp(log_lam)
        tol = 4 * ULP * (1.0 + np.minimum(lam, 1e3)) * np.abs(want) + 1e-300
        assert np.all(np.abs(by_term - want) <= tol)
        _, slope, _ = changed_loglik_numpy(log_rate, np.array([shift]), page, pattern, count)
        with np.errstate(over="ignore", invalid="ignore"):
            want_slope = np.where(
                lam > 1.0, lam * np.exp(-lam) / -np.expm1(-lam), lam / np.expm1(lam)
            )
        want_slope[lam > 745] = 0.0
        want_slope[lam < 1e-300] = 1.0
        tol = 8 * ULP * (1.0 + np.minimum(lam, 1e3)) * want_slope + 1e-300
        assert np.all(np.abs(slope - want_slope) <= tol)


@pytest.mark.parametrize("spread", [0.3, 2.0, 8.0, 60.0])
def test_value_matches_unfused_formula_and_gradient_matches_differences(spread):
    rng = np.random.default_rng(seed_of(f"fused-value-{spread}"))
    page, pattern, count = _random_groups(rng)
    log_rate = rng.normal(-1.0, spread, 30)
    log_pattern = rng.normal(0.0, 0.4, 20)
    value, g_rate, g_pattern = changed_loglik_numpy(log_rate, log_pattern, page, pattern, count)
    want = np.sum(count * np_log1mexp_of_log(log_rate[page] + log_pattern[pattern]))
    assert value == pytest.approx(want, rel=1e-13, abs=1e-10)

    def f(args):
        return changed_loglik_numpy(*args, page, pattern, count)[0]

    h = 1e-6
    for which, grad in ((0, g_rate), (1, g_pattern)):
        for i in rng.choice(len(grad), 6, replace=False):
            up, down = [log_rate.copy(), log_pattern.copy()], [log_rate.copy(), log_pattern.copy()]
            up[which][i] += h
            down[which][i] -= h
            assert grad[i] == pytest.approx((f(up) - f(down)) / (2 * h), rel=1e-5, abs=1e-6)


def test_extreme_rates_stay_finite_and_exact():
    """Underflow (series branch), overflow (λ → ∞) and factors beyond ±340 in log."""
    log_lam = np.array([-900.0, -25.0, -20.0, np.log(np.log(2.0)), 3.0, 40.0, 700.0, 900.0])
    page = np.arange(len(log_lam))
    pattern = np.zeros(len(log_lam), dtype=np.int64)
    count = np.ones(len(log_lam))
    for shift in (0.0, 400.0, -400.0):
        value, g_rate, g_pattern = changed_loglik_numpy(
            log_lam - shift, np.array([shift]), page, pattern, count
        )
        assert np.isfinite(value) and np.isfinite(g_rate).all() and np.isfinite(g_pattern).all()
        assert value == pytest.approx(np.sum(np_log1mexp_of_log(log_lam)), rel=1e-14)
        lam = np.exp(log_lam[1:5])
        np.testing.assert_allclose(g_rate[1:5], lam / np.expm1(lam), rtol=1e-13)
        assert g_rate[0] == pytest.approx(1.0)
        assert np.all(g_rate[5:] == 0.0)  # λ e^{-λ} underflows
        assert g_pattern[0] == pytest.approx(g_rate.sum(), rel=1e-14)


def test_order_of_groups_does_not_matter_and_empty_is_zero():
    rng = np.random.default_rng(seed_of("fused-order"))
    page, pattern, count = _random_groups(rng)
    log_rate, log_pattern = rng.normal(-1, 2, 30), rng.normal(0, 0.5, 20)
    perm = rng.permutation(len(page))
    a = changed_loglik_numpy(log_rate, log_pattern, page, pattern, count)
    b = changed_loglik_numpy(log_rate, log_pattern, page[perm], pattern[perm], count[perm])
    assert a[0] == pytest.approx(b[0], rel=1e-13)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-14)
    empty = np.array([], dtype=np.int64)
    value, g_rate, g_pattern = changed_loglik_numpy(log_rate, log_pattern, empty, empty, [])
    assert value == 0.0 and not g_rate.any() and not g_pattern.any()


def test_pointwise_by_page_matches_stats_reference(groups):
    rng = np.random.default_rng(seed_of("fused-pointwise"))
    draws = 5
    log_rate = rng.normal(-2.0, 1.5, (draws, groups.n_pages))
    log_m = rng.normal(0.0, 0.3, (draws, 168))
    from bayesrate.models.likelihood import pointwise_hour_of_week_loglik

    got = pointwise_hour_of_week_loglik(log_rate, log_m, groups)
    for s in range(draws):
        want = groups.loglik(np.exp(log_rate[s]), np.exp(log_m[s]))
        np.testing.assert_allclose(got[s], want, rtol=1e-12)
    only_changed = changed_loglik_by_page(
        log_rate,
        np.log(np.exp(log_m) @ groups.pattern_overlap.T),
        groups.changed_page,
        groups.changed_pattern,
        groups.changed_count,
    )
    assert only_changed.shape == (draws, groups.n_pages)


def test_op_in_a_pytensor_graph_equals_the_unfused_graph(groups):
    import pytensor
    import pytensor.tensor as pt

    from bayesrate.models.fused import changed_loglik
    from bayesrate.models.likelihood import log1mexp_of_log

    rng = np.random.default_rng(seed_of("fused-op"))
    page, pattern, count = groups.changed_page, groups.changed_pattern, groups.changed_count
    a = pt.dvector("log_rate")
    b = pt.dvector("log_pattern")
    fused = changed_loglik(a, b, page, pattern, count)
    unfused = pt.sum(count * log1mexp_of_log(a[page] + b[pattern]))
    want = pytensor.function([a, b], [unfused, *pt.grad(unfused, [a, b])])
    log_rate = rng.normal(-2.0, 2.0, groups.n_pages)
    log_pattern = rng.normal(0.0, 0.3, groups.n_patterns)
    expected = want(log_rate, log_pattern)
    for mode in ("NUMBA", "FAST_COMPILE"):  # numba kernel dispatch; Python ``perform``
        got = pytensor.function([a, b], [fused, *pt.grad(fused, [a, b])], mode=mode)(
            log_rate, log_pattern
        )
        assert float(got[0]) == pytest.approx(float(expected[0]), rel=1e-13)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(got[2], expected[2], rtol=1e-11, atol=1e-12)
    g = pt.grad(fused, a)
    with pytest.raises(NotImplementedError, match="second derivatives"):
        pt.grad(g.sum(), a)
