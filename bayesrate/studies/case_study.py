"""Case study "How often do Web pages change?" (seed 003): censoring bias and revisit rule.

Part 1 — censoring bias. 2,000 replications of a Poisson change process observed for
720 hours and visited hourly (720 intervals of one hour), at rates 4/h and 0.25/h. For
each replication: the full-information estimate (all change times seen, ``N/T``), the
naive censored estimate (changed hours / T), the method of moments ``−log(1 − c/n)``,
the Cho & Garcia-Molina / case-study adjusted estimator, and the package's MLE (equal to
the method of moments on this grid; computed by the Newton solver as a check). Mean, SD
and MSE (``mean((λ̂ − λ)²)``) of each.

Part 2 — revisit interval. For rates 0.2 … 4 per hour, one process over 10,000 hours is
binned on visit grids of 0.025 … 1 hour; the proportion of intervals holding ≥ 2 changes
is plotted against the interval, and the largest interval keeping it ≤ 5 % is read off
(linear interpolation) and compared with the closed form ``τ* = x*/λ`` where
``1 − e^{−x}(1 + x) = 0.05`` (``x* ≈ 0.3554``).
"""

from __future__ import annotations

from bayesrate.studies import Progress, StudyResult, silent

DESCRIPTION = "censoring bias of naive / moment / full-information estimators; revisit interval"

RATES = (4.0, 0.25)
HOURS = 720
REPLICATIONS = 2000
REVISIT_RATES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 4.0)
REVISIT_INTERVALS = tuple(round(0.025 * i, 3) for i in range(1, 41))
LONG_TIME = 10_000.0
MULTIPLE_CHANGE_BOUND = 0.05

#: the case study's printed results, for side-by-side comparison
PUBLISHED = {
    (4.0, "full"): {"mean": 4.0, "sd": 0.07},
    (4.0, "naive"): {"mean": 0.9815882, "sd": 0.004934177},
    (0.25, "full"): {"mean": 0.250, "sd": 0.018},
    (0.25, "naive"): {"mean": 0.22, "sd": 0.015},
    (0.25, "cho"): {"mean": 0.2504492},
}


def critical_load(bound: float = MULTIPLE_CHANGE_BOUND) -> float:
    """``x*`` with ``P(Poisson(x) ≥ 2) = 1 − e^{−x}(1 + x) = bound``."""
    import math

    from scipy.optimize import brentq

    return brentq(lambda x: -math.expm1(-x) - x * math.exp(-x) - bound, 1e-9, 50.0, xtol=1e-14)


def bias_table(rng, replications: int, hours: int = HOURS) -> tuple:
    """Estimates per replication and the summary table (mean, SD, MSE per estimator)."""
    import numpy as np
    import pandas as pd

    from bayesrate.estimators import batch
    from bayesrate.observations import Observations

    rows, draws = [], {}
    for rate in RATES:
        counts = rng.poisson(rate, size=(replications, hours))  # changes per hour
        flags = (counts > 0).astype(np.int8)
        page = np.repeat(np.arange(replications), hours + 1)
        time = np.tile(np.arange(hours + 1, dtype=np.float64), replications)
        changed = np.concatenate([np.zeros((replications, 1), np.int8), flags], axis=1).ravel()
        labels = np.char.add("r", np.char.zfill(page.astype(str), 6))
        obs = Observations.from_arrays(labels, time, changed)
        order = np.argsort(obs.pages.index.to_numpy())  # replication order
        stats = obs.interval_stats
        est = {
            "full": counts.sum(axis=1) / hours,
            "naive": batch.naive(stats).rate[order],
            "moment": batch.moment(stats).rate[order],
            "cho": batch.cho(stats).rate[order],
            "mle": batch.mle(stats, interval=None).rate[order],
        }
        draws[rate] = est
        for name, values in est.items():
            pub = PUBLISHED.get((rate, name), {})
            rows.append(
                {
                    "rate_per_hour": rate,
                    "estimator": name,
                    "mean": float(values.mean()),
                    "sd": float(values.std(ddof=1)),
                    "mse": float(np.mean((values - rate) ** 2)),
                    "published_mean": pub.get("mean"),
                    "published_sd": pub.get("sd"),
                }
            )
    table = pd.DataFrame(rows)
    full = table[table.estimator == "full"].set_index("rate_per_hour")["mse"]
    table["mse_ratio_vs_full"] = table["mse"] / table["rate_per_hour"].map(full)
    return table, draws


def revisit_curves(rng, long_time: float = LONG_TIME) -> tuple:
    """Proportion of intervals with ≥ 2 changes per (rate, interval); the 5 % crossing."""
    import numpy as np
    import pandas as pd

    x_star = critical_load()
    curves, rows = [], []
    for rate in REVISIT_RATES:
        n = rng.poisson(rate * long_time)
        changes = np.sort(rng.uniform(0.0, long_time, n))
        props = []
        for tau in REVISIT_INTERVALS:
            edges = np.arange(0.0, long_time + tau / 2, tau)
            if edges[-1] < long_time:
                edges = np.append(edges, long_time)
            counts = np.histogram(changes, bins=edges)[0]
            prop = float(np.mean(counts > 1))
            props.append(prop)
            curves.append({"rate_per_hour": rate, "interval_hours": tau, "p_multiple": prop})
        props = np.array(props)
        taus = np.array(REVISIT_INTERVALS)
        above = np.flatnonzero(props > MULTIPLE_CHANGE_BOUND)
        if len(above) == 0:
            simulated = float("nan")  # bound never exceeded on this grid
            note = "below 5% on the whole grid"
        elif above[0] == 0:
            simulated = float("nan")
            note = "above 5% already at the shortest interval"
        else:
            j = above[0]
            t0, t1, p0, p1 = taus[j - 1], taus[j], props[j - 1], props[j]
            simulated = float(t0 + (MULTIPLE_CHANGE_BOUND - p0) * (t1 - t0) / (p1 - p0))
            note = ""
        rows.append(
            {
                "rate_per_hour": rate,
                "interval_simulated_hours": simulated,
                "interval_closed_form_hours": x_star / rate,
                "note": note,
            }
        )
    return pd.DataFrame(curves), pd.DataFrame(rows), x_star


def run(
    *,
    seed: int | str = "bayesrate-case-study",
    fast: bool = False,
    replications: int | None = None,
    progress: Progress = silent,
) -> StudyResult:
    """Censoring bias of the estimators, and the revisit interval; see the module docstring.

    Parameters
    ----------
    seed
        Seed (int or string).
    fast
        200 replications and a 2,000-hour revisit process (smoke tests).
    replications
        Replications of the bias experiment (default 2,000; 200 when ``fast``).
    progress
        Called with one line per step.
    """
    from bayesrate import plots
    from bayesrate.seeds import rng_from

    reps = replications or (200 if fast else REPLICATIONS)
    long_time = 2_000.0 if fast else LONG_TIME
    rng = rng_from(seed)
    progress(f"case-study: {reps} replications x {HOURS} hourly visits at rates {RATES}")
    table, draws = bias_table(rng, reps)
    progress(f"case-study: revisit interval on {len(REVISIT_INTERVALS)} grids over {long_time} h")
    curves, revisit, x_star = revisit_curves(rng, long_time)
    summary = {
        "replications": reps,
        "hours": HOURS,
        "seed": str(seed),
        "bias": table.round(6).to_dict(orient="records"),
        "revisit_x_star": x_star,
        "revisit": revisit.round(4).to_dict(orient="records"),
    }
    with_cols = ["rate_per_hour", "estimator", "mean", "sd", "mse", "mse_ratio_vs_full"]
    text = "\n".join(
        [
            table[with_cols].to_string(index=False, float_format=lambda v: f"{v:.5g}"),
            revisit.to_string(index=False, float_format=lambda v: f"{v:.4f}"),
        ]
    )
    return StudyResult(
        name="case-study",
        tables={"bias": table, "revisit_curves": curves, "revisit_interval": revisit},
        summary=summary,
        figures={
            "bias": plots.estimate_histograms(draws, HOURS),
            "revisit": plots.revisit_curves(curves, MULTIPLE_CHANGE_BOUND).figure,
        },
        text=text,
    )
