"""``scale aggregate`` on a log written in tiny Parquet row groups: packed vs one per piece.

Usage::

    .venv/bin/python benchmarks/bench_small_pieces.py [--rows 20000] [--row-group 5]
        [--dir /tmp/bench-small-pieces]

Writes one Parquet file of ``--rows`` rows (100 daily visits per URL, 50 hosts, rows
shuffled) in row groups of ``--row-group`` rows, then runs
:func:`bayesrate.scaleout.aggregate.aggregate` on a 2-worker ``LocalCluster`` twice: with
the default input packing (consecutive row groups read together, up to 1 M rows per input
partition) and with ``input_rows=1`` (every row group its own partition: the baseline, how
the reader worked before packing). Prints rows/s of each and the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

VISITS = 100


def write(root: Path, rows: int, row_group: int) -> Path:
    rng = np.random.default_rng(1)
    n_pages = rows // VISITS
    page = np.repeat(np.arange(n_pages), VISITS)
    visit = np.tile(np.arange(VISITS), n_pages)
    changed = np.where(visit == 0, np.nan, rng.integers(0, 2, len(page)).astype(float))
    frame = pd.DataFrame(
        {
            "page": [f"https://h{p % 50}.org/{p}" for p in page],
            "domain": [f"h{p % 50}.org" for p in page],
            "time": 475_000.0 + visit * 24.0 + rng.uniform(0, 1, len(page)),
            "changed": changed,
        }
    ).sample(frac=1.0, random_state=1)
    path = root / "log.parquet"
    frame.to_parquet(path, row_group_size=row_group, index=False)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--row-group", type=int, default=5)
    parser.add_argument("--dir", default="/tmp/bench-small-pieces")
    args = parser.parse_args()
    import pyarrow.parquet as pq

    from bayesrate.scaleout.aggregate import aggregate
    from bayesrate.scaleout.cluster import connect

    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log = write(root, args.rows, args.row_group)
    groups = pq.ParquetFile(log).metadata.num_row_groups
    print(f"[log] {args.rows:,} rows in {groups:,} row groups of {args.row_group}")
    seconds = {}
    with connect(workers=2) as _client:
        for name, input_rows in (("packed", None), ("one per row group", 1)):
            t0 = time.perf_counter()
            manifest = aggregate(log, root / f"stats-{input_rows}", input_rows=input_rows)
            seconds[name] = time.perf_counter() - t0
            print(
                f"[{name}] {seconds[name]:.1f} s, {args.rows / seconds[name]:,.0f} rows/s, "
                f"{manifest['input_partitions']:,} input partitions"
            )
    ratio = seconds["one per row group"] / seconds["packed"]
    print(f"[ratio] packed is {ratio:.1f}x the baseline's rows/s")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
