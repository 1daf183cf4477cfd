"""Does the Laplace check measure the Laplace approximation or its reference grid's error?

:meth:`~bayesrate.models.dynamic.DynamicModel.laplace_check` weighs the draws of a fit with
Laplace-integrated paths by ``exp(log p_grid - log p_Laplace)`` summed over pages, and fails
the fit when the weights' Pareto ``k̂`` exceeds 0.7. Its reference is the model's own grid,
whose size the rule caps by cost (``GRID_MAX_SIZE``, ``GRID_WORK``): on ota-contrib with
365-day epochs it has 67 nodes where the spacing rule wanted 420. This probe fits the model
(or loads a saved fit), then computes the check's log ratios against the model's grid and
against finer grids on the same draws, and prints each ``k̂`` and the spread of the grids'
differences.

Usage::

    .venv/bin/python research/benchmarks/probe_laplace_check_grid.py \\
        [--dataset ota-contrib] [--model excursion] [--model-config '{"epoch_days": 365}'] \\
        [--fit /tmp/exc365.nc] [--draws 100] [--sizes 134 268 420]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model", default="excursion")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--fit", default=None, help="a saved fit to load, or where to save one")
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=[134, 268, 420])
    args = parser.parse_args()

    from bayesrate import datasets
    from bayesrate.models import get_model
    from bayesrate.models.dynamic import importance_summary

    data = datasets.load(args.dataset)
    config = json.loads(args.model_config)
    cls = get_model(args.model)
    if args.fit and Path(args.fit).exists():
        model = cls.load(args.fit, data=data)
        print(f"loaded {args.fit}")
    else:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = cls(config).fit(data)
        print(f"fitted in {time.perf_counter() - t0:.0f} s; converged {model.converged_}")
        if args.fit:
            model.save(args.fit)
    print("stored check:", json.dumps(model.diagnostics_.extra.get("laplace_check"), default=str))
    own = len(model.grid(data))
    print("grid rule:", model._grid_rule)

    post = model.idata_["posterior"].to_dataset()
    draws = model._spaced_draws(post, args.draws)
    t0 = time.perf_counter()
    laplace = model._laplace_loglik(draws, data)
    print(f"Laplace log-likelihood on {len(laplace)} draws: {time.perf_counter() - t0:.0f} s")
    grids = {own: model._page_loglik_on_grid(draws, data).sum(axis=1)}
    for size in args.sizes:
        fine = cls({**model.model_config, "grid_size": int(size)})
        fine.data_ = data
        t0 = time.perf_counter()
        grids[size] = fine._page_loglik_on_grid(draws, data).sum(axis=1)
        print(f"{size}-node grid: {time.perf_counter() - t0:.0f} s")
    finest = grids[max(grids)]
    print("\nnodes | k̂ vs Laplace | log-ratio sd | ESS fraction | sd of (grid - finest) | mean")
    for size, values in sorted(grids.items()):
        check = importance_summary(values - laplace, draws)
        diff = values - finest
        print(
            f"{size:5d} | {check['pareto_k']:.3f} | {check['log_ratio_sd']:.2f} | "
            f"{check['ess_fraction']:.3f} | {diff.std():.2f} | {diff.mean():.2f}"
        )


if __name__ == "__main__":
    main()
