"""Online change-rate estimators with O(1) state per page, updated for many pages per step.

Avrachenkov, Patil & Thoppe's estimators (``docs/science.md`` §2), for a page crawled as a
Poisson process of known rate ``p`` (visits per hour), after ``k`` visits of which
``Î_k`` found a change:

- LLN: ``x_k = p Î_k / (k + α_k − Î_k)``; ``α_k ≡ 1`` (default), ``log(k + 1)`` or ``√k``.
- SA: ``y_{k+1} = y_k + η_k [I_{k+1}(y_k + p) − y_k]``, ``η_k = (k + 1)^{−η}``
  (paper: ``η = 0.75``; ``0.8`` in its λ = 500 runs).
- SAM: ``z_{k+1} = z_k + η_k [I_{k+1}(z_k + p) − z_k] + ζ_k (z_k − z_{k−1})`` with
  ``ζ_k = (β_k − ω η_k)/β_{k−1}``, ``β_k = (k + 1)^{−β}`` (paper: ``η = 0.75``,
  ``β = 0.6``, ``ω = 1``); ``ζ_0 = 0``.
- Naive (the paper's online form): ``w_k = p Î_k / k``.

They use ``p``, not the actual interval lengths. Each state object holds arrays for a
batch of pages and :meth:`update` advances every page in ``mask`` by one visit.

**On a fixed visit grid** (every interval of length ``τ``) the paper's Poisson-crawl
assumption ``E[I] = λ/(λ + p)`` does not hold: ``E[I] = 1 − e^{−λτ}``, and LLN, SA and SAM
converge to ``x = p(e^{λτ} − 1)`` instead of ``λ`` (``(e^{λτ} − 1)/τ`` at ``p = 1/τ``: +72%
at ``λτ = 1``, ×6.4 at ``λτ = 3``). :func:`run_sequences` detects pages whose intervals all
have the same length and reports the grid-consistent rate ``log(1 + x/p)/τ`` for them
(:func:`grid_consistent`); ``grid_transform=False`` keeps the paper's raw estimate.

:func:`run_sequences` replays the visits of an :class:`~bayesrate.observations.Observations`
through any online estimator (including the Gamma updates of
:mod:`bayesrate.estimators.gamma`), one vectorized step per visit index; ``p`` defaults to
each page's observed crawl rate ``n / T``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bayesrate.estimators import gamma as _gamma

if TYPE_CHECKING:
    from bayesrate.estimators.batch import RateEstimate
    from bayesrate.observations import Observations

#: the paper's default step-size exponents
SA_ETA = 0.75
SAM_ETA = 0.75
SAM_BETA = 0.6
SAM_OMEGA = 1.0

LLN_ALPHAS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "one": lambda k: np.ones_like(k, dtype=np.float64),
    "log": lambda k: np.log(k + 1.0),
    "sqrt": lambda k: np.sqrt(k.astype(np.float64)),
}


Schedule = float | Callable[[np.ndarray], np.ndarray]


def step_size(schedule: Schedule, k: np.ndarray) -> np.ndarray:
    """``(k + 1)^{−e}`` for an exponent ``e``, or ``schedule(k)`` for a callable."""
    if callable(schedule):
        return np.asarray(schedule(k), dtype=np.float64)
    return (np.asarray(k, dtype=np.float64) + 1.0) ** -schedule


def _check_exponent(name: str, value: Schedule) -> None:
    if not callable(value) and not 0 < value <= 1:
        raise ValueError(f"{name} must be an exponent in (0, 1] or a callable of k")


def _mask(mask: np.ndarray | None, n: int) -> np.ndarray:
    if mask is None:
        return np.ones(n, dtype=bool)
    return np.asarray(mask, dtype=bool)


def _as_pages(p: float | np.ndarray, n_pages: int) -> np.ndarray:
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), (n_pages,)).copy()
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise ValueError("crawl rate p must be finite and >= 0")
    return p


@dataclass
class Naive:
    """``w_k = p Î_k / k`` (inconsistent: tends to ``pλ/(λ + p)``)."""

    p: np.ndarray
    k: np.ndarray
    ihat: np.ndarray

    @classmethod
    def start(cls, n_pages: int, p: float | np.ndarray) -> Naive:
        return cls(_as_pages(p, n_pages), np.zeros(n_pages, np.int64), np.zeros(n_pages))

    def update(self, changed: np.ndarray, mask: np.ndarray | None = None) -> None:
        m = _mask(mask, len(self.k))
        self.k += m
        self.ihat += np.asarray(changed, dtype=np.float64) * m

    @property
    def estimate(self) -> np.ndarray:
        return np.divide(self.p * self.ihat, self.k, out=np.zeros_like(self.p), where=self.k > 0)


@dataclass
class LLN:
    """Law-of-large-numbers estimator ``x_k = p Î_k / (k + α_k − Î_k)``.

    ``alpha`` is ``"one"``, ``"log"`` (``log(k + 1)``, positive from ``k = 1``),
    ``"sqrt"`` or a callable of ``k``.
    """

    p: np.ndarray
    k: np.ndarray
    ihat: np.ndarray
    alpha: str | Callable[[np.ndarray], np.ndarray] = "one"

    @classmethod
    def start(cls, n_pages: int, p: float | np.ndarray, alpha: str | Callable = "one") -> LLN:
        if isinstance(alpha, str) and alpha not in LLN_ALPHAS:
            raise ValueError(f"alpha must be one of {sorted(LLN_ALPHAS)} or a callable")
        zeros = np.zeros(n_pages)
        return cls(_as_pages(p, n_pages), np.zeros(n_pages, np.int64), zeros, alpha)

    def update(self, changed: np.ndarray, mask: np.ndarray | None = None) -> None:
        m = _mask(mask, len(self.k))
        self.k += m
        self.ihat += np.asarray(changed, dtype=np.float64) * m

    @property
    def estimate(self) -> np.ndarray:
        fn = LLN_ALPHAS[self.alpha] if isinstance(self.alpha, str) else self.alpha
        denom = self.k + fn(self.k) - self.ihat
        ok = self.k > 0
        return np.divide(self.p * self.ihat, denom, out=np.zeros_like(self.p), where=ok)


@dataclass
class SA:
    """Stochastic approximation ``y_{k+1} = y_k + η_k [I (y_k + p) − y_k]``."""

    p: np.ndarray
    k: np.ndarray
    y: np.ndarray
    eta: Schedule = SA_ETA

    @classmethod
    def start(
        cls, n_pages: int, p: float | np.ndarray, eta: Schedule = SA_ETA, y0: float = 0.0
    ) -> SA:
        """``eta``: exponent of ``η_k = (k + 1)^{−η}`` or a callable ``k -> η_k``."""
        _check_exponent("eta", eta)
        return cls(_as_pages(p, n_pages), np.zeros(n_pages, np.int64), np.full(n_pages, y0), eta)

    def update(self, changed: np.ndarray, mask: np.ndarray | None = None) -> None:
        m = _mask(mask, len(self.k))
        step = step_size(self.eta, self.k)
        i = np.asarray(changed, dtype=np.float64)
        self.y += m * step * (i * (self.y + self.p) - self.y)
        self.k += m

    @property
    def estimate(self) -> np.ndarray:
        return self.y


@dataclass
class SAM:
    """SA with momentum; ``ζ_k = (β_k − ω η_k)/β_{k−1}``, ``ζ_0 = 0``."""

    p: np.ndarray
    k: np.ndarray
    z: np.ndarray
    z_prev: np.ndarray
    eta: Schedule = SAM_ETA
    beta: Schedule = SAM_BETA
    omega: float = SAM_OMEGA

    @classmethod
    def start(
        cls,
        n_pages: int,
        p: float | np.ndarray,
        eta: Schedule = SAM_ETA,
        beta: Schedule = SAM_BETA,
        omega: float = SAM_OMEGA,
        z0: float = 0.0,
    ) -> SAM:
        """``eta``/``beta``: exponents of ``η_k``/``β_k`` or callables of ``k``."""
        _check_exponent("eta", eta)
        _check_exponent("beta", beta)
        if not omega > 0:
            raise ValueError("omega must be > 0")
        z = np.full(n_pages, z0)
        return cls(
            _as_pages(p, n_pages), np.zeros(n_pages, np.int64), z, z.copy(), eta, beta, omega
        )

    def update(self, changed: np.ndarray, mask: np.ndarray | None = None) -> None:
        m = _mask(mask, len(self.k))
        k = self.k.astype(np.float64)
        eta_k = step_size(self.eta, k)
        beta_k = step_size(self.beta, k)
        beta_prev = np.where(k > 0, step_size(self.beta, np.maximum(k - 1.0, 0.0)), 1.0)
        zeta = np.where(k > 0, (beta_k - self.omega * eta_k) / beta_prev, 0.0)
        i = np.asarray(changed, dtype=np.float64)
        new = self.z + eta_k * (i * (self.z + self.p) - self.z) + zeta * (self.z - self.z_prev)
        self.z_prev = np.where(m, self.z, self.z_prev)
        self.z = np.where(m, new, self.z)
        self.k += m

    @property
    def estimate(self) -> np.ndarray:
        return self.z


@dataclass
class GammaState:
    """Gamma(α, β) per page (rates per hour), advanced by one interval per step.

    ``kind`` is ``"exposure"`` (:func:`~bayesrate.estimators.gamma.exposure_update`) or
    ``"adf"`` (:func:`~bayesrate.estimators.gamma.adf_update`). Unlike LLN/SA/SAM it uses
    the actual interval lengths ``tau``.
    """

    alpha: np.ndarray
    beta: np.ndarray
    kind: str = "adf"
    _fn: Callable = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fns = {"exposure": _gamma.exposure_update, "adf": _gamma.adf_update}
        if self.kind not in fns:
            raise ValueError(f"kind must be one of {sorted(fns)}")
        self._fn = fns[self.kind]

    @classmethod
    def start(
        cls, n_pages: int, alpha: float | np.ndarray, beta: float | np.ndarray, kind: str = "adf"
    ) -> GammaState:
        a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_pages,)).copy()
        b = np.broadcast_to(np.asarray(beta, dtype=np.float64), (n_pages,)).copy()
        if np.any(~(a > 0)) or np.any(~(b > 0)):
            raise ValueError("Gamma prior needs alpha > 0 and beta > 0")
        return cls(a, b, kind)

    def update(self, changed: np.ndarray, tau: np.ndarray, mask: np.ndarray | None = None) -> None:
        if mask is None:
            self.alpha, self.beta = self._fn(self.alpha, self.beta, tau, changed)
            return
        m = np.asarray(mask, dtype=bool)
        idx = np.flatnonzero(m)
        ch = np.broadcast_to(np.asarray(changed), m.shape)[idx]
        ta = np.broadcast_to(np.asarray(tau, dtype=np.float64), m.shape)[idx]
        self.alpha[idx], self.beta[idx] = self._fn(self.alpha[idx], self.beta[idx], ta, ch)

    @property
    def estimate(self) -> np.ndarray:
        return self.alpha / self.beta

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed credible interval of the current Gamma."""
        from scipy.stats import gamma

        scale = 1.0 / self.beta
        return (
            gamma.ppf(0.5 - level / 2, self.alpha, scale=scale),
            gamma.ppf(0.5 + level / 2, self.alpha, scale=scale),
        )


ONLINE_METHODS = ("naive-online", "lln", "sa", "sam", "gamma-exposure", "gamma-adf")


def crawl_rate(obs: Observations) -> np.ndarray:
    """Observed crawl rate ``n / T`` per page (visits per hour; 0 without intervals)."""
    stats = obs.interval_stats
    n = stats.n_intervals.astype(np.float64)
    return np.divide(n, stats.exposure, out=np.zeros_like(n), where=stats.exposure > 0)


def make_state(method: str, n_pages: int, *, p=None, prior_alpha=None, prior_beta=None, **params):
    """A fresh state for ``method`` (one of :data:`ONLINE_METHODS`).

    ``p`` is the crawl rate for the paper's estimators, ``prior_alpha``/``prior_beta`` the
    Gamma prior (per hour) for the Gamma methods; ``params`` go to the state's ``start``.
    """
    if method == "naive-online":
        return Naive.start(n_pages, p)
    if method == "lln":
        return LLN.start(n_pages, p, **params)
    if method == "sa":
        return SA.start(n_pages, p, **params)
    if method == "sam":
        return SAM.start(n_pages, p, **params)
    if method in ("gamma-exposure", "gamma-adf"):
        kind = method.removeprefix("gamma-")
        return GammaState.start(n_pages, prior_alpha, prior_beta, kind=kind)
    raise ValueError(f"unknown online method {method!r}; choose from {ONLINE_METHODS}")


#: the paper's estimators whose fixed point moves on a regular grid
GRID_SENSITIVE = ("lln", "sa", "sam")


def regular_interval(obs: Observations, rtol: float = 1e-9) -> np.ndarray:
    """Per page, the common length of its intervals (hours) when it has at least two and
    they are all equal (a regular grid), else NaN."""
    stats = obs.interval_stats
    lo = np.full(stats.n_pages, np.inf)
    hi = np.full(stats.n_pages, -np.inf)
    np.minimum.at(lo, stats.group_page, stats.group_tau)
    np.maximum.at(hi, stats.group_page, stats.group_tau)
    regular = (stats.n_intervals >= 2) & np.isfinite(lo) & (hi - lo <= rtol * hi)
    return np.where(regular, lo, np.nan)


def grid_consistent(raw: np.ndarray, p: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The rate whose grid fixed point is ``raw``: ``log(1 + raw/p)/τ`` (per hour).

    On a grid of interval ``τ``, LLN, SA and SAM converge to ``p(e^{λτ} − 1)``; this
    inverts that. NaN ``τ`` (irregular visits) leaves ``raw`` unchanged.
    """
    raw = np.asarray(raw, dtype=np.float64)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), raw.shape)
    ok = np.isfinite(tau) & (p > 0) & (tau > 0)
    out = raw.copy()
    out[ok] = np.log1p(raw[ok] / p[ok]) / tau[ok]
    return out


def run_sequences(
    obs: Observations,
    method: str,
    *,
    p: float | np.ndarray | None = None,
    prior_alpha: float | np.ndarray | None = None,
    prior_beta: float | np.ndarray | None = None,
    level: float = 0.95,
    grid_transform: bool = True,
    **params,
) -> RateEstimate:
    """Replay every page's visits in time order through an online estimator.

    One vectorized step per visit index (a Python loop over the longest page's number of
    intervals, not over pages). ``p`` (visits per hour) defaults to each page's observed
    crawl rate; ``prior_alpha``/``prior_beta`` (per hour) are the Gamma prior for the Gamma
    methods; ``params`` are the estimator's step-size options (e.g. ``eta``, ``beta``).
    Returns per-hour rates; the Gamma methods also give equal-tailed credible intervals.

    For LLN, SA and SAM, pages visited on a regular grid get
    the grid-consistent rate (:func:`grid_consistent`) unless ``grid_transform`` is false;
    ``extra["grid_consistent"]`` marks them and ``extra["raw"]`` keeps the paper's values.
    """
    from bayesrate.estimators.batch import RateEstimate

    n_pages = obs.n_pages
    if p is None:
        p = crawl_rate(obs)
    state = make_state(
        method, n_pages, p=p, prior_alpha=prior_alpha, prior_beta=prior_beta, **params
    )
    n_int = np.maximum(obs.visits_per_page - 1, 0)
    starts = obs.offsets[:-1]
    changed = obs.changed
    time = obs.time
    longest = int(n_int.max()) if n_pages else 0
    order = np.argsort(-n_int, kind="stable")
    counts = n_int[order]
    for j in range(longest):
        # pages with more than j intervals: a prefix of `order`
        live = order[: np.searchsorted(-counts, -j, side="left")]
        idx = starts[live] + 1 + j
        mask = np.zeros(n_pages, dtype=bool)
        mask[live] = True
        flags = np.zeros(n_pages)
        flags[live] = changed[idx]
        if isinstance(state, GammaState):
            tau = np.zeros(n_pages)
            tau[live] = time[idx] - time[idx - 1]
            state.update(flags, tau, mask)
        else:
            state.update(flags, mask)
    if isinstance(state, GammaState):
        lo, hi = state.interval(level)
        return RateEstimate(
            method, state.estimate, lo, hi, level, extra={"alpha": state.alpha, "beta": state.beta}
        )
    raw = np.asarray(state.estimate, dtype=np.float64).copy()
    if method not in GRID_SENSITIVE:
        return RateEstimate(method, raw)
    tau = regular_interval(obs) if grid_transform else np.full(n_pages, np.nan)
    rate = grid_consistent(raw, p, tau)
    return RateEstimate(method, rate, extra={"raw": raw, "grid_consistent": np.isfinite(tau)})
