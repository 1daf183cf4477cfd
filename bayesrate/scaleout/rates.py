"""Stage 4: budgeted optimal revisit rates for every URL, multipliers by distributed bisection.

The maths is :mod:`bayesrate.scheduler.optimal`'s (``docs/science.md`` §5): page ``i``'s
optimal fetch rate at multiplier ``μ`` is :func:`~bayesrate.scheduler.optimal.page_fetch_rates`
(freshness or harmonic staleness, within ``[lower, upper]``); host ``h``'s multiplier
``μ*_h`` makes its fetches equal its cap (:func:`~bayesrate.scheduler.optimal.host_multipliers`)
and the budget's ``μ`` makes the total equal the budget with every page at
``max(μ, μ*_h)`` (:func:`~bayesrate.scheduler.optimal.budget_multiplier`). Here the sums
those solvers ask for are sums over partitions: each partition's arrays (weights, change
rates, host codes) stay in the workers' memory, and every bisection step is one round of
partition sums, added up on the client — 90 rounds per multiplier, a few floats (one per
host with caps) per partition and round. The answer equals
:func:`~bayesrate.scheduler.optimal.optimal_rates` on the gathered data to float tolerance.

Change rates are the posterior means of stage 3 (``rate_per_day``); weights are 1 (every
URL equally important). Output: ``OUT/rates/part-K.parquet`` (``page, domain,
rate_per_day, fetch_per_day``; ``OUT/rates/host=<H>/part-K.parquet`` when the posteriors
are in the host layout, :mod:`~bayesrate.scaleout.layout`), ``_manifest.json`` (budget,
multipliers, totals). In the host layout every host's pages are in one part (or, for a
host split by size, a few), so a host's cap is nearly partition-local; the bisection is
the same for both layouts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.scaleout.layout import layout_of, tables_for
from bayesrate.scaleout.staging import Staging, load_manifest, read_part, write_part
from bayesrate.scheduler.optimal import (
    OBJECTIVE_DESCRIPTIONS,
    OBJECTIVES,
    budget_multiplier,
    host_multipliers,
    page_fetch_rates,
)


def load_part(posteriors_dir: str, k: int, hosts: pd.Index) -> dict[str, np.ndarray]:
    """One partition's arrays: pages, host codes, change rates per hour, weights."""
    frame = read_part(posteriors_dir, "posteriors", k, columns=["page", "domain", "rate_per_day"])
    lam = frame["rate_per_day"].to_numpy(dtype=np.float64) / HOURS_PER_DAY
    return {
        "page": frame["page"].to_numpy(dtype=object),
        "domain": frame["domain"].to_numpy(dtype=object),
        "host": hosts.get_indexer(frame["domain"].to_numpy(dtype=object)).astype(np.int64),
        "rate": lam,
        "weight": np.ones(len(lam)),
    }


def part_domains(posteriors_dir: str, k: int) -> np.ndarray:
    frame = read_part(posteriors_dir, "posteriors", k, columns=["domain"])
    return frame["domain"].unique()


def part_fetches(part: dict, objective: str, log_mu_host: np.ndarray, lo: float, hi: float):
    mu = log_mu_host[part["host"]]
    return page_fetch_rates(objective, part["weight"], part["rate"], mu, lo, hi)


def part_host_sums(part, objective, log_mu_host, lo, hi, n_hosts) -> np.ndarray:
    p = part_fetches(part, objective, log_mu_host, lo, hi)
    return np.bincount(part["host"], weights=p, minlength=n_hosts)


def part_check(part: dict) -> dict[str, Any]:
    lam = part["rate"]
    bad = ~np.isfinite(lam) | (lam < 0)
    return {"pages": len(lam), "bad": part["page"][bad][:10].tolist(), "n_bad": int(bad.sum())}


def write_rates_part(part, k, objective, log_mu_host, lo, hi, staging, layout="url") -> dict:
    p = part_fetches(part, objective, log_mu_host, lo, hi)
    frame = pd.DataFrame(
        {
            "page": part["page"],
            "domain": part["domain"],
            "rate_per_day": part["rate"] * HOURS_PER_DAY,
            "fetch_per_day": p * HOURS_PER_DAY,
        }
    )
    tables = tables_for(layout, "rates", frame, part["domain"])
    return write_part(staging, k, tables, {"pages": len(frame), "fetch": float(p.sum())})


def rates(
    posteriors_dir: str | Path,
    out: str | Path,
    *,
    budget_per_day: float,
    objective: str = "freshness",
    min_interval_hours: float = 0.0,
    max_interval_hours: float = np.inf,
    host_cap_per_day: float | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run stage 4 on a posteriors output; returns the manifest.

    Parameters
    ----------
    budget_per_day
        Total fetches per day over all URLs.
    objective
        ``"freshness"`` (Poisson-timed fetches), ``"periodic"`` (fetches on a fixed
        schedule) or ``"harmonic"`` (:mod:`bayesrate.scheduler.optimal`); the manifest
        says which, in words too (``objective_solved``).
    min_interval_hours, max_interval_hours
        No URL is fetched more often than every ``min_interval_hours`` (rate cap) nor
        less often than every ``max_interval_hours`` (exploration floor).
    host_cap_per_day
        Politeness: at most this many fetches per day per host (domain).

    Raises
    ------
    ObservationError
        Bad budget/bounds, floors above the budget or a host's cap, non-finite rates.
    """
    import dask

    from bayesrate.scaleout.cluster import active_client, compute

    if objective not in OBJECTIVES:
        raise ObservationError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if not (np.isfinite(budget_per_day) and budget_per_day >= 0):
        raise ObservationError(f"budget must be a finite number >= 0, got {budget_per_day!r}")
    if host_cap_per_day is not None and not host_cap_per_day >= 0:
        raise ObservationError(f"host cap must be >= 0, got {host_cap_per_day!r}")
    if not 0 <= min_interval_hours <= max_interval_hours:
        raise ObservationError("intervals must satisfy 0 <= min_interval <= max_interval")
    t0 = time.perf_counter()
    upstream = load_manifest(posteriors_dir, stage="posteriors")
    n_parts = int(upstream["partitions"])
    layout = layout_of(upstream)
    src = str(Path(posteriors_dir).absolute())
    arguments = {
        "stage": "rates",
        "layout": layout,
        "input": src,
        "input_run": upstream["run_key"],
        "budget_per_day": budget_per_day,
        "objective": objective,
        "min_interval_hours": min_interval_hours,
        "max_interval_hours": max_interval_hours,
        "host_cap_per_day": host_cap_per_day,
    }
    staging = Staging(out, arguments)
    if staging.is_committed():
        return load_manifest(out)
    staging.open()
    budget = budget_per_day / HOURS_PER_DAY
    lo = 0.0 if not np.isfinite(max_interval_hours) else 1.0 / max_interval_hours
    hi = np.inf if min_interval_hours == 0 else 1.0 / min_interval_hours

    delayed = dask.delayed
    domains = compute([delayed(part_domains)(src, k) for k in range(n_parts)])
    hosts = pd.Index(np.unique(np.concatenate(domains).astype(str)) if domains else [])
    n_hosts = len(hosts)
    parts = [delayed(load_part)(src, k, hosts) for k in range(n_parts)]
    client = active_client()
    parts = client.persist(parts) if client is not None else list(dask.persist(*parts))
    checks = compute([delayed(part_check)(p) for p in parts])
    n_pages = sum(c["pages"] for c in checks)
    if any(c["n_bad"] for c in checks):
        bad = [page for c in checks for page in c["bad"]]
        raise ObservationError("change rates must be finite and >= 0", pages=bad)
    floors = lo * n_pages
    if floors > budget * (1 + 1e-12):
        raise ObservationError(
            f"exploration floors need {floors * HOURS_PER_DAY:.6g} fetches per day, more "
            f"than the budget {budget_per_day:.6g}",
            field="budget",
        )
    caps = np.full(n_hosts, np.inf)
    if host_cap_per_day is not None:
        caps[:] = host_cap_per_day / HOURS_PER_DAY

    def host_sum(log_mu_host: np.ndarray) -> np.ndarray:
        sums = compute(
            [delayed(part_host_sums)(p, objective, log_mu_host, lo, hi, n_hosts) for p in parts]
        )
        return np.sum(sums, axis=0) if sums else np.zeros(n_hosts)

    if host_cap_per_day is not None:
        floor_sum = host_sum(np.full(n_hosts, np.inf))  # every page at its floor
        over = np.flatnonzero(floor_sum > caps * (1 + 1e-12))
        if len(over):
            raise ObservationError(
                "exploration floors exceed the host cap",
                field="host_caps",
                pages=hosts[over].tolist(),
            )
    host_mu = host_multipliers(host_sum, caps)

    def total(log_mu: float) -> float:
        return float(host_sum(np.maximum(log_mu, host_mu)).sum())

    log_mu = budget_multiplier(total, budget)
    final = np.maximum(log_mu, host_mu)
    done, todo = staging.pending(n_parts)
    task = delayed(write_rates_part, pure=False)
    tasks = [task(parts[k], k, objective, final, lo, hi, str(staging.path), layout) for k in todo]
    for k, summary in zip(todo, compute(tasks, progress=progress), strict=True):
        done[k] = summary
    fetch = float(sum(done[k]["fetch"] for k in range(n_parts)))
    manifest = {
        "stage": "rates",
        "layout": layout,
        "partitions": n_parts,
        "pages": n_pages,
        "hosts": n_hosts,
        "objective": objective,
        "objective_solved": OBJECTIVE_DESCRIPTIONS[objective],
        "budget_per_day": budget_per_day,
        "fetch_per_day": fetch * HOURS_PER_DAY,
        "log_multiplier": log_mu,
        "hosts_at_cap": int(np.isfinite(host_mu).sum()),
        "seconds": time.perf_counter() - t0,
        "tables": {"rates": ["page", "domain", "rate_per_day", "fetch_per_day"]},
    }
    staging.commit(manifest)
    return manifest
