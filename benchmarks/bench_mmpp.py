"""Fit cost of the two-state MMPP on the ``ota-contrib`` crawl log against the hierarchical
model's, in the same run (issue #14: the best new model within 3× the hierarchical wall time).

Usage::

    .venv/bin/python benchmarks/bench_mmpp.py [--dataset ota-contrib] [--stride 6]

Both from the loaded :class:`~bayesrate.observations.Observations` to a finished fit:
the hierarchical model by its default sampler (nutpie, compile included; R-hat, ESS and
divergences printed), the MMPP (:func:`bayesrate.estimators.mmpp.fit`) from building the
visit runs to the converged Nelder–Mead optimum (numba compile excluded by a warm-up on
ten pages; the kernel's cache makes it a one-off per machine). Prints the forward
recursion's throughput (runs × grid points per second) and the ratio of the wall times.
"""

from __future__ import annotations

import argparse
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--stride", type=int, default=None, help="grid scan stride")
    args = parser.parse_args()

    import numpy as np

    from bayesrate import datasets
    from bayesrate.estimators import mmpp
    from bayesrate.models import get_model

    obs = datasets.load(args.dataset)
    print(f"# bench_mmpp: {args.dataset}, {obs.n_pages:,} pages, {obs.n_visits:,} visits")
    stride = mmpp.SCAN_STRIDE if args.stride is None else args.stride

    mmpp.fit(mmpp.VisitRuns.from_observations(obs.subset(np.arange(10))), max_evaluations=5)
    t0 = time.perf_counter()
    runs = mmpp.VisitRuns.from_observations(obs)
    fitted = mmpp.fit(runs, stride=stride)
    mmpp_s = time.perf_counter() - t0
    theta = fitted.theta
    t1 = time.perf_counter()
    mmpp.grid_loglik(runs, theta, fitted.params.ratio, fitted.params.q_in, fitted.params.q_out)
    one = time.perf_counter() - t1
    p = fitted.params
    print(
        f"mmpp: {mmpp_s:.1f} s, {fitted.evaluations} evaluations, converged "
        f"{fitted.converged}; {runs.n_runs:,} runs; one full-grid pass {one:.2f} s = "
        f"{runs.n_runs * len(theta) / one / 1e6:.1f} M run-points/s; ratio {p.ratio:.3g}, "
        f"bursts {p.burst_days:.3g} d, quiet {p.quiet_days:.3g} d, stride {stride}"
    )

    t0 = time.perf_counter()
    model = get_model("hierarchical")()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    hier_s = time.perf_counter() - t0
    d = model.diagnostics_
    print(
        f"hierarchical: {hier_s:.1f} s; R-hat max {d.r_hat_max:.4f}, bulk ESS min "
        f"{d.ess_bulk_min:.0f}, divergences {d.divergences}"
    )
    print(f"ratio mmpp / hierarchical wall time: {mmpp_s / hier_s:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
