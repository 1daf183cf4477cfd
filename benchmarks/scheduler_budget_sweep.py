"""Where can any revisit policy beat production crawlers by 15%? A budget sweep.

Runs the scheduler simulation (``bayesrate schedule simulate``: the same world, seven
policies, equal fetch budgets) at several budgets and prints, per budget, the best
production policy, the oracle's and ours' weighted freshness relative to it, and ours
relative to the oracle. With the shipped Open Terms Archive priors the documents change
about 0.012 times a day, so at the issue's 0.2 fetches/URL/day every policy keeps nearly
everything fresh; the sweep shows the budgets at which the choice of policy matters.

Usage::

    .venv/bin/python benchmarks/scheduler_budget_sweep.py [--pages 10000] [--days 60]
        [--budgets 0.2,0.05,0.02,0.01,0.005] [--default-prior] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--days", type=float, default=60.0)
    parser.add_argument("--budgets", default="0.2,0.05,0.02,0.01,0.005")
    parser.add_argument(
        "--default-prior",
        action="store_true",
        help="rates from the documented default prior instead of the shipped artifact "
        "(models/, as `bayesrate schedule simulate` finds it)",
    )
    parser.add_argument("--seed", default="bayesrate-schedule-simulate")
    parser.add_argument("--json", help="write all results here")
    args = parser.parse_args()

    from bayesrate.priors import PriorSet, find_artifact
    from bayesrate.scheduler.harness import compare

    found = None if args.default_prior else find_artifact()
    priors = PriorSet.load(found) if found is not None else PriorSet.default()
    print(f"priors: {found or 'default Gamma(1, 1 day)'}")
    rows = []
    print(
        f"{'budget/URL/day':>14} {'best production':>22} {'oracle/best':>11} "
        f"{'ours/best':>9} {'ours/oracle':>11} {'seconds':>7}"
    )
    for budget in (float(b) for b in args.budgets.split(",")):
        t = time.perf_counter()
        result = compare(args.pages, args.days, budget, seed=args.seed, priors=priors)
        pol = result["policies"]
        best = result["summary"]["best_production_baseline"]
        row = {
            "budget": budget,
            "best_production": best,
            "oracle_vs_best": pol["oracle"]["freshness"] / pol[best]["freshness"],
            "ours_vs_best": pol["bayesrate"]["freshness"] / pol[best]["freshness"],
            "ours_vs_oracle": pol["bayesrate"]["freshness"] / pol["oracle"]["freshness"],
            "freshness": {name: r["freshness"] for name, r in pol.items()},
            "seconds": time.perf_counter() - t,
        }
        rows.append(row)
        print(
            f"{budget:>14g} {best:>22} {row['oracle_vs_best']:>11.3f} "
            f"{row['ours_vs_best']:>9.3f} {row['ours_vs_oracle']:>11.3f} {row['seconds']:>7.1f}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"setup": vars(args), "priors": str(found), "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
