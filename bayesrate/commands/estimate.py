"""``bayesrate estimate``: per-page change rates from an observation table.

Writes one row per page: ``page, n_visits, n_changes, rate_per_day`` and, where the
method has one, ``lower_per_day, upper_per_day``. Methods (``docs/estimators.md``):

- batch: ``naive``, ``moment``, ``cho``, ``mle`` (profile-likelihood interval), ``mm``;
- online, replayed in time order: ``lln``, ``sa``, ``sam`` (crawl rate ``p`` = each page's
  observed visits per hour unless ``--crawl-rate`` is given), ``gamma-adf``. The paper's
  LLN, SA and SAM assume Poisson visits; on a regular grid of interval ``τ`` they converge
  to ``p(e^{λτ} − 1)``, so pages visited on a regular grid get the grid-consistent rate
  ``log(1 + x/p)/τ`` (column ``grid_consistent``); ``--online-raw`` reports the paper's
  raw estimate instead;
- Gamma posteriors: ``gamma-exposure`` (``Gamma(α + c, β + T)``), ``gamma-adf`` and
  ``posterior-grid`` (exact posterior on a log-rate grid) with equal-tailed credible
  intervals. The prior's α is in pseudo-changes, β in pseudo-exposure **days**.
"""

from __future__ import annotations

import argparse
import sys

from bayesrate.commands.common import (
    add_input_options,
    check_output_file,
    load_observations,
    positive_float,
    positive_fraction,
    progress,
)
from bayesrate.estimators.estimate import METHODS, estimate


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "estimate",
        help="per-page change rates (per day) with a classical, online or Gamma estimator",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_options(parser)
    parser.add_argument("--method", required=True, choices=METHODS, help="estimator")
    parser.add_argument(
        "--prior-alpha", type=positive_float, help="Gamma prior shape, pseudo-changes (default 1)"
    )
    parser.add_argument(
        "--prior-beta",
        type=positive_float,
        help="Gamma prior rate, pseudo-exposure in days (default 1)",
    )
    parser.add_argument("--level", type=float, default=0.95, help="interval coverage")
    parser.add_argument(
        "--mle-interval",
        choices=("profile", "fisher"),
        default="profile",
        help="interval for --method mle",
    )
    parser.add_argument(
        "--crawl-rate",
        type=positive_fraction,
        help="for lln/sa/sam: known crawl rate p in visits per day, a number or a fraction "
        "such as 1/7 (default: each page's own)",
    )
    parser.add_argument(
        "--online-raw",
        action="store_true",
        help="for lln/sa/sam: the paper's raw estimate even on a regular visit grid",
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="output file, format by its name: .csv, .csv.gz, .tsv, .parquet or .json "
        "(default: CSV on stdout)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bayesrate.errors import ObservationError

    if args.out:  # before any work
        from bayesrate.io.table import output_format

        output_format(args.out)
        check_output_file(args.out)
    if not 0 < args.level < 1:
        raise ObservationError(f"--level must be in (0, 1), got {args.level}", field="level")
    progress(f"loading {args.input or args.dataset or 'ota-contrib'} ...")
    obs = load_observations(args)
    progress(f"{obs.n_pages:,} pages, {obs.n_visits:,} visits; estimating with {args.method}")
    try:
        frame = estimate(
            obs,
            args.method,
            alpha=args.prior_alpha,
            beta_days=args.prior_beta,
            level=args.level,
            mle_interval=args.mle_interval,
            crawl_rate_per_day=args.crawl_rate,
            online_raw=args.online_raw,
        )
    except ValueError as exc:
        if isinstance(exc, ObservationError):
            raise
        raise ObservationError(str(exc)) from exc
    if "grid_consistent" in frame and frame["grid_consistent"].any():
        progress(
            f"{int(frame['grid_consistent'].sum()):,} pages are on a regular visit grid: "
            f"reported the grid-consistent rate log(1 + x/p)/τ of {args.method} "
            "(--online-raw for the paper's raw estimate)"
        )
    if not args.out:
        frame.to_csv(sys.stdout, index=False)
        return 0
    from bayesrate.io.table import write_table

    write_table(frame, args.out)
    progress(f"wrote {len(frame):,} rows to {args.out}")
    return 0
