"""Where the ``excursion`` fit's Laplace check ``k̂`` comes from: the approximation, or
the check's reference and its noise (issue #14: the 90-day excursion fit of ota-contrib).

Usage::

    .venv/bin/python benchmarks/bench_excursion_references.py [--dataset ota-contrib]
        [--model-config '{}'] [--fit /tmp/excursion-90.nc] [--draws 200]
        [--grids 48] [--pairs 400]

Fits ``excursion`` (sampler defaults; saved to ``--fit`` and reused when it exists), then
on ``--draws`` evenly spaced posterior draws prints, per reference, the log ratio of the
whole log's likelihood to the Laplace one (levels and paths integrated, population fixed):
its mean and spread over draws, the Pareto ``k̂`` of the importance weights and how far
they move the scalar population means. References:

* each grid in ``--grids`` with the levels drawn once per page (the fit's check, three
  repeats: the noise a single level draw adds) and integrated by 9-point Gauss–Hermite
  on the level's Laplace posterior;
* importance sampling of each page's path and level from its joint Laplace Gaussian
  (``--pairs`` antithetic pairs): ``log E[exp(Σ_j R_j(δ_j))]``, ``R_j`` the remainder of
  cell ``j``'s log-likelihood after its quadratic about the mode (the prior is Gaussian, so
  only the cells' remainders are left); no grid, so no grid range or spacing.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from numba import njit

from bayesrate.models._laplace_kernels import cell_derivatives

GAUSS_HERMITE_NODES = 9


@njit(cache=True)
def _importance_kernel(page_start, slot_cell, unchanged, group_start, group_exposure,
                       group_count, modes, s, w, rho, tau, pairs, seed):  # fmt: skip
    np.random.seed(seed)  # noqa: NPY002 (numba's generator)
    n_pages = len(page_start) - 1
    out, ess = np.zeros(n_pages), np.full(n_pages, float(pairs))
    for p in range(n_pages):
        o, n = page_start[p], page_start[p + 1] - page_start[p]
        if n == 0:
            continue
        hess = np.zeros((n + 1, n + 1))  # the prior's precision in (x − L, L) ...
        iw2 = 1.0 / w[p] ** 2
        hess[0, 0] = 1.0 / s[p] ** 2
        for j in range(1, n):
            hess[j, j] += iw2
            hess[j - 1, j - 1] += rho[p] ** 2 * iw2
            hess[j, j - 1] = hess[j - 1, j] = -rho[p] * iw2
        border = hess[:n, :n].sum(axis=1)  # ... mapped to (x, L)
        hess[:n, n] = hess[n, :n] = -border
        hess[n, n] = border.sum() + 1.0 / tau[p] ** 2
        terms = np.zeros((3, n))
        for j in range(n):
            c = slot_cell[o + j]
            if c >= 0:
                v, d1, d2, _, _, _ = cell_derivatives(
                    modes[o + j], c, unchanged, group_start, group_exposure,
                    group_count, False,
                )  # fmt: skip
                terms[0, j], terms[1, j], terms[2, j] = v, d1, min(d2, 0.0)
                hess[j, j] -= terms[2, j]
        chol = np.linalg.cholesky(hess)
        log_w = np.empty(pairs)
        for k in range(pairs):
            normal = np.random.standard_normal(n + 1)  # noqa: NPY002
            delta = np.zeros(n + 1)  # H⁻¹'s Gaussian: solve Lᵀδ = normal
            for i in range(n, -1, -1):
                delta[i] = (normal[i] - chol[i + 1 :, i] @ delta[i + 1 :]) / chol[i, i]
            both = np.zeros(2)
            for side in range(2):
                sign = 1.0 - 2.0 * side
                for j in range(n):
                    c = slot_cell[o + j]
                    if c < 0:
                        continue
                    dj = sign * delta[j]
                    v, _, _, _, _, _ = cell_derivatives(
                        modes[o + j] + dj, c, unchanged, group_start, group_exposure,
                        group_count, False,
                    )  # fmt: skip
                    both[side] += v - terms[0, j] - terms[1, j] * dj - 0.5 * terms[2, j] * dj**2
            top = both.max()
            log_w[k] = top + np.log(0.5 * np.exp(both - top).sum())
        top = log_w.max()
        weights = np.exp(log_w - top)
        out[p] = top + np.log(weights.mean())
        ess[p] = weights.sum() ** 2 / (weights**2).sum()
    return out, ess


def importance_log_ratio(layout, modes, s, w, rho, tau, pairs: int, seed: int):
    """``(pages,)`` ``log Z_IS − log Z_Laplace`` and the weights' ESS per page."""
    return _importance_kernel(
        layout.page_start, layout.slot_cell, layout.unchanged, layout.group_start,
        layout.group_exposure, layout.group_count, modes, s, w, rho, tau, pairs, seed,
    )  # fmt: skip


def summary(label: str, log_ratio: np.ndarray, draws: dict) -> None:
    from bayesrate.models.dynamic import importance_summary

    total = log_ratio.sum(axis=1)
    scalars = {k: v for k, v in draws.items() if v.ndim == 1}
    s = importance_summary(total, scalars)
    shifts = ", ".join(f"{k} {v:.2f}" for k, v in s["mean_shift_sd"].items())
    print(
        f"{label}: mean {total.mean():.2f}, sd {total.std():.2f} nats; k {s['pareto_k']:.2f}, "
        f"ESS fraction {s['ess_fraction']:.3f}; mean shifts (sd) {shifts}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model-config", default="{}")
    parser.add_argument("--fit", default="/tmp/excursion-90.nc")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--grids", default="48")
    parser.add_argument("--pairs", type=int, default=400)
    args = parser.parse_args()

    from scipy.special import logsumexp
    from scipy.stats import norm

    from bayesrate import datasets
    from bayesrate.models.excursion import PAGE_LEVEL, ExcursionModel
    from bayesrate.models.laplace import PathLayout, laplace_logp_grad

    path = Path(args.fit)
    if path.exists():
        model = ExcursionModel.load(path)
    else:
        model = ExcursionModel(model_config=json.loads(args.model_config))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(datasets.load(args.dataset))
        model.save(path)
    data = model._fitted_data()
    print(f"# {args.dataset}: {model.diagnostics_}", flush=True)
    draws = model._spaced_draws(model.idata_["posterior"].to_dataset(), args.draws)
    log_z, mean, sd = model._level_posterior(draws, data)
    mu, sigma = draws["mu_domain"][:, data.domain_codes], draws["sigma_page"][:, None]
    rng = np.random.default_rng(0)

    def on_grid(levels: np.ndarray, size: int) -> np.ndarray:
        model.model_config["grid_size"] = size
        model._cells_cache = None
        return model._page_loglik_on_grid({**draws, PAGE_LEVEL: levels}, data)

    def level_weight(levels: np.ndarray) -> np.ndarray:
        return norm.logpdf(levels, mu, sigma) - norm.logpdf(levels, mean, sd)

    for size in (int(v) for v in args.grids.split(",")):
        t0 = time.perf_counter()
        for repeat in range(3):
            levels = mean + sd * rng.standard_normal(mean.shape)
            single = on_grid(levels, size) + level_weight(levels) - log_z
            summary(f"grid {size}, one level draw a page ({repeat})", single, draws)
        nodes, weights = np.polynomial.hermite_e.hermegauss(GAUSS_HERMITE_NODES)
        terms = []
        for node, weight in zip(nodes, weights, strict=True):
            levels = mean + sd * node
            log_weight = np.log(weight / np.sqrt(2 * np.pi))
            terms.append(on_grid(levels, size) + level_weight(levels) + log_weight)
        integrated = logsumexp(np.array(terms), axis=0) - log_z
        summary(f"grid {size}, levels by Gauss-Hermite", integrated, draws)
        print(f"  ({time.perf_counter() - t0:.0f} s)")
    layout = PathLayout.from_cells(model.cells(data))
    t0 = time.perf_counter()
    sampled = np.empty_like(log_z)
    ess = np.empty_like(log_z)
    for i in range(len(log_z)):
        m, s, w, rho, tau = model._level_prior(draws, i, data)
        modes = laplace_logp_grad(m, s, w, layout, rho=rho, level_sd=tau).modes
        per_page = [np.ascontiguousarray(np.broadcast_to(np.asarray(v, float), data.n_pages))
                    for v in (s, w, rho, tau)]  # fmt: skip
        sampled[i], ess[i] = importance_log_ratio(layout, modes, *per_page, args.pairs, i)
    summary("importance sampling from the Laplace Gaussian", sampled, draws)
    print(
        f"  ({time.perf_counter() - t0:.0f} s; weights' ESS per page: min {ess.min():.0f}, "
        f"median {np.median(ess):.0f} of {args.pairs})"
    )
    difference = integrated - sampled
    print(f"last grid minus importance sampling: sd over draws {difference.sum(1).std():.2f} nats")


if __name__ == "__main__":
    main()
