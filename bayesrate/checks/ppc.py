"""Posterior predictive checks that replicate the *censored observation process*.

Latent changes are never compared with anything: from each posterior draw of the page
rates (and hour-of-week multipliers, for modulated models) we simulate what the crawler
would have *detected* on the same visit times, and compare summaries of the replicates
with the observed detections:

- ``mean_changes`` / ``sd_changes`` / ``sd_log_changes`` — detected changes per page; the
  SD on the log scale measures dispersion between pages (what a hierarchy on log-rates
  models), the raw SD is dominated by the few busiest pages;
- ``frac_never_changed`` / ``frac_changed_every_visit``;
- ``hour_of_day_chi2`` / ``day_of_week_chi2`` — detections by local hour of day and day of
  week of the detecting visit, as a chi-square discrepancy against the replicates' mean;
- ``gap_cv`` — the coefficient of variation of the gaps between detected changes (pages
  with at least a few detections), the numeric form of the case study's censored
  exponential Q-Q check: periodic pages give too regular gaps (low CV), bursty pages too
  irregular ones (high CV).

Two replications (:class:`ModelChecks`):

- **conditional** — each page replicated from its own posterior draws. Pages with hundreds
  of intervals reproduce their own counts almost by construction, so this checks the
  observation model (hour-of-day and day-of-week shapes, gaps), not the population;
- **mixed** — per draw, a *fresh* page rate from the fitted population (hierarchical and
  modulated: ``log λ_rep ~ N(domain_log_rate_mean[d], page_log_rate_sd)``; censored: its
  fixed prior) for every page, on the same visit times. It judges the population: the
  distribution of rates a new page of a domain is given, which is what prior export ships.

Bayesian p-value: ``p = P(T(y_rep) >= T(y))`` (ties count half). A two-sided check
*fails* when ``p < alpha/2`` or ``p > 1 - alpha/2``; the chi-square discrepancies are
realized discrepancies (each draw's own expected counts) and fail only when too large,
``p < alpha``.

Replication uses sufficient statistics: intervals are grouped by (page, *pattern*), a
pattern being the interval length and its start within the local week, which fixes its
overlap with the hour-of-week buckets (exact in a fixed-offset zone; intervals crossing a
DST change use the pattern of their start). Counts per group are Binomial. Only the gap
check simulates visit sequences, on a subsample of pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrate.clock import hour_of_week_overlap, local_hours
from bayesrate.constants import (
    DIM_DOMAIN,
    DIM_HOUR_OF_WEEK,
    DIM_PAGE,
    EPOCH_HOUR_OF_WEEK,
    HOURS_PER_DAY,
    HOURS_PER_WEEK,
    N_HOUR_OF_WEEK,
)
from bayesrate.draws import stack_draws
from bayesrate.observations import Observations

MIN_DETECTIONS_FOR_GAPS = 5


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
class _PatternGroups:
    """Intervals grouped by (page, pattern); patterns fix the hour-of-week overlap."""

    group_page: np.ndarray
    group_pattern: np.ndarray
    group_n: np.ndarray
    group_changed: np.ndarray
    pattern_tau: np.ndarray
    pattern_overlap: np.ndarray  # (n_patterns, 168)
    pattern_end_bucket: np.ndarray
    interval_pattern: np.ndarray  # pattern code of every interval (for sequences)


def _pattern_groups(obs: Observations, timezone: str) -> _PatternGroups:
    not_first = ~obs.is_baseline
    end = obs.time[not_first]
    start = obs.time[np.flatnonzero(not_first) - 1]
    tau = end - start
    local_start = local_hours(start, timezone)
    week_pos = np.mod(local_start + EPOCH_HOUR_OF_WEEK, HOURS_PER_WEEK)
    # (length, week position) pairs in milliseconds, made distinct as pairs (a single
    # combined integer key overflows int64 for intervals longer than 176 days)
    keys = np.stack([np.round(tau * 3.6e6), np.round(week_pos * 3.6e6)], axis=1)
    pattern_values, pattern_code = np.unique(keys.astype(np.int64), axis=0, return_inverse=True)
    pattern_code = pattern_code.reshape(-1)
    first_of = np.full(len(pattern_values), len(tau), dtype=np.int64)
    np.minimum.at(first_of, pattern_code, np.arange(len(tau)))
    rep_start, rep_end = start[first_of], end[first_of]
    overlap = hour_of_week_overlap(rep_start, rep_end, timezone)
    end_local = local_hours(rep_end, timezone)
    # the detecting visit's bucket: the bucket containing the end (an end exactly on the
    # hour belongs to the hour it opens, as for any timestamp)
    end_bucket = (np.floor(end_local).astype(np.int64) + EPOCH_HOUR_OF_WEEK) % N_HOUR_OF_WEEK

    page = obs.page_of_visit[not_first]
    n_patterns = len(pattern_values)
    key = page * n_patterns + pattern_code
    groups, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    changed = np.bincount(inverse, weights=obs.changed[not_first], minlength=len(groups))
    gp, gpat = np.divmod(groups, n_patterns)
    return _PatternGroups(
        group_page=gp,
        group_pattern=gpat,
        group_n=counts,
        group_changed=np.rint(changed).astype(np.int64),
        pattern_tau=tau[first_of],
        pattern_overlap=overlap,
        pattern_end_bucket=end_bucket,
        interval_pattern=pattern_code,
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


def _gap_cv(flags: np.ndarray, times: np.ndarray, offsets: np.ndarray) -> tuple[float, np.ndarray]:
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


def posterior_predictive_checks(
    obs: Observations,
    rate_draws: np.ndarray,
    multipliers: np.ndarray | None = None,
    *,
    timezone: str = "UTC",
    n_draws: int = 200,
    n_gap_pages: int = 150,
    n_gap_draws: int = 40,
    seed: int | str = "ppc",
) -> PPCResult:
    """Replicate detections from posterior draws and compare with the observations.

    Parameters
    ----------
    obs
        The observations the model was fitted to.
    rate_draws
        ``(draws, pages)`` posterior draws of each page's rate, per hour.
    multipliers
        ``(draws, 168)`` hour-of-week multipliers (modulated models), or ``None``.
    timezone
        Clock of the hour-of-week buckets (the model's).
    n_draws, n_gap_pages, n_gap_draws
        How many draws to replicate with, and the subsample for the gap check.
    seed
        Seed (int or string).
    """
    from bayesrate.seeds import rng_from

    rng = rng_from(seed)
    rate_draws = np.asarray(rate_draws, dtype=np.float64)
    if rate_draws.ndim != 2 or rate_draws.shape[1] != obs.n_pages:
        raise ValueError(f"rate_draws must be (draws, {obs.n_pages}); got {rate_draws.shape}")
    pick = rng.choice(len(rate_draws), size=min(n_draws, len(rate_draws)), replace=False)
    rates = rate_draws[pick]
    mult = None if multipliers is None else np.asarray(multipliers, dtype=np.float64)[pick]

    groups = _pattern_groups(obs, timezone)
    if mult is None:
        exposure = np.broadcast_to(groups.pattern_tau, (len(rates), len(groups.pattern_tau)))
    else:
        exposure = mult @ groups.pattern_overlap.T  # (draws, patterns)
    lam = rates[:, groups.group_page] * exposure[:, groups.group_pattern]
    p_detect = -np.expm1(-lam)
    rep_counts = rng.binomial(groups.group_n, p_detect)  # (draws, groups)

    n_pages = obs.n_pages
    changes_obs = obs.changes_per_page.astype(np.float64)
    changes_rep = np.stack(
        [np.bincount(groups.group_page, weights=r, minlength=n_pages) for r in rep_counts]
    )
    intervals = np.maximum(obs.visits_per_page - 1, 0)
    has_intervals = intervals > 0

    def frac_never(c):
        return np.mean(c[..., has_intervals] == 0, axis=-1)

    def frac_every(c):
        return np.mean(c[..., has_intervals] == intervals[has_intervals], axis=-1)

    bucket = groups.pattern_end_bucket[groups.group_pattern]
    hour_of_group, dow_of_group = bucket % 24, bucket // 24
    hour_obs = np.bincount(hour_of_group, weights=groups.group_changed, minlength=24)
    dow_obs = np.bincount(dow_of_group, weights=groups.group_changed, minlength=7)
    hour_rep = np.stack([np.bincount(hour_of_group, weights=r, minlength=24) for r in rep_counts])
    dow_rep = np.stack([np.bincount(dow_of_group, weights=r, minlength=7) for r in rep_counts])
    expected_counts = groups.group_n * p_detect  # (draws, groups)
    hour_exp = np.stack([np.bincount(hour_of_group, weights=e, minlength=24)
                         for e in expected_counts])  # fmt: skip
    dow_exp = np.stack([np.bincount(dow_of_group, weights=e, minlength=7)
                        for e in expected_counts])  # fmt: skip
    hour_t, hour_t_rep = _chi2(hour_obs, hour_rep, hour_exp)
    dow_t, dow_t_rep = _chi2(dow_obs, dow_rep, dow_exp)

    # gap check: sequences for a subsample of pages with enough detections
    eligible = np.flatnonzero(obs.changes_per_page >= MIN_DETECTIONS_FOR_GAPS)
    gap_pages = np.sort(rng.choice(eligible, size=min(n_gap_pages, len(eligible)), replace=False))
    gap_obs_cv, gap_obs_pooled = float("nan"), np.zeros(0)
    gap_rep_cv = np.full(min(n_gap_draws, len(rates)), np.nan)
    gap_rep_pooled: list[np.ndarray] = []
    if len(gap_pages):
        sub = obs.subset(gap_pages)
        gap_obs_cv, gap_obs_pooled = _gap_cv(sub.changed, sub.time, sub.offsets)
        interval_index = np.flatnonzero(~obs.is_baseline)
        position_of_interval = np.full(obs.n_visits, -1, dtype=np.int64)
        position_of_interval[interval_index] = np.arange(len(interval_index))
        sub_visit = np.concatenate(
            [np.arange(obs.offsets[p], obs.offsets[p + 1]) for p in gap_pages]
        )
        sub_pattern = np.where(
            obs.is_baseline[sub_visit],
            -1,
            groups.interval_pattern[np.maximum(position_of_interval[sub_visit], 0)],
        )
        sub_page = np.repeat(np.arange(len(gap_pages)), sub.visits_per_page)
        for d in range(len(gap_rep_cv)):
            lam_v = rates[d, gap_pages][sub_page] * exposure[d][np.maximum(sub_pattern, 0)]
            flags = (rng.random(len(sub_visit)) < -np.expm1(-lam_v)) & (sub_pattern >= 0)
            gap_rep_cv[d], pooled = _gap_cv(flags.astype(np.int8), sub.time, sub.offsets)
            gap_rep_pooled.append(pooled)

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


def mixed_rate_draws(model, obs: Observations, n_draws: int, rng: np.random.Generator):
    """``(draws, pages)`` fresh page rates per hour from a fitted model's population.

    Hierarchical and modulated models: ``log λ ~ N(domain_log_rate_mean[d], page_log_rate_sd)``
    per posterior draw (time-averaged rates); the censored model: its fixed prior. ``None``
    for a model with neither.
    """
    post = model.idata_["posterior"]
    if "domain_log_rate_mean" in post and "page_log_rate_sd" in post:
        means = stack_draws(post["domain_log_rate_mean"], DIM_DOMAIN)
        sds = stack_draws(post["page_log_rate_sd"])
        pick = rng.choice(len(sds), size=min(n_draws, len(sds)), replace=False)
        labels = [str(d) for d in post[DIM_DOMAIN].values]
        column = pd.Index(labels).get_indexer(obs.pages["domain"].astype(str))
        if (column < 0).any():
            raise ValueError("the observations have domains the model was not fitted on")
        z = rng.standard_normal((len(pick), obs.n_pages))
        return np.exp(means[pick][:, column] + sds[pick][:, None] * z)
    cfg = getattr(model, "model_config", {})
    if cfg.get("prior") == "gamma":
        shape, rate = cfg["alpha"], cfg["beta_days"] * HOURS_PER_DAY
        return rng.gamma(shape, 1.0 / rate, size=(n_draws, obs.n_pages))
    if cfg.get("prior") == "lognormal":
        mu = cfg["log_mean_per_day"] - np.log(HOURS_PER_DAY)
        return np.exp(mu + cfg["log_sd"] * rng.standard_normal((n_draws, obs.n_pages)))
    return None


def ppc_for(model, obs: Observations, seed: int | str = "ppc", n_draws: int = 200) -> ModelChecks:
    """Posterior predictive checks of a fitted model: conditional and mixed replications."""
    from bayesrate.seeds import rng_from

    post = model.idata_["posterior"]
    rates = stack_draws(post["rate"], DIM_PAGE)
    mult = None
    if "hour_of_week_multiplier" in post:
        mult = stack_draws(post["hour_of_week_multiplier"], DIM_HOUR_OF_WEEK)
    timezone = model.model_config.get("timezone", "UTC")
    options = {"timezone": timezone, "n_draws": n_draws}
    conditional = posterior_predictive_checks(obs, rates, mult, seed=seed, **options)
    rng = rng_from(f"{seed}-mixed")
    fresh = mixed_rate_draws(model, obs, n_draws, rng)
    mixed = None
    if fresh is not None:
        mixed_mult = None if mult is None else mult[rng.choice(len(mult), size=len(fresh))]
        mixed = posterior_predictive_checks(obs, fresh, mixed_mult, seed=f"{seed}-mixed", **options)
    return ModelChecks(conditional, mixed)
