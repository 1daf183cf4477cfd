"""How much of the hindsight oracle's margin can a planner that knows the past exactly take?

Usage::

    .venv/bin/python benchmarks/replay_bound.py --dataset tldr-pages --start 2024-01-01T00:00Z
        [--days 90] [--budgets 7,30,90] [--seed bayesrate-schedule-replay]
        [--objective periodic|freshness]

Issue #15 asks our scheduler to take at least half of the hindsight oracle's margin over the
best production policy at 1/90 fetches per page per day. The hindsight oracle plans with
each page's realised change count *in the replay window*. This study asks what the past can
give at best: a family of **past-exact planners** that see every change before the window
exactly (no censoring, no estimation error) and plan the freshness optimum (``--objective``:
``periodic``, Cho & Garcia-Molina's, the default since issue #53 — the replay fetches a page
when its planned interval has elapsed — or ``freshness``, Azar's for Poisson-timed fetches,
as issue #15 measured; the hindsight oracle plans with the same objective) with the
Gamma-smoothed rate ``(N + a) / (L + a / r̄)`` (``N`` changes in the last ``lookback`` days
of the page's life before the window, ``L`` its live hours there, ``r̄`` the population's
pooled rate over that lookback, ``a`` a pseudo-count), with a share ``--mix`` of the budget
spread uniformly (a hedge against rates that change), for every combination of
``--lookbacks``, ``--pseudo`` and ``--mix``. The best member *chosen in hindsight* (by its
freshness in the window) is an optimistic reference for any planner of per-page rates
estimated from the past: ours sees only the censored warm-up crawl, and must choose its
smoothing without seeing the window.

Prints, per budget: the best production policy (the calibrated baselines of ``bayesrate
schedule replay``), the hindsight oracle, the best past-exact planner (and the whole family),
and the share of the oracle's margin each past-exact planner takes.
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def past_counts(replay, lookback_days: float) -> tuple[np.ndarray, np.ndarray]:
    """Per page: exact changes and live hours in the ``lookback_days`` before the window."""
    from bayesrate.constants import HOURS_PER_DAY
    from bayesrate.scheduler.replay import _live_overlap

    h = replay.history
    n = replay.n
    begin = max(h.start, replay.start - lookback_days * HOURS_PER_DAY)
    pages = np.arange(n)
    live = _live_overlap(h, pages, np.full(n, -np.inf), np.full(n, np.inf), begin, replay.start)
    changes = h.count_changes(pages, np.full(n, begin), np.full(n, replay.start))
    return changes.astype(float), live


def past_exact_rates(
    replay,
    budget: float,
    lookback_days: float,
    pseudo: float,
    mix: float = 0.0,
    objective: str = "periodic",
) -> np.ndarray:
    """The freshness optimum (``objective``) with Gamma-smoothed exact past rates (fetches
    per hour), a share ``mix`` of the budget spread uniformly instead (a hedge against rates
    that change)."""
    from bayesrate.scheduler.optimal import optimal_rates
    from bayesrate.scheduler.replay import _live_overlap

    n_past, l_past = past_counts(replay, lookback_days)
    pooled = n_past.sum() / max(l_past.sum(), 1e-9)
    rate = (n_past + pseudo) / (l_past + pseudo / max(pooled, 1e-12))
    h = replay.history
    n = replay.n
    live = _live_overlap(
        h, np.arange(n), np.full(n, -np.inf), np.full(n, np.inf), replay.start, replay.end
    )
    total = replay.budget_fetches(budget)
    q = optimal_rates(replay.weights * live, rate * live, (1.0 - mix) * total, objective=objective)
    q = q + mix * total * live / max(live.sum(), 1e-9)
    return np.divide(q, live, out=np.zeros(n), where=live > 0)


def main() -> None:
    from bayesrate.constants import HOURS_PER_DAY
    from bayesrate.history import hours_of
    from bayesrate.io.history import load_history
    from bayesrate.priors import GammaPrior, PriorSet
    from bayesrate.scheduler import replay as R
    from bayesrate.scheduler.baselines import BASELINES
    from bayesrate.seeds import rng_from

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="tldr-pages")
    parser.add_argument("--start", required=True)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--budgets", default="7,30,90", help="1/B fetches per page per day")
    parser.add_argument("--lookbacks", default="90,365,100000", help="days before the window")
    parser.add_argument("--pseudo", default="0.01,0.1,0.5,2")
    parser.add_argument("--mix", default="0,0.3", help="shares of the budget spread uniformly")
    parser.add_argument("--seed", default="bayesrate-schedule-replay")
    parser.add_argument(
        "--objective",
        choices=("periodic", "freshness"),
        default="periodic",
        help="what the past-exact planners and the oracle optimise: periodic fetches (Cho & "
        "Garcia-Molina, the replay's) or Poisson-timed ones (Azar, as in issue #15)",
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    history = load_history(dataset=args.dataset)
    start = hours_of(args.start, "start")
    warm = R.warmup_crawl(history, start, 24.0, args.seed)
    replay = R.prepare(history, warm, start=start, days=args.days)
    dummy = PriorSet(GammaPrior(1.0, 1.0 / HOURS_PER_DAY))
    lookbacks = [float(x) for x in args.lookbacks.split(",")]
    pseudos = [float(x) for x in args.pseudo.split(",")]
    mixes = [float(x) for x in args.mix.split(",")]
    out = {"dataset": args.dataset, "start": args.start, "days": args.days,
           "objective": args.objective, "budgets": {}}  # fmt: skip
    for b in [float(x) for x in args.budgets.split(",")]:
        budget = 1.0 / b
        policies = []
        for name in BASELINES:
            scale, _ = R.calibrate_scale(replay, name, budget, args.seed)
            policies.append(R.IntervalReplay(name, replay, scale, rng_from(f"{args.seed}-{name}")))
        oracle = R.PlannedReplay(
            "oracle-hindsight", replay, dummy, budget, rng_from(f"{args.seed}-oracle"),
            rates=R.hindsight_rates(replay, budget, objective=args.objective),
        )  # fmt: skip
        policies.append(oracle)
        family = {}
        for lb in lookbacks:
            for a in pseudos:
                for mix in mixes:
                    name = f"past-exact lookback={lb:g}d a={a:g} uniform={mix:g}"
                    family[name] = (lb, a, mix)
                    policies.append(
                        R.PlannedReplay(
                            name, replay, dummy, budget, rng_from(f"{args.seed}-past"),
                            rates=past_exact_rates(
                                replay, budget, lb, a, mix, objective=args.objective
                            ),
                        )
                    )  # fmt: skip
        fetches, _ = R.run_policies(replay, policies, budget)
        fresh = {p.name: R.score_fetches(replay, *fetches[p.name])["freshness"] for p in policies}
        best_prod = max(BASELINES, key=fresh.__getitem__)
        margin = fresh["oracle-hindsight"] - fresh[best_prod]
        share = {k: (fresh[k] - fresh[best_prod]) / margin for k in family}
        best_past = max(family, key=fresh.__getitem__)
        print(
            f"{args.dataset} from {args.start}, 1/{b:g} ({args.objective}): best production "
            f"{best_prod} "
            f"{fresh[best_prod]:.4f}; oracle {fresh['oracle-hindsight']:.4f} "
            f"(x{fresh['oracle-hindsight'] / fresh[best_prod]:.4f}); best past-exact "
            f"[{best_past}] {fresh[best_past]:.4f} (x{fresh[best_past] / fresh[best_prod]:.4f}), "
            f"share of the oracle's margin {share[best_past]:+.3f}",
            flush=True,
        )
        for k in family:
            print(f"    {k}: {fresh[k]:.4f} share {share[k]:+.3f}", flush=True)
        out["budgets"][f"1/{b:g}"] = {
            "freshness": fresh,
            "best_production": best_prod,
            "best_past_exact": best_past,
            "share_of_margin": share,
        }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
