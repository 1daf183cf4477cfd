"""Gamma(α, β) updates of a page's change rate from one interval, vectorized over pages.

Rates are per hour, ``β`` is exposure in hours. ``docs/science.md`` §3:

- :func:`exposure_update` — the first source document's ``PageState``: ``β += τ`` and
  ``α += 1`` if changed. Conjugate for fully observed counts, biased low under censoring.
- :func:`adf_update` — censoring-exact assumed-density filtering. Unchanged intervals are
  exactly conjugate (``β += τ``); a changed interval's posterior
  ``∝ (1 − e^{−λτ}) Gamma(λ | α, β)`` is moment-matched to a Gamma.

With a modulated rate, pass the interval's integrated modulation in place of ``τ``.
"""

from __future__ import annotations

import numpy as np

from bayesrate.priors import gamma_from_moments


def exposure_update(
    alpha: np.ndarray, beta: np.ndarray, tau: np.ndarray, changed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exposure-based (``PageState``) update; returns new ``(alpha, beta)``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    return alpha + np.asarray(changed, dtype=np.float64), beta + np.asarray(tau, dtype=np.float64)


def changed_moments(
    alpha: np.ndarray, beta: np.ndarray, tau: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of λ given Gamma(α, β) prior and one changed interval of length τ.

    Uses ``r = β / (β + τ)``, ``Z = 1 − r^α`` computed as ``-expm1(α log r)`` so that
    small ``τ`` (``r → 1``) keeps full precision.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    log_r = -np.log1p(tau / beta)
    # m1 = α/β · (1 − r^{α+1}) / (1 − r^α) and m2 = α(α+1)/β² · (1 − r^{α+2}) / (1 − r^α):
    # the same as the difference-of-Gammas form, without its cancellation when r^α ≈ 1.
    z = -np.expm1(alpha * log_r)
    z1 = -np.expm1((alpha + 1.0) * log_r)
    z2 = -np.expm1((alpha + 2.0) * log_r)
    m1 = alpha / beta * z1 / z
    m2 = alpha * (alpha + 1.0) / beta**2 * z2 / z
    var = np.maximum(m2 - m1**2, np.finfo(float).tiny)
    return m1, var


def adf_update(
    alpha: np.ndarray, beta: np.ndarray, tau: np.ndarray, changed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Censoring-exact moment-matched Gamma update; returns new ``(alpha, beta)``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    changed = np.asarray(changed).astype(bool)
    alpha_b, beta_b, tau_b, changed_b = np.broadcast_arrays(alpha, beta, tau, changed)
    new_alpha = np.array(alpha_b, dtype=np.float64, copy=True)
    new_beta = np.array(beta_b + tau_b * ~changed_b, dtype=np.float64)
    if changed_b.any():
        a, b, t = alpha_b[changed_b], beta_b[changed_b], tau_b[changed_b]
        mean, var = changed_moments(a, b, t)
        new_alpha[changed_b], new_beta[changed_b] = gamma_from_moments(mean, var)
    return new_alpha, new_beta
