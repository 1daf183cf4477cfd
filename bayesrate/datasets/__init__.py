"""Embedded real datasets, loaded by name.

Three Open Terms Archive collections (ODC-BY 1.0; see ``data/ATTRIBUTION.md`` and
:data:`PROVENANCE`): tracked legal documents (terms, privacy policies) whose extracted
text is recorded only when it changed, observed on a nominal visit grid
(:mod:`bayesrate.io.ota`). Pages are documents; the hierarchy pools documents within their
**service** (``domain``); ``terms_type`` is kept as a second grouping.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

import pandas as pd

from bayesrate.constants import DEFAULT_DATASET
from bayesrate.errors import ObservationError
from bayesrate.observations import Observations

DEFAULT = DEFAULT_DATASET
LICENCE = "ODC-BY-1.0"

#: name -> provenance of the source data
PROVENANCE = {
    "ota-contrib": {
        "collection": "contrib",
        "repository": "OpenTermsArchive/contrib-versions",
        "commit": "d6fb386efcd5ef42d33090dfaf21d7b2cc748246",
        "licence": LICENCE,
        "attribution": "Open Terms Archive contributors",
    },
    "ota-pga": {
        "collection": "pga",
        "repository": "OpenTermsArchive/pga-versions",
        "commit": "577430aa7c115d45fd805c9c06f9fc67c1fda441",
        "licence": LICENCE,
        "attribution": "Katzenbach et al. (2023), Platform Governance Archive (PGA): Dataset "
        "PGA v2, doi:10.26092/elib/2373; Open Terms Archive contributors",
    },
    "ota-genai-eu": {
        "collection": "genai-eu",
        "repository": "OpenTermsArchive/genai-eu-versions",
        "commit": "4812532797e75d8bd27b308499e3e7972b41c7bc",
        "licence": LICENCE,
        "attribution": "ZeMKI Lab Platform Governance, Univ. Bremen, and Open Terms Archive "
        "contributors",
    },
}


def names() -> list[str]:
    """Names of the embedded datasets."""
    return sorted(PROVENANCE)


def raw_tables(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The embedded (changelog events, documents) tables of an OTA dataset."""
    _check(name)
    data = files(__name__) / "data"
    events = pd.read_parquet(str(data / f"{name}.parquet"))
    docs = pd.read_parquet(str(data / f"{name}-documents.parquet"))
    return events, docs


@lru_cache(maxsize=8)
def _load_cached(name: str) -> Observations:
    from bayesrate.io.ota import from_changelog

    events, docs = raw_tables(name)
    events = events.assign(
        path=events["path"].astype(str),
        event=events["event"].astype(str),
        time_utc=events["time_utc"],
    )
    return from_changelog(events, docs, grid=PROVENANCE[name]["collection"], source=name)


def load(name: str = DEFAULT) -> Observations:
    """Load an embedded dataset as :class:`~bayesrate.observations.Observations`.

    Parameters
    ----------
    name
        One of :func:`names` (default ``"ota-contrib"``).
    """
    _check(name)
    return _load_cached(name)


def _check(name: str) -> None:
    if name not in PROVENANCE:
        raise ObservationError(f"unknown dataset {name!r}; available: {names()}", field="dataset")
