"""Posterior predictive checks and leave-one-page-out of saved fits beside fresh ones.

``bayesrate calibrate`` refits every model it compares; a dynamic model's fit of
``ota-contrib`` takes over half an hour, so this script checks fits saved by ``bayesrate
fit`` (``--saved NAME=PATH``) together with models fitted here at their defaults
(``--fit NAME``), all on one embedded dataset, with the seeds ``bayesrate calibrate`` uses
for its checks. It prints each model's PPC table (both replications), the number of pages
the periodicity check flags, and the ELPD-LOO comparison::

    .venv/bin/bayesrate fit --dataset ota-contrib --model dynamic --chains 2 --out fits/dyn
    .venv/bin/python scripts/check_fits.py --dataset ota-contrib \\
        --saved dynamic=fits/dyn/fit.nc --fit hierarchical
"""

from __future__ import annotations

import argparse
import time
import warnings

COLUMNS = ["replication", "statistic", "observed", "replicated_mean", "replicated_q05",
           "replicated_q95", "p_value"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ota-contrib")
    parser.add_argument("--saved", nargs="*", default=[], metavar="NAME=PATH")
    parser.add_argument("--fit", nargs="*", default=[], metavar="MODEL")
    args = parser.parse_args(argv)

    from bayesrate import datasets
    from bayesrate.checks.compare import compare
    from bayesrate.checks.ppc import ppc_for
    from bayesrate.models import get_model
    from bayesrate.models.base import RateModel

    obs = datasets.load(args.dataset)
    fits = {}
    for item in args.saved:
        name, _, path = item.partition("=")
        model = RateModel.load(path)
        if model.data_ is None or model.data_.fingerprint != obs.fingerprint:
            parser.error(f"{path} was not fitted on {args.dataset}")
        fits[name] = model
        print(f"{name}: saved fit, {model.diagnostics_.seconds:.0f} s, {model.diagnostics_}")
    for name in args.fit:
        start = time.perf_counter()
        model = get_model(name)()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failed gate is printed below
            model.fit(obs)
        fits[name] = model
        print(f"{name}: fitted in {time.perf_counter() - start:.0f} s, {model.diagnostics_}")
    for name, model in fits.items():
        start = time.perf_counter()
        checks = ppc_for(model, obs, seed=f"bayesrate-calibrate-ppc-{name}")
        print(f"--- {name}: posterior predictive checks ({time.perf_counter() - start:.0f} s)")
        print(checks.table()[COLUMNS].to_string())
        pages = checks.conditional.periodic_pages
        flagged = int((pages["p_value"] < 0.05).sum())
        print(f"periodicity: {flagged} of {len(pages)} pages at p < 0.05 (conditional)")
    start = time.perf_counter()
    comparison = compare(fits)
    print(f"--- leave-one-page-out ({time.perf_counter() - start:.0f} s)")
    print(comparison.table.to_string())
    print(comparison.verdict)
    print(comparison.pareto_k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
