"""Embedded real datasets, loaded by name. Two kinds (``PROVENANCE[name]["kind"]``):

**Crawl logs** (:func:`load` → :class:`~bayesrate.observations.Observations`): three Open
Terms Archive collections (ODC-BY 1.0; see ``data/ATTRIBUTION.md`` and :data:`PROVENANCE`):
tracked legal documents (terms, privacy policies) whose extracted text is recorded only when
it changed, observed on a nominal visit grid (:mod:`bayesrate.io.ota`). Pages are documents;
the hierarchy pools documents within their **service** (``domain``); ``terms_type`` is kept
as a second grouping.

**Change histories** (:func:`load_history` → :class:`~bayesrate.history.ChangeHistory`):
``tldr-pages`` (CC-BY 4.0), the exact creation, change and deletion times of 7,822 tldr
pages, 2014–2026 (domain = platform). Crawl a history with :func:`bayesrate.history.crawl`
to get observations whose true change counts are known. The Open Terms Archive logs load as
*approximate* histories too (detection times as change times; valid only for crawl
intervals much longer than their 6–24 h grid — the history's notes say so).
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from typing import TYPE_CHECKING

import pandas as pd

from bayesrate.constants import DEFAULT_DATASET
from bayesrate.errors import ObservationError
from bayesrate.observations import Observations

if TYPE_CHECKING:
    from bayesrate.history import ChangeHistory

DEFAULT = DEFAULT_DATASET
LICENCE = "ODC-BY-1.0"
CRAWL_LOG = "crawl log"
CHANGE_HISTORY = "change history"

#: name -> provenance of the source data
PROVENANCE = {
    "ota-contrib": {
        "kind": CRAWL_LOG,
        "collection": "contrib",
        "repository": "OpenTermsArchive/contrib-versions",
        "commit": "d6fb386efcd5ef42d33090dfaf21d7b2cc748246",
        "licence": LICENCE,
        "attribution": "Open Terms Archive contributors",
    },
    "ota-pga": {
        "kind": CRAWL_LOG,
        "collection": "pga",
        "repository": "OpenTermsArchive/pga-versions",
        "commit": "577430aa7c115d45fd805c9c06f9fc67c1fda441",
        "licence": LICENCE,
        "attribution": "Katzenbach et al. (2023), Platform Governance Archive (PGA): Dataset "
        "PGA v2, doi:10.26092/elib/2373; Open Terms Archive contributors",
    },
    "ota-genai-eu": {
        "kind": CRAWL_LOG,
        "collection": "genai-eu",
        "repository": "OpenTermsArchive/genai-eu-versions",
        "commit": "4812532797e75d8bd27b308499e3e7972b41c7bc",
        "licence": LICENCE,
        "attribution": "ZeMKI Lab Platform Governance, Univ. Bremen, and Open Terms Archive "
        "contributors",
    },
    "tldr-pages": {
        "kind": CHANGE_HISTORY,
        "repository": "tldr-pages/tldr",
        "commit": "08e345f42639f67d99282813247ac670dc6e87cb",
        "licence": "CC-BY-4.0",
        "attribution": "tldr-pages contributors, tldr-pages/tldr, CC-BY 4.0",
        # the record ends with the source commit (2026-08-22 09:17:23 UTC)
        "end": "2026-08-22T09:17:23Z",
    },
}


def names() -> list[str]:
    """Names of the embedded crawl logs (what :func:`load` returns as observations)."""
    return sorted(n for n, p in PROVENANCE.items() if p["kind"] == CRAWL_LOG)


def history_names() -> list[str]:
    """Names :func:`load_history` accepts: exact histories, and crawl logs as approximate ones."""
    return sorted(PROVENANCE)


def raw_tables(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The embedded (changelog events, documents) tables of an OTA dataset."""
    _check(name)
    data = files(__name__) / "data"
    events = pd.read_parquet(str(data / f"{name}.parquet"))
    docs = pd.read_parquet(str(data / f"{name}-documents.parquet"))
    return events, docs


@lru_cache(maxsize=8)
def _load_cached(name: str, merge_silences: bool = True) -> Observations:
    from bayesrate.io.ota import from_changelog

    events, docs = raw_tables(name)
    events = events.assign(
        path=events["path"].astype(str),
        event=events["event"].astype(str),
        time_utc=events["time_utc"],
    )
    return from_changelog(
        events,
        docs,
        grid=PROVENANCE[name]["collection"],
        source=name,
        merge_silences=merge_silences,
    )


def load(name: str = DEFAULT, *, merge_silences: bool = True) -> Observations:
    """Load an embedded dataset as :class:`~bayesrate.observations.Observations`.

    Parameters
    ----------
    name
        One of :func:`names` (default ``"ota-contrib"``).
    merge_silences
        Merge the collection-wide silent stretches (probable outages) into single
        intervals (:mod:`bayesrate.io.ota`); ``False`` keeps every nominal run.
    """
    _check(name)
    return _load_cached(name, merge_silences)


@lru_cache(maxsize=4)
def _history_cached(name: str) -> ChangeHistory:
    from bayesrate.history import ChangeHistory, from_observations

    prov = PROVENANCE[name]
    if prov["kind"] == CRAWL_LOG:
        return from_observations(_load_cached(name))
    events = pd.read_parquet(str(files(__name__) / "data" / f"{name}.parquet"))
    events = events.assign(**{col: events[col].astype(str) for col in ("page", "domain", "event")})
    return ChangeHistory.from_frame(
        events,
        end=prov.get("end"),
        source=name,
        notes=(f"{name}: {prov['attribution']}",),
    )


def load_history(name: str) -> ChangeHistory:
    """Load an embedded dataset as a :class:`~bayesrate.history.ChangeHistory`.

    Parameters
    ----------
    name
        ``"tldr-pages"`` (exact history) or an Open Terms Archive crawl log, which loads as
        an *approximate* history (detection times as change times; see
        :func:`bayesrate.history.from_observations`).
    """
    if name not in PROVENANCE:
        raise ObservationError(
            f"unknown dataset {name!r}; available: {history_names()}", field="dataset"
        )
    return _history_cached(name)


def _check(name: str) -> None:
    if name in PROVENANCE and PROVENANCE[name]["kind"] == CHANGE_HISTORY:
        raise ObservationError(
            f"{name!r} is a change history, not a crawl log: load it with "
            f"bayesrate.datasets.load_history({name!r}) and crawl it with "
            f"bayesrate.history.crawl (on the command line: 'bayesrate study forecast "
            f"--dataset {name}' or 'bayesrate schedule replay --dataset {name}')",
            field="dataset",
        )
    if name not in PROVENANCE:
        raise ObservationError(f"unknown dataset {name!r}; available: {names()}", field="dataset")
