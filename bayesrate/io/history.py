"""Change histories from CSV, CSV.gz or Parquet files, and by name.

One row per event: ``page``, optional ``domain``, ``time``, ``event`` ∈ {``created``,
``changed``, ``deleted``} (only ``page,time``: every row is a change). Identifiers and event
names are read as text exactly as written, with no missing-value guessing; the validation
is :meth:`bayesrate.history.ChangeHistory.from_frame` (``docs/histories.md``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesrate.constants import DEFAULT_TIME_UNIT, DOMAIN, PAGE
from bayesrate.errors import ObservationError
from bayesrate.history import EVENT, ChangeHistory
from bayesrate.io.table import load_table
from bayesrate.observations import Observations

#: columns read as text
TEXT_COLUMNS = (PAGE, DOMAIN, EVENT)


def read_history(
    path: str | Path,
    *,
    time_unit: str = DEFAULT_TIME_UNIT,
    end: pd.Timestamp | str | float | None = None,
) -> ChangeHistory:
    """Read and validate a change-history table (``.csv``, ``.csv.gz``, ``.parquet``).

    Parameters
    ----------
    path
        The file.
    time_unit
        Unit of numeric times (tz-aware ISO timestamps need none).
    end
        When the record ends (default: its last event).
    """
    frame = load_table(path, id_columns=TEXT_COLUMNS)
    return ChangeHistory.from_frame(frame, time_unit=time_unit, end=end, source=str(path))


def read_table_or_history(
    path: str | Path, *, time_unit: str = DEFAULT_TIME_UNIT
) -> Observations | ChangeHistory:
    """A file that is either an observation table or a change history, told by its columns.

    A table with an ``event`` column and no ``changed`` column is a change history
    (:func:`read_history`); anything else is read as an observation table (and validated
    as one: a table with neither column is refused for its missing ``changed``).
    """
    from bayesrate.constants import CHANGED

    frame = load_table(path, id_columns=TEXT_COLUMNS)
    if EVENT in frame.columns and CHANGED not in frame.columns:
        return ChangeHistory.from_frame(frame, time_unit=time_unit, source=str(path))
    return Observations.from_frame(frame, time_unit=time_unit, source=str(path))


def load_history(*, dataset: str | None = None, path: str | Path | None = None) -> ChangeHistory:
    """The history named by exactly one of an embedded ``dataset`` or a file ``path``."""
    if (dataset is None) == (path is None):
        raise ObservationError(
            "give exactly one of a dataset name or a history file", field="dataset/history"
        )
    if path is not None:
        return read_history(path)
    from bayesrate import datasets

    return datasets.load_history(dataset)
