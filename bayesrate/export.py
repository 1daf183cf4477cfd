"""Posterior → per-domain Gamma priors, and the versioned artifact directory.

For a *new* page of domain ``d`` the prior predictive of its (time-averaged) rate integrates
over the posterior of that domain's hyperparameters. The hierarchical and modulated models
store, per draw, ``domain_log_rate_mean[d]`` and ``page_log_rate_sd`` (log-rate per hour) —
``log λ_new ~ Normal(m_d, s)`` given a draw — so the predictive moments are exact
averages over draws of the log-normal moments::

    E[λ]  = mean over draws of exp(m_d + s²/2)
    E[λ²] = mean over draws of exp(2 m_d + 2 s²)

and are moment-matched to Gamma(α, β) with α = E[λ]²/Var λ, β = E[λ]/Var λ (per day). A page
of an unseen domain uses ``m ~ Normal(global_log_rate_mean, domain_log_rate_sd)`` too,
i.e. ``log λ ~ Normal(g, sqrt(sd_domain² + s²))``. The modulated model adds the posterior
mean of its hour-of-week multipliers (normalised to mean 1).

:func:`write_artifact` writes ``models/<dataset>/<model>/`` with ``priors.json``, the fitted
result (``fit.nc``) and a model card (``README.md``), and refuses when the convergence or
PPC gates fail unless forced — a forced artifact says so in both files.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.atomic import atomic_directory
from bayesrate.constants import DIM_DOMAIN, HOURS_PER_DAY
from bayesrate.draws import stack_draws
from bayesrate.errors import ArtifactError
from bayesrate.priors import GammaPrior, PriorSet

#: the population statistics a new page's prior speaks to, judged on the *mixed*
#: replication (fresh page rates from the fitted population, ``checks.ppc``): conditional
#: replicates of pages with hundreds of intervals reproduce their own counts whatever the
#: population. The dispersion gate is on the log scale (the raw SD of counts is dominated
#: by the two or three busiest pages).
POPULATION_GATES = ("mean_changes", "sd_log_changes", "frac_never_changed",
                    "frac_changed_every_visit")  # fmt: skip
#: PPC statistics that gate export, per model type: replication -> statistics. The
#: hour-of-week shape of a modulated model is judged conditionally (its realized
#: chi-square needs each draw's own expected counts).
PPC_GATES: dict[str, dict[str, tuple[str, ...]]] = {
    "hierarchical": {"mixed": POPULATION_GATES},
    "modulated": {"mixed": POPULATION_GATES,
                  "conditional": ("hour_of_day_chi2", "day_of_week_chi2")},
}  # fmt: skip
EXPORTABLE = tuple(PPC_GATES)
FIT_FILE = "fit.nc"
#: draws kept in an artifact's fit (the full fit is written next to the report)
ARTIFACT_DRAWS = 500
#: posterior variables kept in an artifact's fit: what page tables, prior export and the
#: scheduler's hour-of-week multipliers need (sampler-internal variables are dropped)
ARTIFACT_VARS = (
    "log_rate", "rate", "mu_global", "sigma_domain", "mu_domain", "sigma_page",
    "domain_log_rate_mean", "global_log_rate_mean", "domain_log_rate_sd", "page_log_rate_sd",
    "hour_effect", "day_effect", "log_multiplier", "hour_of_week_multiplier",
)  # fmt: skip
CARD_FILE = "README.md"
NEW_DOMAIN = "(new domain)"


def markdown_table(frame) -> str:
    """A pandas DataFrame as a Markdown table (index included), numbers to 2 decimals."""

    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "" if not np.isfinite(v) else f"{v:.2f}"
        return str(v)

    header = ["", *map(str, frame.columns)]
    rows = [[str(i), *map(cell, r)] for i, r in zip(frame.index, frame.to_numpy(), strict=True)]
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def predictive_moments(posterior) -> dict[str, tuple[float, float]]:
    """Mean and variance (per day) of a new page's rate, per domain and for a new domain.

    Parameters
    ----------
    posterior
        The ``posterior`` group of a hierarchical or modulated fit.
    """
    for name in ("domain_log_rate_mean", "page_log_rate_sd", "global_log_rate_mean",
                 "domain_log_rate_sd"):  # fmt: skip
        if name not in posterior:
            raise ArtifactError(
                f"the fit has no {name!r}: prior export needs a model with domain structure "
                f"({', '.join(EXPORTABLE)})"
            )
    m = stack_draws(posterior["domain_log_rate_mean"], DIM_DOMAIN)  # (S, D)
    s = stack_draws(posterior["page_log_rate_sd"])[:, None]  # (S, 1)
    g = stack_draws(posterior["global_log_rate_mean"])[:, None]
    sd_domain = stack_draws(posterior["domain_log_rate_sd"])[:, None]
    labels = [str(x) for x in posterior[DIM_DOMAIN].values]

    def moments(mu, var):
        first = np.exp(mu + var / 2).mean(axis=0) * HOURS_PER_DAY
        second = np.exp(2 * mu + 2 * var).mean(axis=0) * HOURS_PER_DAY**2
        return first, second - first**2

    mean_d, var_d = moments(m, s**2)
    mean_g, var_g = moments(g, sd_domain**2 + s**2)
    out = {d: (float(a), float(b)) for d, a, b in zip(labels, mean_d, var_d, strict=True)}
    out[NEW_DOMAIN] = (float(mean_g[0]), float(var_g[0]))
    return out


def domain_priors(model, *, metadata: Mapping[str, Any] | None = None) -> PriorSet:
    """Moment-matched Gamma priors per domain (per day) from a fitted model."""
    model._require_fit()
    post = model.idata_["posterior"]
    moments = predictive_moments(post)
    const = model.idata_["constant_data"]
    page_domain = np.asarray(const["domain"]).astype(str)
    labels, counts = np.unique(page_domain, return_counts=True)
    n_pages = dict(zip(labels.tolist(), counts.tolist(), strict=True))
    domains = {d: GammaPrior.from_moments(*pair) for d, pair in moments.items() if d != NEW_DOMAIN}
    multipliers = None
    timezone = "UTC"
    if "hour_of_week_multiplier" in post:
        mult = stack_draws(post["hour_of_week_multiplier"], "hour_of_week").mean(axis=0)
        multipliers = mult / mult.mean()
        timezone = str(post["hour_of_week_multiplier"].attrs.get("timezone", "UTC"))
    meta = {
        "model": model.model_type,
        "config_hash": model.config_hash,
        "data_fingerprint": model.data_fingerprint_,
        "predictive_moments_per_day": {
            d: {"mean": mean, "variance": var} for d, (mean, var) in moments.items()
        },
        "domain_extra": {d: {"n_pages": int(n_pages.get(d, 0))} for d in domains},
        **dict(metadata or {}),
    }
    return PriorSet(
        global_prior=GammaPrior.from_moments(*moments[NEW_DOMAIN]),
        domains=domains,
        hour_of_week=multipliers,
        timezone=timezone,
        metadata=meta,
    )


def gate_failures(model, ppc=None) -> list[str]:
    """Why an artifact from this fit may not be exported (empty list: it may)."""
    failures = []
    if model.model_type not in EXPORTABLE:
        failures.append(f"model {model.model_type!r} has no domain structure to export")
    if not model.converged_:
        diag = model.diagnostics_
        reasons = "; ".join(diag.failures) if diag and diag.failures else "see diagnostics"
        failures.append(f"convergence gates failed: {reasons}")
    if ppc is None:
        failures.append("no posterior predictive checks were run")
    else:
        bad = ppc.gate_failures(PPC_GATES.get(model.model_type, {}))
        if bad:
            failures.append("posterior predictive checks failed: " + ", ".join(bad))
    return failures


def write_artifact(
    model,
    *,
    dataset: str,
    root: str | Path = "models",
    ppc=None,
    comparison=None,
    force: bool = False,
    command: str = "",
    notes: Sequence[str] = (),
) -> Path:
    """Write ``<root>/<dataset>/<model>/`` (priors.json, fit.nc, README.md).

    Raises
    ------
    ArtifactError
        When the gates fail and ``force`` is false (nothing is written then).
    """
    failures = gate_failures(model, ppc)
    if failures and not force:
        raise ArtifactError(
            f"refusing to export {model.model_type} priors for {dataset}: "
            + " | ".join(failures)
            + " (use --force to export anyway; the artifact will say it was forced)"
        )
    from bayesrate import __version__
    from bayesrate.models.base import library_versions

    target = Path(root) / dataset / model.model_type
    meta = {
        "dataset": dataset,
        "created_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": library_versions() | {"bayesrate": __version__},
        "forced": bool(failures),
        "gate_failures": failures,
        "gates": {
            "diagnostics": bool(model.converged_),
            "ppc": ppc is not None and not ppc.gate_failures(PPC_GATES.get(model.model_type, {})),
        },
        "ppc_p_values": None if ppc is None else {r: ppc.p_values(r) for r in ppc.replications},
        "loo": None if comparison is None else comparison.to_dict(),
        "command": command,
    }
    priors = domain_priors(model, metadata=meta)
    card = model_card(model, priors, dataset=dataset, ppc=ppc, comparison=comparison,
                      failures=failures, command=command, notes=notes)  # fmt: skip
    with atomic_directory(target) as directory:
        save_compact_fit(model, directory / FIT_FILE)
        priors.save(directory)
        (directory / CARD_FILE).write_text(card)
    return target


def save_compact_fit(model, path: Path, max_draws: int = ARTIFACT_DRAWS) -> Path:
    """Save a compact copy of a fit: thinned draws, float32, the variables that matter.

    It loads with ``RateModel.load`` like a full fit (same attributes, config hash and data
    fingerprint), and says what was dropped in the attribute ``bayesrate_compact``.
    """
    import math

    import xarray as xr

    model._require_fit()
    tree = model.idata_
    post = tree["posterior"].to_dataset()
    total = post.sizes["chain"] * post.sizes["draw"]
    step = max(1, math.ceil(total / max_draws))
    keep = [v for v in ARTIFACT_VARS if v in post.data_vars]
    slim = post[keep].isel(draw=slice(None, None, step))
    slim = slim.map(lambda da: da.astype("float32") if da.dtype.kind == "f" else da)
    groups = {"posterior": slim}
    if "sample_stats" in tree.children:
        stats = tree["sample_stats"].to_dataset()
        wanted = [v for v in ("diverging", "n_steps", "energy", "step_size") if v in stats]
        groups["sample_stats"] = stats[wanted].isel(draw=slice(None, None, step))
    if "constant_data" in tree.children:
        groups["constant_data"] = tree["constant_data"].to_dataset()
    compact = xr.DataTree.from_dict(groups)
    compact.attrs = dict(tree.attrs)
    compact.attrs["bayesrate_compact"] = (
        f"every {step}th draw of {total} (float32); variables {', '.join(keep)}; "
        "the log-likelihood and sampler-internal variables are omitted"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    encoding = {
        "/" + g: {
            v: {"zlib": True, "complevel": 4} for v in ds.data_vars if ds[v].dtype.kind != "U"
        }
        for g, ds in groups.items()
    }
    compact.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    return path


def _diagnostics_table(diag: Mapping[str, Any]) -> str:
    fields = [("r_hat_max", ".4f"), ("ess_bulk_min", ".0f"), ("ess_tail_min", ".0f"),
              ("divergences", ""), ("seconds", ".1f"), ("grad_evals_per_draw", ".1f"),
              ("converged", "")]  # fmt: skip
    values = []
    for name, fmt in fields:
        value = diag.get(name)
        values.append(format(value, fmt) if fmt and isinstance(value, (int, float)) else str(value))
    return "\n".join([
        "| " + " | ".join(n for n, _ in fields) + " |",
        "|" + " --- |" * len(fields),
        "| " + " | ".join(values) + " |",
    ])  # fmt: skip


def model_card(model, priors: PriorSet, *, dataset, ppc, comparison, failures, command, notes):
    """The artifact's README: data, model, sampler, diagnostics, PPC, LOO, priors."""
    attrs = model.idata_.attrs
    diag = model.diagnostics_.to_dict() if model.diagnostics_ else {}
    const = model.idata_["constant_data"]
    lines = [f"# {dataset} / {model.model_type}", ""]
    if failures:
        lines += ["> **FORCED EXPORT** — gates failed:", ""]
        lines += [f"> - {f}" for f in failures] + [""]
    lines += [
        "## Data",
        "",
        f"- dataset: `{dataset}`; fingerprint `{attrs.get('bayesrate_data_fingerprint', '')}`",
        f"- pages: {const.sizes.get('page', 0)}; visits: {int(np.sum(const['n_visits']))}; "
        f"detected changes: {int(np.sum(const['n_changes']))}",
        *[f"- note: {n}" for n in notes],
        "",
        "## Model",
        "",
        f"- type: `{model.model_type}`; config hash `{model.config_hash}`",
        f"- config: `{json.dumps(model.model_config, sort_keys=True)}`",
        f"- method: `{attrs.get('bayesrate_method', '')}`; sampler settings: "
        f"`{attrs.get('bayesrate_sampler_config', '')}`",
        f"- versions: `{attrs.get('bayesrate_versions', '')}`",
        f"- `{FIT_FILE}` here is compact: thinned to at most {ARTIFACT_DRAWS} draws, float32, "
        "key variables only; the full fit is written next to the calibration report",
        "",
        "## Diagnostics",
        "",
        _diagnostics_table(diag),
        "",
    ]  # fmt: skip
    if ppc is not None:
        gates = PPC_GATES.get(model.model_type, {})
        lines += ["## Posterior predictive checks", "",
                  "Conditional: each page replicated from its own posterior; mixed: fresh "
                  "page rates from the fitted population (export is decided on it).", "",
                  "| replication | statistic | observed | replicated mean | p-value | gate "
                  "| extreme |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for _, row in ppc.table().iterrows():
            gated = row["statistic"] in gates.get(row["replication"], ())
            lines.append(
                f"| {row['replication']} | {row['statistic']} | {row['observed']:.4g} "
                f"| {row['replicated_mean']:.4g} | {row['p_value']:.3f} "
                f"| {'yes' if gated else 'no'} | {'**yes**' if row['extreme'] else 'no'} |"
            )
        lines.append("")
    if comparison is not None:
        lines += ["## Model comparison (PSIS-LOO per page)", "",
                  markdown_table(comparison.table), "", comparison.verdict, ""]  # fmt: skip
    g = priors.global_prior
    lines += [
        "## Exported priors (rate per day)",
        "",
        f"- global fallback (new domain): Gamma(α={g.alpha:.4g}, β={g.beta:.4g} days), "
        f"mean {g.mean:.4g}/day",
        f"- {len(priors.domains)} domains; hour-of-week multipliers: "
        + ("yes" if priors.hour_of_week is not None else "no"),
        "",
        "Schema: `bayesrate/priors.py`. Reproduce with:",
        "",
        f"```\n{command}\n```" if command else "",
    ]
    return "\n".join(lines) + "\n"
