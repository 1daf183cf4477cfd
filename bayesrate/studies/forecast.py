"""Forecast study: which method predicts the future of real pages? (``docs/histories.md``)

Every page alive at the ``split`` is crawled on a fixed schedule (every ``crawl_every_hours``,
a random phase per page) from the start of the history: the visits up to the split are the
censored training data, the only thing a method sees. The same schedule continues through
the test window ``(split, split + horizon]``; its intervals (the first one starts at the last
training visit) carry the exact number of changes from the history. Each method predicts,
per page:

- the number ``k`` of test intervals with a detected change: for the Bayesian models the
  posterior predictive (per posterior draw the count is a sum of Binomials over the page's
  test intervals grouped by integrated rate, mixed over draws); for the point estimators the
  plug-in Binomial with ``λ̂`` floored at :data:`RATE_FLOOR_CHANGES` change over the page's
  training exposure (so a page that never changed does not get probability 0);
- the probability that the page changes at all in the test window (until it is deleted).

Scores (``ForecastResult.to_json()``): ``log_score``, the mean over pages of
``log P(k)``; ``brier``, the Brier score of "changed at all" against the exact history;
``coverage90``, the fraction of pages whose randomised PIT value ``u = F(k − 1) + V·P(k)``
(``V`` uniform, common to all methods) lies in ``[0.05, 0.95]`` — 0.90 in expectation for a
calibrated predictive even when most counts are 0 or 1; and ``rate_log_rmse``, the RMSE of
``log`` predicted rate against ``log`` realised exact rate over pages with at least one
true change in the window (the rate a Bayesian model predicts is its posterior mean).

:func:`run` is the library entry point (``bayesrate study forecast`` is a thin layer over
it, :mod:`bayesrate.commands.study`); the figures are :func:`bayesrate.plots.forecast_calibration`,
:func:`~bayesrate.plots.forecast_pit` and :func:`~bayesrate.plots.forecast_log_scores`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesrate.clock import to_timestamp
from bayesrate.constants import DIM_PAGE, HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.history import (
    ChangeHistory,
    FixedInterval,
    crawl,
    hours_of,
    segment_searchsorted,
)
from bayesrate.observations import Observations, concat_ranges
from bayesrate.predictive import (  # noqa: F401 (the study's names for them)
    COVERAGE_TARGET,
    MIN_PROBABILITY,
    OVERLAP_CHUNK,
    PIT_BAND,
    FutureEpochs,
    Worlds,
    count_pmf,
    future_epochs,
    in_pit_band,
    length_groups,
    pattern_groups,
    pmf_at,
)
from bayesrate.predictive import Groups as _Groups
from bayesrate.predictive import Prediction as _Prediction
from bayesrate.quick_fit import QUICK_SAMPLER
from bayesrate.seeds import rng_from
from bayesrate.studies import Progress, StudyResult, silent

if TYPE_CHECKING:
    from bayesrate.models.walk_forecast import WalkForecast

DESCRIPTION = "Forecast the future of real pages: every estimator and model vs the exact history"

POINT_METHODS = ("naive", "cho", "mle")
#: fitted by maximum marginal likelihood, scored with their own exact predictive
#: (:func:`burst_forecast`)
BURST_METHODS = ("mmpp", "mmpp_mixture")
#: the core's models; any other registered model (``bayesrate.models.register``, e.g. the
#: research package's) is a method too, on request
MODEL_METHODS = ("censored", "hierarchical", "modulated", "dynamic", "excursion")
METHODS = (*POINT_METHODS, *MODEL_METHODS, *BURST_METHODS)
#: the methods run when none are named (the epoch models and the MMPP on request)
ON_REQUEST = ("dynamic", "excursion", *BURST_METHODS)
DEFAULT_METHODS = tuple(m for m in METHODS if m not in ON_REQUEST)
#: point estimates are floored at this many changes over the page's training exposure
RATE_FLOOR_CHANGES = 0.5
#: worlds drawn from each method's predictive to show the spread of coverage90
WORLDS = 500
DEFAULT_HORIZON_DAYS = 180.0
#: NUTS settings of the study's fits unless given: 4 x 2000 draws after the quick fits' 300
#: tuning steps (:data:`bayesrate.quick_fit.QUICK_SAMPLER`). On all 6,907 tldr pages 4 x 1000
#: draws left R-hat at 1.0105-1.0173 in one run and under 1.01 in another: the worst of
#: ~14,000 parameters sits on the gate by chance
STUDY_SAMPLER = {**QUICK_SAMPLER, "draws": 2000}
#: how a dynamic model's predictive treats the page walks after the last fitted epoch
#: (:func:`model_prediction`): summed out on the grid (default) or one sampled path per draw
WALKS = ("summed", "sampled")
#: a fitted method's diagnostics that :meth:`MethodForecast.summary` puts beside its scores
FIT_GATES = ("converged", "r_hat_max", "ess_bulk_min", "divergences")
FAST = {"max_pages": 300, "draws": 200, "tune": 300, "chains": 2, "predictive_draws": 200}


# --------------------------------------------------------------------------- results
@dataclass
class MethodForecast:
    """One method's scores and per-page predictions (arrays aligned with the pages)."""

    name: str
    log_score: float
    brier: float
    coverage90: float
    rate_log_rmse: float
    prob_at_k: np.ndarray
    cdf_below_k: np.ndarray
    pit: np.ndarray
    prob_change: np.ndarray
    expected_count: np.ndarray
    rate_per_hour: np.ndarray
    seconds: float
    diagnostics: dict[str, Any] | None = None
    floored_probabilities: int = 0
    worlds: WorldCoverage | None = None
    #: the best single multiple of the method's rates for the test window, and the log
    #: score there (:func:`~bayesrate.studies.level.level_oracle`: knows the level, not
    #: which pages change)
    level_factor: float = np.nan
    level_log_score: float = np.nan

    def scores(self) -> dict[str, float]:
        return {
            "log_score": self.log_score,
            "brier": self.brier,
            "coverage90": self.coverage90,
            "rate_log_rmse": self.rate_log_rmse,
        }

    def summary(self) -> dict[str, Any]:
        """:meth:`scores`, the seconds, and for a fitted model its gates beside them
        (``converged``, ``r_hat_max``, ``ess_bulk_min``, ``divergences``): a score of a
        fit that missed its gates is read as such."""
        out: dict[str, Any] = {**self.scores(), "seconds": round(self.seconds, 2)}
        if self.diagnostics:
            out.update({key: self.diagnostics.get(key) for key in FIT_GATES})
        return out


@dataclass
class ForecastResult:
    """What :func:`run` measured.

    Attributes
    ----------
    split, horizon_days, crawl_every_hours
        The design (``split`` as an ISO timestamp).
    pages
        Page labels scored (alive at the split, with at least one training interval and one
        test interval).
    detected
        Per page, the number of test intervals with a detected change (``k``).
    test_intervals
        Per page, the number of test intervals.
    changed
        Per page, whether it changed at all in the test window (exact history).
    true_rate
        Per page, exact changes per hour in the test window.
    methods
        Per method, a :class:`MethodForecast`.
    """

    source: str
    split: str
    horizon_days: float
    crawl_every_hours: float
    pages: pd.Index
    domain: np.ndarray
    detected: np.ndarray
    test_intervals: np.ndarray
    changed: np.ndarray
    true_rate: np.ndarray
    methods: dict[str, MethodForecast]
    training: dict[str, Any]
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    reference: MethodForecast | None = None
    #: (rate per hour, log score) of :func:`~bayesrate.studies.level.level_oracle` with one
    #: rate for every page
    constant_rate_oracle: tuple[float, float] | None = None

    #: the central band of the randomised PIT that coverage90 counts (the figures draw it)
    pit_band = PIT_BAND

    @property
    def n_pages(self) -> int:
        return len(self.pages)

    def to_json(self) -> dict[str, Any]:
        """The issue's JSON shape: split, horizon, schedule, pages, and per method its scores,
        seconds and (fitted models) convergence gates (:meth:`MethodForecast.summary`)."""
        return {
            "split": self.split,
            "horizon_days": self.horizon_days,
            "crawl_every_hours": self.crawl_every_hours,
            "pages": self.n_pages,
            "methods": {name: m.summary() for name, m in self.methods.items()},
        }

    def table(self) -> pd.DataFrame:
        """Scores per method (rows), with fit seconds and convergence where there is a fit."""
        rows = []
        for name, m in self.methods.items():
            d = m.diagnostics or {}
            rows.append(
                {
                    "method": name,
                    **m.scores(),
                    "worlds_cov90_q05": m.worlds.q05 if m.worlds else np.nan,
                    "worlds_cov90_q95": m.worlds.q95 if m.worlds else np.nan,
                    "level_factor": m.level_factor,
                    "level_log_score": m.level_log_score,
                    "seconds": m.seconds,
                    "r_hat_max": d.get("r_hat_max", np.nan),
                    "ess_bulk_min": d.get("ess_bulk_min", np.nan),
                    "divergences": d.get("divergences", np.nan),
                }
            )
        return pd.DataFrame(rows).set_index("method")

    @property
    def json(self) -> dict[str, Any]:
        """What ``--json`` prints: :meth:`to_json`."""
        return self.to_json()

    @property
    def text(self) -> str:
        """The score table for the terminal."""
        lines = [
            f"{self.source}: {self.n_pages:,} pages, crawl every {self.crawl_every_hours:g} h, "
            f"split {self.split}, horizon {self.horizon_days:g} days",
            self.table().to_string(float_format=lambda v: f"{v:.4f}"),
        ]
        if self.reference is not None:
            ref = self.reference
            lines.append(
                f"hindsight reference (knows each page's realised test rate): log score "
                f"{ref.log_score:.4f}, Brier {ref.brier:.4f}, coverage90 {ref.coverage90:.3f}"
            )
        return "\n".join(lines)

    def pages_table(self) -> pd.DataFrame:
        """Per page and method: P(observed count), PIT, P(change), predicted rate per day."""
        frame = pd.DataFrame(
            {
                "page": self.pages.to_numpy(),
                "domain": self.domain,
                "test_intervals": self.test_intervals,
                "detected": self.detected,
                "changed": self.changed.astype(int),
                "true_rate_per_day": self.true_rate * HOURS_PER_DAY,
            }
        )
        for name, m in self.methods.items():
            frame[f"{name}_p_detected"] = m.prob_at_k
            frame[f"{name}_pit"] = m.pit
            frame[f"{name}_p_change"] = m.prob_change
            frame[f"{name}_rate_per_day"] = m.rate_per_hour * HOURS_PER_DAY
        return frame

    def study_result(self) -> StudyResult:
        """Tables (``scores``, ``pages``), ``forecast.json`` and the three figures."""
        from bayesrate import plots

        scores = self.table().reset_index()
        return StudyResult(
            name="forecast",
            tables={"scores": scores, "pages": self.pages_table()},
            summary=self.details(),
            figures={
                "calibration": plots.forecast_calibration(self),
                "pit": plots.forecast_pit(self),
                "log-score": plots.forecast_log_scores(self),
            },
            text=self.text,
            summary_file="forecast.json",
        )

    def save(self, directory: str | Path) -> list[Path]:
        """Write the tables, ``forecast.json`` and the figures (atomically)."""
        return self.study_result().save(directory)

    def details(self) -> dict[str, Any]:
        """Everything in :meth:`to_json` plus design, training data, diagnostics and notes."""
        out = self.to_json()
        out["source"] = self.source
        out["training"] = self.training
        out["test"] = {
            "intervals": int(self.test_intervals.sum()),
            "pages_changed": int(self.changed.sum()),
            "pages_with_detection": int((self.detected > 0).sum()),
        }
        for name, m in self.methods.items():
            out["methods"][name] |= {
                "seconds": round(m.seconds, 2),
                "floored_probabilities": m.floored_probabilities,
                "expected_detections": float(m.expected_count.sum()),
                "level_oracle": {"factor": m.level_factor, "log_score": m.level_log_score},
                **({"coverage90_worlds": m.worlds.to_json()} if m.worlds else {}),
                **({"diagnostics": m.diagnostics} if m.diagnostics else {}),
            }
        if self.reference is not None:
            out["hindsight_reference"] = {
                **self.reference.scores(),
                "what": "plug-in Binomial with each page's realised rate over its test intervals "
                "(knows the future: how much any constant-rate forecast loses to the window's "
                "own rate; not a bound, since changes cluster within the window)",
            }
        out["test"]["detections"] = int(self.detected.sum())
        if self.constant_rate_oracle is not None:
            rate, log_score = self.constant_rate_oracle
            out["constant_rate_oracle"] = {
                "rate_per_day": rate * HOURS_PER_DAY,
                "log_score": log_score,
                "what": "one rate for every page, the best for the test window (knows its "
                "level): what the window's level alone scores, with no page told apart",
            }
        out["level_oracle"] = (
            "per method, its rates times the single factor that scores best on the test "
            "window (knows the window's level, not which pages change), and that log score: "
            "a method that loses only by its level scores here like the others"
        )
        out["coverage90_worlds"] = (
            "per method, coverage90 of worlds drawn from its own predictive (one posterior "
            "draw per world, shared by every page, then each page's test count): its 5% and "
            f"95% quantiles, the share of worlds in {list(COVERAGE_TARGET)}, and where the "
            "observed coverage90 falls among them"
        )
        out["seconds"] = {k: round(v, 2) for k, v in self.seconds.items()}
        out["notes"] = list(self.notes)
        return out


# --------------------------------------------------------------------------- design
@dataclass(frozen=True, eq=False)
class _Design:
    """Training observations and the test intervals of the scored pages."""

    train: Observations
    split: float
    history_page: np.ndarray  # history position of each scored page
    interval_page: np.ndarray  # test intervals: page position, start, end, exact changes
    interval_start: np.ndarray
    interval_end: np.ndarray
    interval_truth: np.ndarray
    window_hours: np.ndarray  # per page: (split, split + window] is its test window
    window_changes: np.ndarray
    notes: tuple[str, ...]

    @property
    def n_pages(self) -> int:
        return self.train.n_pages

    @property
    def detected(self) -> np.ndarray:
        hit = self.interval_truth > 0
        return np.bincount(self.interval_page[hit], minlength=self.n_pages)


def design(
    history: ChangeHistory,
    *,
    crawl_every_hours: float,
    split: float,
    horizon_hours: float,
    seed: int | str,
    max_pages: int | None = None,
    phase_step_hours: float = 1.0,
) -> _Design:
    """Crawl the history and cut it at the split (see the module docstring).

    Each page is visited at its own phase, drawn on a grid of ``phase_step_hours`` (default
    whole hours: a daily crawl visits each page at a page-specific hour).
    """
    stop = split + horizon_hours
    if not history.start < split < stop <= history.end:
        raise ObservationError(
            f"need start < split < split + horizon <= end of the history "
            f"({_iso(history.start)} .. {_iso(history.end)}); got split {_iso(split)}, "
            f"horizon {horizon_hours / HOURS_PER_DAY:g} days",
            field="split",
        )
    schedule = FixedInterval(
        crawl_every_hours, phase_step_hours=min(phase_step_hours, crawl_every_hours)
    )
    crawled = crawl(history, schedule, f"{seed}-crawl", end=stop)
    obs = crawled.observations
    pages_all = np.arange(obs.n_pages)
    n_train = (
        segment_searchsorted(obs.time, obs.offsets, pages_all, split, side="right")
        - obs.offsets[:-1]
    )
    n_visits = obs.visits_per_page
    life = history.lifetime_at(split)[crawled.history_page]
    eligible = (life >= 0) & (n_train >= 2) & (n_visits > n_train)
    notes = [
        f"{int((history.alive_at(split)).sum())} pages alive at the split; "
        f"{int(eligible.sum())} have a training interval and a test interval "
        f"(crawl {schedule.describe()})"
    ]
    chosen = np.flatnonzero(eligible)
    if max_pages is not None and len(chosen) > max_pages:
        chosen = np.sort(rng_from(f"{seed}-pages").choice(chosen, max_pages, replace=False))
        notes.append(f"scored a random subset of {max_pages} of them")
    if len(chosen) == 0:
        raise ObservationError("no page is alive at the split with training and test data")
    starts = obs.offsets[chosen]
    train_idx = concat_ranges(starts, n_train[chosen])
    train_counts = n_train[chosen]
    train = Observations(
        pages=obs.pages.iloc[chosen].copy(),
        offsets=np.concatenate([[0], np.cumsum(train_counts)]).astype(np.int64),
        time=obs.time[train_idx],
        changed=obs.changed[train_idx],
        time_kind="datetime",
        notes=obs.notes,
        source=f"{obs.source}, up to the split",
    )
    n_test = (n_visits - n_train)[chosen]
    end_idx = concat_ranges(starts + n_train[chosen], n_test)
    interval_page = np.repeat(np.arange(len(chosen)), n_test)
    hp = crawled.history_page[chosen]
    window_end = np.minimum(history.life_end[life[chosen]], stop)
    window_changes = history.count_changes(hp, np.full(len(hp), split), window_end)
    return _Design(
        train=train,
        split=split,
        history_page=hp,
        interval_page=interval_page,
        interval_start=obs.time[end_idx - 1],
        interval_end=obs.time[end_idx],
        interval_truth=crawled.true_changes[end_idx],
        window_hours=window_end - split,
        window_changes=window_changes,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- predictives
def closing_epoch_groups(d: _Design, model) -> _Groups:
    """Test intervals grouped as a dynamic model's predictive needs them: by (page, column
    of the closing visit's epoch on its grid, length)."""
    return model.forecast_groups(d, length_groups(d))


def count_predictive(
    prob: np.ndarray, group_page: np.ndarray, group_n: np.ndarray, k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``P(K = k)`` and ``P(K < k)`` per page for a sum of Binomials, mixed over draws.

    Parameters
    ----------
    prob
        ``(draws, groups)`` change probability of one interval of each group.
    group_page, group_n
        Page position and number of intervals of each group (sorted by page).
    k
        Observed count per page.

    Notes
    -----
    Exact: per draw the count of a page is the convolution of its groups' Binomial
    distributions, truncated at ``k`` (:func:`count_pmf`).
    """
    return pmf_at(count_pmf(prob, group_page, group_n, k), k)


@dataclass(frozen=True)
class WorldCoverage:
    """coverage90 of worlds drawn from a method's own predictive (:func:`world_coverage`).

    Attributes
    ----------
    coverage
        One coverage90 per world.
    observed
        The coverage90 measured on the real test window.
    """

    coverage: np.ndarray
    observed: float

    @property
    def q05(self) -> float:
        return float(np.quantile(self.coverage, 0.05))

    @property
    def q95(self) -> float:
        return float(np.quantile(self.coverage, 0.95))

    @property
    def share_in_target(self) -> float:
        """Share of worlds whose coverage90 lies in :data:`COVERAGE_TARGET`."""
        lo, hi = COVERAGE_TARGET
        return float(np.mean((self.coverage >= lo) & (self.coverage <= hi)))

    @property
    def observed_quantile(self) -> float:
        """Share of worlds whose coverage90 is at most the observed one (mid-rank for ties)."""
        below = np.mean(self.coverage < self.observed)
        return float(below + 0.5 * np.mean(self.coverage == self.observed))

    def to_json(self) -> dict[str, float | int]:
        return {
            "worlds": len(self.coverage),
            "mean": float(self.coverage.mean()),
            "q05": self.q05,
            "q95": self.q95,
            "share_in_target": self.share_in_target,
            "observed_quantile": self.observed_quantile,
        }


def draw_worlds(
    prob: np.ndarray,
    group_page: np.ndarray,
    group_n: np.ndarray,
    n_pages: int,
    n_worlds: int,
    seed: int | str,
) -> Worlds:
    """Worlds drawn from a method's own predictive: each takes one posterior draw (its
    shocks, walks and population parameters shared by every page), then each page's test
    count from that draw's Binomials.

    Parameters
    ----------
    prob, group_page, group_n
        As in :func:`count_predictive`.
    n_pages
        Number of pages (a page without groups counts 0).
    n_worlds
        Number of worlds.
    seed
        Seeds the worlds and their PIT noise.
    """
    prob = np.atleast_2d(prob)
    rng = rng_from(f"{seed}-worlds")
    draw = rng.integers(prob.shape[0], size=n_worlds)
    counts = rng.binomial(group_n[None, :], prob[draw])  # (worlds, groups)
    k = np.zeros((n_worlds, n_pages), dtype=np.int64)
    np.add.at(k.T, group_page, counts.T)
    return Worlds(counts=k, noise=rng.random((n_worlds, n_pages)))


def world_coverage(
    worlds: Worlds,
    at: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    observed: float,
) -> WorldCoverage:
    """How far from 0.90 coverage90 falls when the method's own predictive is the truth.

    Each world's coverage90 is scored against the mixed predictive: ``at(counts)`` gives
    ``P(K = k)`` and ``P(K < k)`` of any ``(worlds, pages)`` counts (e.g.
    :func:`pmf_at` of :func:`count_pmf`'s buckets with caps covering the worlds' counts).
    Pages that share a draw-level effect (a shock) make the worlds' coverage spread far
    wider than the Binomial spread of independent pages: one held-out window is one draw
    of it.
    """
    prob_k, cdf_below = at(worlds.counts)
    inside = in_pit_band(cdf_below + worlds.noise * prob_k)
    return WorldCoverage(coverage=inside.mean(axis=1), observed=float(observed))


class _Binomials:
    """A :class:`_Prediction` on its test groups, as :func:`score` asks of a prediction:
    per draw the count of a page is a sum of Binomials."""

    def __init__(self, pred: _Prediction, groups: _Groups, n_pages: int):
        self.pred, self.groups, self.n_pages = pred, groups, n_pages
        self.prob = pred.group_probability()

    def draw_worlds(self, n_worlds: int, seed: int | str) -> Worlds:
        g = self.groups
        return draw_worlds(self.prob, g.page, g.count, self.n_pages, n_worlds, seed)

    def count_distribution(self, k: np.ndarray, world_counts: np.ndarray | None = None):
        """:func:`count_pmf`'s buckets up to ``k`` and every world's count, the expected
        count and the probability of a change in the window, per page."""
        g = self.groups
        expected = np.bincount(
            g.page, weights=g.count * self.prob.mean(axis=0), minlength=self.n_pages
        )
        cap = k if world_counts is None else np.maximum(k, world_counts.max(axis=0))
        buckets = count_pmf(self.prob, g.page, g.count, cap)
        return buckets, expected, self.pred.window_probability().mean(axis=0)


def point_prediction(name: str, d: _Design, groups: _Groups) -> _Prediction:
    """Plug-in prediction of a batch estimator, floored at RATE_FLOOR_CHANGES / exposure."""
    from bayesrate.estimators import batch

    stats = d.train.interval_stats
    estimate = batch.mle(stats, interval=None) if name == "mle" else batch.BATCH[name](stats)
    rate = np.maximum(estimate.rate, RATE_FLOOR_CHANGES / stats.exposure)
    return _Prediction(
        group_lambda=(rate[groups.page] * groups.key)[None, :],
        window_lambda=(rate * d.window_hours)[None, :],
        rate_per_hour=rate,
    )


def pit_noise_of(d: _Design, seed: int | str) -> np.ndarray:
    """The uniform noise ``V`` of each page's randomised PIT value (common to all methods)."""
    return rng_from(f"{seed}-pit").random(d.n_pages)


def hindsight_prediction(d: _Design, groups: _Groups) -> _Prediction:
    """The realised rate of each page over its test intervals: a reference that knows the
    future (no floor: a page without a change in its test intervals has no detection)."""
    span = np.bincount(
        d.interval_page, weights=d.interval_end - d.interval_start, minlength=d.n_pages
    )
    rate = np.bincount(d.interval_page, weights=d.interval_truth, minlength=d.n_pages) / span
    return _Prediction(
        group_lambda=(rate[groups.page] * groups.key)[None, :],
        window_lambda=(rate * d.window_hours)[None, :],
        rate_per_hour=rate,
    )


def model_prediction(
    model, d: _Design, groups: _Groups, n_draws: int, seed: int | str, walks: str = "summed"
) -> _Prediction | WalkForecast:
    """Posterior predictive integrated rates of a fitted model, on ``n_draws`` draws: the
    model's own :meth:`~bayesrate.models.base.RateModel.forecast_predictive`.

    A dynamic model's page walks after the last fitted epoch are summed out on its grid
    (``walks="summed"``, :mod:`bayesrate.models.walk_forecast`) or sampled, one path per
    draw (``"sampled"``: integrated rates per draw, as :mod:`bayesrate.studies.level`
    needs; for a grid fit the same law with Monte Carlo error in the tails, for a Laplace
    fit its states start from the Normal approximation of its ``log_rate`` draws instead
    of the grid's filtered distribution).
    """
    from bayesrate.draws import stack_draws

    _checked_walks(walks)
    n_total = stack_draws(model.idata_["posterior"]["log_rate"], DIM_PAGE).shape[0]
    keep = np.sort(rng_from(f"{seed}-draws").permutation(n_total)[:n_draws])
    return model.forecast_predictive(d, groups, keep, seed, walks)


def score(
    name: str,
    pred: _Prediction | WalkForecast,
    groups: _Groups,
    d: _Design,
    pit_noise: np.ndarray,
    seconds: float,
    diagnostics: dict[str, Any] | None = None,
    worlds: int = 0,
    seed: int | str = "bayesrate-forecast",
) -> MethodForecast:
    """Scores of one method's prediction (see the module docstring): Binomials per draw
    (:class:`_Prediction`) or a dynamic model's walks summed out
    (:class:`~bayesrate.models.walk_forecast.WalkForecast`); with ``worlds``, the spread
    of coverage90 over that many worlds drawn from the prediction (:func:`world_coverage`)."""
    k = d.detected
    source = _Binomials(pred, groups, d.n_pages) if isinstance(pred, _Prediction) else pred
    drawn = source.draw_worlds(worlds, f"{seed}-{name}") if worlds else None
    buckets, expected, prob_change = source.count_distribution(  # once for both
        k, None if drawn is None else drawn.counts
    )
    prob_k, cdf_below = pmf_at(buckets, k)
    return _scored(
        name,
        d,
        prob_k,
        cdf_below,
        pit_noise,
        prob_change,
        pred.rate_per_hour,
        expected,
        seconds,
        diagnostics,
        None if drawn is None else (drawn, lambda counts: pmf_at(buckets, counts)),
    )


def _scored(
    name: str,
    d: _Design,
    prob_k: np.ndarray,
    cdf_below: np.ndarray,
    pit_noise: np.ndarray,
    prob_change: np.ndarray,
    rate_per_hour: np.ndarray,
    expected: np.ndarray,
    seconds: float,
    diagnostics: dict[str, Any] | None,
    worlds: tuple[Worlds, Callable] | None,
) -> MethodForecast:
    """The scores from a method's ``P(K = k)``, ``P(K < k)`` per page and its window change
    probabilities; ``worlds``: drawn worlds and the same ``(P(K = k), P(K < k))`` of any
    counts."""
    floored = int((prob_k < MIN_PROBABILITY).sum())
    log_score = float(np.mean(np.log(np.maximum(prob_k, MIN_PROBABILITY))))
    pit = cdf_below + pit_noise * prob_k
    coverage = float(np.mean(in_pit_band(pit)))
    changed = d.window_changes > 0
    brier = float(np.mean((prob_change - changed) ** 2))
    true_rate = d.window_changes / d.window_hours
    ok = changed & (rate_per_hour > 0)
    rmse = float(np.sqrt(np.mean((np.log(rate_per_hour[ok]) - np.log(true_rate[ok])) ** 2)))
    own = None if worlds is None else world_coverage(*worlds, coverage)
    return MethodForecast(
        name=name,
        log_score=log_score,
        brier=brier,
        coverage90=coverage,
        rate_log_rmse=rmse,
        prob_at_k=prob_k,
        cdf_below_k=cdf_below,
        pit=pit,
        prob_change=prob_change,
        expected_count=expected,
        rate_per_hour=rate_per_hour,
        seconds=seconds,
        diagnostics=diagnostics,
        floored_probabilities=floored,
        worlds=own,
    )


def burst_forecast(
    d: _Design,
    pit_noise: np.ndarray,
    worlds: int,
    seed: int | str,
    progress: Progress = silent,
    *,
    mixture: bool = False,
) -> MethodForecast:
    """The two-state MMPP (:mod:`bayesrate.estimators.mmpp`) fitted to the training visits
    and its exact predictive of each page's test detections: the quiet rate integrated over
    the page's posterior, the hidden state carried over from its last training visit
    (``mixture``: a fitted share of the pages steady, ``mmpp_mixture``)."""
    from bayesrate.estimators import mmpp

    name = "mmpp_mixture" if mixture else "mmpp"
    t0 = time.perf_counter()
    train = mmpp.VisitRuns.from_observations(d.train)
    fitted = mmpp.fit(train, mixture=mixture)
    diag = {
        "method": "maximum marginal likelihood (Nelder-Mead)",
        "converged": fitted.converged,
        "evaluations": fitted.evaluations,
        "train_loglik": fitted.loglik,
        "steady_share": fitted.steady_share,
        **fitted.params.as_dict(),
    }
    progress(
        f"  {name}: fitted in {time.perf_counter() - t0:.0f} s ({fitted.evaluations} "
        f"evaluations, {'converged' if fitted.converged else 'NOT converged'}): ratio "
        f"{fitted.params.ratio:.3g}, bursts {fitted.params.burst_days:.3g} d, quiet spells "
        f"{fitted.params.quiet_days:.3g} d, steady share {fitted.steady_share:.3g}"
    )
    offsets = np.searchsorted(d.interval_page, np.arange(d.n_pages + 1)).astype(np.int64)
    last_visit = d.train.time[d.train.offsets[1:] - 1]
    k = d.detected
    rng = rng_from(f"{seed}-worlds")
    pred = mmpp.window_predictive(
        fitted,
        train,
        offsets,
        d.interval_end - d.interval_start,
        d.split - last_visit,
        d.window_hours,
        k,
    )
    prob_k, cdf_below = pred.at(k)
    expected = np.array([pmf @ np.arange(len(pmf)) for pmf in pred.pmf])
    drawn = None
    if worlds:
        drawn = (Worlds(pred.sample(worlds, rng), rng.random((worlds, d.n_pages))), pred.at)
    return _scored(
        name,
        d,
        prob_k,
        cdf_below,
        pit_noise,
        pred.prob_change,
        pred.mean_rate,
        expected,
        time.perf_counter() - t0,
        diag,
        drawn,
    )


# --------------------------------------------------------------------------- entry point
def run(
    *,
    seed: int | str = "bayesrate-forecast",
    fast: bool = False,
    progress: Progress = silent,
    history: ChangeHistory | str | Path | None = None,
    dataset: str | None = None,
    crawl_every: float = 24.0,
    split: str | pd.Timestamp | float | None = None,
    horizon_days: float = DEFAULT_HORIZON_DAYS,
    methods: Sequence[str] | str = DEFAULT_METHODS,
    max_pages: int | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    predictive_draws: int = 500,
    worlds: int = WORLDS,
    model_config: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
    walks: str = "summed",
) -> ForecastResult:
    """Run the forecast study on a change history.

    Parameters
    ----------
    seed
        Seeds the crawl phases, the page subset, the draw subset and the PIT noise.
    fast
        Small run for smoke tests: :data:`FAST` (300 pages, short chains) unless given.
    progress
        Callback for one-line progress messages.
    history, dataset
        The exact (or approximate) change history: a :class:`ChangeHistory` or a file
        (``history``), or an embedded dataset name (``dataset``); exactly one.
    crawl_every
        The crawl interval in hours (training and test).
    split
        Training/test split (tz-aware timestamp or hours since the epoch); default the end
        of the history minus the horizon.
    horizon_days
        Length of the test window.
    methods
        Any of :data:`METHODS` or a registered model (:func:`bayesrate.models.register`;
        a sequence, or comma-separated text); default
        :data:`DEFAULT_METHODS`.
    max_pages
        Score a random subset of this many eligible pages.
    draws, tune, chains
        NUTS settings of the model fits (default :data:`STUDY_SAMPLER`).
    predictive_draws
        Posterior draws used for the predictive (a random subset of the fit's draws).
    worlds
        Worlds drawn from each method's predictive to show how far from 0.90 its coverage90
        falls when it is the truth (:func:`world_coverage`; 0: none).
    model_config
        Per model method, overrides of its ``model_config`` (e.g. ``{"dynamic":
        {"epoch_days": 365}}``), or ``"METHOD=JSON"`` texts (the CLI's
        ``--model-config``); recorded in each method's diagnostics.
    walks
        How the dynamic models' predictive treats each page's walk after the last fitted
        epoch: ``"summed"`` out on the grid (exact in the walk) or ``"sampled"``, one path
        per posterior draw (:func:`model_prediction`).
    """
    if not isinstance(history, ChangeHistory):
        from bayesrate.io.history import load_history

        history = load_history(dataset=dataset, path=history)
    elif dataset is not None:
        raise ObservationError("give a history or a dataset, not both", field="dataset")
    methods = _checked_methods(methods, horizon_days)
    _checked_walks(walks)
    configs = _method_configs(model_config, methods)
    crawl_every_hours = float(crawl_every)
    if fast:
        max_pages = FAST["max_pages"] if max_pages is None else max_pages
        predictive_draws = min(predictive_draws, FAST["predictive_draws"])
    sampler = study_sampler(draws, tune, chains, seed, fast)
    horizon = horizon_days * HOURS_PER_DAY
    split_hours = history.end - horizon if split is None else hours_of(split, "split")
    t_start = time.perf_counter()
    seconds: dict[str, float] = {}
    d = design(
        history,
        crawl_every_hours=crawl_every_hours,
        split=split_hours,
        horizon_hours=horizon,
        seed=seed,
        max_pages=max_pages,
    )
    seconds["crawl_and_split"] = time.perf_counter() - t_start
    progress(
        f"forecast: {d.n_pages:,} pages, {d.train.n_visits:,} training visits, "
        f"{len(d.interval_start):,} test intervals ({seconds['crawl_and_split']:.1f} s)"
    )
    pit_noise = pit_noise_of(d, seed)
    by_length = length_groups(d)
    results: dict[str, MethodForecast] = {}
    for name in methods:
        t0 = time.perf_counter()
        if name in BURST_METHODS:
            results[name] = burst_forecast(
                d, pit_noise, worlds, f"{seed}-{name}", progress, mixture=name == "mmpp_mixture"
            )
            seconds[name] = results[name].seconds
            _report(progress, results[name])
            continue
        pred, groups, diag = method_prediction(
            name,
            d,
            by_length,
            sampler,
            predictive_draws,
            f"{seed}-{name}",
            progress,
            configs.get(name),
            walks,
        )
        results[name] = score(name, pred, groups, d, pit_noise, 0.0, diag, worlds, seed)
        seconds[name] = results[name].seconds = time.perf_counter() - t0
        _report(progress, results[name])
    from bayesrate.studies.level import level_oracle

    tau = by_length.key
    for m in results.values():
        m.level_factor, m.level_log_score = level_oracle(
            m.rate_per_hour, by_length.page, by_length.count, tau, d.detected
        )
    constant, constant_score = level_oracle(
        np.ones(d.n_pages), by_length.page, by_length.count, tau, d.detected
    )
    progress(
        "level oracle (each method's rates times the best single factor for the test "
        "window): "
        + ", ".join(
            f"{m.name} x{m.level_factor:.3f} {m.level_log_score:.4f}" for m in results.values()
        )
        + f"; one rate for every page {constant_score:.4f}"
    )
    reference = score("hindsight", hindsight_prediction(d, by_length), by_length, d, pit_noise, 0.0)
    seconds["total"] = time.perf_counter() - t_start
    stats = d.train.interval_stats
    return ForecastResult(
        source=history.source,
        split=_iso(split_hours),
        horizon_days=float(horizon_days),
        crawl_every_hours=float(crawl_every_hours),
        pages=d.train.pages.index,
        domain=d.train.pages["domain"].to_numpy(),
        detected=d.detected,
        test_intervals=np.bincount(d.interval_page, minlength=d.n_pages),
        changed=d.window_changes > 0,
        true_rate=d.window_changes / d.window_hours,
        methods=results,
        training={
            "visits": d.train.n_visits,
            "intervals": d.train.n_intervals,
            "detected_changes": d.train.n_changes,
            "pages_never_changed": int((stats.n_changes == 0).sum()),
            "rate_floor": f"{RATE_FLOOR_CHANGES} change over each page's training exposure",
        },
        notes=(*d.notes, *history.notes),
        seconds=seconds,
        reference=reference,
        constant_rate_oracle=(constant, constant_score),
    )


def _method_configs(
    given: Mapping[str, Mapping[str, Any]] | Sequence[str] | None, methods: list[str]
) -> dict[str, dict[str, Any]]:
    """``{method: model_config overrides}`` for the model methods of this run
    (:func:`bayesrate.models.parse_model_configs`)."""
    from bayesrate.models import parse_model_configs

    return parse_model_configs(
        given,
        [m for m in methods if m not in (*POINT_METHODS, *BURST_METHODS)],
        what="model method of this run",
    )


def _checked_walks(walks: str) -> None:
    """``ObservationError`` unless ``walks`` is one of :data:`WALKS`."""
    if walks not in WALKS:
        raise ObservationError(f"walks must be one of {WALKS}, got {walks!r}", field="walks")


def _checked_methods(methods: Sequence[str] | str, horizon_days: float) -> list[str]:
    """The methods as a list (from a sequence or comma-separated text), all known."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    from bayesrate.models import RESEARCH_HINT, model_names

    known = (*POINT_METHODS, *model_names(), *BURST_METHODS)
    unknown = [m for m in methods if m not in known]
    if unknown or not methods:
        raise ObservationError(
            f"unknown method(s) {unknown}; choose from {list(known)} ({RESEARCH_HINT})",
            field="methods",
        )
    if not (np.isfinite(horizon_days) and horizon_days > 0):
        raise ObservationError("horizon must be > 0 days", field="horizon_days")
    return list(methods)


def study_sampler(
    draws: int | None, tune: int | None, chains: int | None, seed: int | str, fast: bool
) -> dict[str, int | str]:
    """NUTS settings: the given ones, else :data:`FAST` (fast runs) or :data:`STUDY_SAMPLER`."""
    defaults = FAST if fast else STUDY_SAMPLER
    given = {"draws": draws, "tune": tune, "chains": chains}
    sampler: dict[str, int | str] = {k: v if v else defaults[k] for k, v in given.items()}
    sampler["seed"] = str(seed)
    return sampler


def method_prediction(
    name: str,
    d: _Design,
    by_length: _Groups,
    sampler: dict[str, int | str],
    predictive_draws: int,
    seed: str,
    progress: Progress,
    model_config: dict[str, Any] | None = None,
    walks: str = "summed",
) -> tuple[_Prediction | WalkForecast, _Groups, dict | None]:
    """One method's predictive for the test intervals, its groups and its fit diagnostics
    (``walks``: see :func:`model_prediction`)."""
    if name in POINT_METHODS:
        return point_prediction(name, d, by_length), by_length, None
    from bayesrate.quick_fit import describe_fit, fit_model

    t0 = time.perf_counter()
    model = fit_model(name, d.train, sampler, model_config, progress=progress)
    diag = model.diagnostics_.to_dict()
    if model_config:
        diag["model_config_overrides"] = dict(model_config)
    diag.update(model.forecast_diagnostics())
    progress(f"  {name}: fitted in {time.perf_counter() - t0:.0f} s; {describe_fit(diag)}")
    groups = model.forecast_groups(d, by_length)
    return model_prediction(model, d, groups, predictive_draws, seed, walks), groups, diag


def _report(progress: Progress, m: MethodForecast) -> None:
    progress(
        f"  {m.name}: log score {m.log_score:.4f}, Brier {m.brier:.4f}, coverage90 "
        f"{m.coverage90:.3f}{_worlds_text(m.worlds)}, rate log-RMSE "
        f"{m.rate_log_rmse:.3f} ({m.seconds:.1f} s)"
    )


def _worlds_text(w: WorldCoverage | None) -> str:
    if w is None:
        return ""
    return (
        f" (its own worlds {w.q05:.3f}-{w.q95:.3f}, {w.share_in_target:.0%} in "
        f"{COVERAGE_TARGET[0]}-{COVERAGE_TARGET[1]}; observed at their {w.observed_quantile:.0%})"
    )


def _iso(hours: float) -> str:
    return to_timestamp(hours).isoformat()


__all__ = [
    "DEFAULT_METHODS",
    "DESCRIPTION",
    "METHODS",
    "ForecastResult",
    "MethodForecast",
    "WorldCoverage",
    "Worlds",
    "count_pmf",
    "count_predictive",
    "design",
    "draw_worlds",
    "in_pit_band",
    "length_groups",
    "method_prediction",
    "pit_noise_of",
    "pmf_at",
    "run",
    "study_sampler",
    "world_coverage",
]
