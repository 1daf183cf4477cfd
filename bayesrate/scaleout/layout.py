"""How a stage's output is partitioned: by URL hash, or by host like a host-partitioned log.

Two layouts (``--layout``; ``auto`` picks one from the input):

- ``url`` — part ``K`` of every table holds the URLs of hash bucket ``K``
  (``OUT/pages/part-K.parquet``). The only choice for a log partitioned by time or not at
  all: a URL's rows are spread over every time partition, so per-URL output cannot
  follow the time partitions.
- ``host`` — the output is co-partitioned by host, each part holding whole hosts, and
  each host's rows are written into its own Hive directory:
  ``OUT/pages/host=<H>/part-K.parquet``. ``auto`` chooses it when every input file lies
  under a ``host=H`` or ``domain=H`` directory (the reader's Hive columns,
  :attr:`~bayesrate.scaleout.logs.LogSpec.hosts`).

Host layout, the plan (:func:`plan_hosts`): the rows per host come from the Parquet
metadata of the pieces under each ``host=H/`` directory — no data read — when the log is
host-partitioned (a CSV file's rows are estimated from its size, 40 bytes per row);
otherwise (``--layout host`` on another log) from one pass over the domain column alone
(:func:`~bayesrate.scaleout.logs.piece_domains`). A host with more rows than the
partition target is split into ``ceil(rows / target)`` sub-buckets by URL hash (a URL's
rows stay together), so one giant host becomes several parts of about the target's size;
hosts and sub-buckets are then packed, in host order, into parts of at most the target
(next fit: parts hold at least half the target on average). Rows of a host the plan does
not know (a file's own ``domain`` column disagreeing with its directory) go to the part of
their host's hash: every URL's rows still meet in one part.

Host names are data, never paths: a directory name is ``host=`` and the host
percent-encoded (:func:`host_dir`, ``urllib.parse.quote`` with no safe characters: ``/``,
``%``, ``=``, spaces and non-ASCII are escaped), which pyarrow and Dask decode back when
they read the Hive directory as a ``host`` column. The files keep the exact ``domain``
column too (pyarrow infers the ``host`` column's type: a dataset whose host names all
look like numbers gets integers; read ``domain``, or pass a string partitioning schema).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import DOMAIN, PAGE
from bayesrate.errors import ObservationError
from bayesrate.scaleout import logs

LAYOUTS = ("auto", "url", "host")
#: the Hive key of the host directories of a host-layout output
HOST_KEY = "host"
#: longest directory name most file systems accept (bytes)
MAX_NAME_BYTES = 255
#: the column that carries each row's part number through the shuffle
PART = "_part"


def choose(spec: logs.LogSpec, requested: str) -> tuple[str, str]:
    """The layout for a log and why: ``("host" | "url", reason)``."""
    if requested not in LAYOUTS:
        raise ObservationError(f"layout must be one of {LAYOUTS}, got {requested!r}")
    by_host = host_partitioned(spec)
    if requested == "url":
        return "url", "asked for (--layout url): parts are URL-hash buckets"
    if requested == "host":
        how = "the log is partitioned by host" if by_host else "one pass over the host column"
        return "host", f"asked for (--layout host); rows per host from {how}"
    if by_host:
        return "host", "the log is partitioned by host: each part holds whole hosts"
    keys = sorted({k for name in spec.sources for k in logs.hive_values(name)})
    what = f"by {', '.join(keys)}" if keys else "not partitioned by host"
    return "url", (
        f"the log is {what}, not by host: a URL's rows are spread over its partitions, so "
        "per-URL output cannot follow them; parts are URL-hash buckets"
    )


def host_partitioned(spec: logs.LogSpec) -> bool:
    """Whether every file's rows get their host from a ``host=``/``domain=`` directory."""
    return bool(spec.hosts) and all(h is not None for h in spec.hosts)


def host_dir(host: str) -> str:
    """The Hive directory name of a host: ``host=`` and the host percent-encoded.

    Raises
    ------
    ObservationError
        When the encoded name is longer than file systems allow.
    """
    name = f"{HOST_KEY}={urllib.parse.quote(str(host), safe='')}"
    if len(name.encode()) > MAX_NAME_BYTES:
        raise ObservationError(
            f"host name too long for a directory ({len(name.encode())} bytes encoded, "
            f"at most {MAX_NAME_BYTES}); use --layout url",
            field=DOMAIN,
            pages=[str(host)[:80]],
        )
    return name


def host_of_dir(name: str) -> str:
    """The host of a directory name written by :func:`host_dir`."""
    key, sep, value = name.partition("=")
    if key != HOST_KEY or not sep:
        raise ObservationError(f"not a host directory: {name!r}")
    return urllib.parse.unquote(value)


def url_hash(values: Any) -> np.ndarray:
    """A stable 64-bit hash per identifier (the same in every process and run)."""
    return pd.util.hash_pandas_object(
        pd.Series(values, dtype=object), index=False, categorize=False
    ).to_numpy()


# ---------------------------------------------------------------------- the plan
def host_rows(spec: logs.LogSpec) -> tuple[pd.Series, str]:
    """Rows per host (sorted by host) and how they were counted.

    From the Parquet metadata of each piece (CSV: the file's size /
    :data:`~bayesrate.scaleout.logs.CSV_ROW_BYTES`) when the log is host-partitioned;
    otherwise one pass over the domain column.
    """
    if host_partitioned(spec):
        rows: dict[str, int] = {}
        for (source, _, _), n in zip(spec.pieces, spec.estimated_rows().tolist(), strict=True):
            host = spec.hosts[source]
            rows[host] = rows.get(host, 0) + int(n)
        counted = "Parquet metadata row counts per host directory"
        if any(n < 0 for n in spec.piece_rows):
            counted += f" (CSV files: size / {logs.CSV_ROW_BYTES} bytes)"
        return pd.Series(rows, dtype=np.int64).sort_index(), counted
    import dask

    from bayesrate.scaleout.cluster import compute

    task = dask.delayed(logs.piece_domains)
    counts = compute([task(piece, spec) for piece in spec.pieces])
    total = pd.concat(counts) if counts else pd.Series(dtype=np.int64)
    total = total.groupby(level=0).sum().astype(np.int64).sort_index()
    return total, "one pass over the domain column"


@dataclass(frozen=True)
class HostPlan:
    """Which part each host's rows go to.

    Attributes
    ----------
    hosts
        Known hosts, sorted.
    n_sub
        Sub-buckets (by URL hash) per host: 1, or ``ceil(rows / target)`` for a big host.
    offset
        Start of each host's sub-buckets in ``slots``.
    slots
        The part of each (host, sub-bucket).
    n_parts
        Number of parts.
    target
        Rows per part aimed at.
    """

    hosts: np.ndarray
    n_sub: np.ndarray
    offset: np.ndarray
    slots: np.ndarray
    n_parts: int
    target: int

    def parts_of(self, host: str) -> list[int]:
        """The parts holding a known host's rows."""
        i = int(np.searchsorted(self.hosts, host))
        if i >= len(self.hosts) or self.hosts[i] != host:
            return []
        return sorted(set(self.slots[self.offset[i] : self.offset[i] + self.n_sub[i]].tolist()))

    def summary(self) -> dict[str, Any]:
        split = self.n_sub > 1
        return {
            "hosts": len(self.hosts),
            "target_rows": self.target,
            "hosts_split": int(split.sum()),
            "largest_split": int(self.n_sub.max()) if len(self.n_sub) else 0,
        }


def plan_hosts(rows: pd.Series, target: int) -> HostPlan:
    """Split big hosts into sub-buckets and pack them into parts of at most ``target`` rows.

    ``rows``: rows per host. Next fit in host order, so a part holds a contiguous range of
    hosts; deterministic for the same counts.
    """
    if target < 1:
        raise ValueError("target must be >= 1")
    rows = rows[rows > 0].sort_index()
    hosts = rows.index.to_numpy(dtype=object)
    counts = rows.to_numpy(dtype=np.int64)
    n_sub = np.maximum(1, -(-counts // target))
    offset = np.concatenate([[0], np.cumsum(n_sub)]).astype(np.int64)
    sizes = np.repeat(counts / n_sub, n_sub)
    slots = np.zeros(len(sizes), dtype=np.int64)
    part, load = 0, 0.0
    for j, size in enumerate(sizes):
        if load > 0 and load + size > target:
            part, load = part + 1, 0.0
        slots[j] = part
        load += size
    n_parts = part + 1
    return HostPlan(hosts, n_sub, offset[:-1], slots, n_parts, int(target))


def assign_parts(frame: pd.DataFrame, plan: HostPlan) -> np.ndarray:
    """The part of each row: its host's sub-bucket of its URL's hash.

    Rows of hosts the plan does not know (or without a host) go to the part of their
    host's (or URL's) hash, so a URL's rows always meet.
    """
    host = frame[DOMAIN].to_numpy(dtype=object, na_value=None)
    page_hash = url_hash(frame[PAGE].to_numpy(dtype=object, na_value=None))
    if len(plan.hosts):
        i = pd.Index(plan.hosts, dtype=object).get_indexer(pd.Index(host, dtype=object))
    else:
        i = np.full(len(host), -1, dtype=np.int64)
    known = i >= 0
    parts = np.empty(len(host), dtype=np.int64)
    ik = i[known]
    sub = (page_hash[known] % plan.n_sub[ik].astype(np.uint64)).astype(np.int64)
    parts[known] = plan.slots[plan.offset[ik] + sub]
    unknown = np.flatnonzero(~known)
    if len(unknown):
        has_host = np.array([h is not None for h in host[unknown]], dtype=bool)
        fallback = np.where(has_host, url_hash(host[unknown]), page_hash[unknown])
        parts[unknown] = (fallback % np.uint64(plan.n_parts)).astype(np.int64)
    return parts.astype(np.int64)


def with_parts(frame: pd.DataFrame, plan: HostPlan) -> pd.DataFrame:
    """``frame`` with the :data:`PART` column (a partition of the log, on a worker)."""
    return frame.assign(**{PART: assign_parts(frame, plan)})


# ---------------------------------------------------------------------- writing
def tables_for(layout: str, name: str, frame: pd.DataFrame, hosts: Any) -> dict[str, pd.DataFrame]:
    """A part's table as ``{relative directory: rows}``: one entry, or one per host.

    ``hosts`` gives each row's host (used by the host layout only). No host, no file: a
    host layout part writes nothing for a table without rows.
    """
    if layout == "url":
        return {name: frame}
    if layout != "host":
        raise ValueError(f"unknown layout {layout!r}")
    hosts = np.asarray(hosts, dtype=object)
    if len(hosts) != len(frame):
        raise ValueError("one host per row needed")
    out = {}
    codes, labels = pd.factorize(pd.Series(hosts, dtype=object), sort=True)
    if (codes < 0).any():
        raise ObservationError(f"rows of table {name!r} without a host", field=DOMAIN)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(labels) + 1))
    for j, host in enumerate(labels):
        rows = order[bounds[j] : bounds[j + 1]]
        out[f"{name}/{host_dir(host)}"] = frame.iloc[rows].reset_index(drop=True)
    return out


def layout_of(manifest: dict[str, Any]) -> str:
    """The layout of a committed stage output (``url`` for outputs from before layouts)."""
    return str(manifest.get("layout", "url"))
