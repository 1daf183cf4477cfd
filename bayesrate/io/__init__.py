"""Loaders: each turns one source of crawl records into :class:`Observations`.

One module per source (``docs/data.md``):

- :mod:`~bayesrate.io.table` — the canonical table in CSV/CSV.gz/TSV/Parquet
  (:func:`read_observations`, :func:`load_table`);
- :mod:`~bayesrate.io.fetch_log` — fetch logs with content digests (:func:`from_fetch_log`);
- :mod:`~bayesrate.io.visit_grid` — the case study's ``numVisits``/``visitsWChanges`` grids
  (:func:`from_visit_grid`, :func:`to_visit_grid`);
- :mod:`~bayesrate.io.rda` — that format in R ``.rda`` files (:func:`read_rda`);
- :mod:`~bayesrate.io.ota` — Open Terms Archive change logs on their nominal visit grid;
- :mod:`~bayesrate.io.dask` — crawl logs larger than memory, through Dask;
- :mod:`~bayesrate.io.history` — exact change histories (:func:`read_history`), which are
  not observations: :func:`bayesrate.history.crawl` turns them into some.

Every loader validates like :meth:`Observations.from_frame`: bad rows are named, nothing
is dropped silently, identifiers are read as strings.
"""

from __future__ import annotations

from bayesrate.io.fetch_log import from_fetch_log
from bayesrate.io.history import read_history
from bayesrate.io.rda import read_rda
from bayesrate.io.table import load_table, read_observations
from bayesrate.io.visit_grid import from_visit_grid, to_visit_grid
from bayesrate.observations import concat

__all__ = [
    "concat",
    "from_fetch_log",
    "from_visit_grid",
    "load_table",
    "read_history",
    "read_observations",
    "read_rda",
    "to_visit_grid",
]
