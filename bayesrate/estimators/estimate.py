"""One entry point for every per-page estimator: ``estimate(obs, method) -> DataFrame``.

Shared by ``bayesrate estimate``, the studies and the notebooks. Methods
(``docs/estimators.md``):

- batch: ``naive``, ``moment``, ``cho``, ``mle`` (profile-likelihood interval), ``mm``;
- online, replayed in time order: ``lln``, ``sa``, ``sam`` (crawl rate ``p`` = each page's
  observed visits per hour unless given), ``gamma-adf``. LLN, SA and SAM assume Poisson
  visits; on a regular grid of interval ``τ`` they converge to ``p(e^{λτ} − 1)``, so pages
  visited on a regular grid get the grid-consistent rate ``log(1 + x/p)/τ`` (column
  ``grid_consistent``) unless ``online_raw``;
- Gamma posteriors: ``gamma-exposure`` (``Gamma(α + c, β + T)``), ``gamma-adf`` and
  ``posterior-grid`` (exact posterior on a log-rate grid) with equal-tailed credible
  intervals. The prior's α is in pseudo-changes, β in pseudo-exposure **days**.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from bayesrate.observations import Observations

METHODS = (
    "naive",
    "moment",
    "cho",
    "mle",
    "mm",
    "lln",
    "sa",
    "sam",
    "gamma-exposure",
    "gamma-adf",
    "posterior-grid",
)


def estimate(
    obs: Observations,
    method: str,
    *,
    alpha=None,
    beta_days=None,
    level=0.95,
    mle_interval="profile",
    crawl_rate_per_day=None,
    online_raw=False,
) -> pd.DataFrame:
    """One row per page: ``page, n_visits, n_changes, rate_per_day`` (per day), and
    ``lower_per_day, upper_per_day`` where the method has an interval; see the module
    docstring.

    Raises
    ------
    ValueError
        For an unknown method, a level outside (0, 1), a prior that is not finite and
        positive, or a crawl rate that is not finite and positive.
    """
    import math

    from bayesrate.constants import HOURS_PER_DAY
    from bayesrate.estimators import batch, grid, online
    from bayesrate.priors import DEFAULT_PRIOR

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if not 0 < level < 1:
        raise ValueError("--level must be in (0, 1)")
    stats = obs.interval_stats
    a = DEFAULT_PRIOR[0] if alpha is None else alpha
    b_days = DEFAULT_PRIOR[1] if beta_days is None else beta_days
    if method.startswith(("gamma", "posterior")) and not (
        math.isfinite(a) and math.isfinite(b_days) and a > 0 and b_days > 0
    ):
        raise ValueError("--prior-alpha and --prior-beta must be finite and positive")
    if crawl_rate_per_day is not None and not (
        math.isfinite(crawl_rate_per_day) and crawl_rate_per_day > 0
    ):
        raise ValueError("--crawl-rate must be a finite number of visits per day > 0")
    b_hours = b_days * HOURS_PER_DAY
    if method == "mle":
        est = batch.mle(stats, interval=mle_interval, level=level)
    elif method in batch.BATCH:
        est = batch.BATCH[method](stats)
    elif method == "gamma-exposure":
        est = batch.gamma_exposure(stats, a, b_hours, level=level)
    elif method == "gamma-adf":
        est = online.run_sequences(obs, "gamma-adf", prior_alpha=a, prior_beta=b_hours, level=level)
    elif method == "posterior-grid":
        post = grid.grid_posterior(stats, grid.gamma_log_prior(a, b_hours))
        est = batch.RateEstimate(
            method,
            post.mean(),
            post.quantile(0.5 - level / 2),
            post.quantile(0.5 + level / 2),
            level,
        )
    else:
        p = None if crawl_rate_per_day is None else crawl_rate_per_day / HOURS_PER_DAY
        est = online.run_sequences(obs, method, p=p, grid_transform=not online_raw)
    frame = est.to_frame(stats, per_day=True)
    if "grid_consistent" in est.extra:
        frame["grid_consistent"] = est.extra["grid_consistent"]
    return frame
