"""``bayesrate schedule``: operate a revisit scheduler over a state file or database.

Subcommands: ``init``, ``observe``, ``due``, ``plan``, ``stats``, ``reset-url``,
``lease``, ``report``, ``crawl-delay``, ``simulate``, ``replay``
(:mod:`bayesrate.commands.schedule_replay`).

The state is an SQLite file, or a PostgreSQL database named by its URL
(``postgresql://user@host:port/db``) for a crawler fleet: every command that takes a file
takes a URL. ``lease``/``report``/``crawl-delay`` (the fleet's frontier,
``docs/scheduler.md`` "Fleet") need a database.

Times: a plain number is **hours since the Unix epoch** (UTC); an ISO 8601 timestamp
(``2025-01-06T09:30:00Z``) is converted (a timestamp without offset is read as UTC). In
``observe`` CSV files the ``time`` column follows the same rule (``--time-unit`` rescales
numeric times). Fetch times must be plausible dates (1990 to 2100) and no later than now
plus one hour of clock skew; ``reset-url`` corrects URLs whose state is wrong. Rates are
printed per day. Several processes may run ``observe``/``plan`` on one state file at once:
every acknowledged batch is kept (``docs/reliability.md``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bayesrate.commands.common import (
    OBJECTIVE_CHOICES,
    OBJECTIVE_HELP,
    UTC_TIME_HELP,
    check_output_file,
    non_negative_fraction,
    non_negative_int,
    positive_float,
    positive_fraction,
    positive_int,
    print_json,
    progress,
    unit_fraction,
    utc_time,
)
from bayesrate.constants import DEFAULT_TIME_UNIT, HOURS_PER_DAY, TIME_UNITS
from bayesrate.errors import ObservationError

STATE_HELP = "SQLite state file or postgresql:// URL"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "schedule",
        help="revisit scheduler: init/observe/due/plan/stats over a state file or database; "
        "lease/report for a fleet; simulate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ops = parser.add_subparsers(dest="op", metavar="OP")

    p = ops.add_parser("init", help="create a state file")
    p.add_argument("state", help=STATE_HELP + " to create")
    p.add_argument(
        "--priors",
        metavar="PATH",
        help="priors.json (or its directory); default: newest under ./models, "
        "else the documented default Gamma(1, 1 day)",
    )
    p.add_argument(
        "--update",
        choices=("adf", "exposure"),
        default="adf",
        help="rate update: censoring-exact (adf, default) or exposure (seed)",
    )
    p.add_argument("--min-interval", type=float, default=1.0, help="hours (default 1)")
    p.add_argument(
        "--max-interval",
        type=float,
        default=30 * HOURS_PER_DAY,
        help="revisit floor in hours (default 720)",
    )
    p.add_argument("--factor", type=float, default=1.0, help="t_next = t + factor/λ")
    p.add_argument(
        "--politeness-limit",
        type=int,
        default=None,
        help="max fetches per host per window (default: none)",
    )
    p.add_argument("--politeness-window", type=float, default=1.0, help="hours (default 1)")
    p.add_argument("--thompson", action="store_true", help="decide with posterior draws")
    p.add_argument(
        "--plan-quantile",
        type=float,
        default=None,
        help="plan from this posterior quantile (point rates) instead of the expected "
        "freshness gain over each posterior (the default)",
    )
    p.add_argument(
        "--posterior",
        choices=("gamma", "grid"),
        default="gamma",
        help="per-URL posterior: gamma (Gamma-ADF, default) or grid (log-rate grid)",
    )
    p.set_defaults(func=_init)

    p = ops.add_parser("observe", help="apply fetch results from a CSV")
    p.add_argument("state", help=STATE_HELP)
    p.add_argument("csv", help="columns url,time,changed[,host,weight]; host needed for new URLs")
    p.add_argument(
        "--time-unit",
        default=DEFAULT_TIME_UNIT,
        choices=sorted(TIME_UNITS),
        help="unit of numeric times (default: hours since the epoch)",
    )
    p.add_argument(
        "--now",
        type=utc_time,
        help="the scheduler's clock for the future-time check, no later than the wall clock "
        f"plus 1 h: hours since the epoch, or {UTC_TIME_HELP} (default: current time)",
    )
    p.set_defaults(func=_observe)

    p = ops.add_parser("due", help="the K most valuable URLs to fetch now")
    p.add_argument("state", help=STATE_HELP)
    p.add_argument(
        "--now",
        type=utc_time,
        help=f"hours since the epoch, or {UTC_TIME_HELP} (default: current time)",
    )
    p.add_argument("--k", type=non_negative_int, default=10)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_due)

    p = ops.add_parser("plan", help="store budget-optimal fetch rates (used by 'due')")
    p.add_argument("state", help=STATE_HELP)
    p.add_argument(
        "--budget",
        type=non_negative_fraction,
        required=True,
        help="total fetches per day (a number or a fraction such as 1/7)",
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVE_CHOICES,
        default="freshness",
        help=OBJECTIVE_HELP,
    )
    p.add_argument(
        "--hedge",
        type=unit_fraction,
        default=0.0,
        metavar="SHARE",
        help="share of the budget spread uniformly over the URLs, the rest planned (a hedge "
        "against rates the posteriors get wrong; default 0, 1 = uniform)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_plan)

    p = ops.add_parser("stats", help="summary of a state file")
    p.add_argument("state", help=STATE_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_stats)

    p = ops.add_parser(
        "reset-url",
        help="forget URLs' fetch history (e.g. after a wrong fetch time); next fetch = baseline",
    )
    p.add_argument("state", help=STATE_HELP)
    p.add_argument("urls", nargs="+", metavar="URL")
    p.add_argument(
        "--keep-rate",
        action="store_true",
        help="keep the learned rate posterior (default: back to the host's prior)",
    )
    p.set_defaults(func=_reset_url)

    p = ops.add_parser("lease", help="lease due URLs to a fleet worker (database state)")
    p.add_argument("state", help="postgresql:// URL")
    p.add_argument("--worker", required=True, help="the worker's name (recorded with each lease)")
    p.add_argument("-n", type=non_negative_int, default=10, help="URLs to lease (default 10)")
    p.add_argument(
        "--hours", type=positive_float, default=None, help="lease duration (default 1/6: 10 min)"
    )
    p.add_argument(
        "--now", type=utc_time, help=f"hours since the epoch, or {UTC_TIME_HELP} (default: now)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lease)

    p = ops.add_parser("report", help="report leased fetches (idempotent per fetch id)")
    p.add_argument("state", help="postgresql:// URL")
    p.add_argument("csv", help="columns fetch_id,time,changed (time as for observe)")
    p.add_argument(
        "--now",
        type=utc_time,
        help=f"the clock for the future-time check: hours since the epoch, or {UTC_TIME_HELP}",
    )
    p.set_defaults(func=_report)

    p = ops.add_parser("crawl-delay", help="set a host's crawl delay for the fleet")
    p.add_argument("state", help="postgresql:// URL")
    p.add_argument("host")
    p.add_argument(
        "hours",
        help="hours between two fetches of the host, or 'default' (the state's politeness "
        "limit: window / limit)",
    )
    p.set_defaults(func=_crawl_delay)

    p = ops.add_parser("simulate", help="compare policies on a synthetic web at equal budget")
    p.add_argument("--pages", type=positive_int, default=10_000)
    p.add_argument("--days", type=positive_float, default=60.0)
    p.add_argument(
        "--budget",
        type=positive_fraction,
        default=0.2,
        help="fetches per URL per day (e.g. 0.2 or 1/7)",
    )
    p.add_argument("--seed", default="bayesrate-schedule-simulate")
    p.add_argument("--priors", metavar="PATH", help="priors.json (default: as for init)")
    p.add_argument("--tick", type=positive_float, default=0.5, help="fetch tick in hours")
    p.add_argument("--thompson", action="store_true", help="ours plans with posterior draws")
    p.add_argument(
        "--plan-quantile",
        default=None,
        help="ours plans from this posterior quantile, or 'mean' (point rates), instead of "
        "the expected freshness gain over each posterior (the default)",
    )
    p.add_argument(
        "--objective",
        choices=("freshness", "harmonic"),
        default="freshness",
        help="what ours and the oracle optimise (Azar or Kolobov)",
    )
    p.add_argument(
        "--update",
        choices=("adf", "exposure"),
        default="adf",
        help="ours' rate update (default adf; exposure = seed PageState update)",
    )
    p.add_argument(
        "--equal-weights",
        action="store_true",
        help="all pages weight 1 (default: Pareto(1.5) importance)",
    )
    p.add_argument(
        "--posterior",
        choices=("gamma", "grid"),
        default="gamma",
        help="ours' per-URL posterior: gamma (Gamma-ADF, default) or grid (log-rate grid)",
    )
    p.add_argument("--plot", metavar="FILE", help="PNG of weighted freshness over time")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_simulate)

    from bayesrate.commands import schedule_replay

    schedule_replay.register(ops)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


# ---------------------------------------------------------------------- helpers
def parse_time(value: Any, *, field: str = "now") -> float:
    """Hours since the epoch from a number or an ISO timestamp with an offset (``Z``, ``+02:00``).

    A timestamp without an offset is refused, as everywhere in the package.

    The result must be a plausible date (1990 to 2100), else :class:`ObservationError`
    naming the unit.
    """
    from bayesrate.scheduler.wallclock import check_plausible

    try:
        hours = float(value)
    except (TypeError, ValueError):
        hours = _one_time(value)
        if hours != hours:
            raise ObservationError(
                f"cannot read time {value!r} (hours since the epoch or ISO 8601)", field=field
            ) from None
    return float(check_plausible(hours, field=field)[0])


def _times(column: Any, unit: str) -> Any:
    """Hours since the epoch of a time column: numbers in ``unit``, or timestamps with an
    offset (parsed, validated and reported by row exactly as for observations)."""
    from bayesrate.observations import times_to_hours

    return times_to_hours(column.reset_index(drop=True), unit, None)[0]


def _one_time(value: Any) -> float:
    """Hours since the epoch of one ISO timestamp, NaN if it cannot be read.

    Raises
    ------
    ObservationError
        For a timestamp without an offset.
    """
    import pandas as pd

    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        return float("nan")
    if ts is pd.NaT:
        return float("nan")
    if ts.tzinfo is None:
        raise ObservationError(
            f"timestamp {value!r} has no offset; give one (e.g. '2024-01-01T00:00Z')",
            field="time",
        )
    return ts.tz_convert("UTC").timestamp() / 3600.0


def read_fetches(path: str, time_unit: str = DEFAULT_TIME_UNIT) -> dict[str, Any]:
    """Read an ``observe`` file: ``url,time,changed[,host,weight]`` (CSV or Parquet).

    ``url`` and ``host`` are read as strings exactly as written (``"NA"`` is a host); only
    empty cells are missing: an empty ``url`` or ``changed`` is an error naming the rows,
    an empty ``host`` means "not given" (fine for URLs already in the state).

    Returns a dict with ``urls``, ``times`` (hours since the epoch), ``changed``, ``hosts``
    (``None`` entries for empty cells; ``None`` without the column) and ``weights``.
    """
    import numpy as np
    import pandas as pd

    from bayesrate.io.table import load_table

    df = load_table(path, id_columns=("url", "host"))
    missing = [c for c in ("url", "time", "changed") if c not in df.columns]
    if missing:
        raise ObservationError(
            f"{path} lacks columns {missing}; have {list(df.columns)}", field=",".join(missing)
        )
    if len(df) == 0:
        raise ObservationError(f"{path} has a header but no fetches")
    for col in ("url", "changed"):
        bad = np.flatnonzero(df[col].isna().to_numpy())
        if len(bad):
            raise ObservationError(f"empty {col!r}", field=col, rows=bad)
    flags = pd.to_numeric(df["changed"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = np.flatnonzero(~np.isin(flags, (0.0, 1.0)))
    if len(bad):
        raise ObservationError("'changed' must be 0 or 1", field="changed", rows=bad)
    hosts = None
    if "host" in df.columns:
        hosts = [None if pd.isna(h) else str(h) for h in df["host"].to_numpy(dtype=object)]
    weights = None
    if "weight" in df.columns:
        weights = pd.to_numeric(df["weight"], errors="coerce").to_numpy(
            dtype=float, na_value=np.nan
        )
    return {
        "urls": [str(u) for u in df["url"].to_numpy(dtype=object)],
        "times": _times(df["time"], time_unit),
        "changed": flags.astype(np.int8),
        "hosts": hosts,
        "weights": weights,
    }


def _iso(hours: float) -> str:
    import math

    from bayesrate.clock import to_timestamp

    if hours is None or not math.isfinite(hours):
        return "-"
    return to_timestamp(hours).isoformat()


# ---------------------------------------------------------------------- handlers
def _init(args: argparse.Namespace) -> int:
    from bayesrate.priors import resolve_priors
    from bayesrate.scheduler.location import create_store
    from bayesrate.scheduler.state import SchedulerConfig

    priors, where = resolve_priors(args.priors)
    config = SchedulerConfig(
        update=args.update,
        min_interval=args.min_interval,
        max_interval=args.max_interval,
        factor=args.factor,
        politeness_limit=args.politeness_limit,
        politeness_window=args.politeness_window,
        thompson=args.thompson,
        plan_quantile=0.3 if args.plan_quantile is None else args.plan_quantile,
        plan_expected=args.plan_quantile is None,
        posterior=args.posterior,
    )
    create_store(args.state, priors, config).close()
    print(
        f"created {args.state} (priors: {where}; {len(priors.domains)} domains; "
        f"hour-of-week: {'yes' if priors.hour_of_week is not None else 'no'})"
    )
    return 0


def _observe(args: argparse.Namespace) -> int:
    from bayesrate.scheduler.location import open_store

    now = parse_time(args.now) if args.now is not None else None
    fetches = read_fetches(args.csv, args.time_unit)
    with open_store(args.state) as store:
        done = store.observe(**fetches, now=now, time_unit=args.time_unit)
    print(
        f"observed {done.rows} fetches ({done.new_urls} new URLs; {done.urls} URLs in {args.state})"
    )
    return 0


def _reset_url(args: argparse.Namespace) -> int:
    from bayesrate.scheduler.location import open_store

    with open_store(args.state) as store:
        done = store.reset(args.urls, keep_rate=args.keep_rate)
    kept = "kept their rate posterior" if args.keep_rate else "back to their host's prior"
    print(f"reset {done.rows} URLs in {args.state} (next fetch is a baseline; {kept})")
    return 0


def _due(args: argparse.Namespace) -> int:
    import time

    from bayesrate.scheduler import decide
    from bayesrate.scheduler.location import open_store

    now = parse_time(args.now) if args.now is not None else time.time() / 3600.0
    with open_store(args.state, readonly=True) as store:
        st = store.state
        rows = decide.due(st, now, args.k)
        score = decide.priority(st, now)
        lam = decide.decision_rates(st) * HOURS_PER_DAY
        items = [
            {
                "url": st.urls[i],
                "host": st.hosts[st.host[i]],
                "priority": float(score[i]),
                "urgent": bool(score[i] == decide.URGENT),
                "rate_per_day": float(lam[i]),
                "last_fetch": _iso(float(st.last_fetch[i])),
                "weight": float(st.weight[i]),
            }
            for i in rows
        ]
    if args.json:
        print_json({"now": now, "now_iso": _iso(now), "due": items})
    else:
        print(f"# now {_iso(now)} ({now:.3f} h); {len(items)} URLs")
        for it in items:
            print(
                f"{it['url']}\t{it['host']}\tpriority={it['priority']:.4g}\t"
                f"rate/day={it['rate_per_day']:.3g}\tlast={it['last_fetch']}"
            )
    return 0


def _plan(args: argparse.Namespace) -> int:
    import math

    from bayesrate.scheduler import decide
    from bayesrate.scheduler.location import open_store
    from bayesrate.scheduler.optimal import OBJECTIVE_DESCRIPTIONS, objective_name

    if not (math.isfinite(args.budget) and args.budget >= 0):
        raise ObservationError(
            f"budget must be a finite number >= 0, got {args.budget}", field="budget"
        )
    with open_store(args.state) as store:
        objective = objective_name(args.objective)
        p = decide.plan(
            store.state, args.budget / HOURS_PER_DAY, objective=objective, hedge=args.hedge
        )
        store.save_targets()
        out = {
            "objective": objective,
            "objective_solved": OBJECTIVE_DESCRIPTIONS[objective],
            "urls": int(store.state.n),
            "fetches_per_day": float(p.sum() * HOURS_PER_DAY),
            "hedge": args.hedge,
            "never_fetched_except_floor": int((p <= p.min() * (1 + 1e-9)).sum()) if len(p) else 0,
        }
    if args.json:
        print_json(out)
    else:
        print(
            f"planned {out['fetches_per_day']:.4g} fetches/day over {out['urls']} URLs, "
            f"maximising {out['objective_solved']}"
            + (f"; {args.hedge:g} of the budget spread uniformly" if args.hedge else "")
        )
    return 0


def _stats(args: argparse.Namespace) -> int:
    from bayesrate.scheduler.location import open_store

    with open_store(args.state, readonly=True) as store:
        summary = store.state.summary()
        summary["state_file"] = str(args.state)
        summary["config"] = store.state.config.to_dict()
    if args.json:
        print_json(summary)
    else:
        for key, value in summary.items():
            print(f"{key}: {value}")
    return 0


def _frontier(location: str) -> Any:
    """The fleet's frontier at a database URL (an error naming the problem for a file)."""
    from bayesrate.errors import ArtifactError
    from bayesrate.scheduler.location import is_database

    if not is_database(location):
        raise ArtifactError(
            f"{location} is not a database: leases need a PostgreSQL state "
            "('bayesrate schedule init postgresql://...')"
        )
    from bayesrate.scheduler.frontier import Frontier

    return Frontier.open(location)


def _lease(args: argparse.Namespace) -> int:
    now = parse_time(args.now) if args.now is not None else None
    with _frontier(args.state) as frontier:
        leases = frontier.lease(args.worker, args.n, now=now, hours=args.hours)
    if args.json:
        print_json({"leases": [vars(x) | {"expires_iso": _iso(x.expires)} for x in leases]})
    else:
        print("fetch_id\turl\thost\texpires")
        for x in leases:
            print(f"{x.fetch_id}\t{x.url}\t{x.host}\t{_iso(x.expires)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from bayesrate.io.table import load_table

    now = parse_time(args.now) if args.now is not None else None
    df = load_table(args.csv)
    missing = [c for c in ("fetch_id", "time", "changed") if c not in df.columns]
    if missing:
        raise ObservationError(
            f"{args.csv} lacks columns {missing}; have {list(df.columns)}", field=",".join(missing)
        )
    ids = pd.to_numeric(df["fetch_id"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(ids) | (ids != np.round(ids)))
    if len(bad):
        raise ObservationError("'fetch_id' must be an integer", field="fetch_id", rows=bad)
    flags = pd.to_numeric(df["changed"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    times = _times(df["time"], DEFAULT_TIME_UNIT)
    results = list(zip(ids.astype(np.int64).tolist(), times.tolist(), flags.tolist(), strict=True))
    with _frontier(args.state) as frontier:
        done = frontier.report(results, now=now)
    print(
        f"reported {len(results)} fetches: {done.applied} applied, {done.duplicates} already "
        f"reported, {done.stale} stale (older than their URL's last fetch)"
    )
    return 0


def _crawl_delay(args: argparse.Namespace) -> int:
    hours = None if args.hours == "default" else args.hours
    with _frontier(args.state) as frontier:
        frontier.set_crawl_delay(args.host, hours)
    print(f"crawl delay of {args.host}: {args.hours} {'' if hours is None else 'hours'}".strip())
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from bayesrate.priors import resolve_priors
    from bayesrate.scheduler.harness import compare

    if args.plot:  # before any work
        from bayesrate.plots import check_image_path

        check_image_path(args.plot)
        check_output_file(args.plot, what="--plot")
    priors, where = resolve_priors(args.priors)
    progress(f"priors: {where}")
    try:
        point = args.plan_quantile is not None
        quantile = float(args.plan_quantile) if point and args.plan_quantile != "mean" else None
    except ValueError as exc:
        raise ObservationError(
            "--plan-quantile must be a number or 'mean'", field="plan_quantile"
        ) from exc
    result = compare(
        args.pages,
        args.days,
        args.budget,
        args.seed,
        priors,
        dt=args.tick,
        thompson=args.thompson,
        progress=progress,
        quantile=quantile,
        pareto_shape=None if args.equal_weights else 1.5,
        update=args.update,
        posterior=args.posterior,
        plan_expected=not point,
        objective=args.objective,
    )
    if args.plot:
        from bayesrate import plots

        plots.save(plots.freshness_over_time(result).figure, args.plot, dpi=120)
        progress(f"plot written to {args.plot}")
    if args.json:
        slim = {
            "policies": {
                name: {k: r[k] for k in ("freshness", "harmonic_staleness", "fetches")}
                for name, r in result["policies"].items()
            },
            "setup": result["setup"],
            "summary": result["summary"],
        }
        print_json(slim)
        return 0
    s = result["setup"]
    print(
        f"{s['pages']} URLs x {s['days']:g} days, budget {s['budget_per_url_per_day']} "
        f"fetches/URL/day, {s['hosts']} hosts ({s['seconds']} s)"
    )
    print(f"{'policy':24s} {'freshness':>10s} {'harmonic':>10s} {'fetches':>9s} {'vs budget':>9s}")
    for name, r in result["policies"].items():
        print(
            f"{name:24s} {r['freshness']:10.4f} {r['harmonic_staleness']:10.4f} "
            f"{r['fetches']:9d} {r['fetches_vs_budget']:9.3f}"
        )
    m = result["summary"]
    print(
        f"bayesrate / oracle freshness: {m['ours_vs_oracle_freshness']:.3f}; bayesrate / "
        f"best production ({m['best_production_baseline']}): "
        f"{m['ours_vs_best_production_freshness']:.3f}"
    )
    print(
        f"harmonic staleness: oracle / bayesrate {m['oracle_over_ours_harmonic']:.3f}; best "
        f"production ({m['best_production_harmonic']}) / bayesrate "
        f"{m['best_production_over_ours_harmonic']:.3f} (> 1: ours lower)"
    )
    sys.stdout.flush()
    return 0
