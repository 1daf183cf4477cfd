"""R ``.rda``/``.RData`` files holding a data frame in the visit-grid format (the case
study's ``pages.rda``), read with the ``rdata`` package."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesrate.errors import ObservationError
from bayesrate.io.visit_grid import from_visit_grid
from bayesrate.observations import Observations


def read_rda(
    path: str | Path,
    *,
    name: str | None = None,
    interval: float = 1.0,
    time_unit: str = "h",
    start: pd.Timestamp | str | float = 0.0,
) -> Observations:
    """Read the case study's ``pages.rda`` (or any R file holding a data frame of that shape).

    Parameters
    ----------
    path
        ``.rda``/``.RData`` file.
    name
        Object to read (default: the only data frame in the file, or ``pages``).
    interval, time_unit, start
        As in :func:`from_visit_grid` (the case study visited hourly).
    """
    import rdata

    path = Path(path)
    if not path.exists():
        raise ObservationError(f"no such file: {path}")
    try:
        objects = rdata.read_rda(str(path))
    except Exception as exc:  # rdata raises several types for malformed files
        raise ObservationError(f"cannot read R data from {path}: {exc}") from exc
    frames = {k: v for k, v in objects.items() if isinstance(v, pd.DataFrame)}
    if name is None:
        if len(frames) == 1:
            name = next(iter(frames))
        elif "pages" in frames:
            name = "pages"
        else:
            raise ObservationError(
                f"{path} holds data frames {sorted(frames)}; say which with name=", field="name"
            )
    if name not in frames:
        raise ObservationError(f"{path} has no data frame {name!r} (has {sorted(frames)})")
    frame = frames[name]
    return from_visit_grid(
        frame, interval=interval, time_unit=time_unit, start=start, source=f"{path}:{name}"
    )
