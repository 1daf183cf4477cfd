"""Figures: each function takes data (and optionally the axes to draw on) and returns them.

Figures are :class:`matplotlib.figure.Figure` objects made without pyplot, so library code
never touches a global backend: a notebook displays the returned figure, the report and the
studies write it with :func:`save`. matplotlib is imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesrate.constants import DAY_NAMES, HOURS_PER_DAY, N_HOUR_OF_WEEK

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bayesrate.priors import PriorSet

DPI = 110


def figure(figsize: tuple[float, float]) -> Figure:
    """A new figure, not registered with pyplot."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    return ax if ax is not None else figure(figsize).subplots()


def check_image_path(path: str | Path) -> Path:
    """Raise unless ``path``'s suffix is an image format matplotlib writes (before any work).

    Raises
    ------
    ObservationError
        Naming the suffix and the supported ones (``f.xyz``, or no suffix).
    """
    from matplotlib.backend_bases import FigureCanvasBase

    from bayesrate.errors import ObservationError

    path = Path(path)
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in formats:
        raise ObservationError(
            f"cannot write a figure as {path.name!r}: use one of "
            + ", ".join(f".{f}" for f in sorted(formats)),
            field="plot",
        )
    return path


def save(fig: Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Write ``fig`` as an image (format from the suffix); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    return path


def _band(ax: Axes, x, replicated, label="replicated 5-95%", color="tab:blue") -> None:
    lo, mid, hi = np.nanquantile(replicated, [0.05, 0.5, 0.95], axis=0)
    ax.fill_between(x, lo, hi, color=color, alpha=0.3, step="mid", label=label)
    ax.plot(x, mid, color=color, lw=1, drawstyle="steps-mid")


# ------------------------------------------------------------------------ checks
def ppc(result: Any, title: str = "Posterior predictive checks") -> Figure:
    """Four panels: changes per page, hour of day, day of week, gap Q-Q (replicated bands).

    ``result`` holds the arrays (a :class:`bayesrate.checks.ppc.PPCResult`):
    ``changes_observed``/``_replicated``, ``hour_``, ``dow_``, ``gaps_`` likewise,
    ``timezone`` and ``statistics`` (each with ``name`` and ``p_value``).
    """
    fig = figure((11, 8))
    axes = fig.subplots(2, 2)

    ax = axes[0, 0]
    edges = np.unique(np.round(np.geomspace(1, max(result.changes_observed.max(), 2) + 1, 25)))
    edges = np.concatenate([[0], edges])
    centres = 0.5 * (edges[:-1] + edges[1:])
    _band(ax, centres, np.stack([np.histogram(r, edges)[0] for r in result.changes_replicated]))
    ax.plot(centres, np.histogram(result.changes_observed, edges)[0], "k.", label="observed")
    ax.set_xscale("symlog", linthresh=1)
    ax.set(xlabel="detected changes per page", ylabel="pages", title="Detected changes per page")
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    _band(ax, np.arange(24), result.hour_replicated)
    ax.plot(np.arange(24), result.hour_observed, "k.", label="observed")
    ax.set(xlabel=f"hour of day of the detecting visit ({result.timezone})",
           ylabel="detections", title="Detections by hour of day")  # fmt: skip
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    _band(ax, np.arange(7), result.dow_replicated)
    ax.plot(np.arange(7), result.dow_observed, "k.", label="observed")
    ax.set_xticks(range(7), DAY_NAMES)
    ax.set(ylabel="detections", title="Detections by day of week")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    probs = np.linspace(0.01, 0.99, 50)
    theory = -np.log1p(-probs)
    if len(result.gaps_observed):
        ax.plot(theory, np.quantile(result.gaps_observed, probs), "k.", label="observed")
        reps = [np.quantile(g, probs) for g in result.gaps_replicated if len(g)]
        if reps:
            _band(ax, theory, np.stack(reps))
        ax.plot(theory, theory, color="grey", ls=":", lw=1, label="exponential")
        ax.legend(fontsize=8)
    ax.set(xlabel="Exp(1) quantile", ylabel="gap between detections / page mean gap",
           title="Censored exponential Q-Q of gaps")  # fmt: skip

    pvals = [f"{s.name}={s.p_value:.2f}" for s in result.statistics]
    half = (len(pvals) + 1) // 2
    fig.suptitle(f"{title} — p-values: " + ", ".join(pvals[:half]) + "\n"
                 + ", ".join(pvals[half:]), fontsize=9)  # fmt: skip
    return fig


def loo(table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """ELPD-LOO ± SE per model (rows of an ``arviz.compare``-style table)."""
    ax = _axes(ax, (7, 0.6 * len(table) + 1.5))
    y = np.arange(len(table))[::-1]
    ax.errorbar(table["elpd"], y, xerr=table["se"], fmt="o", label="ELPD-LOO ± SE")
    ax.set_yticks(y, table.index)
    ax.set_xlabel("expected log predictive density of a held-out page (higher is better)")
    ax.set_title("Model comparison (PSIS-LOO over pages)")
    return ax


# ------------------------------------------------------------------------ models, priors
def domain_rates(
    pages: pd.DataFrame,
    priors: PriorSet | None = None,
    *,
    top: int = 15,
    label: str = "",
    ax: Axes | None = None,
) -> Axes:
    """Posterior-mean rates per page in the largest domains, with each exported prior.

    ``pages`` has columns ``domain`` and ``rate_per_day`` (a model's ``page_summary_``).
    """
    from scipy import stats

    counts = pages["domain"].value_counts()
    largest = counts.index[:top][::-1]
    ax = _axes(ax, (9, 0.45 * len(largest) + 1.5))
    for i, domain in enumerate(largest):
        rates = pages.loc[pages["domain"] == domain, "rate_per_day"].to_numpy()
        jitter = np.linspace(-0.15, 0.15, len(rates)) if len(rates) > 1 else np.zeros(1)
        ax.plot(rates, i + jitter, "o", ms=3, color="tab:blue", alpha=0.7)
        if priors is not None and domain in priors.domains:
            p = priors.domains[domain]
            lo, hi = stats.gamma.ppf([0.05, 0.95], p.alpha, scale=1 / p.beta)
            ax.plot([max(lo, 1e-6), hi], [i + 0.3, i + 0.3], color="tab:orange", lw=2)
            ax.plot(p.mean, i + 0.3, "|", color="tab:orange", ms=10)
    ax.set_yticks(range(len(largest)), [f"{d} ({counts[d]})" for d in largest], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("changes per day (posterior mean per page; orange: exported prior 5-95%, mean)")
    ax.set_title(f"Page change rates in the {len(largest)} largest domains {label}".strip())
    return ax


def hour_of_week(multipliers: np.ndarray, timezone: str = "UTC") -> Figure:
    """Hour-of-week multipliers (draws × 168) with 90% bands; hour-of-day / day-of-week means."""
    mult = np.asarray(multipliers)
    fig = figure((11, 6))
    top, bottom = fig.subplots(2, 1)
    lo, mid, hi = np.quantile(mult, [0.05, 0.5, 0.95], axis=0)
    x = np.arange(N_HOUR_OF_WEEK)
    top.fill_between(x, lo, hi, alpha=0.3, step="mid")
    top.plot(x, mid, drawstyle="steps-mid")
    top.axhline(1.0, color="grey", lw=0.8, ls=":")
    top.set_xticks(np.arange(0, N_HOUR_OF_WEEK, 24), DAY_NAMES)
    top.set(ylabel="rate multiplier",
            title=f"Hour-of-week rate multipliers ({timezone}; median and 90% band)")  # fmt: skip
    week = mult.reshape(len(mult), 7, 24)
    q = np.quantile(week.mean(axis=1), [0.05, 0.5, 0.95], axis=0)
    bottom.errorbar(np.arange(24), q[1], yerr=[q[1] - q[0], q[2] - q[1]], fmt="o-", ms=3,
                    label="hour of day")  # fmt: skip
    bottom.set(xlabel="hour of day", ylabel="mean multiplier")
    days = bottom.twiny()
    q = np.quantile(week.mean(axis=2), [0.05, 0.5, 0.95], axis=0)
    days.errorbar(np.arange(7), q[1], yerr=[q[1] - q[0], q[2] - q[1]], fmt="s--", ms=3,
                  color="tab:green", label="day of week")  # fmt: skip
    days.set_xticks(range(7), DAY_NAMES)
    bottom.axhline(1.0, color="grey", lw=0.8, ls=":")
    fig.legend(loc="lower right", fontsize=8)
    return fig


# ------------------------------------------------------------------------ studies
def estimate_histograms(draws: Mapping[float, Mapping[str, np.ndarray]], hours: int) -> Figure:
    """Per true rate, histograms of each estimator's replicated estimates (case study)."""
    fig = figure((8, 3.2 * len(draws)))
    axes = np.atleast_1d(fig.subplots(len(draws), 1))
    for ax, (rate, est) in zip(axes, draws.items(), strict=True):
        for name in ("full", "naive", "moment", "cho"):
            ax.hist(est[name], bins=40, alpha=0.5, label=name, density=True)
        ax.axvline(rate, color="k", ls="--", lw=1)
        ax.set(title=f"rate {rate}/h, {hours} hourly visits",
               xlabel="estimate (changes per hour)", ylabel="density")  # fmt: skip
        ax.legend(fontsize=8)
    return fig


def revisit_curves(curves: pd.DataFrame, bound: float, ax: Axes | None = None) -> Axes:
    """Share of intervals holding ≥ 2 changes against the visit interval, per rate."""
    ax = _axes(ax, (7, 4.5))
    for rate, part in curves.groupby("rate_per_hour"):
        ax.plot(part.interval_hours, part.p_multiple, label=f"{rate}/h")
    ax.axhline(bound, color="r", lw=1)
    ax.set(xlabel="interval between visits (hours)",
           ylabel="proportion of intervals with ≥ 2 changes")  # fmt: skip
    ax.legend(fontsize=8, ncol=2)
    return ax


def estimator_trajectories(table: pd.DataFrame, title: str, truth: float) -> Figure:
    """Mean with 95% band, and RMSE, of each estimator against the number of crawls."""
    fig = figure((12, 4.5))
    left, right = fig.subplots(1, 2)
    for estimator, part in table.groupby("estimator", sort=False):
        (line,) = left.plot(part.k, part["mean"], label=estimator)
        left.fill_between(part.k, part.band_lo, part.band_hi, color=line.get_color(), alpha=0.12)
        right.plot(part.k, part.rmse, label=estimator)
    left.axhline(truth, color="k", ls="--", lw=1)
    left.set_xscale("log")
    left.set_ylim(0, 2.5 * truth)
    left.set(title=f"{title}: mean and 95% band", xlabel="k (crawls)",
             ylabel="estimate (changes per hour)")  # fmt: skip
    right.set_xscale("log")
    right.set_yscale("log")
    right.set(title="RMSE", xlabel="k (crawls)", ylabel="RMSE (changes per hour)")
    right.legend(fontsize=7, ncol=2)
    return fig


def ratio_by_interval(table: pd.DataFrame) -> Figure:
    """Median estimate/truth and mean |relative error| per method against the interval."""
    fig = figure((12, 4.5))
    left, right = fig.subplots(1, 2)
    for method, part in table.groupby("method", sort=False):
        left.plot(part.interval_hours, part.median_ratio, marker="o", ms=3, label=method)
        right.plot(part.interval_hours, part.mean_abs_rel_error, marker="o", ms=3, label=method)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("visit interval (hours)")
    left.axhline(1.0, color="k", ls="--", lw=1)
    left.set_ylabel("median estimate / true rate")
    right.set_ylabel("mean |relative error|")
    right.legend(fontsize=7, ncol=2)
    return fig


# ------------------------------------------------------------------------ scheduler
def freshness_over_time(result: Mapping[str, Any], dt_series: float = 24.0) -> Axes:
    """Weighted freshness per policy over time (``schedule simulate`` results)."""
    ax = _axes(None, (10, 4.5))
    for name, r in result["policies"].items():
        days = np.arange(1, len(r["series"]) + 1) * dt_series / HOURS_PER_DAY
        ax.plot(days, r["series"], label=f"{name} ({r['freshness']:.3f})",
                lw=2.2 if name in ("bayesrate", "oracle") else 1.2)  # fmt: skip
    s = result["setup"]
    title = f"{s['pages']} URLs, budget {s['budget_per_url_per_day']} fetches/URL/day"
    ax.set(xlabel="day", ylabel="weighted freshness (daily mean)", title=title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    return ax


# ------------------------------------------------------------------------ forecast study
#: bins of predicted P(change) in the reliability panel
RELIABILITY_BINS = np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0])
POINT_ESTIMATORS = ("naive", "cho", "mle")


def _forecast_title(result: Any) -> str:
    return (
        f"{result.source}: {result.n_pages:,} pages, crawl every {result.crawl_every_hours:g} h, "
        f"split {result.split[:10]}, horizon {result.horizon_days:g} d"
    )


def forecast_calibration(result: Any) -> Figure:
    """Predicted vs observed: reliability of P(changes at all) and detected counts.

    ``result`` holds a forecast's scores (a
    :class:`bayesrate.studies.forecast.ForecastResult`: per method ``prob_change``,
    ``expected_count``, ``pit``, ``coverage90``, ``log_score``; per page ``changed`` and
    ``detected``; ``pit_band``; the design for the title); the figures never import the
    study."""
    fig = figure((12, 4.8))
    left, right = fig.subplots(1, 2)
    observed = result.changed.astype(float)
    n_bins = len(RELIABILITY_BINS) - 1
    for name, m in result.methods.items():
        which = np.clip(np.digitize(m.prob_change, RELIABILITY_BINS) - 1, 0, n_bins - 1)
        counts = np.bincount(which, minlength=n_bins)
        used = counts > 0
        pred = np.bincount(which, weights=m.prob_change, minlength=n_bins)[used] / counts[used]
        obs = np.bincount(which, weights=observed, minlength=n_bins)[used] / counts[used]
        left.plot(pred, obs, marker="o", ms=3, label=name)
        groups = np.array_split(np.argsort(m.expected_count), min(20, max(result.n_pages, 1)))
        right.plot(
            [m.expected_count[g].mean() for g in groups if len(g)],
            [result.detected[g].mean() for g in groups if len(g)],
            marker="o",
            ms=3,
            label=name,
        )
    left.plot([0, 1], [0, 1], color="k", lw=1, ls="--")
    left.set_xlabel("predicted P(page changes in the test window)")
    left.set_ylabel("observed fraction that changed (exact history)")
    left.set_title("reliability of 'changes at all'")
    top = max(float(result.detected.mean()) * 3, 0.5)
    right.plot([0, top], [0, top], color="k", lw=1, ls="--")
    right.set_xlabel("predicted mean detected count (pages in 20 equal groups)")
    right.set_ylabel("observed mean detected count")
    right.set_title("detected changes in the test crawl")
    right.legend(fontsize=8)
    fig.suptitle(_forecast_title(result), fontsize=10)
    return fig


def forecast_pit(result: Any, bins: int = 10) -> Figure:
    """Randomised PIT histograms, one panel per method (flat = calibrated)."""
    names = list(result.methods)
    cols = min(3, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig = figure((4 * cols, 3.2 * rows))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, name in zip(axes, names, strict=False):
        m = result.methods[name]
        ax.hist(m.pit, bins=bins, range=(0, 1), density=True, color="C0", alpha=0.8)
        ax.axhline(1.0, color="k", lw=1, ls="--")
        for edge in result.pit_band:
            ax.axvline(edge, color="grey", lw=0.8, ls=":")
        ax.set_title(f"{name}: coverage90 {m.coverage90:.3f}", fontsize=9)
        ax.set_xlabel("randomised PIT")
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(_forecast_title(result), fontsize=10)
    return fig


def forecast_log_scores(result: Any) -> Figure:
    """Mean log predictive probability of the detected count per method (higher is better),
    with the hindsight reference as a dashed line."""
    names = list(result.methods)
    scores = [result.methods[n].log_score for n in names]
    fig = figure((7, 3.8))
    ax = fig.subplots()
    colours = ["C1" if n in POINT_ESTIMATORS else "C0" for n in names]
    bars = ax.barh(names, scores, color=colours)
    for bar, value in zip(bars, scores, strict=True):
        y = bar.get_y() + bar.get_height() / 2
        ax.text(bar.get_width(), y, f" {value:.3f}", va="center", fontsize=8)
    if result.reference is not None:
        ref = result.reference.log_score
        ax.axvline(ref, color="k", ls="--", lw=1, label=f"hindsight reference {ref:.3f}")
        ax.legend(fontsize=8, loc="lower left")
    ax.set_xlabel("mean log P(detected count) per page (higher is better)")
    ax.invert_yaxis()
    ax.set_title(_forecast_title(result), fontsize=9)
    return fig
