"""The Dask path: sufficient statistics of crawl logs larger than one machine's memory.

Every model and estimator consumes only :class:`~bayesrate.sufficient.IntervalStats` (and
per-page totals), whose size grows with pages × distinct interval lengths, not with visits.
So the visits can stay in a partitioned Dask DataFrame: each partition is validated and
reduced to its groups where it lives (:meth:`Observations.from_frame` per partition — the
same checks and errors as in memory), and only the groups are gathered.

Read CSV files with :func:`read_csv` (ids as strings, no missing-value guessing); every
partition's ``page``/``domain`` values are turned into strings before validation.

Requirement: all visits of a page are in one partition (e.g. ``ddf.shuffle("page")`` or
reading files written per page range); a page found in two partitions is an error.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import DOMAIN, PAGE
from bayesrate.errors import ObservationError
from bayesrate.observations import ID_COLUMNS, Observations, ids_as_strings
from bayesrate.sufficient import IntervalStats

#: what reading a partition raises for a file that is not a readable table
_UNREADABLE = (OSError, ValueError, EOFError, zlib.error, pd.errors.ParserError)

GROUP_COLUMNS = {
    PAGE: object,
    DOMAIN: object,
    "tau": np.float64,
    "n": np.int64,
    "changed": np.int64,
    "n_visits": np.int64,
    "exposure": np.float64,
}


def _partition_groups(frame: pd.DataFrame, time_unit: str) -> pd.DataFrame:
    """One partition's visits → its (page, tau) groups plus per-page totals."""
    if len(frame) == 0:
        return pd.DataFrame({k: pd.Series(dtype=v) for k, v in GROUP_COLUMNS.items()})
    obs = Observations.from_frame(ids_as_strings(frame), time_unit=time_unit)
    stats = obs.interval_stats
    pages = stats.pages.to_numpy()
    domains = obs.pages[DOMAIN].to_numpy()
    groups = pd.DataFrame(
        {
            PAGE: pages[stats.group_page],
            DOMAIN: domains[stats.group_page],
            "tau": stats.group_tau,
            "n": stats.group_n,
            "changed": stats.group_changed,
            "n_visits": 0,
            "exposure": 0.0,
        }
    )
    # one totals row per page (tau = NaN) so that single-visit pages are not lost
    totals = pd.DataFrame(
        {
            PAGE: pages,
            DOMAIN: domains,
            "tau": np.nan,
            "n": 0,
            "changed": 0,
            "n_visits": stats.n_visits,
            "exposure": stats.exposure,
        }
    )
    return pd.concat([groups, totals], ignore_index=True)


def read_csv(urlpath: Any, **kwargs: Any) -> Any:
    """A Dask DataFrame of canonical visits from CSV files, ids read as written.

    ``dask.dataframe.read_csv`` with ``page`` and ``domain`` read as strings and no
    missing-value guessing (only empty cells are missing), as
    :func:`bayesrate.io.table.load_table` reads one file: ``"007"`` and ``"7"`` stay two
    pages and ``"NA"`` is an id. Further keyword arguments go to ``dask.dataframe.read_csv``.
    """
    import dask.dataframe as dd

    dtype = dict.fromkeys(ID_COLUMNS, str) | dict(kwargs.pop("dtype", {}))
    kwargs.setdefault("keep_default_na", False)
    kwargs.setdefault("na_values", [""])
    try:
        return dd.read_csv(urlpath, dtype=dtype, **kwargs)
    except _UNREADABLE as exc:
        raise ObservationError(f"cannot read {urlpath} as CSV: {exc}") from exc


def interval_stats_from_dask(ddf: Any, *, time_unit: str = "h") -> IntervalStats:
    """Compute :class:`IntervalStats` from a Dask DataFrame of canonical visits.

    Parameters
    ----------
    ddf
        ``dask.dataframe.DataFrame`` with columns ``page``, ``time``, ``changed`` and
        optionally ``domain``; every page's visits in one partition, in time order.
    time_unit
        Unit of numeric times.

    Raises
    ------
    ObservationError
        As :meth:`Observations.from_frame` on the offending partition, or when a page
        spans partitions.
    """
    meta = pd.DataFrame({k: pd.Series(dtype=v) for k, v in GROUP_COLUMNS.items()})
    try:
        parts = ddf.map_partitions(_partition_groups, time_unit, meta=meta).compute()
    except _UNREADABLE as exc:
        if isinstance(exc, ObservationError):
            raise
        raise ObservationError(f"cannot read the partitions: {exc}") from exc
    return _assemble(parts)


def _assemble(parts: pd.DataFrame) -> IntervalStats:
    totals = parts[parts["tau"].isna()]
    groups = parts[parts["tau"].notna()]
    dup = totals[PAGE].duplicated(keep=False)
    if dup.any():
        raise ObservationError(
            "pages span more than one partition; repartition so that each page's visits are "
            "in one partition (e.g. ddf.shuffle('page'))",
            field=PAGE,
            pages=sorted(totals.loc[dup, PAGE].unique().tolist()),
        )
    totals = totals.sort_values(PAGE, kind="stable").reset_index(drop=True)
    page_index = pd.Index(totals[PAGE].to_numpy(), name=PAGE)
    domain_codes, domains = pd.factorize(totals[DOMAIN].astype(str), sort=True)
    gpage = page_index.get_indexer(groups[PAGE].to_numpy())
    order = np.lexsort((groups["tau"].to_numpy(), gpage))
    gpage = gpage[order]
    n_pages = len(page_index)
    n_visits = totals["n_visits"].to_numpy(dtype=np.int64)
    group_n = groups["n"].to_numpy(dtype=np.int64)[order]
    group_changed = groups["changed"].to_numpy(dtype=np.int64)[order]
    return IntervalStats(
        pages=page_index,
        domain=domain_codes.astype(np.int64),
        domains=pd.Index(domains, name=DOMAIN),
        group_page=gpage.astype(np.int64),
        group_tau=groups["tau"].to_numpy(dtype=np.float64)[order],
        group_n=group_n,
        group_changed=group_changed,
        group_offsets=np.searchsorted(gpage, np.arange(n_pages + 1)).astype(np.int64),
        n_visits=n_visits,
        n_intervals=np.maximum(n_visits - 1, 0),
        n_changes=np.bincount(gpage, weights=group_changed, minlength=n_pages).astype(np.int64),
        exposure=totals["exposure"].to_numpy(dtype=np.float64),
    )
