"""Recovery study: do the PyMC models recover known rates and effects on simulated data?

Data: :func:`bayesrate.simulate.pages_like` (the case study's shape: hourly visits over
30 days; and ``history="short"``: 10-50 visits per page). Checks:

1. **Calibration** — share of true page rates inside the 90% posterior interval
   (target 85-95%) for the censored and hierarchical models, on both histories.
2. **Pooling** — RMSE in log-rate of the hierarchical posterior mean of ``log λ`` vs the
   per-page Cho estimator, on pages with ≤ 50 visits and ≥ 1 detected change (target:
   ≥ 20% lower). For scale, the same RMSE of an **oracle Bayes estimator**: the posterior
   mean of ``log λ`` under the population's true distribution of log-rates (a kernel
   density of 20,000 rates from the same simulator with another seed, on a grid). No
   estimator that sees one page's visits and knows the population can do better in
   expectation, so its reduction bounds what pooling can achieve on this shape.
3. **Modulation** — on case-study-shaped data whose pages follow a known hour-of-day ×
   day-of-week modulation: correlation of the modulated model's posterior mean effects
   with the truth (target ≥ 0.9), and LOO (``arviz.compare`` via
   ``bayesrate.checks.compare``, on the per-page log-likelihood with each page's rate
   integrated out) preferring the modulated over the hierarchical model; on unmodulated
   data it should not.

The result's summary (``recovery.json``) holds all numbers and the pass/fail of each
target; its tables are the per-page results ``pages_<history>`` and ``effects``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bayesrate.studies import Progress, StudyResult, silent

DESCRIPTION = "PyMC models on simulated data: interval coverage, pooling gain, modulation"

#: true effects of the modulated scenario (log scale, sum to zero)
HOURS = np.arange(24)
TRUE_HOUR = 0.6 * np.sin(2 * np.pi * (HOURS - 8) / 24)
TRUE_DAY = np.array([0.35, 0.3, 0.25, 0.2, 0.1, -0.6, -0.6])
TRUE_DAY = TRUE_DAY - TRUE_DAY.mean()


def true_multipliers() -> np.ndarray:
    """168 hour-of-week multipliers ``exp(h[b % 24] + d[b // 24])``."""
    b = np.arange(168)
    return np.exp(TRUE_HOUR[b % 24] + TRUE_DAY[b // 24])


def _coverage(summary, truth_per_day: np.ndarray, mask: np.ndarray | None = None) -> float:
    inside = (summary["lower_per_day"].to_numpy() <= truth_per_day) & (
        truth_per_day <= summary["upper_per_day"].to_numpy()
    )
    return float(inside[mask].mean() if mask is not None else inside.mean())


def _post_mean_log_rate(model) -> np.ndarray:
    lr = model.idata_["posterior"]["log_rate"]
    if "log_multiplier" in model.idata_["posterior"]:
        lr = np.log(model.idata_["posterior"]["rate"])
    return np.asarray(lr.mean(("chain", "draw")))


#: oracle bound: population sample size, log-rate grid and kernel bandwidth
ORACLE_PAGES = 20_000
ORACLE_GRID = np.linspace(-16.0, 6.0, 1101)
ORACLE_BANDWIDTH = 0.1


def oracle_posterior_mean_log_rate(stats, history: str, seed: str) -> np.ndarray:
    """Posterior mean of ``log λ`` per page under the simulator's population of rates.

    Parameters
    ----------
    stats
        The pages' :class:`~bayesrate.sufficient.IntervalStats`.
    history
        ``pages_like`` history of the population sample.
    seed
        Seed of the population sample (use one the data did not use).
    """
    from bayesrate.simulate import pages_like

    population = pages_like(ORACLE_PAGES, seed=seed, history=history).truth
    log_rates = np.log(population["rate_per_hour"].to_numpy())
    grid = ORACLE_GRID
    log_prior = np.log(
        np.exp(-0.5 * ((grid[:, None] - log_rates[None, :]) / ORACLE_BANDWIDTH) ** 2).sum(1)
        + 1e-300
    )
    loglik = np.stack([stats.loglik(np.full(stats.n_pages, np.exp(u))) for u in grid], axis=1)
    log_post = loglik + log_prior[None, :]
    weights = np.exp(log_post - log_post.max(axis=1, keepdims=True))
    return (weights @ grid) / weights.sum(axis=1)


def _fit(cls, obs, sampler, config=None):
    import warnings

    from bayesrate.models import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = cls(config, sampler).fit(obs)
    d = model.diagnostics_
    return model, {
        "converged": d.converged,
        "r_hat_max": d.r_hat_max,
        "ess_bulk_min": d.ess_bulk_min,
        "divergences": d.divergences,
        "seconds": round(d.seconds, 1),
        "failures": d.failures,
        "warnings": len(caught),
    }


def _calibration_and_pooling(
    history: str, n_pages: int, sampler: dict, seed: str, progress: Progress
) -> tuple[dict, Any]:
    """Checks 1-2 on one history: the block of numbers and the per-page table."""
    from bayesrate.estimators.batch import cho
    from bayesrate.models import CensoredModel, HierarchicalModel
    from bayesrate.simulate import pages_like

    sim = pages_like(n_pages, seed=f"{seed}-{history}", history=history)
    obs, truth_h = sim.observations, sim.truth["rate_per_hour"].to_numpy()
    truth_d = truth_h * 24
    stats = obs.interval_stats
    few, changed = stats.n_visits <= 50, stats.n_changes >= 1
    block: dict = {"n_pages": obs.n_pages, "pages_le_50_visits": int(few.sum())}
    tables = {}
    for name, cls in (("censored", CensoredModel), ("hierarchical", HierarchicalModel)):
        progress(f"recovery: {name} on {history} ({obs.n_pages} pages)")
        model, diag = _fit(cls, obs, sampler)
        summary = model.page_summary_
        err = _post_mean_log_rate(model) - np.log(truth_h)
        block[name] = {
            "diagnostics": diag,
            "coverage_90": _coverage(summary, truth_d),
            "coverage_90_le_50_visits": _coverage(summary, truth_d, few) if few.any() else None,
            "rmse_log_all": float(np.sqrt(np.mean(err**2))),
            "rmse_log_le50_changed": float(np.sqrt(np.mean(err[few & changed] ** 2)))
            if (few & changed).any()
            else None,
        }
        tables[name] = summary.assign(post_mean_log_rate=_post_mean_log_rate(model))
    cho_rate = cho(stats).rate
    sel = few & changed
    if sel.any():
        cho_rmse = float(np.sqrt(np.mean((np.log(cho_rate[sel]) - np.log(truth_h[sel])) ** 2)))
        block["cho_rmse_log_le50_changed"] = cho_rmse
        hier_rmse = block["hierarchical"]["rmse_log_le50_changed"]
        block["hierarchical_rmse_reduction_vs_cho"] = 1 - hier_rmse / cho_rmse
        progress(f"recovery: oracle Bayes bound on {history}")
        oracle = oracle_posterior_mean_log_rate(stats, history, seed=f"{seed}-{history}-population")
        oracle_rmse = float(np.sqrt(np.mean((oracle[sel] - np.log(truth_h[sel])) ** 2)))
        block["oracle_rmse_log_le50_changed"] = oracle_rmse
        block["oracle_rmse_reduction_vs_cho"] = 1 - oracle_rmse / cho_rmse
    table = tables["hierarchical"].assign(
        truth_per_day=truth_d,
        cho_per_day=cho_rate * 24,
        censored_per_day=tables["censored"]["rate_per_day"].to_numpy(),
    )
    return block, table


def _modulation_scenario(
    scenario: str, modulation, n_pages: int, sampler: dict, seed: str, progress: Progress
) -> tuple[dict, tuple]:
    """Check 3 on one scenario: the block of numbers and the posterior mean effects."""
    from bayesrate.checks.compare import compare as compare_models
    from bayesrate.models import HierarchicalModel
    from bayesrate.models.modulated import ModulatedModel
    from bayesrate.simulate import pages_like

    sim = pages_like(n_pages, seed=f"{seed}-mod-{scenario}", history="case-study",
                     modulation=modulation)  # fmt: skip
    obs = sim.observations
    progress(f"recovery: modulation scenario {scenario!r} ({obs.n_pages} pages)")
    mod, mod_diag = _fit(ModulatedModel, obs, sampler)
    hier, hier_diag = _fit(HierarchicalModel, obs, sampler)
    # leave-one-page-out with each page's rate integrated out (bayesrate.checks.compare;
    # the conditional per-page log-likelihood gives unreliable Pareto k for most pages)
    comparison = compare_models({"modulated": mod, "hierarchical": hier})
    cmp = comparison.table
    best = str(cmp.index[0])
    other = "hierarchical" if best == "modulated" else "modulated"
    post = mod.idata_["posterior"]
    hour = np.asarray(post["hour_effect"].mean(("chain", "draw")))
    day = np.asarray(post["day_effect"].mean(("chain", "draw")))
    entry = {
        "modulated_diagnostics": mod_diag,
        "hierarchical_diagnostics": hier_diag,
        "loo_best": best,
        "loo_elpd_diff": float(cmp.loc[other, "elpd_diff"]),
        "loo_dse": float(cmp.loc[other, "dse"]),
        "loo_table": cmp.reset_index().to_dict(orient="records"),
        "loo_pareto_k": comparison.pareto_k,
        "hour_effect_sd": float(np.std(hour)),
        "day_effect_sd": float(np.std(day)),
    }
    if modulation is not None:
        entry["hour_corr"] = float(np.corrcoef(hour, TRUE_HOUR)[0, 1])
        entry["day_corr"] = float(np.corrcoef(day, TRUE_DAY)[0, 1])
    return entry, (hour, day)


def _targets(results: dict) -> dict:
    """Pass/fail of each target of the study."""
    targets = {}
    for history in ("case-study", "short"):
        for name in ("censored", "hierarchical"):
            cov = results[history][name]["coverage_90"]
            targets[f"coverage_{name}_{history}"] = {"value": cov, "pass": 0.85 <= cov <= 0.95}
    red = results["short"].get("hierarchical_rmse_reduction_vs_cho")
    targets["pooling_gain_short"] = {
        "value": red,
        "pass": red is not None and red >= 0.2,
        "oracle_bound": results["short"].get("oracle_rmse_reduction_vs_cho"),
    }
    m = results["modulation"]["modulated"]
    targets["hour_corr"] = {"value": m["hour_corr"], "pass": m["hour_corr"] >= 0.9}
    targets["day_corr"] = {"value": m["day_corr"], "pass": m["day_corr"] >= 0.9}
    targets["loo_prefers_modulated_when_present"] = {
        "value": m["loo_best"],
        "pass": m["loo_best"] == "modulated",
    }
    h = results["modulation"]["homogeneous"]
    # "does not prefer": either the hierarchical model wins, or the modulated model's edge
    # is within two standard errors of the difference
    not_preferred = h["loo_best"] == "hierarchical" or h["loo_elpd_diff"] < 2 * h["loo_dse"]
    targets["loo_not_modulated_when_absent"] = {
        "value": f"{h['loo_best']} (elpd_diff {h['loo_elpd_diff']:.2f} ± {h['loo_dse']:.2f})",
        "pass": bool(not_preferred),
    }
    return targets


def run(
    *,
    seed: int | str = "bayesrate-recovery",
    fast: bool = False,
    pages: int = 1000,
    modulation_pages: int = 200,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    progress: Progress = silent,
) -> StudyResult:
    """Fit the models on simulated worlds and check the targets; see the module docstring.

    Parameters
    ----------
    seed
        Seed (int or string) of the simulated data and the sampler.
    fast
        200 and 120 pages, 2 chains x 500 draws (smoke tests).
    pages, modulation_pages
        Pages per simulated history, and in each modulation scenario.
    draws, tune, chains
        NUTS settings of every fit.
    progress
        Called with one line per step.
    """
    import pandas as pd

    n_pages = 200 if fast else pages
    n_mod = 120 if fast else modulation_pages
    sampler = {
        "draws": 500 if fast else draws,
        "tune": 500 if fast else tune,
        "chains": 2 if fast else chains,
        "seed": seed,
    }
    results: dict = {"settings": {"pages": n_pages, "modulation_pages": n_mod, **sampler}}
    tables = {}
    start = time.perf_counter()
    for history in ("case-study", "short"):
        results[history], tables[f"pages_{history}"] = _calibration_and_pooling(
            history, n_pages, sampler, str(seed), progress
        )
    results["modulation"] = {}
    for scenario, modulation in (("modulated", true_multipliers()), ("homogeneous", None)):
        results["modulation"][scenario], effects = _modulation_scenario(
            scenario, modulation, n_mod, sampler, str(seed), progress
        )
        if modulation is not None:
            tables["effects"] = pd.DataFrame(
                [
                    {"effect": kind, "index": i, "posterior_mean": float(est[i]),
                     "truth": float(truth[i])}
                    for kind, est, truth in (("hour", effects[0], TRUE_HOUR),
                                             ("day", effects[1], TRUE_DAY))
                    for i in range(len(truth))
                ]
            )  # fmt: skip
    results["targets"] = targets = _targets(results)
    results["seconds"] = round(time.perf_counter() - start, 1)
    lines = []
    for key, value in targets.items():
        bound = value.get("oracle_bound")
        bound = f" (oracle Bayes bound {bound:.3f})" if bound is not None else ""
        lines.append(f"{'PASS' if value['pass'] else 'FAIL'} {key}: {value['value']}{bound}")
    return StudyResult(
        name="recovery",
        tables=tables,
        summary=results,
        text="\n".join(lines),
        summary_file="recovery.json",
    )
