"""The ``fit_data`` group of a saved fit: the observations, so that ``load`` needs no data.

As pymc-marketing's ModelBuilder keeps its training data in the fitted result, a bayesrate
fit keeps its :class:`~bayesrate.observations.Observations`: visit times and change flags
(dim ``visit``), and per page its label, visit count, domain and other attributes (dim
``page``); the time kind, source, notes and metadata as attributes. The data rebuilt from
it must reproduce the fit's data fingerprint (checked by ``RateModel.load``). Visits are
stored compressed (zlib with byte shuffling).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_PAGE, PAGE

if TYPE_CHECKING:
    import xarray as xr

    from bayesrate.observations import Observations

DIM_VISIT = "visit"
#: name of the per-page visit count in the group (offsets are its cumulative sum)
VISITS = "visits_per_page"
_PAGE_ATTRIBUTE_PREFIX = "page_"


def observations_to_dataset(obs: Observations) -> xr.Dataset:
    """The observations as a Dataset (dims ``visit`` and ``page``)."""
    import xarray as xr

    data: dict[str, Any] = {
        "time": ((DIM_VISIT,), np.asarray(obs.time, dtype=np.float64)),
        "changed": ((DIM_VISIT,), np.asarray(obs.changed, dtype=np.int8)),
        VISITS: ((DIM_PAGE,), np.asarray(obs.visits_per_page, dtype=np.int64)),
    }
    for column in obs.pages.columns:
        data[_PAGE_ATTRIBUTE_PREFIX + str(column)] = ((DIM_PAGE,), _plain(obs.pages[column]))
    out = xr.Dataset(data, coords={DIM_PAGE: _plain(obs.pages.index)})
    out.attrs.update(
        time_kind=obs.time_kind,
        source=obs.source,
        notes=json.dumps(list(obs.notes)),
        meta=json.dumps(dict(obs.meta), default=str),
    )
    return out


def observations_from_dataset(ds: xr.Dataset) -> Observations:
    """Rebuild the observations written by :func:`observations_to_dataset`."""
    from bayesrate.observations import Observations

    columns = {
        name[len(_PAGE_ATTRIBUTE_PREFIX) :]: np.asarray(ds[name])
        for name in ds.data_vars
        if name.startswith(_PAGE_ATTRIBUTE_PREFIX)
    }
    pages = pd.DataFrame(columns, index=pd.Index(np.asarray(ds[DIM_PAGE]), name=PAGE))
    counts = np.asarray(ds[VISITS], dtype=np.int64)
    return Observations(
        pages=pages,
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        time=np.asarray(ds["time"], dtype=np.float64),
        changed=np.asarray(ds["changed"], dtype=np.int8),
        time_kind=str(ds.attrs.get("time_kind", "numeric")),
        notes=tuple(json.loads(ds.attrs.get("notes", "[]"))),
        source=str(ds.attrs.get("source", "")),
        meta=json.loads(ds.attrs.get("meta", "{}")),
    )


def netcdf_encoding(tree: xr.DataTree) -> dict[str, dict[str, dict[str, Any]]]:
    """Compression of the ``fit_data`` group's numeric variables (the rest as written)."""
    if "fit_data" not in tree.children:
        return {}
    ds = tree["fit_data"].to_dataset()
    return {
        "/fit_data": {
            name: {"zlib": True, "complevel": 4, "shuffle": True}
            for name in ds.data_vars
            if ds[name].dtype.kind in "biuf"
        }
    }


def _plain(values) -> np.ndarray:
    """Labels and attributes as NetCDF-friendly arrays (objects and strings become str)."""
    array = np.asarray(values)
    if array.dtype == object or pd.api.types.is_string_dtype(array.dtype):
        return array.astype(str)
    return array
