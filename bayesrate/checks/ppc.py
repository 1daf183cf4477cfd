"""Posterior predictive checks that replicate the *censored observation process*.

Latent changes are never compared with anything: the model's predictive draws
(:meth:`bayesrate.models.base.RateModel.predict`, i.e. ``pm.sample_posterior_predictive``)
are what the crawler would have *detected* on the same visit times, and summaries of the
replicates are compared with the observed detections:

- ``mean_changes`` / ``sd_changes`` / ``sd_log_changes`` — detected changes per page; the
  SD on the log scale measures dispersion between pages (what a hierarchy on log-rates
  models), the raw SD is dominated by the few busiest pages;
- ``frac_never_changed`` / ``frac_changed_every_visit``;
- ``hour_of_day_chi2`` / ``day_of_week_chi2`` — detections by local hour of day and day of
  week of the detecting visit, as a chi-square discrepancy against each draw's expected
  counts (the predictive's ``detection_probability``);
- ``gap_cv`` — the coefficient of variation of the gaps between detected changes (pages
  with at least a few detections), the numeric form of the case study's censored
  exponential Q-Q check: periodic pages give too regular gaps (low CV), bursty pages too
  irregular ones (high CV);
- ``top_hour_of_week_share`` — scheduled jobs: per page with at least a few detections, the
  share of its detections in its busiest hour-of-week cell (local clock) of the detecting
  visit, averaged over those pages. A page updated by a daily or weekly job at a fixed
  local time concentrates its detections in a few cells; a model without per-page
  periodicity spreads them by exposure. Only too high is a misfit. The per-page values
  (top cell, observed and replicated share, a per-page p-value) are in
  :attr:`PPCResult.periodic_pages`.

Two replications (:class:`ModelChecks`):

- **conditional** — each page replicated from its own posterior draws
  (``predict(..., page_rates="posterior")``). Pages with hundreds of intervals reproduce
  their own counts almost by construction, so this checks the observation model
  (hour-of-day and day-of-week shapes, gaps), not the population;
- **mixed** — every page replicated as a *new* page of its domain
  (``predict(..., page_rates="population")``: a fresh rate from the fitted population per
  draw; the censored model's fixed prior), on the same visit times. It judges the
  population: the distribution of rates a new page of a domain is given, which is what
  prior export ships.

Bayesian p-value: ``p = P(T(y_rep) >= T(y))`` (ties count half). A two-sided check
*fails* when ``p < alpha/2`` or ``p > 1 - alpha/2``; the chi-square discrepancies are
realized discrepancies (each draw's own expected counts) and fail only when too large,
``p < alpha``.

The predictive draws are counts per interval group (a page's intervals of one length and
start within the local week, :func:`bayesrate.models.groups.visit_patterns`), which fixes
the bucket of the detecting visit. Only the gap check needs visit sequences: on every page
with at least :data:`MIN_DETECTIONS_FOR_GAPS` detections (a random subsample of
:data:`GAP_PAGES` of them when there are more), each group's replicated detections are
placed on a uniformly random subset of its intervals, which is their exact conditional
distribution (the intervals of a group are exchangeable). Below the cap the observed gap
CV is the data's own, the same for every model and seed; on ``ota-contrib``, 150-page
subsamples moved it between 1.53 and 1.78.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numba
import numpy as np
import pandas as pd

from bayesrate.constants import DAY_NAMES, DIM_GROUP, N_HOURS_OF_DAY
from bayesrate.draws import stack_draws
from bayesrate.models.base import DETECTION_PROBABILITY

if TYPE_CHECKING:
    from bayesrate.models.groups import VisitPatterns
    from bayesrate.observations import Observations

N_DAYS = len(DAY_NAMES)
N_HOURS_OF_WEEK = N_DAYS * N_HOURS_OF_DAY
#: pages with fewer detections are left out of the gap and periodicity checks
MIN_DETECTIONS_FOR_GAPS = 5
#: at most this many pages (a random subsample above it) in the gap check
GAP_PAGES = 1000
#: replicated draws per block in the periodicity check (bounds a draws x pages x 168 array)
PERIODICITY_DRAW_BLOCK = 16


@dataclass(frozen=True)
class PPCStatistic:
    """One test statistic: observed value, replicated values, Bayesian p-value."""

    name: str
    observed: float | np.ndarray
    replicated: np.ndarray
    description: str = ""
    #: "two-sided" (too low or too high is a misfit) or "upper" (only too high is)
    sides: str = "two-sided"

    @property
    def p_value(self) -> float:
        """``P(T(y_rep) >= T(y))``; a discrepancy's observed value may vary by draw."""
        obs = np.broadcast_to(np.asarray(self.observed, dtype=float), self.replicated.shape)
        ok = np.isfinite(self.replicated) & np.isfinite(obs)
        if not ok.any():
            return float("nan")
        rep, obs = self.replicated[ok], obs[ok]
        return float(np.mean(rep > obs) + 0.5 * np.mean(rep == obs))

    @property
    def observed_value(self) -> float:
        """The observed statistic (averaged over draws for a realized discrepancy)."""
        return float(np.nanmean(self.observed))

    def extreme(self, alpha: float = 0.05) -> bool:
        p = self.p_value
        if not np.isfinite(p):
            return False
        if self.sides == "upper":
            return bool(p < alpha)
        return bool(p < alpha / 2 or p > 1 - alpha / 2)


@dataclass
class PPCResult:
    """Statistics and the arrays behind the plots."""

    statistics: list[PPCStatistic]
    timezone: str
    changes_observed: np.ndarray
    changes_replicated: np.ndarray  # (draws, pages)
    hour_observed: np.ndarray  # (24,)
    hour_replicated: np.ndarray  # (draws, 24)
    dow_observed: np.ndarray  # (7,)
    dow_replicated: np.ndarray  # (draws, 7)
    gaps_observed: np.ndarray  # normalised gaps, pooled
    gaps_replicated: list[np.ndarray] = field(default_factory=list)
    #: per page with enough detections: top hour-of-week cell, observed and mean replicated
    #: share of detections in it, p = P(replicated share >= observed); most periodic first
    periodic_pages: pd.DataFrame | None = None

    def table(self, alpha: float = 0.05) -> pd.DataFrame:
        rows = [
            {
                "statistic": s.name,
                "observed": s.observed_value,
                "replicated_mean": float(np.nanmean(s.replicated)),
                "replicated_q05": float(np.nanquantile(s.replicated, 0.05)),
                "replicated_q95": float(np.nanquantile(s.replicated, 0.95)),
                "p_value": s.p_value,
                "extreme": s.extreme(alpha),
                "description": s.description,
            }
            for s in self.statistics
        ]
        return pd.DataFrame(rows)

    def p_values(self) -> dict[str, float]:
        return {s.name: s.p_value for s in self.statistics}

    def failures(self, alpha: float = 0.05, only: tuple[str, ...] | None = None) -> list[str]:
        """Names of the statistics whose p-value is extreme."""
        return [
            s.name for s in self.statistics if (only is None or s.name in only) and s.extreme(alpha)
        ]

    def figure(self, title: str = "Posterior predictive checks"):
        """The PPC panels (a matplotlib Figure)."""
        from bayesrate import plots

        return plots.ppc(self, title)

    def plot(self, directory: str | Path, prefix: str = "ppc") -> list[Path]:
        """Write the PPC panels as a PNG file; returns its path in a list."""
        from bayesrate import plots

        return [plots.save(self.figure(), Path(directory) / f"{prefix}.png")]


# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replicates:
    """Predictive draws of one replication on the observed visit times.

    Attributes
    ----------
    patterns
        The interval groups (:func:`bayesrate.models.groups.visit_patterns`).
    detections
        ``(draws, groups)`` replicated detections per group.
    probability
        ``(draws, groups)`` each group's detection probability at that draw.
    """

    patterns: VisitPatterns
    detections: np.ndarray
    probability: np.ndarray


def replicate(
    model, obs: Observations, page_rates: str, n_draws: int, seed: int | str
) -> Replicates:
    """Predictive draws of a fitted model on ``obs``'s visit times (see ``predict``)."""
    tree = model.predict(obs, n_draws=n_draws, seed=seed, page_rates=page_rates)
    pred = tree["posterior_predictive"]
    return Replicates(
        patterns=model.predictive_patterns(obs),
        detections=stack_draws(pred["detections"], DIM_GROUP),
        probability=stack_draws(pred[DETECTION_PROBABILITY], DIM_GROUP),
    )


def _chi2(
    observed: np.ndarray, replicated: np.ndarray, expected: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Realized chi-square discrepancies ``T(y, θ_s)`` and ``T(y_rep_s, θ_s)`` per draw.

    ``expected`` is each draw's expected count per bin, so posterior uncertainty in the
    parameters does not inflate the replicated discrepancy (Gelman, Meng & Stern 1996).
    """
    expected = np.maximum(expected, 1e-9)
    t_obs = np.sum((observed[None, :] - expected) ** 2 / expected, axis=1)
    t_rep = np.sum((replicated - expected) ** 2 / expected, axis=1)
    return t_obs, t_rep


def gap_cv(flags: np.ndarray, times: np.ndarray, offsets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean over pages of the CV of gaps between detections; pooled normalised gaps."""
    cvs, pooled = [], []
    for i in range(len(offsets) - 1):
        f = flags[offsets[i] : offsets[i + 1]]
        t = times[offsets[i] : offsets[i + 1]]
        det = t[f.astype(bool)]
        if len(det) < MIN_DETECTIONS_FOR_GAPS:
            continue
        gaps = np.diff(det)
        mean = gaps.mean()
        cvs.append(gaps.std() / mean)
        pooled.append(gaps / mean)
    if not cvs:
        return float("nan"), np.zeros(0)
    return float(np.mean(cvs)), np.concatenate(pooled)


def _by_bin(values: np.ndarray, bins: np.ndarray, n_bins: int) -> np.ndarray:
    """``(draws, groups)`` summed into ``(draws, n_bins)`` by each group's bin."""
    indicator = np.zeros((len(bins), n_bins))
    indicator[np.arange(len(bins)), bins] = 1.0
    return np.atleast_2d(values) @ indicator


@numba.njit(cache=True, nogil=True)
def _place_detections(group, detections, sizes, uniforms):
    """Flags of intervals (visited in order) so that each group's ``detections`` fall on a
    uniformly random subset of its ``sizes`` intervals (selection sampling, Knuth's
    Algorithm S: an interval is taken with probability detections left / intervals left).
    Every interval of each group must be among ``group``."""
    left = detections.copy()
    remaining = sizes.copy()
    flags = np.zeros(len(group), dtype=np.int8)
    for i in range(len(group)):
        g = group[i]
        if uniforms[i] * remaining[g] < left[g]:
            flags[i] = 1
            left[g] -= 1
        remaining[g] -= 1
    return flags


def _by_bucket(reps: Replicates, bins: np.ndarray, n_bins: int):
    """Observed and replicated detections per bin of the detecting visit, and the realized
    chi-square discrepancies against each draw's expected counts."""
    patterns = reps.patterns
    observed = _by_bin(patterns.group_changed, bins, n_bins)[0]
    replicated = _by_bin(reps.detections, bins, n_bins)
    expected = _by_bin(patterns.group_n * reps.probability, bins, n_bins)
    return observed, replicated, *_chi2(observed, replicated, expected)


def _gap_statistic(
    obs: Observations,
    reps: Replicates,
    rng: np.random.Generator,
    n_gap_pages: int,
    n_gap_draws: int,
) -> tuple[float, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Gap CV of the observed and of replicated visit sequences on the eligible pages
    (a random subsample of ``n_gap_pages`` of them when there are more).

    Each group's replicated count is placed on a uniformly random subset of its
    intervals (exchangeable within a group, so this is exact); the subsample holds whole
    pages, so every interval of its groups.
    """
    eligible = np.flatnonzero(obs.changes_per_page >= MIN_DETECTIONS_FOR_GAPS)
    n_draws = min(n_gap_draws, len(reps.detections))
    if not len(eligible):
        return float("nan"), np.zeros(0), np.full(n_draws, np.nan), []
    pages = eligible
    if len(eligible) > n_gap_pages:
        pages = np.sort(rng.choice(eligible, size=n_gap_pages, replace=False))
    sub = obs.subset(pages)
    observed_cv, observed_gaps = gap_cv(sub.changed, sub.time, sub.offsets)
    # the subsample's intervals and their groups (intervals are the non-baseline visits)
    interval_of_visit = np.cumsum(~obs.is_baseline) - 1
    visits = np.concatenate([np.arange(obs.offsets[p], obs.offsets[p + 1]) for p in pages])
    is_interval = ~obs.is_baseline[visits]
    group = reps.patterns.interval_group[interval_of_visit[visits[is_interval]]]
    sizes = reps.patterns.group_n
    replicated_cv = np.full(n_draws, np.nan)
    replicated_gaps = []
    for d in range(n_draws):
        flags = np.zeros(len(visits), dtype=np.int8)
        flags[is_interval] = _place_detections(
            group, reps.detections[d].astype(np.int64), sizes, rng.random(len(group))
        )
        replicated_cv[d], gaps = gap_cv(flags, sub.time, sub.offsets)
        replicated_gaps.append(gaps)
    return observed_cv, observed_gaps, replicated_cv, replicated_gaps


def top_cell_share(counts: np.ndarray) -> np.ndarray:
    """Share of each row's total in its largest cell (NaN for an empty row)."""
    total = counts.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts.max(axis=-1) / total, np.nan)


def _periodicity(obs: Observations, reps: Replicates) -> tuple[float, np.ndarray, pd.DataFrame]:
    """Observed and replicated mean top-cell share, and the per-page table.

    Detections are counted per (page, hour-of-week cell of the detecting visit): each
    interval group has one end cell, so the replicated counts need no placement.
    """
    patterns = reps.patterns
    n_draws = len(reps.detections)
    eligible = np.flatnonzero(obs.changes_per_page >= MIN_DETECTIONS_FOR_GAPS)
    columns = ["page", "detections", "top_cell", "observed_share", "replicated_share", "p_value"]
    if not len(eligible):
        return float("nan"), np.full(n_draws, np.nan), pd.DataFrame(columns=columns)
    position = np.full(obs.n_pages, -1)
    position[eligible] = np.arange(len(eligible))
    keep = position[patterns.group_page] >= 0
    cell = position[patterns.group_page[keep]] * N_HOURS_OF_WEEK + patterns.group_end_bucket[keep]
    size = len(eligible) * N_HOURS_OF_WEEK
    shape = (len(eligible), N_HOURS_OF_WEEK)
    observed_counts = np.bincount(cell, weights=patterns.group_changed[keep], minlength=size)
    observed = top_cell_share(observed_counts.reshape(shape))
    replicated = np.empty((n_draws, len(eligible)))
    for start in range(0, n_draws, PERIODICITY_DRAW_BLOCK):
        block = reps.detections[start : start + PERIODICITY_DRAW_BLOCK][:, keep]
        counts = np.stack([np.bincount(cell, weights=row, minlength=size) for row in block])
        replicated[start : start + len(block)] = top_cell_share(counts.reshape(-1, *shape))
    top = observed_counts.reshape(shape).argmax(axis=1)
    valid = np.isfinite(replicated)
    greater = np.where(valid, replicated >= observed[None, :], False).sum(axis=0)
    table = pd.DataFrame(
        {
            "page": obs.pages.index[eligible].astype(str),
            "detections": obs.changes_per_page[eligible],
            "top_cell": [
                f"{DAY_NAMES[b // N_HOURS_OF_DAY]} {b % N_HOURS_OF_DAY:02d}h" for b in top
            ],
            "observed_share": observed,
            "replicated_share": _nanmean(replicated, axis=0),
            "p_value": greater / np.maximum(valid.sum(axis=0), 1),
        }
    )
    table = table.assign(excess=table["observed_share"] - table["replicated_share"])
    table = table.sort_values(["p_value", "excess"], ascending=[True, False]).drop(columns="excess")
    return float(np.mean(observed)), _nanmean(replicated, axis=1), table.reset_index(drop=True)


def _cell_name(hour_of_week: int) -> str:
    return f"{DAY_NAMES[hour_of_week // N_HOURS_OF_DAY]} {hour_of_week % N_HOURS_OF_DAY:02d}h"


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean of the finite values along ``axis`` (NaN where there are none, no warning)."""
    finite = np.isfinite(values)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    count = finite.sum(axis=axis)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def posterior_predictive_checks(
    obs: Observations,
    reps: Replicates,
    *,
    n_gap_pages: int = GAP_PAGES,
    n_gap_draws: int = 40,
    seed: int | str = "ppc",
) -> PPCResult:
    """Compare replicated detections with the observed ones (see the module docstring).

    Parameters
    ----------
    obs
        The observations the replicates were drawn on.
    reps
        Predictive draws on ``obs``'s visit times (:func:`replicate`).
    n_gap_pages
        The gap check's pages: every eligible page up to this many, a random subsample
        of this many above it.
    n_gap_draws
        Replicated draws in the gap check.
    seed
        Seed of the gap check's subsample and placements (int or string).
    """
    from bayesrate.models.groups import sum_by_page
    from bayesrate.seeds import rng_from

    rng = rng_from(seed)
    patterns = reps.patterns
    timezone = patterns.timezone
    page = patterns.group_page
    changes_obs = obs.changes_per_page.astype(np.float64)
    changes_rep = sum_by_page(reps.detections, page, obs.n_pages).astype(np.float64)
    intervals = np.maximum(obs.visits_per_page - 1, 0)
    has_intervals = intervals > 0

    def frac_never(c):
        return np.mean(c[..., has_intervals] == 0, axis=-1)

    def frac_every(c):
        return np.mean(c[..., has_intervals] == intervals[has_intervals], axis=-1)

    bucket = patterns.group_end_bucket
    hour_obs, hour_rep, hour_t, hour_t_rep = _by_bucket(
        reps, bucket % N_HOURS_OF_DAY, N_HOURS_OF_DAY
    )
    dow_obs, dow_rep, dow_t, dow_t_rep = _by_bucket(reps, bucket // N_HOURS_OF_DAY, N_DAYS)
    gap_obs_cv, gap_obs_pooled, gap_rep_cv, gap_rep_pooled = _gap_statistic(
        obs, reps, rng, n_gap_pages, n_gap_draws
    )
    top_obs, top_rep, periodic_pages = _periodicity(obs, reps)

    stats = [
        PPCStatistic("mean_changes", changes_obs.mean(), changes_rep.mean(axis=1),
                     "mean detected changes per page"),
        PPCStatistic("sd_changes", changes_obs.std(), changes_rep.std(axis=1),
                     "SD of detected changes per page (dominated by the busiest pages)"),
        PPCStatistic("sd_log_changes", np.log1p(changes_obs).std(),
                     np.log1p(changes_rep).std(axis=1),
                     "SD of log(1 + detected changes) per page (dispersion between pages)"),
        PPCStatistic("frac_never_changed", frac_never(changes_obs), frac_never(changes_rep),
                     "fraction of pages with no detected change"),
        PPCStatistic("frac_changed_every_visit", frac_every(changes_obs), frac_every(changes_rep),
                     "fraction of pages changed at every visit"),
        PPCStatistic("hour_of_day_chi2", hour_t, hour_t_rep,
                     f"chi-square of detections by hour of day ({timezone})", "upper"),
        PPCStatistic("day_of_week_chi2", dow_t, dow_t_rep,
                     f"chi-square of detections by day of week ({timezone})", "upper"),
        PPCStatistic("gap_cv", gap_obs_cv, gap_rep_cv,
                     "mean CV of gaps between detections (censored exponential Q-Q)"),
        PPCStatistic("top_hour_of_week_share", top_obs, top_rep,
                     f"mean share of a page's detections in its busiest hour-of-week cell "
                     f"({timezone}; scheduled jobs)", "upper"),
    ]  # fmt: skip
    return PPCResult(
        statistics=stats,
        timezone=timezone,
        changes_observed=changes_obs,
        changes_replicated=changes_rep,
        hour_observed=hour_obs,
        hour_replicated=hour_rep,
        dow_observed=dow_obs,
        dow_replicated=dow_rep,
        gaps_observed=gap_obs_pooled,
        gaps_replicated=gap_rep_pooled,
        periodic_pages=periodic_pages,
    )


# ---------------------------------------------------------------------------------------
REPLICATIONS = ("conditional", "mixed")


@dataclass
class ModelChecks:
    """Both replications of one fitted model (see the module docstring).

    Attributes
    ----------
    conditional
        Pages replicated from their own posterior draws.
    mixed
        Pages replicated with fresh rates from the fitted population (``None`` for a model
        without one).
    """

    conditional: PPCResult
    mixed: PPCResult | None = None

    def result(self, replication: str = "conditional") -> PPCResult:
        if replication not in REPLICATIONS:
            raise ValueError(f"replication must be one of {REPLICATIONS}")
        result = self.conditional if replication == "conditional" else self.mixed
        if result is None:
            raise ValueError("this model has no population to replicate pages from")
        return result

    @property
    def replications(self) -> tuple[str, ...]:
        return REPLICATIONS if self.mixed is not None else ("conditional",)

    def table(self, alpha: float = 0.05) -> pd.DataFrame:
        """Every statistic of every replication, with a ``replication`` column."""
        parts = [self.result(r).table(alpha).assign(replication=r) for r in self.replications]
        return pd.concat(parts, ignore_index=True)

    def p_values(self, replication: str = "conditional") -> dict[str, float]:
        return self.result(replication).p_values()

    def failures(
        self,
        alpha: float = 0.05,
        only: tuple[str, ...] | None = None,
        replication: str = "conditional",
    ) -> list[str]:
        return self.result(replication).failures(alpha, only)

    def gate_failures(self, gates: dict[str, tuple[str, ...]], alpha: float = 0.05) -> list[str]:
        """``"name (replication, p = ...)"`` for each gated statistic that is extreme.

        ``gates`` maps a replication to the statistics judged on it; a gate on the mixed
        replication of a model without a population fails (it cannot be checked).
        """
        out = []
        for replication, names in gates.items():
            if replication == "mixed" and self.mixed is None:
                out.append("no population to replicate pages from (mixed checks)")
                continue
            result = self.result(replication)
            pv = result.p_values()
            out += [
                f"{name} ({replication}, p = {pv[name]:.3f})"
                for name in result.failures(alpha, names)
            ]
        return out

    def figures(self) -> dict[str, object]:
        """The PPC panels of each replication (matplotlib Figures)."""
        return {
            r: self.result(r).figure(f"Posterior predictive checks ({r} replication)")
            for r in self.replications
        }

    def plot(self, directory: str | Path, prefix: str = "ppc") -> list[Path]:
        """The PPC panels of each replication as PNG files."""
        from bayesrate import plots

        names = {"conditional": prefix, "mixed": f"{prefix}-mixed"}
        return [
            plots.save(fig, Path(directory) / f"{names[r]}.png")
            for r, fig in self.figures().items()
        ]


def ppc_for(model, obs: Observations, seed: int | str = "ppc", n_draws: int = 200) -> ModelChecks:
    """Posterior predictive checks of a fitted model: conditional and mixed replications.

    ``obs`` must be the data the model was fitted to (the conditional replication gives
    each page its own posterior).
    """
    checks = {}
    for replication, page_rates in (("conditional", "posterior"), ("mixed", "population")):
        stream = seed if replication == "conditional" else f"{seed}-{replication}"
        reps = replicate(model, obs, page_rates, n_draws, seed=stream)
        checks[replication] = posterior_predictive_checks(obs, reps, seed=stream)
    return ModelChecks(**checks)
