"""Irregular visits: the hierarchical fit with per-page emulators of the detected
intervals' log-likelihood against the term-by-term sum (issue #16, item 6).

Usage::

    .venv/bin/python benchmarks/bench_irregular.py [--pages 5000] [--fits emulated,exact]
        [--reference-draws 0]

Data: ``--pages`` pages in 20 domains, log-normal rates around 0.3 changes/day, Poisson
visits with a mean gap of one day over 90 days (the issue's setting: 5,000 pages, ~450k
visits, ~133k detected changes, every changed interval its own group). Prints, in one
process: the log-density + gradient of both forms (median and minimum of 50 × 10 calls,
BLAS single-threaded) and their largest difference; then each requested full NUTS fit
with its time, gates and gradient evaluations per draw: ``emulated`` and ``exact`` at the
default sampler (4 chains × 1,000 draws + 1,000 tuning steps), ``quick`` with the
emulators at the project's quick sampler (``bayesrate.quick_fit.QUICK_SAMPLER``, 4 × 1,000
+ 300), ``before`` as the issue first measured it (no emulators, default sampler,
``target_accept`` 0.95 with no retries). With ``--reference-draws N`` also a long
emulated fit (4 × N) and, for each fit, the largest relative difference of per-page
posterior means against it, and the same difference in units of its Monte Carlo standard
error (both runs' errors combined): the means of the pages' own draws, and the means of
``page_summary`` (each page's exact conditional posterior averaged over the population
draws, :mod:`bayesrate.models.page_posterior`) against the reference's of either kind.
"""

from __future__ import annotations

import argparse
import warnings
from functools import partial

import numpy as np
from gradient_timing import interleaved_ms, logp_dlogp_at


def irregular_observations(n_pages: int):
    from bayesrate.simulate import rng_from, simulate_pages

    rng = rng_from("bench-irregular")
    domains = np.array([f"d{i % 20}" for i in range(n_pages)])
    domain_log_rate = rng.normal(np.log(0.3 / 24), 0.7, 20)
    rates = np.exp(domain_log_rate[np.arange(n_pages) % 20] + rng.normal(0, 1.0, n_pages))
    visits = [np.sort(rng.uniform(0, 90 * 24, max(rng.poisson(90), 2))) for _ in range(n_pages)]
    return simulate_pages(rates, visits, domains, rng=rng).observations


def _without_emulators():
    from bayesrate.models import emulator

    original = emulator.worth_emulating
    emulator.worth_emulating = lambda n_pages, n_groups: False
    return lambda: setattr(emulator, "worth_emulating", original)


def gradients(obs) -> None:
    from bayesrate.models import HierarchicalModel

    funcs = {}
    for label in ("exact", "emulated"):
        restore = _without_emulators() if label == "exact" else (lambda: None)
        try:
            funcs[label] = logp_dlogp_at(HierarchicalModel().build_model(obs), 0.2, seed=3)
        finally:
            restore()
    (fa, x0), (fb, _) = funcs["exact"], funcs["emulated"]
    a, b = fa(x0), fb(x0)
    print(
        f"|Δlogp| {abs(a[0] - b[0]):.2e} (logp {a[0]:.1f}), max |Δgrad| "
        f"{np.abs(a[1] - b[1]).max():.2e}",
        flush=True,
    )
    ms = interleaved_ms({"exact": partial(fa, x0), "emulated": partial(fb, x0)}, rounds=50)
    med = {k: v[0] for k, v in ms.items()}
    low = {k: v[1] for k, v in ms.items()}
    print(
        f"logp+grad: exact median {med['exact']:.3f} ms (min {low['exact']:.3f}), emulated "
        f"{med['emulated']:.3f} ms (min {low['emulated']:.3f}); emulated/exact "
        f"x{med['emulated'] / med['exact']:.3f} (min x{low['emulated'] / low['exact']:.3f})",
        flush=True,
    )


def fit(obs, label: str, sampler: dict | None = None):
    from bayesrate.models import HierarchicalModel
    from bayesrate.quick_fit import QUICK_SAMPLER

    if label == "quick":
        sampler = dict(QUICK_SAMPLER)
    elif label == "before":  # as first measured: no emulators, target_accept 0.95 throughout
        sampler = {"target_accept": 0.95, "target_accept_retry": []}
    restore = _without_emulators() if label in ("exact", "before") else (lambda: None)
    try:
        model = HierarchicalModel(sampler_config=sampler or {}).fit(obs)
    finally:
        restore()
    d = model.diagnostics_
    print(
        f"fit ({label}): {d.seconds:.1f} s (compile {d.compile_seconds:.1f}, sampling "
        f"{d.sampling_seconds:.1f}); R-hat {d.r_hat_max:.4f}, bulk ESS {d.ess_bulk_min:.0f}, "
        f"divergences {d.divergences}, {d.grad_evals_per_draw:.1f} gradient evaluations per "
        f"draw; converged {d.converged}; NUTS runs {d.extra.get('nuts_runs')}",
        flush=True,
    )
    return model


def mean_and_mcse(model) -> tuple[np.ndarray, np.ndarray]:
    """Per-page posterior mean of the rate and its Monte Carlo standard error."""
    from arviz_stats.base.array import array_stats

    rate = np.asarray(model.idata_["posterior"]["rate"].transpose("chain", "draw", "page"))
    mcse = array_stats.mcse(rate, chain_axis=0, draw_axis=1, method="mean")
    return rate.mean(axis=(0, 1)), np.asarray(mcse)


def conditional_mean_and_mcse(model, obs) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-page posterior mean as the average of the exact conditionals over the population
    draws (``page_summary``'s default), its Monte Carlo standard error, and the seconds."""
    import time

    from arviz_stats.base.array import array_stats

    from bayesrate.draws import stack_draws
    from bayesrate.models.page_posterior import conditional_average

    post = model.idata_["posterior"]
    start = time.perf_counter()
    summary = model.page_summary()
    seconds = time.perf_counter() - start
    means = conditional_average(
        obs.interval_stats.groups,
        obs.domain_codes,
        stack_draws(post["mu_domain"], "domain"),
        stack_draws(post["sigma_page"]),
        draw_means=True,
    ).draw_means
    chains = post.sizes["chain"]
    per_chain = means.reshape(chains, -1, means.shape[1])
    mcse = np.asarray(array_stats.mcse(per_chain, chain_axis=0, draw_axis=1, method="mean"))
    mean = summary["rate_per_day"].to_numpy() / 24.0
    assert np.allclose(mean, means.mean(axis=0), rtol=1e-9)
    return mean, mcse, seconds


def compare(label: str, what: str, mean, mcse, ref_mean, ref_mcse) -> None:
    rel = np.abs(mean / ref_mean - 1.0)
    z = np.abs(mean - ref_mean) / np.hypot(mcse, ref_mcse)
    print(
        f"{label} ({what}): per-page posterior means vs the reference: max relative "
        f"difference {rel.max():.4f}, 99th percentile {np.quantile(rel, 0.99):.4f}; "
        f"in Monte Carlo standard errors: max {z.max():.2f}, share > 3: "
        f"{np.mean(z > 3):.4f}, share > 1.96: {np.mean(z > 1.96):.4f}; its relative "
        f"Monte Carlo standard error: max {np.max(mcse / mean):.4f}, 99th percentile "
        f"{np.quantile(mcse / mean, 0.99):.4f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument(
        "--fits", default="emulated", help="comma list: emulated, quick, exact, before"
    )
    parser.add_argument("--reference-draws", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    obs = irregular_observations(args.pages)
    print(f"{obs.n_pages:,} pages, {obs.n_visits:,} visits, {obs.n_changes:,} detected")
    gradients(obs)
    fitted = {}
    for label in [s for s in args.fits.split(",") if s]:
        fitted[label] = fit(obs, label)
    if args.reference_draws and fitted:
        sampler = {"draws": args.reference_draws, "seed": "bench-irregular-reference"}
        reference = fit(obs, "emulated reference", sampler)
        ref_draws = mean_and_mcse(reference)
        ref_cond = conditional_mean_and_mcse(reference, obs)
        print(f"reference: conditional page summary {ref_cond[2]:.1f} s", flush=True)
        for label, model in fitted.items():
            compare(label, "draws", *mean_and_mcse(model), *ref_draws)
            mean, mcse, seconds = conditional_mean_and_mcse(model, obs)
            print(f"{label}: conditional page summary {seconds:.1f} s", flush=True)
            compare(label, "conditional", mean, mcse, *ref_cond[:2])
            compare(label, "conditional vs the reference's draws", mean, mcse, *ref_draws)


if __name__ == "__main__":
    main()
