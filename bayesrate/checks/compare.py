"""Model comparison by PSIS-LOO on the per-page log-likelihood (the unit of prediction).

Leaving one *page* out asks how well the model predicts a new page's whole visit history,
which is what a prior for new pages is for. The per-page terms integrate each page's own
rate out (:mod:`bayesrate.checks.marginal`); PyMC's pointwise log-likelihood of a fit
(``RateModel.compute_log_likelihood``) is per interval group, a different unit, except
for the dynamic models, whose observed variable is the page with its path integrated out
by the fit's path integral (``marginal_page_loglik``'s terms where that is the grid or the
excursion model's Laplace paths; these are computed here alike for every model).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_PAGE

LOGLIK_VAR = "loglik_marginal"
MAX_LOO_DRAWS = 1000
#: a page's log-likelihood whose spread over the draws is within this many units in the last
#: place of its magnitude (at least 1) is constant: float noise of the integration (8.9e-16
#: seen on a page visited once, whose term is 0); PSIS cannot fit a tail to it, and its
#: exact term is used instead
CONSTANT_ULPS = 64
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
    """A DataTree with the integrated per-page log-likelihood (fitted models are converted)."""
    import xarray as xr

    return fit if isinstance(fit, xr.DataTree) else marginal_idata(fit)


def marginal_idata(model, max_draws: int = MAX_LOO_DRAWS, data=None):
    """Posterior (thinned to ``max_draws``) plus ``log_likelihood["loglik_marginal"]``.

    See :mod:`bayesrate.checks.marginal`: each page's own rate is integrated out given
    each draw's population parameters, so that leaving a page out is well posed. Every
    model gives its own terms (:meth:`~bayesrate.models.base.RateModel.marginal_page_loglik`:
    a fixed prior, a Normal population with or without multipliers, a page's whole path
    summed out).
    """
    import math

    import xarray as xr

    model._require_fit()
    if not model.marginal_loo:
        raise ValueError(f"leave-one-page-out is not available for the {model.model_type} model")
    data = data if data is not None else model.data_
    if data is None:
        raise ValueError("the model's data are needed (a compact fit: load it with data=...)")
    post = model.idata_["posterior"].to_dataset()
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    step = max(1, math.ceil(n_chain * n_draw / max_draws))
    post = post.isel(draw=slice(None, None, step))
    n_draw = post.sizes["draw"]
    ll = model.marginal_page_loglik(post, data)
    pages = post[DIM_PAGE].values if DIM_PAGE in post.coords else np.arange(ll.shape[1])
    loglik = xr.Dataset(
        {LOGLIK_VAR: (("chain", "draw", DIM_PAGE), ll.reshape(n_chain, n_draw, -1))},
        coords={"chain": post["chain"].values, "draw": post["draw"].values, DIM_PAGE: pages},
    )
    keep = [v for v in ("mu_global", "sigma_page", "sigma_domain") if v in post]
    return xr.DataTree.from_dict(
        {"posterior": post[keep] if keep else post[["log_rate"]], "log_likelihood": loglik}
    )


def loo(fit: Any):
    """PSIS-LOO of one fit (a fitted model or a DataTree); warnings are returned, not raised.

    A model with a fixed prior (``exact_loo``: the censored model) makes leaving a page
    out exact: its ELPD terms
    are the pages' marginal likelihoods, with no importance sampling (Pareto k = 0). So is
    leaving out a page whose log-likelihood is the same under every draw (a page visited
    once has no interval, and its term is 0), also when it varies by float noise only
    (:func:`constant_pages`): its importance weights are equal, and PSIS, which cannot fit
    a tail to equal values, is run on the other pages only.
    """
    import arviz as az
    import xarray as xr

    if not isinstance(fit, xr.DataTree) and fit.exact_loo:
        return _exact_loo(fit), []
    tree = _idata(fit)
    loglik = tree["log_likelihood"][LOGLIK_VAR]
    constant = constant_pages(loglik)
    if constant.all():
        return _elpd_data(loglik.isel(chain=0, draw=0, drop=True), 0.0, loglik.sizes), []
    if constant.any():
        tree = tree.copy()
        tree["log_likelihood"] = tree["log_likelihood"].to_dataset().isel({DIM_PAGE: ~constant})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = az.loo(tree, var_name=LOGLIK_VAR, pointwise=True)
    if constant.any():
        result = _with_exact_pages(result, loglik, constant)
    return result, [str(w.message) for w in caught]


def constant_pages(loglik) -> np.ndarray:
    """Which pages' log-likelihood is the same under every draw, up to float noise.

    Parameters
    ----------
    loglik : xarray.DataArray
        Per-page log-likelihood with dimensions ``chain``, ``draw`` and ``page``.

    Returns
    -------
    numpy.ndarray
        Boolean per page: exactly equal over the draws, or its spread is at most
        :data:`CONSTANT_ULPS` units in the last place of its largest magnitude (at least 1).
    """
    high = loglik.max(("chain", "draw")).values
    low = loglik.min(("chain", "draw")).values
    # at least 1: a page visited once has a term of 0 computed from terms of order 1
    scale = np.maximum(np.maximum(np.abs(high), np.abs(low)), 1.0)
    with np.errstate(invalid="ignore"):
        tolerance = CONSTANT_ULPS * np.spacing(scale)
        return (high == low) | (np.isfinite(scale) & (high - low <= tolerance))


def _elpd_data(elpd_i, p: float, sizes):
    """An ``ELPDDataLOO`` whose pointwise terms ``elpd_i`` are exact (Pareto k 0)."""
    import xarray as xr
    from arviz_stats.utils import ELPDDataLOO

    n = elpd_i.size
    values = elpd_i.values
    return ELPDDataLOO(
        elpd=float(values.sum()),
        se=float(np.sqrt(n * values.var())),
        p=float(p),
        n_samples=int(sizes["chain"] * sizes["draw"]),
        n_data_points=n,
        scale="log",
        warning=False,
        good_k=0.7,
        elpd_i=elpd_i,
        pareto_k=xr.zeros_like(elpd_i),
    )


def _with_exact_pages(result, loglik, constant: np.ndarray):
    """``result`` (PSIS-LOO of the pages not ``constant``) with the constant pages put
    back in their places: ELPD term the constant, Pareto k 0, no effective parameters,
    equal importance weights; totals and standard error over every page."""
    import xarray as xr

    exact = loglik.isel({DIM_PAGE: constant})
    n_samples = loglik.sizes["chain"] * loglik.sizes["draw"]
    fill = {
        "elpd_i": exact.isel(chain=0, draw=0, drop=True),
        "pareto_k": 0.0,
        "influence_pareto_k": 0.0,
        "p_loo_i": 0.0,
        "n_eff_i": float(n_samples),
        "log_weights": -np.log(n_samples),
    }
    for name, value in fill.items():
        part = getattr(result, name, None)
        if not isinstance(part, xr.DataArray) or DIM_PAGE not in part.dims:
            continue
        if not isinstance(value, xr.DataArray):
            template = exact if "chain" in part.dims else exact.isel(chain=0, draw=0, drop=True)
            value = xr.full_like(template, value, dtype=float).transpose(*part.dims)
        whole = xr.concat([part, value], dim=DIM_PAGE)
        setattr(result, name, whole.sel({DIM_PAGE: loglik[DIM_PAGE].values}))
    values = result.elpd_i.values
    result.elpd = float(values.sum())
    result.se = float(np.sqrt(values.size * values.var()))
    result.n_data_points = values.size
    return result


def _exact_loo(model):
    from scipy.special import logsumexp

    tree = marginal_idata(model)
    loglik = tree["log_likelihood"][LOGLIK_VAR]
    elpd_i = loglik.isel(chain=0, draw=0, drop=True)
    conditional = model.page_loglik(MAX_LOO_DRAWS)
    lppd = logsumexp(conditional, axis=0) - np.log(len(conditional))
    result = _elpd_data(elpd_i, float(lppd.sum() - elpd_i.values.sum()), loglik.sizes)
    result.n_samples = len(conditional)
    return result


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
        ``loglik_marginal`` over ``page``). All must be fitted to the same pages.
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
            table = az.compare(loos, method="BB-pseudo-BMA", round_to="none")
        caught_all += [str(w.message) for w in caught]
    return Comparison(table=table, pareto_k=pareto, verdict=_verdict(table, pareto),
                      warnings=sorted(set(caught_all)))  # fmt: skip


def _verdict(table: pd.DataFrame, pareto: Mapping[str, Mapping[str, int]]) -> str:
    best = str(table.index[0])
    lines = []
    if len(table) == 1:
        lines.append(f"only {best} was fitted; ELPD-LOO {table['elpd'].iloc[0]:.1f}")
    for name, row in table.iloc[1:].iterrows():
        diff, dse = abs(float(row["elpd_diff"])), float(row["dse"])
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
