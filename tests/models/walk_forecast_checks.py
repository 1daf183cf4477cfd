"""The summed-walk forecast's oracles and checks, shared by ``tests/models`` and the research
package's tests of its dynamic variants.

Oracle: every future path enumerated, from each page's last-epoch state posterior of the
path enumeration (:func:`tests.models.dynamic_checks.paths_by_enumeration`, scipy's
Normal bins), each test interval its own Bernoulli (no groups), the counts by
convolution; and the worlds, drawn by sampling paths, against the predictive they are
drawn from.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
from scipy.stats import norm

from bayesrate.models import walk_forecast as walk_forecast_module
from bayesrate.models.dynamic import end_epochs
from bayesrate.models.walk_forecast import walk_forecast
from bayesrate.predictive import sampled_walk_prediction
from bayesrate.studies import forecast
from tests.models.dynamic_checks import END, POINT, L, paths_by_enumeration

GRID = 5
N_DRAWS = 3


def forecast_design(data):
    """Daily test visits after the data's end for 1.3 epochs (pages 0, 2) and weekly ones
    for 0.6 epochs (page 1); windows of 1.5, 0.4 and 1.1 epochs."""
    starts, ends, pages = [], [], []
    for p, (step, span) in enumerate([(24.0, 1.3), (168.0, 0.6), (24.0, 1.3)]):
        visits = END + 5.0 * p + np.arange(step, span * L, step)
        starts.append(np.concatenate([[END], visits[:-1]]))
        ends.append(visits)
        pages.append(np.full(len(visits), p))
    return SimpleNamespace(
        n_pages=data.n_pages,
        split=END,
        window_hours=np.array([1.5, 0.4, 1.1]) * L,
        train=data,
        interval_start=np.concatenate(starts),
        interval_end=np.concatenate(ends),
        interval_page=np.concatenate(pages),
    )


def enumerated(model, data, d, wf, cap, shock=None, edits=None):
    """Per draw and page: the count pmf up to ``cap``, P(no change in the window) and the
    expected count, every future path enumerated, each interval its own Bernoulli
    (``shock``, ``edits``: the fitted shared effects and edit log-rates of a research
    variant)."""
    grid = model.grid(data)
    edges = np.concatenate([[-np.inf], (grid[1:] + grid[:-1]) / 2, [np.inf]])
    _, last = paths_by_enumeration(
        model, data, POINT["mu_domain"], POINT["sigma_page"], POINT["sigma_walk"], shock,
        added=edits,
    )  # fmt: skip
    ahead = end_epochs(d.interval_end, END, L) + 1  # epochs after the last fitted (ends at END)
    assert set(ahead) == {1, 2}
    tau = d.interval_end - d.interval_start
    pmf = np.zeros((N_DRAWS, data.n_pages, cap.max() + 1))
    no_change = np.zeros((N_DRAWS, data.n_pages))
    expected = np.zeros((N_DRAWS, data.n_pages))
    for i, p in itertools.product(range(N_DRAWS), range(data.n_pages)):
        dom = data.domain_codes[p]
        step = np.array([np.diff(norm.cdf(edges, m, POINT["sigma_walk"][dom])) for m in grid])
        # the research variants' shared effects and added rates, drawn per draw ahead
        log_shift = np.zeros(3) if shock is None else wf.log_shift[i, dom]
        if shock is not None:
            assert log_shift[0] == shock[dom, -1]
        added = np.zeros(3) if edits is None else np.exp(wf.log_added[i, dom])
        mine = d.interval_page == p
        window = d.window_hours[p]
        pieces = np.array([0.0, min(window, L), max(window - L, 0.0)])  # hours per epoch ahead
        for path in itertools.product(range(GRID), repeat=3):
            weight = last[p][path[0]] * step[path[0], path[1]] * step[path[1], path[2]]
            rate = np.exp(grid[list(path)] + log_shift) + added
            q = -np.expm1(-rate[ahead[mine]] * tau[mine])
            dist = np.ones(1)
            for qi in q:
                dist = np.convolve(dist, [1 - qi, qi])
            top = min(len(dist), cap.max() + 1)
            pmf[i, p, :top] += weight * dist[:top]
            no_change[i, p] += weight * math.exp(-(rate * pieces).sum())
            expected[i, p] += weight * q.sum()
    return pmf.mean(axis=0), no_change.mean(axis=0), expected.mean(axis=0)


def check_summed_walks(model, data, shock=None, edits=None):
    """The count distribution (whole, and truncated below a page's count), the probability
    of a change in the window and the expected count, against every future path; returns
    the forecast."""
    d = forecast_design(data)
    groups = forecast.closing_epoch_groups(d, model)
    wf = walk_forecast(model, d, groups, np.arange(N_DRAWS), np.zeros(3), "walk-test")
    cap = np.array([60, 9, 12])  # page 2 truncated: it has 91 intervals
    buckets, expected, change = wf.count_distribution(cap)
    want_pmf, want_none, want_expected = enumerated(model, data, d, wf, cap, shock, edits)
    for pages, got in buckets:
        for row, p in enumerate(pages):
            np.testing.assert_allclose(got[row, : cap[p] + 1], want_pmf[p, : cap[p] + 1],
                                       rtol=1e-9, atol=1e-300)  # fmt: skip
            assert not got[row, cap[p] + 1 :].any()
    np.testing.assert_allclose(1 - change, want_none, rtol=1e-10)
    np.testing.assert_allclose(expected, want_expected, rtol=1e-10)
    assert want_pmf[0, :40].max() < 0.2 and want_expected[0] > 5  # a spread-out count
    k = np.array([7, 2, 3])
    prob_k, below = forecast.pmf_at(buckets, k)
    np.testing.assert_allclose(prob_k, want_pmf[np.arange(3), k], rtol=1e-9)
    want_below = [want_pmf[p, : k[p]].sum() for p in range(3)]
    np.testing.assert_allclose(below, want_below, rtol=1e-9)
    return wf


def check_worlds(model, data, monkeypatch, spread: bool = False):
    """Worlds sample paths and Binomials; their counts follow the summed-out pmf. ``spread``:
    the model's future shocks spread the counts, so some world's count lies beyond the 99%
    quantile's cap (and none beyond the median's re-computed one)."""
    d = forecast_design(data)
    wf = walk_forecast(model, d, forecast.closing_epoch_groups(d, model), np.arange(N_DRAWS),
                       np.zeros(3), "walk-test")  # fmt: skip
    n = 6000
    worlds = wf.draw_worlds(n, "walk-worlds")
    assert worlds.counts.shape == worlds.noise.shape == (n, 3)
    cap = worlds.counts.max(axis=0)
    buckets, expected, _ = wf.count_distribution(cap)
    pmf = {p: got[row] for pages, got in buckets for row, p in enumerate(pages)}
    # up to the worlds' 99% quantile only: the same PIT band for every world, and the
    # probabilities of the counts below the cap; at the median the mass below is short of
    # the band's end, so every page is computed again up to its largest world count
    full_k, full_below = forecast.pmf_at(buckets, worlds.counts)
    band = forecast.in_pit_band
    for quantile, beyond in ((0.99, True), (0.5, False)):
        monkeypatch.setattr(walk_forecast_module, "WORLD_QUANTILE", quantile)
        short, _, _ = wf.count_distribution(np.zeros(3, dtype=np.int64), worlds.counts)
        short_k, short_below = forecast.pmf_at(short, worlds.counts)
        np.testing.assert_array_equal(band(short_below + worlds.noise * short_k),
                                      band(full_below + worlds.noise * full_k))  # fmt: skip
        inside = short_k > 0  # a drawn count has probability > 0 below the cap
        np.testing.assert_allclose(short_k[inside], full_k[inside], rtol=1e-12)
        assert inside.mean() > 0.98 and (beyond or inside.all())
        if spread:
            assert (~inside).any() == beyond
    for p in range(3):
        np.testing.assert_allclose(pmf[p].sum(), 1.0, atol=1e-12)
        freq = np.bincount(worlds.counts[:, p], minlength=len(pmf[p]))[: len(pmf[p])] / n
        se = np.sqrt(pmf[p] * (1 - pmf[p]) / n)
        assert np.all(np.abs(freq - pmf[p]) <= 4.5 * se + 1e-3), p
        mean_se = worlds.counts[:, p].std() / math.sqrt(n)
        assert abs(worlds.counts[:, p].mean() - expected[p]) < 4.5 * mean_se


def check_sampled_paths(model, data, n: int):
    """``walks="sampled"`` (one path per draw from the draw's filtered state) has, on the
    same ``n`` draws of ``model`` (a fixed posterior), the summed predictive's expected
    counts and window change probabilities, to its Monte Carlo error."""
    import xarray as xr

    from bayesrate.constants import DIM_PAGE
    from bayesrate.models.dynamic import draw_states
    from bayesrate.seeds import rng_from

    post = model.idata_["posterior"].to_dataset()
    states = draw_states(model.filtered(model._stacked(post), data), rng_from("walk-sampled"))
    log_rate = model.grid(data)[states][None]
    post["log_rate"] = xr.DataArray(log_rate, dims=("chain", "draw", DIM_PAGE))
    model.idata_ = xr.DataTree.from_dict({"posterior": post})
    d = forecast_design(data)
    groups = forecast.closing_epoch_groups(d, model)
    keep = np.arange(n)
    sampled = sampled_walk_prediction(model, d, groups, keep, np.zeros(3), "walk-law")
    summed = walk_forecast(model, d, groups, keep, np.zeros(3), "walk-law")
    _, expected, change = summed.count_distribution(np.zeros(3, dtype=np.int64))
    per_draw = np.zeros((n, 3))
    np.add.at(per_draw.T, groups.page, (groups.count * sampled.group_probability()).T)
    window = sampled.window_probability()
    for got, want in ((per_draw, expected), (window, change)):
        se = got.std(axis=0) / math.sqrt(n)
        assert np.all(np.abs(got.mean(axis=0) - want) < 4.5 * se), (got.mean(axis=0), want)
        assert np.all(se > 0)
