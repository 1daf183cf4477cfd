"""``bayesrate study forecast``: the command-line layer over :mod:`bayesrate.studies.forecast`.

Registered in :data:`bayesrate.studies.STUDIES`; the ``study`` command adds ``--out``,
``--seed`` and ``--fast``. Writes ``forecast.json`` (scores, design, convergence, notes),
``pages.csv`` (per page and method: predictive probability of the observed count, PIT,
P(change)) and the figures (``calibration.png``, ``pit.png``, ``log-score.png``) to
``--out``; prints the score table, or with ``--json`` exactly
``{"split", "horizon_days", "crawl_every_hours", "pages", "methods": {NAME: {...}}}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bayesrate.errors import ObservationError

DESCRIPTION = "forecast real pages: every estimator and model scored against an exact history"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bayesrate.studies.forecast import DEFAULT_HORIZON_DAYS, METHODS

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dataset", help="embedded history (tldr-pages) or crawl log as approximate history"
    )
    source.add_argument(
        "--history", metavar="FILE", help="change-history table (.csv, .csv.gz, .parquet)"
    )
    parser.add_argument("--crawl-every", type=float, default=24.0, metavar="HOURS")
    parser.add_argument(
        "--split", help="training/test split, tz-aware (default: end of history - horizon)"
    )
    parser.add_argument("--horizon-days", type=float, default=DEFAULT_HORIZON_DAYS)
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated (default {','.join(METHODS)})",
    )
    parser.add_argument("--max-pages", type=int, help="score a random subset of pages")
    parser.add_argument("--draws", type=int, help="NUTS draws per chain (default 500)")
    parser.add_argument("--tune", type=int, help="NUTS tuning steps per chain (default 500)")
    parser.add_argument("--chains", type=int, help="NUTS chains (default 4)")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")


def load_history(args: argparse.Namespace):
    """The history named by ``--dataset`` or ``--history``."""
    from bayesrate import datasets
    from bayesrate.history import read_history

    if getattr(args, "history", None):
        return read_history(args.history)
    return datasets.load_history(args.dataset)


def run(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayesrate.commands.common import print_json, progress
    from bayesrate.studies import forecast
    from bayesrate.studies.forecast_plots import FIGURES

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for name, value in (("draws", args.draws), ("tune", args.tune), ("chains", args.chains)):
        if value is not None and value < 1:
            raise ObservationError(f"--{name} must be >= 1", field=name)
    history = load_history(args)
    for note in history.notes:
        if "approximate" in note:
            progress(f"note: {note}")
    result = forecast.run(
        history,
        seed=args.seed,
        fast=args.fast,
        crawl_every_hours=args.crawl_every,
        split=args.split,
        horizon_days=args.horizon_days,
        methods=methods,
        max_pages=args.max_pages,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        progress=progress,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "forecast.json").write_text(json.dumps(result.details(), indent=2, default=str))
    _pages_table(result).to_csv(out / "pages.csv", index=False)
    for name, make in FIGURES.items():
        fig = make(result)
        fig.savefig(out / f"{name}.png", dpi=110)
        plt.close(fig)
    progress(f"forecast: wrote {out} ({result.seconds['total']:.1f} s)")
    if args.json:
        print_json(result.to_json())
        return 0
    print(
        f"{result.source}: {result.n_pages:,} pages, crawl every {result.crawl_every_hours:g} h, "
        f"split {result.split}, horizon {result.horizon_days:g} days"
    )
    print(result.table().to_string(float_format=lambda v: f"{v:.4f}"))
    ref = result.reference
    if ref is not None:
        print(
            f"hindsight reference (knows each page's realised test rate): log score "
            f"{ref.log_score:.4f}, Brier {ref.brier:.4f}, coverage90 {ref.coverage90:.3f}"
        )
    return 0


def _pages_table(result):
    import pandas as pd

    frame = pd.DataFrame(
        {
            "page": result.pages.to_numpy(),
            "domain": result.domain,
            "test_intervals": result.test_intervals,
            "detected": result.detected,
            "changed": result.changed.astype(int),
            "true_rate_per_day": result.true_rate * 24.0,
        }
    )
    for name, m in result.methods.items():
        frame[f"{name}_p_detected"] = m.prob_at_k
        frame[f"{name}_pit"] = m.pit
        frame[f"{name}_p_change"] = m.prob_change
        frame[f"{name}_rate_per_day"] = m.rate_per_hour * 24.0
    return frame
