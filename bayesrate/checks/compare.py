"""Model comparison by PSIS-LOO on the per-page log-likelihood (the unit of prediction).

Each fit stores ``log_likelihood["loglik"]`` with dims ``(chain, draw, page)``: leaving one
*page* out asks how well the model predicts a new page's whole visit history, which is
what a prior for new pages is for.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

LOGLIK_VAR = "loglik"
#: Pareto k thresholds (ArviZ 1 uses a sample-size dependent "good" bound, ~0.7 at most)
K_VERY_BAD = 1.0


@dataclass
class Comparison:
    """ELPD-LOO table, Pareto-k counts per model, and a short verdict."""

    table: pd.DataFrame
    pareto_k: dict[str, dict[str, int]]
    verdict: str
    warnings: list[str] = field(default_factory=list)

    @property
    def best(self) -> str:
        return str(self.table.index[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": {
                name: {k: _plain(v) for k, v in row.items()}
                for name, row in self.table.to_dict(orient="index").items()
            },
            "pareto_k": self.pareto_k,
            "verdict": self.verdict,
            "best": self.best,
            "warnings": self.warnings,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _idata(fit: Any):
    return getattr(fit, "idata_", fit)


def loo(fit: Any):
    """PSIS-LOO of one fit (a fitted model or its DataTree); warnings are returned, not raised."""
    import arviz as az

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = az.loo(_idata(fit), var_name=LOGLIK_VAR, pointwise=True)
    return result, [str(w.message) for w in caught]


def pareto_k_counts(result) -> dict[str, int]:
    k = np.asarray(result.pareto_k).ravel()
    good = float(getattr(result, "good_k", 0.7))
    return {
        "good": int(np.sum(k <= good)),
        "bad": int(np.sum((k > good) & (k <= K_VERY_BAD))),
        "very_bad": int(np.sum(k > K_VERY_BAD)),
        "good_threshold": good,  # type: ignore[dict-item]
    }


def compare(fits: Mapping[str, Any]) -> Comparison:
    """Compare fitted models by ELPD-LOO (ArviZ ``compare``) with Pareto-k diagnostics.

    Parameters
    ----------
    fits
        Model name → fitted model (or DataTree with a ``log_likelihood`` group holding
        ``loglik`` over ``page``). All must be fitted to the same pages.
    """
    import arviz as az

    if len(fits) < 1:
        raise ValueError("nothing to compare")
    caught_all: list[str] = []
    loos = {}
    pareto = {}
    for name, fit in fits.items():
        result, caught = loo(fit)
        loos[name] = result
        pareto[name] = pareto_k_counts(result)
        caught_all += [f"{name}: {m}" for m in caught]
    if len(fits) == 1:
        name, result = next(iter(loos.items()))
        table = pd.DataFrame(
            {"rank": [0], "elpd": [result.elpd], "se": [result.se], "p": [result.p],
             "elpd_diff": [0.0], "dse": [0.0], "weight": [1.0]},
            index=[name],
        )  # fmt: skip
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = az.compare(loos)
        caught_all += [str(w.message) for w in caught]
    return Comparison(table=table, pareto_k=pareto, verdict=_verdict(table, pareto),
                      warnings=sorted(set(caught_all)))  # fmt: skip


def _verdict(table: pd.DataFrame, pareto: Mapping[str, Mapping[str, int]]) -> str:
    best = str(table.index[0])
    lines = []
    if len(table) == 1:
        lines.append(f"only {best} was fitted; ELPD-LOO {table['elpd'].iloc[0]:.1f}")
    for name, row in table.iloc[1:].iterrows():
        diff, dse = float(row["elpd_diff"]), float(row["dse"])
        if diff > 2 * max(dse, 1e-9):
            lines.append(f"{best} predicts held-out pages better than {name} "
                         f"(ΔELPD = {diff:.1f} ± {dse:.1f})")  # fmt: skip
        else:
            lines.append(f"{best} and {name} are indistinguishable "
                         f"(ΔELPD = {diff:.1f} ± {dse:.1f}, within 2 SE)")  # fmt: skip
    unreliable = [n for n, k in pareto.items() if k["bad"] + k["very_bad"] > 0]
    if unreliable:
        lines.append(
            "Pareto k above the reliability threshold for some pages in: "
            + ", ".join(f"{n} ({pareto[n]['bad'] + pareto[n]['very_bad']})" for n in unreliable)
            + " — those pages' LOO terms are approximate (influential pages)"
        )
    return "; ".join(lines) + "."
