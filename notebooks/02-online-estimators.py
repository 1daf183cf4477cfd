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
# # Online estimators: tracking a page's change rate one crawl at a time
#
# A large crawler cannot keep every page's visit history; it keeps a few numbers per URL and
# updates them after each fetch. Avrachenkov, Patil & Thoppe proposed three such *online*
# estimators of a page's Poisson change rate λ when the page is crawled at the times of an
# independent Poisson process of rate `p`: a law-of-large-numbers estimator (**LLN**),
# stochastic approximation (**SA**) and its momentum variant (**SAM**). They compared them with
# the **naive** rate and with offline estimators that keep the whole history (**MLE**, and the
# moment matching estimator **MM**).
#
# bayesrate adds two Bayesian online updates that keep a Gamma(α, β) posterior per page and use
# the actual interval lengths:
#
# - **Gamma-exposure**: `α += changed`, `β += τ` — conjugate for *uncensored* counts, so it
#   inherits the naive bias when several changes share an interval;
# - **Gamma-ADF**: the censoring-exact update (unchanged: `β += τ`; changed: the Gamma that
#   matches the first two moments of `Gamma(α, β) × (1 − e^{−λτ})`, assumed-density filtering).
#
# Questions: (1) do the paper's three experiments reproduce, and where do the Gamma updates
# stand? (2) On real pages whose every edit is known — Wikipedia articles — what does each
# estimator recover when the edit history is observed through a crawler's visit grid?

# %%
# %matplotlib inline
import os
from pathlib import Path

FAST = os.environ.get("BAYESRATE_FAST") == "1"  # CI runs the notebooks in this mode

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bayesrate.estimators import online as online_estimators
from bayesrate.studies import online, wikipedia

pd.set_option("display.precision", 4)

# %% [markdown]
# ## 1. The paper's experiments
#
# Each experiment runs 100 independent pages (20 in fast mode) for 2,000 crawls: crawl
# intervals `τ_k ~ Exp(p)` and flags `I_k ~ Bernoulli(1 − e^{−λτ_k})`, exact for a Poisson
# change process. Step sizes are the paper's. The Gamma updates start from a weak prior,
# `Gamma(1, 0.1/p)`: a prior mean of ten changes per crawl interval. `online.run` returns the
# mean, the 95% band across runs and the RMSE of every estimator at 40 checkpoints.

# %%
study = online.run(seed="notebook-online", fast=FAST)
rmse = study.tables["rmse"]
final = rmse[rmse.k == rmse.k.max()]
main_experiments = list(online.EXPERIMENTS)
final[final.experiment.isin(main_experiments)].pivot(
    index="estimator", columns="experiment", values="rmse"
)[main_experiments]

# %% [markdown]
# **λ = 5, p = 3** — the crawler visits less often than the page changes. The naive rate and
# the Gamma-exposure update converge to `p·λ/(λ + p) = 1.875` (the chance that an `Exp(p)`
# interval holds a change, times the crawl rate), far below 5; LLN, SA and SAM
# converge to the truth; the Gamma-ADF posterior mean has the lowest RMSE of the online
# estimators, equal to the offline MLE's.

# %%
study.figures["lam5_p3"]

# %% [markdown]
# **λ = 500, p = 3** — almost every interval holds a change, so the data say little more
# than "λ is much larger than p". Every estimator is poor here; the online estimators
# depend on their step sizes and the Gamma-ADF posterior on its prior.

# %%
study.figures["lam500_p3"]

# %% [markdown]
# **λ = 500, p = 50** — ten changes per crawl interval on average: informative enough for
# the censoring-exact estimators to converge.

# %%
study.figures["lam500_p50"]

# %% [markdown]
# The step sizes matter: at λ = 500 and p = 10, the paper's sensitivity runs. SAM with
# `β ≥ 0.6` and SA with `η ≥ 0.75` have not converged after 2,000 crawls.

# %%
sensitivity = final[~final.experiment.isin(main_experiments)][
    ["experiment", "estimator", "mean", "rmse"]
]
sensitivity

# %%
fig = Figure(figsize=(9, 4))
ax = fig.subplots()
names = ["Naive", "LLN", "SA", "SAM", "Gamma-exposure", "Gamma-ADF", "MLE", "MM"]
width = 0.8 / len(main_experiments)
for j, experiment in enumerate(main_experiments):
    part = final[final.experiment == experiment].set_index("estimator").reindex(names)
    lam = online.EXPERIMENTS[experiment]["lam"]
    ax.bar(np.arange(len(names)) + j * width, part["rmse"] / lam, width, label=experiment)
ax.set_xticks(np.arange(len(names)) + width, names, rotation=20)
ax.set_yscale("log")
ax.set_ylabel("RMSE / true rate after 2,000 crawls")
ax.set_title("Relative error of every estimator at the end of each experiment")
ax.legend()
fig

# %% [markdown]
# A Gamma posterior also says how sure it is. One simulated page at λ = 5, p = 3: the
# Gamma-ADF posterior's 90% credible interval after each crawl, against the truth.

# %%
rng = np.random.default_rng(20260101)
crawls = 300 if FAST else 2000
tau, flags = online.simulate(rng, lam=5.0, p=3.0, runs=1, samples=crawls)
state = online_estimators.make_state("gamma-adf", 1, prior_alpha=1.0, prior_beta=0.1 / 3.0)
path = np.zeros((crawls, 3))
for k in range(crawls):
    state.update(flags[:, k], tau[:, k])
    lo, hi = state.interval(0.90)
    path[k] = state.estimate[0], lo[0], hi[0]

fig = Figure(figsize=(8, 3.5))
ax = fig.subplots()
k = np.arange(1, crawls + 1)
ax.fill_between(k, path[:, 1], path[:, 2], alpha=0.3, label="90% credible interval")
ax.plot(k, path[:, 0], label="posterior mean")
ax.axhline(5.0, color="k", ls="--", lw=1, label="true rate")
ax.set_xscale("log")
ax.set_ylim(0, 15)
ax.set_xlabel("crawls")
ax.set_ylabel("change rate (changes per hour)")
ax.set_title("One page, Gamma-ADF: the interval narrows as crawls accumulate")
ax.legend()
single_page_covered = bool(path[-1, 1] <= 5.0 <= path[-1, 2])
fig

# %% [markdown]
# ## 2. Wikipedia articles as ground truth
#
# Three Wikipedia articles (Ebola virus disease, Ebola virus disease in the United States,
# Monsanto) come with the exact time of every edit. Each history is cut into 30-day windows;
# a crawler visiting on a regular grid (15 minutes to one week) records only whether the
# article changed since its previous visit, and every estimator is scored against the
# window's true edit rate.
#
# These traces have no stated licence, so bayesrate does not ship them. Set
# `BAYESRATE_WIKIPEDIA_DIR` to the directory that holds `wikipedia-revisions-westhad/` to run
# this part; without it the cells below say so and skip.

# %%
data_dir = os.environ.get("BAYESRATE_WIKIPEDIA_DIR")
have_wikipedia = bool(data_dir) and (Path(data_dir) / wikipedia.DATASET).is_dir()
if have_wikipedia:
    traces = wikipedia.run(data_dir=data_dir, fast=FAST)
    windows = traces.tables["windows"]
    print(traces.text)
else:
    print("Wikipedia traces not available: set BAYESRATE_WIKIPEDIA_DIR to run this part.")

# %%
if have_wikipedia:
    display(traces.figures["wikipedia"])  # noqa: F821 - IPython's display

# %% [markdown]
# Even a crawler that looks every 15 minutes sees only about three quarters of the edits.
# That is not a failure of the estimators: Wikipedia edits come in bursts — an editor saves
# several revisions within minutes — and a Poisson model of a bursty process undercounts
# at any interval longer than the bursts. The distribution of the gaps between consecutive
# edits shows it.

# %%
share_within_15_minutes = {}
if have_wikipedia:
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for trace_file in sorted((Path(data_dir) / wikipedia.DATASET).glob("*.Revisions.csv")):
        edit_hours, _ = wikipedia.read_trace(trace_file)
        gaps_minutes = np.diff(edit_hours) * 60
        gaps_minutes = np.sort(gaps_minutes[gaps_minutes > 0])
        article = trace_file.name.removesuffix(".Revisions.csv")
        share_within_15_minutes[article] = float(np.mean(gaps_minutes <= 15))
        ax.plot(
            gaps_minutes,
            np.arange(1, len(gaps_minutes) + 1) / len(gaps_minutes),
            label=trace_file.name.removesuffix(".Revisions.csv"),
        )
    for minutes, label in ((15, "15 min"), (60 * 24, "1 day")):
        ax.axvline(minutes, color="grey", ls=":", lw=1)
        ax.text(minutes, 0.02, label, rotation=90, va="bottom", ha="right", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("gap between consecutive edits (minutes)")
    ax.set_ylabel("fraction of gaps at most this long")
    ax.set_title("Wikipedia edits come in bursts")
    ax.legend(fontsize=8, loc="upper left")
    display(fig)  # noqa: F821 - IPython's display

# %%
at = final.set_index(["experiment", "estimator"])
results = {
    "lam5_p3: RMSE Naive": at.loc[("lam5_p3", "Naive"), "rmse"],
    "lam5_p3: RMSE SAM": at.loc[("lam5_p3", "SAM"), "rmse"],
    "lam5_p3: RMSE LLN": at.loc[("lam5_p3", "LLN"), "rmse"],
    "lam5_p3: RMSE Gamma-ADF": at.loc[("lam5_p3", "Gamma-ADF"), "rmse"],
    "lam5_p3: RMSE MLE": at.loc[("lam5_p3", "MLE"), "rmse"],
    "lam500_p3: RMSE LLN": at.loc[("lam500_p3", "LLN"), "rmse"],
    "lam500_p3: RMSE Gamma-ADF": at.loc[("lam500_p3", "Gamma-ADF"), "rmse"],
    "lam500_p3: RMSE MLE": at.loc[("lam500_p3", "MLE"), "rmse"],
    "lam500_p50: RMSE SAM": at.loc[("lam500_p50", "SAM"), "rmse"],
    "lam500_p50: RMSE Gamma-ADF": at.loc[("lam500_p50", "Gamma-ADF"), "rmse"],
    "lam500_p50: RMSE MLE": at.loc[("lam500_p50", "MLE"), "rmse"],
    "one page: truth inside the final 90% interval": single_page_covered,
}
if have_wikipedia:
    median_ratio = windows.pivot(index="interval_hours", columns="method", values="median_ratio")
    for hours in (0.25, 24.0, 168.0):
        if hours in median_ratio.index:
            for method in ("naive", "mle", "gamma-adf"):
                results[f"Wikipedia, visits every {hours:g} h: median {method} / truth"] = (
                    median_ratio.loc[hours, method]
                )
for article, share in share_within_15_minutes.items():
    results[f"Wikipedia {article}: edits within 15 min of the previous"] = share
for key, value in results.items():
    print(f"{key:58s} {value if isinstance(value, bool) else f'{value:.4g}'}")

# %% [markdown]
# ## What we learned
#
# Numbers from the full run (the cell above; 100 runs of 2,000 crawls per experiment):
#
# - **The paper's experiments reproduce.** At λ = 5, p = 3 the naive estimator's RMSE is
#   3.13 changes per hour (it converges to the wrong value); LLN reaches 0.24 and SAM 0.46.
# - **The censoring-exact Gamma update is the best online estimator where the data are
#   informative**: RMSE 0.179 at λ = 5, p = 3 (the offline MLE, which keeps every interval:
#   0.178) and 28.0 at λ = 500, p = 50 (MLE 27.7, SAM 42.9) — while storing two numbers per
#   page and giving a credible interval, which covered the truth on the single page shown.
# - **Where nearly every interval changes (λ = 500, p = 3) nothing works well**: RMSE 179 for
#   LLN, 118 for the MLE and 237 for Gamma-ADF (its weak prior still pulls it down after
#   2,000 crawls). The crawl must be faster; a scheduler should read such a page as "at
#   least this fast", not as a rate.
# - **Real pages are burstier than Poisson.** Between 39% and 70% of an article's edits follow
#   the previous one within 15 minutes. On Wikipedia, visits every 15 minutes recover a
#   median 0.74 of the true edit rate (MLE; naive 0.73), daily visits 0.55 (naive 0.43) and
#   weekly visits 0.32 (naive 0.16). The Gamma-ADF posterior mean is 0.77, 0.59 and 0.95;
#   the weekly 0.95 is mostly its prior (mean one edit per day, close to these articles'
#   rates, with four visits per window), not information. A Poisson estimator removes the
#   censoring bias but not the burstiness: that is a model question (see the
#   model-comparison notebook, `research/notebooks/03-model-comparison`).
