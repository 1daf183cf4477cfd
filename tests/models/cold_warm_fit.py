"""Fit the core models at a fixed seed and save their draws (run by ``test_reproducible.py``
in a fresh process, once against an empty compile cache and once against the warm one)."""

from __future__ import annotations

import sys
import warnings

import numpy as np

from bayesrate.models import get_model
from bayesrate.simulate import regular_grid, simulate_pages

#: the core models and the configs they are checked in (the excursion model's epochs
#: are short so that the tiny world has several)
CORE = {
    "censored": {},
    "hierarchical": {},
    "modulated": {"timezone": "UTC"},
    "excursion": {"epoch_days": 20},
}
SAMPLER = {"draws": 60, "tune": 100, "chains": 2, "seed": 11}


def world():
    """60 pages in 4 domains, crawled twice a day for 60 days."""
    rng = np.random.default_rng(5)
    rates = np.exp(rng.normal(np.log(0.03), 1.0, 60))
    domains = np.array([f"d{i % 4}" for i in range(60)])
    grid = regular_grid(0.0, 24.0 * 60, 12.0) + 1.0
    return simulate_pages(rates, grid, domains, rng=7).observations


def main(out: str, names: list[str]) -> None:
    obs = world()
    arrays = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = get_model(name)(CORE[name], SAMPLER).fit(obs)
        for var, values in fit.idata_["posterior"].data_vars.items():
            arrays[f"{name}/{var}"] = np.asarray(values)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or list(CORE))
