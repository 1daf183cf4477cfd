"""Online estimators (seed 002, Avrachenkov, Patil & Thoppe): RMSE vs k and 95 % bands.

Synthetic experiments of the paper: a page changes as a Poisson process of rate λ and is
crawled as an independent Poisson process of rate ``p`` (both per hour here; the paper
is unitless). Each of 100 runs draws fresh crawl intervals ``τ_k ~ Exp(p)`` and flags
``I_k ~ Bernoulli(1 − e^{−λτ_k})`` (exact for a Poisson change process). Estimators, all
vectorized across runs:

- Naive ``p Î_k / k``, LLN (``α_k ≡ 1``), SA, SAM (the paper's step sizes),
- MLE and MM on the first ``k`` intervals (the package's Newton solver, at checkpoints),
- our Gamma updates: exposure-based and censoring-exact ADF, prior ``Gamma(α, β)`` with
  ``β`` given in mean crawl intervals (``--prior-beta-intervals``; default weak:
  α = 1, β = 0.1 interval, so the prior mean is 10 p).

Experiments: ``lam5_p3`` (λ = 5, p = 3; SA/SAM η = 0.75, SAM β = 0.6), ``lam500_p3`` and
``lam500_p50`` (η = 0.8 as in the paper's λ = 500 runs; SAM β = 0.6), and the step-size
sensitivity at λ = 500, p = 10 (LLN α_k ∈ {1, log(k+1), √k}; SA η ∈ {0.5, 0.75, 1};
SAM β ∈ {0.4, 0.5, 0.6, 0.7} at η = 0.8; SAM η ∈ {0.5, 0.6, 0.7, 0.8} at β = 0.5).
"""

from __future__ import annotations

from bayesrate.studies import Progress, StudyResult, silent

DESCRIPTION = "online estimators (LLN, SA, SAM) vs Naive/MLE/MM and Gamma updates: RMSE vs k"

RUNS = 100
SAMPLES = 2000

EXPERIMENTS = {
    "lam5_p3": {"lam": 5.0, "p": 3.0, "eta": 0.75, "beta": 0.6},
    "lam500_p3": {"lam": 500.0, "p": 3.0, "eta": 0.8, "beta": 0.6},
    "lam500_p50": {"lam": 500.0, "p": 50.0, "eta": 0.8, "beta": 0.6},
}
SENSITIVITY = {"lam": 500.0, "p": 10.0}
#: the step-size sensitivity runs: name -> estimators (method, parameters)
SENSITIVITY_GROUPS = {
    "sens_lln": {f"LLN alpha={a}": ("lln", {"alpha": a}) for a in ("one", "log", "sqrt")},
    "sens_sa": {f"SA eta={e}": ("sa", {"eta": e}) for e in (0.5, 0.75, 1.0)},
    "sens_sam_beta": {
        f"SAM beta={b}": ("sam", {"eta": 0.8, "beta": b}) for b in (0.4, 0.5, 0.6, 0.7)
    },
    "sens_sam_eta": {
        f"SAM eta={e}": ("sam", {"eta": e, "beta": 0.5}) for e in (0.5, 0.6, 0.7, 0.8)
    },
}


def checkpoints(samples: int, n: int = 40):
    import numpy as np

    return np.unique(np.geomspace(1, samples, n).round().astype(int))


def simulate(rng, lam: float, p: float, runs: int, samples: int):
    """Crawl intervals ``(runs, samples)`` and detected-change flags."""
    import numpy as np

    tau = rng.exponential(1.0 / p, size=(runs, samples))
    flags = (rng.random((runs, samples)) < -np.expm1(-lam * tau)).astype(np.int8)
    return tau, flags


def trajectories(tau, flags, p: float, estimators: dict, *, offline: bool = True, ks=None):
    """Estimates at checkpoints: {name: (len(ks), runs)}.

    ``estimators`` maps a name to ``(method, params)`` for :func:`online.make_state`.
    """
    import numpy as np

    from bayesrate.estimators import mle as solver
    from bayesrate.estimators import online
    from bayesrate.sufficient import IntervalStats

    runs, samples = flags.shape
    ks = checkpoints(samples) if ks is None else ks
    want = set(ks.tolist())
    out = {name: np.zeros((len(ks), runs)) for name in estimators}
    states = {
        name: online.make_state(method, runs, p=p, **params)
        for name, (method, params) in estimators.items()
    }
    row = 0
    for k in range(samples):
        for state in states.values():
            if isinstance(state, online.GammaState):
                state.update(flags[:, k], tau[:, k])
            else:
                state.update(flags[:, k])
        if k + 1 in want:
            for name, state in states.items():
                out[name][row] = state.estimate
            row += 1
    if offline:
        out["MLE"] = np.zeros((len(ks), runs))
        out["MM"] = np.zeros((len(ks), runs))
        page = np.repeat(np.arange(runs), samples).reshape(runs, samples)
        for i, k in enumerate(ks):
            stats = IntervalStats.from_groups(
                page[:, :k].ravel(),
                tau[:, :k].ravel(),
                np.ones(runs * k),
                flags[:, :k].ravel(),
                runs,
            )
            out["MLE"][i] = solver.solve_mle(stats).rate
            out["MM"][i] = solver.solve_mm(stats).rate
    return ks, out


def summarise(name: str, lam: float, ks, est: dict):
    import numpy as np
    import pandas as pd

    rows = []
    for estimator, values in est.items():
        err = values - lam
        rmse = np.sqrt(np.mean(err**2, axis=1))
        lo, hi = np.percentile(values, [2.5, 97.5], axis=1)
        for i, k in enumerate(ks):
            rows.append(
                {
                    "experiment": name,
                    "estimator": estimator,
                    "k": int(k),
                    "mean": float(values[i].mean()),
                    "rmse": float(rmse[i]),
                    "band_lo": float(lo[i]),
                    "band_hi": float(hi[i]),
                }
            )
    return pd.DataFrame(rows)


def run(
    *,
    seed: int | str = "bayesrate-online",
    fast: bool = False,
    runs: int | None = None,
    samples: int | None = None,
    prior_alpha: float = 1.0,
    prior_beta_intervals: float = 0.1,
    progress: Progress = silent,
) -> StudyResult:
    """The paper's experiments and the step-size sensitivity; see the module docstring.

    Parameters
    ----------
    seed
        Seed (int or string).
    fast
        20 runs of 200 crawls (smoke tests) unless ``runs``/``samples`` say otherwise.
    runs, samples
        Runs per experiment (default 100) and crawls per run (default 2,000).
    prior_alpha, prior_beta_intervals
        Gamma prior of the Gamma updates: α, and β in mean crawl intervals ``1/p``.
    progress
        Called with one line per step.
    """
    import pandas as pd

    from bayesrate import plots
    from bayesrate.seeds import rng_from

    runs = runs or (20 if fast else RUNS)
    samples = samples or (200 if fast else SAMPLES)
    rng = rng_from(seed)
    tables, figures = [], {}
    for name, cfg in EXPERIMENTS.items():
        lam, p = cfg["lam"], cfg["p"]
        progress(f"online: {name} ({runs} runs x {samples} crawls)")
        tau, flags = simulate(rng, lam, p, runs, samples)
        gamma = {"prior_alpha": prior_alpha, "prior_beta": prior_beta_intervals / p}
        estimators = {
            "Naive": ("naive-online", {}),
            "LLN": ("lln", {"alpha": "one"}),
            "SA": ("sa", {"eta": cfg["eta"]}),
            "SAM": ("sam", {"eta": cfg["eta"], "beta": cfg["beta"]}),
            "Gamma-exposure": ("gamma-exposure", gamma),
            "Gamma-ADF": ("gamma-adf", gamma),
        }
        ks, est = trajectories(tau, flags, p, estimators)
        table = summarise(name, lam, ks, est)
        figures[name] = plots.estimator_trajectories(table, name, lam)
        tables.append(table)

    lam, p = SENSITIVITY["lam"], SENSITIVITY["p"]
    progress(f"online: step-size sensitivity at λ={lam}, p={p}")
    tau, flags = simulate(rng, lam, p, runs, samples)
    for name, estimators in SENSITIVITY_GROUPS.items():
        ks, est = trajectories(tau, flags, p, estimators, offline=False)
        table = summarise(name, lam, ks, est)
        figures[name] = plots.estimator_trajectories(table, name, lam)
        tables.append(table)

    full = pd.concat(tables, ignore_index=True)
    last = full[full.k == full.k.max()]
    final = {
        exp: {
            row.estimator: {"rmse": round(row.rmse, 4), "mean": round(row["mean"], 4)}
            for _, row in part.iterrows()
        }
        for exp, part in last.groupby("experiment", sort=False)
    }
    summary = {
        "runs": runs,
        "samples": samples,
        "seed": str(seed),
        "prior": {"alpha": prior_alpha, "beta_intervals": prior_beta_intervals},
        "final_k": int(full.k.max()),
        "final": final,
    }
    cols = ["experiment", "estimator", "mean", "rmse", "band_lo", "band_hi"]
    text = last[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}")
    return StudyResult("online", {"rmse": full}, summary, figures, text)
