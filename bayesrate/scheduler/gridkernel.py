"""The compiled row step of the grid posterior: drift and Bayes' rule in linear space (numba).

Imported lazily by :meth:`bayesrate.scheduler.rategrid.LogRateGrid.step`, which documents
the maths and computes every exponential and logarithm in vectorised numpy beforehand and
afterwards; this kernel does the per-row linear algebra and normalisations, so a batch of
fetches needs neither scalar transcendental calls nor large temporaries.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


@numba.njit(**_JIT)
def _normalise_floored(p, floor):
    """``p / Σ p``, each entry at least ``floor``; returns ``Σ p``."""
    k = p.shape[0]
    total = 0.0
    for j in range(k):
        total += p[j]
    for j in range(k):
        p[j] = max(p[j] / total, floor)
    return total


@numba.njit(**_JIT)
def step_rows(weights, variance, decay, likelihood, basis, basis_t, rate, floor, mean, log_norm):
    """Per row ``i`` of ``weights`` (unnormalised probabilities, modified in place):

    - when ``variance[i] > 0``, the random walk: ``w ← V (decay[i] ⊙ (Vᵀ w))`` (``V`` is
      ``basis``, ``basis_t`` its transpose, contiguous: both products run along rows), clipped at
      0, normalised and floored (``log_norm[i]`` is then reset to 0: the drifted row is a
      normalised distribution);
    - when ``likelihood`` has a row per row, Bayes' rule with ``likelihood[i]``: normalised
      and floored, ``log Σ`` of the product added to ``log_norm[i]`` (the evidence);
    - ``mean[i]``: the posterior mean of ``rate``.
    """
    n, k = weights.shape
    update = likelihood.shape[0] == n
    c = np.empty(k)
    s = np.empty(k)
    for i in range(n):
        w = weights[i]
        if variance[i] > 0:
            c[:] = 0.0
            for j in range(k):
                for m in range(k):
                    c[m] += w[j] * basis[j, m]
            for m in range(k):
                c[m] *= decay[i, m]
            s[:] = 0.0
            for m in range(k):
                for j in range(k):
                    s[j] += c[m] * basis_t[m, j]
            for j in range(k):
                s[j] = max(s[j], 0.0)
            _normalise_floored(s, floor)
            w[:] = s
            log_norm[i] = 0.0
        if update:
            for j in range(k):
                w[j] *= likelihood[i, j]
            log_norm[i] += np.log(_normalise_floored(w, floor))
        total = 0.0
        weighted = 0.0
        for j in range(k):
            total += w[j]
            weighted += w[j] * rate[j]
        mean[i] = weighted / total
