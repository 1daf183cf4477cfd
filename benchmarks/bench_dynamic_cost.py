"""Fit cost of the ``dynamic`` model on a crawl log against the hierarchical model's, in the
same run (issue #14: the best new model within 3× the hierarchical wall time, converged).

Usage::

    .venv/bin/python benchmarks/bench_dynamic_cost.py [--dataset ota-contrib]
        [--model-config '{"epoch_days": 365, "path_integral": "laplace"}']
        [--draws N --tune N --chains N --target-accept P]
        [--gradient-only]

Both fits start from the loaded :class:`~bayesrate.observations.Observations` and end with
the fitted model (build, compile, NUTS by nutpie, diagnostics), each at its sampler
defaults unless ``--draws/--tune/--chains/--target-accept`` override the dynamic model's.
Prints each fit's wall time, compile and sampling seconds, gradient evaluations per draw,
R-hat, bulk ESS and divergences, the log-density gradient of each (``NUMBA`` mode, at the
initial point) and the ratios; with Laplace paths also the fit's check against the grid
(:meth:`~bayesrate.models.dynamic.DynamicModel.laplace_check`).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings


def gradient_ms(pm_models: dict) -> dict[str, float]:
    """Per label, the median milliseconds of a log-density + gradient of its PyMC model
    (``NUMBA`` mode, near the initial point), the models timed interleaved."""
    from functools import partial

    from gradient_timing import interleaved_ms, logp_dlogp_at

    calls = {}
    for label, pm_model in pm_models.items():
        f, x0 = logp_dlogp_at(pm_model, mode="NUMBA")
        calls[label] = partial(f, x0)
    return {label: ms for label, (ms, _) in interleaved_ms(calls, rounds=10).items()}


def timed_fit(model, data, **overrides):
    """Wall seconds of ``model.fit(data)`` and its diagnostics."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data, **overrides)
    return time.perf_counter() - t0, model.diagnostics_


def describe(name: str, seconds: float, d) -> str:
    return (
        f"{name}: {seconds:.1f} s (compile {d.compile_seconds:.1f} s, sampling "
        f"{d.sampling_seconds:.1f} s, {d.chains} x {d.draws} draws, "
        f"{d.grad_evals_per_draw:.1f} gradient evaluations per draw); R-hat max "
        f"{d.r_hat_max:.4f} ({d.worst_r_hat}), bulk ESS min {d.ess_bulk_min:.0f} "
        f"({d.worst_ess}), divergences {d.divergences}, converged {d.converged}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model", default="dynamic")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--gradient-only", action="store_true", help="skip the two fits")
    for name in ("draws", "tune", "chains"):
        parser.add_argument(f"--{name}", type=int, default=None)
    parser.add_argument("--target-accept", type=float, default=None)
    args = parser.parse_args()

    from bayesrate import datasets
    from bayesrate.models import get_model

    data = datasets.load(args.dataset)
    config = json.loads(args.model_config)
    overrides = {
        k: v
        for k in ("draws", "tune", "chains", "target_accept")
        if (v := getattr(args, k)) is not None
    }
    print(
        f"# bench_dynamic_cost: {args.dataset}, {data.n_pages:,} pages, {data.n_visits:,} "
        f"visits; {args.model} {config} {overrides or 'sampler defaults'}"
    )
    model = get_model(args.model)(model_config=config)
    ms = gradient_ms(
        {
            "hierarchical": get_model("hierarchical")().build_model(data),
            args.model: model.build_model(data),
        }
    )
    hier_grad, dyn_grad = ms["hierarchical"], ms[args.model]
    print(
        f"gradient: hierarchical {hier_grad:.3f} ms, {args.model} {dyn_grad:.2f} ms "
        f"({dyn_grad / hier_grad:.0f}x); {model._build_notes.get('epochs')}"
    )
    if args.gradient_only:
        return
    hier_s, hier_d = timed_fit(get_model("hierarchical")(), data)
    print(describe("hierarchical", hier_s, hier_d))
    dyn_s, dyn_d = timed_fit(get_model(args.model)(model_config=config), data, **overrides)
    print(describe(args.model, dyn_s, dyn_d))
    if "laplace_check" in dyn_d.extra:
        print(f"Laplace paths against the grid: {dyn_d.extra['laplace_check']}")
    print(
        f"ratio {args.model} / hierarchical wall time: {dyn_s / hier_s:.1f}x (target <= 3x, "
        f"converged: {dyn_d.converged})"
    )


if __name__ == "__main__":
    main()
