"""The calibration report: Markdown with PNG figures a person would rather look at."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.checks.plots import _pyplot
from bayesrate.constants import DAY_NAMES, DIM_HOUR_OF_WEEK
from bayesrate.draws import stack_draws
from bayesrate.export import markdown_table
from bayesrate.observations import Observations
from bayesrate.priors import PriorSet

TOP_DOMAINS = 15


def plot_domain_rates(model, priors: PriorSet | None, path: Path) -> Path:
    """Page posterior-mean rates per domain (largest domains) with the exported prior."""
    from scipy import stats

    plt = _pyplot()
    table = model.page_summary_
    counts = table["domain"].value_counts()
    top = counts.index[:TOP_DOMAINS][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(top) + 1.5))
    for i, domain in enumerate(top):
        rates = table.loc[table["domain"] == domain, "rate_per_day"].to_numpy()
        jitter = np.linspace(-0.15, 0.15, len(rates)) if len(rates) > 1 else np.zeros(1)
        ax.plot(rates, i + jitter, "o", ms=3, color="tab:blue", alpha=0.7)
        if priors is not None and domain in priors.domains:
            p = priors.domains[domain]
            lo, hi = stats.gamma.ppf([0.05, 0.95], p.alpha, scale=1 / p.beta)
            ax.plot([max(lo, 1e-6), hi], [i + 0.3, i + 0.3], color="tab:orange", lw=2)
            ax.plot(p.mean, i + 0.3, "|", color="tab:orange", ms=10)
    ax.set_yticks(range(len(top)), [f"{d} ({counts[d]})" for d in top], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("changes per day (posterior mean per page; orange: exported prior 5-95%, mean)")
    ax.set_title(f"Page change rates in the {len(top)} largest domains ({model.model_type})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_hour_of_week(model, path: Path) -> Path:
    """Hour-of-week multipliers with 90% bands, and the hour-of-day / day-of-week effects."""
    plt = _pyplot()
    post = model.idata_["posterior"]
    mult = stack_draws(post["hour_of_week_multiplier"], DIM_HOUR_OF_WEEK)
    tz = post["hour_of_week_multiplier"].attrs.get("timezone", model.model_config.get("timezone"))
    lo, mid, hi = np.quantile(mult, [0.05, 0.5, 0.95], axis=0)
    fig, axes = plt.subplots(2, 1, figsize=(11, 6))
    ax = axes[0]
    x = np.arange(168)
    ax.fill_between(x, lo, hi, alpha=0.3, step="mid")
    ax.plot(x, mid, drawstyle="steps-mid")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xticks(np.arange(0, 168, 24), DAY_NAMES)
    ax.set_ylabel("rate multiplier")
    ax.set_title(f"Hour-of-week rate multipliers ({tz}; median and 90% band)")
    ax = axes[1]
    by_hour = mult.reshape(len(mult), 7, 24).mean(axis=1)
    by_day = mult.reshape(len(mult), 7, 24).mean(axis=2)
    q = np.quantile(by_hour, [0.05, 0.5, 0.95], axis=0)
    ax.errorbar(np.arange(24), q[1], yerr=[q[1] - q[0], q[2] - q[1]], fmt="o-", ms=3,
                label="hour of day")  # fmt: skip
    ax.set_xlabel("hour of day")
    ax.set_ylabel("mean multiplier")
    ax2 = ax.twiny()
    q = np.quantile(by_day, [0.05, 0.5, 0.95], axis=0)
    ax2.errorbar(np.arange(7), q[1], yerr=[q[1] - q[0], q[2] - q[1]], fmt="s--", ms=3,
                 color="tab:green", label="day of week")  # fmt: skip
    ax2.set_xticks(range(7), DAY_NAMES)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    fig.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_loo(comparison, path: Path) -> Path:
    plt = _pyplot()
    table = comparison.table
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(table) + 1.5))
    y = np.arange(len(table))[::-1]
    ax.errorbar(table["elpd"], y, xerr=table["se"], fmt="o", label="ELPD-LOO ± SE")
    ax.set_yticks(y, table.index)
    ax.set_xlabel("expected log predictive density of a held-out page (higher is better)")
    ax.set_title("Model comparison (PSIS-LOO over pages)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(
    out: Path,
    *,
    dataset: str,
    obs: Observations,
    fits: Mapping[str, Any],
    ppc: Mapping[str, Any],
    comparison,
    artifacts: Mapping[str, Path],
    refused: Mapping[str, str],
    recommended: str | None,
    seconds: Mapping[str, float],
    command: str = "",
) -> Path:
    """Write ``report.md`` and its figures into ``out``; returns the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    summary = obs.summary()
    lines = [f"# Calibration report: {dataset}", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += [
        "## Data",
        "",
        f"- {summary['pages']:,} pages in {summary['domains']:,} domains, "
        f"{summary['visits']:,} visits, {summary['changes']:,} detected changes, "
        f"{summary['span_days']:,.0f} days; fingerprint `{summary['fingerprint'][:16]}`",
        f"- pages never changed: {summary['pages_never_changed']}; changed at every visit: "
        f"{summary['pages_changed_every_visit']}",
        *[f"- {n}" for n in obs.notes],
        "",
        "## Fits and diagnostics",
        "",
        "| model | method | seconds | r_hat_max | ess_bulk_min | ess_tail_min | divergences "
        "| grad evals/draw | converged |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, model in fits.items():
        d = model.diagnostics_
        lines.append(
            f"| {name} | {d.method} | {d.seconds:.1f} | {d.r_hat_max:.4f} | {d.ess_bulk_min:.0f} "
            f"| {d.ess_tail_min:.0f} | {d.divergences} | {d.grad_evals_per_draw:.1f} "
            f"| {'yes' if model.converged_ else '**no**'} |"
        )
        extra = d.extra.get("parameterisation") if d.extra else None
        if extra:
            lines.append(
                f"|  | parameterisation: {extra.get('pages_centred')} pages centred, "
                f"{extra.get('pages_noncentred')} non-centred |  |  |  |  |  |  |  |"
            )
    lines += ["", "## Posterior predictive checks", "",
              "Replicated detections on the same visit times (not latent changes); "
              "p = P(T(rep) ≥ T(obs)); **bold**: extreme at α = 0.05. *cond.*: each page "
              "replicated from its own posterior; *mixed*: fresh page rates from the fitted "
              "population — the replication that judges what prior export ships.", ""]  # fmt: skip
    columns = [(name, r) for name in ppc for r in ppc[name].replications]
    stat_names = [s.name for s in next(iter(ppc.values())).conditional.statistics] if ppc else []
    short = {"conditional": "cond.", "mixed": "mixed"}
    lines += ["| statistic | " + " | ".join(f"{n} {short[r]}" for n, r in columns) + " |",
              "|" + " --- |" * (len(columns) + 1)]  # fmt: skip
    for stat in stat_names:
        cells = []
        for name, replication in columns:
            result = ppc[name].result(replication)
            s = next(x for x in result.statistics if x.name == stat)
            text = f"{s.p_value:.3f}"
            cells.append(f"**{text}**" if s.extreme() else text)
        lines.append(f"| {stat} | " + " | ".join(cells) + " |")
    lines.append("")
    for name in ppc:
        for path in ppc[name].plot(out, prefix=f"ppc-{name}"):
            lines += [f"![PPC {name}]({path.name})", ""]

    lines += ["## Model comparison", "", markdown_table(comparison.table), "",
              f"Verdict: {comparison.verdict}", "",
              "Pareto k per model: " + "; ".join(
                  f"{n}: {k['good']} good, {k['bad']} bad, {k['very_bad']} very bad"
                  for n, k in comparison.pareto_k.items()), ""]  # fmt: skip
    lines += [f"![LOO]({plot_loo(comparison, out / 'loo.png').name})", ""]

    lines += ["## Exported priors", ""]
    for name, path in artifacts.items():
        priors = PriorSet.load(path)
        g = priors.global_prior
        forced = " (**forced**)" if priors.forced else ""
        mark = " — **recommended**" if name == recommended else ""
        lines += [
            f"### {name}{mark}{forced}",
            "",
            f"Artifact: `{path}`; global fallback Gamma(α={g.alpha:.3g}, β={g.beta:.3g} days), "
            f"mean {g.mean:.3g} changes/day.",
            "",
            "| domain | pages | α | β (days) | mean/day |",
            "| --- | --- | --- | --- | --- |",
        ]
        extra = priors.metadata.get("domain_extra", {})
        largest = sorted(priors.domains, key=lambda d: -extra.get(d, {}).get("n_pages", 0))
        for d in largest[:TOP_DOMAINS]:
            p = priors.domains[d]
            lines.append(f"| {d} | {extra.get(d, {}).get('n_pages', '')} | {p.alpha:.3g} "
                         f"| {p.beta:.3g} | {p.mean:.3g} |")  # fmt: skip
        figure = plot_domain_rates(fits[name], priors, out / f"rates-{name}.png")
        lines += ["", f"![rates {name}]({figure.name})", ""]
        if priors.hour_of_week is not None:
            fig = plot_hour_of_week(fits[name], out / f"hour-of-week-{name}.png")
            lines += [f"![hour of week]({fig.name})", ""]
    for name, why in refused.items():
        lines += [f"- {name}: not exported — {why}"]
    lines += ["", "## Timing (seconds)", "", "```", json.dumps(
        {k: round(v, 1) for k, v in seconds.items()}, indent=1), "```", ""]  # fmt: skip
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
