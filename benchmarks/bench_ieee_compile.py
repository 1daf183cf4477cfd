"""Cost of compiling models with IEEE arithmetic (numba fast-math off) against PyTensor's
default fast-math, for the core models, in one run.

``bayesrate`` compiles every model inside ``models.base.reproducible_compilation()`` so
that a fixed seed gives the same draws from a cold or a warm compile cache
(``docs/models.md``, "Reproducibility"). This prints the log-density-and-gradient time
of each core model both ways (best of 5 one-second rounds) and the ratio.

    .venv/bin/python benchmarks/bench_ieee_compile.py [--pages 400]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def world(n_pages: int):
    from bayesrate.simulate import regular_grid, simulate_pages

    rng = np.random.default_rng(5)
    rates = np.exp(rng.normal(np.log(0.02), 1.0, n_pages))
    domains = np.array([f"d{i % 12}" for i in range(n_pages)])
    return simulate_pages(rates, regular_grid(0.0, 24 * 400, 24.0), domains, rng=7).observations


def gradient_ms(model_name: str, config: dict, obs, fastmath: bool) -> float:
    import pytensor

    from bayesrate.models import get_model

    with pytensor.config.change_flags(numba__fastmath=fastmath):
        model = get_model(model_name)(config).build_model(obs)
        fn = model.logp_dlogp_function(ravel_inputs=True, mode="NUMBA")
    fn.set_extra_values({})
    x = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
    fn(x)
    best = []
    for _ in range(5):
        start, k = time.perf_counter(), 0
        while time.perf_counter() - start < 1.0:
            fn(x)
            k += 1
        best.append((time.perf_counter() - start) / k)
    return 1e3 * min(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    args = parser.parse_args()
    obs = world(args.pages)
    print(f"{'model':<14}{'fast-math ms':>14}{'IEEE ms':>10}{'IEEE/fast':>11}")
    for name, config in (
        ("censored", {}),
        ("hierarchical", {}),
        ("modulated", {"timezone": "UTC"}),
        ("excursion", {}),
    ):
        fast = gradient_ms(name, config, obs, True)
        ieee = gradient_ms(name, config, obs, False)
        print(f"{name:<14}{fast:>14.4f}{ieee:>10.4f}{ieee / fast:>11.2f}")


if __name__ == "__main__":
    main()
