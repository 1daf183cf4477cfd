"""The Dask scheduler a stage runs on: a given address, or a local cluster; progress bars.

:func:`connect` yields a :class:`distributed.Client` — to ``address`` (any Dask scheduler,
e.g. ``tcp://scheduler:8786`` of a multi-node cluster) or to a
:class:`distributed.LocalCluster` started for the run and closed after it.
:func:`compute` runs a list of Dask tasks on the active client (or, without one, on
Dask's local threads) with an optional text progress bar.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


@contextmanager
def connect(
    address: str | None = None,
    *,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | None = None,
    processes: bool = True,
) -> Iterator[Any]:
    """A distributed client for the duration of the block.

    Parameters
    ----------
    address
        A running scheduler's address; ``None`` starts a local cluster.
    workers, threads_per_worker, memory_limit, processes
        The local cluster's shape (ignored with ``address``); ``workers`` defaults to
        the number of cores, ``memory_limit`` to Dask's (total memory / workers).
    """
    import logging

    from distributed import Client, LocalCluster

    # the p2p shuffle logs every shuffle's start and end at WARNING
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    if address:
        with Client(address) as client:
            yield client
        return
    import os

    cluster_kwargs: dict[str, Any] = {
        "n_workers": workers or os.cpu_count() or 1,
        "threads_per_worker": threads_per_worker,
        "processes": processes,
        "dashboard_address": ":0",  # a free port, never a fixed one
    }
    if memory_limit:
        cluster_kwargs["memory_limit"] = memory_limit
    with LocalCluster(**cluster_kwargs) as cluster, Client(cluster) as client:
        yield client


def active_client() -> Any:
    """The current distributed client, or ``None``."""
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def compute(tasks: Sequence[Any], *, progress: bool = False) -> list[Any]:
    """Compute Dask collections/delayed objects; results in order.

    On a cluster, when a task fails the call waits for the others to finish before it
    raises (an interrupt cancels them instead).
    """
    import dask

    if not tasks:
        return []
    client = active_client()
    if client is None:
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar():
                return list(dask.compute(*tasks))
        return list(dask.compute(*tasks))
    from distributed import wait

    futures = client.compute(list(tasks))
    try:
        if progress:
            from distributed import progress as bar

            bar(futures)
        return client.gather(futures)
    except Exception:
        # one task failed: let the others finish before the error propagates, so no task
        # of this call still writes (e.g. into a staging directory a rerun then commits);
        # what they finished stays staged for the rerun
        wait(futures)
        raise
    except BaseException:
        client.cancel(futures)
        raise
