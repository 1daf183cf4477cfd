"""Level oracle of a saved forecast study: how much of each method's score is the year's level.

``bayesrate study forecast`` reports it for the methods it runs; this script computes it
for a study saved before it did (or for several saved studies of one split): it re-crawls
the study's design (same dataset, split, horizon, crawl, seed and page subset, checked
against the saved ``pages.csv``) and scores every ``*_rate_per_day`` column of
``pages.csv`` times the best single factor for the test window
(:func:`bayesrate.studies.level.level_oracle`), beside one rate for every page; and the
best *mixture* over a level shared by the pages and an upper bound on it
(:func:`bayesrate.studies.level.level_mixture_bound`): no predictive that is the
method's rates times a random level scores above the bound::

    .venv/bin/python scripts/level_oracle.py --dataset tldr-pages DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.io.history import load_history
from bayesrate.studies import forecast, level


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--seed", default="bayesrate-forecast")
    parser.add_argument("studies", nargs="+", type=Path, help="output directories of one split")
    args = parser.parse_args(argv)
    saved = [json.loads((s / "forecast.json").read_text()) for s in args.studies]
    design_keys = ("split", "horizon_days", "crawl_every_hours", "pages")
    if any(tuple(s[k] for k in design_keys) != tuple(saved[0][k] for k in design_keys)
           for s in saved):  # fmt: skip
        raise SystemExit("the studies differ in split, horizon, crawl or pages")
    first = saved[0]
    history = load_history(dataset=args.dataset)
    d = forecast.design(
        history,
        crawl_every_hours=first["crawl_every_hours"],
        split=forecast.hours_of(first["split"], "split"),
        horizon_hours=first["horizon_days"] * HOURS_PER_DAY,
        seed=args.seed,
        max_pages=first["pages"],
    )
    groups = forecast.length_groups(d)
    k = d.detected
    rows = []
    for study, summary in zip(args.studies, saved, strict=True):
        pages = pd.read_csv(study / "pages.csv")
        if not np.array_equal(pages["page"].astype(str), d.train.pages.index.astype(str)):
            raise SystemExit(f"{study}: its pages are not the re-crawled design's")
        if not np.array_equal(pages["detected"], k):
            raise SystemExit(f"{study}: its detections are not the re-crawled design's")
        for column in [c for c in pages if c.endswith("_rate_per_day")]:
            name = column.removesuffix("_rate_per_day")
            if name == "true":
                continue
            rate = pages[column].to_numpy() / HOURS_PER_DAY
            factor, level_score = level.level_oracle(rate, groups.page, groups.count, groups.key, k)
            expected = groups.count @ -np.expm1(-rate[groups.page] * groups.key)
            mixture, bound = level.level_mixture_bound(
                rate, groups.page, groups.count, groups.key, k, factor
            )
            rows.append({
                "study": study.name,
                "method": name,
                "log_score": summary["methods"][name]["log_score"],
                "plug_in_expected": expected,
                "realised": int(k.sum()),
                "level_factor": factor,
                "level_log_score": level_score,
                "level_mixture": mixture,
                "mixture_bound": bound,
            })  # fmt: skip
    rate, constant = level.level_oracle(
        np.ones(d.n_pages), groups.page, groups.count, groups.key, k
    )
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    mixture, bound = level.level_mixture_bound(
        np.ones(d.n_pages), groups.page, groups.count, groups.key, k, rate
    )
    print(
        f"one rate for every page ({rate * HOURS_PER_DAY:.5f} per day): {constant:.4f}; "
        f"best mixture over that rate: {mixture:.4f} (bound {bound:.4f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
