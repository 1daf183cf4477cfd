"""Newton's start in the Laplace paths kernel: the modes of a reference population moved
along their tangents (``PathLayout.from_cells``) against each cell's naive log-rate, at
posterior draws of a real fit (issue #14's cost target).

Usage::

    .venv/bin/python benchmarks/bench_laplace_start.py [--dataset ota-contrib]
        [--model-config '{"epoch_days": 365}'] [--draws 100] [--repeats 20]

Fits the ``dynamic`` model with Laplace paths (sampler defaults), then at ``--draws``
evenly spaced posterior draws evaluates the kernel (log-density and gradient) from both starts:
Newton passes per page, milliseconds per call (interleaved, ``--repeats`` calls per draw
and start), their ratio, and the largest difference between the two in ``log Z`` and the
gradient (Newton's tolerance, not the start, should decide them).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    import numpy as np

    from bayesrate import datasets
    from bayesrate.models import get_model
    from bayesrate.models.laplace import PathLayout, laplace_logp_grad

    data = datasets.load(args.dataset)
    config = {**json.loads(args.model_config), "path_integral": "laplace"}
    print(f"# bench_laplace_start: {args.dataset}, {data.n_pages:,} pages; dynamic {config}")
    model = get_model("dynamic")(model_config=config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data)
    draws = model._spaced_draws(model.idata_["posterior"].to_dataset(), args.draws)
    n_draws = len(draws["sigma_page"])
    dom = data.domain_codes
    cells = model.cells(data)
    layouts = {
        "naive": PathLayout.from_cells(cells, referenced=False),
        "referenced": PathLayout.from_cells(cells),
    }
    passes = {name: 0.0 for name in layouts}
    seconds = {name: 0.0 for name in layouts}
    worst = 0.0
    for i in range(n_draws):
        population = (draws["mu_domain"][i, dom], draws["sigma_page"][i],
                      draws["sigma_walk"][i, dom])  # fmt: skip
        results = {}
        for name, layout in layouts.items():
            results[name] = laplace_logp_grad(*population, layout)
            passes[name] += results[name].passes / data.n_pages / n_draws
            t0 = time.perf_counter()
            for _ in range(args.repeats):
                laplace_logp_grad(*population, layout)
            seconds[name] += time.perf_counter() - t0
        a, b = results["naive"], results["referenced"]
        worst = max(worst, abs(a.logp - b.logp),
                    *(float(np.abs(a[k] - b[k]).max()) for k in (1, 2, 3)))  # fmt: skip
    ms = {name: 1e3 * s / (n_draws * args.repeats) for name, s in seconds.items()}
    for name in layouts:
        print(f"{name} start: {passes[name]:.2f} Newton passes a page, {ms[name]:.3f} ms a call")
    print(
        f"referenced / naive: {ms['referenced'] / ms['naive']:.2f}x the time per call, "
        f"{passes['referenced'] / passes['naive']:.2f}x the passes; largest difference in "
        f"log Z or a gradient component: {worst:.1e} ({n_draws} draws)"
    )


if __name__ == "__main__":
    main()
