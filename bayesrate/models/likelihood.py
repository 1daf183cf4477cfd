"""Exact interval-censored log-likelihoods on sufficient statistics, as tensors and in numpy.

An interval of integrated rate ``Λ`` contributes ``log(1 − e^{−Λ})`` when a change was
detected and ``−Λ`` otherwise (``docs/science.md`` §1). Models work with log-rates, so the
changed term is written as a function of ``log Λ``:

``log1mexp_of_log(a) = log(1 − exp(−exp(a)))``

computed as ``log(−expm1(−Λ))`` for ``Λ ≤ ln 2``, ``log1p(−exp(−Λ))`` above (Mächler 2012),
and by the series
``a − e^a/2 + e^{2a}/24`` for very small ``Λ`` (``a < −20``), where ``exp(a)`` would lose
everything to rounding. Both branches are finite everywhere, so gradients through the
switch are finite too.

The tensor functions build the model's log-density; the numpy functions evaluate the same
formula for every posterior draw and return the **per-page** pointwise log-likelihood that
is stored in each fit's ``log_likelihood`` group (the unit of prediction is the page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from bayesrate.sufficient import HourOfWeekStats, IntervalStats

#: below this log Λ the series expansion replaces log(-expm1(-Λ))
SERIES_BELOW = -20.0
LN2 = float(np.log(2.0))
#: draws per chunk when evaluating pointwise log-likelihoods in numpy
CHUNK_DRAWS = 256


def log1mexp_of_log(log_lam):
    """``log(1 − exp(−Λ))`` from ``log Λ``, stable for any ``log Λ`` (PyTensor)."""
    import pytensor.tensor as pt

    lam = pt.exp(pt.maximum(log_lam, SERIES_BELOW))
    # PyTensor's scalar log1mexp branches per element (Mächler 2012: log(-expm1) for
    # Λ <= ln 2, log1p(-exp) above) and evaluates only the branch it needs
    exact = pt.log1mexp(-lam)
    small = pt.minimum(log_lam, SERIES_BELOW)
    lam_small = pt.exp(small)
    series = small - lam_small / 2 + lam_small**2 / 24
    return pt.switch(log_lam > SERIES_BELOW, exact, series)


def np_log1mexp_of_log(log_lam: np.ndarray) -> np.ndarray:
    """Numpy twin of :func:`log1mexp_of_log`."""
    log_lam = np.asarray(log_lam, dtype=np.float64)
    with np.errstate(over="ignore"):
        lam = np.exp(np.maximum(log_lam, SERIES_BELOW))
    exact = np.where(
        lam <= LN2,
        np.log(-np.expm1(-np.minimum(lam, LN2))),
        np.log1p(-np.exp(-np.maximum(lam, LN2))),
    )
    small = np.minimum(log_lam, SERIES_BELOW)
    lam_small = np.exp(small)
    series = small - lam_small / 2 + lam_small**2 / 24
    return np.where(log_lam > SERIES_BELOW, exact, series)


# ------------------------------------------------------------------------ tensor versions


def interval_loglik(log_rate, stats: IntervalStats):
    """Total log-likelihood of constant per-page log-rates (per hour), PyTensor.

    Unchanged exposure collapses to one number per page; each (page, τ) group with
    changes adds ``c · log(1 − e^{−λτ})``.
    """
    import pytensor.tensor as pt

    groups = stats.changed_groups
    unchanged = -pt.sum(pt.exp(log_rate) * stats.unchanged_exposure)
    if len(groups) == 0:
        return unchanged
    log_lam = log_rate[stats.group_page[groups]] + np.log(stats.group_tau[groups])
    changed = pt.sum(stats.group_changed[groups] * log1mexp_of_log(log_lam))
    return unchanged + changed


def hour_of_week_loglik(log_rate, log_multiplier, stats: HourOfWeekStats):
    """Total log-likelihood of ``λ_page · m[bucket]`` with ``m = exp(log_multiplier)``.

    The changed (page, pattern) groups go through the fused Op of
    :mod:`bayesrate.models.fused` (one loop for value and gradient).
    """
    import pytensor.tensor as pt

    from bayesrate.models.fused import changed_loglik

    m = pt.exp(log_multiplier)
    unchanged = -pt.sum(pt.exp(log_rate) * pt.dot(stats.unchanged_exposure, m))
    if len(stats.changed_count) == 0:
        return unchanged
    log_pattern = pt.log(pt.dot(stats.pattern_overlap, m))
    changed = changed_loglik(
        log_rate, log_pattern, stats.changed_page, stats.changed_pattern, stats.changed_count
    )
    return unchanged + changed


# ------------------------------------------------------------------------ numpy, per draw


def _page_sum_matrix(page: np.ndarray, n_pages: int) -> sp.csr_matrix:
    """Sparse ``(n_pages, n_items)`` matrix summing items into their pages."""
    n = len(page)
    return sp.csr_matrix((np.ones(n), (page, np.arange(n))), shape=(n_pages, n))


def pointwise_interval_loglik(log_rate: np.ndarray, stats: IntervalStats) -> np.ndarray:
    """Per-draw, per-page log-likelihood of constant rates.

    Parameters
    ----------
    log_rate
        ``(n_draws, n_pages)`` log-rates per hour.

    Returns
    -------
    numpy.ndarray
        ``(n_draws, n_pages)``; row ``s`` equals ``stats.loglik(exp(log_rate[s]))``.
    """
    log_rate = np.atleast_2d(np.asarray(log_rate, dtype=np.float64))
    out = -np.exp(log_rate) * stats.unchanged_exposure
    groups = stats.changed_groups
    if len(groups) == 0:
        return out
    gpage = stats.group_page[groups]
    log_tau = np.log(stats.group_tau[groups])
    count = stats.group_changed[groups].astype(np.float64)
    summer = _page_sum_matrix(gpage, stats.n_pages)
    for start in range(0, len(log_rate), CHUNK_DRAWS):
        block = log_rate[start : start + CHUNK_DRAWS]
        contrib = count * np_log1mexp_of_log(block[:, gpage] + log_tau)
        out[start : start + CHUNK_DRAWS] += (summer @ contrib.T).T
    return out


def pointwise_hour_of_week_loglik(
    log_rate: np.ndarray, log_multiplier: np.ndarray, stats: HourOfWeekStats
) -> np.ndarray:
    """Per-draw, per-page log-likelihood of a modulated rate.

    Parameters
    ----------
    log_rate
        ``(n_draws, n_pages)`` log base rates per hour.
    log_multiplier
        ``(n_draws, 168)`` log hour-of-week multipliers.
    """
    log_rate = np.atleast_2d(np.asarray(log_rate, dtype=np.float64))
    m = np.exp(np.atleast_2d(np.asarray(log_multiplier, dtype=np.float64)))
    out = -np.exp(log_rate) * (m @ stats.unchanged_exposure.T)
    if len(stats.changed_count) == 0:
        return out
    from bayesrate.models.fused import changed_loglik_by_page

    log_pattern = np.log(m @ stats.pattern_overlap.T)
    return out + changed_loglik_by_page(
        log_rate, log_pattern, stats.changed_page, stats.changed_pattern, stats.changed_count
    )
