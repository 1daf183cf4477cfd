"""How close the ``dynamic`` model's Laplace-integrated paths are to its grid, on a crawl log
(issue #14: the cost target's fit with ``path_integral: "laplace"``).

Usage::

    .venv/bin/python benchmarks/bench_laplace_paths.py [--dataset ota-contrib]
        [--model-config '{"epoch_days": 365}'] [--grids 48,96,192] [--draws 200]

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

import numpy as np

SCALARS = ("sigma_page", "mu_global", "sigma_domain", "sigma_walk_global", "walk_domain_sd")


def importance(log_ratio: np.ndarray, draws: dict[str, np.ndarray]) -> dict:
    """PSIS ``k̂``, effective sample fraction and mean shifts (posterior sds) of the weights
    ``exp(log_ratio)`` on ``draws``."""
    from arviz_stats.base import array_stats

    log_w, k = array_stats.psislw(log_ratio - log_ratio.max())
    w = np.exp(log_w - np.logaddexp.reduce(log_w))
    shifts = {n: round(float(abs(w @ draws[n] - draws[n].mean()) / draws[n].std()), 3)
              for n in SCALARS if n in draws and draws[n].std() > 0}  # fmt: skip
    return {
        "sd": round(float(log_ratio.std()), 3),
        "pareto_k": round(float(k), 3),
        "ess_fraction": round(float(1 / np.sum(w**2) / len(w)), 3),
        "mean_shift_sd": shifts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--grids", default="48,96,192")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()

    from bench_dynamic_cost import gradient_ms

    from bayesrate import datasets
    from bayesrate.models import get_model

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
    post = laplace.idata_["posterior"].to_dataset()
    flat = laplace._stacked(post, extra=SCALARS)
    n = len(flat["sigma_page"])
    pick = np.unique(np.linspace(0, n - 1, min(args.draws, n)).round().astype(int))
    draws = {k: v[pick] for k, v in flat.items()}
    by_laplace = laplace._laplace_loglik(draws, data)
    by_grid = {}
    for k in sizes:
        model = get_model("dynamic")(model_config={**config, "grid_size": k})
        model.data_ = data
        t0 = time.perf_counter()
        by_grid[k] = model._page_loglik_on_grid(draws, data).sum(axis=1)
        print(f"grid of {k}: likelihood at {len(pick)} draws in {time.perf_counter() - t0:.1f} s")
    finest = by_grid[sizes[-1]]
    print(f"draws weighed: {len(pick)}; importance weights to the grid of {sizes[-1]} from:")
    print(f"  Laplace paths: {importance(finest - by_laplace, draws)}")
    for k in sizes[:-1]:
        print(f"  grid of {k}: {importance(finest - by_grid[k], draws)}")
    for k in sizes[:-1]:
        print(f"Laplace paths to the grid of {k}: {importance(by_grid[k] - by_laplace, draws)}")


if __name__ == "__main__":
    main()
