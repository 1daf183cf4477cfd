# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Model comparison on real pages
#
# **Question.** Which of bayesrate's PyMC models describes how real web documents change,
# and where do the checks say that even the best of them fails?
#
# We fit four models to the same crawl log of legal documents (terms of service, privacy
# policies) and look at them in three ways: what each says about the change rates of pages
# and services (posteriors by domain), whether replicated crawls look like the observed one
# (posterior predictive checks of the *detections*, not of latent changes), and how well
# each predicts a page it has not seen (leave-one-page-out ELPD). The last part is about
# the blind spots: the checks that every model fails, and what they point at.
#
# **Data.** `ota-contrib` is embedded in the package: the change history of documents
# tracked by [Open Terms Archive](https://opentermsarchive.org) (contrib collection),
# turned into visits on the collection's nominal crawl grid. Data © Open Terms Archive
# contributors, licensed under the Open Data Commons Attribution License (ODC-BY 1.0).
# The grid changed between eras (daily, then 6-hourly, then 12-hourly), which will matter.
#
# **Models** (`docs/models.md` has the core models' formulas, `research/docs/models.md` the
# bursty model's; all are fitted on sufficient statistics
# with the exact interval-censored likelihood, NUTS via nutpie):
#
# | name | what it assumes |
# | --- | --- |
# | `censored` | each page has its own constant Poisson rate, prior Gamma(1, 1 day) per page |
# | `hierarchical` | page log-rates pooled within their service (domain), domain means pooled |
# | `modulated` | the hierarchical rates × an hour-of-day and a day-of-week multiplier (UTC) |
# | `bursty` | hierarchical rates; each interval's exposure Gamma-mixed, shape κ per domain |
#
# (bursty: P(no change in an interval of length τ) = (1 + λτ/κ)^(−κ), the Poisson's e^(−λτ) as
# κ → ∞.)
#
# The drift model of issue 14 (`dynamic`: each page's log-rate a random walk over epochs)
# and the `excursion` model (a stationary AR(1) around each page's own level) are in the
# core now, but this notebook was run before they were built and does not fit them. Where
# the checks below point at drifting rates, those are the models that answer them.

# %%
# %matplotlib inline
import os
import time
import warnings

FAST = os.environ.get("BAYESRATE_FAST") == "1"  # CI runs the notebooks in this mode

import numpy as np
import pandas as pd
from IPython.display import display

from bayesrate import datasets, plots
from bayesrate.checks.compare import compare
from bayesrate.checks.ppc import ppc_for
from bayesrate.constants import DAY_NAMES, HOURS_PER_DAY
from bayesrate.draws import stack_draws
from bayesrate.models import get_model

MODELS = ("censored", "hierarchical", "modulated", "bursty")
SEED = "notebook-03-model-comparison"
#: κ centred: the pages here see three interval lengths, enough to pin most services' κ
MODEL_CONFIGS = {"bursty": {"shape_parameterisation": "centred"}}
if FAST:  # a few services and tiny draws: checks that the notebook runs, not its results
    MIN_PAGES_PER_DOMAIN, MAX_DOMAINS = 8, 6
    SAMPLER = {name: {"draws": 150, "tune": 150, "chains": 2} for name in MODELS}
    PPC_DRAWS = 40
else:  # services with several documents; 1,000 tuning steps for every model (the package
    # default for censored and hierarchical is 300 since 2026-12-02), more draws for bursty
    MIN_PAGES_PER_DOMAIN, MAX_DOMAINS = 4, None
    SAMPLER = {name: {"tune": 1000} for name in MODELS} | {"bursty": {"draws": 3000, "tune": 1000}}
    PPC_DRAWS = 200
pd.set_option("display.precision", 4)
pd.set_option("display.width", 120)

# %% [markdown]
# ## Data
#
# All of `ota-contrib` is 877 documents in 385 services, 4.4 million visits over 14 years.
# Most services have one or two documents, and there the hierarchy can only pool across
# services. To compare the models where pooling *within* a service matters — and to keep
# the bursty model's fit affordable (on all of `ota-contrib` it took 946 s and missed the
# ESS gate, `research/docs/models.md`) — we keep the services with at least
# `MIN_PAGES_PER_DOMAIN` documents. The `bayesrate calibrate` report on all pages is in
# `docs/calibration.md`.

# %%
full = datasets.load("ota-contrib")
pages_per_domain = full.pages["domain"].value_counts()
kept = pages_per_domain.index[pages_per_domain >= MIN_PAGES_PER_DOMAIN][:MAX_DOMAINS]
obs = full.subset(np.flatnonzero(full.pages["domain"].isin(kept).to_numpy()))
print(full)
print(obs)
for note in obs.notes:
    print(" -", note)
summary = obs.summary()
print(
    f"{summary['pages']} documents in {summary['domains']} services, "
    f"{summary['visits']:,} visits, {summary['changes']:,} detected changes over "
    f"{summary['span_days'] / 365.25:.1f} years; {summary['pages_never_changed']} documents "
    "never changed"
)
display(pd.Series(summary["changes_per_page"], name="detected changes per page").to_frame().T)

# %% [markdown]
# The crawl grid is part of the data. Detections can only happen at visits, so the number of
# visits per month shows the eras (daily until mid-2020, then 6-hourly, then 12-hourly), and
# the detections per month show whether documents change at a steady rate.

# %%
visit_times = pd.to_datetime(obs.time, unit="h", utc=True).tz_localize(None)
months = visit_times.to_period("M")
per_month = (
    pd.DataFrame({"visits": 1, "detections": obs.changed.astype(int)})
    .groupby(months.to_numpy())[["visits", "detections"]]
    .sum()
)
per_month.index = per_month.index.to_timestamp()
fig = plots.figure((11, 4.5))
ax = fig.subplots()
ax.bar(per_month.index, per_month["detections"], width=25, color="tab:blue", label="detections")
ax.set(xlabel="month (UTC)", ylabel="detected changes per month (all kept documents)")
ax2 = ax.twinx()
ax2.plot(per_month.index, per_month["visits"] / obs.n_pages, color="tab:orange", lw=1.5)
ax2.set_ylabel("visits per document per month", color="tab:orange")
ax.set_title("Detections and crawl intensity over time (orange: the visit grid's eras)")
fig.tight_layout()
display(fig)

# %% [markdown]
# ## Method
#
# Each model is fitted with NUTS (nutpie) at 4 chains × 1,000 draws after 1,000 tuning
# steps (2,500 draws for `modulated`, its default) — from a seed derived
# from a fixed string. A fit counts only if it meets the package's convergence gates:
# R-hat ≤ 1.01, bulk and tail ESS ≥ 400, no divergent transitions (`model.diagnostics_`).
# A fit that misses a gate is reported as failed below, with the parameter that failed;
# its posterior is still shown, marked as such.
#
# The bursty model needed help, measured while preparing this notebook on the same pages:
# at its defaults (κ non-centred, 1,000 draws) it missed the gates badly (R-hat 1.14 on a
# service's κ, bulk ESS 22 on `mu_log_kappa`); with κ centred, R-hat 1.019 and bulk ESS
# 278 with 1,000 draws, R-hat 1.0097 and ESS 575 with 2,000 (166 s on the loaded
# machine). We fit it centred with 3,000 draws; on the data as loaded now (with the
# collection-wide silences merged) even that narrowly misses (see below). Its κ is weakly
# identified (only documents
# seen at several interval lengths inform it), which is why it needs ~90 gradient
# evaluations per draw where the hierarchical model needs ~30.

# %%
fits, seconds = {}, {}
for name in MODELS:
    start = time.perf_counter()
    sampler = {**SAMPLER[name], "seed": f"{SEED}-{name}"}
    model = get_model(name)(model_config=MODEL_CONFIGS.get(name), sampler_config=sampler)
    with warnings.catch_warnings():
        # a missed gate is reported in the table below, not as a warning
        warnings.simplefilter("ignore")
        model.fit(obs)
    fits[name], seconds[name] = model, time.perf_counter() - start
    print(f"{name}: {seconds[name]:.0f} s", flush=True)

diagnostics = pd.DataFrame(
    {
        name: {
            "seconds": m.diagnostics_.seconds,
            "chains x draws": f"{m.diagnostics_.chains} x {m.diagnostics_.draws}",
            "r_hat_max": m.diagnostics_.r_hat_max,
            "ess_bulk_min": m.diagnostics_.ess_bulk_min,
            "ess_tail_min": m.diagnostics_.ess_tail_min,
            "divergences": m.diagnostics_.divergences,
            "grad evals/draw": m.diagnostics_.grad_evals_per_draw,
            "converged": m.converged_,
            "worst R-hat at": m.diagnostics_.worst_r_hat,
            "worst ESS at": m.diagnostics_.worst_ess,
        }
        for name, m in fits.items()
    }
).T
for name, m in fits.items():
    if not m.converged_:
        print(f"{name} FAILED its convergence gates: {'; '.join(m.diagnostics_.failures)}")
display(diagnostics)

# %% [markdown]
# ## Posteriors by domain
#
# The hierarchical models describe a service by the distribution of its documents'
# log-rates: `domain_log_rate_mean` is the mean log-rate of a document of that service (on
# the time-averaged scale, so `modulated`'s multipliers are folded in), i.e. `exp` of it is
# the service's *median* document rate. The censored model has no domains; its page rates
# come next.

# %%
HIERARCHICAL = [name for name in ("hierarchical", "modulated", "bursty") if name in fits]


def domain_medians_per_day(model):
    """(samples, domains) median document rate of each service, changes per day."""
    draws = stack_draws(model.idata_["posterior"]["domain_log_rate_mean"], "domain")
    return np.exp(draws) * HOURS_PER_DAY


domains = fits["hierarchical"].idata_["posterior"]["domain"].values
order = np.argsort(np.median(domain_medians_per_day(fits["hierarchical"]), axis=0))
fig = plots.figure((9, 0.24 * len(domains) + 1.8))
ax = fig.subplots()
for k, name in enumerate(HIERARCHICAL):
    q = np.quantile(domain_medians_per_day(fits[name])[:, order], [0.05, 0.5, 0.95], axis=0)
    y = np.arange(len(domains)) + (k - 1) * 0.25
    flag = "" if fits[name].converged_ else " (NOT converged)"
    ax.errorbar(q[1], y, xerr=[q[1] - q[0], q[2] - q[1]], fmt="o", ms=3, lw=1,
                label=f"{name}{flag}")  # fmt: skip
counts = pages_per_domain.reindex(domains[order])
ax.set_yticks(range(len(domains)), [f"{d} ({n})" for d, n in counts.items()], fontsize=7)
ax.set_xscale("log")
ax.set_xlabel("median document change rate of the service (changes per day; 90% interval)")
ax.set_title("Service-level rates by model (number of documents in brackets)")
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()
display(fig)

# %% [markdown]
# Page by page, pooling matters most where a document has little information of its own.
# The censored model's Gamma(1, 1 day) prior has a mean of one change per day: for a
# document that changed a handful of times in years that prior is not weak, and it pulls
# slow documents' rates up. The hierarchical model learns the scale of rates from the other
# documents of the service instead.

# %%
pages_h = fits["hierarchical"].page_summary_.set_index("page")
pages_c = fits["censored"].page_summary_.set_index("page").loc[pages_h.index]
fig = plots.figure((12, 5))
left, right = fig.subplots(1, 2)
points = left.scatter(pages_c["rate_per_day"], pages_h["rate_per_day"],
                      c=np.log10(1 + pages_h["n_changes"]), s=12, cmap="viridis")  # fmt: skip
lims = [pages_h["rate_per_day"].min() / 2, pages_h["rate_per_day"].max() * 2]
left.plot(lims, lims, color="grey", ls=":", lw=1)
left.set(xscale="log", yscale="log", title="Posterior mean rate per document",
         xlabel="censored model (changes per day)",
         ylabel="hierarchical model (changes per day)")  # fmt: skip
fig.colorbar(points, ax=left, label="log10(1 + detected changes)")
plots.domain_rates(fits["hierarchical"].page_summary_, top=12, label="(hierarchical)", ax=right)
right.set_xlabel("changes per day (posterior mean per document)")
fig.tight_layout()
display(fig)

# %% [markdown]
# ## Posterior predictive checks
#
# `ppc_for` replicates the crawl: each posterior draw gives detections on the *same visit
# times* as the observed log, and eight statistics of the replicates are compared with the
# observed ones (Bayesian p-value `P(T(rep) ≥ T(obs))`; extreme when below 0.025 or above
# 0.975, or below 0.05 for the one-sided chi-square discrepancies). Two replications:
# *conditional* gives every page its own posterior rate (it checks the observation model:
# hour and day shapes, gaps); *mixed* gives every page a fresh rate from the fitted
# population of its service (it checks the population a prior for new pages would ship).

# %%
checks = {}
for name, model in fits.items():
    start = time.perf_counter()
    checks[name] = ppc_for(model, obs, seed=f"{SEED}-ppc-{name}", n_draws=PPC_DRAWS)
    print(f"{name}: checks in {time.perf_counter() - start:.0f} s", flush=True)
p_values = pd.DataFrame(
    {
        (name, replication): checks[name].p_values(replication)
        for name in fits
        for replication in checks[name].replications
    }
)
display(p_values)

# %% [markdown]
# The same p-values as a map (a cross marks an extreme one):

# %%
fig = plots.figure((11, 4.2))
ax = fig.subplots()
image = ax.imshow(p_values.to_numpy(), cmap="RdBu", vmin=0, vmax=1, aspect="auto")
for (i, j), p in np.ndenumerate(p_values.to_numpy()):
    name, replication = p_values.columns[j]
    extreme = p_values.index[i] in checks[name].failures(replication=replication)
    ax.text(j, i, f"{p:.2f}" + (" ×" if extreme else ""), ha="center", va="center", fontsize=7)
ax.set_xticks(range(p_values.shape[1]), [f"{n}\n{r}" for n, r in p_values.columns], fontsize=8)
ax.set_yticks(range(p_values.shape[0]), p_values.index, fontsize=8)
ax.set_title("Posterior predictive p-values P(T(rep) ≥ T(obs)) (× = extreme)")
fig.colorbar(image, ax=ax, label="p-value (probability, no unit)")
fig.tight_layout()
display(fig)

# %% [markdown]
# The four panels of the hierarchical model's mixed replication (new documents drawn from
# each service's fitted population on the observed visit times) and of the modulated
# model's conditional replication (its hour and day shapes):

# %%
for name, replication in (("hierarchical", "mixed"), ("modulated", "conditional")):
    fig = plots.ppc(checks[name].result(replication), f"{name}, {replication} replication")
    fig.tight_layout()
    display(fig)

# %% [markdown]
# ## Leave-one-page-out comparison
#
# `compare` scores each model by PSIS-LOO over *pages*, each page's own rate integrated out
# given the population parameters of the draw, so the unit of prediction is a whole new
# document. The bursty model is not in the table: when this notebook was run, that integral
# was written for the Poisson likelihood only, and `compare` refused the bursty fit rather
# than score it wrongly (the committed output below). Today each model integrates its own
# pages' rates out (`marginal_page_loglik`; the bursty model under each draw's κ), so
# `compare` accepts the bursty fit.

# %%
comparable = {name: fits[name] for name in ("censored", "hierarchical", "modulated")}
comparison = compare(comparable)
print(comparison.verdict)
for name, k in comparison.pareto_k.items():
    print(f"{name}: Pareto k good {k['good']}, bad {k['bad']}, very bad {k['very_bad']}")
try:
    compare({"bursty": fits["bursty"]})
except ValueError as error:
    print(f"bursty: {error}")
fig = plots.figure((13, 3.2))
left, right = fig.subplots(1, 2)
plots.loo(comparison.table, ax=left)
left.set_xlabel("ELPD-LOO of held-out documents (nats, summed; higher is better)")
y = np.arange(len(comparison.table))[::-1]
right.errorbar(comparison.table["elpd_diff"], y, xerr=comparison.table["dse"], fmt="o")
right.axvline(0, color="grey", ls=":", lw=1)
right.set_yticks(y, comparison.table.index)
right.set(xlabel="ELPD difference to the best model ± SE of the difference (nats)",
          title="Differences (what the ranking rests on)")  # fmt: skip
fig.tight_layout()
display(fig)
comparison.table[["elpd", "se", "elpd_diff", "dse", "p", "weight"]]

# %% [markdown]
# ## The modulated model's weekly rhythm
#
# The multipliers of the 168 hours of the week (mean 1 per draw), UTC: a document's
# instantaneous rate is its time-averaged rate times the multiplier of the hour. With
# visits only at 00, 06, 12 and 18 UTC, the data see each 6-hour block between visits as a
# whole: the hours inside a block are not separately identified, which is why the medians
# step every six hours and the hourly bands are wide, while the day-of-week multipliers
# (the green curve) are tight.

# %%
multipliers = stack_draws(
    fits["modulated"].idata_["posterior"]["hour_of_week_multiplier"], "hour_of_week"
)
plots.hour_of_week(multipliers, fits["modulated"].timezone)

# %% [markdown]
# ## The bursty model's shape κ
#
# Small κ means a long interval is much less likely to show a change than λτ suggests
# (changes cluster within intervals); κ → ∞ is the Poisson. κ is identified only by
# documents seen at several interval lengths — here the 24-, 6- and 12-hour eras. The
# right panel turns the posterior median κ of each service into what it predicts for a
# document with the service's median rate: P(change detected) on a 6-hour and on a 24-hour
# interval, against the Poisson.

# %%
bursty = fits["bursty"]
kappa = stack_draws(bursty.idata_["posterior"]["kappa"], "domain")
kappa_domains = bursty.idata_["posterior"]["domain"].values
fig = plots.figure((12, 0.2 * len(kappa_domains) + 2.2))
left, right = fig.subplots(1, 2)
kappa_q = np.quantile(kappa, [0.05, 0.5, 0.95], axis=0)
rank = np.argsort(kappa_q[1])
lo, mid, hi = kappa_q[:, rank]
left.errorbar(mid, np.arange(len(rank)), xerr=[mid - lo, hi - mid], fmt="o", ms=3, lw=1)
left.set_yticks(range(len(rank)), kappa_domains[rank], fontsize=7)
left.set_xscale("log")
flag = "" if bursty.converged_ else " (NOT converged)"
left.set(xlabel="κ (dimensionless; median, 90% interval)", title=f"Gamma shape κ per service{flag}")
rate_hour = np.median(domain_medians_per_day(bursty), axis=0) / HOURS_PER_DAY
for tau, marker in ((6, "o"), (24, "s")):
    poisson = 1 - np.exp(-rate_hour * tau)
    mixed = 1 - (1 + rate_hour * tau / kappa_q[1]) ** (-kappa_q[1])
    right.plot(poisson, mixed, marker, ms=4, label=f"{tau}-hour interval")
right.plot([1e-4, 1], [1e-4, 1], color="grey", ls=":", lw=1, label="Poisson (κ → ∞)")
right.set(xscale="log", yscale="log",
          xlabel="P(change in interval), Poisson at the service's median rate",
          ylabel="P(change in interval), bursty at median κ",
          title="What κ does to detection probabilities")  # fmt: skip
right.legend(fontsize=8)
fig.tight_layout()
display(fig)

# %% [markdown]
# ## Blind spots: what every model fails
#
# Three checks carry information none of the four models can reproduce. The gap check is
# the coefficient of variation of the gaps between a document's detections (documents with
# at least five): a constant-rate process observed on a grid gives a CV a little below 1,
# clustered changes give more. The hour-of-day and day-of-week checks count detections by
# the UTC hour and weekday of the detecting visit. Below, each model's conditional
# replicates (90% band) against the observed value.

# %%
fig = plots.figure((13, 4.2))
axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1.3, 1]})
observed = checks["hierarchical"].result("conditional")  # the observed counts are shared
hours = np.flatnonzero(observed.hour_observed + observed.hour_replicated.sum(axis=0) > 0)
panels = (
    (axes[1], "dow", np.arange(7)),
    (axes[2], "hour", hours),
)
width = 0.8 / len(fits)
for k, name in enumerate(fits):
    result = checks[name].result("conditional")
    gap = next(s for s in result.statistics if s.name == "gap_cv")
    lo, mid, hi = np.nanquantile(gap.replicated, [0.05, 0.5, 0.95])
    axes[0].errorbar(mid, k, xerr=[[mid - lo], [hi - mid]], fmt="o", color=f"C{k}")
    for ax, which, bins in panels:
        replicated = getattr(result, f"{which}_replicated")
        share = replicated / replicated.sum(axis=1, keepdims=True)
        lo, mid, hi = np.quantile(share[:, bins], [0.05, 0.5, 0.95], axis=0)
        x = np.arange(len(bins)) + (k - (len(fits) - 1) / 2) * width
        ax.errorbar(x, mid, yerr=[mid - lo, hi - mid], fmt="s", ms=3, color=f"C{k}", label=name)
gap = next(s for s in observed.statistics if s.name == "gap_cv")
axes[0].axvline(gap.observed_value, color="k", lw=1.5, label="observed")
for ax, which, bins in panels:
    counts = getattr(observed, f"{which}_observed")
    ax.plot(np.arange(len(bins)), counts[bins] / counts.sum(), "k_", ms=14, mew=2,
            label="observed")  # fmt: skip
axes[0].set_yticks(range(len(fits)), list(fits))
axes[0].set(xlabel="CV of gaps between detections (dimensionless)",
            title="Gap CV (replicated 90%; line: observed)")  # fmt: skip
axes[1].set_xticks(range(7), DAY_NAMES)
axes[1].set(xlabel="day of week of the detecting visit (UTC)",
            ylabel="share of detections", title="Day of week (replicated 90%)")  # fmt: skip
axes[2].set_xticks(range(len(hours)), [f"{h:02d}:00" for h in hours])
axes[2].set(xlabel="hour of the detecting visit (UTC; hours with visits)",
            ylabel="share of detections", title="Hour of day (replicated 90%)")  # fmt: skip
axes[1].legend(fontsize=7)
fig.tight_layout()
display(fig)

# %% [markdown]
# Why the checks fail, read from the figures above (the numbers are in the last cell).
#
# * **Gaps.** Gaps between a document's detections are far more irregular than any model
#   replicates (over the 535 documents with at least five detections the `bayesrate
#   calibrate` run measured CV 1.72 against 0.90 replicated, `docs/calibration.md`). The bursty
#   model barely moves the replicated CV: its Gamma mixing is drawn afresh for every
#   interval, so consecutive intervals stay independent and detections cannot cluster in
#   time. Clustering across intervals needs a state that persists — a rate that drifts over
#   the years (the `dynamic` model: fitted to all 877 documents, its gap check passes,
#   p = 0.475, `research/docs/models.md`) or a two-state burst process — not
#   interval-level overdispersion. The detections-per-month figure at the top shows the
#   same thing directly: bursts lasting months.
# * **Day of week.** Legal documents change on working days; the homogeneous models
#   replicate a flat 1/7 per day, and only `modulated` follows the observed profile with
#   its day multipliers — yet its check is extreme too (p = 0.000 in both replications; it
#   was in range, p = 0.27, before the loader merged the silent stretches, many of them
#   weekends, into single intervals that end on the following weekday).
# * **Hour of day.** On this grid there are only four hours with visits (00, 06, 12 and
#   18 UTC), and which of them a detection falls on is mostly decided by the era: daily
#   visits at 00:00 before mid-2020, 6-hourly after, 12-hourly at 06:00 and 18:00 in
#   2024-25. A document whose rate changed between eras puts its detections at the hours
#   of the era in which it was busy. The constant-rate models replicate the shares within a
#   few points (still extreme for the realized chi-square); the modulated model does
#   *worse* on this check, because it explains era effects with hour-of-day multipliers
#   (it over-predicts 18:00 and under-predicts 00:00).
# * **κ does not reach the gaps.** Most services get a small κ, which pulls the detection
#   probability of their busier documents' intervals well below the Poisson's and makes a
#   24-hour interval only about three times as likely to show a change as a 6-hour one (a
#   slow Poisson page: four times). κ is learnt from documents crawled at several interval
#   lengths, i.e. from the eras, so it can as well be absorbing rates that changed between
#   eras (as on all of `ota-contrib`, `research/docs/models.md`) as bursts. Either way the gap check
#   does not move, and the service-level rates become weakly identified (the wide green
#   intervals of the domain figure).

# %% [markdown]
# ## The drift models are not in this comparison
#
# Issue 14 asked for a `dynamic` model in which each document's log-rate drifts over epochs
# (a random walk whose volatility is pooled per service). It is in the core now, with the
# `excursion` model (each document's rate a stationary AR(1) around its own level, the
# main job's recommended model), but this notebook was run before they were built and does
# not fit them. The figures above say where they are judged: the gap CV (clustered
# detections), the hour-of-day check (detections concentrated in the eras a document was
# busy in) and the mixed replication's spread of counts. On all 877 documents annual
# `dynamic` and 90-day `excursion` fits pass the gap check, and `excursion` leads
# leave-one-page-out (`docs/models.md`, "The main job on ota-contrib").

# %% [markdown]
# ## Numbers


# %%
def statistic(name, replication, which):
    result = checks[name].result(replication)
    s = next(s for s in result.statistics if s.name == which)
    return s.observed_value, float(np.nanmean(s.replicated)), s.p_value


print(
    f"data: {obs.n_pages} documents, {len(obs.domains)} services, {obs.n_visits:,} visits, "
    f"{obs.n_changes:,} detections (services with >= {MIN_PAGES_PER_DOMAIN} documents)"
)
for name, m in fits.items():
    d = m.diagnostics_
    print(f"{name:12s} fit {d.seconds:6.0f} s  r_hat_max {d.r_hat_max:.4f}  ess_bulk_min "
          f"{d.ess_bulk_min:6.0f}  ess_tail_min {d.ess_tail_min:6.0f}  divergences "
          f"{d.divergences:3d}  converged {m.converged_}")  # fmt: skip
for name in comparison.table.index:
    row = comparison.table.loc[name]
    print(f"LOO {name:12s} elpd {row['elpd']:10.1f} ± {row['se']:6.1f}  "
          f"diff {row['elpd_diff']:8.1f} ± {row['dse']:6.1f}")  # fmt: skip
for name in fits:
    failed = {r: checks[name].failures(replication=r) for r in checks[name].replications}
    print(f"PPC extreme, {name}: {failed}")
for name in fits:
    obs_cv, rep_cv, p_cv = statistic(name, "conditional", "gap_cv")
    print(f"gap CV {name:12s} observed {obs_cv:.2f}, replicated {rep_cv:.2f} (p = {p_cv:.3f})")
for which in ("day_of_week_chi2", "hour_of_day_chi2"):
    print(which, {name: round(statistic(name, "conditional", which)[2], 3) for name in fits})
day_multipliers = np.median(multipliers.reshape(len(multipliers), 7, 24).mean(axis=2), axis=0)
by_day = {day: round(float(m), 2) for day, m in zip(DAY_NAMES, day_multipliers, strict=True)}
print("modulated day-of-week multipliers (posterior median):", by_day)
print(f"bursty kappa: median of service medians {np.median(kappa_q[1]):.3g}, "
      f"range {kappa_q[1].min():.3g}-{kappa_q[1].max():.3g}")  # fmt: skip
p6 = 1 - (1 + rate_hour * 6 / kappa_q[1]) ** (-kappa_q[1])
p24 = 1 - (1 + rate_hour * 24 / kappa_q[1]) ** (-kappa_q[1])
print(f"bursty P(change in 24 h) / P(change in 6 h) at median rate and kappa: median over "
      f"services {np.median(p24 / p6):.2f} (Poisson: up to 4)")  # fmt: skip
few = pages_h["n_changes"] <= 2
shrink = pages_h.loc[few, "rate_per_day"] / pages_c.loc[few, "rate_per_day"]
print(f"documents with <= 2 detections: {few.sum()}; hierarchical / censored posterior mean "
      f"rate: median {shrink.median():.2f}")  # fmt: skip
for name in HIERARCHICAL:
    lo, mid, hi = np.quantile(domain_medians_per_day(fits[name]), [0.05, 0.5, 0.95], axis=0)
    print(f"{name:12s} service median rates {mid.min():.4f}-{mid.max():.3f}/day; "
          f"median 90% interval spans a factor {np.median(hi / lo):.1f}")  # fmt: skip
dow_share = observed.dow_observed / observed.dow_observed.sum()
print("observed share of detections by day:",
      {day: round(float(v), 3) for day, v in zip(DAY_NAMES, dow_share, strict=True)})  # fmt: skip
hour_share = observed.hour_observed[hours] / observed.hour_observed.sum()
modulated_hours = checks["modulated"].result("conditional").hour_replicated
modulated_share = np.median(modulated_hours / modulated_hours.sum(axis=1, keepdims=True), axis=0)
print("observed share of detections by hour:",
      {f"{h:02d}:00": round(float(v), 3) for h, v in zip(hours, hour_share, strict=True)},
      "modulated replicated (median):",
      {f"{h:02d}:00": round(float(modulated_share[h]), 3) for h in hours})  # fmt: skip

# %% [markdown]
# ## What we learned
#
# On the 221 documents of the 39 Open Terms Archive services with at least four documents
# (1,044,043 visits once the collection's improbable silences are merged, 9,524 detected
# changes over 13.9 years):
#
# * **Censored, hierarchical and modulated converged** (R-hat ≤ 1.0070, bulk ESS ≥ 2,018,
#   tail ESS ≥ 1,915, no divergences). **The bursty model did not**, even with κ centred and
#   3,000 draws: R-hat 1.0104 on one document's log-rate (tail ESS 535; 119 s against 9 s
#   for the hierarchical model; 45 gradient evaluations per draw against 15). Its numbers
#   here are from a failed fit. At its defaults it missed the gates badly (R-hat 1.14, bulk ESS 22;
#   see Method).
# * **Pooling changes the quiet documents.** For the 60 documents with at most two
#   detections, the hierarchical posterior mean rate is a median 0.69× the censored model's,
#   whose Gamma(1, 1 day) prior pulls slow documents up; the censored model fails the
#   population checks (log-scale spread p = 0.010, share of never-changed documents p = 0.000,
#   conditional replication). Hierarchical and modulated agree on the services: median
#   document rates from 0.0009–0.0010 to 0.048–0.049 changes per day, 90% intervals spanning
#   a factor of 7.3–7.4 (median). The bursty model's service rates are barely identified (up
#   to 3.03 per day, intervals spanning a factor of 46).
# * **Leave-one-page-out prefers `modulated`**: ΔELPD 159.9 ± 38.0 over `hierarchical` and
#   899.4 ± 48.9 over `censored`; Pareto k is above its threshold for 2 documents of the
#   modulated model (none of the hierarchical). The
#   bursty model was not ranked: the package's leave-one-page-out was not written for it
#   when this notebook was run (it is now).
# * **The weekly rhythm is real.** Tuesday to Thursday hold 15.8–16.7% of detections,
#   Saturday 12.1% and Sunday 10.4% (flat: 14.3%). The modulated model's day multipliers
#   (Tue–Thu 1.11–1.17, Sat 0.73, Sun 0.77) follow it, but its day-of-week check is
#   extreme in both replications (p = 0.000).
# * **The blind spots are shared by all four models.** Gap CV observed 1.67 against 0.90–0.92
#   replicated (p = 0.000 for every model, the bursty one included); the hour-of-day check
#   is extreme for all (p = 0.000), and `modulated` reads era effects as hours (18:00
#   replicated 0.284 of detections against 0.275 observed, 00:00 0.226 against 0.250).
#   The bursty model's small κ (median over services 0.0106) is interval-level
#   overdispersion, not clustering in time.
# * **Per-document schedules are in range on these 221 documents, not on all 877.** The
#   share of a document's detections in its busiest hour-of-week cell is reproduced by the
#   fitted documents' replications here (p = 0.155 hierarchical, 0.195 modulated; the
#   censored model's prior pulls slow documents up and misses, p = 0.005). On all 877
#   documents (`bayesrate calibrate`, `docs/calibration.md`) the same check is extreme
#   (p = 0.000), with 74 of 535 documents flagged individually, e.g. Zillow's privacy
#   policy with 21% of its 504 detections at the Wednesday 00:00 visit: weekly jobs.
# * **The drift models (`dynamic`, `excursion`) were built after this run** and are not in
#   it. The gap and hour checks are where they are judged (`docs/models.md`).
