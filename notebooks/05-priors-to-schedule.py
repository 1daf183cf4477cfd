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
# # From priors to a schedule
#
# **Question.** A crawler that has never fetched a page still has to decide when to fetch it,
# and after a handful of fetches it has to decide again. What does a calibrated prior tell
# it about a page it has never seen, what does it believe after a few fetches, and does
# keeping the population the model fitted (rather than a Gamma summary of it) buy fresher
# copies at an equal budget?
#
# **Data.**
#
# - The calibrated artifact `models/ota-contrib/hierarchical/` (`bayesrate calibrate
#   --dataset ota-contrib`: a hierarchical log-normal model fitted to 877 documents of 385
#   services over 14 years). The same run also exports the excursion model's artifact, the
#   one `models/ota-contrib/recommended.json` names; this notebook reads the hierarchical
#   one. It is derived from the
#   [Open Terms Archive](https://opentermsarchive.org) collection
#   `OpenTermsArchive/contrib-versions`, © Open Terms Archive contributors, under the
#   [Open Data Commons Attribution License (ODC-BY 1.0)](https://opendatacommons.org/licenses/by/1-0/).
# - The change history of the [tldr pages](https://github.com/tldr-pages/tldr) embedded in the
#   package (`bayesrate.datasets.load_history("tldr-pages")`: the exact commit time of every
#   change of every page), "tldr-pages contributors, tldr-pages/tldr,
#   [CC-BY 4.0](https://creativecommons.org/licenses/by/4.0/)". Only paths and times are
#   used, no page text.
#
# **Method.** (1) Read the artifact's per-domain population of log-rates and compare it with
# the moment-matched Gamma it also carries. (2) Follow one URL through a sequence of fetches
# in the scheduler's two posterior families: the Gamma-ADF state (one Gamma per URL,
# moment-matched after a change) and the log-rate grid (48 nodes, exact censored updates,
# optional drift), against a brute-force quadrature of the exact posterior. (3) Replay the
# first half of 2024 of the tldr pages: every policy sees the same daily crawl log of the
# past, then spends the same budget; freshness is computed exactly from the true change
# times, against production crawler policies and a hindsight oracle. (4) Simulate a
# synthetic web whose rates come from the artifact and follow freshness over time per policy.
#
# Everything below uses the public API of `bayesrate`; sizes shrink when the environment
# variable `BAYESRATE_FAST=1` is set (CI runs the notebook that way; the committed outputs
# come from a full run).

# %%
# %matplotlib inline
import os
import subprocess
import sys
import time

FAST = os.environ.get("BAYESRATE_FAST") == "1"
HEAVY = ("pymc", "pytensor", "arviz")
started = time.perf_counter()

import bayesrate.scheduler  # noqa: F401  (the first bayesrate import of this kernel)

heavy_here = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
probe = (
    "import sys, bayesrate.scheduler, bayesrate.scheduler.rategrid, "
    "bayesrate.scheduler.replay, bayesrate.scheduler.harness, bayesrate.priors; "
    "print(sorted({m.split('.')[0] for m in sys.modules} & {'pymc', 'pytensor', 'arviz'}))"
)
heavy_fresh = subprocess.run(
    [sys.executable, "-c", probe], capture_output=True, text=True, check=True
).stdout.strip()
print(f"fast mode: {FAST}")
print(f"heavy modules after `import bayesrate.scheduler` in this kernel: {heavy_here}")
print(f"... in a fresh interpreter importing the scheduler, replay and harness: {heavy_fresh}")

# %% [markdown]
# The scheduler is meant to run inside a crawler, so it must not pull in the modelling stack:
# neither this kernel nor a fresh interpreter has PyMC, PyTensor or ArviZ loaded after
# importing it. (They are imported further down, on purpose, where a model is fitted or a
# saved fit is read.)
#
# ## 1. The calibrated artifact: a population, and its Gamma view
#
# `priors.json` holds, per domain (service), the population of page log-rates the
# hierarchical model fitted: a new page of service *d* has `ln λ ~ Normal(m_d, s)` given the
# hyperparameters, and with their posterior uncertainty integrated out a normal mixture in
# `ln λ` (schema version 2). Version 1 of the schema kept only a Gamma with the same mean
# and variance; version 2 keeps that Gamma as a documented *view*, with its fidelity
# stated. The shipped artifact is version 2 (`make main` writes it); a version-1 file still
# loads, with Gamma priors only.

# %%
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import display

from bayesrate.priors import GLOBAL_KEY, PRIORS_FILE, GammaPrior, PriorSet

MODELS = next((p for p in (Path("..") / "models", Path("models")) if p.is_dir()), Path("models"))
# the hierarchical model's artifact (the main job recommends the excursion model's; this
# notebook is about the hierarchical log-normal population)
ARTIFACT = MODELS / "ota-contrib" / "hierarchical" / PRIORS_FILE
priors = PriorSet.load(ARTIFACT)
print(f"artifact: {ARTIFACT} (schema {priors.schema_version})")
print(f"{len(priors.domains)} domains + a global prior for unseen domains")

# the service with the most documents in the fit
DOMAIN = max(priors.populations, key=lambda d: priors.populations[d].n_pages or 0)


def describe(label, population, gamma, fidelity):
    """One row: the population and its Gamma view side by side (rates per day)."""
    mixture = population.predictive
    mean = mixture.rate_moments()[0]
    return {
        "prior": label,
        "pages": population.n_pages,
        "mean (/day)": mean,
        "median, population (/day)": float(np.exp(mixture.log_quantile(0.5))),
        "median, Gamma view (/day)": float(np.exp(gamma.log_quantile(0.5))),
        "page sd of ln λ": population.scale.mean,
        "Gamma α": gamma.alpha,
        "P(λ < mean/100), population": fidelity["prob_below_mean_over_100"]["population"],
        "P(λ < mean/100), Gamma": fidelity["prob_below_mean_over_100"]["gamma"],
        "KL(pop ‖ Gamma) (nats)": fidelity["kl_population_to_gamma"],
    }


fidelity_table = pd.DataFrame(
    [
        describe(DOMAIN, priors.populations[DOMAIN], priors.domains[DOMAIN],
                 priors.gamma_fidelity[DOMAIN]),
        describe("global (unseen service)", priors.global_population, priors.global_prior,
                 priors.gamma_fidelity[GLOBAL_KEY]),
    ]
).set_index("prior")  # fmt: skip
display(fidelity_table.T)

# %% [markdown]
# Both distributions have the same mean rate, and there the agreement ends. The fitted
# population is a log-normal (a mixture of a few, with the hyperparameters' uncertainty)
# whose page-level sd of `ln λ` is about 1.5: wide, but with thin tails on the log scale.
# A Gamma with that mean and variance needs α ≪ 1, which piles its mass near zero: its
# median is far below the population's, and it says that a large share of pages change at
# less than a hundredth of the mean rate, where the population says almost none do. The
# figure shows it for the service with the most documents, for the global prior, and across
# every service.

# %%
from bayesrate.plots import figure

ln_rate = np.linspace(np.log(1e-7), np.log(30.0), 3000)  # ln(changes per day)
fig = figure((15, 4.2))  # a Figure outside pyplot: shown once, as this cell's value
axes = fig.subplots(1, 3)
for ax, label, population, gamma in (
    (axes[0], f"service: {DOMAIN}", priors.populations[DOMAIN], priors.domains[DOMAIN]),
    (axes[1], "global prior (unseen service)", priors.global_population, priors.global_prior),
):
    mixture = population.predictive
    mean = mixture.rate_moments()[0]
    ax.plot(np.exp(ln_rate), np.exp(mixture.log_density(ln_rate)), lw=2,
            label="fitted population (normal mixture in ln λ)")  # fmt: skip
    ax.plot(np.exp(ln_rate), np.exp(gamma.log_density(ln_rate)), lw=2, ls="--",
            label=f"Gamma view (α = {gamma.alpha:.3f}, same mean)")  # fmt: skip
    ax.axvline(mean, color="k", lw=0.8, label=f"mean {mean:.3g}/day")
    ax.axvline(mean / 100, color="grey", lw=0.8, ls=":", label="mean / 100")
    ax.set(xscale="log", xlabel="change rate λ (changes per day)",
           ylabel="density of ln λ (per unit of ln λ)", title=label)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left")
median_ratio = np.array(
    [priors.gamma_fidelity[d]["log_quantile_error"]["0.5"] for d in priors.domains]
) / np.log(10)
axes[2].hist(median_ratio, bins=30, color="tab:orange", edgecolor="white")
axes[2].set(xlabel="log10(median of Gamma view / median of population)",
            ylabel="services (count)",
            title=f"all {len(priors.domains)} services")  # fmt: skip
fig.tight_layout()
display(fig)

# %% [markdown]
# ## 2. One URL, a few fetches: the Gamma-ADF state against the log-rate grid
#
# The scheduler keeps one posterior per URL. Two families are available
# (`SchedulerConfig.posterior`):
#
# - `"gamma"`: one Gamma per URL, started from the artifact's Gamma view; an unchanged
#   interval of length τ is conjugate (β += τ), a changed one is moment-matched
#   (assumed-density filtering) because `1 − e^{−λτ}` is not Gamma-shaped.
# - `"grid"`: the posterior of `ln λ` on one shared grid of 48 nodes (2·10⁻⁵ to 50 changes
#   per day), started from the fitted population's exact cell masses and multiplied by the
#   exact censored likelihood of every interval. With a drift volatility σ_rw (per √day),
#   `ln λ` also diffuses between fetches, so an old belief is forgotten.
#
# A URL of the service above is fetched once a day: the first fetch is its baseline, the
# next 60 find it unchanged, the 61st finds it changed, the rest unchanged again. The
# reference is brute force: the population's density times the exact likelihood on 6,000
# points of `ln λ`, normalised by the trapezoid rule.

# %%
from bayesrate.history import hours_of
from bayesrate.scheduler import SchedulerConfig, SchedulerState

T0 = hours_of("2026-01-05T00:00Z")  # hours since the epoch; the artifact has no weekly profile
DAYS = 90
CHANGE_DAY = 61
CHECKPOINTS = (0, 30, CHANGE_DAY, DAYS)
QUANTILES = (0.05, 0.5, 0.95)
DRIFT = 0.05  # σ_rw per √day, to show forgetting (the artifact's drift is null)
variants = {
    "Gamma-ADF (Gamma view)": SchedulerConfig(posterior="gamma"),
    "grid (population)": SchedulerConfig(posterior="grid"),
    f"grid, drift σ_rw = {DRIFT}/√day": SchedulerConfig(posterior="grid", drift=DRIFT),
}
COLORS = ("tab:orange", "tab:blue", "tab:green")
url = "https://example.org/terms-of-service"
states = {}
for name, config in variants.items():
    states[name] = SchedulerState(priors, config)
    states[name].add([url], [DOMAIN])

trajectory, snapshots = [], {}
for day in range(DAYS + 1):
    changed = int(day == CHANGE_DAY)
    for name, state in states.items():
        state.observe([url], [T0 + 24.0 * day], [changed])
        row = {"variant": name, "day": day}
        row["mean"] = float(state.posterior_mean()[0]) * 24
        for q in QUANTILES:
            row[f"q{q}"] = float(state.posterior_quantile(q)[0]) * 24
        trajectory.append(row)
        if day in CHECKPOINTS:
            if state.posterior == "grid":
                snapshots[name, day] = state.log_weights_at()[0]
            else:
                alpha, beta_per_day = float(state.alpha[0]), float(state.beta[0]) / 24
                snapshots[name, day] = (alpha, beta_per_day)
trajectory = pd.DataFrame(trajectory)


def exact_posterior(day):
    """Population density × exact censored likelihood of the daily fetches up to ``day``,
    on a fine grid of ln λ (per day); returns the grid, the density and the mean rate."""
    x = np.linspace(np.log(1e-8), np.log(100.0), 6000)
    rate = np.exp(x)
    log_post = priors.populations[DOMAIN].predictive.log_density(x)
    unchanged_days = day - (day >= CHANGE_DAY)
    log_post = log_post - rate * unchanged_days
    if day >= CHANGE_DAY:
        log_post = log_post + np.log(-np.expm1(-rate))
    density = np.exp(log_post - log_post.max())
    density /= np.trapezoid(density, x)
    return x, density, float(np.trapezoid(rate * density, x))


exact_means = {day: exact_posterior(day)[2] for day in CHECKPOINTS}
pd.DataFrame(
    {
        name: [trajectory.query("variant == @name and day == @d")["mean"].item()
               for d in CHECKPOINTS]
        for name in variants
    }
    | {"exact (population × likelihood, quadrature)": [exact_means[d] for d in CHECKPOINTS]},
    index=pd.Index(CHECKPOINTS, name="day"),
).rename_axis(columns="posterior mean rate (changes/day)")  # fmt: skip

# %% [markdown]
# The grid tracks the exact posterior mean closely (its 48 cells are 0.31 wide in `ln λ`);
# the Gamma-ADF state, which started from the Gamma view, believes the page slower after a
# month of unchanged fetches and faster after the change. The densities show why: the Gamma
# view's mass near zero is never updated away by "unchanged" (each unchanged day multiplies
# the density by `e^{−λ}`, which barely touches a rate of 10⁻⁵/day), and one changed
# interval is then summarised by a Gamma again (moment matching), which moves all of it.

# %%
grid = states["grid (population)"].grid
node_rate = grid.rate * 24  # changes per day at the grid's nodes
fig = figure((16, 3.8))
axes = fig.subplots(1, len(CHECKPOINTS), sharey=True)
for ax, day in zip(axes, CHECKPOINTS, strict=True):
    x, density, _ = exact_posterior(day)
    ax.plot(np.exp(x), density, color="k", lw=2.5, alpha=0.35, label="exact (quadrature)")
    for name, style, color in zip(variants, ("--", "-", ":"), COLORS, strict=True):
        snap = snapshots[name, day]
        if isinstance(snap, tuple):  # Gamma(α, β per day): density of ln λ
            alpha, beta_day = snap
            ax.plot(np.exp(x), np.exp(GammaPrior(alpha, beta_day).log_density(x)), style,
                    color=color, label=name)  # fmt: skip
        else:  # cell probabilities / cell width = density of ln λ
            ax.step(node_rate, grid.probabilities(snap[None, :])[0] / grid.spacing, style,
                    color=color, where="mid", label=name)  # fmt: skip
    what = {0: "prior (baseline fetch)", CHANGE_DAY: f"day {day}: changed"}.get(
        day, f"day {day}: unchanged since day {0 if day < CHANGE_DAY else CHANGE_DAY}"
    )
    ax.set(xscale="log", xlim=(1e-6, 10), title=what, xlabel="change rate λ (changes per day)")
axes[0].set_ylabel("posterior density of ln λ")
axes[0].legend(fontsize=7, loc="upper left")
fig.tight_layout()
display(fig)

# %%
fig = figure((10, 4.5))
ax = fig.subplots()
for (name, rows), color, style in zip(trajectory.groupby("variant", sort=False), COLORS,
                                      ("-", "-", "--"), strict=True):  # fmt: skip
    ax.plot(rows["day"], rows["mean"], style, color=color, lw=2, label=f"{name}: mean")
    ax.fill_between(rows["day"], rows["q0.05"], rows["q0.95"], color=color, alpha=0.12,
                    label=f"{name}: 5–95%")  # fmt: skip
ax.plot(list(exact_means), list(exact_means.values()), "ko", label="exact mean (quadrature)")
ax.axvline(CHANGE_DAY, color="grey", lw=0.8, ls=":")
ax.set(yscale="log", ylim=(1e-7, 5), xlabel="days since the baseline fetch (one fetch a day)",
       ylabel="rate (changes per day)",
       title=f"one URL of {DOMAIN}: unchanged every day except day {CHANGE_DAY}")  # fmt: skip
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
fig.tight_layout()
display(fig)

# %% [markdown]
# With drift (σ_rw = 0.05 per √day, i.e. a spread of about 0.4 in `ln λ` per 60 days) the
# grid forgets a little of the past between fetches, so its interval stays slightly wider
# and it reacts more to the change. The artifact itself carries no drift (`drift: null`: the
# hierarchical model has none). Whether any of this is worth fetches is an empirical
# question, answered next on real histories.
#
# ## 3. Replay: the first half of 2024 of the tldr pages
#
# Every policy sees the same censored log of the past: a daily crawl of every page up to
# 2024-01-01, at a random hour per page. From then on, for 183 days, each spends the same
# budget —
# `B` fetches per live page per day, granted every half hour — and a fetch returns only
# "changed since your last fetch". Freshness (the share of live time a page's stored copy
# equals the live page) is computed exactly from the true commit times, with equal weights.
#
# Policies: production crawler rules (`uniform` = Nutch's default fixed interval,
# `nutch-adaptive`, `stormcrawler-adaptive`, `heritrix-wait`), `pagestate` (the seed
# project's exposure update), ours with the Gamma-ADF state (`bayesrate`, the default) and
# with the grid (`grid`), both re-planning Azar-optimal rates daily from each posterior's
# expected freshness gain, and `oracle-hindsight`: Azar's optimum with each page's realised
# number of changes in the window — a reference that knows the future, not a bound.
#
# Ours need priors for the tldr platforms: the hierarchical model is fitted (by NUTS, short
# chains) to the warm-up log only, and exported as a version-2 artifact. This is the one
# step that imports PyMC.

# %%
from bayesrate.datasets import load_history
from bayesrate.scheduler import replay

SEED = "bayesrate-schedule-replay"
REPLAY_START, REPLAY_DAYS = "2024-01-01T00:00Z", (21 if FAST else 183)
BUDGETS = {"1/30": 1 / 30, "1/90": 1 / 90}
history = load_history("tldr-pages")
if FAST:  # every 25th page
    history = history.subset(np.arange(0, history.n_pages, 25))
start = hours_of(REPLAY_START)
warmup = replay.warmup_crawl(history, start, 24.0, SEED)
setup = replay.prepare(history, warmup, start=start, days=REPLAY_DAYS)
print(history)
print(f"replay: {setup.n:,} pages alive in the window, warm-up log {len(setup.warmup_time):,} "
      f"daily visits before {REPLAY_START}")  # fmt: skip

# %%
from bayesrate.export import domain_priors
from bayesrate.models.diagnostics import compute as diagnostics_of
from bayesrate.quick_fit import QUICK_SAMPLER, describe_fit, fit_model

POPULATION_VARS = ["global_log_rate_mean", "domain_log_rate_mean", "domain_log_rate_sd",
                   "page_log_rate_sd"]  # fmt: skip
t = time.perf_counter()
sampler = {"chains": 2, "draws": 100, "tune": 100} if FAST else QUICK_SAMPLER
tldr_fit = fit_model("hierarchical", warmup.observations, {**sampler, "seed": f"{SEED}-priors"})
tldr_priors = domain_priors(tldr_fit, metadata={"model": "hierarchical (warm-up log)"})
fit_seconds = time.perf_counter() - t
fit_diagnostics = tldr_fit.diagnostics_.to_dict()
population_diagnostics = diagnostics_of(
    tldr_fit.idata_, POPULATION_VARS, method="nuts", seconds=fit_seconds
).to_dict()
print(f"hierarchical fit on the warm-up log ({sampler}): {fit_seconds:.0f} s")
print(f"  all parameters: {describe_fit(fit_diagnostics)}; worst R-hat: "
      f"{fit_diagnostics['worst_r_hat']}")  # fmt: skip
print(f"  the population parameters the priors are made of ({', '.join(POPULATION_VARS)}): "
      f"{describe_fit(population_diagnostics)}")  # fmt: skip
tldr_table = pd.DataFrame(
    [describe(d, tldr_priors.populations[d], tldr_priors.domains[d],
              tldr_priors.gamma_fidelity[d]) for d in sorted(tldr_priors.populations)]
    + [describe("global (unseen platform)", tldr_priors.global_population,
                tldr_priors.global_prior, tldr_priors.gamma_fidelity[GLOBAL_KEY])]
).set_index("prior")  # fmt: skip
tldr_table.round(5)

# %%
t = time.perf_counter()
replays = {
    label: replay.replay_policies(setup, budget=budget, priors=tldr_priors, seed=SEED,
                                  ours=("bayesrate", "grid"))
    for label, budget in BUDGETS.items()
}  # fmt: skip
replay_seconds = time.perf_counter() - t
PRODUCTION = ("uniform", "nutch-adaptive", "stormcrawler-adaptive", "heritrix-wait")
rows = []
for label, result in replays.items():
    best = max(PRODUCTION, key=lambda n: result.policies[n]["freshness"])
    best_freshness = result.policies[best]["freshness"]
    margin = result.policies["oracle-hindsight"]["freshness"] - best_freshness
    for name, r in result.policies.items():
        rows.append({"budget (fetches/page/day)": label, "policy": name,
                     "freshness": r["freshness"],
                     "harmonic staleness": r["harmonic_staleness"],
                     "fetches / budget": r["fetches_vs_budget"],
                     "best production": best,
                     "÷ best production": r["freshness"] / best_freshness,
                     "share of oracle margin": (r["freshness"] - best_freshness)
                     / margin})  # fmt: skip
replay_table = pd.DataFrame(rows)
print(f"{len(BUDGETS)} replays in {replay_seconds:.0f} s; "
      f"{replays['1/30'].setup['changes_in_window']:,} changes in the window")  # fmt: skip
shown = ["freshness", "÷ best production", "share of oracle margin"]
replay_table.pivot(index="policy", columns="budget (fetches/page/day)", values=shown).round(4)

# %%
order = [*PRODUCTION, "pagestate", "bayesrate", "grid", "oracle-hindsight"]
ratios = replay_table.pivot(index="policy", columns="budget (fetches/page/day)",
                            values="÷ best production").loc[order]  # fmt: skip
fig = figure((10, 4.2))
ax = fig.subplots()
ypos = np.arange(len(order))
for k, label in enumerate(BUDGETS):
    ax.barh(ypos + (k - 0.5) * 0.38, (ratios[label] - 1) * 100, height=0.38,
            label=f"budget {label} fetches/page/day")  # fmt: skip
ax.axvline(0, color="k", lw=0.8)
ax.set_yticks(ypos, order)
ax.invert_yaxis()
ax.set(xlabel="freshness relative to the best production policy (%)",
       title=f"tldr pages, {REPLAY_DAYS} days from {REPLAY_START[:10]}, equal weights")  # fmt: skip
ax.legend(fontsize=8)
ax.grid(axis="x", alpha=0.3)
fig.tight_layout()
display(fig)

# %% [markdown]
# ## 4. Simulation: freshness over time on a web drawn from the artifact
#
# `bayesrate.scheduler.harness.compare` builds a synthetic web of pages spread over the
# artifact's 385 services (Zipf-like sizes, per-host politeness limits), with Pareto(1.5)
# importance weights; 25% of the pages follow a weekday business-hours profile and 15% are
# bursty. Each page's long-run rate is drawn from its service's prior — note: from the
# **Gamma view** (`PriorSet.arrays`), so this world is generated by the distribution the
# Gamma-ADF state starts from, not by the population the grid starts from. Every policy
# gets the same fetch tokens every half hour; baselines have their interval constants
# scaled to use the budget. The oracle plans Azar's optimum with the true long-run rates.
# Ours is run twice, once per posterior family (Gamma-ADF and grid), at two budgets.

# %%
from bayesrate.plots import freshness_over_time
from bayesrate.scheduler.harness import compare

SIM_PAGES, SIM_DAYS = (500, 7) if FAST else (2_000, 60)
SIM_BUDGETS = (0.2, 0.05)
t = time.perf_counter()
simulations = {
    (budget, family): compare(SIM_PAGES, SIM_DAYS, budget, seed="bayesrate-notebook-05",
                              priors=priors, posterior=family)
    for budget in SIM_BUDGETS
    for family in ("gamma", "grid")
}  # fmt: skip
simulation_seconds = time.perf_counter() - t
simulation_table = pd.DataFrame(
    [
        {"budget (fetches/URL/day)": budget, "ours": family,
         "ours freshness": r["policies"]["bayesrate"]["freshness"],
         "oracle freshness": r["policies"]["oracle"]["freshness"],
         "best production": r["summary"]["best_production_baseline"],
         "ours ÷ oracle": r["summary"]["ours_vs_oracle_freshness"],
         "ours ÷ best production": r["summary"]["ours_vs_best_production_freshness"],
         "oracle ÷ best production": r["summary"]["ours_vs_best_production_freshness"]
         / r["summary"]["ours_vs_oracle_freshness"]}
        for (budget, family), r in simulations.items()
    ]
)  # fmt: skip
print(f"{len(simulations)} simulations of {SIM_PAGES:,} URLs x {SIM_DAYS} days "
      f"in {simulation_seconds:.0f} s")  # fmt: skip
simulation_table.round(4)

# %%
for budget in SIM_BUDGETS:  # one figure per budget; ours is the grid posterior
    ax = freshness_over_time(simulations[budget, "grid"])
    ax.set_title(f"{SIM_PAGES:,} URLs from the ota-contrib priors, budget {budget} "
                 "fetches/URL/day (ours: grid posterior)")  # fmt: skip
    ax.set(xlabel="day of the simulation", ylabel="weighted freshness (share fresh, daily mean)")
    ax.figure.tight_layout()
    display(ax.figure)

# %% [markdown]
# ## Numbers
#
# The cell below prints every number the closing section quotes (from the committed full
# run; fast mode prints its own, smaller-sample values).

# %%
for label, row in fidelity_table.iterrows():
    print(f"[artifact] {label} ({row['pages']:.0f} documents): mean {row['mean (/day)']:.4f}/day; "
          f"median: population {row['median, population (/day)']:.2e}, Gamma view "
          f"{row['median, Gamma view (/day)']:.2e}; P(λ < mean/100): population "
          f"{row['P(λ < mean/100), population']:.3f}, Gamma view "
          f"{row['P(λ < mean/100), Gamma']:.3f}; KL(pop ‖ Gamma) "
          f"{row['KL(pop ‖ Gamma) (nats)']:.2f} nats")  # fmt: skip
print(f"[artifact] median ratio Gamma view / population over {len(median_ratio)} services: "
      f"10^{np.median(median_ratio):.2f} (range 10^{median_ratio.min():.2f} to "
      f"10^{median_ratio.max():.2f})")  # fmt: skip
for day in (30, CHANGE_DAY, DAYS):
    means = {name: trajectory.query("variant == @name and day == @day")["mean"].item()
             for name in variants}  # fmt: skip
    shown = ", ".join(f"{name} {m:.4f}" for name, m in means.items())
    print(f"[one URL] day {day}: posterior mean/day: exact {exact_means[day]:.4f}, {shown}")
before = trajectory[trajectory["day"] == CHANGE_DAY - 1].set_index("variant")["q0.05"]
print(f"[one URL] day {CHANGE_DAY - 1} (60 unchanged days), 5% quantile/day: "
      + ", ".join(f"{name} {q:.2e}" for name, q in before.items()))  # fmt: skip
print(f"[replay] tldr pages: {setup.n:,} pages, {REPLAY_DAYS} days from {REPLAY_START[:10]}, "
      f"{replays['1/30'].setup['changes_in_window']:,} changes; priors fit {fit_seconds:.0f} s "
      f"({describe_fit(fit_diagnostics)})")  # fmt: skip
for label in BUDGETS:
    sub = replay_table[replay_table["budget (fetches/page/day)"] == label].set_index("policy")
    best = sub["best production"].iloc[0]
    print(f"[replay] budget {label}: best production {best} freshness "
          f"{sub.loc[best, 'freshness']:.4f}; ÷ best production: "
          + ", ".join(f"{n} {sub.loc[n, '÷ best production']:.4f}"
                      for n in ("bayesrate", "grid", "oracle-hindsight"))
          + "; share of the oracle's margin: "
          + ", ".join(f"{n} {sub.loc[n, 'share of oracle margin']:+.2f}"
                      for n in ("bayesrate", "grid")))  # fmt: skip
for _, r in simulation_table.iterrows():
    print(f"[simulation] budget {r['budget (fetches/URL/day)']}, ours = {r['ours']}: "
          f"ours ÷ oracle {r['ours ÷ oracle']:.4f}, ours ÷ best production "
          f"({r['best production']}) {r['ours ÷ best production']:.4f}, oracle ÷ best production "
          f"{r['oracle ÷ best production']:.4f}")  # fmt: skip
print(f"[run] {time.perf_counter() - started:.0f} s for the whole notebook (fast mode: {FAST})")

# %% [markdown]
# ## What we learned
#
# Numbers from the committed full run (printed by the cell above).
#
# - **A Gamma with the population's mean and variance is a different prior.** In the shipped
#   artifact (schema 2), for Twitter (18 documents, mean 0.0135 changes/day) the population's
#   median is 0.0063/day and the Gamma view's 0.0027/day; the Gamma puts 22.6% of pages
#   below a hundredth of the mean rate, the population 0.1% (KL 0.41 nats). For an unseen
#   service (global prior, mean 0.0184/day, Gamma α = 0.058) the medians are 0.0044/day
#   against 1.2·10⁻⁶/day and the shares below mean/100 3.0% against 67.0% (KL 1.18 nats).
#   Across the 385 services the Gamma view's median is a median 10^−0.89 ≈ 0.13 times the
#   population's (from 10^−2.05 to 10^−0.36).
# - **The grid posterior is the exact posterior; the Gamma-ADF state is not.** For one URL
#   fetched daily, the exact posterior mean (quadrature) after 30 unchanged days is
#   0.0076/day: the grid gives 0.0076, the Gamma-ADF state 0.0054 (29% low). Just after a
#   detected change (day 61) it is 0.0127: grid 0.0127, Gamma-ADF 0.0158 (25% high); on
#   day 90, 0.0100 against 0.0100 and 0.0116. The Gamma's lower tail, which no "unchanged"
#   fetch can remove, is what drags it down before the change: after 60 unchanged days its
#   5% quantile is 1.2·10⁻⁷/day, the grid's 6.1·10⁻⁴/day (5.5·10⁻⁴ with drift).
# - **On the tldr pages a better posterior does not buy freshness.** First half of 2024
#   (5,019 pages, 1,915 changes, equal weights, daily warm-up crawl): uniform revisiting is
#   the best production policy at both budgets (freshness 0.9689 at 1/30 and 0.9168 at
#   1/90 fetches per page per day). Ours ties it: Gamma-ADF 1.0001 and 0.9994 of uniform,
#   grid 1.0000 and 0.9989, i.e. none of the hindsight oracle's margin (the oracle reaches
#   1.0209 and 1.0559). The priors fitted on the warm-up explain part of it: within a
#   platform the tldr pages' log-rates spread by only 0.43 (sd of ln λ), and there a Gamma
#   is a good approximation (α ≈ 4.8 for `common` and `linux`), so the two posteriors
#   hardly differ; what the oracle knows — which pages 2024's edits will touch — is not in
#   any page's past rate. (The warm-up fit, 4 chains × 1,000 draws after 300 tuning steps,
#   met every gate: R-hat 1.0086, bulk ESS ≥ 1,393, no divergences.)
# - **In the simulated web ours is within 0.8–2.8% of the oracle.** With 2,000 URLs from the
#   ota-contrib priors over 60 days, ours reaches 0.9919 (Gamma-ADF) and 0.9912 (grid) of
#   the oracle's freshness at 0.2 fetches/URL/day, 1.0116 and 1.0108 of the best production
#   policy (stormcrawler-adaptive; oracle 1.0198); at 0.05 it reaches 0.9760 and 0.9725 of
#   the oracle, 1.0216 and 1.0179 of the best production policy (stormcrawler-adaptive
#   again; oracle 1.0467). The Gamma-ADF state is slightly ahead here because this world
#   draws its true rates from the Gamma views, the prior it starts from, even when the
#   artifact carries the population.
# - The scheduler stays light: importing `bayesrate.scheduler` (and its replay, grid and
#   harness modules) loads no PyMC, PyTensor or ArviZ. The committed full run took 336 s
#   on the otherwise idle 2-core machine: the warm-up fit 52 s, the two replays 189 s, the
#   four simulations 88 s.
