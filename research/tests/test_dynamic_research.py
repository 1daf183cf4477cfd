"""The research dynamic models, dynamic_shocks and dynamic_edits (the dynamic model's page
walks with shared epoch effects and added rates on top), moved from tests/models/test_dynamic.py.

Oracles: every path enumerated (the forward algorithm's sum and the filtered
distribution), a per-interval Bernoulli sum for the cells' sufficient statistics, scipy's
Normal CDF for the bins; a simulated drifting world for recovery (slow).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from bayesrate_research.models.dynamic_edits import DynamicEditModel
from bayesrate_research.models.dynamic_shocks import DynamicShockModel

from bayesrate import simulate as sim
from bayesrate.models import get_model
from bayesrate.models.dynamic import (
    DynamicModel,
)
from tests.helpers import seed_of
from tests.models.dynamic_checks import (
    EDIT,
    END,
    SHOCK,
    L,
    cell_groups,
    check_conditional_predictive,
    check_leave_one_page_out,
    check_model_gradient,
    fixed_posterior,
    paths_by_enumeration,
    random_points,
    tables_by_numpy,
    tiny_world,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import pymc  # noqa: F401


@pytest.fixture(scope="module")
def tiny():
    return tiny_world()


@pytest.mark.parametrize("own_shocks", [True, False], ids=["domain-shocks", "global-shocks"])
def test_shocked_logp_and_filter_equal_path_enumeration(tiny, own_shocks):
    """dynamic_shocks: each interval's log-rate is its path's state plus its domain's shock
    in the closing epoch (both domains have their own shocks, or both follow the global
    ones: one row of effects in the kernel)."""
    config = {"grid_size": 9, "domain_shock_min_pages": 1, "domain_shocks": own_shocks}
    model = DynamicShockModel(model_config=config)
    rows, code = model.effect_rows(tiny)
    assert len(rows) == (2 if own_shocks else 1) and len(code) == 2
    names = ["mu_domain", "sigma_page", "sigma_walk", "shock"]
    for potential, *params in random_points(model.build_model(tiny), names, "dyn-shock-enumerate"):
        draw = dict(zip(names, params, strict=True))
        assert np.abs(draw["shock"]).max() > 0.2  # the shocks matter
        spread = np.ptp(draw["shock"][0] - draw["shock"][1])
        assert spread > 0.1 if own_shocks else spread == 0  # and differ by domain, or not
        total, last = paths_by_enumeration(model, tiny, *params)
        assert float(potential) == pytest.approx(total.sum(), rel=1e-9)
        filtered = model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)[0]
        np.testing.assert_allclose(filtered, last, atol=1e-10)
    if not own_shocks:  # a domain's own shocks where the model has none: refused
        draw["shock"] = draw["shock"] + np.array([[0.0], [0.3]])
        with pytest.raises(ValueError, match="do not match the domains"):
            model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)


def test_edits_logp_and_filter_equal_path_enumeration(tiny):
    """dynamic_edits: each interval's rate is its path's state times its domain's shock,
    plus its domain's edit rate in the closing epoch."""
    model = DynamicEditModel(model_config={"grid_size": 9, "domain_shock_min_pages": 1})
    names = ["mu_domain", "sigma_page", "sigma_walk", "shock", "edit_log_rate"]
    points = random_points(model.build_model(tiny), names, "dyn-edits-enumerate")
    for potential, *params in points:
        draw = dict(zip(names, params, strict=True))
        total, last = paths_by_enumeration(model, tiny, *params[:4], added=params[4])
        assert float(potential) == pytest.approx(total.sum(), rel=1e-9)
        without, _ = paths_by_enumeration(model, tiny, *params[:4])
        assert abs(total.sum() - without.sum()) > 0.05  # the edits matter here
        filtered = model.filtered({k: np.asarray(v)[None] for k, v in draw.items()}, tiny)[0]
        np.testing.assert_allclose(filtered, last, atol=1e-10)


def test_shifted_kernel_gradient_equals_finite_differences(tiny):
    """The tables at a shift and added rate per (domain, epoch) against ``loglik_grid`` (at
    zero, against the unshifted emission table); the gradient with respect to each group's
    shift and added rate (posterior state marginals times the emission's slopes, summed
    over the group's cells) against central differences."""
    from bayesrate.models.dynamic import bin_edges, normal_bins, transition_matrices
    from bayesrate.models.hmm import ShiftedEmission, shifted_paths_logp_grad

    model = DynamicShockModel(model_config={"grid_size": 11})
    cells, grid = model.cells(tiny), model.grid(tiny)
    emission = ShiftedEmission.from_cells(
        cells.groups,
        cells.cell_page,
        cells.cell_epoch,
        cells.n_pages,
        cells.n_epochs,
        grid,
        cell_groups(tiny, cells),
        2 * cells.n_epochs,
    )
    table, log_top = model.emission(tiny)
    got, _, got_top = emission.tables(np.zeros(emission.n_groups))
    np.testing.assert_allclose(got, table, rtol=1e-12)
    np.testing.assert_allclose(got_top, log_top, rtol=1e-12)
    rng = np.random.default_rng(seed_of("dyn-shift-grad"))
    shift = rng.normal(0, 0.7, emission.n_groups)
    edits = rng.normal(-5.0, 0.7, emission.n_groups)
    got, _, got_top = emission.tables(shift, edits)
    rows, tops = tables_by_numpy(tiny, cells, grid, shift, edits)
    np.testing.assert_allclose(got[cells.cell_page, cells.cell_epoch], rows, rtol=1e-10)
    want_top = np.bincount(cells.cell_page, weights=tops, minlength=cells.n_pages)
    np.testing.assert_allclose(got_top, want_top, rtol=1e-12)
    domain = tiny.domain_codes
    init = normal_bins(np.array([-5.0, -4.0, -5.5]), np.full(3, 0.8), bin_edges(grid))
    transitions = transition_matrices(np.array([0.5, 0.9]), grid)
    args = (domain, cells.first_column, cells.last_column)
    for added in (None, edits):
        got = shifted_paths_logp_grad(init, transitions, shift, emission, *args, added)
        h = 1e-6
        for which, x in ((0, shift), (1, added)):
            if x is None:
                assert np.all(got[4] == 0.0)
                continue
            for c in range(len(x)):
                up, down = x.copy(), x.copy()
                up[c] += h
                down[c] -= h
                moved = [(up, added), (down, added)] if which == 0 else [(shift, up), (shift, down)]
                hi, lo = (
                    shifted_paths_logp_grad(init, transitions, s, emission, *args, a)[0]
                    for s, a in moved
                )
                want = (hi - lo) / (2 * h)
                assert got[3 + which][c] == pytest.approx(want, rel=1e-5, abs=1e-6), (which, c)
            assert np.abs(got[3 + which]).max() > 0.5


def test_shifted_emission_refuses_wrong_groups(tiny):
    from bayesrate.models.hmm import ShiftedEmission

    model = DynamicShockModel(model_config={"grid_size": 11})
    cells, grid = model.cells(tiny), model.grid(tiny)
    emission = model.shifted_emission(tiny)
    with pytest.raises(ValueError, match="one value per group"):
        emission.tables(np.zeros(emission.n_groups + 1))
    args = (cells.groups, cells.cell_page, cells.cell_epoch, cells.n_pages, cells.n_epochs, grid)
    with pytest.raises(ValueError, match="must lie in"):
        ShiftedEmission.from_cells(*args, cell_groups(tiny, cells), 1)
    per_cell = ShiftedEmission.from_cells(*args)
    assert per_cell.n_groups == len(cells.cell_page)


def test_registered_and_unsupported_calls_say_so():
    assert get_model("dynamic_shocks") is DynamicShockModel
    assert get_model("dynamic_edits") is DynamicEditModel
    for model_class in (DynamicShockModel, DynamicEditModel):
        with pytest.raises(ValueError, match="independent"):
            model_class(model_config={"shock_process": "random_walk"})
    with pytest.raises(ValueError, match="walks of the 'dynamic' model"):
        DynamicShockModel(model_config={"path_integral": "laplace"})


@pytest.mark.parametrize("model_class", [DynamicShockModel, DynamicEditModel])
def test_model_gradient_equals_finite_differences(tiny, model_class):
    """The model's log-density gradient (through the binned Normals and the kernel)
    against central differences of its log-density, at random points."""
    model = model_class(model_config={"grid_size": 24})
    check_model_gradient(model.build_model(tiny), "dyn-model-grad")


#: the research variants as the shared checks take them: (class, shared epoch effects,
#: edit log-rates); every domain may have its own shocks on the tiny world
VARIANTS = {
    "dynamic_shocks": (DynamicShockModel, SHOCK, None),
    "dynamic_edits": (DynamicEditModel, SHOCK, EDIT),
}
ONE_PAGE_SHOCKS = {"domain_shock_min_pages": 1}


@pytest.mark.parametrize("variant", VARIANTS)
def test_leave_one_page_out_terms_equal_path_enumeration(tiny, variant):
    """The core check (:func:`~tests.models.dynamic_checks.check_leave_one_page_out`) with
    the shocks and edits summed into every enumerated path."""
    check_leave_one_page_out(tiny, *VARIANTS[variant], ONE_PAGE_SHOCKS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_conditional_predictive_equals_path_posterior(tiny, variant):
    """The core check (:func:`~tests.models.dynamic_checks.check_conditional_predictive`)
    with the shocks and edits of each group's epoch."""
    check_conditional_predictive(tiny, *VARIANTS[variant], ONE_PAGE_SHOCKS)


def test_predictive_refuses_what_it_cannot_draw(tiny):
    """The conditional predictive of other data, and dynamic_shocks visits outside the
    fitted epochs, are errors that say why."""
    model = fixed_posterior(DynamicModel(model_config={"grid_size": 5}), tiny, 4)
    with pytest.raises(ValueError, match="fitted observations"):
        model.predict(tiny_world(("a", "z", "a")), page_rates="posterior")
    shocked = fixed_posterior(DynamicShockModel(model_config={"grid_size": 5}), tiny, 4, SHOCK)
    later = sim.simulate_pages(
        [1 / 50], [np.arange(END + 10.0, END + 1.5 * L, 30.0)], domains=["a"],
        rng=sim.rng_from("dyn-later"),
    ).observations  # fmt: skip
    with pytest.raises(ValueError, match="within the fitted epochs"):
        shocked.predict(later)
    assert model.predict(later, n_draws=2)["posterior_predictive"]["detections"].size
