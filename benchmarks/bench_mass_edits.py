"""Fit cost of the mass-edit model on a crawl log against the hierarchical model's, in the
same run (issue #14: the best new model within 3× the hierarchical wall time, converged).

Usage::

    .venv/bin/python benchmarks/bench_mass_edits.py [--dataset ota-contrib] [--draws N]

Both from the loaded :class:`~bayesrate.observations.Observations` to a finished fit by
their default samplers (nutpie, compile and the target-accept ladder included; 4 chains ×
``--draws``): wall time, R-hat, bulk ESS, divergences and gradient evaluations per draw of
each, and the ratio of the wall times. Sampled throughput: draws (all chains) per second.
"""

from __future__ import annotations

import argparse
import time
import warnings


def _fit(name: str, obs, draws: int | None):
    from bayesrate.models import get_model

    sampler = {} if draws is None else {"draws": draws}
    model = get_model(name)(sampler_config=sampler)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(obs)
    seconds = time.perf_counter() - t0
    d = model.diagnostics_
    total = d.chains * d.draws
    print(
        f"{name}: {seconds:.1f} s ({total / seconds:.0f} draws/s); R-hat max {d.r_hat_max:.4f}, "
        f"bulk ESS min {d.ess_bulk_min:.0f} ({d.worst_ess}), divergences {d.divergences}, "
        f"{d.grad_evals_per_draw:.0f} gradient evaluations per draw, converged {d.converged}"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument(
        "--draws", type=int, default=None, help="draws per chain (default: the model's)"
    )
    args = parser.parse_args()

    from bayesrate import datasets

    obs = datasets.load(args.dataset)
    print(f"# bench_mass_edits: {args.dataset}, {obs.n_pages:,} pages, {obs.n_visits:,} visits")
    hier_s = _fit("hierarchical", obs, args.draws)
    edits_s = _fit("mass_edits", obs, args.draws)
    print(f"ratio mass_edits / hierarchical wall time: {edits_s / hier_s:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
