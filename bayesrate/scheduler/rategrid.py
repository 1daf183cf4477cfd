"""Per-URL change-rate posteriors on one shared log-rate grid: exact updates, drift, summaries.

Every URL's posterior of ``θ = log λ`` (λ per hour) is a vector of log-probabilities over
the ``K`` nodes ``θ_j = θ_0 + j·h`` of one grid shared by all URLs (:class:`LogRateGrid`;
default 48 nodes from 2e-5 to 50 changes per day, ``h ≈ 0.31``), stored as float32 and
computed in float64. Node ``j`` stands for the cell ``[θ_j − h/2, θ_j + h/2]`` (the end
cells reach to ±∞).

- **Prior.** Cell masses of the URL's prior: a normal mixture in ``θ`` (the fitted
  log-normal population of ``priors.json`` v2) or a Gamma on λ (v1 artifacts), exactly,
  from their CDFs (:meth:`LogRateGrid.prior_normal_mixture`, :meth:`~LogRateGrid.prior_gamma`).
- **Update** (:meth:`LogRateGrid.update`): the exact censored likelihood of one interval of
  integrated exposure ``Λ`` (its length, or its integrated hour-of-week multiplier), at every
  node: ``× e^{−λ_jΛ}`` when unchanged, ``× (1 − e^{−λ_jΛ})`` when changed
  (:meth:`LogRateGrid.likelihood`, in linear space, scaled so nothing underflows; the row
  step runs compiled, :mod:`bayesrate.scheduler.gridkernel`). Bayes' rule on the nodes is
  exact for the discretised prior; it is the midpoint-rule quadrature of the continuous
  posterior. The normaliser is returned: the predictive log-probability of what was
  observed.
- **Drift** (:meth:`LogRateGrid.diffuse`): ``θ`` is a random walk between fetches, variance
  ``σ²·Δt`` (σ in log-rate per √hour). On the grid it is the continuous-time random walk
  that jumps to each neighbour at rate ``σ²/(2h²)`` (variance ``σ²Δt`` exactly; reflecting
  at the ends, so no mass is lost). Its transition ``exp(QΔt)`` is diagonal in the cosine
  basis of the grid (the eigenvectors of the reflecting second-difference matrix), so one
  basis serves every URL whatever its ``σ²Δt``: two ``K × K`` matrix products per URL.
- **Summaries**: the posterior mean of any function of λ is the sum over nodes
  (:meth:`~LogRateGrid.expect`: the same midpoint rule as the update); quantiles and the
  CDF read the posterior as a histogram (uniform density of ``θ`` within each cell,
  :meth:`~LogRateGrid.quantile`), and Thompson draws sample a cell, then ``θ`` uniformly in
  it (:meth:`~LogRateGrid.sample`). No special cases.

Resolution: a posterior narrower than a cell (sd of ``θ`` below ~h/2, i.e. a page with
many detected changes and no drift) is held on two or three nodes, so its mean is known to
within a fraction of ``h`` in log-rate (``docs/scheduler.md`` gives measured errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bayesrate.constants import HOURS_PER_DAY

#: default grid: 48 nodes from 2e-5 to 50 changes per day
GRID_SIZE = 48
GRID_MIN_PER_DAY = 2e-5
GRID_MAX_PER_DAY = 50.0
#: log-probabilities are kept at or above this (e^-700 ≈ 1e-304 of the total mass)
LOG_FLOOR = -700.0
#: rows per compiled step: keeps a batch's temporaries small (a few MB) whatever its size
CHUNK_ROWS = 8192


def logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """``log Σ_j exp(x_ij)`` per row (finite rows)."""
    top = x.max(axis=1)
    return top + np.log(np.exp(x - top[:, None]).sum(axis=1))


@dataclass(frozen=True)
class LogRateGrid:
    """The shared grid of log-rates (per hour) and the maths on per-URL log-probabilities.

    A different rule from :mod:`bayesrate.estimators.grid`'s per-page grids, on purpose:
    one fixed, uniform grid for every URL (a state stored per URL and updated one fetch at
    a time, whose range must hold any rate a URL may come to have), where those adapt to
    each page's whole data at once. numpy only (the scheduler never imports PyMC).

    Parameters
    ----------
    size
        Number of nodes ``K``.
    min_per_day, max_per_day
        Rates (changes per day) of the first and last node.
    """

    size: int = GRID_SIZE
    min_per_day: float = GRID_MIN_PER_DAY
    max_per_day: float = GRID_MAX_PER_DAY
    theta: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.size, (int, np.integer)) and 8 <= self.size <= 1024):
            raise ValueError(f"grid size must be an integer in [8, 1024], got {self.size!r}")
        lo, hi = float(self.min_per_day), float(self.max_per_day)
        if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
            raise ValueError(f"grid rates must satisfy 0 < min < max, got {lo!r}, {hi!r}")
        theta = np.linspace(np.log(lo / HOURS_PER_DAY), np.log(hi / HOURS_PER_DAY), self.size)
        object.__setattr__(self, "theta", theta)

    # ------------------------------------------------------------------ geometry
    @property
    def spacing(self) -> float:
        """``h``: the distance between nodes in log-rate."""
        return float(self.theta[1] - self.theta[0])

    @cached_property
    def rate(self) -> np.ndarray:
        """λ at the nodes (per hour)."""
        return np.exp(self.theta)

    @cached_property
    def edges(self) -> np.ndarray:
        """Cell edges in ``θ`` (``K + 1``; the outer two are ±∞)."""
        mid = 0.5 * (self.theta[1:] + self.theta[:-1])
        return np.concatenate([[-np.inf], mid, [np.inf]])

    @cached_property
    def _basis(self) -> tuple[np.ndarray, np.ndarray]:
        """Orthonormal cosine basis ``V`` and eigenvalues of the reflecting walk's generator
        per unit of ``σ²Δt`` (``Q = σ²/(2h²)·L``, ``L`` the second-difference matrix with
        reflecting ends: ``L = V diag(−4 sin²(πk/2K)) Vᵀ``)."""
        k = np.arange(self.size)
        j = np.arange(self.size)
        v = np.cos(np.pi * np.outer(j + 0.5, k) / self.size)
        v[:, 0] *= np.sqrt(1.0 / self.size)
        v[:, 1:] *= np.sqrt(2.0 / self.size)
        eig = -4.0 * np.sin(np.pi * k / (2 * self.size)) ** 2 / (2.0 * self.spacing**2)
        return v, eig

    def to_dict(self) -> dict[str, float | int]:
        return {"size": int(self.size), "min_per_day": self.min_per_day,
                "max_per_day": self.max_per_day}  # fmt: skip

    # ------------------------------------------------------------------ priors
    def prior_normal_mixture(
        self, weights: np.ndarray, means: np.ndarray, sds: np.ndarray
    ) -> np.ndarray:
        """Log cell masses of ``θ ~ Σ_c w_c Normal(m_c, s_c)`` (``θ`` = log rate per hour)."""
        from scipy.special import ndtr

        w = np.asarray(weights, dtype=np.float64)
        m = np.asarray(means, dtype=np.float64)[:, None]
        s = np.asarray(sds, dtype=np.float64)[:, None]
        if (s <= 0).any() or (w < 0).any() or not np.isclose(w.sum(), 1.0, rtol=1e-6):
            raise ValueError("a normal mixture needs weights summing to 1 and sds > 0")
        z = (self.edges[None, :] - m) / s
        lo, hi = z[:, :-1], z[:, 1:]
        # Φ(hi) − Φ(lo), from the upper tail where the cell lies above the mean (no cancellation)
        mass = np.where(lo > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
        return self._log_masses(w @ mass)

    def prior_gamma(self, alpha: float, beta_hours: float) -> np.ndarray:
        """Log cell masses of ``λ ~ Gamma(α, β)`` (λ per hour, β in hours)."""
        if not (alpha > 0 and beta_hours > 0):
            raise ValueError("a Gamma prior needs alpha > 0 and beta > 0")
        return self.gamma_probabilities(np.array([alpha]), np.array([beta_hours]))[0]

    def gamma_probabilities(self, alpha: np.ndarray, beta_hours: np.ndarray) -> np.ndarray:
        """``(n, K)`` log cell masses of ``λ ~ Gamma(α_i, β_i)`` per row (exact, from the CDF):
        a Gamma posterior read on the grid (for planning from its expectations)."""
        from scipy.special import gammainc, gammaincc

        a = np.asarray(alpha, dtype=np.float64)[:, None]
        x = np.asarray(beta_hours, dtype=np.float64)[:, None] * np.exp(self.edges)[None, :]
        lower = gammainc(a, x)
        upper = gammaincc(a, x)
        # mass = P(x_lo < X < x_hi): from the lower CDF below the median, the upper above
        mass = np.where(
            lower[:, 1:] < 0.5, lower[:, 1:] - lower[:, :-1], upper[:, :-1] - upper[:, 1:]
        )
        with np.errstate(divide="ignore"):
            logm = np.maximum(np.log(np.maximum(mass, 0.0)), LOG_FLOOR)
        return self._normalise(logm)

    def _log_masses(self, mass: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            logm = np.maximum(np.log(np.maximum(mass, 0.0)), LOG_FLOOR)
        return self._normalise(logm[None, :])[0]

    # ------------------------------------------------------------------ maths on rows
    @staticmethod
    def _normalise(logp: np.ndarray) -> np.ndarray:
        out = logp - logsumexp_rows(logp)[:, None]
        return np.maximum(out, LOG_FLOOR)

    def likelihood(
        self, exposure: np.ndarray, changed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The likelihood of one interval per row at every node, scaled: ``(L, log_scale)``
        with ``(b, K)`` ``L`` at most 1 and ``L · e^{log_scale}`` the likelihood.

        Unchanged: ``e^{−λΛ}``, scaled by its value at the first node (so no row
        underflows); changed: ``1 − e^{−λΛ} = −expm1(−λΛ)`` (accurate for small ``λΛ``).
        """
        x = np.asarray(exposure, dtype=np.float64)[:, None] * self.rate[None, :]
        hit = np.asarray(changed).astype(bool)
        log_scale = np.where(hit, 0.0, -x[:, 0])
        out = np.exp(-(x - x[:, :1]))
        if hit.any():
            out[hit] = -np.expm1(-x[hit])
        return out, log_scale

    def step(
        self,
        logp: np.ndarray,
        variance: np.ndarray | float = 0.0,
        exposure: np.ndarray | None = None,
        changed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Drift, then Bayes' rule for one interval per row, in one compiled pass.

        Parameters
        ----------
        logp
            ``(n, K)`` log-probabilities (float32 or float64).
        variance
            ``σ²Δt`` of the random walk per row (or one for all; 0: no drift).
        exposure, changed
            One interval per row (its integrated exposure and flag); ``None``: drift only.

        Returns
        -------
        logp, log_evidence, mean
            Posterior log-probabilities (float64), the predictive log-probability of each
            observed flag (0 without an update) and the posterior mean rate per hour.
        """
        from bayesrate.scheduler.gridkernel import step_rows

        logp = np.asarray(logp)
        n = len(logp)
        var = np.broadcast_to(np.asarray(variance, dtype=np.float64), (n,))
        if exposure is not None:
            exposure = np.asarray(exposure, dtype=np.float64)
            changed = np.asarray(changed)
        out = np.empty((n, self.size))
        evidence = np.zeros(n)
        mean = np.empty(n)
        basis, eigenvalues = self._basis
        basis_t = np.ascontiguousarray(basis.T)
        no_rows = np.empty((0, self.size))
        floor = float(np.exp(LOG_FLOOR))
        for lo in range(0, n, CHUNK_ROWS):
            part = slice(lo, min(n, lo + CHUNK_ROWS))
            before = np.asarray(logp[part], dtype=np.float64)
            log_norm = before.max(axis=1)
            weights = np.exp(before - log_norm[:, None])
            drift = var[part] > 0
            decay = np.exp(np.outer(var[part], eigenvalues)) if drift.any() else no_rows
            likelihood = no_rows
            if exposure is not None:
                likelihood, log_scale = self.likelihood(exposure[part], changed[part])
            step_rows(weights, np.ascontiguousarray(var[part]), decay, likelihood, basis,
                      basis_t, self.rate, floor, mean[part], log_norm)  # fmt: skip
            with np.errstate(divide="ignore"):
                out[part] = np.maximum(np.log(weights), LOG_FLOOR)
            if exposure is None:
                out[part][~drift] = before[~drift]
            else:
                evidence[part] = log_norm + log_scale
        return out, evidence, mean

    def update(
        self, logp: np.ndarray, exposure: np.ndarray, changed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bayes' rule for one interval per row: ``(new log-probabilities, log-evidence)``.

        ``log-evidence`` is the predictive log-probability of the observed flag.
        """
        out, evidence, _ = self.step(logp, 0.0, exposure, changed)
        return out, evidence

    def diffuse(self, logp: np.ndarray, variance: np.ndarray) -> np.ndarray:
        """The random walk of ``θ`` with variance ``σ²Δt`` per row (0: unchanged)."""
        var = np.asarray(variance, dtype=np.float64)
        if not (var > 0).any():
            return np.asarray(logp, dtype=np.float64)
        return self.step(logp, var)[0]

    # ------------------------------------------------------------------ summaries
    def probabilities(self, logp: np.ndarray) -> np.ndarray:
        """``(b, K)`` node probabilities (rows sum to 1)."""
        p = np.exp(np.asarray(logp, dtype=np.float64))
        return p / p.sum(axis=1, keepdims=True)

    def expect(self, logp: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``E[f(λ)]`` per row; ``values`` = f at the nodes, ``(K,)`` or ``(b, K)``."""
        p = self.probabilities(logp)
        values = np.asarray(values, dtype=np.float64)
        return p @ values if values.ndim == 1 else (p * values).sum(axis=1)

    def mean(self, logp: np.ndarray) -> np.ndarray:
        """Posterior mean rate per hour."""
        return self.expect(logp, self.rate)

    def cdf(self, logp: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
        """``P(log λ ≤ theta)`` per row (histogram reading; ``theta`` scalar or one per row)."""
        p = self.probabilities(logp)
        theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), (len(p),))
        h = self.spacing
        lo = self.theta - h / 2
        frac = np.clip((theta[:, None] - lo[None, :]) / h, 0.0, 1.0)
        return (p * frac).sum(axis=1)

    def quantile(self, logp: np.ndarray, q: float | np.ndarray) -> np.ndarray:
        """Quantile of λ (per hour) per row: ``q`` scalar or one per row, in (0, 1)."""
        p = self.probabilities(logp)
        q = np.broadcast_to(np.asarray(q, dtype=np.float64), (len(p),))
        return np.exp(self._inverse_cdf(p, q))

    def sample(self, logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One Thompson draw of λ (per hour) per row."""
        p = self.probabilities(logp)
        return np.exp(self._inverse_cdf(p, rng.random(len(p))))

    def _inverse_cdf(self, p: np.ndarray, u: np.ndarray) -> np.ndarray:
        cum = np.cumsum(p, axis=1)
        cum[:, -1] = 1.0
        j = np.minimum((cum < u[:, None]).sum(axis=1), self.size - 1)
        rows = np.arange(len(p))
        below = np.where(j > 0, cum[rows, np.maximum(j - 1, 0)], 0.0)
        mass = p[rows, j]
        frac = np.clip(np.divide(u - below, mass, out=np.full(len(p), 0.5), where=mass > 0), 0, 1)
        return self.theta[j] - self.spacing / 2 + frac * self.spacing


# ---------------------------------------------------------------------- whole sequences
def merge_unchanged(
    row: np.ndarray,
    duration: np.ndarray,
    exposure: np.ndarray,
    changed: np.ndarray,
    max_hours: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge runs of consecutive unchanged intervals into blocks of at most ``max_hours``.

    Intervals are given in time order within each row (rows contiguous). Without drift the
    merge is exact (unchanged likelihoods multiply: ``e^{−λΣΛ}``); with drift it holds the
    rate constant within a block (the random walk steps once per block, variance ``σ²`` ×
    the block's duration). Changed intervals stay as they are. Returns ``(row, duration,
    exposure, changed)`` of the blocks, in the same order.
    """
    row = np.asarray(row, dtype=np.int64)
    dur = np.asarray(duration, dtype=np.float64)
    expo = np.asarray(exposure, dtype=np.float64)
    hit = np.asarray(changed).astype(bool)
    n = len(row)
    if n == 0:
        return row, dur, expo, hit.astype(np.int8)
    # a run: maximal stretch of unchanged intervals of one row
    run_start = np.r_[True, (row[1:] != row[:-1]) | hit[1:] | hit[:-1]]
    run_id = np.cumsum(run_start) - 1
    cum = np.cumsum(dur)
    start_cum = (cum - dur)[run_start][run_id]
    block_in_run = np.floor((cum - dur - start_cum) / max_hours).astype(np.int64)
    key_start = run_start | np.r_[True, block_in_run[1:] != block_in_run[:-1]] | hit
    block = np.cumsum(key_start) - 1
    m = int(block[-1]) + 1
    return (
        row[key_start],
        np.bincount(block, weights=dur, minlength=m),
        np.bincount(block, weights=expo, minlength=m),
        hit[key_start].astype(np.int8),
    )


def run_filter(
    grid: LogRateGrid,
    logp: np.ndarray,
    row: np.ndarray,
    duration: np.ndarray,
    exposure: np.ndarray,
    changed: np.ndarray,
    sigma2: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Filter every row through its intervals in order: drift, then Bayes' rule.

    Parameters
    ----------
    logp
        ``(n, K)`` log-probabilities before the first interval (modified copy returned).
    row, duration, exposure, changed
        Intervals in time order within each row (rows contiguous): row position, length in
        hours (for the drift), integrated exposure (for the likelihood), flag.
    sigma2
        Random-walk variance of the log-rate per hour, per row (or one for all).

    Returns
    -------
    logp, log_evidence
        Posterior log-probabilities per row after its last interval, and the sum of its
        predictive log-probabilities (the row's marginal likelihood under the filter).
    """
    out = np.array(logp, dtype=np.float64, copy=True)
    evidence = np.zeros(len(out))
    row = np.asarray(row, dtype=np.int64)
    if len(row) == 0:
        return out, evidence
    s2 = np.broadcast_to(np.asarray(sigma2, dtype=np.float64), (len(out),))
    first = np.r_[True, row[1:] != row[:-1]]
    rank = np.arange(len(row)) - np.maximum.accumulate(np.where(first, np.arange(len(row)), 0))
    order = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[order], np.arange(int(rank.max()) + 2))
    dur = np.asarray(duration, dtype=np.float64)
    expo = np.asarray(exposure, dtype=np.float64)
    hit = np.asarray(changed)
    for r in range(len(bounds) - 1):
        k = order[bounds[r] : bounds[r + 1]]
        i = row[k]
        out[i], ev, _ = grid.step(out[i], s2[i] * dur[k], expo[k], hit[k])
        evidence[i] += ev
    return out, evidence
