"""The dynamic model's log-rate grid before and after issue 52 (B1, B2): 48 nodes with
draws on the nodes against the grid chosen from the data (``grid_size: "auto"``) with
draws within the drawn cell, on issue 52's simulated world (daily visits, 8 epochs of 90
days, pages around 0.3 changes a day, one domain), the population at the truth.

Usage::

    .venv/bin/python benchmarks/bench_dynamic_grid.py [--parts coverage,profile,cost]

Prints (1) the coverage of the true current log-rate by each page's 90% interval of 400
``log_rate`` draws (300 pages, walk 0.05 and 0.3 per epoch) and the mean Kolmogorov–Smirnov
distance of those draws from an 800-node filter; (2) the profile likelihood of the walk
size (600 pages, the rest of the population at the truth) at true 0.03, 0.05 and 0.15: the
maximum and the 95% interval (``2·Δℓ ≤ 3.84``) on 48 nodes, the rule's grid and 800 nodes;
(3) the log-density + gradient of the model (``NUMBA`` mode, at the initial point) on each
grid.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

FINE = 800
BEFORE_AFTER = (
    ("before: 48 nodes, draws on nodes", 48, False),
    ("after: rule's grid, draws within cells", "auto", True),
    ("reference: 800 nodes, draws within cells", FINE, True),
)


def world(walk: float, n_pages: int):
    from tests.models.test_dynamic import busy_world

    return busy_world(walk, n_pages)


def model(size, obs):
    from bayesrate.models.dynamic import DynamicModel

    m = DynamicModel(model_config={"grid_size": size})
    m.data_ = obs
    m.grid(obs)
    return m


def log_rate_draws(m, obs, truth, n: int, within_cells: bool, rng) -> np.ndarray:
    """``(n, pages)`` draws of the current log-rates given the true population: on the
    nodes (before) or within the drawn cells (after, as ``DynamicModel._add_derived``)."""
    from bayesrate.models.dynamic import cell_draws, draw_states

    probs = m.filtered(truth, obs)[0]
    state = draw_states(np.broadcast_to(probs, (n, *probs.shape)), rng)
    grid = m.grid(obs)
    return cell_draws(grid, state, rng) if within_cells else grid[state]


def ks_to(fine, obs, truth, draws: np.ndarray) -> float:
    grid = fine.grid(obs)
    probs = fine.filtered(truth, obs)[0]
    half = (grid[1] - grid[0]) / 2
    knots = np.concatenate([[grid[0] - half], grid + half])
    cdf = np.concatenate([np.zeros((obs.n_pages, 1)), np.cumsum(probs, axis=1)], axis=1)
    n = len(draws)
    ecdf = np.arange(1, n + 1) / n
    out = []
    for p in range(obs.n_pages):
        x = np.sort(draws[:, p])
        ref = np.interp(x, knots, cdf[p] / cdf[p, -1])
        out.append(max(np.max(ecdf - ref), np.max(ref - (ecdf - 1 / n))))
    return float(np.mean(out))


def coverage() -> None:
    print("## B1: coverage of the true current log-rate (300 pages, 400 draws)")
    for walk in (0.05, 0.3):
        obs, path, truth = world(walk, 300)
        fine = model(FINE, obs)
        for label, size, within in BEFORE_AFTER:
            m = model(size, obs)
            draws = log_rate_draws(m, obs, truth, 400, within, np.random.default_rng(1))
            q = np.quantile(draws, [0.05, 0.95], axis=0)
            cov = np.mean((q[0] <= path[:, -1]) & (path[:, -1] <= q[1]))
            print(
                f"walk {walk}: {label} ({len(m.grid(obs))} nodes): coverage90 {cov:.3f}, "
                f"KS to {FINE} nodes {ks_to(fine, obs, truth, draws):.3f}"
            )


def profile() -> None:
    print("## B2: profile likelihood of sigma_walk (600 pages, the rest at the truth)")
    for walk in (0.03, 0.05, 0.15):
        obs, _, truth = world(walk, 600)
        sigma = walk * np.geomspace(1 / 4, 4, 161)
        draws = {
            "mu_domain": np.repeat(truth["mu_domain"], len(sigma), axis=0),
            "sigma_page": np.ones(len(sigma)),
            "sigma_walk": sigma[:, None],
        }
        for size in (48, "auto", FINE):
            m = model(size, obs)
            t = time.perf_counter()
            ll = m._page_loglik_on_grid(draws, obs).sum(axis=1)
            seconds = time.perf_counter() - t
            inside = sigma[2 * (ll.max() - ll) <= 3.841]
            print(
                f"true {walk}: {len(m.grid(obs))} nodes: {sigma[np.argmax(ll)]:.4f} "
                f"[{inside.min():.4f}, {inside.max():.4f}] ({seconds:.1f} s for "
                f"{len(sigma)} walk sizes)"
            )


def cost() -> None:
    from functools import partial

    from gradient_timing import interleaved_ms, logp_dlogp_at

    print("## cost: log-density + gradient (NUMBA, initial point), 300 pages")
    for walk in (0.05, 0.3):
        obs, _, _ = world(walk, 300)
        calls = {}
        for size in (48, "auto"):
            m = model(size, obs)
            f, x0 = logp_dlogp_at(m.build_model(obs), mode="NUMBA")
            calls[f"{len(m.grid(obs))} nodes"] = partial(f, x0)
        ms = interleaved_ms(calls, rounds=5, calls=5)
        print(f"walk {walk}: " + ", ".join(f"{k} {v[0]:.2f} ms" for k, v in ms.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="coverage,profile,cost")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    parts = {"coverage": coverage, "profile": profile, "cost": cost}
    for part in args.parts.split(","):
        parts[part]()


if __name__ == "__main__":
    main()
