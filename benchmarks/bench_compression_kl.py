"""The export's compression KL on a fit's domain populations: the default quadrature
(nodes from the narrowest draw's sd, :data:`bayesrate.priors.KL_NODES_PER_SD`) against the
fixed 2,001 nodes it replaced, in the same run.

Usage::

    .venv/bin/python benchmarks/bench_compression_kl.py [--fit reports/ota-contrib/fit-excursion.nc]
        [--baseline-populations 11]

``--fit``: a full fit saved by ``bayesrate calibrate`` (``make main`` leaves one per model in
``reports/ota-contrib/``). The baseline is timed on the first ``--baseline-populations``
populations only (it took about 5 minutes for all 386 of ota-contrib's excursion fit); both
rules' values are printed side by side there, and the default rule is then timed on all of
them.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", default="reports/ota-contrib/fit-excursion.nc")
    parser.add_argument("--baseline-populations", type=int, default=11)
    args = parser.parse_args()

    import xarray as xr

    from bayesrate.export import population_draws
    from bayesrate.priors import NormalMixture, compression_kl

    post = xr.open_datatree(args.fit)["posterior"].to_dataset()
    draws = population_draws(post)
    n_draws = len(next(iter(draws.values()))[0])
    print(f"{args.fit}: {len(draws)} populations, {n_draws:,} draws each")
    mixtures = {k: NormalMixture.from_draws(*v) for k, v in draws.items()}
    keys = list(draws)[: args.baseline_populations]
    old = new = 0.0
    worst = 0.0
    for k in keys:
        loc, scale = draws[k]
        t = time.perf_counter()
        a = compression_kl(loc, scale, mixtures[k], points=2001)
        old += time.perf_counter() - t
        t = time.perf_counter()
        b = compression_kl(loc, scale, mixtures[k])
        new += time.perf_counter() - t
        worst = max(worst, abs(a - b) / max(abs(a), 1e-300))
        print(f"  {k[:32]:32s} 2,001 nodes {a:.9e}   default {b:.9e}")
    print(
        f"{len(keys)} populations: 2,001 nodes {len(keys) / old:.2f} populations/s, default "
        f"{len(keys) / new:.2f} populations/s, ratio {old / new:.1f}x; largest relative "
        f"difference {worst:.1e}"
    )
    t = time.perf_counter()
    for k, (loc, scale) in draws.items():
        compression_kl(loc, scale, mixtures[k])
    seconds = time.perf_counter() - t
    print(
        f"all {len(draws)} populations, default rule: {seconds:.1f} s "
        f"({len(draws) / seconds:.2f} populations/s; 2,001 nodes at the rate above: "
        f"{len(draws) * old / len(keys):.0f} s)"
    )


if __name__ == "__main__":
    main()
