"""The shifted HMM kernel of the dynamic shocks / mass-edit models: rates evaluated per
(domain, epoch) group against per cell (issue #14).

Usage::

    .venv/bin/python benchmarks/bench_hmm_shifted.py [--pages 300] [--split 2025-01-01T00:00Z]

Crawls the embedded tldr-pages history daily (the forecast study's design, training part
only) and times, on the same cells and at the same point:

* ``tables``: the emission table and its slopes
  (:meth:`bayesrate.models.hmm.ShiftedEmission.tables`);
* ``kernel``: the whole log-density and gradient (tables, forward–backward, slopes);

each with one group per (domain, epoch) (the models' layout: every ``exp`` and
``log(1 − e^{−λτ})`` once per group, interval length and grid state) and with one group per
cell (the named baseline: the same quantities evaluated for every cell, as before the
grouping). Also the dynamic mass-edit model's full PyMC log-density + gradient, and the
hierarchical model's on the same data, for the ratio that the issue's cost target is about.
Prints milliseconds per call (median of interleaved rounds) and the ratios; checks that both
layouts give the same log-density and gradient.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

#: the core's benchmark helpers (gradient_timing)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def main() -> None:
    from bayesrate_research.models.dynamic_edits import DynamicEditModel
    from gradient_timing import interleaved_ms, logp_dlogp_at

    from bayesrate.io.history import load_history
    from bayesrate.models import HierarchicalModel
    from bayesrate.models.dynamic import transition_matrices
    from bayesrate.models.hmm import ShiftedEmission, shifted_paths_logp_grad
    from bayesrate.studies.forecast import design, hours_of

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--split", default="2025-01-01T00:00Z")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    history = load_history(dataset="tldr-pages")
    d = design(
        history,
        crawl_every_hours=24.0,
        split=hours_of(args.split, "split"),
        horizon_hours=365 * 24.0,
        seed="bayesrate-forecast",
        max_pages=args.pages,
    )
    data = d.train
    model = DynamicEditModel(model_config={"domain_shocks": False})
    pm_model = model.build_model(data)
    cells = model.cells(data)
    grouped = model.shifted_emission(data)
    per_cell = ShiftedEmission.from_cells(
        cells.groups,
        cells.cell_page,
        cells.cell_epoch,
        cells.n_pages,
        cells.n_epochs,
        model.grid(data),
    )
    rng = np.random.default_rng(20261204)
    shift = rng.normal(0.0, 0.3, grouped.n_groups)
    added = rng.normal(-8.0, 0.5, grouped.n_groups)
    of_cell = grouped.cell_group
    k = len(grouped.grid)
    init = np.full((cells.n_pages, k), 1.0 / k)
    transitions = transition_matrices(np.full(len(data.domains), 0.3), grouped.grid)
    chain = (data.domain_codes, cells.first_column, cells.last_column)

    def kernel(emission, s, a):
        return lambda: shifted_paths_logp_grad(init, transitions, s, emission, *chain, a)

    by_group = kernel(grouped, shift, added)()
    by_cell = kernel(per_cell, shift[of_cell], added[of_cell])()
    assert np.isclose(by_group[0], by_cell[0], rtol=1e-11), (by_group[0], by_cell[0])
    for g_group, g_cell in zip(by_group[3:], by_cell[3:], strict=True):
        summed = np.bincount(of_cell, weights=g_cell, minlength=grouped.n_groups)
        np.testing.assert_allclose(g_group, summed, rtol=1e-8, atol=1e-8)

    f_edits, x_edits = logp_dlogp_at(pm_model)
    baseline = HierarchicalModel()
    f_hier, x_hier = logp_dlogp_at(baseline.build_model(data))
    funcs = {
        "tables, per (domain, epoch)": lambda: grouped.tables(shift, added),
        "tables, per cell (baseline)": lambda: per_cell.tables(shift[of_cell], added[of_cell]),
        "kernel, per (domain, epoch)": kernel(grouped, shift, added),
        "kernel, per cell (baseline)": kernel(per_cell, shift[of_cell], added[of_cell]),
        "dynamic_edits logp+grad": lambda: f_edits(x_edits),
        "hierarchical logp+grad": lambda: f_hier(x_hier),
    }
    for call in funcs.values():
        call()
    ms = interleaved_ms(funcs, rounds=args.rounds)
    out = {
        "pages": cells.n_pages,
        "epochs": cells.n_epochs,
        "cells": len(cells.cell_page),
        "grid": k,
        "groups": grouped.n_groups,
        "changed keys grouped / per cell": [len(e.term_row) // k for e in (grouped, per_cell)],
        "ms (median, min)": {label: [round(a, 3), round(b, 3)] for label, (a, b) in ms.items()},
        "speed-up tables": round(
            ms["tables, per cell (baseline)"][0] / ms["tables, per (domain, epoch)"][0], 2
        ),
        "speed-up kernel": round(
            ms["kernel, per cell (baseline)"][0] / ms["kernel, per (domain, epoch)"][0], 2
        ),
        "dynamic_edits / hierarchical logp+grad": round(
            ms["dynamic_edits logp+grad"][0] / ms["hierarchical logp+grad"][0], 1
        ),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
