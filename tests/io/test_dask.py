"""The Dask path gives the same sufficient statistics as the in-memory path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")

from bayesrate import simulate as sim  # noqa: E402
from bayesrate.errors import ObservationError  # noqa: E402
from bayesrate.io.dask import interval_stats_from_dask  # noqa: E402


@pytest.fixture(scope="module")
def frame():
    rng = sim.rng_from("dask-path")
    per_page = [
        np.cumsum(rng.choice([1.0, 6.0, 24.0], int(rng.integers(1, 60)))) for _ in range(40)
    ]
    data = sim.simulate_pages(rng.gamma(1.0, 0.05, 40), per_page, rng=rng,
                              domains=[f"d{i % 4}" for i in range(40)])  # fmt: skip
    return data.observations.to_frame().astype({"changed": "float64"})


def test_same_statistics_as_in_memory(frame):
    from bayesrate.observations import Observations

    ddf = dd.from_pandas(frame, npartitions=1).shuffle("page", npartitions=4)
    got = interval_stats_from_dask(ddf)
    want = Observations.from_frame(frame).interval_stats
    order = want.pages.get_indexer(got.pages)
    assert (order >= 0).all() and len(order) == want.n_pages
    assert np.array_equal(got.n_visits, want.n_visits[order])
    assert np.allclose(got.exposure, want.exposure[order])
    assert np.array_equal(got.n_changes, want.n_changes[order])
    g = got.to_frame().sort_values(["page", "tau_hours"]).reset_index(drop=True)
    w = want.to_frame().sort_values(["page", "tau_hours"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(g, w)
    assert np.allclose(got.loglik(np.full(got.n_pages, 0.05)),
                       want.loglik(np.full(want.n_pages, 0.05))[order])  # fmt: skip


def test_page_split_across_partitions_is_an_error(frame):
    quiet = frame.assign(changed=frame["changed"].where(frame["changed"].isna(), 0.0))
    ddf = dd.from_pandas(quiet.sort_values("time"), npartitions=3, sort=False)
    with pytest.raises(ObservationError, match="more than one partition"):
        interval_stats_from_dask(ddf)


def test_validation_errors_surface_from_partitions(frame):
    bad = frame.copy()
    bad.loc[5, "changed"] = 3
    ddf = dd.from_pandas(bad, npartitions=1)
    with pytest.raises(ObservationError, match="0 or 1"):
        interval_stats_from_dask(ddf)
