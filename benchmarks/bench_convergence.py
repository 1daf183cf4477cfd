"""Fit diagnostics: rank R-hat + bulk ESS + tail ESS, vectorised vs ArviZ, same run.

A fit of the 6,907 tldr pages has 13,814 scalar parameters (``log_rate`` and ``rate``) in
4 chains x 500 draws. ``bayesrate.models.convergence.summary`` computes all three
statistics for every parameter; the baseline is ``arviz_stats`` (``az.rhat``,
``az.ess(method="bulk")``, ``az.ess(method="tail")`` on the posterior Dataset, what
``diagnostics.compute`` called before), timed on a subset of parameters and extrapolated
(it is linear in the number of parameters: one Python call per parameter). Autocorrelated
draws (AR(1), coefficient 0.3), seeded.

Run: ``.venv/bin/python benchmarks/bench_convergence.py [--params 13814] [--baseline-params 2000]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from bayesrate.models import convergence
from bayesrate.seeds import rng_from


def chains(n_chain: int, n_draw: int, n_par: int, phi: float = 0.3) -> np.ndarray:
    rng = rng_from("bench-convergence")
    x = rng.standard_normal((n_chain, n_draw, n_par))
    for t in range(1, n_draw):
        x[:, t] += phi * x[:, t - 1]
    return x


def arviz_baseline(samples: np.ndarray) -> np.ndarray:
    import arviz as az
    import xarray as xr

    ds = xr.Dataset({"x": (("chain", "draw", "p"), samples)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.stack(
            [
                az.rhat(ds)["x"].values,
                az.ess(ds, method="bulk")["x"].values,
                az.ess(ds, method="tail")["x"].values,
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=13_814)
    parser.add_argument("--baseline-params", type=int, default=2_000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=500)
    args = parser.parse_args()
    samples = chains(args.chains, args.draws, args.params)
    convergence.summary(samples[:, :, :10])  # warm-up: imports, first allocations

    t0 = time.perf_counter()
    ours = convergence.summary(samples)
    ours_s = time.perf_counter() - t0

    sub = samples[:, :, : args.baseline_params]
    t0 = time.perf_counter()
    reference = arviz_baseline(sub)
    base_s = (time.perf_counter() - t0) * args.params / sub.shape[2]
    gap = np.nanmax(np.abs(ours[:, : sub.shape[2]] / reference - 1))

    print(
        f"{args.params:,} parameters x {args.chains} chains x {args.draws} draws "
        f"(R-hat, bulk ESS, tail ESS)"
    )
    print(
        f"bayesrate.models.convergence.summary: {ours_s:.2f} s, "
        f"{args.params / ours_s:,.0f} parameters/s"
    )
    print(
        f"arviz_stats (rhat + ess bulk + ess tail), {sub.shape[2]:,} parameters extrapolated: "
        f"{base_s:.2f} s, {args.params / base_s:,.0f} parameters/s"
    )
    print(f"ratio {base_s / ours_s:.1f}x; max relative difference {gap:.1e}")


if __name__ == "__main__":
    main()
