"""How close the ``dynamic`` model's Laplace-integrated paths are to its grid, on a crawl log
(issue #14: the cost target's fit with ``path_integral: "laplace"``).

Usage::

    .venv/bin/python benchmarks/bench_laplace_paths.py [--dataset ota-contrib]
        [--model-config '{"epoch_days": 365}'] [--grids 48,96,192] [--draws 200]

(the fit's Laplace order is the model config's ``laplace_order``, 1 by default; the other
order's spread is printed at the same draws)

Fits the model with Laplace paths (sampler defaults), then on ``--draws`` evenly spaced
posterior draws evaluates the whole log's likelihood (paths integrated out, population
parameters fixed) by the Laplace approximation and by the grid at each size in
``--grids`` (the finest is the reference). Prints the spread over draws of each
difference (what moves the posterior; a constant offset does not), the Pareto ``k̂`` and
effective sample fraction of the importance weights that would take the Laplace draws to
each grid's posterior, and how far those weights move the scalar population means.
Also times the Laplace log-density + gradient against the grid's (``NUMBA`` mode, the
models' initial points).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings


def rounded(summary: dict) -> dict:
    """``summary`` with its numbers to 3 decimals, for printing."""
    return {k: rounded(v) if isinstance(v, dict) else round(v, 3) for k, v in summary.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--grids", default="48,96,192")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()

    import numpy as np
    from bench_dynamic_cost import gradient_ms

    from bayesrate import datasets
    from bayesrate.models import get_model
    from bayesrate.models.dynamic import importance_summary

    data = datasets.load(args.dataset)
    config = json.loads(args.model_config)
    sizes = [int(k) for k in args.grids.split(",")]
    print(f"# bench_laplace_paths: {args.dataset}, {data.n_pages:,} pages; dynamic {config}")
    laplace = get_model("dynamic")(model_config={**config, "path_integral": "laplace"})
    grid = get_model("dynamic")(model_config={**config, "grid_size": sizes[0]})
    ms = gradient_ms({"laplace": laplace.build_model(data), "grid": grid.build_model(data)})
    print(
        f"gradient: Laplace paths {ms['laplace']:.2f} ms, grid of {sizes[0]} {ms['grid']:.2f} ms "
        f"({ms['grid'] / ms['laplace']:.1f}x)"
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        laplace.fit(data)
    d = laplace.diagnostics_
    print(
        f"Laplace fit: {time.perf_counter() - t0:.1f} s, R-hat max {d.r_hat_max:.4f}, bulk ESS "
        f"min {d.ess_bulk_min:.0f}, divergences {d.divergences}, converged {d.converged}"
    )
    draws = laplace._spaced_draws(laplace.idata_["posterior"].to_dataset(), args.draws)
    n_draws = len(draws["sigma_page"])
    by_laplace = laplace._laplace_loglik(draws, data)
    by_grid = {}
    for k in sizes:
        model = get_model("dynamic")(model_config={**config, "grid_size": k})
        model.data_ = data
        t0 = time.perf_counter()
        by_grid[k] = model._page_loglik_on_grid(draws, data).sum(axis=1)
        print(f"grid of {k}: likelihood at {n_draws} draws in {time.perf_counter() - t0:.1f} s")
    finest = by_grid[sizes[-1]]
    print(f"draws weighed: {n_draws}; importance weights to the grid of {sizes[-1]} from:")
    print(f"  Laplace paths: {rounded(importance_summary(finest - by_laplace, draws))}")
    fitted = laplace.model_config["laplace_order"]
    order = 3 - fitted  # the other one
    other = get_model("dynamic")(model_config={**laplace.model_config, "laplace_order": order})
    spread = float(np.std(finest - other._laplace_loglik(draws, data)))
    print(f"  (Laplace of order {order} at the same draws: log-ratio sd {spread:.3f})")
    for k in sizes[:-1]:
        print(f"  grid of {k}: {rounded(importance_summary(finest - by_grid[k], draws))}")
    for k in sizes[:-1]:
        summary = rounded(importance_summary(by_grid[k] - by_laplace, draws))
        print(f"Laplace paths to the grid of {k}: {summary}")


if __name__ == "__main__":
    main()
