"""The bursty model against the hierarchical one on a crawl log (issue #14). Run once.

Usage::

    .venv/bin/python research/benchmarks/bench_bursty.py [--dataset ota-contrib] [--ppc-draws 200]

Fits ``hierarchical`` (the named baseline) and ``bursty`` with their default sampler
settings on the same observations and prints, per model: wall time (and bursty's ratio to
the baseline's, target ≤ 3×), the convergence gates, the posterior of ``κ`` per domain
(bursty), and the posterior predictive checks' gap CV (observed, replicated mean, p-value)
under both replications (:func:`bayesrate.checks.ppc.ppc_for`).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def _fit(name: str, obs):
    from bayesrate.models import ConvergenceWarning, get_model

    model = get_model(name)()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(obs)
    return model, time.perf_counter() - t0


def _kappa_summary(model) -> dict:
    kappa = model.idata_["posterior"]["kappa"]
    median = kappa.median(dim=("chain", "draw")).values
    lo = kappa.quantile(0.05, dim=("chain", "draw")).values
    hi = kappa.quantile(0.95, dim=("chain", "draw")).values
    post = model.idata_["posterior"]
    return {
        "domains": len(median),
        "median_of_domain_medians": float(np.median(median)),
        "domain_median_quartiles": [float(q) for q in np.quantile(median, [0.25, 0.75])],
        "domains_with_upper90_below_1": int((hi < 1).sum()),
        "domains_with_lower90_above_100": int((lo > 100).sum()),
        "mu_log_kappa": [
            float(q) for q in np.quantile(post["mu_log_kappa"].values, [0.05, 0.5, 0.95])
        ],
        "sigma_log_kappa": [
            float(q) for q in np.quantile(post["sigma_log_kappa"].values, [0.05, 0.5, 0.95])
        ],
    }


def main() -> None:
    from bayesrate import datasets
    from bayesrate.checks.ppc import ppc_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--ppc-draws", type=int, default=200)
    args = parser.parse_args()
    obs = datasets.load(args.dataset)
    print(f"{args.dataset}: {obs.n_pages} pages, {obs.n_intervals} intervals", flush=True)
    out: dict = {}
    for name in ("hierarchical", "bursty"):
        model, seconds = _fit(name, obs)
        d = model.diagnostics_
        row = {
            "seconds": round(seconds, 1),
            "converged": bool(d.converged),
            "r_hat_max": round(d.r_hat_max, 4),
            "ess_bulk_min": round(d.ess_bulk_min),
            "ess_tail_min": round(d.ess_tail_min),
            "divergences": d.divergences,
        }
        if name == "bursty":
            row["kappa"] = _kappa_summary(model)
        t0 = time.perf_counter()
        checks = ppc_for(model, obs, seed=f"bench-bursty-{name}", n_draws=args.ppc_draws)
        row["ppc_seconds"] = round(time.perf_counter() - t0, 1)
        for replication in checks.replications:
            table = checks.result(replication).table().set_index("statistic")
            gap = table.loc["gap_cv"]
            row[f"gap_cv_{replication}"] = {
                "observed": round(float(gap["observed"]), 3),
                "replicated_mean": round(float(gap["replicated_mean"]), 3),
                "p_value": round(float(gap["p_value"]), 3),
            }
            row[f"extreme_{replication}"] = checks.failures(replication=replication)
        out[name] = row
        print(name, json.dumps(row), flush=True)
    ratio = out["bursty"]["seconds"] / out["hierarchical"]["seconds"]
    print(f"bursty / hierarchical wall time: {ratio:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
