"""Fetch logs: one row per fetch with a content digest; ``changed`` is "the digest differs
from the page's previous one"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesrate.constants import CHANGED, DEFAULT_TIME_UNIT, DOMAIN, PAGE, TIME
from bayesrate.errors import ObservationError, format_items
from bayesrate.observations import Observations, ids_as_strings


def from_fetch_log(
    frame: pd.DataFrame,
    *,
    page: str = PAGE,
    time: str = TIME,
    digest: str = "digest",
    domain: str | None = DOMAIN,
    time_unit: str = DEFAULT_TIME_UNIT,
    failed: str = "error",
    source: str = "fetch log",
) -> Observations:
    """Observations from fetch records with a content digest per fetch.

    Parameters
    ----------
    frame
        One row per fetch: page id, fetch time, digest of the content that matters (e.g.
        a hash of the extracted text), optional domain.
    page, time, digest, domain
        Column names. ``domain=None`` (or a missing column) puts every page in one domain.
    time_unit
        Unit of numeric times.
    failed
        What to do with fetches whose digest is missing (failed fetches): ``"error"``
        (default) raises naming the rows; ``"skip"`` excludes them — a failed fetch is
        not a visit, so the next successful fetch is compared with the last successful
        one — and records how many in ``notes``.

    Notes
    -----
    Revisits that return the same digest are unchanged; a change that reverted before
    the next fetch is invisible (a blind spot of binary observation).
    """
    for col in (page, time, digest):
        if col not in frame.columns:
            raise ObservationError(
                f"fetch log lacks column {col!r}; have {list(frame.columns)}", field=col
            )
    if failed not in ("error", "skip"):
        raise ValueError("failed must be 'error' or 'skip'")
    frame = ids_as_strings(frame.reset_index(drop=True), (page, domain or page))
    notes = []
    missing = frame[digest].isna().to_numpy()
    if missing.any():
        if failed == "error":
            raise ObservationError(
                "missing digest (failed fetch?); pass failed='skip' to exclude such fetches",
                field=digest,
                rows=np.flatnonzero(missing),
            )
        notes.append(
            f"excluded {int(missing.sum())} fetch(es) without a digest (failed fetches): rows "
            f"{format_items(np.flatnonzero(missing).tolist())}"
        )
        frame = frame.loc[~missing]
    canonical = pd.DataFrame({PAGE: frame[page].to_numpy(), TIME: frame[time].to_numpy()})
    if domain is not None and domain in frame.columns:
        canonical[DOMAIN] = frame[domain].to_numpy()
    # digests are compared in each page's time order; build() rejects out-of-order input
    canonical[CHANGED] = 0
    obs_probe = Observations.from_frame(
        canonical, time_unit=time_unit, source=source, notes=tuple(notes)
    )
    codes, _ = pd.factorize(canonical[PAGE], sort=False)
    order = np.lexsort((np.arange(len(canonical)), codes))
    digests = frame[digest].to_numpy()[order]
    return obs_probe.replace(changed=changed_from_digests(digests, obs_probe.offsets))


def changed_from_digests(digests: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``int8`` change flags: a visit changed when its digest differs from the page's
    previous one; each page's first visit (``offsets[:-1]``) is its baseline (0).

    ``digests`` are sorted by page, then time; page ``i`` is ``offsets[i]:offsets[i + 1]``.
    """
    digests = np.asarray(digests, dtype=object)
    changed = np.zeros(len(digests), dtype=np.int8)
    if len(digests) > 1:
        changed[1:] = digests[1:] != digests[:-1]
    starts = offsets[:-1][offsets[:-1] < len(digests)]
    changed[starts] = 0
    return changed
