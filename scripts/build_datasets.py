"""Derive the embedded Open Terms Archive datasets from ../shared/data/open-terms-archive.

Writes, per collection, ``bayesrate/datasets/data/ota-<collection>.parquet`` (one row per
changelog event: path, service, terms_type, time, event — commit hashes and subjects are
dropped) and ``ota-<collection>-documents.parquet`` (one row per document), plus
``ATTRIBUTION.md``; and ``tldr-pages.parquet`` from ``tldr-pages-history/history.csv.gz``
(one row per event: page, domain, time to the second in UTC, event; CC-BY 4.0).
Run: ``.venv/bin/python scripts/build_datasets.py [SHARED_DIR]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bayesrate" / "datasets" / "data"
COLLECTIONS = ("contrib", "pga", "genai-eu")


def main(shared: Path) -> None:
    src = shared / "data" / "open-terms-archive"
    OUT.mkdir(parents=True, exist_ok=True)
    for name in COLLECTIONS:
        log = pd.read_csv(src / f"{name}-versions-changelog.csv")
        docs = pd.read_csv(src / f"{name}-versions-documents.csv")
        events = pd.DataFrame(
            {
                "path": log["path"].astype("category"),
                "service": log["service"].astype("category"),
                "terms_type": log["terms_type"].astype("category"),
                "time_utc": pd.to_datetime(log["time_utc"], utc=True),
                "event": log["event"].astype("category"),
            }
        )
        events.to_parquet(OUT / f"ota-{name}.parquet", index=False, compression="zstd")
        docs[["path", "service", "terms_type", "present_in_head"]].to_parquet(
            OUT / f"ota-{name}-documents.parquet", index=False, compression="zstd"
        )
        print(f"{name}: {len(events)} events, {len(docs)} documents")
    build_tldr(shared)


def build_tldr(shared: Path) -> None:
    """The tldr-pages change history as a compact Parquet (ids as text, times in seconds)."""
    src = shared / "data" / "tldr-pages-history" / "history.csv.gz"
    raw = pd.read_csv(src, dtype=str, keep_default_na=False)
    events = pd.DataFrame(
        {
            "page": raw["page"].astype("category"),
            "domain": raw["domain"].astype("category"),
            "time": pd.to_datetime(raw["time"], utc=True, format="ISO8601").astype(
                "datetime64[s, UTC]"
            ),
            "event": raw["event"].astype("category"),
        }
    )
    events.to_parquet(OUT / "tldr-pages.parquet", index=False, compression="zstd")
    print(f"tldr-pages: {len(events)} events of {events['page'].nunique()} pages")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared")
