"""Benchmarks of the PyMC models (issue #4). Run once; prints throughput and ratios.

Usage::

    .venv/bin/python benchmarks/bench_models.py [--pages 1000] [--naive-cap 600]
        [--scale-pages 100000] [--subset 5000] [--only naive,modulated,scale]

1. **Sufficient statistics vs one Bernoulli per visit** — the hierarchical model on
   ``pages_like(1000)`` (case-study shape) with the package's likelihood, against the same
   model (same priors, same parameterisation, same nutpie settings) written as a naive
   PyMC user would: ``pm.Bernoulli`` per visit interval. The naive run is stopped at
   ``--naive-cap`` seconds; the speed ratio is then a lower bound. Posterior means are
   compared within Monte Carlo error on ``--agreement-pages`` pages where both run to the end.
2. **Modulated vs hierarchical** wall time on the same data (target ≤ 6×), on
   ``pages_like(--modulated-pages)``.
3. **Scale path** on ``--scale-pages`` simulated pages (target ≤ 10 min) and, on a
   ``--subset``-page subset, its domain-level estimates against full NUTS (target: within 10%).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def _quiet_fit(model, obs, **kw):
    from bayesrate.models import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(obs, **kw)
    return model, [str(w.message) for w in caught]


def _warm_up(classes, obs, sampler: dict) -> None:
    """A tiny fit of each model class, so that numba's one-time compilations in this
    process are charged to none of the timed fits."""
    warm = {**sampler, "draws": 20, "tune": 20, "chains": 2}
    for cls in classes:
        _quiet_fit(cls(sampler_config=warm), obs.subset(np.arange(min(5, obs.n_pages))))


def naive_model(hier, obs):
    """The hierarchical model with one Bernoulli per visit interval (what not to do)."""
    import pymc as pm
    import pytensor.tensor as pt

    hier.check_data(obs)
    hier._build_notes = {}
    not_first = ~obs.is_baseline
    tau = np.diff(obs.time, prepend=np.nan)[not_first]
    page = obs.page_of_visit[not_first]
    flags = obs.changed[not_first].astype(np.int64)
    with pm.Model(coords=hier.coords(obs)) as model:
        log_rate = hier._page_log_rates(obs)
        p = 1 - pt.exp(-pt.exp(log_rate)[page] * tau)
        pm.Bernoulli("changed", p=pt.clip(p, 1e-12, 1 - 1e-12), observed=flags)
    return model, len(flags)


def bench_naive(obs, cap: float, sampler: dict) -> dict:
    import nutpie

    from bayesrate.models import HierarchicalModel
    from bayesrate.models.base import seed_int

    _warm_up((HierarchicalModel,), obs, sampler)
    fast, notes = _quiet_fit(HierarchicalModel(sampler_config=sampler), obs)
    d = fast.diagnostics_
    out = {
        "fast_seconds": d.seconds,
        "fast_compile_seconds": d.compile_seconds,
        "fast_sampling_seconds": d.sampling_seconds,
        "fast_converged": d.converged,
        "fast_r_hat_max": d.r_hat_max,
        "fast_ess_bulk_min": d.ess_bulk_min,
        "fast_divergences": d.divergences,
        "fast_warnings": notes,
    }
    print(f"[naive] sufficient-statistics fit: {d.seconds:.1f} s (converged={d.converged})")
    hier = HierarchicalModel(sampler_config=sampler)
    t0 = time.perf_counter()
    model, n_bern = naive_model(hier, obs)
    compiled = nutpie.compile_pymc_model(model)
    t1 = time.perf_counter()
    bg = nutpie.sample(
        compiled,
        draws=sampler["draws"],
        tune=sampler["tune"],
        chains=sampler["chains"],
        cores=2,
        seed=seed_int(sampler["seed"]),
        progress_bar=False,
        save_warmup=True,
        target_accept=hier.sampler_config["target_accept"],
        blocking=False,
    )
    finished = False
    while time.perf_counter() - t0 < cap:
        try:
            done = bg.is_finished
        except TimeoutError:  # nutpie raises this while the sampler is busy
            done = False
        if done:
            finished = True
            break
        time.sleep(2)
    trace = bg.wait() if finished else bg.abort()
    naive_seconds = time.perf_counter() - t0
    # progress: draws done (warm-up + kept) over all chains, vs the total requested
    done_draws = 0
    for group in ("warmup_posterior", "posterior"):
        if group in trace.children and "mu_global" in trace[group].data_vars:
            done_draws += int(np.isfinite(np.asarray(trace[group]["mu_global"])).sum())
    total_draws = (sampler["draws"] + sampler["tune"]) * sampler["chains"]
    fraction = done_draws / total_draws
    # the fast fit again, now, under the same machine load as the naive run's end
    fast2, _ = _quiet_fit(HierarchicalModel(sampler_config=sampler), obs)
    fast_seconds = max(d.seconds, fast2.diagnostics_.seconds)
    sampling_rate = max(fraction, 1e-9) / max(naive_seconds - (t1 - t0), 1e-9)
    extrapolated = (t1 - t0) + 1.0 / sampling_rate
    out.update(
        naive_bernoulli_terms=n_bern,
        naive_compile_seconds=t1 - t0,
        naive_seconds=naive_seconds,
        naive_finished=finished,
        naive_draws_done=done_draws,
        naive_draws_total=total_draws,
        naive_fraction_done=fraction,
        naive_extrapolated_seconds=extrapolated,
        fast_seconds_after=fast2.diagnostics_.seconds,
        speedup=naive_seconds / fast_seconds,
        speedup_is_lower_bound=not finished,
        speedup_extrapolated=extrapolated / fast_seconds,
    )
    print(
        f"[naive] one Bernoulli per visit ({n_bern} terms): {naive_seconds:.0f} s, "
        f"finished={finished}, {done_draws}/{total_draws} draws ({fraction:.1%}); "
        f"fast fit {d.seconds:.1f} s before, {fast2.diagnostics_.seconds:.1f} s after; "
        f"ratio {'>=' if not finished else '='} {naive_seconds / fast_seconds:.1f}x "
        f"(extrapolated from the naive run's own pace: {extrapolated / fast_seconds:.0f}x)"
    )
    return out


def bench_gradient(obs, repeats: int = 20) -> dict:
    """Cost of one log-density + gradient evaluation, both versions, timed interleaved.

    Same model, same parameterisation, same point; the sampler needs the same number of
    gradients per draw for both (identical posterior), so this ratio is the speed-up of
    sampling, measured without waiting for the naive sampler and robust to machine load.
    """
    from bayesrate.models import HierarchicalModel

    fast_model = HierarchicalModel().build_model(obs)
    naive, n_bern = naive_model(HierarchicalModel(), obs)
    funcs = {}
    for name, model in (("fast", fast_model), ("naive", naive)):
        f = model.compile_logp_dlogp() if hasattr(model, "compile_logp_dlogp") else None
        if f is None:
            logp, dlogp = model.compile_logp(), model.compile_dlogp()

            def f(point, logp=logp, dlogp=dlogp):
                return logp(point), dlogp(point)

        point = model.initial_point()
        f(point)
        funcs[name] = (f, point)
    times = {"fast": [], "naive": []}
    for _ in range(repeats):
        for name, (f, point) in funcs.items():
            n = 50 if name == "fast" else 1
            t = time.perf_counter()
            for _ in range(n):
                f(point)
            times[name].append((time.perf_counter() - t) / n)
    fast_ms = 1e3 * float(np.median(times["fast"]))
    naive_ms = 1e3 * float(np.median(times["naive"]))
    print(
        f"[gradient] logp+grad: sufficient statistics {fast_ms:.3f} ms, one Bernoulli per "
        f"visit ({n_bern} terms) {naive_ms:.2f} ms: ratio {naive_ms / fast_ms:.0f}x"
    )
    return {
        "fast_ms": fast_ms,
        "naive_ms": naive_ms,
        "ratio": naive_ms / fast_ms,
        "bernoulli_terms": n_bern,
    }


def bench_agreement(obs, sampler: dict) -> dict:
    """Both versions run to completion on a small data set: same posterior?"""
    import arviz as az
    import nutpie

    from bayesrate.models import HierarchicalModel
    from bayesrate.models.base import seed_int

    fast, _ = _quiet_fit(HierarchicalModel(sampler_config=sampler), obs)
    hier = HierarchicalModel(sampler_config=sampler)
    t0 = time.perf_counter()
    model, n_bern = naive_model(hier, obs)
    naive = nutpie.sample(
        nutpie.compile_pymc_model(model),
        draws=sampler["draws"],
        tune=sampler["tune"],
        chains=sampler["chains"],
        cores=2,
        seed=seed_int(sampler["seed"]) + 1,
        progress_bar=False,
        save_warmup=False,
        target_accept=hier.sampler_config["target_accept"],
    )
    naive_seconds = time.perf_counter() - t0
    fpost = fast.idata_["posterior"].to_dataset()
    npost = naive["posterior"].to_dataset()
    names = ["mu_global", "sigma_page", "sigma_domain", "mu_domain", "log_rate"]
    ess_f = az.ess(fpost[names])
    ess_n = az.ess(npost[names])
    z_all = []
    for name in names:
        a, b = fpost[name], npost[name]
        se = np.sqrt(
            a.var(("chain", "draw")) / ess_f[name] + b.var(("chain", "draw")) / ess_n[name]
        )
        z = np.asarray((a.mean(("chain", "draw")) - b.mean(("chain", "draw"))) / se).ravel()
        z_all.append(z)
    z = np.concatenate(z_all)
    out = {
        "pages": obs.n_pages,
        "bernoulli_terms": n_bern,
        "fast_seconds": fast.diagnostics_.seconds,
        "naive_seconds": naive_seconds,
        "speedup": naive_seconds / fast.diagnostics_.seconds,
        "n_means_compared": int(z.size),
        "max_abs_z": float(np.abs(z).max()),
        "share_abs_z_below_2": float(np.mean(np.abs(z) < 2)),
        "share_abs_z_below_3": float(np.mean(np.abs(z) < 3)),
    }
    print(
        f"[agreement] {obs.n_pages} pages, {n_bern} Bernoulli terms: fast "
        f"{fast.diagnostics_.seconds:.1f} s, naive {naive_seconds:.1f} s "
        f"({out['speedup']:.1f}x); {z.size} posterior means, |z| max {out['max_abs_z']:.2f}, "
        f"share |z|<2 {out['share_abs_z_below_2']:.3f} (expected ~0.95 if identical)"
    )
    return out


def bench_modulated(obs, sampler: dict) -> dict:
    from bayesrate.models import HierarchicalModel
    from bayesrate.models.modulated import ModulatedModel

    _warm_up((HierarchicalModel, ModulatedModel), obs, sampler)
    hier, hn = _quiet_fit(HierarchicalModel(sampler_config=sampler), obs)
    mod, mn = _quiet_fit(ModulatedModel(sampler_config=sampler), obs)
    h, m = hier.diagnostics_, mod.diagnostics_
    print(
        f"[modulated] {obs.n_pages} pages: hierarchical {h.seconds:.1f} s, modulated "
        f"{m.seconds:.1f} s: ratio {m.seconds / h.seconds:.2f}x (target <= 6)"
    )
    for name, d in (("hierarchical", h), ("modulated", m)):
        print(
            f"[modulated]   {name}: compile {d.compile_seconds:.1f} s, sampling "
            f"{d.sampling_seconds:.1f} s, {d.grad_evals_per_draw:.1f} gradient evaluations "
            f"per draw, R-hat max {d.r_hat_max:.4f}, bulk ESS min {d.ess_bulk_min:.0f}"
        )
    return {
        "hierarchical_seconds": h.seconds,
        "modulated_seconds": m.seconds,
        "ratio": m.seconds / h.seconds,
        "hierarchical_grad_evals_per_draw": h.grad_evals_per_draw,
        "modulated_grad_evals_per_draw": m.grad_evals_per_draw,
        "hierarchical_sampling_seconds": h.sampling_seconds,
        "modulated_sampling_seconds": m.sampling_seconds,
        "hierarchical_converged": h.converged,
        "modulated_converged": m.converged,
        "modulated_r_hat_max": m.r_hat_max,
        "modulated_ess_bulk_min": m.ess_bulk_min,
        "modulated_divergences": m.divergences,
        "warnings": hn + mn,
    }


def bench_scale(n_pages: int, subset: int, n_sample: int, sampler: dict, seed: str) -> dict:
    from bayesrate.models import HierarchicalModel
    from bayesrate.models.scale import fit_scale
    from bayesrate.simulate import pages_like

    t0 = time.perf_counter()
    sim = pages_like(n_pages, seed=seed, history="case-study")
    obs = sim.observations
    _ = obs.interval_stats
    t_sim = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_scale(obs, n_sample=n_sample, seed=seed, sampler_config=sampler)
    truth = sim.truth["rate_per_hour"].to_numpy() * 24
    cover = float(np.mean((res.pages.lower_per_day <= truth) & (truth <= res.pages.upper_per_day)))
    out = {
        "pages": n_pages,
        "simulate_seconds": t_sim,
        "scale_seconds": res.seconds,
        "stage1_converged": res.stage1.diagnostics_.converged,
        "coverage_90_vs_truth": cover,
    }
    print(
        f"[scale] {n_pages} pages: {res.seconds['total']:.0f} s (stage 1 "
        f"{res.seconds['stage1']:.0f} s, grid {res.seconds['grid']:.0f} s); "
        f"90% coverage of true rates {cover:.3f}"
    )
    # like-for-like: scale path vs full NUTS on the same subset
    rng = np.random.default_rng(7)
    pos = np.sort(rng.choice(obs.n_pages, size=subset, replace=False))
    sub = obs.subset(pos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sres = fit_scale(sub, n_sample=n_sample, seed=seed, sampler_config=sampler)
    full, notes = _quiet_fit(HierarchicalModel(sampler_config=sampler), sub)
    mu_full = np.asarray(full.idata_["posterior"]["mu_domain"].mean(("chain", "draw")))
    mu_scale = sres.domains["mu_mean"].to_numpy()
    rel = np.abs(np.exp(mu_scale - mu_full) - 1)
    lr_full = np.asarray(full.idata_["posterior"]["log_rate"].mean(("chain", "draw")))
    lr_scale = sres.pages["log_rate_mean"].to_numpy()
    hyper_full = {
        k: float(full.idata_["posterior"][k].mean())
        for k in ("mu_global", "sigma_domain", "sigma_page")
    }
    out.update(
        subset_pages=subset,
        subset_nuts_seconds=full.diagnostics_.seconds,
        subset_nuts_converged=full.diagnostics_.converged,
        subset_scale_seconds=sres.seconds["total"],
        domain_rate_rel_diff_max=float(rel.max()),
        domain_rate_rel_diff_median=float(np.median(rel)),
        domain_rate_within_10pct_share=float(np.mean(rel <= 0.10)),
        page_log_rate_mean_abs_diff=float(np.mean(np.abs(lr_full - lr_scale))),
        hyper_full=hyper_full,
        hyper_scale=sres.hyper,
        nuts_warnings=notes,
    )
    print(
        f"[scale] {subset}-page subset: NUTS {full.diagnostics_.seconds:.0f} s vs scale "
        f"{sres.seconds['total']:.0f} s; domain rates rel. diff max {rel.max():.3f}, median "
        f"{np.median(rel):.3f}; page log-rate mean |diff| {out['page_log_rate_mean_abs_diff']:.3f}"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--naive-cap", type=float, default=600.0)
    parser.add_argument(
        "--modulated-pages",
        type=int,
        default=300,
        help="pages for the modulated/hierarchical ratio",
    )
    parser.add_argument("--agreement-pages", type=int, default=50)
    parser.add_argument("--scale-pages", type=int, default=100_000)
    parser.add_argument("--subset", type=int, default=5000)
    parser.add_argument("--sample", type=int, default=2000, help="stage-1 pages of the scale path")
    parser.add_argument("--only", default="gradient,naive,agreement,modulated,scale")
    parser.add_argument("--seed", default="bench-models")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    from bayesrate.simulate import pages_like

    sampler = {"draws": 1000, "tune": 1000, "chains": 4, "seed": args.seed}
    only = set(args.only.split(","))
    obs = pages_like(args.pages, seed=args.seed, history="case-study").observations
    print(f"data: pages_like({args.pages}): {obs.n_visits} visits, {obs.n_changes} changes")
    results = {}
    if "naive" in only:
        results["naive"] = bench_naive(obs, args.naive_cap, sampler)
    if "gradient" in only:
        results["gradient"] = bench_gradient(obs)
    if "agreement" in only:
        aobs = pages_like(args.agreement_pages, seed=args.seed, history="case-study").observations
        results["agreement"] = bench_agreement(aobs, sampler)
    if "modulated" in only:
        mobs = pages_like(args.modulated_pages, seed=args.seed, history="case-study").observations
        results["modulated"] = bench_modulated(mobs, sampler)
    if "scale" in only:
        results["scale"] = bench_scale(
            args.scale_pages, args.subset, args.sample, sampler, args.seed
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2, default=str)
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
