"""The calibration report: Markdown with PNG figures a person would rather look at."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate import plots
from bayesrate.constants import DAY_NAMES, DIM_HOUR_OF_WEEK
from bayesrate.draws import stack_draws
from bayesrate.export import markdown_table
from bayesrate.observations import Observations
from bayesrate.priors import PriorSet

TOP_DOMAINS = 15


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
    lines = [f"# Calibration report: {dataset}", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += _data_section(obs) + _fits_section(fits) + _ppc_section(ppc, out)
    lines += _misses_section(ppc, recommended)
    lines += _comparison_section(comparison, out)
    lines += _priors_section(artifacts, fits, recommended, out)
    lines += [f"- {name}: not exported — {why}" for name, why in refused.items()]
    lines += ["", "## Timing (seconds)", "", "```", json.dumps(
        {k: round(v, 1) for k, v in seconds.items()}, indent=1), "```", ""]  # fmt: skip
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _data_section(obs: Observations) -> list[str]:
    summary = obs.summary()
    return [
        "## Data",
        "",
        f"- {summary['pages']:,} pages in {summary['domains']:,} domains, "
        f"{summary['visits']:,} visits, {summary['changes']:,} detected changes, "
        f"{summary['span_days']:,.0f} days; fingerprint `{summary['fingerprint'][:16]}`",
        f"- pages never changed: {summary['pages_never_changed']}; changed at every visit: "
        f"{summary['pages_changed_every_visit']}",
        *[f"- {n}" for n in obs.notes],
        "",
    ]


def _fits_section(fits: Mapping[str, Any]) -> list[str]:
    lines = [
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
            pages = extra.get("pages") or (
                f"{extra.get('pages_centred')} pages centred, "
                f"{extra.get('pages_noncentred')} non-centred"
            )
            lines.append(f"|  | parameterisation: {pages} |  |  |  |  |  |  |  |")
        changed = _config_changes(model)
        if changed:
            lines.append(f"|  | config: {changed} |  |  |  |  |  |  |  |")
    return lines


def _config_changes(model) -> str:
    """The model's settings that differ from its class defaults, as ``key value`` pairs."""
    defaults = type(model).default_model_config
    return ", ".join(
        f"{key} {value}"
        for key, value in sorted(model.model_config.items())
        if key not in defaults or defaults[key] != value
    )


def _ppc_section(ppc: Mapping[str, Any], out: Path) -> list[str]:
    lines = ["", "## Posterior predictive checks", "",
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
    lines += _periodicity_lines(ppc)
    for name in ppc:
        for path in ppc[name].plot(out, prefix=f"ppc-{name}"):
            lines += [f"![PPC {name}]({path.name})", ""]

    return lines


def _periodicity_lines(ppc: Mapping[str, Any], top: int = 5) -> list[str]:
    """Per model, the pages whose detections crowd into one hour-of-week cell."""
    lines = []
    for name in ppc:
        result = ppc[name].result("conditional")
        table = result.periodic_pages
        if table is None or not len(table):
            continue
        flagged = table[table["p_value"] < 0.05]
        lines.append(
            f"Per-page periodicity, {name} (conditional; {result.timezone}): "
            f"{len(flagged)} of {len(table)} pages with ≥ 5 detections have more of them in "
            f"their busiest hour-of-week cell than the model replicates (p < 0.05; about 5% "
            f"expected by chance)." + (" Most periodic:" if len(flagged) else "")
        )
        for row in flagged.head(top).itertuples():
            lines.append(
                f"- `{row.page}`: {row.observed_share:.0%} of {row.detections} detections at "
                f"{row.top_cell} (replicated {row.replicated_share:.0%}, p = {row.p_value:.3f})"
            )
        lines.append("")
    return lines


def _misses_section(ppc: Mapping[str, Any], recommended: str | None) -> list[str]:
    """Per model (the recommended one first), each extreme statistic: by how much it misses
    (observed against the replicated mean and 90% interval) and which way."""
    names = sorted(ppc, key=lambda name: name != recommended)
    lines = ["## What the checks still miss", "",
             "Each extreme statistic: observed against replicated (mean, 90% interval); for "
             "the chi-square discrepancies, the observed one is averaged over the draws.",
             ""]  # fmt: skip
    for name in names:
        tag = " (recommended)" if name == recommended else ""
        for replication in ppc[name].replications:
            result = ppc[name].result(replication)
            table = result.table()
            extreme = table[table["extreme"]]
            if not len(extreme):
                lines.append(f"- **{name}**{tag}, {replication}: no statistic is extreme.")
                continue
            for row in extreme.itertuples():
                lines.append(
                    f"- **{name}**{tag}, {replication}, `{row.statistic}` "
                    f"(p = {row.p_value:.3f}): observed {row.observed:,.3g}, replicated "
                    f"{row.replicated_mean:,.3g} ({row.replicated_q05:,.3g}–"
                    f"{row.replicated_q95:,.3g}). {_miss_reason(row, result)}"
                )
    return [*lines, ""]


def _miss_reason(row, result) -> str:
    """Which way the statistic of ``row`` (of :meth:`PPCResult.table`) misses, in the
    data's terms."""
    high = row.observed > row.replicated_mean
    if row.statistic == "gap_cv":
        if high:
            return ("The gaps between a page's detections vary more than the model "
                    "replicates: changes come in bursts its rates do not produce.")  # fmt: skip
        return "The gaps between a page's detections are more regular than replicated."
    if row.statistic == "hour_of_day_chi2":
        return _share_reason(result.hour_observed, result.hour_replicated,
                             [f"{h:02d}h" for h in range(len(result.hour_observed))],
                             f"hour of day ({result.timezone})")  # fmt: skip
    if row.statistic == "day_of_week_chi2":
        return _share_reason(result.dow_observed, result.dow_replicated, list(DAY_NAMES),
                             f"day of week ({result.timezone})")  # fmt: skip
    if row.statistic == "top_hour_of_week_share":
        return ("Pages' detections crowd into one hour-of-week cell more than replicated "
                "(scheduled jobs; the per-page periodicity list above names them).")  # fmt: skip
    return f"The model replicates too {'little' if high else 'much'}: {row.description}."


def _share_reason(observed, replicated, labels, what: str, top: int = 2) -> str:
    """The cells whose share of detections is furthest above and below the replicated."""
    obs = np.asarray(observed, dtype=float)
    rep = np.asarray(replicated, dtype=float)
    obs_share = obs / obs.sum()
    rep_share = (rep / rep.sum(axis=1, keepdims=True)).mean(axis=0)
    excess = obs_share - rep_share
    order = np.argsort(excess)
    more = [i for i in order[::-1] if excess[i] > 0][:top]
    fewer = [i for i in order if excess[i] < 0][:top]

    def cells(index):
        return ", ".join(f"{labels[i]} {obs_share[i]:.1%} (replicated {rep_share[i]:.1%})"
                         for i in index)  # fmt: skip

    return f"Detections by {what}: more than replicated on {cells(more)}; fewer on {cells(fewer)}."


def _comparison_section(comparison, out: Path) -> list[str]:
    lines = ["## Model comparison", "", markdown_table(comparison.table), "",
              f"Verdict: {comparison.verdict}", "",
              "Pareto k per model: " + "; ".join(
                  f"{n}: {k['good']} good, {k['bad']} bad, {k['very_bad']} very bad"
                  for n, k in comparison.pareto_k.items()), ""]  # fmt: skip
    loo_png = plots.save(plots.loo(comparison.table).figure, out / "loo.png")
    lines += [f"![LOO]({loo_png.name})", ""]

    return lines


def _priors_section(artifacts, fits, recommended, out: Path) -> list[str]:
    lines = ["## Exported priors", ""]
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
        largest = sorted(priors.domains, key=lambda d: -(priors.pages_of(d) or 0))
        for d in largest[:TOP_DOMAINS]:
            p = priors.domains[d]
            pages = priors.pages_of(d)
            lines.append(f"| {d} | {'' if pages is None else pages} | {p.alpha:.3g} "
                         f"| {p.beta:.3g} | {p.mean:.3g} |")  # fmt: skip
        axes = plots.domain_rates(fits[name].page_summary_, priors, label=f"({name})")
        figure = plots.save(axes.figure, out / f"rates-{name}.png")
        lines += ["", f"![rates {name}]({figure.name})", ""]
        post = fits[name].idata_["posterior"]
        if priors.hour_of_week is not None and "hour_of_week_multiplier" in post:
            draws = stack_draws(post["hour_of_week_multiplier"], DIM_HOUR_OF_WEEK)
            fig = plots.save(
                plots.hour_of_week(draws, priors.timezone), out / f"hour-of-week-{name}.png"
            )
            lines += [f"![hour of week]({fig.name})", ""]
    return lines
