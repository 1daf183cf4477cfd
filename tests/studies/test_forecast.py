"""Forecast study: the count predictive, the randomised PIT, the design, the command line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from bayesrate import datasets, predictive
from bayesrate.cli import main
from bayesrate.errors import ObservationError
from bayesrate.history import ChangeHistory
from bayesrate.studies import forecast

T0 = pd.Timestamp("2022-01-01", tz="UTC")


def ts(hours: float) -> str:
    return (T0 + pd.Timedelta(hours=hours)).isoformat()


def test_count_predictive_matches_convolution(rng):
    n_pages, n_draws = 30, 7
    groups_per_page = rng.integers(1, 4, n_pages)
    group_page = np.repeat(np.arange(n_pages), groups_per_page)
    group_n = rng.integers(1, 12, len(group_page))
    prob = rng.uniform(0.01, 0.9, (n_draws, len(group_page)))
    k = rng.integers(0, 9, n_pages)
    got_p, got_below = forecast.count_predictive(prob, group_page, group_n, k)
    for p in range(n_pages):
        mix = np.zeros(64)
        for s in range(n_draws):
            dist = np.array([1.0])
            for g in np.flatnonzero(group_page == p):
                dist = np.convolve(
                    dist, binom.pmf(np.arange(group_n[g] + 1), group_n[g], prob[s, g])
                )
            mix[: len(dist)] += dist / n_draws
        assert got_p[p] == pytest.approx(mix[k[p]], rel=1e-10, abs=1e-300)
        assert got_below[p] == pytest.approx(mix[: k[p]].sum(), rel=1e-10, abs=1e-15)


def test_randomised_pit_is_uniform_for_a_calibrated_predictive(rng):
    # counts drawn from the predictive itself: mostly 0 or 1, where plain interval coverage fails
    n_pages = 40_000
    group_page = np.repeat(np.arange(n_pages), 2)
    group_n = np.tile([5, 20], n_pages)
    prob = np.exp(rng.normal(np.log(0.01), 1.0, len(group_page))).clip(max=0.9)[None, :]
    k = rng.binomial(group_n, prob[0]).reshape(n_pages, 2).sum(axis=1)
    assert np.mean(k <= 1) > 0.8
    p_k, below = forecast.count_predictive(prob, group_page, group_n, k)
    pit = below + rng.random(n_pages) * p_k
    inside = np.mean((pit >= 0.05) & (pit <= 0.95))
    assert inside == pytest.approx(0.90, abs=0.01)  # sd of the estimate 0.0015
    deciles = np.histogram(pit, bins=10, range=(0, 1))[0] / n_pages
    assert np.allclose(deciles, 0.1, atol=0.01)


def _world_coverage(prob, group_n, observed, worlds, seed):
    """Worlds of one group per page, scored against their own predictive."""
    n_pages = prob.shape[1]
    drawn = forecast.draw_worlds(prob, np.arange(n_pages), group_n, n_pages, worlds, seed)
    buckets = forecast.count_pmf(prob, np.arange(n_pages), group_n, drawn.counts.max(axis=0))
    return forecast.world_coverage(drawn, lambda k: forecast.pmf_at(buckets, k), observed)


def test_world_coverage_of_independent_pages_is_binomial():
    """One draw, no shared effect: the randomised PIT of a count drawn from its own
    predictive is exactly uniform, so a world's coverage90 is Binomial(pages, 0.9) / pages."""
    from scipy.stats import binom as binomial

    n_pages, worlds = 400, 4000
    rng = np.random.default_rng(11)
    group_n = rng.integers(1, 30, n_pages)
    prob = rng.uniform(0.005, 0.5, (1, n_pages))
    w = _world_coverage(prob, group_n, 0.9, worlds, "indep")
    assert w.coverage.mean() == pytest.approx(0.9, abs=3 * 0.015 / np.sqrt(worlds))
    assert w.coverage.std() == pytest.approx(np.sqrt(0.09 / n_pages), rel=0.06)
    assert w.q05 == pytest.approx(binomial.ppf(0.05, n_pages, 0.9) / n_pages, abs=0.0051)
    assert w.q95 == pytest.approx(binomial.ppf(0.95, n_pages, 0.9) / n_pages, abs=0.0051)


def _coverage_given_draw(prob: np.ndarray, group_n: np.ndarray) -> np.ndarray:
    """(draws,) expected coverage90 over pages of a world from draw j (one group per page):
    for each count, the probability of the PIT band given the count, in closed form."""
    n_draws, n_pages = prob.shape
    out = np.zeros((n_draws, n_pages))
    for p in range(n_pages):
        m = np.arange(group_n[p] + 1)
        pmf = binom.pmf(m[None, :], group_n[p], prob[:, p][:, None])  # (draws, counts)
        mix = pmf.mean(axis=0)
        below = np.cumsum(mix) - mix
        lo = np.clip((0.05 - below) / mix, 0, 1)
        hi = np.clip((0.95 - below) / mix, 0, 1)
        out[:, p] = pmf @ (hi - lo)
    return out


def test_world_coverage_with_a_shared_shock_matches_closed_form():
    """Pages share one log-rate shock per draw: the worlds' coverage90 is calibrated on
    average but spreads as the closed-form coverage given the shock (plus page noise)."""
    n_pages, n_draws, worlds = 600, 40, 3000
    rng = np.random.default_rng(12)
    base = np.exp(rng.normal(np.log(0.02), 0.7, n_pages))
    shock = rng.normal(0.0, 0.8, n_draws)
    group_n = rng.integers(20, 120, n_pages)
    prob = -np.expm1(-base[None, :] * np.exp(shock)[:, None])
    w = _world_coverage(prob, group_n, 0.79, worlds, "shock")
    given = _coverage_given_draw(prob, group_n)
    expected_mean = given.mean()
    expected_var = given.mean(axis=1).var() + (given * (1 - given)).mean() / n_pages
    assert expected_mean == pytest.approx(0.9, abs=0.002)  # the oracle is calibrated
    assert w.coverage.mean() == pytest.approx(expected_mean, abs=4 * np.sqrt(expected_var / worlds))
    assert w.coverage.std() == pytest.approx(np.sqrt(expected_var), rel=0.08)
    assert np.sqrt(expected_var) > 5 * np.sqrt(0.09 / n_pages)  # far wider than independent
    assert w.observed_quantile == pytest.approx(np.mean(w.coverage < 0.79), abs=0.02)
    in_target = np.mean((given.mean(axis=1) >= 0.85) & (given.mean(axis=1) <= 0.95))
    assert w.share_in_target == pytest.approx(in_target, abs=0.1)


def poisson_history(
    rng, n_pages=1500, days=800, median_per_day=0.2
) -> tuple[ChangeHistory, np.ndarray]:
    rates = np.exp(rng.normal(np.log(median_per_day), 0.8, n_pages)) / 24
    rows = []
    for i, lam in enumerate(rates):
        t = rng.exponential(1 / lam)
        while t < days * 24:
            rows.append((f"p{i:04d}", f"d{i % 3}", t))
            t += rng.exponential(1 / lam)
    frame = pd.DataFrame(rows, columns=["page", "domain", "hours"])
    frame["time"] = T0 + pd.to_timedelta(frame.pop("hours"), unit="h")
    return ChangeHistory.from_frame(frame, end=ts(days * 24)), rates


def test_design_cuts_at_the_split(rng):
    h, _ = poisson_history(rng, n_pages=80, days=200)
    split = h.start + 150 * 24
    d = forecast.design(h, crawl_every_hours=24.0, split=split, horizon_hours=30 * 24, seed="d")
    assert d.train.time.max() <= split and d.n_pages == 80
    assert (d.interval_start <= split).sum() == 80  # exactly the first test interval per page
    assert (d.interval_end > split).all() and (d.interval_end <= split + 30 * 24).all()
    for j, hp in enumerate(d.history_page):
        times = h.times[h.offsets[hp] : h.offsets[hp + 1]]
        sel = d.interval_page == j
        for a, b, truth in zip(
            d.interval_start[sel], d.interval_end[sel], d.interval_truth[sel], strict=True
        ):
            assert truth == np.sum((times > a) & (times <= b))
        assert d.window_changes[j] == np.sum((times > split) & (times <= split + 30 * 24))
    assert d.detected.sum() == (d.interval_truth > 0).sum()


def test_point_forecasts_on_poisson_pages_are_calibrated(rng):
    """On homogeneous Poisson pages with long training, the plug-in MLE is nearly the truth:
    its randomised PIT covers ~90%; the naive rate (biased low under censoring) scores worse."""
    h, _ = poisson_history(rng)
    result = forecast.run(
        history=h, methods=("naive", "mle"), horizon_days=90, crawl_every=24.0, seed="poisson"
    )
    mle, naive = result.methods["mle"], result.methods["naive"]
    assert mle.coverage90 == pytest.approx(0.90, abs=0.03)
    assert mle.log_score > naive.log_score + 0.01
    assert mle.rate_log_rmse < naive.rate_log_rmse
    assert mle.worlds is not None and len(mle.worlds.coverage) == forecast.WORLDS
    assert mle.worlds.q05 < 0.9 < mle.worlds.q95 and mle.worlds.q95 - mle.worlds.q05 < 0.06
    assert set(result.details()["methods"]["mle"]["coverage90_worlds"]) == {
        "worlds",
        "mean",
        "q05",
        "q95",
        "share_in_target",
        "observed_quantile",
    }
    shape = result.to_json()
    assert set(shape) == {"split", "horizon_days", "crawl_every_hours", "pages", "methods"}
    scores = {"log_score", "brier", "coverage90", "rate_log_rmse"}
    assert set(shape["methods"]["mle"]) == scores | {"seconds"}  # a point method: no gates


def test_cli_json_and_figures(tmp_path, capsys):
    out = tmp_path / "fc"
    args = ["study", "forecast", "--dataset", "tldr-pages", "--methods", "naive,cho,mle"]
    args += ["--crawl-every", "168", "--max-pages", "400", "--out", str(out), "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"split", "horizon_days", "crawl_every_hours", "pages", "methods"}
    assert result["pages"] == 400 and result["crawl_every_hours"] == 168.0
    for name in ("calibration.png", "pit.png", "log-score.png", "forecast.json", "pages.csv",
                 "scores.csv"):  # fmt: skip
        assert (out / name).stat().st_size > 0
    details = json.loads((out / "forecast.json").read_text())
    for name in ("naive", "cho", "mle"):
        level = details["methods"][name]["level_oracle"]
        assert level["factor"] > 0 and np.isfinite(level["log_score"])
        assert details["methods"][name]["expected_detections"] > 0
    assert details["constant_rate_oracle"]["rate_per_day"] > 0
    assert details["test"]["detections"] == sum(pd.read_csv(out / "pages.csv")["detected"])
    assert main([*args[:5], "bogus", *args[6:]]) == 1
    assert "unknown method" in capsys.readouterr().err


@pytest.mark.slow
def test_models_in_fast_mode_on_tldr_pages():
    """Every core method runs end to end on a real history (the research models:
    research/tests/test_forecast_research.py). The plumbing only (scores finite, each fit's
    gates carried): 60 pages, yearly epochs for the walks and 2 chains of 50 draws after 50
    tuning steps keep it cheap (300 pages, 90-day epochs and 2 x 200 + 300, fast mode's
    defaults, took 17 minutes cold); the scores' quality is the forecast study's. At 60
    pages the MMPP mixture's search once overflowed ``exp`` in its steady share's logit (a
    RuntimeWarning, an error here)."""
    methods = forecast.METHODS
    result = forecast.run(history=datasets.load_history("tldr-pages"), fast=True,
                          methods=methods, crawl_every=168.0, max_pages=60, draws=50, tune=50,
                          model_config={"dynamic": {"epoch_days": 365},
                                        "excursion": {"epoch_days": 365}})  # fmt: skip
    table = result.table()
    assert list(table.index) == list(methods) and result.to_json()["pages"] == 60
    assert np.isfinite(table[["log_score", "brier", "coverage90", "rate_log_rmse"]]).all().all()
    for name in forecast.MODEL_METHODS:
        d = result.methods[name].diagnostics
        assert {"r_hat_max", "ess_bulk_min", "divergences"} <= set(d)
        # --json carries each fit's gates beside its scores
        shown = result.to_json()["methods"][name]
        assert {k: shown[k] for k in forecast.FIT_GATES} == {k: d[k] for k in forecast.FIT_GATES}
        assert shown["seconds"] == round(result.methods[name].seconds, 2)


def test_gamma_mixed_change_probability_is_the_negative_binomial():
    """The bursty predictive's P(change) is 1 − NB(0; κ, κ/(κ + Λ)) (scipy's pmf), and a
    window of m equal intervals with shape κ·m is m independent intervals (q^m)."""
    from scipy.stats import nbinom

    lam = np.array([[1e-4, 0.02, 0.7, 5.0, 80.0]])
    kappa = np.array([[0.05, 0.5, 2.0, 30.0, 1e6]])
    want = 1 - nbinom.pmf(0, kappa, kappa / (kappa + lam))
    np.testing.assert_allclose(predictive.change_probability(lam, kappa), want, rtol=1e-9)
    np.testing.assert_allclose(predictive.change_probability(lam, None), -np.expm1(-lam))
    # where 1 − pmf cancels, the series p = Λ − Λ²(1 + 1/κ)/2 + O(Λ³)
    tiny, k = 1e-9, 0.05
    series = tiny - tiny**2 * (1 + 1 / k) / 2
    assert predictive.change_probability(np.array([tiny]), np.array([k]))[0] == pytest.approx(
        series, rel=1e-12
    )
    m = 7.0
    q_one = nbinom.pmf(0, kappa, kappa / (kappa + lam))
    window = predictive.change_probability(lam * m, kappa * m)
    np.testing.assert_allclose(window, -np.expm1(m * np.log(q_one)), rtol=1e-9)


def test_model_config_overrides_are_checked_before_any_fit():
    """``--model-config METHOD=JSON``: per model method of the run, a JSON object whose keys
    the model accepts; anything else is an error naming the method."""
    methods = ["mle", "dynamic", "hierarchical"]
    got = forecast.method_configs(['dynamic={"epoch_days": 365}', "hierarchical={}"], methods)
    assert got == {"dynamic": {"epoch_days": 365}, "hierarchical": {}}
    assert forecast.method_configs(None, methods) == {}
    bad = {
        "mle={}": "not a model method",
        'excursion={"epoch_days": 30}': "not a model method",
        "dynamic": "NAME=JSON",
        "dynamic={epoch_days: 3}": "not JSON",
        "dynamic=[1]": "JSON object",
        'dynamic={"epoch_dayz": 3}': "epoch_dayz",
        'dynamic={"epoch_days": -1}': "epoch_days",
    }
    for text, message in bad.items():
        with pytest.raises(ObservationError, match=message):
            forecast.method_configs([text], methods)


def test_methods_are_the_core_and_the_registered_models():
    """The core's models are methods; a name no registry knows is refused, saying where the
    research models are."""
    assert set(forecast.MODEL_METHODS) == {"censored", "hierarchical", "modulated", "dynamic",
                                           "excursion"}  # fmt: skip
    with pytest.raises(ObservationError, match="pip install -e research"):
        forecast.checked_methods("mle,no_such_model", 30.0)


def test_cli_help_states_the_study_sampler(capsys):
    """The forecast command's help gives the defaults the study really uses."""
    assert main(["study", "forecast", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"NUTS draws per chain (default {forecast.STUDY_SAMPLER['draws']:,})" in text
    assert f"NUTS tuning steps (default {forecast.STUDY_SAMPLER['tune']:,})" in text
    listed = text.split("mmpp_mixture, any registered model")[1].split("--max-pages")[0]
    for method in forecast.DEFAULT_METHODS:
        assert method in listed, method
    for method in forecast.ON_REQUEST:
        assert method not in listed.split("default")[1], method


def test_the_default_methods_score_the_shipped_recommended_model():
    """A study run with no methods named scores the model that ``calibrate`` recommends in
    the artifacts the package ships (issue 52: the default answer is calibrated)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "models"
    shipped = [json.loads(p.read_text())["model"] for p in root.glob("*/recommended.json")]
    assert shipped, f"no recommended.json under {root}"
    assert set(shipped) == {forecast.RECOMMENDED_METHOD}
    assert forecast.RECOMMENDED_METHOD in forecast.DEFAULT_METHODS
    assert not set(forecast.ON_REQUEST) & set(forecast.DEFAULT_METHODS)


def test_closing_epoch_groups_key_each_interval_by_its_closing_epoch():
    """The dynamic model's test groups: every test interval once, in the group of its page,
    length and the grid column its closing visit falls in (checked interval by interval)."""
    from types import SimpleNamespace

    from bayesrate.models.dynamic import DynamicModel, EpochCells

    rng = np.random.default_rng(7)
    n = 300
    start = np.sort(rng.uniform(1000, 9000, n))
    end = start + rng.choice([24.0, 168.0], n)
    page = rng.integers(0, 4, n)
    cells = EpochCells(
        anchor=1000.0, epoch_hours=2160.0, first_epoch=-3, n_epochs=3, n_pages=4,
        cell_page=np.zeros(0), cell_epoch=np.zeros(0), groups=None,
        first_column=np.zeros(4), last_column=np.zeros(4),
    )  # fmt: skip
    model = SimpleNamespace(cells=lambda data: cells, data_=None)
    d = SimpleNamespace(interval_start=start, interval_end=end, interval_page=page)
    g = DynamicModel.forecast_groups(model, d, None)  # the dynamic model's own grouping
    assert g.count.sum() == n
    for p, col, tau, count in zip(g.page, g.epochs, g.key, g.count, strict=True):
        k = col + cells.first_epoch
        lo, hi = cells.anchor + k * cells.epoch_hours, cells.anchor + (k + 1) * cells.epoch_hours
        mine = (page == p) & (end - start == tau) & (end > lo) & (end <= hi)
        assert mine.sum() == count
