"""Laplace-integrated page paths (``path_integral: "laplace"`` of the dynamic model).

Oracles: :func:`bayesrate.likelihood.loglik_derivatives` for a cell's terms; scipy's
optimiser, a dense Hessian and numpy's ``slogdet`` for the Laplace formula; central
differences for its gradient; quadrature for how close it is to the exact integral; a
simulated drifting world for recovery (slow, in ``test_dynamic.py``, both path integrals).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.stats import norm

from bayesrate.likelihood import loglik, loglik_derivatives
from bayesrate.models.dynamic import DynamicModel, epoch_cells
from bayesrate.models.laplace import (
    SECOND_ORDER_CAP,
    PathLayout,
    cell_derivatives,
    cell_terms,
    laplace_logp_grad,
)
from tests.helpers import seed_of
from tests.models.dynamic_checks import END, check_model_gradient, drift_world, tiny_world

L = 90 * 24.0


def cells_world(seed: str, rates: list[list[float]], per_cell: int = 60):
    """One page per row of ``rates`` (changes per hour per column; NaN: no intervals in that
    column), ``per_cell`` intervals of 6–72 hours per cell."""
    rng = np.random.default_rng(seed_of(seed))
    starts, ends, pages, changed = [], [], [], []
    for p, row in enumerate(rates):
        for col, rate in enumerate(row):
            if not np.isfinite(rate):
                continue
            tau = rng.choice([6.0, 24.0, 72.0], per_cell)
            end = col * L + rng.uniform(80.0, L - 1.0, per_cell)
            starts.append(end - tau)
            ends.append(end)
            pages.append(np.full(per_cell, p))
            changed.append(rng.random(per_cell) < -np.expm1(-rate * tau))
    cat = np.concatenate
    anchor = len(rates[0]) * L
    return epoch_cells(cat(starts), cat(ends), cat(pages), cat(changed), len(rates), anchor, L)


@pytest.fixture(scope="module")
def world():
    nan = float("nan")
    return cells_world(
        "laplace-cells",
        [
            [0.02, 0.05, 0.01, 0.03],  # data-rich, four columns
            [0.001, nan, 0.002, 0.0005],  # a column without intervals
            [0.0001],  # one column, few changes
            [nan, 0.2, 0.5, nan],  # starts and stops inside the grid, frequent changes
        ],
    )


def innovations(x, m, rho):
    """Each step's departure from its mean ``m + ρ(x_{j−1} − m)``."""
    return x[1:] - m - rho * (x[:-1] - m)


def log_joint(x, cells_of_page, groups, m, s, w, rho=1.0):
    """The page's log joint with the package's ``loglik`` (not the kernel's terms)."""
    value = norm.logpdf(x[0], m, s) + norm.logpdf(innovations(x, m, rho), 0.0, w).sum()
    for j, c in cells_of_page:
        value += loglik(groups.select(np.array([c])), np.array([x[j]]))[0]
    return value


def laplace_by_scipy(layout, cells, p, m, s, w, rho=1.0):
    """Mode by scipy (BFGS on the package's likelihood), Hessian dense from the cells'
    observed information and the walk's precision (steps reverting by ``rho``), ``log
    det`` by numpy."""
    o, n = layout.page_start[p], layout.page_start[p + 1] - layout.page_start[p]
    own = [(j, int(c)) for j, c in enumerate(layout.slot_cell[o : o + n]) if c >= 0]

    def minus(x):
        return -log_joint(x, own, cells.groups, m, s, w, rho)

    def minus_grad(x):
        grad = np.zeros(n)
        grad[0] -= (x[0] - m) / s**2
        step = innovations(x, m, rho) / w**2
        grad[1:] -= step
        grad[:-1] += rho * step
        for j, c in own:
            grad[j] += loglik_derivatives(cells.groups.select(np.array([c])), x[j : j + 1], 1)[1][0]
        return -grad

    start = np.full(n, m)
    mode = optimize.minimize(minus, start, jac=minus_grad, method="BFGS", tol=1e-12).x
    hess = np.zeros((n, n))
    hess[0, 0] += 1 / s**2
    for j in range(1, n):
        hess[j, j] += 1 / w**2
        hess[j - 1, j - 1] += rho**2 / w**2
        hess[j, j - 1] = hess[j - 1, j] = -rho / w**2
    for j, c in own:
        hess[j, j] += loglik_derivatives(cells.groups.select(np.array([c])), mode[j : j + 1])[2][0]
    sign, log_det = np.linalg.slogdet(hess)
    assert sign > 0
    return -minus(mode) + n / 2 * math.log(2 * math.pi) - 0.5 * log_det


def test_cell_terms_equal_loglik_derivatives(world):
    layout = PathLayout.from_cells(world)
    for c in range(len(world.cell_page)):
        one = world.groups.select(np.array([c]))
        for x in (-12.0, -7.0, -4.0, -1.5, 0.5):
            value, score, info = (a[0] for a in loglik_derivatives(one, np.array([x])))
            got = cell_terms(x, c, layout)
            np.testing.assert_allclose(got[:3], [value, score, -info], rtol=1e-9, atol=1e-12)
            h = 1e-4
            third = (cell_terms(x + h, c, layout)[2] - cell_terms(x - h, c, layout)[2]) / (2 * h)
            np.testing.assert_allclose(got[3], third, rtol=1e-6, atol=1e-8)


def test_fourth_and_fifth_derivatives_by_central_differences(world):
    layout = PathLayout.from_cells(world)
    for c in range(len(world.cell_page)):
        for x in (-12.0, -7.0, -4.0, -1.5, 0.5, 3.0):
            got = cell_derivatives(x, c, layout)
            assert got[:4] == pytest.approx(cell_terms(x, c, layout), rel=1e-12)
            h = 1e-3
            near = [cell_derivatives(x + i * h, c, layout) for i in (-2, -1, 1, 2)]
            for k in (4, 5):
                below2, below, above, above2 = (d[k - 1] for d in near)
                numeric = (below2 - 8 * below + 8 * above - above2) / (12 * h)  # error O(h⁴)
                np.testing.assert_allclose(got[k], numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("rho", [1.0, 0.6, 0.1])
@pytest.mark.parametrize(("m", "s", "w"), [(-5.0, 1.2, 0.7), (-8.0, 0.4, 2.5), (-3.0, 2.0, 0.05)])
def test_log_z_equals_laplace_formula_by_scipy(world, m, s, w, rho):
    """Random walk (``rho`` 1) and steps reverting towards ``m``."""
    layout = PathLayout.from_cells(world)
    per_page = laplace_logp_grad(m, s, w, layout, order=1, rho=rho).per_page
    for p in range(world.n_pages):
        want = laplace_by_scipy(layout, world, p, m, s, w, rho)
        assert per_page[p] == pytest.approx(want, abs=1e-7), p


def levelled_laplace_by_scipy(layout, cells, p, m, s, w, rho, tau):
    """The Laplace approximation in ``(x, L)`` (the page's level ``L ~ Normal(m, tau)``
    its walk's centre): mode by scipy's BFGS on the package's likelihood, the Hessian by
    central differences of the joint's analytic gradient, ``log det`` by numpy; returns
    ``log Z``, the mode and ``H⁻¹``."""
    o, n = layout.page_start[p], layout.page_start[p + 1] - layout.page_start[p]
    own = [(j, int(c)) for j, c in enumerate(layout.slot_cell[o : o + n]) if c >= 0]

    def minus(v):
        return -norm.logpdf(v[n], m, tau) - log_joint(v[:n], own, cells.groups, v[n], s, w, rho)

    def minus_grad(v):
        x, level = v[:n], v[n]
        r = x - level
        prior = np.zeros(n)
        prior[0] += r[0] / s**2
        step = (r[1:] - rho * r[:-1]) / w**2
        prior[1:] += step
        prior[:-1] -= rho * step
        grad = -prior
        for j, c in own:
            grad[j] += loglik_derivatives(cells.groups.select(np.array([c])), x[j : j + 1], 1)[1][0]
        return -np.r_[grad, prior.sum() - (level - m) / tau**2]

    mode = optimize.minimize(minus, np.full(n + 1, m), jac=minus_grad, method="BFGS", tol=1e-13).x
    h = 1e-5
    hess = np.array([
        (minus_grad(mode + h * e) - minus_grad(mode - h * e)) / (2 * h) for e in np.eye(n + 1)
    ])  # fmt: skip
    hess = (hess + hess.T) / 2
    sign, log_det = np.linalg.slogdet(hess)
    assert sign > 0
    log_z = -minus(mode) + (n + 1) / 2 * math.log(2 * math.pi) - 0.5 * log_det
    return log_z, mode, np.linalg.inv(hess)


@pytest.mark.parametrize("rho", [1.0, 0.6, 0.1])
@pytest.mark.parametrize(
    ("m", "s", "w", "tau"), [(-5.0, 1.2, 0.7, 0.8), (-8.0, 0.4, 2.5, 3.0), (-3.0, 2.0, 0.05, 0.1)]
)
def test_a_page_level_integrated_with_the_path_equals_the_dense_laplace(world, m, s, w, rho, tau):
    """``log Z``, the modes of path and level, the level's variance and the last column's
    against the dense ``(n + 1)``-variable Laplace approximation."""
    layout = PathLayout.from_cells(world)
    result = laplace_logp_grad(m, s, w, layout, order=1, rho=rho, level_sd=tau)
    for p in range(world.n_pages):
        o, n = layout.page_start[p], layout.page_start[p + 1] - layout.page_start[p]
        log_z, mode, cov = levelled_laplace_by_scipy(layout, world, p, m, s, w, rho, tau)
        assert result.per_page[p] == pytest.approx(log_z, abs=1e-6), p
        np.testing.assert_allclose(result.modes[o : o + n], mode[:n], atol=1e-5)
        level, _, level_var = result.level_moments[:, p]
        assert level == pytest.approx(mode[n], abs=1e-5)
        assert level_var == pytest.approx(cov[n, n], rel=1e-4)
        assert result.last_moments[1, p] == pytest.approx(cov[n - 1, n - 1], rel=1e-4)


def test_a_page_level_is_the_walk_centred_on_a_normal_mean(world):
    """Without data a level adds nothing (``log Z`` 0 on a page's columns without cells is
    the kernel's; here: ``τ → 0`` gives the walk centred on ``m``, and a wide ``τ`` differs
    from it)."""
    layout = PathLayout.from_cells(world)
    fixed = laplace_logp_grad(-5.0, 1.2, 0.7, layout, rho=0.6).per_page
    narrow = laplace_logp_grad(-5.0, 1.2, 0.7, layout, rho=0.6, level_sd=1e-5).per_page
    wide = laplace_logp_grad(-5.0, 1.2, 0.7, layout, rho=0.6, level_sd=2.0).per_page
    np.testing.assert_allclose(narrow, fixed, atol=1e-6)
    assert np.abs(wide - fixed).min() > 1e-2


def test_log_det_of_a_long_stiff_path_does_not_overflow():
    """Sixty columns under a walk of 0.002: ``det H`` exceeds the largest double (every
    pivot exceeds ``1/w²`` = 2.5e5); the kernel's ``log det`` and the formula still hold."""
    cells = cells_world("laplace-long", [[0.02] * 60], per_cell=10)
    layout = PathLayout.from_cells(cells)
    assert 60 * math.log(1 / 0.002**2) > math.log(np.finfo(float).max)
    got = laplace_logp_grad(-4.0, 1.0, 0.002, layout, order=1).per_page[0]
    assert got == pytest.approx(laplace_by_scipy(layout, cells, 0, -4.0, 1.0, 0.002), abs=1e-6)


@pytest.mark.parametrize("level_sd", [0.0, 0.5])
def test_a_wide_walk_over_silent_and_saturated_columns_converges(level_sd):
    """Nineteen columns without a change, then columns where every interval changed,
    under walks of sd 300–1,000: the curvature along the path is near 0, and Newton's
    steps stayed above their tolerance on rounding alone (``log Z`` −inf, the 90-day
    excursion fit's divergences). Now finite, and the same from either start."""
    cells = cells_world("laplace-wide", [[1e-7] * 19 + [0.02, 5.0, 5.0]], per_cell=60)
    layout = PathLayout.from_cells(cells)
    for sd in (300.0, 1000.0):
        args = (-11.6, sd, sd * 0.54, layout, 1)
        ours = laplace_logp_grad(*args, rho=0.84, level_sd=level_sd)
        naive = laplace_logp_grad(*args[:3], naive_start(layout), 1, rho=0.84, level_sd=level_sd)
        assert np.isfinite(ours.per_page).all() and np.isfinite(ours.grad_w).all()
        assert ours.per_page[0] == pytest.approx(naive.per_page[0], abs=1e-5)


def saturated_page(start) -> PathLayout:
    """One ota-contrib document's eight 90-day cells: a busy start (a column whose 180
    intervals of 12 hours all changed) then five silent quarters; Newton from ``start``."""
    return PathLayout(
        page_start=np.array([0, 8]),
        slot_cell=np.arange(8),
        unchanged=np.array([756.0, 0.0, 744.0, 2160.0, 2166.0, 2160.0, 2160.0, 2160.0]),
        group_start=np.array([0, 1, 2, 4, 4, 4, 4, 4, 4]),
        group_exposure=np.array([12.0, 12.0, 12.0, 24.0]),
        group_count=np.array([12.0, 180.0, 116.0, 1.0]),
        start=np.asarray(start, dtype=float),
        tangent=np.zeros((3, 8)),
        reference=np.zeros(3),
    )


def test_newton_converges_from_above_a_saturated_column():
    """Started above the mode of the saturated column, Chebyshev's correction turned
    Newton's step downhill (that column's ``ℓ'''`` is large where ``ℓ''`` is nearly 0) and
    the line search stalled: ``log Z`` −inf, the divergences of the 90-day excursion fit
    after the gain stop. Every start now reaches the same ``log Z`` as the prior mean's
    start. (Shifts of 0.175, 0.2, 0.6–0.65 and 1.275–1.325 failed before the fix.)"""
    args = (-10.1734, 8.2792, 4.9124)
    kw = {"rho": 0.805, "level_sd": 0.565}
    reference = laplace_logp_grad(*args, saturated_page(np.full(8, np.nan)), **kw)
    assert np.isfinite(reference.per_page[0])
    for shift in np.linspace(0.0, 1.5, 61):
        start = reference.modes.copy()
        start[1] += shift
        got = laplace_logp_grad(*args, saturated_page(start), **kw)
        assert got.per_page[0] == pytest.approx(reference.per_page[0], abs=1e-7), shift
        assert np.allclose(got.modes, reference.modes, atol=1e-5), shift


def second_order_by_dense_sums(layout, p, m, s, w):
    """The second-order term at page ``p``'s mode (the kernel's, checked above) by
    double sums over a dense ``Σ = H⁻¹`` (numpy's inverse), third and fourth derivatives
    by central differences of the cells' information."""
    o, n = layout.page_start[p], layout.page_start[p + 1] - layout.page_start[p]
    mode = laplace_logp_grad(m, s, w, layout, order=1).modes[o : o + n]
    hess = np.diag(np.r_[1 / s**2, np.zeros(n - 1)])
    for j in range(1, n):
        hess[[j, j - 1], [j, j - 1]] += 1 / w**2
        hess[j, j - 1] = hess[j - 1, j] = -1 / w**2
    third, fourth = np.zeros(n), np.zeros(n)
    h = 1e-3
    for j, c in enumerate(layout.slot_cell[o : o + n]):
        if c < 0:
            continue
        info = [cell_terms(mode[j] + k * h, c, layout)[2] for k in (-2, -1, 0, 1, 2)]
        hess[j, j] -= info[2]
        third[j] = (info[3] - info[1]) / (2 * h)
        fourth[j] = (info[3] - 2 * info[2] + info[1]) / h**2
    cov = np.linalg.inv(hess)
    diag = np.diag(cov)
    return (
        np.sum(fourth * diag**2) / 8
        + np.sum(np.outer(third * diag, third * diag) * cov) / 8
        + np.sum(np.outer(third, third) * cov**3) / 12
    )


def capped(eps: float) -> float:
    return eps / math.sqrt(1 + (eps / SECOND_ORDER_CAP) ** 2)


def naive_start(layout: PathLayout) -> PathLayout:
    """``layout`` with Newton starting from each cell's ``log((changes + ½)/exposure)``
    (computed here from the cells' groups), without a reference population."""
    changes = np.zeros(len(layout.unchanged))
    total = layout.unchanged.copy()
    for c in range(len(changes)):
        span = slice(layout.group_start[c], layout.group_start[c + 1])
        changes[c] = layout.group_count[span].sum()
        total[c] += (layout.group_count[span] * layout.group_exposure[span]).sum()
    start = np.full(len(layout.slot_cell), np.nan)
    has = layout.slot_cell >= 0
    start[has] = np.log((changes[layout.slot_cell[has]] + 0.5) / total[layout.slot_cell[has]])
    no_tangent = np.zeros_like(layout.tangent)
    return replace(layout, start=start, tangent=no_tangent, reference=np.zeros(3))


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize(
    ("m", "s", "w"), [(-5.0, 1.2, 0.7), (-8.0, 0.4, 2.5), (-3.0, 2.0, 0.05), (2.0, 9.0, 40.0)]
)
def test_the_start_does_not_change_the_result(world, m, s, w, order):
    """The referenced start (modes at a reference population moved along their tangents,
    clipped) against the cells' naive rates: the same ``log Z``, gradient and modes, far
    from the reference too."""
    layout = PathLayout.from_cells(world)
    ours, naive = (laplace_logp_grad(m, s, w, lay, order) for lay in (layout, naive_start(layout)))
    np.testing.assert_allclose(ours.per_page, naive.per_page, rtol=1e-10)
    for got, want in zip(ours[1:4], naive[1:4], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.modes, naive.modes, atol=1e-9)


def test_the_start_is_the_mode_at_the_reference_and_follows_its_tangent(world):
    """At the reference population each page is at its mode after its first pass; a step
    of 0.02 in every coordinate leaves the start ``O(0.02²)`` off, so one Chebyshev step
    and a second pass suffice (the cells' naive rates, which ``referenced=False`` keeps,
    take more)."""
    layout = PathLayout.from_cells(world)
    naive = naive_start(layout)
    np.testing.assert_allclose(PathLayout.from_cells(world, referenced=False).start, naive.start)
    m0, log_s0, log_w0 = layout.reference
    pages = layout.n_pages
    at = laplace_logp_grad(m0, np.exp(log_s0), np.exp(log_w0), layout)
    assert at.passes == pages
    moved = (m0 + 0.02, np.exp(log_s0 + 0.02), np.exp(log_w0 - 0.02))
    assert laplace_logp_grad(*moved, layout).passes == 2 * pages
    assert laplace_logp_grad(*moved, naive).passes > 3 * pages


@pytest.mark.parametrize(("m", "s", "w"), [(-5.0, 1.2, 0.7), (-8.0, 0.4, 2.5), (-3.0, 2.0, 0.05)])
def test_second_order_term_equals_dense_sums(world, m, s, w):
    layout = PathLayout.from_cells(world)
    first = laplace_logp_grad(m, s, w, layout, order=1).per_page
    second = laplace_logp_grad(m, s, w, layout, order=2).per_page
    terms = second - first
    for p in range(world.n_pages):
        want = capped(second_order_by_dense_sums(layout, p, m, s, w))
        assert terms[p] == pytest.approx(want, rel=1e-5, abs=1e-9), p
    assert np.abs(terms).max() > 1e-3  # a term that matters at these points


def test_second_order_term_is_capped_where_the_expansion_fails():
    """A page with a few changes in its first year, then none for five, under a large
    walk: the quiet columns' modes run far below the data, where the expansion's term
    grows like the walk's square (measured 0.008 at 0.5, 0.56 at 6, 6.4 at 20). The
    kernel's term stays below the cap."""
    nan = float("nan")
    cells = cells_world("laplace-cap", [[0.01, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9, nan]])
    layout = PathLayout.from_cells(cells)
    changes = np.bincount(cells.groups.group_page, cells.groups.group_count, minlength=6)
    assert changes[0] > 0 and changes[1:].sum() == 0  # only the first column changed
    raw = {w: second_order_by_dense_sums(layout, 0, -5.0, 1.0, w) for w in (0.5, 6.0, 20.0)}
    assert 0 < raw[0.5] < 0.1 * SECOND_ORDER_CAP < SECOND_ORDER_CAP < raw[6.0], raw
    assert raw[20.0] > 10 * SECOND_ORDER_CAP, raw  # ~w²: no bound of its own
    got = (
        laplace_logp_grad(-5.0, 1.0, 20.0, layout, 2).per_page
        - laplace_logp_grad(-5.0, 1.0, 20.0, layout, 1).per_page
    )[0]
    assert got == pytest.approx(capped(raw[20.0]), rel=1e-5)
    assert SECOND_ORDER_CAP * 0.95 < got < SECOND_ORDER_CAP


@pytest.mark.parametrize(("order", "reverting"), [(1, False), (2, False), (1, True)])
def test_gradient_equals_finite_differences(world, order, reverting):
    """In ``m``, ``s``, ``w`` and, for steps reverting towards ``m``, ``rho``."""
    layout = PathLayout.from_cells(world)
    n = world.n_pages
    rng = np.random.default_rng(seed_of(f"laplace-grad-{reverting}"))
    for _ in range(3):
        point = [rng.normal(-5, 1.5, n), rng.uniform(0.3, 2.0, n), rng.uniform(0.05, 2.0, n)]
        point.append(rng.uniform(0.1, 0.95, n) if reverting else np.ones(n))
        result = laplace_logp_grad(*point[:3], layout, order, rho=point[3])
        assert result[0] == pytest.approx(result[4].sum())
        h = 1e-6
        gradients = [result.grad_m, result.grad_s, result.grad_w, result.grad_rho]
        for k in range(4 if reverting else 3):
            up = [a.copy() for a in point]
            down = [a.copy() for a in point]
            up[k] += h
            down[k] -= h
            above, below = (
                laplace_logp_grad(*x[:3], layout, order, rho=x[3]).per_page for x in (up, down)
            )
            numeric = (above - below) / (2 * h)
            np.testing.assert_allclose(gradients[k], numeric, rtol=2e-6, atol=2e-6)
        assert np.abs(result[3][[0, 1, 3]]).min() > 1e-3  # the walk moves every long page
        assert result[3][2] == 0.0  # one column: no step
        if reverting:
            assert np.abs(result.grad_rho[[0, 1, 3]]).min() > 1e-3
        else:
            assert (result.grad_rho == 0.0).all()


@pytest.mark.parametrize("rho", [1.0, 0.5])
def test_the_levelled_gradient_equals_finite_differences(world, rho):
    """In ``m``, ``s``, ``w``, ``rho`` and the level's ``tau``."""
    layout = PathLayout.from_cells(world)
    n = world.n_pages
    rng = np.random.default_rng(seed_of(f"laplace-level-grad-{rho}"))
    for _ in range(3):
        point = [rng.normal(-5, 1.5, n), rng.uniform(0.3, 2.0, n), rng.uniform(0.05, 2.0, n),
                 np.full(n, rho) if rho == 1.0 else rng.uniform(0.1, 0.95, n),
                 rng.uniform(0.2, 2.0, n)]  # fmt: skip

        def per_page(x):
            return laplace_logp_grad(*x[:3], layout, 1, rho=x[3], level_sd=x[4])

        result = per_page(point)
        gradients = [result.grad_m, result.grad_s, result.grad_w, result.grad_rho,
                     result.grad_tau]  # fmt: skip
        h = 1e-6
        for k in [0, 1, 2, 4] if rho == 1.0 else range(5):
            up = [a.copy() for a in point]
            down = [a.copy() for a in point]
            up[k] += h
            down[k] -= h
            numeric = (per_page(up).per_page - per_page(down).per_page) / (2 * h)
            np.testing.assert_allclose(gradients[k], numeric, rtol=2e-6, atol=2e-6)
        assert np.abs(result.grad_tau).min() > 1e-4
        assert np.abs(result.grad_m).min() > 1e-4


def exact_log_z(cells, m: float, s: float, w: float, shift: float) -> float:
    """``log ∫∫`` of a two-column page's joint by ``dblquad``, the cells' likelihood
    written out (``−Uλ + Σ c·log(1 − e^{−λE})``); ``shift`` keeps the integrand near 1."""
    own = [cells.groups.select(np.array([c])) for c in (0, 1)]
    unchanged = [g.unchanged[0] for g in own]
    exposure = [np.exp(g.group_log_exposure) for g in own]
    log_norm = -math.log(2 * math.pi * s * w)

    def cell(j, x):
        lam = math.exp(x)
        return -unchanged[j] * lam + np.sum(
            own[j].group_count * np.log(-np.expm1(-lam * exposure[j]))
        )

    def density(x1, x0):
        prior = log_norm - 0.5 * ((x0 - m) / s) ** 2 - 0.5 * ((x1 - x0) / w) ** 2
        return math.exp(prior + cell(0, x0) + cell(1, x1) - shift)

    value, _ = integrate.dblquad(density, -9, 1, -9, 1, epsabs=1e-12, epsrel=1e-10)
    return math.log(value) + shift


def test_close_to_the_exact_integral_where_the_data_are_rich():
    """One page, two columns, integrated by quadrature: the Laplace error shrinks as the
    cells fill, much faster with the second-order term. Measured: first order 5.0e-3 at
    40 intervals per cell and 2.2e-4 at 2,000; second order 1.5e-4 and 2.6e-8."""
    m, s, w = -4.0, 1.0, 0.5
    errors = {}
    for per_cell in (40, 2000):
        cells = cells_world(f"laplace-quad-{per_cell}", [[0.03, 0.01]], per_cell=per_cell)
        layout = PathLayout.from_cells(cells)
        exact = exact_log_z(cells, m, s, w, laplace_by_scipy(layout, cells, 0, m, s, w))
        for order in (1, 2):
            lap = laplace_logp_grad(m, s, w, layout, order)[4][0]
            errors[order, per_cell] = abs(lap - exact)
    assert errors[1, 2000] < 1e-3, errors
    assert errors[1, 2000] < errors[1, 40] / 5, errors
    assert errors[2, 40] < errors[1, 40] / 10, errors
    assert errors[2, 2000] < 1e-6, errors


def test_the_model_gradient_equals_finite_differences_in_both_backends():
    model = DynamicModel(model_config={"path_integral": "laplace"})
    check_model_gradient(model.build_model(tiny_world()), "laplace-model-grad")


def test_refuses_what_it_does_not_integrate():
    with pytest.raises(ValueError, match="path_integral must be one of"):
        DynamicModel(model_config={"path_integral": "quadrature"})
    with pytest.raises(ValueError, match="laplace_order must be 1 or 2"):
        DynamicModel(model_config={"path_integral": "laplace", "laplace_order": 3})
    reverting = {"path_integral": "laplace", "walk": "reverting"}
    DynamicModel(model_config=reverting)
    with pytest.raises(ValueError, match="laplace_order 2 takes the random walk only"):
        DynamicModel(model_config={**reverting, "laplace_order": 2})
    with pytest.raises(ValueError, match="second-order Laplace term takes the random walk"):
        laplace_logp_grad(-5.0, 1.0, 0.5, PathLayout.from_cells(tiny_cells()), 2, rho=0.5)


def tiny_cells():
    model = DynamicModel(model_config={"path_integral": "laplace"})
    return model.cells(tiny_world())


def test_the_reverting_model_gradient_equals_finite_differences_in_both_backends():
    model = DynamicModel(model_config={"path_integral": "laplace", "walk": "reverting"})
    pm_model = model.build_model(tiny_world())
    assert "walk_phi" in {rv.name for rv in pm_model.free_RVs}
    check_model_gradient(pm_model, "laplace-reverting-model-grad")


def log_rates_match_the_grid_filter(model, obs, draws, seed: str):
    """4,000 ``log_rate`` draws per page at the one population point ``draws``: their
    means within 0.06 sd (Monte Carlo error 0.016 sd) and sds within 8% of each page's
    filtered distribution on the model's grid; returns that distribution's mean and sd."""
    from bayesrate.seeds import rng_from

    grid = model.grid(obs)
    probs = model.filtered(draws, obs)[0]
    probs /= probs.sum(axis=1, keepdims=True)
    mean = probs @ grid
    sd = np.sqrt(probs @ grid**2 - mean**2)
    many = {k: np.repeat(v, 4000, axis=0) for k, v in draws.items()}
    got = model.laplace_log_rates(many, obs, rng_from(seed))
    shift = np.abs(got.mean(axis=0) - mean) / sd
    assert shift.max() < 0.06, shift
    np.testing.assert_allclose(got.std(axis=0), sd, rtol=0.08)
    return mean, sd


def test_reverting_current_log_rates_match_the_grid_filter():
    """Steps reverting towards the domain mean (``walk_phi`` 0.6), half the pages without
    data in the last three of six epochs: each page's ``log_rate`` draws have the mean and
    sd of its filtered distribution on a fine grid (which walks the silent epochs by
    matrix products): means within 0.06 sd, sds within 8%."""
    from bayesrate import simulate as sim

    rng = sim.rng_from("laplace-reverting-rates")
    visits = [np.arange(END - 6 * L, END - (3 * L if p % 2 else 0), 24.0) for p in range(16)]
    rates = rng.lognormal(np.log(1 / 120), 0.8, 16)
    obs = sim.simulate_pages(rates, visits, domains=["a", "b"] * 8, rng=rng).observations
    model = DynamicModel(
        model_config={"path_integral": "laplace", "walk": "reverting", "grid_size": 160}
    )
    model.data_ = obs
    draws = {
        "mu_domain": np.array([[-4.6, -5.2]]),
        "sigma_page": np.array([0.8]),
        "sigma_walk": np.array([[0.3, 0.6]]),
        "walk_phi": np.array([0.6]),
    }
    log_rates_match_the_grid_filter(model, obs, draws, "laplace-reverting-rates")
    cells = model.cells(obs)
    assert (cells.last_column[1::2] == cells.n_epochs - 4).all()  # silent for three epochs


def test_current_log_rates_match_the_grid_filter():
    """At one population point, each page's ``log_rate`` draws (Laplace with the skew
    correction, continuous) have the mean and sd of its filtered distribution on a fine
    grid (exact but for the grid): means within 0.06 sd, sds within 8%, where the mode
    alone is up to 0.27 sd off."""

    obs, _, _ = drift_world("laplace-rates", 30, 2, 5, np.array([0.3, 0.6]))
    model = DynamicModel(model_config={"path_integral": "laplace", "grid_size": 160})
    model.data_ = obs
    draws = {
        "mu_domain": np.array([[-4.6, -5.2]]),
        "sigma_page": np.array([0.8]),
        "sigma_walk": np.array([[0.3, 0.6]]),
    }
    mean, sd = log_rates_match_the_grid_filter(model, obs, draws, "laplace-rates")
    layout = PathLayout.from_cells(model.cells(obs))
    m = draws["mu_domain"][0, obs.domain_codes]
    modes = laplace_logp_grad(m, 0.8, draws["sigma_walk"][0, obs.domain_codes], layout)[6]
    last = modes[layout.page_start[1:] - 1]
    assert (np.abs(last - mean) / sd).max() > 0.15  # the mode alone is off: skew matters


def test_current_log_rates_stay_on_the_grid_without_changes():
    """A page that never changed, under a large walk: its Laplace posterior is far from
    Normal (the first-order skew correction exceeds its sd); the draws stay finite and
    within the grid's range, as the grid's own draws do."""
    from bayesrate import simulate as sim
    from bayesrate.seeds import rng_from

    days = np.arange(END - 6 * L, END, 24.0)
    obs = sim.simulate_pages(
        [1 / 90, 1e-12], [days, days + 5.0], domains=["a", "a"], rng=sim.rng_from("quiet")
    ).observations
    assert obs.changed[obs.page_of_visit == 1].sum() == 0
    model = DynamicModel(model_config={"path_integral": "laplace"})
    model.data_ = obs
    layout = PathLayout.from_cells(model.cells(obs))
    skew, var = laplace_logp_grad(-9.0, 2.0, 4.0, layout)[7]
    assert abs(skew[1]) > np.sqrt(var[1])  # the expansion has failed there
    draws = {"mu_domain": np.array([[-9.0]]), "sigma_page": np.array([2.0]),
             "sigma_walk": np.array([[4.0]])}  # fmt: skip
    many = {k: np.repeat(v, 500, axis=0) for k, v in draws.items()}
    got = model.laplace_log_rates(many, obs, rng_from("laplace-quiet"))
    grid = model.grid(obs)
    assert np.isfinite(got).all()
    assert got.min() >= grid[0] and got.max() <= grid[-1]


def test_importance_summary_of_a_known_tilt():
    """Draws of Normal(0, 1) weighted by ``e^x`` stand for Normal(1, 1): the weighted mean
    moves by one sd and the weights' effective fraction is ``e^{−1}`` (closed forms)."""
    from bayesrate.models.dynamic import importance_summary

    x = np.random.default_rng(seed_of("laplace-tilt")).standard_normal(20_000)
    got = importance_summary(x, {"x": x, "matrix": np.ones((len(x), 2))})
    assert got["mean_shift_sd"]["x"] == pytest.approx(1.0, abs=0.05)
    assert got["ess_fraction"] == pytest.approx(math.exp(-1.0), abs=0.03)
    assert got["pareto_k"] < 0.5
    assert set(got["mean_shift_sd"]) == {"x"}  # scalars only
    # equal ratios (the approximation exact at every draw): equal weights, nothing moves
    same = importance_summary(np.full(500, -3.0), {"x": x[:500]})
    assert same["pareto_k"] == 0.0 and same["ess_fraction"] == pytest.approx(1.0)
    assert same["mean_shift_sd"]["x"] == pytest.approx(0.0, abs=1e-12)
