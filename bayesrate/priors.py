"""Per-domain Gamma priors on change rates: the artifact the scheduler consumes.

Light on purpose (json + numpy): :mod:`bayesrate.scheduler` reads priors through this
module without importing PyMC. Writing the artifact from a fit lives in
:mod:`bayesrate.export`.

``priors.json`` schema (``schema_version`` 1), all rates **per day**:

.. code-block:: json

    {
      "schema_version": 1,
      "kind": "bayesrate-priors",
      "units": {"rate": "changes per day", "alpha": "pseudo-changes",
                "beta": "pseudo-exposure days"},
      "dataset": "ota-contrib", "data_fingerprint": "<sha256>",
      "model": "hierarchical", "config_hash": "<sha256>",
      "created_utc": "...", "versions": {"bayesrate": "...", "pymc": "...", ...},
      "forced": false, "gates": {"diagnostics": true, "ppc": true},
      "global": {"alpha": 0.8, "beta": 12.0},
      "domains": {"<domain>": {"alpha": 1.1, "beta": 9.0, "n_pages": 4}, ...},
      "hour_of_week": null | {"timezone": "UTC", "bucket_0": "Monday 00:00-01:00",
                              "multipliers": [168 floats, mean 1]}
    }

``global`` is the prior for pages of domains the artifact has not seen; ``hour_of_week``
(from the modulated model) multiplies the rate by local hour of week.

Schema version 2: the population as fitted
------------------------------------------

A moment-matched Gamma is a different distribution from the log-normal population a
hierarchical model fits (σ ≈ 1.4: the Gamma's median is 7× lower, and its mass below
mean/100 is 39% against 0.5%). Version 2 keeps the population itself, and the Gamma only
as a documented approximation with its fidelity stated. Per domain (and for ``global``, the
prior of a page of an unseen domain), all log-rates are natural logs of changes per day:

.. code-block:: json

    {"n_pages": 4,
     "population": {
        "family": "log-normal",
        "location": {"mean": -4.1, "sd": 0.3, "quantiles": {"0.05": ..., "0.95": ...}},
        "scale": {"mean": 1.4, "sd": 0.05, "quantiles": {...}},
        "predictive": {"weights": [...], "means": [...], "sds": [...]}},
     "drift": null | {"model": "random_walk", "source": "...",
                      "parameters": {"sigma_rw": {"mean": .., "sd": .., "quantiles": {..}}},
                      "units": {"sigma_rw": "log-rate per square-root day"}, ...},
     "burst": null | {"model": "...", "source": "...", "parameters": {...}, "units": {...}},
     "gamma_view": {"alpha": 0.16, "beta": 3.2,
                    "fidelity": {"match": "rate moments" | "log-rate moments",
                                 "kl_population_to_gamma": .., "kl_gamma_to_population": ..,
                                 "log_quantile_error": {"0.05": .., ...},
                                 "prob_below_mean_over_100": {"population": .., "gamma": ..}}}}

- ``location`` and ``scale``: posterior summaries (mean, sd, 5/25/50/75/95% quantiles) of
  the domain's log-rate mean ``m_d`` and of the page-level sd ``s`` (for ``global``: the
  global mean and the sd of a new domain's pages, ``sqrt(sd_domain² + s²)``).
- ``predictive``: the distribution of a *new page's* log-rate with the posterior
  uncertainty of ``(m_d, s)`` integrated out — a normal mixture (``Σ w_c N(m_c, s_c)``)
  made by sorting the posterior draws by ``m_d``, cutting them into equal-count strata and
  matching each stratum's mixture ``N(m_d, s)`` by its mean and variance of the log-rate.
  It has the draws' mean and variance of the log-rate exactly, and their shape to within
  the stated ``compression_kl`` (nats).
- ``drift``: the random-walk volatility of a page's log-rate, ``σ_rw`` per √day, when
  known: fitted by a dynamic model, or estimated (``source`` says how). ``null``: none.
- ``burst``: the burst parameters of a bursty model (its ``model`` names the family and its
  ``parameters`` their posterior summaries); ``null`` when the exported model has none.
- ``gamma_view``: the Gamma that :meth:`PriorSet.arrays` and :meth:`PriorSet.for_domain`
  return; ``fidelity.match`` says how it was matched: ``"log-rate moments"`` (the mean and
  variance of ``log λ``, what :func:`bayesrate.export.gamma_view` writes) or, in files
  written before, ``"rate moments"`` (the rate's mean and variance). With its fidelity
  against ``predictive``: both Kullback–Leibler divergences (nats) and
  ``log(q_gamma / q_population)`` at five quantiles, computed by quadrature in the log-rate
  with no term dropped (:func:`gamma_view_fidelity`).

``hour_of_week`` gains ``"uncertainty": {"sd": [...], "q05": [...], "q95": [...]}`` (per
bucket, from the posterior draws normalised to mean 1) or ``null``. Version-1 files load
exactly as before (``populations`` is then empty); a version-2 file read by a consumer of
the Gamma API gets the Gamma views.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.constants import N_HOUR_OF_WEEK
from bayesrate.errors import ArtifactError

SCHEMA_VERSION = 1
#: the schema with the fitted population (this module's docstring)
SCHEMA_VERSION_POPULATION = 2
SCHEMA_VERSIONS = (SCHEMA_VERSION, SCHEMA_VERSION_POPULATION)
KIND = "bayesrate-priors"
PRIORS_FILE = "priors.json"
UNITS = {"rate": "changes per day", "alpha": "pseudo-changes", "beta": "pseudo-exposure days"}
UNITS_V2 = UNITS | {
    "log_rate": "natural log of changes per day",
    "sigma_rw": "log-rate per square-root day",
    "kl": "nats",
}
#: quantile levels of every posterior summary
QUANTILE_LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
#: components of a predictive normal mixture
MIXTURE_COMPONENTS = 8

#: Used when no artifact exists: mean 1 change/day with one pseudo-change and one
#: pseudo-day of exposure — deliberately weak in β (``docs/science.md`` §3: a strong β
#: drags fast pages down under the censored likelihood).
DEFAULT_PRIOR = (1.0, 1.0)


def gamma_from_moments(mean, variance):
    """``(alpha, beta)`` of the Gamma with this mean and variance: ``α = m²/v``, ``β = m/v``
    (numbers or arrays; ``β`` in the inverse unit of the mean). The one moment match of the
    package: a prior from rate moments (:meth:`GammaPrior.from_moments`), the scheduler's
    censoring-exact update (:func:`bayesrate.estimators.gamma.adf_update`), the scale-out's
    per-URL state (:mod:`bayesrate.scaleout.posteriors`)."""
    return mean * mean / variance, mean / variance


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(α, β) on a rate in changes per day."""

    alpha: float
    beta: float

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ArtifactError(f"Gamma prior {name} must be a positive number, got {value!r}")

    @property
    def mean(self) -> float:
        return self.alpha / self.beta

    @property
    def variance(self) -> float:
        return self.alpha / self.beta**2

    @classmethod
    def from_moments(cls, mean: float, variance: float) -> GammaPrior:
        """The Gamma with this mean and variance (per day)."""
        alpha, beta = gamma_from_moments(mean, variance)
        return cls(alpha=alpha, beta=beta)

    @classmethod
    def from_log_moments(cls, mean_log: float, variance_log: float) -> GammaPrior:
        """The Gamma whose ``log λ`` (λ per day) has this mean and variance:
        ``ψ'(α) = variance_log``, ``log β = ψ(α) − mean_log``."""
        from scipy.optimize import brentq
        from scipy.special import digamma, polygamma

        if not (math.isfinite(mean_log) and math.isfinite(variance_log) and variance_log > 0):
            raise ArtifactError(
                f"log-rate moments must be finite with a positive variance, got mean "
                f"{mean_log!r}, variance {variance_log!r}"
            )

        # ψ'(e^u) falls from e^{-2u} at small α to e^{-u} at large α: one root in u
        def excess(u: float) -> float:
            return math.log(polygamma(1, math.exp(u))) - math.log(variance_log)

        if not excess(-40.0) > 0 > excess(40.0):
            raise ArtifactError(
                f"no Gamma has a log-rate variance of {variance_log!r} (α outside e^±40)"
            )
        u = brentq(excess, -40.0, 40.0, xtol=1e-12)
        alpha = math.exp(u)
        return cls(alpha=alpha, beta=math.exp(float(digamma(alpha)) - mean_log))

    def log_quantile(self, q: float | np.ndarray) -> np.ndarray:
        """``log`` of the ``q`` quantile (rate per day)."""
        from scipy.special import gammaincinv, gammaln

        q = np.asarray(q, dtype=float)
        x = gammaincinv(self.alpha, q)
        # far in the lower tail (x underflows for small α): P(X < x) = x^α / Γ(α + 1) · (1 + O(x))
        with np.errstate(divide="ignore"):
            tail = (np.log(q) + gammaln(self.alpha + 1.0)) / self.alpha
            log_x = np.where(x > 1e-300, np.log(np.maximum(x, 1e-300)), tail)
        return log_x - np.log(self.beta)

    def log_density(self, log_rate: np.ndarray) -> np.ndarray:
        """Density of ``log λ`` (λ per day) at ``log_rate``."""
        from scipy.special import gammaln

        x = np.asarray(log_rate, dtype=float)
        a, b = self.alpha, self.beta
        with np.errstate(over="ignore"):
            return a * np.log(b) - gammaln(a) + a * x - b * np.exp(x)


# ---------------------------------------------------------------------- version 2 pieces
def _number(value: Any, what: str, *, positive: bool = False, allow_none: bool = False):
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (positive and value <= 0):
        kind = "a positive number" if positive else "a finite number"
        raise ArtifactError(f"{what} must be {kind}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Summary:
    """Posterior summary of one scalar: mean, sd and quantiles (``"0.05"`` … ``"0.95"``)."""

    mean: float
    sd: float | None = None
    quantiles: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_draws(cls, draws: np.ndarray) -> Summary:
        x = np.asarray(draws, dtype=float).ravel()
        qs = np.quantile(x, QUANTILE_LEVELS)
        return cls(
            float(x.mean()),
            float(x.std(ddof=1)) if len(x) > 1 else None,
            {str(q): float(v) for q, v in zip(QUANTILE_LEVELS, qs, strict=True)},
        )

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "sd": self.sd, "quantiles": dict(self.quantiles)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], what: str) -> Summary:
        if not isinstance(doc, Mapping):
            raise ArtifactError(f"{what} must be an object with mean, sd, quantiles")
        quantiles = doc.get("quantiles") or {}
        if not isinstance(quantiles, Mapping):
            raise ArtifactError(f"{what}.quantiles must be an object")
        return cls(
            _number(doc.get("mean"), f"{what}.mean"),
            _number(doc.get("sd"), f"{what}.sd", allow_none=True),
            {str(k): _number(v, f"{what}.quantiles[{k}]") for k, v in quantiles.items()},
        )


def lognormal_log_moments(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray | None = None, axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``log E[λ]`` and ``log E[λ²]`` of ``λ = e^X``, ``X`` the mixture of Normals
    ``N(means, variances)`` along ``axis`` (equal weights unless ``weights`` are given).

    In logs, so that a wide population's moments stay finite where ``E[λ²]`` overflows a
    float (``E[e^{kX}] = Σ w·e^{k m + k² v / 2}``).
    """
    from scipy.special import logsumexp

    m, v = np.broadcast_arrays(np.asarray(means, dtype=float), np.asarray(variances, dtype=float))
    if weights is None:
        log_w = -math.log(m.shape[axis])
    else:
        with np.errstate(divide="ignore"):
            log_w = np.log(np.broadcast_to(np.asarray(weights, dtype=float), m.shape))
    return logsumexp(log_w + m + v / 2, axis=axis), logsumexp(log_w + 2 * m + 2 * v, axis=axis)


def lognormal_moments(
    means: np.ndarray,
    variances: np.ndarray,
    weights: np.ndarray | None = None,
    axis: int = 0,
    scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of ``scale·λ`` (:func:`lognormal_log_moments`); the variance is
    ``inf`` where ``E[λ²]`` overflows a float."""
    log_first, log_second = lognormal_log_moments(means, variances, weights, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        first = np.exp(log_first) * scale
        second = np.exp(log_second) * scale**2
        variance = second - first**2
    return first, np.where(np.isfinite(second), variance, np.inf)


@dataclass(frozen=True)
class NormalMixture:
    """``log λ ~ Σ_c w_c Normal(m_c, s_c)`` with λ in changes per day."""

    weights: tuple[float, ...]
    means: tuple[float, ...]
    sds: tuple[float, ...]

    def __post_init__(self) -> None:
        w, m, s = (np.asarray(v, dtype=float) for v in (self.weights, self.means, self.sds))
        if not (w.ndim == 1 and len(w) >= 1 and w.shape == m.shape == s.shape):
            raise ArtifactError("a normal mixture needs weights, means and sds of one length")
        if not (np.isfinite(w).all() and np.isfinite(m).all() and np.isfinite(s).all()):
            raise ArtifactError("a normal mixture's weights, means and sds must be finite")
        if (w < 0).any() or (s <= 0).any() or not np.isclose(w.sum(), 1.0, rtol=1e-6):
            raise ArtifactError("a normal mixture needs weights >= 0 summing to 1 and sds > 0")

    @classmethod
    def from_draws(
        cls, location: np.ndarray, scale: np.ndarray, components: int = MIXTURE_COMPONENTS
    ) -> NormalMixture:
        """Compress the draws' mixture ``Σ_s N(location_s, scale_s) / S`` into a few Normals.

        Sort the draws by location and cut them into ``components`` equal-count strata; each
        stratum's component has the stratum's mean and variance of ``log λ``:
        ``m_c = mean(location)``, ``s_c² = var(location) + mean(scale²)`` (the law of total
        variance). So the mixture has the draws' mean and variance of ``log λ`` exactly, and
        one wide draw moves its stratum's sd by its share of the variance only (matching the
        stratum's mean *rate* instead let ``e^{s²/2}`` of a single draw set the sd). The
        remaining shape error is :func:`compression_kl`.

        Parameters
        ----------
        location, scale
            Per posterior draw, the mean and sd of a new page's ``log λ`` (λ per day).
        components
            Strata (fewer when there are fewer draws).

        Returns
        -------
        NormalMixture
        """
        loc = np.asarray(location, dtype=float).ravel()
        sd = np.asarray(scale, dtype=float).ravel()
        order = np.argsort(loc, kind="stable")
        parts = [p for p in np.array_split(order, min(components, len(loc))) if len(p)]
        weights = [len(p) / len(loc) for p in parts]
        means = [float(loc[p].mean()) for p in parts]
        sds = [float(np.sqrt(max(loc[p].var() + np.mean(sd[p] ** 2), 1e-24))) for p in parts]
        return cls(tuple(weights), tuple(means), tuple(sds))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.weights), np.asarray(self.means), np.asarray(self.sds))

    def log_density(self, log_rate: np.ndarray) -> np.ndarray:
        """Density of ``log λ`` at ``log_rate``."""
        w, m, s = self._arrays()
        x = np.asarray(log_rate, dtype=float)[..., None]
        z = (x - m) / s
        with np.errstate(divide="ignore"):
            log_w = np.log(np.where(w > 0, w, 1.0))
            terms = log_w - 0.5 * z * z - np.log(s * math.sqrt(2 * math.pi))
        terms = np.where(w > 0, terms, -np.inf)
        top = terms.max(axis=-1)
        return top + np.log(np.exp(terms - top[..., None]).sum(axis=-1))

    def cdf(self, log_rate: np.ndarray) -> np.ndarray:
        """``P(log λ ≤ log_rate)``."""
        from scipy.special import ndtr

        w, m, s = self._arrays()
        x = np.asarray(log_rate, dtype=float)[..., None]
        return (w * ndtr((x - m) / s)).sum(axis=-1)

    def log_quantile(self, q: float | np.ndarray) -> np.ndarray:
        """``log`` of the ``q`` quantile of λ (bisection on the CDF, to 1e-10)."""
        _, m, s = self._arrays()
        q = np.asarray(q, dtype=float)
        lo = np.full(q.shape, float((m - 40 * s).min()))
        hi = np.full(q.shape, float((m + 40 * s).max()))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            below = self.cdf(mid) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
            if np.all(hi - lo < 1e-10):
                break
        return 0.5 * (lo + hi)

    def rate_moments(self) -> tuple[float, float]:
        """Mean and variance of λ (per day); ``inf`` where they overflow a float."""
        w, m, s = self._arrays()
        first, variance = lognormal_moments(m, s**2, w)
        return float(first), float(variance)

    def to_json(self) -> dict[str, list[float]]:
        return {"weights": list(self.weights), "means": list(self.means), "sds": list(self.sds)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], what: str) -> NormalMixture:
        try:
            w, m, s = (tuple(float(x) for x in doc[k]) for k in ("weights", "means", "sds"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"{what} must hold lists weights, means, sds ({exc})") from exc
        try:
            return cls(w, m, s)
        except ArtifactError as exc:
            raise ArtifactError(f"{what}: {exc}") from exc


@dataclass(frozen=True)
class ParameterBlock:
    """Parameters of one model component (drift, bursts): family, summaries, units, source.

    ``model`` names the family (``"random_walk"`` for drift: ``parameters["sigma_rw"]`` per
    √day; burst families as the exporting model defines them); ``source`` says whether the
    values are a model's posterior or an estimate, and how; ``extra`` holds settings such
    as ``epoch_days``.
    """

    model: str
    parameters: Mapping[str, Summary]
    units: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "source": self.source,
            "parameters": {k: v.to_json() for k, v in self.parameters.items()},
            "units": dict(self.units),
            **dict(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Any, what: str) -> ParameterBlock | None:
        if doc is None:
            return None
        if not isinstance(doc, Mapping) or not isinstance(doc.get("model"), str):
            raise ArtifactError(f"{what} must be null or an object with a 'model' name")
        params = doc.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise ArtifactError(f"{what}.parameters must be an object")
        return cls(
            model=doc["model"],
            parameters={
                str(k): Summary.from_json(v, f"{what}.parameters.{k}") for k, v in params.items()
            },
            units={str(k): str(v) for k, v in (doc.get("units") or {}).items()},
            source=str(doc.get("source", "")),
            extra={
                k: v for k, v in doc.items() if k not in ("model", "parameters", "units", "source")
            },
        )


@dataclass(frozen=True)
class Population:
    """One domain's fitted population of page log-rates (schema version 2)."""

    location: Summary
    scale: Summary
    predictive: NormalMixture
    drift: ParameterBlock | None = None
    burst: ParameterBlock | None = None
    n_pages: int | None = None
    family: str = "log-normal"
    compression_kl: float | None = None

    @property
    def sigma_rw_per_day(self) -> float | None:
        """Random-walk volatility of the log-rate per √day (posterior mean), if any."""
        if self.drift is None or self.drift.model != "random_walk":
            return None
        sigma = self.drift.parameters.get("sigma_rw")
        return None if sigma is None else sigma.mean

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "location": self.location.to_json(),
            "scale": self.scale.to_json(),
            "predictive": self.predictive.to_json(),
            "compression_kl": self.compression_kl,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], what: str) -> Population:
        pop = doc.get("population")
        if not isinstance(pop, Mapping):
            raise ArtifactError(f"{what}: missing 'population'")
        n_pages = doc.get("n_pages")
        return cls(
            location=Summary.from_json(pop.get("location"), f"{what}.population.location"),
            scale=Summary.from_json(pop.get("scale"), f"{what}.population.scale"),
            predictive=NormalMixture.from_json(
                pop.get("predictive") or {}, f"{what}.population.predictive"
            ),
            drift=ParameterBlock.from_json(doc.get("drift"), f"{what}.drift"),
            burst=ParameterBlock.from_json(doc.get("burst"), f"{what}.burst"),
            n_pages=None if n_pages is None else int(n_pages),
            family=str(pop.get("family", "log-normal")),
            compression_kl=_number(
                pop.get("compression_kl"), f"{what}.compression_kl", allow_none=True
            ),
        )


def _log_rate_grid(log_quantile: Callable[[float], Any], points: int) -> np.ndarray:
    """Log-rate nodes holding all but ~1e-13 of one distribution's mass (``log_quantile``:
    its quantile function of ``log λ``), denser in its central 1e-6 … 1 − 1e-6 (a Gamma of
    small α has a left tail thousands of nats long and its bulk within a few nats). A grid
    for one *distribution*'s integrals (the Gamma view's KL), not a page's likelihood
    (:mod:`bayesrate.estimators.grid`)."""
    tiny, core = 1e-13, 1e-6
    lo, hi = float(log_quantile(tiny)), float(log_quantile(1 - tiny))
    c_lo, c_hi = float(log_quantile(core)), float(log_quantile(1 - core))
    return np.unique(np.concatenate([np.linspace(lo, hi, points), np.linspace(c_lo, c_hi, points)]))


def kl_log_densities(log_p: np.ndarray, log_q: np.ndarray, x: np.ndarray) -> float:
    """``∫ p log(p / q) dx`` (nats) by the trapezoid rule, from the two log-densities.

    No term is dropped: a node where ``q`` (or ``p``) underflows but its log-density is
    finite still adds ``e^{log p}(log p − log q)`` (zero only where that product
    underflows), and a node where ``log q = −∞`` under mass of ``p`` makes the divergence
    ``+∞``.

    Parameters
    ----------
    log_p, log_q
        Log-densities at the nodes.
    x
        The nodes (increasing; spanning all but a negligible share of ``p``'s mass).

    Returns
    -------
    float
        The divergence in nats (``inf`` as above).

    Raises
    ------
    ArtifactError
        A log-density is NaN.
    """
    log_p = np.asarray(log_p, dtype=float)
    log_q = np.asarray(log_q, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.where(log_p == -np.inf, 0.0, np.exp(log_p) * (log_p - log_q))
    if np.isnan(terms).any():
        raise ArtifactError("a log-density is NaN on the divergence's nodes")
    if np.isposinf(terms).any():
        return math.inf
    return float(np.trapezoid(terms, x))


def gamma_view_fidelity(
    mixture: NormalMixture, gamma: GammaPrior, *, points: int = 40_001
) -> dict[str, Any]:
    """How well a Gamma represents a population: KL both ways and quantile errors.

    Parameters
    ----------
    mixture
        The population's density of ``log λ`` (λ per day).
    gamma
        The Gamma view on λ.
    points
        Nodes per grid (two grids per divergence, :func:`_log_rate_grid`).

    Returns
    -------
    dict
        ``kl_population_to_gamma = ∫ p log(p/q)`` and ``kl_gamma_to_population = ∫ q
        log(q/p)`` (nats; ``p`` the population's, ``q`` the Gamma's density of ``log λ``),
        each by the trapezoid rule in log space over all but 1e-13 of the first
        distribution's mass (:func:`kl_log_densities`: no term is dropped where a density
        underflows; ``inf`` where the Gamma's log-density is ``−∞`` on population mass);
        ``log_quantile_error[level] = log(q_gamma / q_population)``; and both
        distributions' ``P(λ < E[λ] / 100)`` (``E[λ]`` of the population).
    """
    from scipy.special import gammainc

    x_p = _log_rate_grid(mixture.log_quantile, points)
    x_q = _log_rate_grid(gamma.log_quantile, points)
    kl_pq = kl_log_densities(mixture.log_density(x_p), gamma.log_density(x_p), x_p)
    kl_qp = kl_log_densities(gamma.log_density(x_q), mixture.log_density(x_q), x_q)
    levels = np.asarray(QUANTILE_LEVELS)
    err = gamma.log_quantile(levels) - mixture.log_quantile(levels)
    mean = mixture.rate_moments()[0]
    return {
        "kl_population_to_gamma": kl_pq,
        "kl_gamma_to_population": kl_qp,
        "log_quantile_error": {str(k): float(v) for k, v in zip(levels, err, strict=True)},
        "prob_below_mean_over_100": {
            "population": float(mixture.cdf(np.log(mean / 100))),
            "gamma": float(gammainc(gamma.alpha, gamma.beta * mean / 100)),
        },
    }


#: trapezoid nodes per sd of the narrowest draw in :func:`compression_kl` (the rule's error
#: on a Normal density is about ``2 exp(-2 π² 4²)``), within these bounds
KL_NODES_PER_SD = 4
KL_POINTS = (201, 40_001)


def compression_kl(
    location: np.ndarray, scale: np.ndarray, mixture: NormalMixture, *, points: int | None = None
) -> float:
    """``KL(draws' mixture ‖ mixture)`` in nats.

    The trapezoid rule on ±10 sd of the draws' mixture, with ``points`` nodes; by default
    :data:`KL_NODES_PER_SD` per sd of the narrowest draw, within :data:`KL_POINTS` (a fixed
    2,001 nodes cost ota-contrib's export of 16,000 draws about 190 s on an idle machine,
    against 41 s, and step over draws far narrower than the mixture's spread).
    """
    loc = np.asarray(location, dtype=float).ravel()
    sd = np.asarray(scale, dtype=float).ravel()
    spread = float(np.sqrt(loc.var() + (sd**2).mean()))
    if points is None:
        wanted = math.ceil(20 * spread * KL_NODES_PER_SD / float(sd.min())) + 1
        points = int(np.clip(wanted, *KL_POINTS))
    x = np.linspace(loc.mean() - 10 * spread, loc.mean() + 10 * spread, points)
    # the draws' density summed directly, in blocks of nodes (thousands of components: 4×
    # faster than log-sum-exp); where it underflows it adds nothing to the integral
    log_scale = -np.log(sd) - 0.5 * math.log(2 * math.pi) - math.log(len(loc))
    p = np.empty(len(x))
    for start in range(0, len(x), 256):
        z = (x[start : start + 256, None] - loc) / sd
        p[start : start + 256] = np.exp(log_scale - 0.5 * z * z).sum(axis=1)
    log_q = mixture.log_density(x)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 × log 0 where p underflows
        terms = np.where(p > 0, p * (np.log(p) - log_q), 0.0)
    return float(np.trapezoid(terms, x))


@dataclass(frozen=True)
class PriorSet:
    """Priors per domain, a global fallback, and optional hour-of-week multipliers.

    Version 1 holds Gamma priors only. Version 2 (:attr:`global_population` set) holds the
    fitted population per domain (:attr:`populations`) and keeps the Gamma priors as its
    documented Gamma views (:attr:`domains`, :attr:`global_prior`), with their fidelity in
    :attr:`gamma_fidelity` (module docstring).
    """

    global_prior: GammaPrior
    domains: Mapping[str, GammaPrior] = field(default_factory=dict)
    hour_of_week: np.ndarray | None = None
    timezone: str = "UTC"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    populations: Mapping[str, Population] = field(default_factory=dict)
    global_population: Population | None = None
    gamma_fidelity: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hour_of_week_uncertainty: Mapping[str, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.hour_of_week is not None:
            m = np.asarray(self.hour_of_week, dtype=np.float64)
            if m.shape != (N_HOUR_OF_WEEK,) or not np.all(np.isfinite(m)) or (m <= 0).any():
                raise ArtifactError("hour_of_week multipliers must be 168 positive numbers")
        if self.populations and self.global_population is None:
            raise ArtifactError("a priors set with domain populations needs a global one")
        missing = set(self.populations) ^ set(self.domains) if self.populations else set()
        if missing:
            raise ArtifactError(
                f"domains need both a population and a Gamma view: {sorted(missing)[:5]}"
            )

    @property
    def schema_version(self) -> int:
        """1 (Gamma priors) or 2 (fitted populations with Gamma views)."""
        return SCHEMA_VERSION if self.global_population is None else SCHEMA_VERSION_POPULATION

    @property
    def forced(self) -> bool:
        return bool(self.metadata.get("forced", False))

    def for_domain(self, domain: str) -> GammaPrior:
        """The domain's prior, or the global fallback for an unseen domain."""
        return self.domains.get(domain, self.global_prior)

    def population_for(self, domain: str) -> Population | None:
        """The domain's fitted population (v2), the global one for an unseen domain, or
        ``None`` for a version-1 artifact."""
        return self.populations.get(domain, self.global_population)

    def pages_of(self, domain: str) -> int | None:
        """Pages of ``domain`` in the fit the priors came from (``None`` when unknown)."""
        if domain in self.populations:
            return self.populations[domain].n_pages
        n = dict(self.metadata.get("domain_extra", {})).get(domain, {}).get("n_pages")
        return None if n is None else int(n)

    def arrays(self, domains: np.ndarray | list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized lookup: ``(alpha, beta per day)`` for each domain label."""
        labels = np.asarray(domains, dtype=object)
        uniq, inverse = np.unique(labels, return_inverse=True)
        priors = [self.for_domain(str(d)) for d in uniq]
        alpha = np.array([p.alpha for p in priors])[inverse]
        beta = np.array([p.beta for p in priors])[inverse]
        return alpha, beta

    @classmethod
    def default(cls) -> PriorSet:
        """The documented prior used when no artifact is available."""
        return cls(
            global_prior=GammaPrior(*DEFAULT_PRIOR),
            metadata={"model": "default", "note": "no fitted artifact; weak default prior"},
        )

    # ------------------------------------------------------------------ serialisation
    def to_json(self) -> dict[str, Any]:
        if self.schema_version == SCHEMA_VERSION_POPULATION:
            return self._to_json_v2()
        meta = dict(self.metadata)
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "units": UNITS,
            **{k: v for k, v in meta.items() if k not in ("schema_version", "kind", "units")},
            "forced": bool(meta.get("forced", False)),
            "global": {"alpha": self.global_prior.alpha, "beta": self.global_prior.beta},
            "domains": {
                name: {"alpha": p.alpha, "beta": p.beta, **_extra(meta, name)}
                for name, p in sorted(self.domains.items())
            },
            "hour_of_week": self._hour_of_week_json(),
        }
        doc.pop("domain_extra", None)
        return doc

    def _hour_of_week_json(self) -> dict[str, Any] | None:
        if self.hour_of_week is None:
            return None
        out: dict[str, Any] = {
            "timezone": self.timezone,
            "bucket_0": "Monday 00:00-01:00",
            "multipliers": [float(x) for x in self.hour_of_week],
        }
        if self.schema_version == SCHEMA_VERSION_POPULATION:
            unc = self.hour_of_week_uncertainty
            out["uncertainty"] = (
                None if unc is None else {k: [float(x) for x in v] for k, v in unc.items()}
            )
        return out

    def _domain_json(self, gamma: GammaPrior, population: Population, name: str) -> dict:
        return {
            "n_pages": population.n_pages,
            "population": population.to_json(),
            "drift": None if population.drift is None else population.drift.to_json(),
            "burst": None if population.burst is None else population.burst.to_json(),
            "gamma_view": {
                "alpha": gamma.alpha,
                "beta": gamma.beta,
                "fidelity": dict(self.gamma_fidelity.get(name, {})),
            },
        }

    def _to_json_v2(self) -> dict[str, Any]:
        meta = {k: v for k, v in self.metadata.items()
                if k not in ("schema_version", "kind", "units", "domain_extra")}  # fmt: skip
        assert self.global_population is not None
        return {
            "schema_version": SCHEMA_VERSION_POPULATION,
            "kind": KIND,
            "units": UNITS_V2,
            **meta,
            "forced": bool(meta.get("forced", False)),
            "global": self._domain_json(self.global_prior, self.global_population, GLOBAL_KEY),
            "domains": {
                name: self._domain_json(self.domains[name], pop, name)
                for name, pop in sorted(self.populations.items())
            },
            "hour_of_week": self._hour_of_week_json(),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PriorSet:
        if doc.get("kind") != KIND:
            raise ArtifactError(f"not a bayesrate priors file (kind={doc.get('kind')!r})")
        version = doc.get("schema_version")
        if version not in SCHEMA_VERSIONS:
            raise ArtifactError(
                f"priors schema version {version!r} is not supported "
                f"(this bayesrate reads versions {', '.join(map(str, SCHEMA_VERSIONS))})"
            )
        if version == SCHEMA_VERSION_POPULATION:
            return cls._from_json_v2(doc)
        try:
            global_prior = GammaPrior(float(doc["global"]["alpha"]), float(doc["global"]["beta"]))
            domains = {
                str(name): GammaPrior(float(v["alpha"]), float(v["beta"]))
                for name, v in doc.get("domains", {}).items()
            }
        except (KeyError, TypeError) as exc:
            raise ArtifactError(f"malformed priors file: missing {exc}") from exc
        multipliers = doc.get("hour_of_week")
        meta = {
            k: v
            for k, v in doc.items()
            if k not in ("global", "domains", "hour_of_week", "units", "kind", "schema_version")
        }
        meta["domain_extra"] = {
            str(name): {k: v for k, v in d.items() if k not in ("alpha", "beta")}
            for name, d in doc.get("domains", {}).items()
        }
        return cls(
            global_prior=global_prior,
            domains=domains,
            hour_of_week=None
            if multipliers is None
            else np.asarray(multipliers["multipliers"], dtype=float),
            timezone="UTC" if multipliers is None else str(multipliers.get("timezone", "UTC")),
            metadata=meta,
        )

    @classmethod
    def _from_json_v2(cls, doc: Mapping[str, Any]) -> PriorSet:
        def entry(d: Any, what: str) -> tuple[GammaPrior, Population, dict]:
            if not isinstance(d, Mapping):
                raise ArtifactError(f"malformed priors file: {what} must be an object")
            view = d.get("gamma_view")
            if not isinstance(view, Mapping):
                raise ArtifactError(f"malformed priors file: {what} has no gamma_view")
            try:
                gamma = GammaPrior(float(view["alpha"]), float(view["beta"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise ArtifactError(f"malformed priors file: {what}.gamma_view: {exc}") from exc
            return gamma, Population.from_json(d, what), dict(view.get("fidelity") or {})

        if not isinstance(doc.get("global"), Mapping):
            raise ArtifactError("malformed priors file: missing 'global'")
        global_prior, global_population, global_fidelity = entry(doc["global"], "global")
        domains, populations, fidelity = {}, {}, {GLOBAL_KEY: global_fidelity}
        for name, d in (doc.get("domains") or {}).items():
            domains[str(name)], populations[str(name)], fidelity[str(name)] = entry(
                d, f"domains[{name!r}]"
            )
        how = doc.get("hour_of_week")
        multipliers, timezone, uncertainty = None, "UTC", None
        if how is not None:
            try:
                multipliers = np.asarray(how["multipliers"], dtype=float)
                timezone = str(how.get("timezone", "UTC"))
                unc = how.get("uncertainty")
                uncertainty = (
                    None if unc is None else {str(k): np.asarray(v, float) for k, v in unc.items()}
                )
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ArtifactError(f"malformed priors file: hour_of_week: {exc}") from exc
        skip = ("global", "domains", "hour_of_week", "units", "kind", "schema_version")
        meta = {k: v for k, v in doc.items() if k not in skip}
        return cls(
            global_prior=global_prior,
            domains=domains,
            hour_of_week=multipliers,
            timezone=timezone,
            metadata=meta,
            populations=populations,
            global_population=global_population,
            gamma_fidelity=fidelity,
            hour_of_week_uncertainty=uncertainty,
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``priors.json`` into ``directory`` atomically; returns its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / PRIORS_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> PriorSet:
        """Read ``priors.json`` (or a directory containing it)."""
        path = Path(path)
        if path.is_dir():
            path = path / PRIORS_FILE
        if not path.exists():
            raise ArtifactError(f"no priors artifact at {path}")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path} is not valid JSON: {exc}") from exc
        return cls.from_json(doc)


#: the key of the global (new-domain) entry in :attr:`PriorSet.gamma_fidelity`
GLOBAL_KEY = "(global)"


def _extra(meta: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(meta.get("domain_extra", {}).get(name, {}))


def find_artifact(root: str | Path = "models", dataset: str | None = None) -> Path | None:
    """The ``priors.json`` to use from ``root``, if any.

    For a dataset (default: the package's default dataset if it has artifacts, else any),
    the model named in ``<root>/<dataset>/recommended.json`` (written by ``bayesrate
    calibrate`` from the model comparison), else the newest artifact.
    """
    from bayesrate.constants import DEFAULT_DATASET

    root = Path(root)
    if not root.is_dir():
        return None
    if dataset is None:
        dataset = DEFAULT_DATASET if (root / DEFAULT_DATASET).is_dir() else None
    datasets = [root / dataset] if dataset else sorted(p for p in root.iterdir() if p.is_dir())
    for directory in datasets:
        recommended = directory / "recommended.json"
        if recommended.is_file():
            try:
                model = json.loads(recommended.read_text())["model"]
            except (json.JSONDecodeError, KeyError) as exc:
                raise ArtifactError(f"{recommended} is malformed: {exc}") from exc
            path = directory / model / PRIORS_FILE
            if path.is_file():
                return path
    found = [p for d in datasets for p in d.glob(f"*/{PRIORS_FILE}")]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def resolve_priors(path: str | Path | None = None) -> tuple[PriorSet, str]:
    """The priors a command uses, and a sentence saying where they came from: ``path`` if
    given, else the artifact :func:`find_artifact` finds under ``./models``, else
    :meth:`PriorSet.default` (Gamma(1, 1 day))."""
    if path:
        return PriorSet.load(path), str(path)
    found = find_artifact()
    if found is not None:
        recommended = found.parent.parent / "recommended.json"
        why = (
            f"the model recommended in {recommended}"
            if recommended.is_file() and f'"{found.parent.name}"' in recommended.read_text()
            else "the newest artifact"
        )
        return PriorSet.load(found), (
            f"{found}, found under ./models: {why}; pass --priors PATH to choose"
        )
    return PriorSet.default(), (
        "default Gamma(1, 1 day): no artifact under ./models; pass --priors PATH to choose"
    )
