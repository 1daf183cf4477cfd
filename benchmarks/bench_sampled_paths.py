"""Experiment: the dynamic model with each page's path *sampled* by NUTS instead of summed
out on the grid, against the hierarchical model on the same crawl log (issue #14, cost).

Usage::

    .venv/bin/python benchmarks/bench_sampled_paths.py [--dataset ota-contrib]
        [--epoch-days 365] [--information 4] [--target-accept 0.8]
        [--adaptation diag] [--draws 1000 --tune 300 --chains 4]

Not a model of the package: a measurement of the parameterisation the issue names first
("NUTS on pages × epochs"). The population is :class:`~bayesrate.models.dynamic.DynamicModel`'s
(``mu_domain``, ``sigma_page``, ``sigma_walk`` per domain); each page has one continuous
log-rate per column from its first to its last epoch with data, the first
``Normal(mu_domain, sigma_page)``, each next ``Normal(previous, sigma_walk)``, and each cell's
intervals enter by their sufficient statistics (unchanged exposure, changed intervals grouped
by length). A column is centred when its cell's observed information about the log-rate
(:func:`bayesrate.likelihood.loglik_derivatives`, at the grid point of its largest
likelihood) is at least ``--information`` and that point is inside the grid; the others
are non-centred steps from the latest centred column (or the domain mean).

Prints the log-density gradient of each model (``NUMBA`` mode), nutpie's compile and sampling
seconds, gradient evaluations per draw, divergences, and the worst R-hat / bulk ESS of the
population parameters, with the ratio against the hierarchical fit's compile + sampling
seconds in the same run.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from bench_dynamic_cost import describe, gradient_ms, timed_fit

POPULATION = ("mu_global", "sigma_domain", "mu_domain", "sigma_page", "sigma_walk_global",
              "walk_domain_sd", "sigma_walk")  # fmt: skip


def sampled_paths_model(base, data, information: float, wall: float = 0.0):
    """The PyMC model of ``base`` (a DynamicModel) with sampled paths; its column count and
    centred columns. ``wall`` > 0: a half-Normal wall of that scale beyond the grid's ends."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayesrate.likelihood import loglik_derivatives
    from bayesrate.models.likelihood import log1mexp_of_log

    cells, grid = base.cells(data), base.grid(data)
    first, last = cells.first_column, cells.last_column
    columns = np.where(last >= first, last - first + 1, 0)
    start = np.concatenate([[0], np.cumsum(columns)])
    n = int(start[-1])
    page = np.repeat(np.arange(data.n_pages), columns)
    opens = np.arange(n) == start[page]
    cell_slot = start[cells.cell_page] + cells.cell_epoch - first[cells.cell_page]

    table, _ = base.emission(data)
    k = table[cells.cell_page, cells.cell_epoch].argmax(axis=1)
    inside = (k > 0) & (k < len(grid) - 1)
    observed_information = loglik_derivatives(cells.groups, grid[k], order=2)[2]
    centred = np.zeros(n, dtype=bool)
    centred[cell_slot] = inside & (observed_information >= information)
    guess = np.full(n, np.nan)
    guess[cell_slot] = grid[k]
    anchor = np.full(n, -1)
    for p in range(data.n_pages):
        latest, value = -1, np.nan
        for s in range(start[p], start[p + 1]):
            latest = s if centred[s] else latest
            value = guess[s] if np.isfinite(guess[s]) else value
            anchor[s], guess[s] = latest, value

    groups, domain = cells.groups, data.domain_codes[page]
    c_idx, z_idx = np.flatnonzero(centred), np.flatnonzero(~centred)
    with pm.Model(coords=base.coords(data)) as model:
        mu_domain, sigma_page = base._population(data)
        sigma_walk = base._walk_sd(data)
        scale = pt.switch(opens, sigma_page, sigma_walk[domain])
        free = pm.Flat("log_rate_centred_path", shape=len(c_idx), initval=guess[c_idx])
        z = pm.Normal("z_path", 0.0, 1.0, shape=len(z_idx))
        steps = pt.cumsum(pt.set_subtensor(pt.zeros(n)[z_idx], scale[z_idx] * z))
        padded = pt.concatenate([pt.zeros(1), steps])
        held = pt.set_subtensor(pt.zeros(n)[c_idx], free)
        base_value = pt.switch(anchor >= 0, held[np.maximum(anchor, 0)], mu_domain[domain])
        x = base_value + steps - padded[np.where(anchor >= 0, anchor + 1, start[page])]
        previous = pt.switch(opens, mu_domain[domain], pt.concatenate([pt.zeros(1), x[:-1]]))
        walk = pm.logp(pm.Normal.dist(previous[c_idx], scale[c_idx]), free)
        pm.Potential("centred_steps", pt.sum(walk))
        if wall > 0:
            beyond = pt.maximum(x - grid[-1], 0) + pt.maximum(grid[0] - x, 0)
            pm.Potential("grid_wall", -0.5 * pt.sum((beyond / wall) ** 2))
        cell_x = x[cell_slot]
        pm.Potential(
            "cells",
            -pt.sum(pt.exp(cell_x) * groups.unchanged)
            + pt.sum(
                groups.group_count
                * log1mexp_of_log(cell_x[groups.group_page] + groups.group_log_exposure)
            ),
        )
    return model, n, int(centred.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--epoch-days", type=float, default=365.0)
    parser.add_argument("--information", type=float, default=4.0)
    parser.add_argument("--target-accept", type=float, default=0.8)
    parser.add_argument("--wall", type=float, default=0.0, help="wall scale beyond the grid")
    parser.add_argument("--adaptation", default="diag", help="nutpie's mass matrix adaptation")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()

    import arviz as az
    import nutpie

    from bayesrate import datasets
    from bayesrate.models import get_model

    data = datasets.load(args.dataset)
    base = get_model("dynamic")(model_config={"epoch_days": args.epoch_days})
    model, n_columns, n_centred = sampled_paths_model(base, data, args.information, args.wall)
    print(
        f"# bench_sampled_paths: {args.dataset}, {data.n_pages:,} pages; epochs of "
        f"{args.epoch_days:g} days, {n_columns:,} page columns ({n_centred:,} centred at "
        f"information >= {args.information:g}); {args.chains} x {args.draws} draws after "
        f"{args.tune} tuning, target_accept {args.target_accept}, {args.adaptation} adaptation"
    )
    ms = gradient_ms({"hierarchical": get_model("hierarchical")().build_model(data),
                      "sampled paths": model})  # fmt: skip
    print(
        f"gradient: hierarchical {ms['hierarchical']:.3f} ms, sampled paths "
        f"{ms['sampled paths']:.3f} ms"
    )
    hier_s, hier_d = timed_fit(get_model("hierarchical")(), data)
    print(describe("hierarchical", hier_s, hier_d))
    t0 = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model, backend="numba")
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = nutpie.sample(
            compiled, draws=args.draws, tune=args.tune, chains=args.chains, cores=2,
            seed=20261205, progress_bar=False, target_accept=args.target_accept,
            adaptation=args.adaptation,
        )  # fmt: skip
    t2 = time.perf_counter()
    names = [v for v in POPULATION if v in trace.posterior]
    summary = az.summary(trace, var_names=names)
    stats = trace.sample_stats
    worst_r, worst_e = summary["r_hat"].astype(float).idxmax(), summary["ess_bulk"].idxmin()
    print(
        f"sampled paths: compile {t1 - t0:.1f} s, sampling {t2 - t1:.1f} s, "
        f"{float(stats['n_steps'].mean()):.1f} gradient evaluations per draw, divergences "
        f"{int(stats['diverging'].sum())}; population R-hat max "
        f"{float(summary['r_hat'].max()):.3f} ({worst_r}), bulk ESS min "
        f"{float(summary['ess_bulk'].min()):.0f} ({worst_e})"
    )
    own = hier_d.compile_seconds + hier_d.sampling_seconds
    print(
        f"ratio (compile + sampling) sampled paths / hierarchical: {(t2 - t0) / own:.1f}x "
        f"({t2 - t0:.1f} s / {own:.1f} s); hierarchical's whole fit {hier_s:.1f} s"
    )


if __name__ == "__main__":
    main()
