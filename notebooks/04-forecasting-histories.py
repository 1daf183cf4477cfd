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
# # Forecasting real histories: which model predicts the future of real pages?
#
# Every model in this package is fitted to a crawl log: one bit per visit, *changed since
# the last visit or not*. On a crawl log the truth is censored, so a model can only be
# checked against what the crawler saw. An exact **change history** — every change of every
# page, to the second — lets us do better: crawl the past the way a crawler would, give each
# method only that censored log, ask it to predict the next six months, and score the
# prediction against what really happened.
#
# **Question.** Given a daily crawl of a page's past, which method gives the best
# probabilistic forecast of its future: the point estimators (naive, Cho & Garcia-Molina,
# maximum likelihood) plugged into a Poisson model, or the Bayesian models (independent
# pages, a hierarchy over platforms, hour-of-week modulation, Gamma-mixed bursts)? And does
# the answer hold when the future does not look like the past? (The Gamma-mixed bursts are
# the `bursty` model, now in the research package, `research/`.)
#
# **Data.** The embedded `tldr-pages` history: the creation, every landed change and the
# deletion of each English page of [tldr-pages/tldr](https://github.com/tldr-pages/tldr)
# (first-parent commit times of the main branch, 2014–2026; domain = platform). The pages
# are © the tldr-pages team and contributors, licensed
# [CC-BY 4.0](https://creativecommons.org/licenses/by/4.0/); attribution: *"tldr-pages
# contributors, tldr-pages/tldr, CC-BY 4.0"*. The package ships only paths and times (no
# page text); `bayesrate data list` and `bayesrate/datasets/data/ATTRIBUTION.md` give the
# source commit.

# %%
# %matplotlib inline
import os
import time

FAST = os.environ.get("BAYESRATE_FAST") == "1"  # CI runs the notebooks in this mode

import numpy as np
import pandas as pd
from IPython.display import display

from bayesrate import clock, datasets, plots
from bayesrate.constants import HOURS_PER_DAY
from bayesrate.history import FixedInterval, crawl, hours_of
from bayesrate.studies import forecast

SEED = "notebook-forecasting-histories"
CRAWL_EVERY_HOURS = 24.0  # a daily crawl, each page at its own whole-hour phase
HORIZON_DAYS = 180.0  # the test window after each split
# the two splits compared: the burst of 2025 arrives / the quiet after it (None: the
# study's default split, the end of the history minus the horizon)
SPLITS = {"2025 burst ahead": "2025-01-01T00:00Z", "quiet after the burst": None}
if FAST:  # a smoke test: few pages, two models, short chains
    MAX_PAGES, METHODS = 150, ["naive", "cho", "mle", "censored", "hierarchical"]
    SAMPLER = {"draws": 150, "tune": 150, "chains": 2}
    PREDICTIVE_DRAWS = 100
else:
    MAX_PAGES, METHODS = 1000, list(forecast.METHODS)  # every core method
    SAMPLER = {"draws": 1000, "tune": 1000, "chains": 4}
    PREDICTIVE_DRAWS = 500
pd.set_option("display.precision", 4)
pd.set_option("display.width", 120)

# %% [markdown]
# ## 1. The data: fifteen years of tldr pages
#
# `datasets.load_history` returns a `ChangeHistory`: per page its change times and its
# lifetimes (a page exists from its creation to its deletion), in hours since the epoch.
# Changes that landed in one commit on several pages share one instant; several commits on
# one page at the same second are one change (the history's notes count every merge).

# %%
history = datasets.load_history("tldr-pages")
summary = history.summary()
change_times = clock.to_timestamps(history.times)
per_year = pd.Series(1, index=change_times).groupby(change_times.year).sum()
print(
    f"{summary['pages']:,} pages on {summary['domains']} platforms, "
    f"{summary['changes']:,} changes, {summary['start']} .. {summary['end']}"
)
print(f"pages alive at the end: {summary['alive_at_end']:,}")
per_year.rename("changes").to_frame().T

# %% [markdown]
# The activity is anything but stationary. Changes per year grow from tens and hundreds
# before 2019 to 2,858 in 2024, then 8,044 in 2025: mass edits in March–April 2025 and
# again in December 2025, after which the collection calms down. Many of these changes land
# in **one commit touching hundreds of pages at once** (26 of the 5,633 commit instants touch
# at least 100 pages each and carry 20.7% of all changes): a page's change is then not an
# independent Poisson event but part of a collection-wide burst.

# %%
instant, pages_at_instant = np.unique(history.times, return_counts=True)
big = pages_at_instant >= 100
share_in_big = pages_at_instant[big].sum() / history.n_changes
print(
    f"{len(instant):,} distinct commit instants; {int(big.sum())} of them touch >= 100 "
    f"pages and carry {share_in_big:.1%} of all changes; the largest touches "
    f"{pages_at_instant.max()} pages"
)

monthly = pd.Series(1, index=change_times).sort_index().resample("MS").sum()
test_windows = {}
for label, split in SPLITS.items():
    lo = history.end - HORIZON_DAYS * HOURS_PER_DAY if split is None else hours_of(split)
    test_windows[label] = (
        clock.to_timestamp(lo),
        clock.to_timestamp(lo) + pd.Timedelta(days=HORIZON_DAYS),
    )

fig = plots.figure((12, 4.2))
left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1]})
left.step(monthly.index, monthly.to_numpy(), where="post", color="k", lw=1)
for (label, (lo, hi)), colour in zip(test_windows.items(), ["C1", "C2"], strict=True):
    left.axvspan(lo, hi, color=colour, alpha=0.25, label=f"test window: {label}")
left.set_yscale("log")
left.set_xlabel("month (UTC)")
left.set_ylabel("changes per month (all pages)")
left.set_title("tldr-pages: changes per month")
left.legend(fontsize=8, loc="upper left")
order = np.sort(pages_at_instant)[::-1]
right.plot(np.arange(1, len(order) + 1), np.cumsum(order) / history.n_changes, color="C0")
right.set_xscale("log")
right.set_xlabel("commit instants, largest first (count)")
right.set_ylabel("cumulative share of all changes")
right.set_title("a few commits carry many changes")
fig.tight_layout()
fig

# %% [markdown]
# ## 2. What a crawler sees
#
# `bayesrate.history.crawl(history, schedule, seed)` replays a crawl: with
# `FixedInterval(every_hours)` every page is visited at a fixed interval from its creation
# (each page at its own random phase) until its deletion. The result holds the
# `Observations` a crawler would have logged — one *changed / not changed* flag per visit —
# and, for every interval, the exact number of changes that happened in it. The difference
# is what censoring hides: two changes in one interval are detected as one.

# %%
crawl_days = [1, 3, 7, 14, 30, 90]
hidden = []
by_year = {}
for days in crawl_days:
    replay = crawl(history, FixedInterval(days * HOURS_PER_DAY, phase_step_hours=1.0), SEED)
    obs = replay.observations
    detected, true = int(obs.changed.sum()), int(replay.true_changes.sum())
    hidden.append(
        {
            "crawl every (days)": days,
            "visits": len(obs.time),
            "true changes": true,
            "detected": detected,
            "hidden share": 1 - detected / true,
        }
    )
    if days in (1, 7):
        year = clock.to_timestamps(obs.time).year
        frame = pd.DataFrame({"year": year, "true": replay.true_changes, "seen": obs.changed})
        totals = frame.groupby("year")[["true", "seen"]].sum()
        by_year[days] = 1 - totals["seen"] / totals["true"]
hidden = pd.DataFrame(hidden).set_index("crawl every (days)")
hidden_by_year = pd.DataFrame({f"every {d} d": share for d, share in by_year.items()}).T
display(hidden)
hidden_by_year

# %% [markdown]
# The true counts differ slightly between schedules because only changes between two visits
# of a page are counted (a change after a page's last visit is never seen). A daily crawl
# hides 0.7% of the changes, a weekly one 3.4%, a 30-day one 7.8% and a 90-day one 14%.
# Per year (right panel) the hidden share does **not** follow the volume: 2025, with 8,044
# changes, loses 3.6% to a weekly crawl, about as much as the calm 2023 and 2024 (2.9–3.0%);
# the worst year is 2018 (11%). The mass edits touch many pages *once each*, not one page
# many times. So on tldr, with a daily crawl, censoring is a sub-percent effect: whatever
# goes wrong in the forecasts below is not the censoring, it is the future not looking like
# the past.

# %%
fig = plots.figure((12, 4))
left, right = fig.subplots(1, 2)
left.plot(hidden.index, hidden["hidden share"], marker="o")
left.set_xscale("log")
left.set_xlabel("crawl interval (days)")
left.set_ylabel("share of true changes not detected")
left.set_title("censoring grows with the crawl interval")
for (days, share), colour in zip(by_year.items(), ["C0", "C3"], strict=True):
    right.plot(share.index, share.to_numpy(), marker="o", color=colour, label=f"every {days} d")
right.set_xlabel("year of the detecting visit")
right.set_ylabel("share of true changes not detected")
right.set_title("hidden share per year")
right.legend(fontsize=8)
fig.tight_layout()
fig

# %% [markdown]
# ## 3. Method: the forecast study
#
# `bayesrate.studies.forecast.run` (also `bayesrate study forecast` on the command line)
# does the whole experiment for one split:
#
# - **Design.** Every page alive at the split is crawled every 24 h (a page-specific
#   whole-hour phase) from its creation. The visits up to the split are the **training
#   data** — all a method sees. The same crawl continues through the **test window**, the
#   180 days after the split; its intervals carry the exact change counts. A page is scored
#   if it has at least one training and one test interval.
# - **Methods.** `naive` (detections / time observed), `cho` (Cho & Garcia-Molina's
#   censoring-corrected estimator) and `mle` (the exact interval-censored maximum
#   likelihood) give one rate per page; their forecast is the plug-in Poisson/Binomial with
#   that rate, floored at 0.5 change over the page's training time so that a page that never
#   changed does not get probability zero. The Bayesian models are fitted by NUTS on the
#   training crawl's sufficient statistics: `censored` (independent pages, weak Gamma prior),
#   `hierarchical` (page rates drawn from a log-normal per platform), `modulated` (the
#   hierarchy times an hour-of-week multiplier) and `bursty` (the hierarchy with each
#   interval's change probability Gamma-mixed, `1 − (1 + λτ/κ)^{−κ}`, one shape `κ` per
#   platform; a research model now: it lives in `research/` and is a forecast method only
#   with that package installed, `pip install -e research`). Their forecast is the
#   posterior predictive, averaged over posterior draws.
# - **What is predicted.** Per page, the number `k` of test-window crawl intervals with a
#   detected change (what a crawler will see), and the probability that the page changes at
#   all in the window (scored against the exact history).
#
# **Scores** (per page, then averaged over pages):
#
# - **Log score**, `log P(k)`: the log predictive probability of the count that was
#   observed. Higher is better; it is the only score here that is *proper* for the whole
#   predictive distribution, and it punishes confident mistakes without limit. A difference
#   of 0.1 means the better method gave the observed outcome `e^{0.1} ≈ 1.11` times the
#   probability, per page, on average.
# - **Brier score** of "changes at all": `(P(change) − 1[changed])²`. Lower is better; 0.25
#   is what a constant 0.5 earns.
# - **coverage90** from the **randomised PIT** `u = F(k − 1) + V·P(k)` with `V` uniform on
#   [0, 1] (`F` and `P` the predictive CDF and PMF). For a calibrated predictive `u` is
#   uniform even for counts that are mostly 0 or 1, so the share of pages with `u` in
#   [0.05, 0.95] should be 0.90: less means the predictive is too narrow or shifted, more that
#   it is too wide. The PIT histogram shows which: a pile at low `u` means the method
#   predicted more changes than happened.
# - **Rate log-RMSE**: the RMSE of `log(predicted rate) − log(realised rate)` over the pages
#   that changed at least once in the window (realised rate = exact changes / window length;
#   the Bayesian models predict their posterior mean rate).
#
# A **hindsight reference** is scored alongside: the plug-in forecast with each page's
# *realised* rate in its test window. It knows the future, so it is not a method but a
# yardstick: the gap to it is what not knowing the window's own rate costs any
# constant-rate forecast.
#
# **Sizes chosen for this notebook.** A run of all the methods on all 6,907 pages at the
# study's former default sampler (4 chains × 500 draws) took 13 min 45 s on this shared machine,
# and those short chains miss the R-hat gate (1.01). Here each split scores a random 1,000
# of its eligible pages, with the seven methods above, a daily crawl and a 180-day horizon, and the
# fits run 4 chains × 1,000 draws after 1,000 tuning steps, so that they can meet the
# convergence gates (R-hat ≤ 1.01, bulk and tail ESS ≥ 400, no divergences). Two splits are
# compared:
#
# - **2025-01-01** ("2025 burst ahead"): trained on 2014–2024, tested on January–June 2025,
#   the half-year of the first mass edits;
# - **2026-02-23** ("quiet after the burst", the study's default: the end of the history
#   minus 180 days): trained through the December 2025 burst, tested on the calm months
#   after it.
#
# The committed outputs are from the full run of 2026-12-01, when `forecast.METHODS` held
# those seven methods. Today it holds ten: the same without `bursty`, plus `dynamic`,
# `excursion`, `mmpp` and `mmpp_mixture`, so a full re-run scores more methods than the
# tables below show.

# %%
results, run_seconds = {}, {}
for label, split in SPLITS.items():
    started = time.perf_counter()
    results[label] = forecast.run(
        history=history,
        seed=SEED,
        fast=FAST,
        split=split,
        crawl_every=CRAWL_EVERY_HOURS,
        horizon_days=HORIZON_DAYS,
        methods=METHODS,
        max_pages=MAX_PAGES,
        predictive_draws=PREDICTIVE_DRAWS,
        progress=print,
        **SAMPLER,
    )
    run_seconds[label] = time.perf_counter() - started
    print(f"{label}: {run_seconds[label]:.0f} s\n")

# %% [markdown]
# ## 4. Did the fits converge?
#
# Every Bayesian fit reports the worst R-hat and the smallest bulk and tail effective sample
# size over all its parameters (one rate per page and the population parameters), and the
# number of divergent transitions. `converged` says whether all of the package's gates were
# met; a fit that misses one is reported, not hidden, and its scores should be read with
# that in mind.

# %%
rows = []
for label, result in results.items():
    for name, m in result.methods.items():
        if m.diagnostics is None:
            continue
        d = m.diagnostics
        rows.append(
            {
                "split": label,
                "method": name,
                "r_hat_max": d["r_hat_max"],
                "ess_bulk_min": d["ess_bulk_min"],
                "ess_tail_min": d["ess_tail_min"],
                "divergences": d["divergences"],
                "converged": d["converged"],
                "fit + predict (s)": m.seconds,
                "failures": "; ".join(d["failures"]),
            }
        )
convergence = pd.DataFrame(rows).set_index(["split", "method"])
convergence

# %% [markdown]
# Seven of the eight fits meet every gate: R-hat at most 1.0085, bulk ESS at least 1,296 and
# tail ESS at least 1,170 over up to 1,000 page rates and the population parameters, no
# divergences. The **modulated fit after the burst did not converge**: 2 divergent
# transitions (R-hat 1.0077 and ESS 1,059 are fine). Its scores are shown below, marked as
# such; they agree with the hierarchical model's to 0.0003, so no conclusion rests on them.
# Fit and prediction took, on the shared machine (load average 4–9 during the run), 34–47 s
# for `censored`, 37–58 s for `hierarchical`, 94–95 s for `modulated` and 98–125 s for
# `bursty`; the point estimators take milliseconds.

# %% [markdown]
# ## 5. Results: scores per method and split


# %%
def score_table(result) -> pd.DataFrame:
    """The four scores per method, plus the hindsight reference."""
    table = result.table()[["log_score", "brier", "coverage90", "rate_log_rmse"]].copy()
    table.loc["hindsight reference"] = result.reference.scores()
    return table


def persistence_baselines(result) -> dict[str, float]:
    """Two forecasts of "changes at all" from the exact past: the share of the pages that
    changed in the 180 days before the split (a constant), and persistence (a page changes
    iff it changed in those 180 days)."""
    position = history.pages.index.get_indexer(result.pages)
    split_hours = hours_of(result.split)
    before = history.count_changes(
        position,
        np.full(len(position), split_hours - HORIZON_DAYS * HOURS_PER_DAY),
        np.full(len(position), split_hours),
    )
    changed_before = before > 0
    share_before = changed_before.mean()
    return {
        "share changed before": float(share_before),
        "share changed after": float(result.changed.mean()),
        "Brier of the previous share": float(np.mean((share_before - result.changed) ** 2)),
        "Brier of persistence": float(np.mean(changed_before != result.changed)),
    }


scores = pd.concat({label: score_table(r) for label, r in results.items()}, names=["split"])
baselines = pd.DataFrame({label: persistence_baselines(r) for label, r in results.items()})
for label, r in results.items():
    test = r.details()["test"]
    print(
        f"{label}: split {r.split}, {r.n_pages:,} pages, {test['intervals']:,} test intervals, "
        f"{test['pages_changed']:,} pages changed in the window"
    )
display(scores)
baselines

# %% [markdown]
# The second table gives two simple forecasts of "changes at all" built from the exact past
# of the same pages, as yardsticks for the Brier score: the share of the pages that changed
# in the 180 days before the split, used as every page's probability, and persistence (a
# page changes iff it changed in those 180 days).
#
# **Before the burst** (split 2025-01-01): 13.4% of the scored pages had changed in the
# previous half-year, 44.7% changed in the next one. The Bayesian models beat the point
# estimators clearly in log score (−1.13 for the hierarchical, modulated and bursty models,
# −1.16 for `censored`, against −1.57 for naive, Cho and MLE: 0.41–0.44 nats per page) and
# in coverage (0.83–0.85 against 0.80). But no method knew that half the collection was about
# to be edited: they predict on average a 22–34% chance of change against the 44.7% that
# happened, and every Brier score (0.29–0.31) is worse than saying 0.5 for every page
# (0.25). The best Brier and rate error belong to `censored`, which predicts change most
# readily (mean P(change) 0.34, against 0.27 for the point estimators and 0.22 for the
# hierarchy) — the right direction here.
#
# **After the burst** (split 2026-02-23): 43.2% changed in the half-year before, 8.5% in the
# one after. Now the hierarchy wins everything but the rate error: log score −0.449 against
# −0.62 (point) and −0.70 (`censored`), Brier 0.121 against 0.186 and 0.218; the constant
# previous share scores 0.198, so `censored` does worse than it. Shrinking each page's rate
# towards its platform's lowers the predicted chance of change — the right direction after
# a burst — while `censored`'s weak prior raises it and is now worse than the point
# estimators in log score. Still, every method over-predicts: mean predicted chance of
# change 0.29 (hierarchical) to 0.41 (`censored`) against 0.085 observed.
#
# `modulated` and `bursty` agree with `hierarchical` to within 0.0015 on every score on both
# splits. With a daily crawl each interval integrates over whole days, so the hour-of-week
# profile barely reaches the data; and the bursty model's Gamma mixing acts *within* one
# crawl interval, `1 − (1 + λτ/κ)^{−κ} ≈ λτ − (1 + 1/κ)(λτ)²/2`, which differs from the
# Poisson `1 − e^{−λτ}` only at second order in `λτ` (of order 0.003 for a typical tldr
# page and day). The bursts that matter here are collection-wide and last weeks — a change of
# regime, not extra variance within an interval.
#
# The four scores side by side (orange: the split before the 2025 burst; green: the split
# after it; dashed lines: the hindsight reference of the split of the same colour; black line
# in the coverage panel: the 0.90 target).

# %%
score_labels = {
    "log_score": "mean log P(k) per page (nats, higher is better)",
    "brier": "Brier score of 'changes at all' (lower is better)",
    "coverage90": "share of pages with PIT in [0.05, 0.95] (target 0.90)",
    "rate_log_rmse": "RMSE of log rate (natural log units, lower is better)",
}
fig = plots.figure((12, 7))
axes = fig.subplots(2, 2).ravel()
width = 0.8 / len(results)
for ax, (column, label) in zip(axes, score_labels.items(), strict=True):
    for j, (split_label, r) in enumerate(results.items()):
        table = score_table(r)
        methods = list(r.methods)
        x = np.arange(len(methods)) + (j - (len(results) - 1) / 2) * width
        ax.bar(x, table.loc[methods, column], width, color=f"C{j + 1}", label=split_label)
        ax.axhline(table.loc["hindsight reference", column], color=f"C{j + 1}", ls="--", lw=1)
    ax.set_xticks(np.arange(len(methods)), methods, rotation=30, fontsize=8)
    ax.set_ylabel(label, fontsize=8)
    ax.set_xlabel("method")
axes[2].axhline(0.9, color="k", lw=1)
axes[0].legend(fontsize=8)
fig.suptitle("forecast scores on tldr-pages, daily crawl, 180-day horizon (dashed: hindsight)")
fig.tight_layout()
fig

# %% [markdown]
# ### Calibration: predicted against observed
#
# `plots.forecast_calibration` draws, for each method, the reliability of "changes at all"
# (pages binned by predicted probability; the observed share that changed in each bin) and
# the predicted against the observed mean detected count in 20 equal groups of pages. A
# calibrated method lies on the diagonal.

# %%
first, second = results.values()
plots.forecast_calibration(first)

# %%
plots.forecast_calibration(second)

# %% [markdown]
# Neither split is close to the diagonal, and in opposite directions. Before the burst the
# reliability curves are nearly flat: whatever the predicted probability, in most bins 40–70%
# of the pages changed — the pages the point estimators rated least likely to change (lowest
# bin) changed 71% of the time. After the burst the curves lie far below the diagonal: pages
# given a 40–95% chance changed about 10% of the time or less. The count panels say the same for the
# number of detected changes: the past rate of a page ranks pages only weakly against a
# collection-wide change of activity.

# %% [markdown]
# ### Randomised PIT histograms
#
# One panel per method: flat at density 1 is calibrated; mass piled at low PIT values means
# the observed count sat in the lower tail of the predictive (the method expected more
# change than happened), mass at high values the opposite. The dotted lines mark the
# central 90% band that `coverage90` counts.


# %%
def pit_figure(result):
    fig = plots.forecast_pit(result)
    for ax in fig.axes:
        ax.set_ylabel("density (uniform = 1)", fontsize=8)
    fig.tight_layout()
    return fig


pit_figure(first)

# %%
pit_figure(second)

# %% [markdown]
# The two sets of histograms are mirror images. Before the burst the PIT piles up near 1:
# the observed counts sit in the upper tail of every predictive (too few changes expected),
# and coverage90 falls to 0.80 for the point estimators. After the burst it piles up near 0
# (too many changes expected); the hierarchy's wider predictive puts more of those pages
# inside the central band (coverage90 0.932, above the 0.90 target) but its histogram is
# still far from flat.

# %% [markdown]
# ### Where the rate error comes from
#
# The Bayesian models differ most in how far they pull a page's rate towards the rest of
# the collection. Predicted against realised rates, for the pages that changed in the test
# window (log axes; rates in changes per day; a page that changed once in 180 days has a
# realised rate of 0.0056 per day):

# %%
shown = [m for m in ("naive", "censored", "hierarchical") if m in first.methods]
fig = plots.figure((4 * len(shown), 3.6 * len(results)))
grid = fig.subplots(len(results), len(shown), sharex=True, sharey=True, squeeze=False)
lo, hi = 1e-4, 3.0
for row, (label, r) in zip(grid, results.items(), strict=True):
    realised = r.true_rate[r.changed] * HOURS_PER_DAY
    for ax, name in zip(row, shown, strict=True):
        predicted = r.methods[name].rate_per_hour[r.changed] * HOURS_PER_DAY
        ax.scatter(predicted, realised, s=4, alpha=0.4)
        ax.plot([lo, hi], [lo, hi], color="k", lw=1, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_title(f"{label}, {name}: log-RMSE {r.methods[name].rate_log_rmse:.2f}", fontsize=9)
        ax.set_xlabel("predicted rate (changes per day)")
    row[0].set_ylabel("realised rate (changes per day)")
fig.suptitle("predicted vs realised rate, pages that changed in the test window", fontsize=10)
fig.tight_layout()
fig

# %% [markdown]
# Most pages that changed did so once or twice, so the realised rates sit on two horizontal
# lines. The rate log-RMSE is computed over these pages only — those that changed — which
# favours whichever method predicts the highest rates: `censored`, with its weak prior,
# scores best on it in both splits (1.41 and 0.93), while the hierarchy squeezes every page
# into a narrow band around its platform's rate (1.65 and 1.13). The same shrinkage that
# costs it here wins the log score and the Brier score on the many pages that did not
# change. Read the rate error together with the other scores, never alone.

# %% [markdown]
# ## What we learned
#
# Numbers from the full run of 2026-12-01 (1,000 random pages per split, daily crawl,
# 180-day horizon, the seven methods of that run, 4 × 1,000 NUTS draws; the cell below
# prints them). The notebook ran in
# 622 s on the shared 2-core machine (load average 4–9).
#
# 1. **Pooling helps most, censoring correction hardly at all.** The hierarchical model has
#    the best log score on both splits: −1.130 against −1.573 for naive (+0.44 nats per page)
#    before the 2025 burst, −0.449 against −0.623 (+0.17) after it; its Brier after the
#    burst is 0.121 against 0.186. Naive, Cho and MLE agree to 0.002 nats: a daily crawl
#    hides only 0.7% of tldr's changes (3.4% weekly, 7.8% every 30 days, 14.3% every 90),
#    so on these pages the censoring correction has nothing to correct.
# 2. **No constant-rate method forecasts a change of regime.** Before the burst the pages
#    changed far more than predicted (44.7% changed, 22–34% predicted on average; every
#    Brier score 0.29–0.31 is worse than a flat 0.5's 0.25; PIT piled near 1, coverage90
#    0.80–0.85); after it, far less (8.5% changed, 29–41% predicted; PIT piled near 0).
#    The hindsight reference, which knows each page's realised rate, scores −0.474 and
#    −0.087: the best model is 0.66 and 0.36 nats per page short of it, which no refinement
#    of a stationary per-page rate can recover.
# 3. **The extensions add nothing at a daily crawl.** `modulated` and `bursty` match
#    `hierarchical` to within 0.0015 on every score, at 1.6–3.4× its fitting time; the
#    tldr bursts are collection-wide (26 of 5,633 commits touch ≥ 100 pages each and carry
#    20.7% of all changes) and last weeks, not within-interval over-dispersion.
# 4. **Which method "wins" depends on the score and the split.** `censored` has the best
#    rate log-RMSE on both splits (1.41 and 0.93) and the best Brier before the burst
#    (0.292), yet the worst log score after it (−0.697, below the point estimators): its
#    weak prior keeps rarely-changed pages at high rates, right when activity rises and
#    wrong when it falls. The rate error, computed only on pages that changed, rewards that.
# 5. **Convergence:** 7 of 8 fits met every gate (R-hat ≤ 1.0085, bulk ESS ≥ 1,296, no
#    divergences); the modulated fit after the burst had 2 divergent transitions and is
#    reported as not converged.
#
# The next modelling step these numbers point to is a rate that moves in time and is shared
# across pages (a collection-level activity factor), not a richer per-page stationary model.
# Since this run the core has gained rates that move in time per page (`dynamic`,
# `excursion`), and the research package has shared epoch shocks (`shocks`,
# `dynamic_shocks`); their forecasts of tldr-pages are in `docs/models.md` and
# `research/docs/models.md`.

# %%
for label, r in results.items():
    t = score_table(r)
    best = t.drop("hindsight reference")["log_score"].idxmax()
    b = baselines[label]
    print(f"== {label}: split {r.split[:10]}, {r.n_pages:,} pages, {run_seconds[label]:.0f} s")
    print(
        f"   best log score: {best} {t.loc[best, 'log_score']:.3f}; "
        f"hindsight reference {t.loc['hindsight reference', 'log_score']:.3f}"
    )
    for name in r.methods:
        row = t.loc[name]
        print(
            f"   {name:13s} log score {row['log_score']:.3f}  Brier {row['brier']:.3f}  "
            f"coverage90 {row['coverage90']:.3f}  rate log-RMSE {row['rate_log_rmse']:.3f}  "
            f"mean P(change) {r.methods[name].prob_change.mean():.3f}"
        )
    print(
        f"   share changed before {b['share changed before']:.3f}, after "
        f"{b['share changed after']:.3f}; Brier of persistence "
        f"{b['Brier of persistence']:.3f}, of the previous share "
        f"{b['Brier of the previous share']:.3f}"
    )
print(
    f"censoring: a daily crawl hides {hidden.loc[1, 'hidden share']:.1%} of the changes, "
    f"a weekly {hidden.loc[7, 'hidden share']:.1%}, a 30-day {hidden.loc[30, 'hidden share']:.1%}"
)
print(f"commits touching >= 100 pages: {int(big.sum())}, carrying {share_in_big:.1%} of changes")
weekly = by_year[7]
print(
    "hidden by a weekly crawl, per year: "
    + ", ".join(f"{year} {share:.1%}" for year, share in weekly[weekly.index >= 2021].items())
)
failed = convergence.index[~convergence["converged"].astype(bool)]
print(f"fits that missed a gate: {len(failed)} of {len(convergence)}: {list(failed)}")
