"""Per-page Chebyshev emulators of the detected intervals' log-likelihood.

Oracle: the term-by-term sum with numpy's ``log(1 − exp(−e^a))`` from
:mod:`bayesrate.likelihood` and the slope ``λ/(e^λ − 1)`` written out here; the model-level
test compares PyMC's log-density and gradient with the emulators and without.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayesrate.likelihood import log1mexp_of_log
from bayesrate.models import emulator
from bayesrate.models.emulator import PIECE_WIDTH, PIECES, PageEmulators
from tests.helpers import seed_of


def _groups(rng, n_pages=40, per_page=30):
    page = np.repeat(np.arange(n_pages), rng.integers(1, per_page, n_pages))
    log_exposure = np.log(rng.exponential(24.0, len(page)) + 0.01)
    detected = rng.integers(1, 4, len(page)).astype(float)
    unchanged = rng.integers(0, 3, len(page)).astype(float)
    return page, log_exposure, unchanged, detected, n_pages


def _oracle(u, page, log_exposure, unchanged, detected, n_pages):
    """Per-page Σ c·φ(u + s) − e^u Σ (n − c) e^s and its derivative, term by term."""
    a = u[page] + log_exposure
    lam = np.exp(a)
    values = detected * log1mexp_of_log(a) - unchanged * lam
    with np.errstate(over="ignore"):
        slopes = detected * np.where(lam > 700, 0.0, lam / np.expm1(lam)) - unchanged * lam
    return (
        np.bincount(page, weights=values, minlength=n_pages),
        np.bincount(page, weights=slopes, minlength=n_pages),
    )


@pytest.fixture(scope="module")
def built():
    rng = np.random.default_rng(seed_of("emulator-groups"))
    page, log_exposure, unchanged, detected, n_pages = _groups(rng)
    shuffle = rng.permutation(len(page))  # any order of groups
    args = (page[shuffle], log_exposure[shuffle], unchanged[shuffle], detected[shuffle])
    return PageEmulators.build(*args, n_pages, 0.0), (*args, n_pages)


def test_emulators_match_the_term_by_term_sum_inside_and_outside_their_windows(built):
    emulators, groups = built
    assert emulators.max_error < 1e-8
    rng = np.random.default_rng(seed_of("emulator-points"))
    n_pages = groups[-1]
    for spread in (0.5 * PIECES * PIECE_WIDTH, 3.0 * PIECES * PIECE_WIDTH):  # in, and beyond
        centre = emulators.lo + 0.5 * PIECES * PIECE_WIDTH
        u = centre + rng.uniform(-spread, spread, n_pages)
        total, grad = emulators.total(u)
        want_v, want_s = _oracle(u, *groups)
        np.testing.assert_allclose(total, want_v.sum(), rtol=1e-11, atol=1e-8)
        np.testing.assert_allclose(grad, want_s, rtol=1e-9, atol=1e-8)


def test_page_windows_cover_where_detections_are_informative(built):
    """Each window holds the log-rate at which the page's mean detected interval has
    exposure 1 (λ·exposure = 1), with 10 units of log-rate either side."""
    emulators, (page, log_exposure, _, detected, n_pages) = built
    mean_shift = np.bincount(page, weights=detected * log_exposure, minlength=n_pages)
    mean_shift /= np.bincount(page, weights=detected, minlength=n_pages)
    np.testing.assert_allclose(emulators.lo + PIECES * PIECE_WIDTH / 2, -mean_shift)


def test_hierarchical_model_with_irregular_visits_uses_the_emulators_exactly():
    """Poisson visits (every interval its own group): PyMC's log-density and gradient with
    the emulators equal those without to 1e-8."""
    from bayesrate.models import HierarchicalModel
    from bayesrate.simulate import simulate_pages

    rng = np.random.default_rng(seed_of("emulator-model"))
    n = 60
    rates = np.exp(rng.normal(np.log(0.5 / 24), 1.0, n))
    visits = [np.sort(rng.uniform(0, 60 * 24, 80)) for _ in range(n)]
    obs = simulate_pages(rates, visits, [f"d{i % 3}" for i in range(n)], rng=rng).observations
    values = {}
    original = emulator.worth_emulating
    calls = []
    try:
        for label in ("exact", "emulated"):
            if label == "exact":
                emulator.worth_emulating = lambda n_pages, n_groups: False
            else:
                emulator.worth_emulating = lambda n_pages, n_groups: calls.append(1) or True
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                model = HierarchicalModel().build_model(obs)
                f = model.logp_dlogp_function(ravel_inputs=True)
            f.set_extra_values({})
            point = model.initial_point()
            x0 = np.concatenate([np.ravel(point[v.name]) for v in f._grad_vars])
            x0 = x0 + 0.3 * np.random.default_rng(1).standard_normal(len(x0))
            values[label] = f(x0)
    finally:
        emulator.worth_emulating = original
    assert calls, "the sum-only rewrite did not consider the emulators"
    np.testing.assert_allclose(values["emulated"][0], values["exact"][0], rtol=1e-12, atol=1e-8)
    np.testing.assert_allclose(values["emulated"][1], values["exact"][1], rtol=1e-9, atol=1e-8)
    assert not np.allclose(values["exact"][1], 0.0)


def test_cost_rule():
    assert emulator.worth_emulating(100, 100 * 27)  # irregular visits: ~27 per page
    assert not emulator.worth_emulating(100, 100 * 3)  # regular grids: a few lengths
