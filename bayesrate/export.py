"""Posterior → per-domain Gamma priors, and the versioned artifact directory.

For a *new* page of domain ``d`` the prior predictive of its (time-averaged) rate integrates
over the posterior of that domain's hyperparameters. The hierarchical and modulated models
store, per draw, ``domain_log_rate_mean[d]`` and ``page_log_rate_sd`` (log-rate per hour) —
``log λ_new ~ Normal(m_d, s)`` given a draw — so the predictive's log-rate has mean and
variance::

    E[log λ]   = mean over draws of m_d
    Var[log λ] = var over draws of m_d + mean over draws of s²

and the Gamma view is the Gamma(α, β) (per day) with those log-rate moments:
``ψ'(α) = Var[log λ]``, ``log β = ψ(α) − E[log λ]`` (:func:`gamma_view`). The rate moments
``E[λ] = mean of exp(m_d + s²/2)`` and ``E[λ²] = mean of exp(2 m_d + 2 s²)`` are kept in the
metadata (``predictive_moments_per_day``). A page
of an unseen domain uses ``m ~ Normal(global_log_rate_mean, domain_log_rate_sd)`` too,
i.e. ``log λ ~ Normal(g, sqrt(sd_domain² + s²))``. The modulated model adds the posterior
mean of its hour-of-week multipliers (normalised to mean 1) and their per-bucket sd and
5/95% quantiles.

The artifact is schema version 2 (:mod:`bayesrate.priors`): it keeps the fitted log-normal
population per domain (:func:`domain_populations`: location ``m_d`` and scale ``s`` as
posterior summaries, and a new page's predictive log-rate as a normal mixture over the
draws) and the log-moment-matched Gamma only as a *view*, with its fidelity against the
population (:func:`bayesrate.priors.gamma_view_fidelity`). The hierarchical and modulated
models have no drift or bursts: ``drift`` and ``burst`` are ``null``. The dynamic models
export their walk size per domain as ``drift`` (:func:`drift_blocks`), which the scheduler
uses as each host's random-walk volatility.

:func:`write_artifact` writes ``models/<dataset>/<model>/`` with ``priors.json``, the fitted
result (``fit.nc``) and a model card (``README.md``), and refuses when the convergence or
PPC gates fail unless forced — a forced artifact says so in both files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.atomic import atomic_directory
from bayesrate.constants import (
    DIM_DOMAIN,
    HOURS_PER_DAY,
    POPULATION_GATES,  # noqa: F401 (its name here too)
)
from bayesrate.draws import stack_draws
from bayesrate.errors import ArtifactError
from bayesrate.priors import (
    GLOBAL_KEY,
    UNITS_V2,
    GammaPrior,
    NormalMixture,
    ParameterBlock,
    Population,
    PriorSet,
    Summary,
    compression_kl,
    gamma_view_fidelity,
    lognormal_moments,
)


def exportable_models() -> list[str]:
    """The registered models with a prior artifact: each model declares the PPC statistics
    that gate its export (``RateModel.export_gates``, ``None``: nothing to export; the
    population statistics, :data:`POPULATION_GATES`, are the common part)."""
    from bayesrate.models import MODELS

    return [name for name, cls in MODELS.items() if cls.export_gates is not None]


FIT_FILE = "fit.nc"
#: draws kept in an artifact's fit (the full fit is written next to the report)
ARTIFACT_DRAWS = 500
#: posterior variables kept in an artifact's fit: what page tables, prior export and the
#: scheduler's hour-of-week multipliers need (sampler-internal variables are dropped)
ARTIFACT_VARS = (
    "log_rate", "rate", "mu_global", "sigma_domain", "mu_domain", "sigma_page",
    "domain_log_rate_mean", "global_log_rate_mean", "domain_log_rate_sd", "page_log_rate_sd",
    "hour_effect", "day_effect", "log_multiplier", "hour_of_week_multiplier",
    "sigma_walk", "sigma_walk_global", "walk_domain_sd", "walk_phi",
    "new_domain_page_log_rate_sd",
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
                f"({', '.join(exportable_models())})"
            )
    m = stack_draws(posterior["domain_log_rate_mean"], DIM_DOMAIN)  # (S, D)
    s, s_new = _page_scales(posterior)
    g = stack_draws(posterior["global_log_rate_mean"])[:, None]
    sd_domain = stack_draws(posterior["domain_log_rate_sd"])[:, None]
    labels = [str(x) for x in posterior[DIM_DOMAIN].values]

    mean_d, var_d = lognormal_moments(m, s**2, scale=HOURS_PER_DAY)
    mean_g, var_g = lognormal_moments(g, sd_domain**2 + s_new[:, None] ** 2, scale=HOURS_PER_DAY)
    out = {d: (float(a), float(b)) for d, a, b in zip(labels, mean_d, var_d, strict=True)}
    out[NEW_DOMAIN] = (float(mean_g[0]), float(var_g[0]))
    return out


def _page_scales(posterior) -> tuple[np.ndarray, np.ndarray]:
    """``page_log_rate_sd`` per draw and domain ``(S, D)`` (one for all domains, or the
    domain's own) and a new domain's ``(S,)`` (``new_domain_page_log_rate_sd`` if the
    model has one)."""
    sd = posterior["page_log_rate_sd"]
    n_domains = posterior.sizes[DIM_DOMAIN]
    per_domain = DIM_DOMAIN in sd.dims
    s = stack_draws(sd, DIM_DOMAIN) if per_domain else stack_draws(sd)[:, None]
    if "new_domain_page_log_rate_sd" in posterior:
        s_new = stack_draws(posterior["new_domain_page_log_rate_sd"])
    elif per_domain:
        raise ArtifactError("a per-domain page_log_rate_sd needs new_domain_page_log_rate_sd")
    else:
        s_new = s[:, 0]
    return np.broadcast_to(s, (len(s), n_domains)), s_new


def population_draws(posterior) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per domain (and :data:`NEW_DOMAIN`): draws of a new page's log-rate location (natural
    log of changes per day) and scale, ``log λ_new | draw ~ Normal(location, scale)``."""
    m = stack_draws(posterior["domain_log_rate_mean"], DIM_DOMAIN) + np.log(HOURS_PER_DAY)
    s, s_new = _page_scales(posterior)
    g = stack_draws(posterior["global_log_rate_mean"]) + np.log(HOURS_PER_DAY)
    sd_domain = stack_draws(posterior["domain_log_rate_sd"])
    labels = [str(x) for x in posterior[DIM_DOMAIN].values]
    out = {d: (m[:, i], np.ascontiguousarray(s[:, i])) for i, d in enumerate(labels)}
    out[NEW_DOMAIN] = (g, np.sqrt(sd_domain**2 + s_new**2))
    return out


def domain_populations(
    posterior,
    n_pages: Mapping[str, int] | None = None,
    draws: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[str, Population]:
    """The fitted log-normal population per domain (and :data:`NEW_DOMAIN`) as posterior
    summaries plus the predictive normal mixture (:meth:`NormalMixture.from_draws`), with
    its compression error (:func:`bayesrate.priors.compression_kl`). ``draws``: the
    posterior's :func:`population_draws`, when the caller has them."""
    if draws is None:
        predictive_moments(posterior)  # validates the variables
        draws = population_draws(posterior)
    out = {}
    for d, (loc, scale) in draws.items():
        mixture = NormalMixture.from_draws(loc, scale)
        out[d] = Population(
            location=Summary.from_draws(loc),
            scale=Summary.from_draws(scale),
            predictive=mixture,
            n_pages=None if n_pages is None else int(n_pages.get(d, 0)),
            compression_kl=compression_kl(loc, scale, mixture),
        )
    return out


#: draws of a new domain's walk size per posterior draw (:func:`drift_blocks`)
NEW_DOMAIN_WALK_DRAWS = 8


def drift_blocks(model, posterior) -> dict[str, ParameterBlock]:
    """Per domain (and :data:`NEW_DOMAIN`): a dynamic model's walk size as the
    ``random_walk`` drift block, ``σ_rw = sigma_walk / √epoch_days`` per √day (a walk of
    independent Normal steps per epoch has that variance per day; the model's
    :meth:`~bayesrate.models.dynamic.DynamicModel.diffusion_per_epoch` of its walk sizes).
    A new domain's walk size is drawn from its population, ``log σ ~ Normal(log
    sigma_walk_global, walk_domain_sd)``. Empty for a model without walks."""
    if "sigma_walk" not in posterior:
        return {}
    from bayesrate.seeds import rng_from

    days = float(model.model_config["epoch_days"])
    walk = stack_draws(posterior["sigma_walk"], DIM_DOMAIN)
    new = stack_draws(posterior["sigma_walk_global"])
    if "walk_domain_sd" in posterior:
        spread = stack_draws(posterior["walk_domain_sd"])
        z = rng_from(f"{model.config_hash}-new-domain-walk").standard_normal(
            (len(new), NEW_DOMAIN_WALK_DRAWS)
        )
        new = new[:, None] * np.exp(spread[:, None] * z)
    walk = model.diffusion_per_epoch(walk, posterior) / np.sqrt(days)
    new = model.diffusion_per_epoch(new, posterior) / np.sqrt(days)

    def block(draws: np.ndarray) -> ParameterBlock:
        return ParameterBlock(
            model="random_walk",
            parameters={"sigma_rw": Summary.from_draws(draws)},
            units={"sigma_rw": UNITS_V2["sigma_rw"]},
            source=f"{model.model_type} model posterior: {model.drift_source} / sqrt(epoch_days)",
            extra={"epoch_days": days},
        )

    labels = [str(x) for x in posterior[DIM_DOMAIN].values]
    out = {d: block(walk[:, i]) for i, d in enumerate(labels)}
    out[NEW_DOMAIN] = block(new)
    return out


def gamma_view(location: np.ndarray, scale: np.ndarray) -> tuple[GammaPrior, str]:
    """A population's Gamma view and how it was matched: the Gamma whose ``log λ`` has the
    population's mean and variance (``"log-rate moments"``).

    ``location`` and ``scale`` are the population's draws, ``log λ | draw ~
    Normal(location, scale)`` (per day): the mean of ``log λ`` is ``mean(location)`` and its
    variance ``var(location) + mean(scale²)``. A scheduler starts a new page from this
    Gamma, so it must put the population's mass where the population does: the Gamma with
    the population's *rate* mean and variance follows the far upper tail of a log-normal
    instead (ota-contrib's global view had α = 0.08 and 59% of its mass below mean/100
    against 1.9% for the population), and for wide populations has no float at all.
    """
    location = np.asarray(location, dtype=float)
    scale = np.asarray(scale, dtype=float)
    mean_log = float(np.mean(location))
    variance_log = float(np.var(location) + np.mean(np.square(scale)))
    return GammaPrior.from_log_moments(mean_log, variance_log), "log-rate moments"


def domain_priors(model, *, metadata: Mapping[str, Any] | None = None) -> PriorSet:
    """Priors per domain (per day) from a fitted model: schema version 2, the fitted
    population with moment-matched Gamma views and their fidelity (module docstring)."""
    model._require_fit()
    post = model.idata_["posterior"]
    moments = predictive_moments(post)
    const = model.idata_["constant_data"]
    page_domain = np.asarray(const["domain"]).astype(str)
    labels, counts = np.unique(page_domain, return_counts=True)
    n_pages = dict(zip(labels.tolist(), counts.tolist(), strict=True))
    n_pages[NEW_DOMAIN] = len(page_domain)
    draws = population_draws(post)
    populations = domain_populations(post, n_pages, draws)
    for d, drift in drift_blocks(model, post).items():
        populations[d] = dataclasses.replace(populations[d], drift=drift)
    gammas, matches = {}, {}
    for d in moments:
        gammas[d], matches[d] = gamma_view(*draws[d])
    fidelity = {
        (GLOBAL_KEY if d == NEW_DOMAIN else d): {
            "match": matches[d],
            **gamma_view_fidelity(pop.predictive, gammas[d]),
        }
        for d, pop in populations.items()
    }
    multipliers, uncertainty = None, None
    timezone = "UTC"
    if "hour_of_week_multiplier" in post:
        draws = stack_draws(post["hour_of_week_multiplier"], "hour_of_week")
        draws = draws / draws.mean(axis=1, keepdims=True)
        mult = draws.mean(axis=0)
        multipliers = mult / mult.mean()
        uncertainty = {
            "sd": draws.std(axis=0, ddof=1),
            "q05": np.quantile(draws, 0.05, axis=0),
            "q95": np.quantile(draws, 0.95, axis=0),
        }
        timezone = str(post["hour_of_week_multiplier"].attrs.get("timezone", "UTC"))
    meta = {
        "model": model.model_type,
        "config_hash": model.config_hash,
        "data_fingerprint": model.data_fingerprint_,
        "predictive_moments_per_day": {
            d: {
                key: value if math.isfinite(value) else None
                for key, value in (("mean", mean), ("variance", var))
            }
            for d, (mean, var) in moments.items()
        },
        **dict(metadata or {}),
    }
    return PriorSet(
        global_prior=gammas.pop(NEW_DOMAIN),
        domains=gammas,
        hour_of_week=multipliers,
        timezone=timezone,
        metadata=meta,
        global_population=populations.pop(NEW_DOMAIN),
        populations=populations,
        gamma_fidelity=fidelity,
        hour_of_week_uncertainty=uncertainty,
    )


def gate_failures(model, ppc=None) -> list[str]:
    """Why an artifact from this fit may not be exported (empty list: it may)."""
    failures = []
    if model.export_gates is None:
        failures.append(f"model {model.model_type!r} has no domain structure to export")
    if not model.converged_:
        diag = model.diagnostics_
        reasons = "; ".join(diag.failures) if diag and diag.failures else "see diagnostics"
        failures.append(f"convergence gates failed: {reasons}")
    if ppc is None:
        failures.append("no posterior predictive checks were run")
    else:
        bad = ppc.gate_failures(model.export_gates or {})
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
            "ppc": ppc is not None and not ppc.gate_failures(model.export_gates or {}),
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
    from bayesrate.atomic import write_netcdf

    return write_netcdf(compact, path, encoding=encoding)


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


def _drift_sentence(pop: Population) -> str:
    if pop.drift is None:
        return "No drift or burst parameters: this model has none."
    sigma = pop.drift.parameters["sigma_rw"]
    return (
        f"Drift (a new domain's page log-rate walk): σ_rw {sigma.mean:.4f} per √day "
        f"(sd {sigma.sd or 0:.4f}; {pop.drift.source})."
    )


def _priors_section(priors: PriorSet) -> list[str]:
    """The model card's account of the exported priors: population first, Gamma view second."""
    g = priors.global_prior
    lines = ["## Exported priors (rate per day)", ""]
    pop = priors.global_population
    if pop is not None:
        fid = priors.gamma_fidelity.get(GLOBAL_KEY, {})
        n_log = sum(
            priors.gamma_fidelity.get(d, {}).get("match") == "log-rate moments"
            for d in priors.domains
        )
        err = fid.get("log_quantile_error", {})
        below = fid.get("prob_below_mean_over_100", {})
        lines += [
            "Schema version 2: the fitted population is exported as fitted. A new page of a "
            "new domain has `log λ ~ Normal(location, scale)` (natural log, per day), with "
            f"location {pop.location.mean:.3f} (sd {pop.location.sd or 0:.3f}) and scale "
            f"{pop.scale.mean:.3f} (sd {pop.scale.sd or 0:.3f}); the predictive is a "
            f"{len(pop.predictive.weights)}-component normal mixture over the draws "
            f"(compression KL {pop.compression_kl or 0:.2g} nats). " + _drift_sentence(pop),
            "",
            f"- Gamma view (an approximation, for Gamma consumers): Gamma(α={g.alpha:.4g}, "
            f"β={g.beta:.4g} days), mean {g.mean:.4g}/day, matched on "
            f"{fid.get('match', 'rate moments')}"
            + (
                f" ({n_log} of the {len(priors.domains)} domains' views on log-rate moments)"
                if n_log
                else ""
            )
            + ". Fidelity against the population: "
            f"KL(population‖Gamma) {fid.get('kl_population_to_gamma', float('nan')):.3g} nats, "
            f"log(q_Gamma/q_population) at 5/50/95% "
            f"{err.get('0.05', float('nan')):+.2f} / {err.get('0.5', float('nan')):+.2f} / "
            f"{err.get('0.95', float('nan')):+.2f}; P(λ < mean/100) "
            f"{below.get('population', float('nan')):.3f} (population) vs "
            f"{below.get('gamma', float('nan')):.3f} (Gamma).",
        ]
    else:
        lines += [
            f"- global fallback (new domain): Gamma(α={g.alpha:.4g}, β={g.beta:.4g} days), "
            f"mean {g.mean:.4g}/day"
        ]
    lines += [
        f"- {len(priors.domains)} domains; hour-of-week multipliers: "
        + ("yes" if priors.hour_of_week is not None else "no"),
        "",
    ]
    return lines


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
        gates = model.export_gates or {}
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
    lines += _priors_section(priors)
    lines += [
        "Schema: `bayesrate/priors.py`. Reproduce with:",
        "",
        f"```\n{command}\n```" if command else "",
    ]
    return "\n".join(lines) + "\n"
