"""Figures of the forecast study; each function returns a matplotlib ``Figure``.

No backend is chosen here: the caller (the command line uses Agg) decides how figures are
shown or saved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bayesrate.studies.forecast import PIT_BAND, ForecastResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PIT_BINS = 10
RELIABILITY_BINS = np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0])


def _title(result: ForecastResult) -> str:
    return (
        f"{result.source}: {result.n_pages:,} pages, crawl every {result.crawl_every_hours:g} h, "
        f"split {result.split[:10]}, horizon {result.horizon_days:g} d"
    )


def calibration_figure(result: ForecastResult) -> Figure:
    """Predicted vs observed: P(changed at all) and expected vs observed detected counts."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    observed = result.changed.astype(float)
    for name, m in result.methods.items():
        which = np.clip(
            np.digitize(m.prob_change, RELIABILITY_BINS) - 1, 0, len(RELIABILITY_BINS) - 2
        )
        counts = np.bincount(which, minlength=len(RELIABILITY_BINS) - 1)
        used = counts > 0
        pred = np.bincount(which, weights=m.prob_change, minlength=len(counts))[used] / counts[used]
        obs = np.bincount(which, weights=observed, minlength=len(counts))[used] / counts[used]
        left.plot(pred, obs, marker="o", ms=3, label=name)
        order = np.argsort(m.expected_count)
        chunks = np.array_split(order, min(20, max(len(order), 1)))
        right.plot(
            [m.expected_count[c].mean() for c in chunks if len(c)],
            [result.detected[c].mean() for c in chunks if len(c)],
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
    fig.suptitle(_title(result), fontsize=10)
    fig.tight_layout()
    return fig


def pit_figure(result: ForecastResult) -> Figure:
    """Randomised PIT histograms, one panel per method (flat = calibrated)."""
    import matplotlib.pyplot as plt

    names = list(result.methods)
    cols = min(3, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        m = result.methods[name]
        ax.hist(m.pit, bins=PIT_BINS, range=(0, 1), density=True, color="C0", alpha=0.8)
        ax.axhline(1.0, color="k", lw=1, ls="--")
        for edge in PIT_BAND:
            ax.axvline(edge, color="grey", lw=0.8, ls=":")
        ax.set_title(f"{name}: coverage90 {m.coverage90:.3f}", fontsize=9)
        ax.set_xlabel("randomised PIT")
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(_title(result), fontsize=10)
    fig.tight_layout()
    return fig


def log_score_figure(result: ForecastResult) -> Figure:
    """Mean log predictive probability of the detected count per method (higher is better)."""
    import matplotlib.pyplot as plt

    names = list(result.methods)
    scores = [result.methods[n].log_score for n in names]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    bars = ax.barh(
        names, scores, color=["C1" if n in ("naive", "cho", "mle") else "C0" for n in names]
    )
    for bar, value in zip(bars, scores, strict=True):
        ax.text(
            bar.get_width(),
            bar.get_y() + bar.get_height() / 2,
            f" {value:.3f}",
            va="center",
            fontsize=8,
        )
    if result.reference is not None:
        ref = result.reference.log_score
        ax.axvline(ref, color="k", ls="--", lw=1, label=f"hindsight reference {ref:.3f}")
        ax.legend(fontsize=8, loc="lower left")
    ax.set_xlabel("mean log P(detected count) per page (higher is better)")
    ax.invert_yaxis()
    ax.set_title(_title(result), fontsize=9)
    fig.tight_layout()
    return fig


FIGURES = {
    "calibration": calibration_figure,
    "pit": pit_figure,
    "log-score": log_score_figure,
}
