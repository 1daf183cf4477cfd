"""Level references of the forecast study: the level oracle, the mixture bound, and level
priors scored on several held-out windows (:mod:`bayesrate.studies.level`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from bayesrate.predictive import Groups, Prediction
from bayesrate.studies import forecast, level


def _brute_count(group_lambda, group_page, group_n, detected, factor):
    """Per page ``P(K = k)`` and ``P(K < k)``: scipy Binomials convolved per draw, averaged."""
    n_pages = len(detected)
    prob_k, below = np.zeros(n_pages), np.zeros(n_pages)
    for p in range(n_pages):
        for draw in group_lambda:
            dist = np.array([1.0])
            for g in np.flatnonzero(group_page == p):
                q = -np.expm1(-factor * draw[g])
                dist = np.convolve(dist, binom.pmf(np.arange(group_n[g] + 1), group_n[g], q))
            dist = np.pad(dist, (0, detected[p] + 1))
            prob_k[p] += dist[detected[p]] / len(group_lambda)
            below[p] += dist[: detected[p]].sum() / len(group_lambda)
    return prob_k, below


@pytest.mark.slow
def test_level_oracle_is_the_best_single_factor(rng):
    """Against brute force: each page's count a convolution of Binomials (scipy), the log
    score on a fine grid of factors; the oracle's factor is the grid's best (to its
    spacing) and its score the best found. A method off by a factor of 3 everywhere scores
    at the oracle what the right rates score; one rate for every page is worse when the
    pages differ."""
    n_pages = 40
    groups_per_page = rng.integers(1, 3, n_pages)
    group_page = np.repeat(np.arange(n_pages), groups_per_page)
    group_n = rng.integers(5, 40, len(group_page))
    hours = rng.choice([24.0, 48.0, 168.0], len(group_page))
    true_rate = np.exp(rng.normal(np.log(0.004), 1.2, n_pages))
    detected = np.zeros(n_pages, dtype=np.int64)
    for g, p in enumerate(group_page):
        detected[p] += rng.binomial(group_n[g], -np.expm1(-true_rate[p] * hours[g]))

    def brute(rate, factor):
        lam = (rate[group_page] * hours)[None, :]
        return np.mean(np.log(_brute_count(lam, group_page, group_n, detected, factor)[0]))

    off = 3.0 * true_rate
    factor, best = level.level_oracle(off, group_page, group_n, hours, detected)
    grid = np.exp(np.linspace(np.log(factor) - 0.3, np.log(factor) + 0.3, 61))
    scores = np.array([brute(off, f) for f in grid])
    assert abs(np.log(grid[scores.argmax()]) - np.log(factor)) <= 0.01
    assert best == pytest.approx(brute(off, factor), abs=1e-10)
    assert best >= scores.max() - 1e-9
    right, right_best = level.level_oracle(true_rate, group_page, group_n, hours, detected)
    assert right == pytest.approx(3.0 * factor, rel=1e-4) and right_best == pytest.approx(best)
    one, one_best = level.level_oracle(np.ones(n_pages), group_page, group_n, hours, detected)
    assert one_best < best - 0.05
    assert brute(np.full(n_pages, one), 1.0) == pytest.approx(one_best, abs=1e-10)


@pytest.mark.slow
def test_level_mixture_bound_bounds_every_mixture(rng):
    """Brute force (scipy Binomials convolved per page): random mixtures of levels on the
    same factors and random two-point mixtures anywhere in the range score below the bound;
    the value reached is the score of a mixture (at least the best single level less the
    grid's spacing) and within 1e-3 of the bound, and the bound after 20 EM steps is above
    it; with one page the best mixture is the
    page's best single level."""
    n_pages = 25
    group_page = np.repeat(np.arange(n_pages), 2)
    group_n = rng.integers(5, 30, len(group_page))
    hours = rng.choice([24.0, 72.0], len(group_page))
    rate = np.exp(rng.normal(np.log(0.01), 1.0, n_pages))
    # counts more dispersed than any single level makes: a mixture beats one level
    truth = rate * np.exp(rng.normal(0.0, 1.5, n_pages))
    detected = np.zeros(n_pages, dtype=np.int64)
    for g, p in enumerate(group_page):
        detected[p] += rng.binomial(group_n[g], -np.expm1(-truth[p] * hours[g]))

    def page_likelihood(factor):
        lam = (rate[group_page] * hours)[None, :]
        return _brute_count(lam, group_page, group_n, detected, factor)[0]

    factor, single = level.level_oracle(rate, group_page, group_n, hours, detected)
    value, bound = level.level_mixture_bound(rate, group_page, group_n, hours, detected, factor)
    assert single - 0.002 <= value <= bound < value + 1e-3
    assert value > single + 0.01  # the dispersed counts want a spread of levels
    early, early_bound = level.level_mixture_bound(
        rate, group_page, group_n, hours, detected, factor, 20
    )
    assert early < value - 1e-4 and early_bound >= value  # the bound holds before EM ends
    for _ in range(5):
        factors = factor * np.exp(rng.uniform(-6, 6, 2))
        weights = rng.dirichlet([1.0, 1.0])
        like = np.stack([page_likelihood(f) for f in factors])
        with np.errstate(divide="ignore"):  # a mixture far off the counts scores -inf
            assert np.mean(np.log(weights @ like)) <= bound + 1e-12
    one = group_page == 0
    f1, s1 = level.level_oracle(rate[:1], group_page[one], group_n[one], hours[one],
                                   detected[:1])  # fmt: skip
    v1, b1 = level.level_mixture_bound(
        rate[:1], group_page[one], group_n[one], hours[one], detected[:1], f1, 2000
    )
    assert s1 - 0.002 <= v1 <= s1 + 1e-9 and b1 >= s1 - 1e-9


@pytest.fixture
def two_windows(rng):
    """A method's draws on two windows of 40 pages: one at the method's level, one three
    times busier for every page."""
    n_pages, n_draws = 40, 6
    group_page = np.repeat(np.arange(n_pages), 2)
    group_n = rng.integers(10, 40, len(group_page))
    rate = np.exp(rng.normal(np.log(0.05), 0.8, n_pages))
    draws = rate[group_page] * np.exp(rng.normal(0.0, 0.2, (n_draws, len(group_page))))
    groups = Groups(group_page, group_n, np.ones(len(group_page)))
    pred = Prediction(group_lambda=draws, window_lambda=draws[:, :n_pages],
                       rate_per_hour=rate)  # fmt: skip
    windows = {}
    for label, busier in (("calm", 1.0), ("busy", 3.0)):
        k = np.zeros(n_pages, dtype=np.int64)
        np.add.at(k, group_page, rng.binomial(group_n, -np.expm1(-busier * draws[0])))
        windows[label] = (k, rng.random(n_pages))
    return pred, groups, windows


def test_level_table_and_priors_against_brute_force(two_windows):
    """Every prior's log score and coverage90 against brute force: the predictive mixed over
    the prior's levels, each level's count a convolution of Binomials per draw; the factor
    1 point prior reproduces the study's own score of the prediction."""
    pred, groups, windows = two_windows
    factors = np.exp(np.linspace(-1.0, 1.5, 6))
    _, weights = level.level_priors(factors, sds=(0.4,), upper_weights=(0.3,))
    for k, noise in windows.values():
        table = level.level_table(pred, groups, k, factors)
        brute = [_brute_count(pred.group_lambda, groups.page, groups.count, k, f)
                 for f in factors]  # fmt: skip
        brute_k = np.stack([b[0] for b in brute])
        brute_below = np.stack([b[1] for b in brute])
        np.testing.assert_allclose(table.prob_at_k, brute_k, rtol=1e-9, atol=1e-14)
        got_score, got_cov = table.scores(weights, noise)
        for row in (0, 3, len(factors) + 2, len(weights) - 1):
            pk, below = weights[row] @ brute_k, weights[row] @ brute_below
            assert got_score[row] == pytest.approx(np.mean(np.log(pk)), abs=1e-10)
            pit = below + noise * pk
            assert got_cov[row] == np.mean((pit >= 0.05) & (pit <= 0.95))

    k, noise = windows["calm"]
    table = level.level_table(pred, groups, k, np.array([1.0]))
    d = _StubDesign(k)
    study = forecast.score("m", pred, groups, d, noise, 0.0)
    one_score, one_cov = table.scores(np.ones(1), noise)
    assert one_score == pytest.approx(study.log_score, abs=1e-12)
    assert one_cov == pytest.approx(study.coverage90, abs=1e-12)


class _StubDesign:
    """What :func:`forecast.score` reads of a design, for a prediction without a history."""

    def __init__(self, k):
        self.detected = k
        self.n_pages = len(k)
        self.window_changes = k
        self.window_hours = np.full(len(k), 100.0)


def test_level_priors_have_their_stated_shape():
    """Point priors are one-hot; a log-normal's weights have the stated median and log-sd
    (inside the grid); two levels put the upper weight on the higher factor."""
    factors = level.LEVEL_GRID
    params, weights = level.level_priors(factors, sds=(0.3, 0.8), upper_weights=(0.2,))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    point = params.family.to_numpy() == "point"
    np.testing.assert_array_equal(weights[point], np.eye(len(factors)))
    log_f = np.log(factors)
    for row in np.flatnonzero(params.family.to_numpy() == "lognormal"):
        median, sd = params["median"][row], params["sd"][row]
        if abs(np.log(median)) + 5 * sd > 3.0:
            continue
        mean = weights[row] @ log_f
        assert mean == pytest.approx(np.log(median), abs=1e-6)
        assert np.sqrt(weights[row] @ (log_f - mean) ** 2) == pytest.approx(sd, rel=0.02)
    two = np.flatnonzero(params.family.to_numpy() == "two levels")
    assert len(two) == len(factors) * (len(factors) - 1) // 2
    for row in two[::97]:
        high = np.flatnonzero(factors == params["high"][row])[0]
        low = np.flatnonzero(factors == params["low"][row])[0]
        assert low < high and weights[row, high] == pytest.approx(0.2)
        assert weights[row, low] == pytest.approx(0.8) and np.count_nonzero(weights[row]) == 2


def test_level_tradeoff_on_a_calm_and_a_busy_window(two_windows):
    """The busy window's coverage90 falls far below the target at the method's own level
    and is in range for some broader prior; every prior's scores are the table's; the
    hindsight mixture bound of each window lies above every prior's log score there."""
    pred, groups, windows = two_windows
    factors = np.exp(np.linspace(-1.0, 2.0, 16))
    tables = {label: level.level_table(pred, groups, k, factors)
              for label, (k, _) in windows.items()}  # fmt: skip
    noise = {label: noise for label, (_, noise) in windows.items()}
    priors = level.level_priors(factors, sds=(0.3, 0.6), upper_weights=(0.2, 0.5))
    table = level.level_tradeoff(tables, noise, priors)
    assert len(table) == len(priors[0])
    nearest = np.argmin(np.abs(np.log(factors)))
    busy_cov = table["coverage90[busy]"].to_numpy()
    assert busy_cov[nearest] < 0.7 and table.in_target.any()
    for label in windows:
        scores, cov = tables[label].scores(priors[1], noise[label])
        np.testing.assert_array_equal(table[f"log_score[{label}]"], scores)
        np.testing.assert_array_equal(table[f"coverage90[{label}]"], cov)
        value, bound = tables[label].mixture_bound(5_000)
        assert scores.max() <= bound + 1e-12 and value >= scores.max() - 1e-6
    in_target = table.filter(like="coverage90").ge(0.85) & table.filter(like="coverage90").le(0.95)
    np.testing.assert_array_equal(table.in_target, in_target.all(axis=1))
    coarse = level.level_table(pred, groups, windows["busy"][0], factors[:3])
    with pytest.raises(ValueError, match="one grid"):
        level.level_tradeoff({"calm": tables["calm"], "busy": coarse}, noise)


def test_chosen_on_past_takes_the_best_prior_of_the_earlier_windows(rng):
    """By brute force over the rows: window i gets the prior with the best mean log score
    over windows 0 … i−1 and reports that prior's scores on window i."""
    windows = ["2022", "2023", "2024"]
    table = pd.DataFrame({"family": rng.choice(["point", "lognormal"], 50)})
    for w in windows:
        table[f"log_score[{w}]"] = rng.normal(-1.0, 0.2, 50)
        table[f"coverage90[{w}]"] = rng.uniform(0.6, 1.0, 50)
    got = level.chosen_on_past(table, windows)
    assert list(got.window) == windows[1:]
    for i, row in enumerate(got.itertuples(), start=1):
        means = [np.mean([table[f"log_score[{w}]"][r] for w in windows[:i]]) for r in range(50)]
        best = int(np.argmax(means))
        assert row.prior == best and row.family == table.family[best]
        assert row.log_score == table[f"log_score[{windows[i]}]"][best]
        assert row.coverage90 == table[f"coverage90[{windows[i]}]"][best]


@pytest.mark.slow
def test_level_tradeoff_script_reproduces_the_study(tmp_path, capsys):
    """``scripts/level_tradeoff.py`` on two short splits of tldr-pages: its method score at
    factor 1 is the forecast study's own (same design, seed and sampler), and its CSV holds
    every prior with each split's scores."""
    import runpy
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "level_tradeoff.py"
    main = runpy.run_path(str(script))["main"]
    settings = ["--max-pages", "40", "--draws", "100", "--tune", "100", "--horizon-days", "90"]
    settings += ["--predictive-draws", "50"]
    splits = "2024-01-01T00:00Z,2024-07-01T00:00Z"
    out = tmp_path / "tradeoff.csv"
    assert main(["--dataset", "tldr-pages", "--splits", splits, *settings, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    study = forecast.run(
        dataset="tldr-pages", split=splits.split(",")[0], horizon_days=90,
        methods="hierarchical", max_pages=40, draws=100, tune=100, chains=2, predictive_draws=50,
        worlds=0,
    )  # fmt: skip
    own = study.methods["hierarchical"]
    assert f"hierarchical log score {own.log_score:.4f}, coverage90 {own.coverage90:.3f}" in printed
    table = pd.read_csv(out)
    assert len(table) == len(level.level_priors()[0])
    assert {"log_score[2024-01-01]", "coverage90[2024-07-01]", "in_target", "worst_gain"} <= set(
        table
    )
    assert "each split with the prior that scored best on the splits before it" in printed
