"""Stage 1: a crawl or fetch log → per-URL interval statistics, co-partitioned by URL or host.

The log is read lazily (:mod:`~bayesrate.scaleout.logs`) and shuffled once so that every
URL's rows are in one partition. In the ``url`` layout the partition is
``hash(page) mod partitions`` (Dask's hash partitioning, the same for a page whatever
file or time slice it came from); in the ``host`` layout (a log partitioned by host,
:mod:`~bayesrate.scaleout.layout`) it is the part its host's plan gives it: whole hosts
per part, a giant host split by URL hash over several parts (an exact placement by
``set_index`` on the part number with known divisions). **This shuffle is the expensive
step**: every row crosses the network (or, on one machine, is serialised and spilled)
once; everything after it is local to a partition (``docs/scale.md``). A log partitioned
by host still needs it (a host's files are spread over the workers that read them), but
the host layout adds only a small second one: one row per URL, by URL hash, to check that
no URL appears under two hosts (in the URL layout that is a page-level check within the
partition).

Each partition is then sorted by (page, time) and reduced where it lives:

- page-level checks (duplicate visits, flags against the page's time order, a domain that
  varies within the page); ``changed`` from digests for fetch logs;
- the page's visits as :class:`~bayesrate.observations.Observations` arrays, whose
  :attr:`~bayesrate.observations.Observations.interval_stats` are the in-memory path's
  own (one home for the grouping);
- per (domain, hour of week): hours of unchanged and of changed intervals
  (:func:`bayesrate.clock.hour_of_week_overlap`, summed per domain).

Output (``OUT``, :mod:`~bayesrate.scaleout.staging`): ``pages/part-K.parquet`` (``page,
domain, n_visits, n_changes, exposure_hours, first_visit, last_visit, last_change``; times
in hours since the Unix epoch), ``groups/part-K.parquet`` (``page, tau_hours, n,
changed``), ``hour_of_week.parquet`` (``domain, hour_of_week, unchanged_hours,
changed_hours``) and ``_manifest.json`` (counts, malformed-row report, timings, the
layout and why). Part ``K`` holds the URLs whose hash falls in bucket ``K`` (``url``) or
the hosts the plan packs into part ``K``, each host's rows in ``pages/host=<H>/`` and
``groups/host=<H>/`` (``host``); later stages keep the layout and the numbering. The
per-part partial sums of the hour-of-week table (``how/part-K.parquet``) stay flat.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import CHANGED, DOMAIN, N_HOUR_OF_WEEK, PAGE, TIME
from bayesrate.observations import Observations
from bayesrate.scaleout import layout as L
from bayesrate.scaleout import logs
from bayesrate.scaleout import problems as P
from bayesrate.scaleout.staging import Staging, load_manifest, read_part, write_part
from bayesrate.sufficient import IntervalStats

#: rows per partition after the shuffle, when the number of partitions is not given
ROWS_PER_PARTITION = logs.ROWS_PER_PARTITION
#: changed intervals per block of the hour-of-week overlap (bounds its (n, 168) array)
OVERLAP_BLOCK = 50_000
PAGE_COLUMNS = (
    "page",
    "domain",
    "n_visits",
    "n_changes",
    "exposure_hours",
    "first_visit",
    "last_visit",
    "last_change",
)
GROUP_COLUMNS = ("page", "tau_hours", "n", "changed")
HOW_COLUMNS = ("domain", "hour_of_week", "unchanged_hours", "changed_hours")


def default_partitions(spec: logs.LogSpec) -> int:
    """Partitions after the shuffle: about :data:`ROWS_PER_PARTITION` rows each."""
    rows = int(spec.estimated_rows().sum())
    return max(1, -(-rows // ROWS_PER_PARTITION))


def input_identity(spec: logs.LogSpec) -> list[list[Any]]:
    """Each input file with its size and modification time (part of the run key)."""
    out = []
    for name in spec.sources:
        st = os.stat(name)
        out.append([name, st.st_size, st.st_mtime_ns])
    return out


def aggregate(
    input_path: str | Path,
    out: str | Path,
    *,
    kind: str = "crawl",
    time_unit: str = "h",
    timezone: str = "UTC",
    partitions: int | None = None,
    bad_rows: str = "error",
    shuffle_method: str | None = None,
    layout: str = "auto",
    input_rows: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run stage 1 (see the module docstring); returns the manifest.

    Parameters
    ----------
    partitions
        Partitions after the shuffle (default: ~:data:`ROWS_PER_PARTITION` rows each). In
        the host layout the plan's part target is ``rows / partitions``; whole hosts per
        part make the number of parts differ (the manifest's ``partitions``).
    layout
        ``"auto"``, ``"url"`` or ``"host"`` (:mod:`~bayesrate.scaleout.layout`).
    input_rows
        Rows per input partition at most (default
        :data:`~bayesrate.scaleout.logs.INPUT_ROWS_PER_PARTITION`, 1 M): consecutive Parquet
        row groups and files are read together up to this many rows
        (:func:`~bayesrate.scaleout.logs.batches`). It sets the tasks and the memory of the
        read, not the output.

    Raises
    ------
    ObservationError
        Unreadable or malformed input (with ``bad_rows="error"``: counts per reason and a
        sample of rows), or a URL under two hosts in the host layout; nothing is
        committed then.
    """
    import dask

    from bayesrate.clock import check_timezone
    from bayesrate.errors import ObservationError
    from bayesrate.scaleout.cluster import compute

    if bad_rows not in P.BAD_ROWS:
        raise ObservationError(f"bad_rows must be one of {P.BAD_ROWS}, got {bad_rows!r}")
    check_timezone(timezone)
    t0 = time.perf_counter()
    spec = logs.scan(input_path, kind=kind, time_unit=time_unit)
    chosen, reason = L.choose(spec, layout)
    n_parts = int(partitions or default_partitions(spec))
    in_rows = int(input_rows or logs.INPUT_ROWS_PER_PARTITION)
    if in_rows < 1:
        raise ObservationError(f"input_rows must be >= 1, got {input_rows}")
    arguments = {
        "stage": "aggregate",
        "input": str(Path(input_path).absolute()),
        "files": input_identity(spec),
        "kind": kind,
        "time_unit": time_unit,
        "timezone": timezone,
        "partitions": n_parts,
        "bad_rows": bad_rows,
        "layout": chosen,
    }
    staging = Staging(out, arguments)
    if staging.is_committed():
        return load_manifest(out)
    plan = None
    layout_doc: dict[str, Any] = {"layout": chosen, "layout_reason": reason}
    if chosen == "host":
        rows, counted = L.host_rows(spec)
        plan = L.plan_hosts(rows, max(1, -(-int(rows.sum()) // n_parts)))
        layout_doc["host_rows"] = counted
        layout_doc["host_plan"] = plan.summary()
    n_out = n_parts if plan is None else plan.n_parts
    done, todo = staging.pending(n_out)
    if todo:
        frame = logs.read_log(spec, in_rows)
        kwargs = {"shuffle_method": shuffle_method} if shuffle_method else {}
        if plan is None:
            shuffled = frame.shuffle(PAGE, npartitions=n_parts, **kwargs)
        else:
            meta = frame._meta.assign(**{L.PART: np.zeros(0, dtype=np.int64)})
            keyed = frame.map_partitions(L.with_parts, plan, meta=meta)
            # exact placement: part K holds the rows whose part number is K
            shuffled = keyed.set_index(L.PART, divisions=list(range(n_out + 1)), **kwargs)
        parts = shuffled.to_delayed()
        task = dask.delayed(aggregate_part, pure=False)
        tasks = [task(parts[k], k, spec, timezone, str(staging.path), chosen) for k in todo]
        for k, summary in zip(todo, compute(tasks, progress=progress), strict=True):
            done[k] = summary
    summaries = [done[k] for k in range(n_out)]
    problems = P.report(s["problems"] for s in summaries)
    try:
        if not sum(s["rows"] for s in summaries):
            raise ObservationError(
                f"the log at {input_path} has no rows (its {len(spec.sources)} file(s) hold "
                "headers only)"
            )
        P.raise_if_any(problems, bad_rows)
        if chosen == "host":
            check_one_host_per_url(staging.path, n_out)
    except ObservationError:
        staging.discard()
        raise
    how = sum_hour_of_week(staging.path, n_out)
    how_tmp = staging.path / ".hour_of_week.parquet.tmp"
    how.to_parquet(how_tmp, index=False)
    os.replace(how_tmp, staging.path / "hour_of_week.parquet")
    totals = {
        k: int(sum(s[k] for s in summaries))
        for k in ("rows", "rows_used", "pages", "visits", "changes", "groups")
    }
    manifest = {
        "stage": "aggregate",
        "kind": kind,
        **layout_doc,
        "partitions": n_out,
        "input_partitions": len(logs.batches(spec, in_rows)),
        "input_pieces": len(spec.pieces),
        "files": len(spec.sources),
        **totals,
        "malformed_rows": problems,
        "timezone": timezone,
        "seconds": time.perf_counter() - t0,
        "tables": {
            "pages": list(PAGE_COLUMNS),
            "groups": list(GROUP_COLUMNS),
            "hour_of_week": list(HOW_COLUMNS),
        },
        "times": "hours since the Unix epoch (UTC)",
    }
    staging.commit(manifest)
    return manifest


# ---------------------------------------------------------------------- one partition
def aggregate_part(
    frame: pd.DataFrame,
    k: int,
    spec: logs.LogSpec,
    timezone: str,
    staging_path: str,
    layout: str = "url",
) -> dict[str, Any]:
    """Reduce one co-partitioned partition and commit it as part ``k`` (on a worker)."""
    if layout == "host":
        placed = frame.index.to_numpy()
        if len(placed) and not (placed == k).all():  # the shuffle's placement, checked
            raise RuntimeError(f"partition {k} holds rows of parts {sorted(set(placed))}")
        frame = frame.reset_index(drop=True)
    tables, summary = reduce_partition(frame, spec, timezone)
    pages, groups = tables["pages"], tables["groups"]
    page_domain = pages["domain"].to_numpy(dtype=object)
    group_domain = page_domain[pd.Index(pages["page"]).get_indexer(groups["page"])]
    out = {
        **L.tables_for(layout, "pages", pages, page_domain),
        **L.tables_for(layout, "groups", groups, group_domain),
        "how": tables["how"],
    }
    return write_part(staging_path, k, out, summary)


def check_one_host_per_url(staging_path: str | Path, n_parts: int) -> None:
    """In the host layout, fail if a URL's pages were found under more than one host.

    Parts hold whole hosts, so the same URL under two hosts lands in two parts and the
    in-partition check (domain varies within the page) cannot see it: one row per (URL,
    host) is shuffled by URL hash and checked (a shuffle of the ``pages`` table, not the
    log).

    Raises
    ------
    ObservationError
        Naming the URLs and their hosts.
    """
    import dask.dataframe as dd

    from bayesrate.errors import ObservationError

    meta = pd.DataFrame({"page": pd.Series(dtype=object), "domain": pd.Series(dtype=object)})
    pages = dd.from_map(
        _page_hosts,
        list(range(n_parts)),
        args=(str(staging_path),),
        meta=meta,
        divisions=None,
        enforce_metadata=False,
    )
    repeated = (
        pages.shuffle("page", npartitions=max(1, n_parts))
        .map_partitions(_repeated_pages, meta=meta)
        .compute()
    )
    if len(repeated):
        hosts = repeated.groupby("page", sort=True)["domain"].apply(sorted)
        listed = [f"{page} ({', '.join(h)})" for page, h in hosts.items()]
        raise ObservationError(
            f"{len(hosts):,} URL(s) found under more than one host of a host-partitioned "
            "log: the host layout needs each URL under one host (with --layout url they "
            "are found as 'domain varies within the page' and handled per --bad-rows)",
            field=DOMAIN,
            pages=listed,
        )


def _page_hosts(k: int, staging_path: str) -> pd.DataFrame:
    frame = read_part(staging_path, "pages", k, columns=["page", "domain"])
    return frame.astype(object)


def _repeated_pages(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["page"].duplicated(keep=False)]


def reduce_partition(
    frame: pd.DataFrame, spec: logs.LogSpec, timezone: str
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Page-level checks, then statistics of one partition's pages (all their rows)."""
    n_rows = len(frame)
    problem = frame["problem"].to_numpy(dtype=np.uint8).copy()
    good = problem == 0
    hours = frame[TIME].to_numpy(dtype=np.float64)
    split = pages_split_by_bad_rows(frame[PAGE], hours, problem)
    problem[split] = P.ROW_BETWEEN_VISITS
    good = problem == 0
    # integer codes of the ids (hashing the column, no Python string per row); labels sorted
    codes, labels = pd.factorize(frame[PAGE].where(good), sort=True)
    codes = codes.astype(np.int64)
    labels = np.asarray(labels, dtype=object)
    domain_codes, domain_labels = pd.factorize(frame[DOMAIN])
    rows = np.flatnonzero(good)
    # (page, time) order; ties are duplicate visits, whose pages are excluded whatever
    # their order, so the result does not depend on how the shuffle ordered the rows
    order = rows[np.lexsort((hours[rows], codes[rows]))]
    c = codes[order]
    t = hours[order]
    n_pages = len(labels)
    counts = np.bincount(c, minlength=n_pages)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    first = np.zeros(len(order), dtype=bool)
    first[offsets[:-1][counts > 0]] = True
    domain_sorted = domain_codes[order]
    page_code = np.zeros(n_pages, dtype=np.uint8)

    def flag(mask: np.ndarray, code: int) -> None:
        hit = np.unique(c[mask])
        page_code[hit] = np.where(page_code[hit] == 0, code, page_code[hit])

    # (an empty partition, e.g. of header-only files or more partitions than URLs, has none)
    same_page = np.zeros(len(c), dtype=bool)
    same_page[1:] = c[1:] == c[:-1]
    same_time = np.zeros(len(t), dtype=bool)
    same_time[1:] = t[1:] == t[:-1]
    flag(same_page & same_time, P.DUPLICATE)
    flag(domain_sorted != np.repeat(domain_sorted[offsets[:-1]], counts), P.DOMAIN_VARIES)
    if spec.kind == "crawl":
        flags = frame[CHANGED].to_numpy(dtype=np.float64)[order]
        flag(np.isnan(flags) & ~first, P.MISSING_FLAG)
        flag((flags == 1) & first, P.BASELINE_FLAG)
        changed = np.nan_to_num(flags, nan=0.0).astype(np.int8)
    else:
        from bayesrate.io.fetch_log import changed_from_digests

        digests = frame[logs.DIGEST].to_numpy(dtype=object)[order]
        changed = changed_from_digests(digests, offsets)
    # pages with a page-level problem: every row of theirs carries the page's reason
    bad_page = page_code > 0
    problem[order] = np.where(bad_page[c], page_code[c], problem[order])
    keep = ~bad_page[c]
    kept_pages = np.flatnonzero(~bad_page)
    obs = Observations(
        pages=pd.DataFrame(
            {
                DOMAIN: np.asarray(domain_labels, dtype=object)[
                    domain_sorted[offsets[:-1][kept_pages]]
                ].astype(str)
            },
            index=pd.Index(labels[kept_pages], name=PAGE),
        ),
        offsets=np.concatenate([[0], np.cumsum(counts[kept_pages])]).astype(np.int64),
        time=np.ascontiguousarray(t[keep]),
        changed=changed[keep],
        time_kind="numeric",
    )
    bad = frame.loc[problem > 0, ["source", "row", PAGE]].assign(problem=problem[problem > 0])
    tables = {
        "pages": page_table(obs),
        "groups": group_table(obs.interval_stats),
        "how": domain_hour_of_week(obs, timezone),
    }
    summary = {
        "rows": n_rows,
        "rows_used": int(obs.n_visits),
        "pages": int(obs.n_pages),
        "visits": int(obs.n_visits),
        "changes": int(obs.n_changes),
        "groups": int(obs.interval_stats.n_groups),
        "problems": P.partition_problems(bad, list(spec.sources)),
    }
    return tables, summary


def pages_split_by_bad_rows(page: pd.Series, hours: np.ndarray, problem: np.ndarray) -> np.ndarray:
    """The good rows of pages that a malformed row of theirs may split.

    A malformed row left out (``--bad-rows skip``) that lies between two of its page's
    visits would merge their intervals into one carrying the later visit's flag: a change
    seen only on the left-out row would be lost (issue 54). The page's rows are excluded
    instead when the row's time is unknown or within the page's good visits. Rows without
    a page, failed fetches (no digest: no observation) and rows before the first or after
    the last good visit are left out alone.

    Parameters
    ----------
    page : pandas.Series
        Page id per row (missing where unknown).
    hours : numpy.ndarray
        Time per row in hours (NaN where malformed).
    problem : numpy.ndarray
        Problem code per row (0: none).

    Returns
    -------
    numpy.ndarray
        Boolean per row: a good row of such a page.
    """
    good = problem == 0
    dropped = (problem > 0) & (problem != P.MISSING_DIGEST) & page.notna().to_numpy()
    if not dropped.any():
        return np.zeros(len(page), dtype=bool)
    ids = page.to_numpy(dtype=object)
    span = (
        pd.DataFrame({"page": ids[good], "t": hours[good]})
        .groupby("page", sort=False)["t"]
        .agg(["min", "max"])
        .reindex(ids[dropped])
    )
    t = hours[dropped]
    inside = np.isnan(t) | ((t >= span["min"].to_numpy()) & (t <= span["max"].to_numpy()))
    return good & page.isin(set(ids[dropped][inside])).to_numpy()


def page_table(obs: Observations) -> pd.DataFrame:
    """Per page: counts, exposure, first/last visit and last detected change (hours)."""
    stats = obs.interval_stats
    n = obs.n_pages
    has = obs.visits_per_page > 0
    first = np.where(has, obs.time[obs.offsets[:-1].clip(max=max(obs.n_visits - 1, 0))], np.nan)
    last = np.where(has, obs.time[(obs.offsets[1:] - 1).clip(min=0)], np.nan)
    last_change = np.full(n, np.nan)
    changed_at = np.flatnonzero(obs.changed)
    if len(changed_at):
        owner = obs.page_of_visit[changed_at]
        np.fmax.at(last_change, owner, obs.time[changed_at])
    return pd.DataFrame(
        {
            "page": obs.pages.index.to_numpy(dtype=object),
            "domain": obs.pages[DOMAIN].to_numpy(dtype=object),
            "n_visits": stats.n_visits,
            "n_changes": stats.n_changes,
            "exposure_hours": stats.exposure,
            "first_visit": first,
            "last_visit": last,
            "last_change": last_change,
        }
    )


def group_table(stats: IntervalStats) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "page": stats.pages.to_numpy(dtype=object)[stats.group_page],
            "tau_hours": stats.group_tau,
            "n": stats.group_n,
            "changed": stats.group_changed,
        }
    )


def domain_hour_of_week(obs: Observations, timezone: str) -> pd.DataFrame:
    """Per (domain, hour of week): hours of unchanged and of changed intervals.

    The sums over the domain's pages of :class:`~bayesrate.sufficient.HourOfWeekStats`'
    unchanged exposure and of its changed intervals' overlaps, in blocks of
    :data:`OVERLAP_BLOCK` intervals (a page's intervals tile its span, so unchanged hours
    are the span's overlap minus the changed intervals').
    """
    from bayesrate.clock import hour_of_week_overlap

    domains = obs.domains
    n_dom = len(domains)
    dom = obs.domain_codes
    changed_total = np.zeros((n_dom, N_HOUR_OF_WEEK))
    span_total = np.zeros((n_dom, N_HOUR_OF_WEEK))

    def add(total: np.ndarray, owner: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        for a in range(0, len(owner), OVERLAP_BLOCK):
            sl = slice(a, a + OVERLAP_BLOCK)
            o = owner[sl]
            order = np.argsort(o, kind="stable")
            overlap = hour_of_week_overlap(start[sl][order], end[sl][order], timezone)
            starts = np.flatnonzero(np.r_[True, o[order][1:] != o[order][:-1]])
            total[o[order][starts]] += np.add.reduceat(overlap, starts, axis=0)

    has = obs.visits_per_page > 0
    pages = np.flatnonzero(has)
    first = obs.time[obs.offsets[:-1][pages]]
    last = obs.time[obs.offsets[1:][pages] - 1]
    add(span_total, dom[pages], first, last)
    changed_at = np.flatnonzero(obs.changed)
    if len(changed_at):
        owner = dom[obs.page_of_visit[changed_at]]
        add(changed_total, owner, obs.time[changed_at - 1], obs.time[changed_at])
    return pd.DataFrame(
        {
            "domain": np.repeat(domains.to_numpy(dtype=object), N_HOUR_OF_WEEK),
            "hour_of_week": np.tile(np.arange(N_HOUR_OF_WEEK), n_dom),
            "unchanged_hours": np.maximum(span_total - changed_total, 0.0).ravel(),
            "changed_hours": changed_total.ravel(),
        }
    )


def sum_hour_of_week(staging_path: str | Path, n_parts: int) -> pd.DataFrame:
    """The per-(domain, hour-of-week) table: the parts' partial sums added up."""
    from bayesrate.scaleout.staging import read_table

    parts = read_table(staging_path, "how", list(range(n_parts)))
    if len(parts) == 0:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in HOW_COLUMNS})
    out = parts.groupby(["domain", "hour_of_week"], sort=True)[
        ["unchanged_hours", "changed_hours"]
    ].sum()
    return out.reset_index()


# ---------------------------------------------------------------------- reading back
def stats_from_tables(pages: pd.DataFrame, groups: pd.DataFrame) -> IntervalStats:
    """:class:`IntervalStats` of a part (or several) from its ``pages`` and ``groups``."""
    pages = pages.sort_values("page", kind="stable").reset_index(drop=True)
    index = pd.Index(pages["page"].to_numpy(dtype=object), name=PAGE)
    gpage = index.get_indexer(groups["page"].to_numpy(dtype=object))
    if len(gpage) and (gpage < 0).any():
        from bayesrate.errors import ObservationError

        raise ObservationError("interval groups of pages missing from the pages table")
    tau = groups["tau_hours"].to_numpy(dtype=np.float64)
    order = np.lexsort((tau, gpage))
    gpage = gpage[order].astype(np.int64)
    domain_codes, domains = pd.factorize(pages["domain"].astype(str), sort=True)
    n_visits = pages["n_visits"].to_numpy(dtype=np.int64)
    return IntervalStats(
        pages=index,
        domain=domain_codes.astype(np.int64),
        domains=pd.Index(domains, name=DOMAIN),
        group_page=gpage,
        group_tau=tau[order],
        group_n=groups["n"].to_numpy(dtype=np.int64)[order],
        group_changed=groups["changed"].to_numpy(dtype=np.int64)[order],
        group_offsets=np.searchsorted(gpage, np.arange(len(index) + 1)).astype(np.int64),
        n_visits=n_visits,
        n_intervals=np.maximum(n_visits - 1, 0),
        n_changes=pages["n_changes"].to_numpy(dtype=np.int64),
        exposure=pages["exposure_hours"].to_numpy(dtype=np.float64),
    )
