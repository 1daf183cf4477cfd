"""Modulated model: hierarchical page rates × hour-of-day × day-of-week effects.

``λ_p(t) = exp(log_rate[p]) · m[b(t)]``, ``m[b] = exp(hour_effect[b % 24] + day_effect[b // 24])``
with sum-to-zero effects (``ZeroSumNormal``, prior sd ``hour_sd``/``day_sd``) and ``b(t)`` the
hour-of-week bucket on the clock of ``model_config["timezone"]`` (bucket 0 = Monday
00:00-01:00 local). Each interval's integrated rate is exact: ``Λ = λ_p · Σ_b m_b·overlap_b``;
intervals with the same overlap (the same length and start within the local week,
:func:`bayesrate.models.groups.visit_patterns`) form one Binomial group per page.

The page level is :class:`~bayesrate.models.hierarchical.HierarchicalModel`'s (inherited).
Reported rates are time-averaged: ``rate = exp(log_rate) · mean(m)``; the posterior also
holds ``hour_of_week_multiplier`` (168, normalised to mean 1 per draw, so
``rate × multiplier`` is the instantaneous rate) and ``log_multiplier`` (raw ``log m``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bayesrate.clock import check_timezone
from bayesrate.constants import (
    DAY_NAMES,
    DIM_DAY_OF_WEEK,
    DIM_HOUR_OF_DAY,
    DIM_HOUR_OF_WEEK,
    N_HOUR_OF_WEEK,
    N_HOURS_OF_DAY,
    POPULATION_GATES,
)
from bayesrate.models.base import check_config_numbers
from bayesrate.models.hierarchical import HierarchicalModel

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.models.groups import IntervalGroups
    from bayesrate.observations import Observations
    from bayesrate.predictive import Groups, Prediction

BUCKETS = np.arange(N_HOUR_OF_WEEK)
#: the quiet exposure is computed as a span when pages × 168 exceeds this many times the
#: busy groups plus pages (slower on pages_like(300): 24,700 busy groups of 300 pages;
#: 2.2x faster on 6,907 daily-crawled tldr pages)
SPAN_COST_PER_GROUP = 4
HOUR_OF_BUCKET = BUCKETS % N_HOURS_OF_DAY
DAY_OF_BUCKET = BUCKETS // N_HOURS_OF_DAY


class ModulatedModel(HierarchicalModel):
    """Pooled page rates with hour-of-day and day-of-week multipliers (exact integration)."""

    model_type: ClassVar[str] = "modulated"
    #: the hour-of-week shape is judged conditionally (its realised chi-square needs each
    #: draw's own expected counts)
    export_gates: ClassVar[Mapping[str, tuple[str, ...]] | None] = {
        "mixed": POPULATION_GATES,
        "conditional": ("hour_of_day_chi2", "day_of_week_chi2"),
    }
    conditional_pages: ClassVar[bool] = False
    #: on ota-contrib 4 x 1000 draws gave bulk ESS 366 and 4 x 1500 R-hat 1.0106 (one page
    #: whose rate changed between crawl eras); 4 x 2500 met all gates (benchmarks/RESULTS.md)
    #: target_accept 0.95 from the start: at 0.8 the domain means mixed too slowly on the
    #: 6,907 tldr pages (R-hat 1.013-1.017, bulk ESS 347 at 4 x 1000; docs/models.md)
    sampler_defaults: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.sampler_defaults,
        "draws": 2500,
        "tune": 1000,
        "target_accept": 0.95,
    }
    default_model_config: ClassVar[dict[str, Any]] = {
        **HierarchicalModel.default_model_config,
        "timezone": "UTC",
        "hour_sd": 0.5,
        "day_sd": 0.5,
    }

    def _validate_config(self) -> None:
        super()._validate_config()
        check_timezone(self.model_config["timezone"])
        check_config_numbers(self.model_config, positive=("hour_sd", "day_sd"))

    @property
    def has_multipliers(self) -> bool:
        return True

    def coords(self, data: Observations) -> dict[str, Any]:
        coords = super().coords(data)
        coords[DIM_HOUR_OF_DAY] = np.arange(N_HOURS_OF_DAY)
        coords[DIM_DAY_OF_WEEK] = list(DAY_NAMES)
        coords[DIM_HOUR_OF_WEEK] = BUCKETS
        return coords

    def fitted_groups(self, data: Observations) -> IntervalGroups:
        """Groups by (page, length and start within the local week): equal overlaps."""
        from bayesrate.models.groups import visit_patterns

        return visit_patterns(data, self.timezone).groups("hour_of_week")

    def _quiet_span(self, data: Observations, busy: IntervalGroups):
        """Span minus busy groups where that is cheaper than the pages × 168 product: a
        gather and a scatter per busy group cost about :data:`SPAN_COST_PER_GROUP` multiply-
        adds of the product (``benchmarks/RESULTS.md``, "Modulated quiet exposure as a
        span")."""
        from bayesrate.models.likelihood import QuietSpan

        dense_cost = data.n_pages * N_HOUR_OF_WEEK
        if dense_cost <= SPAN_COST_PER_GROUP * (busy.n_groups + data.n_pages):
            return None
        return QuietSpan.of(data, self.timezone, busy)

    def _log_multiplier(self):
        import pymc as pm

        hour = pm.ZeroSumNormal(
            "hour_effect", sigma=self.model_config["hour_sd"], dims=DIM_HOUR_OF_DAY
        )
        day = pm.ZeroSumNormal(
            "day_effect", sigma=self.model_config["day_sd"], dims=DIM_DAY_OF_WEEK
        )
        return pm.Deterministic(
            "log_multiplier", hour[HOUR_OF_BUCKET] + day[DAY_OF_BUCKET], dims=DIM_HOUR_OF_WEEK
        )

    def _predictive_log_multiplier(self):
        import pymc as pm

        pm.modelcontext(None).add_coords({DIM_HOUR_OF_WEEK: BUCKETS})
        return pm.Flat("log_multiplier", dims=DIM_HOUR_OF_WEEK)

    def log_rate_offset(self, post: xr.Dataset):
        m = np.exp(post["log_multiplier"])
        return np.log(m.mean(DIM_HOUR_OF_WEEK))

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        post = super()._add_derived(post, data)
        m = np.exp(post["log_multiplier"])
        post["hour_of_week_multiplier"] = m / m.mean(DIM_HOUR_OF_WEEK)
        post["hour_of_week_multiplier"].attrs["timezone"] = self.timezone
        post["hour_of_week_multiplier"].attrs["bucket_0"] = "Monday 00:00-01:00 local"
        return post

    def marginal_page_loglik(self, post: xr.Dataset, data: Observations | None = None):
        """As the hierarchical model's, each draw's likelihood with its own hour-of-week
        multipliers."""
        from bayesrate.checks import marginal
        from bayesrate.draws import stack_draws

        data = self._loo_data(data)
        mu, sigma = self._loo_population(post, data)
        stats = data.hour_of_week_stats(self.timezone)
        mult = np.exp(stack_draws(post["log_multiplier"], DIM_HOUR_OF_WEEK))
        return marginal.integrated_loglik_normal(stats, mu, sigma, mult)

    def page_loglik(self, max_draws: int | None = None) -> np.ndarray:
        """``(draws, pages)`` exact log-likelihood at each kept draw (its own multipliers)."""
        from bayesrate.draws import stack_draws
        from bayesrate.likelihood import loglik

        post, log_rate = self._loglik_draws(max_draws)
        multipliers = np.exp(stack_draws(post["log_multiplier"], DIM_HOUR_OF_WEEK))
        stats = self.data_.hour_of_week_stats(self.timezone)
        return np.stack(
            [loglik(stats.groups(m), lr) for lr, m in zip(log_rate, multipliers, strict=True)]
        )

    def forecast_groups(self, d, by_length: Groups) -> Groups:
        """Test intervals grouped by (page, hour-of-week overlap pattern): a rate that
        follows the clock integrates differently over intervals of one length."""
        from bayesrate.predictive import pattern_groups

        return pattern_groups(d, self.model_config["timezone"])

    def forecast_predictive(
        self, d, groups: Groups, keep: np.ndarray, seed: int | str, walks: str = "summed"
    ) -> Prediction:
        """Each draw's page rate times its hour-of-week multipliers integrated over each
        test pattern and each page's window."""
        from bayesrate.clock import hour_of_week_overlap
        from bayesrate.draws import stack_draws
        from bayesrate.predictive import Prediction

        base, mean_rate = self._forecast_rates(keep)
        post = self.idata_["posterior"]
        multiplier = np.exp(stack_draws(post["log_multiplier"], DIM_HOUR_OF_WEEK)[keep])
        pattern_weight = multiplier @ groups.patterns.T  # (draws, patterns): ∫ m over it
        window = hour_of_week_overlap(
            np.full(d.n_pages, d.split), d.split + d.window_hours, self.model_config["timezone"]
        )
        return Prediction(
            group_lambda=base[:, groups.page] * pattern_weight[:, groups.key],
            window_lambda=base * (multiplier @ window.T),
            rate_per_hour=mean_rate,
        )
