"""Stage 2: the hierarchy on a stratified sample of pages → a ``priors.json`` artifact.

The sample is the scale path's (:func:`bayesrate.models.scale.stratified_sample`'s
allocation: every domain gets ``min(n_d, 2)`` pages, the rest of ``n_sample`` in proportion
to domain size), drawn without a global shuffle: each page gets a pseudo-random key from
a hash of its URL and the seed, every partition keeps its ``k_d`` smallest keys per domain,
and the client keeps the ``k_d`` smallest of those — a uniform sample without replacement
per domain (a *bottom-k* sample), the same for any partitioning of the same pages.

The sampled pages' interval groups are turned back into visits (each group's intervals
laid end to end: the constant-rate likelihood, and so every statistic the hierarchical
model uses, is unchanged by the order of a page's intervals), the hierarchical model is
fitted by NUTS, and its per-domain Gamma priors are exported
(:func:`bayesrate.export.domain_priors`). The artifact is written only when the fit meets
the convergence gates (R-hat, ESS, divergences), unless forced — then it says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import CHANGED, DOMAIN, PAGE, TIME
from bayesrate.errors import ArtifactError
from bayesrate.observations import Observations
from bayesrate.scaleout.staging import load_manifest, read_part


def page_keys(pages: np.ndarray, seed: str) -> np.ndarray:
    """A pseudo-random 64-bit key per page label: a hash of the label and the seed."""
    values = pd.Series(pages, dtype=object)
    return pd.util.hash_pandas_object(values, index=False, hash_key=_hash_key(seed)).to_numpy()


def _hash_key(seed: str) -> str:
    import hashlib

    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def allocation(sizes: pd.Series, n_sample: int, min_per_domain: int = 2) -> pd.Series:
    """Pages to sample per domain (the scale path's stratified allocation)."""
    from bayesrate.models.scale import stratified_allocation

    return pd.Series(
        stratified_allocation(sizes.to_numpy(), n_sample, min_per_domain), index=sizes.index
    )


def part_domain_sizes(stats_dir: str, k: int) -> pd.Series:
    frame = read_part(stats_dir, "pages", k, columns=["domain"])
    return frame["domain"].value_counts()


def part_candidates(stats_dir: str, k: int, alloc: dict, seed: str) -> pd.DataFrame:
    frame = read_part(stats_dir, "pages", k, columns=["page", "domain"])
    frame = frame.assign(key=page_keys(frame["page"].to_numpy(dtype=object), seed), part=k)
    frame = frame.sort_values(["domain", "key"], kind="stable")
    rank = frame.groupby("domain", sort=False).cumcount().to_numpy()
    quota = frame["domain"].map(alloc).fillna(0).to_numpy()
    return frame[rank < quota]


def part_sample_stats(stats_dir: str, k: int, pages: list[str]) -> tuple[pd.DataFrame, ...]:
    from bayesrate.scaleout.aggregate import GROUP_COLUMNS, PAGE_COLUMNS

    p = read_part(stats_dir, "pages", k, columns=list(PAGE_COLUMNS))
    g = read_part(stats_dir, "groups", k, columns=list(GROUP_COLUMNS))
    keep = set(pages)
    return p[p["page"].isin(keep)], g[g["page"].isin(keep)]


def draw_sample(stats_dir: str | Path, n_sample: int, seed: str) -> tuple[pd.DataFrame, ...]:
    """``(pages, groups)`` tables of a stratified bottom-k sample of the aggregate's pages."""
    import dask

    from bayesrate.scaleout.cluster import compute

    src = str(Path(stats_dir).absolute())
    n_parts = int(load_manifest(stats_dir, stage="aggregate")["partitions"])
    delayed = dask.delayed
    sizes = compute([delayed(part_domain_sizes)(src, k) for k in range(n_parts)])
    total = pd.concat(sizes).groupby(level=0).sum().sort_index()
    alloc = allocation(total, n_sample).to_dict()
    cands = compute([delayed(part_candidates)(src, k, alloc, seed) for k in range(n_parts)])
    cands = pd.concat(cands, ignore_index=True).sort_values(["domain", "key"], kind="stable")
    rank = cands.groupby("domain", sort=False).cumcount().to_numpy()
    chosen = cands[rank < cands["domain"].map(alloc).to_numpy()]
    by_part = chosen.groupby("part")["page"].apply(list).to_dict()
    parts = compute([delayed(part_sample_stats)(src, k, pages) for k, pages in by_part.items()])
    pages = pd.concat([p for p, _ in parts], ignore_index=True)
    groups = pd.concat([g for _, g in parts], ignore_index=True)
    return pages, groups


def observations_from_groups(pages: pd.DataFrame, groups: pd.DataFrame) -> Observations:
    """Visits whose interval statistics are exactly ``groups`` (intervals laid end to end,
    unchanged before changed within each length; each page starts at hour 0)."""
    groups = groups.sort_values(["page", "tau_hours"], kind="stable")
    rows_page, rows_tau, rows_changed = [], [], []
    for flag, count in ((0, groups["n"] - groups["changed"]), (1, groups["changed"])):
        reps = count.to_numpy(dtype=np.int64)
        rows_page.append(np.repeat(groups["page"].to_numpy(dtype=object), reps))
        rows_tau.append(np.repeat(groups["tau_hours"].to_numpy(dtype=float), reps))
        rows_changed.append(np.full(reps.sum(), flag, dtype=np.int8))
    page = np.concatenate(rows_page)
    tau = np.concatenate(rows_tau)
    changed = np.concatenate(rows_changed)
    order = np.lexsort((changed, tau, pd.factorize(page, sort=True)[0]))
    page, tau, changed = page[order], tau[order], changed[order]
    # one baseline visit per page at hour 0, then cumulative interval ends
    labels = pages["page"].to_numpy(dtype=object)
    base = pd.DataFrame({PAGE: labels, TIME: 0.0, CHANGED: 0})
    ends = pd.DataFrame({PAGE: page, TIME: tau, CHANGED: changed})
    ends[TIME] = ends.groupby(PAGE, sort=False)[TIME].cumsum()
    frame = pd.concat([base, ends], ignore_index=True)
    frame[DOMAIN] = frame[PAGE].map(dict(zip(labels, pages["domain"], strict=True)))
    return Observations.from_frame(frame, time_unit="h", source="scale sample")


def fit(
    stats_dir: str | Path,
    out: str | Path,
    *,
    n_sample: int = 2000,
    seed: str = "scale",
    sampler_config: dict[str, Any] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Fit the hierarchy on a stratified sample and write ``OUT/priors.json``.

    Raises
    ------
    ArtifactError
        When the fit misses the convergence gates and ``force`` is false.
    """
    from bayesrate.atomic import atomic_directory
    from bayesrate.export import domain_priors
    from bayesrate.models import HierarchicalModel

    t0 = time.perf_counter()
    pages, groups = draw_sample(stats_dir, n_sample, seed)
    obs = observations_from_groups(pages, groups)
    model = HierarchicalModel(sampler_config={"seed": seed, **(sampler_config or {})})
    model.fit(obs)
    diag = model.diagnostics_
    summary = {
        "pages_sampled": int(obs.n_pages),
        "domains": len(obs.domains),
        "converged": bool(model.converged_),
        "r_hat_max": diag.r_hat_max,
        "ess_bulk_min": diag.ess_bulk_min,
        "divergences": diag.divergences,
        "seconds": time.perf_counter() - t0,
    }
    if not model.converged_ and not force:
        raise ArtifactError(
            "the hierarchical fit on the sample missed the convergence gates "
            f"({'; '.join(diag.failures)}); nothing written (--force writes it anyway, "
            "marked as forced)"
        )
    meta = {
        "dataset": str(Path(stats_dir).absolute()),
        "forced": not model.converged_,
        "scale_sample": summary,
    }
    priors = domain_priors(model, metadata=meta)
    with atomic_directory(out) as directory:
        priors.save(directory)
        (Path(directory) / "fit_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
