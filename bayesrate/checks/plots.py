"""Figures for checks and reports (matplotlib, Agg backend, PNG files)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesrate.constants import DAY_NAMES

if TYPE_CHECKING:
    from bayesrate.checks.ppc import PPCResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _band(ax, x, replicated, label="replicated 5-95%", color="tab:blue"):
    lo, mid, hi = np.nanquantile(replicated, [0.05, 0.5, 0.95], axis=0)
    ax.fill_between(x, lo, hi, color=color, alpha=0.3, step="mid", label=label)
    ax.plot(x, mid, color=color, lw=1, drawstyle="steps-mid")


def plot_ppc(result: PPCResult, directory: Path, prefix: str = "ppc") -> list[Path]:
    """One PNG with four panels: changes per page, hour of day, day of week, gap Q-Q."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))

    ax = axes[0, 0]
    edges = np.unique(np.round(np.geomspace(1, max(result.changes_observed.max(), 2) + 1, 25)))
    edges = np.concatenate([[0], edges])
    centres = 0.5 * (edges[:-1] + edges[1:])
    obs_hist = np.histogram(result.changes_observed, edges)[0]
    rep_hist = np.stack([np.histogram(r, edges)[0] for r in result.changes_replicated])
    _band(ax, centres, rep_hist)
    ax.plot(centres, obs_hist, "k.", label="observed")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("detected changes per page")
    ax.set_ylabel("pages")
    ax.legend(fontsize=8)
    ax.set_title("Detected changes per page")

    ax = axes[0, 1]
    _band(ax, np.arange(24), result.hour_replicated)
    ax.plot(np.arange(24), result.hour_observed, "k.", label="observed")
    ax.set_xlabel(f"hour of day of the detecting visit ({result.timezone})")
    ax.set_ylabel("detections")
    ax.set_title("Detections by hour of day")
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    _band(ax, np.arange(7), result.dow_replicated)
    ax.plot(np.arange(7), result.dow_observed, "k.", label="observed")
    ax.set_xticks(range(7), DAY_NAMES)
    ax.set_ylabel("detections")
    ax.set_title("Detections by day of week")
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
    ax.set_xlabel("Exp(1) quantile")
    ax.set_ylabel("gap between detections / page mean gap")
    ax.set_title("Censored exponential Q-Q of gaps")

    pvals = [f"{s.name}={s.p_value:.2f}" for s in result.statistics]
    half = (len(pvals) + 1) // 2
    fig.suptitle(
        "Posterior predictive checks — p-values: "
        + ", ".join(pvals[:half])
        + "\n"
        + ", ".join(pvals[half:]),
        fontsize=9,
    )
    fig.tight_layout()
    path = directory / f"{prefix}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
