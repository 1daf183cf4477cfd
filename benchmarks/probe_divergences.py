"""Where a model's NUTS fit diverges on a forecast split's training crawl.

Builds the forecast study's training observations (same crawl, pages and seed), samples
the model with nutpie's ``store_divergences``, and prints each divergence's kind (nutpie's
message: a large energy error is geometric; "Logp function returned error" a non-finite
log density) and the population parameters at the divergences against their posterior.

    .venv/bin/python benchmarks/probe_divergences.py --dataset tldr-pages \\
        --split 2025-01-01T00:00Z --model excursion --model-config '{"epoch_days": 365}'
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="tldr-pages")
    parser.add_argument("--split", default="2025-01-01T00:00Z")
    parser.add_argument("--horizon-days", type=float, default=365.0)
    parser.add_argument("--max-pages", type=int, default=1000)
    parser.add_argument("--model", default="excursion")
    parser.add_argument("--model-config", default='{"epoch_days": 365}')
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--target-accept", type=float, default=0.8)
    args = parser.parse_args()

    import nutpie

    from bayesrate.constants import HOURS_PER_DAY
    from bayesrate.datasets import load_history
    from bayesrate.models import get_model
    from bayesrate.studies.forecast import design, hours_of

    history = load_history(args.dataset)
    d = design(history, crawl_every_hours=24.0, split=hours_of(args.split, "split"),
               horizon_hours=args.horizon_days * HOURS_PER_DAY, seed="bayesrate-forecast",
               max_pages=args.max_pages)  # fmt: skip
    print(f"{d.n_pages} pages, {d.train.n_visits:,} visits, domains: "
          f"{d.train.pages['domain'].value_counts().to_dict()}")  # fmt: skip
    model = get_model(args.model)(json.loads(args.model_config))
    compiled = nutpie.compile_pymc_model(model.build_model(d.train))
    start = time.perf_counter()
    idata = nutpie.sample(compiled, draws=args.draws, tune=args.tune, chains=2, cores=2,
                          seed=1, progress_bar=False, store_divergences=True,
                          target_accept=args.target_accept)  # fmt: skip
    stats = idata["sample_stats"]
    div = np.asarray(stats["diverging"])
    print(f"sampling {time.perf_counter() - start:.1f} s; divergences {int(div.sum())}")
    kinds = Counter(str(m).split(":")[0] for m in np.asarray(stats["divergence_message"])[div])
    print("kinds:", dict(kinds))
    post = idata["posterior"]
    for name, var in post.data_vars.items():
        if var.ndim != 2:
            continue
        x = np.asarray(var)
        q05, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95])
        print(
            f"{name:>20}: posterior {q05:.3f} / {q50:.3f} / {q95:.3f}; "
            f"at the divergences {np.round(np.sort(x[div]), 3)}"
        )


if __name__ == "__main__":
    main()
