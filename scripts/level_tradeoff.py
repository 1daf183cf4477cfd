"""What one level prior costs across held-out years: a method's predictive times a random
level shared by the pages, scored on several splits of one history at once.

For each split the method is fitted exactly as ``bayesrate study forecast`` fits it (same
design, seed and sampler: its own scores are reproduced), then its posterior predictive is
tabulated with every integrated rate times each factor of
:data:`bayesrate.studies.level.LEVEL_GRID` (:func:`bayesrate.studies.level.level_table`).
Every prior of :func:`bayesrate.studies.level.level_priors` (point levels, log-normals,
two-level mixtures) is then scored on every split (:func:`~bayesrate.studies.level.level_tradeoff`).
A model's level prior cannot know which year comes, so the question is whether any one
prior brings every split's coverage90 into [0.85, 0.95] and still scores at least the
method's own log score on each. With two or more splits it also scores each split with
the prior that did best on the splits before it (:func:`~bayesrate.studies.level.chosen_on_past`),
a level prior learned without the year's outcomes::

    .venv/bin/python scripts/level_tradeoff.py --dataset tldr-pages \\
        --splits 2024-01-01T00:00Z,2025-01-01T00:00Z --out tradeoff.csv
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.history import hours_of
from bayesrate.io.history import load_history
from bayesrate.studies import forecast, level


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", required=True, help="comma-separated split timestamps")
    parser.add_argument("--method", default="hierarchical")
    parser.add_argument("--model-config", default=None, help="JSON overrides of the model")
    parser.add_argument("--horizon-days", type=float, default=365.0)
    parser.add_argument("--max-pages", type=int, default=300)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--predictive-draws", type=int, default=500)
    parser.add_argument("--seed", default="bayesrate-forecast")
    parser.add_argument("--out", type=Path, default=None, help="CSV of every prior's scores")
    args = parser.parse_args(argv)
    history = load_history(dataset=args.dataset)
    sampler = forecast.study_sampler(args.draws, args.tune, args.chains, args.seed, False)
    config = json.loads(args.model_config) if args.model_config else None
    tables, noise, own = {}, {}, {}
    splits = args.splits.split(",")
    years = [split[:4] for split in splits]
    labels = years if len(set(years)) == len(years) else [split[:10] for split in splits]
    for split, label in zip(splits, labels, strict=True):
        d = forecast.design(
            history,
            crawl_every_hours=24.0,
            split=hours_of(split, "split"),
            horizon_hours=args.horizon_days * HOURS_PER_DAY,
            seed=args.seed,
            max_pages=args.max_pages,
        )
        pred, groups, _ = forecast.method_prediction(
            args.method,
            d,
            forecast.length_groups(d),
            sampler,
            args.predictive_draws,
            f"{args.seed}-{args.method}",
            print,
            config,
            walks="sampled",  # the level table scales each draw's integrated rates
        )
        noise[label] = forecast.pit_noise_of(d, args.seed)
        tables[label] = level.level_table(pred, groups, d.detected)
        one = np.isclose(tables[label].factors, 1.0).astype(float)
        score, coverage = tables[label].scores(one, noise[label])
        value, bound = tables[label].mixture_bound()
        own[label] = float(score)
        print(
            f"{label}: {d.n_pages} pages, {int(d.detected.sum())} detections; "
            f"{args.method} log score {score:.4f}, coverage90 {coverage:.3f}; best level "
            f"mixture knowing the outcomes {value:.4f} (bound {bound:.4f})"
        )
    table = level.level_tradeoff(tables, noise)
    gain = np.column_stack([table[f"log_score[{w}]"] - own[w] for w in tables])
    table["worst_gain"] = gain.min(axis=1)
    table = table.sort_values("worst_gain", ascending=False)
    print(f"{len(table):,} level priors; the five best in every split's worst case:")
    _print_top(table)
    inside = table[table.in_target]
    print(f"{len(inside):,} priors bring every split's coverage90 into [0.85, 0.95]", end="")
    if len(inside):
        print("; the five best in every split's worst case:")
        _print_top(inside)
        for w in tables:
            best = inside[f"log_score[{w}]"].max()
            print(f"  {w}: best log score among them {best:.4f} ({best - own[w]:+.4f})")
    else:
        print()
    if len(tables) > 1:
        print("each split with the prior that scored best on the splits before it:")
        for row in level.chosen_on_past(table, list(tables)).itertuples():
            prior = table.loc[row.prior]
            print(
                f"  {row.window}: {_describe(prior)}: log score {row.log_score:.4f} "
                f"({row.log_score - own[row.window]:+.4f} on {args.method}), coverage90 "
                f"{row.coverage90:.3f}"
            )
    if args.out is not None:
        table.to_csv(args.out, index=False)
    return 0


def _print_top(priors) -> None:
    """The first five rows of a table of priors (sorted), without ``in_target``."""
    top = priors.head(5).drop(columns="in_target")
    print(top.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


def _describe(prior) -> str:
    if prior.family == "lognormal":
        return f"log-normal level, median {prior['median']:.3f}, log-sd {prior['sd']:.2f}"
    if prior.family == "point":
        return f"level {prior.low:.3f}"
    return f"levels {prior.low:.3f} / {prior.high:.3f} (upper {prior.upper_weight:.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
