"""Two-state Markov-modulated Poisson process (quiet/burst) under interval censoring.

A page alternates between a *quiet* state (changes at rate ``λ``) and a *burst* state
(rate ``r·λ``, ``r > 1``), switching quiet → burst at rate ``q_in`` and back at
``q_out`` (per hour); the chain starts in its stationary distribution
``π = (q_out, q_in) / (q_in + q_out)``. With the generator ``Q`` of the switching and
``Λ = diag(λ, rλ)``, an interval of length ``τ`` carries a 2×2 *transfer matrix*
(row: the state at its start, column: the state at its end)::

    no change:  M₀(τ) = exp((Q − Λ)τ)
    a change:   M₁(τ) = exp(Qτ) − M₀(τ)

and a page's visit sequence has likelihood ``π · Π_i M_{c_i}(τ_i) · 1``: the hidden
state carries over from one interval to the next, so detections cluster in time, the
serial dependence an interval-level mixture (the research package's ``bursty`` model) cannot
express. ``r = 1`` (or ``q_in → 0``) is the Poisson model of :mod:`bayesrate.likelihood`.

**Sufficient statistics.** The likelihood depends on the order of the intervals, so
per-page counts are not enough; consecutive intervals of one length and one outcome are.
:class:`VisitRuns` holds each page's sequence as such runs: a run of ``n`` unchanged
intervals of length ``τ`` is the single factor ``M₀(nτ)`` (``M₀(τ)ⁿ = M₀(nτ)``); a run
of ``n`` detections is ``M₁(τ)ⁿ``. A daily crawl of a page with ``c`` detections has
at most ``2c + 1`` runs, whatever its length.

The 2×2 exponentials are closed forms (:func:`transfer_matrices`), scaled by their
largest eigenvalue so that long quiet runs neither overflow nor underflow; the forward
recursion is numba-compiled (:func:`grid_loglik`: every page at every rate of a grid).

:func:`fit` estimates the shared parameters ``(r, q_in, q_out)`` and a log-normal
population of quiet rates by maximum marginal likelihood (each page's ``log λ``
integrated over a grid, an empirical-Bayes hierarchy with one population); with
``poisson=True`` the same population without bursts, the baseline it is compared with.
:func:`heldout_log_score` scores a later stretch of each page's sequence given the
earlier one (the chain's state at the split is filtered, not reset), and
:func:`replicate_changes` draws detection sequences on the observed visit times for the
posterior predictive gap check (:mod:`bayesrate.studies.bursts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit, logsumexp

from bayesrate.errors import ObservationError

if TYPE_CHECKING:
    from bayesrate.observations import Observations

#: default log-rate grid (per hour) over which each page's quiet rate is integrated
THETA_LOW, THETA_HIGH, GRID_POINTS = float(np.log(1e-6)), float(np.log(3.0)), 121
#: the fit's grid scan: every SCAN_STRIDE-th point, then the cells within SCAN_DROP nats
SCAN_STRIDE, SCAN_DROP = 6, 40.0
#: the search box of :func:`fit` on ``(log(r − 1), log q_in, log q_out)`` (rates per
#: hour): beyond it the chain is degenerate (switches every few seconds or never in a
#: million years) and the closed-form exponentials lose all precision
SEARCH_LOW = np.log([1e-3, 1e-10, 1e-10])
SEARCH_HIGH = np.log([1e6, 1e2, 1e2])
#: grid points whose posterior weight is below this are left out of a predictive
WEIGHT_FLOOR = 1e-12
#: a predictive pmf is extended until the mass above its cap is below this
TAIL_MASS = 1e-10


@dataclass(frozen=True)
class VisitRuns:
    """Each page's intervals, in time order, as runs of one length and one outcome.

    Attributes
    ----------
    offsets
        ``(n_pages + 1,)``: the runs of page ``p`` are ``offsets[p]:offsets[p + 1]``.
    tau
        Interval length of each run, hours.
    changed
        1 where the run's intervals each ended with a detected change.
    count
        Number of intervals in the run.
    """

    offsets: np.ndarray
    tau: np.ndarray
    changed: np.ndarray
    count: np.ndarray

    @property
    def n_pages(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_runs(self) -> int:
        return len(self.tau)

    @property
    def n_intervals(self) -> np.ndarray:
        """Intervals per page."""
        run_page = np.repeat(np.arange(self.n_pages), np.diff(self.offsets))
        return np.bincount(run_page, weights=self.count, minlength=self.n_pages).astype(np.int64)

    @classmethod
    def from_intervals(
        cls, page: np.ndarray, tau: np.ndarray, changed: np.ndarray, n_pages: int
    ) -> VisitRuns:
        """Runs from intervals listed page by page, in time order within each page.

        Raises
        ------
        ObservationError
            When pages are not in order, a length is not positive and finite, or a flag
            is not 0/1 (the offending positions are named).
        """
        page = np.asarray(page, dtype=np.int64)
        tau = np.asarray(tau, dtype=np.float64)
        changed = np.asarray(changed)
        if not (len(page) == len(tau) == len(changed)):
            raise ObservationError("page, tau and changed must have one entry per interval")
        bad = np.flatnonzero(~np.isfinite(tau) | (tau <= 0))
        if len(bad):
            raise ObservationError(
                f"{len(bad)} intervals of non-positive or non-finite length "
                f"(positions {bad[:10].tolist()})",
                field="tau",
            )
        bad = np.flatnonzero((changed != 0) & (changed != 1))
        if len(bad):
            raise ObservationError(
                f"{len(bad)} change flags are not 0/1 (positions {bad[:10].tolist()})",
                field="changed",
            )
        bad = np.flatnonzero((np.diff(page) < 0) | (page[1:] >= n_pages)) + 1
        if len(page) and (page[0] < 0 or len(bad)):
            raise ObservationError(
                f"intervals must be grouped by page 0..{n_pages - 1} in order "
                f"(positions {bad[:10].tolist()})",
                field="page",
            )
        changed = changed.astype(np.int8)
        start = np.ones(len(tau), dtype=bool)
        if len(tau):
            start[1:] = (
                (page[1:] != page[:-1]) | (tau[1:] != tau[:-1]) | (changed[1:] != changed[:-1])
            )
        first = np.flatnonzero(start)
        count = np.diff(np.append(first, len(tau)))
        run_page = page[first]
        offsets = np.searchsorted(run_page, np.arange(n_pages + 1)).astype(np.int64)
        return cls(offsets, tau[first], changed[first], count.astype(np.int64))

    @classmethod
    def from_observations(cls, obs: Observations) -> VisitRuns:
        """The visit sequences of validated observations (every page's baseline excluded)."""
        from bayesrate.sufficient import interval_arrays

        return cls.from_intervals(*interval_arrays(obs), obs.n_pages)


@dataclass(frozen=True)
class BurstParameters:
    """Shared switching parameters and the population of quiet log-rates.

    Attributes
    ----------
    ratio
        ``r``: the burst state's rate over the quiet state's (1: no bursts, Poisson).
    q_in, q_out
        Switching rates per hour, quiet → burst and burst → quiet.
    mu, sigma
        Mean and SD of the quiet log-rates (per hour) of the pages.
    """

    ratio: float
    q_in: float
    q_out: float
    mu: float
    sigma: float

    @property
    def burst_share(self) -> float:
        """Long-run share of time in the burst state."""
        total = self.q_in + self.q_out
        return self.q_in / total if total > 0 else 0.0

    @property
    def burst_days(self) -> float:
        """Mean length of a burst, days."""
        return 1.0 / (24.0 * self.q_out) if self.q_out > 0 else float("inf")

    @property
    def quiet_days(self) -> float:
        """Mean length of a quiet spell, days."""
        return 1.0 / (24.0 * self.q_in) if self.q_in > 0 else float("inf")

    def as_dict(self) -> dict[str, float]:
        return {
            "ratio": self.ratio,
            "q_in_per_hour": self.q_in,
            "q_out_per_hour": self.q_out,
            "burst_share": self.burst_share,
            "burst_days": self.burst_days,
            "quiet_days": self.quiet_days,
            "mu_log_rate": self.mu,
            "sigma_log_rate": self.sigma,
        }


_KERNELS = None


def _kernels():
    """The numba kernels (numba is imported on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from bayesrate.estimators import _mmpp_kernels as k

        _KERNELS = (k.expm2_scaled, k.grid, k.simulate, k.count_pmf)
    return _KERNELS


def transfer_matrices(
    lam: float, ratio: float, q_in: float, q_out: float, tau: float
) -> tuple[np.ndarray, np.ndarray]:
    """``M₀(τ)`` and ``M₁(τ)`` (2×2; rows: start state, columns: end state; quiet first)."""
    expm2_scaled = _kernels()[0]
    m00, m01, m10, m11, scale = expm2_scaled(-q_in - lam, q_in, q_out, -q_out - ratio * lam, tau)
    quiet = np.array([[m00, m01], [m10, m11]]) * np.exp(scale)
    s00, s01, s10, s11, _ = expm2_scaled(-q_in, q_in, q_out, -q_out, tau)
    return quiet, np.array([[s00, s01], [s10, s11]]) - quiet


def grid_loglik(
    runs: VisitRuns,
    theta: np.ndarray,
    ratio: float,
    q_in: float,
    q_out: float,
    *,
    stride: int = 1,
) -> np.ndarray:
    """``log P(page's sequence | λ = e^θ)`` for every page and every ``θ`` of ``theta``.

    With ``stride > 1`` each page is scanned at every ``stride``-th point first, and only
    the grid cells with an end within :data:`SCAN_DROP` nats of the scan's best are filled
    in; the others are ``−inf``. For a page likelihood unimodal in ``θ`` the points left
    out are below ``e^{−SCAN_DROP}`` of its maximum (the peak lies in a cell next to the
    scan's best), so integrals over the grid lose nothing measurable.

    Returns
    -------
    numpy.ndarray
        ``(n_pages, len(theta))``.
    """
    return filtered(runs, theta, ratio, q_in, q_out, stride=stride)[0]


def filtered(
    runs: VisitRuns,
    theta: np.ndarray,
    ratio: float,
    q_in: float,
    q_out: float,
    *,
    stride: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grid_loglik` and the filtered probability of the burst state at each page's
    last visit, both ``(n_pages, len(theta))`` (NaN where the scan skipped a point)."""
    grid = _kernels()[1]
    return grid(
        runs.offsets,
        runs.tau,
        runs.changed,
        runs.count,
        np.asarray(theta, dtype=np.float64),
        float(ratio),
        float(q_in),
        float(q_out),
        int(stride),
        SCAN_DROP,
    )


def _log_weights(theta: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    """Normal(μ, σ) on the grid ``theta``, normalised over it (trapezoid-free: equal steps)."""
    logw = -0.5 * ((theta - mu) / sigma) ** 2
    return logw - _logsumexp_1d(logw)


def _logsumexp_1d(a: np.ndarray) -> float:
    """``scipy.special.logsumexp(a)`` of a 1-d array, bit for bit (its formula: the largest
    terms separated out, ``log1p`` of the rest) without its per-call overhead: the
    population search calls it ~10⁵ times per fit, where scipy's array-API dispatch took
    ~80% of ``fit``'s time."""
    top = a.max()
    if not np.isfinite(top):
        return float(logsumexp(a))
    at_top = a == top
    m = float(np.count_nonzero(at_top))
    rest = np.exp(np.where(at_top, -np.inf, a) - top).sum() / m
    return float(np.log1p(rest) + np.log(m) + top)


def marginal_loglik(ll: np.ndarray, theta: np.ndarray, mu: float, sigma: float) -> np.ndarray:
    """Each page's log-likelihood with its log-rate integrated over the population."""
    return logsumexp(ll + _log_weights(theta, mu, sigma)[None, :], axis=1)


def _class_terms(
    ll: np.ndarray,
    steady_ll: np.ndarray | None,
    theta: np.ndarray,
    mu: float,
    sigma: float,
    steady_share: float,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per page, ``log P(class, data)`` of the bursty class and (``steady_share > 0``) the
    steady one, each page's log-rate integrated over the population ``Normal(μ, σ)``."""
    bursty = marginal_loglik(ll, theta, mu, sigma)
    if not steady_share:
        return bursty, None
    steady = marginal_loglik(steady_ll, theta, mu, sigma)
    return np.log1p(-steady_share) + bursty, np.log(steady_share) + steady


@dataclass(frozen=True)
class BurstFit:
    """Maximum marginal likelihood estimates (:func:`fit`).

    Attributes
    ----------
    params
        The estimates.
    loglik
        The maximised marginal log-likelihood, summed over pages.
    theta
        The log-rate grid.
    page_loglik
        ``(n_pages, grid)``: each page's log-likelihood at the estimates.
    evaluations
        Forward-recursion passes over the data.
    converged
        Whether Nelder–Mead met its tolerances within its evaluation cap.
    steady_share
        With ``mixture=True``: the prior share of *steady* pages (Poisson at their quiet
        rate, no bursts); 0 otherwise.
    steady_loglik
        ``(n_pages, grid)``: each page's Poisson log-likelihood (mixture fits only).
    """

    params: BurstParameters
    loglik: float
    theta: np.ndarray
    page_loglik: np.ndarray
    evaluations: int
    converged: bool = True
    steady_share: float = 0.0
    steady_loglik: np.ndarray | None = None

    @property
    def poisson(self) -> bool:
        """True for the baseline without bursts."""
        return self.params.ratio == 1.0

    @property
    def steady(self) -> BurstParameters:
        """The steady class's chain: no bursts, the same population."""
        return BurstParameters(1.0, 0.0, 0.0, self.params.mu, self.params.sigma)

    def _class_terms(self, ll, steady_ll) -> tuple[np.ndarray, np.ndarray | None]:
        """Per page, ``log P(class, data)`` of the bursty and (mixture only) steady class."""
        p = self.params
        ll = self.page_loglik if ll is None else ll
        steady_ll = self.steady_loglik if steady_ll is None else steady_ll
        return _class_terms(ll, steady_ll, self.theta, p.mu, p.sigma, self.steady_share)

    def page_marginal(
        self, ll: np.ndarray | None = None, steady_ll: np.ndarray | None = None
    ) -> np.ndarray:
        """Each page's marginal log-likelihood (over its rate, and its class in a mixture)
        of grid likelihoods ``ll`` / ``steady_ll`` (default: the fitted data's)."""
        bursty, steady = self._class_terms(ll, steady_ll)
        return bursty if steady is None else np.logaddexp(bursty, steady)

    def steady_probability(self) -> np.ndarray:
        """``(n_pages,)`` posterior probability that each page is steady (0 without a mixture)."""
        bursty, steady = self._class_terms(None, None)
        if steady is None:
            return np.zeros(len(bursty))
        return np.exp(steady - np.logaddexp(bursty, steady))

    def page_posterior(self, steady: bool = False) -> np.ndarray:
        """``(n_pages, grid)`` posterior weights of each page's quiet log-rate (given that
        it is steady, with ``steady=True``, or bursty)."""
        ll = self.steady_loglik if steady else self.page_loglik
        logp = ll + _log_weights(self.theta, self.params.mu, self.params.sigma)
        return np.exp(logp - logsumexp(logp, axis=1, keepdims=True))


def _population(
    ll: np.ndarray,
    theta: np.ndarray,
    start: tuple[float, float, float],
    steady: np.ndarray | None = None,
) -> tuple[float, float, float, float]:
    """``(μ, σ, steady share, total)`` maximising the marginal likelihood of fixed per-page
    grid likelihoods (``steady``: the Poisson class's, for a mixture; share 0 without).

    Each page's likelihood is scaled by its maximum once, so a trial ``(μ, σ)`` costs one
    matrix–vector product per class (:func:`marginal_loglik`'s value without its logsumexp).
    """
    classes = [ll] if steady is None else [ll, steady]
    # a page impossible under a class (every grid point -inf) gets -inf from it, no NaN
    tops = [np.where(np.isfinite(t), t, 0.0) for t in (c.max(axis=1) for c in classes)]
    scaled = [np.exp(c - t[:, None]) for c, t in zip(classes, tops, strict=True)]

    def per_page(x):
        weights = np.exp(_log_weights(theta, x[0], np.exp(x[1])))
        with np.errstate(divide="ignore"):
            terms = [np.log(m @ weights) + t for m, t in zip(scaled, tops, strict=True)]
        if steady is None:
            return terms[0]
        # the steady share's logit: log(1 − share) and log(share) without overflow where
        # the search strays far (a logit of −718 overflowed exp on 60 tldr-pages pages)
        return np.logaddexp(log_expit(-x[2]) + terms[0], log_expit(x[2]) + terms[1])

    def objective(x):
        return -float(per_page(x).sum())

    x0 = [start[0], np.log(start[1])]
    if steady is not None:
        share0 = min(max(start[2], 0.01), 0.99)
        x0.append(np.log(share0 / (1.0 - share0)))
    res = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 600},
    )
    share = 0.0 if steady is None else float(expit(res.x[2]))
    return float(res.x[0]), float(np.exp(res.x[1])), share, -float(res.fun)


def fit(
    runs: VisitRuns,
    *,
    poisson: bool = False,
    mixture: bool = False,
    start: BurstParameters | None = None,
    theta: np.ndarray | None = None,
    max_evaluations: int = 400,
    stride: int = SCAN_STRIDE,
) -> BurstFit:
    """Maximum marginal likelihood fit of the MMPP (or of the Poisson baseline).

    The shared parameters are searched by Nelder–Mead over ``(log(r − 1), log q_in,
    log q_out)``; for each, the population ``(μ, σ)`` is maximised with the pages'
    grid likelihoods held fixed.

    Parameters
    ----------
    runs
        The pages' visit sequences.
    poisson
        Fit the baseline (``r = 1``: no bursts) instead.
    mixture
        A share of the pages steady (Poisson at their quiet rate), the others bursty,
        the share fitted with the population (:attr:`BurstFit.steady_share`).
    start
        Starting values (default: bursts of 4× the quiet rate lasting a week, a quiet
        spell of 60 days).
    theta
        The log-rate grid (per hour); default :data:`GRID_POINTS` points from
        :data:`THETA_LOW` to :data:`THETA_HIGH`.
    max_evaluations
        Cap on the Nelder–Mead evaluations of the shared parameters.
    stride
        The grid scan of :func:`grid_loglik` (1: every point).
    """
    theta = (
        np.linspace(THETA_LOW, THETA_HIGH, GRID_POINTS)
        if theta is None
        else np.asarray(theta, dtype=np.float64)
    )
    start = start or BurstParameters(4.0, 1 / (60 * 24.0), 1 / (7 * 24.0), np.log(1e-3), 2.0)
    population = [start.mu, start.sigma, 0.5]
    steady = grid_loglik(runs, theta, 1.0, 0.0, 0.0, stride=stride) if poisson or mixture else None
    if poisson:
        mu, sigma, _, total = _population(steady, theta, tuple(population))
        params = BurstParameters(1.0, 0.0, 0.0, mu, sigma)
        return BurstFit(params, total, theta, steady, 1, True)

    evaluations = 0
    best: dict = {}

    def objective(x):
        nonlocal evaluations
        if not (np.all(x >= SEARCH_LOW) and np.all(x <= SEARCH_HIGH)):
            return np.inf
        evaluations += 1
        ratio, q_in, q_out = 1.0 + np.exp(x[0]), np.exp(x[1]), np.exp(x[2])
        ll = grid_loglik(runs, theta, ratio, q_in, q_out, stride=stride)
        mu, sigma, share, total = _population(ll, theta, tuple(population), steady)
        if not np.isfinite(total):
            return np.inf
        if total > best.get("total", -np.inf):
            population[:] = [mu, sigma, share]
            best.update(
                total=total,
                ll=ll,
                share=share,
                params=BurstParameters(ratio, q_in, q_out, mu, sigma),
            )
        return -total

    x0 = [np.log(start.ratio - 1.0), np.log(start.q_in), np.log(start.q_out)]
    res = minimize(
        objective,
        x0,
        method="Nelder-Mead",
        options={"xatol": 1e-3, "fatol": 1e-3, "maxfev": max_evaluations},
    )
    return BurstFit(
        best["params"],
        best["total"],
        theta,
        best["ll"],
        evaluations,
        bool(res.success),
        best["share"],
        steady,
    )


#: the shared parameters on the scale of the information matrix (:func:`information`)
INFORMATION_PARAMETERS = (
    "log_ratio_excess",
    "log_q_in",
    "log_q_out",
    "mu",
    "log_sigma",
    "logit_steady_share",
)


#: a mixture's steady share this close to 0 or 1 is held there by :func:`information`
BOUNDARY_SHARE = 1e-6


@dataclass(frozen=True)
class BurstIntervals:
    """Large-sample (Laplace) intervals of a fit's shared parameters (:func:`information`).

    Attributes
    ----------
    names
        The free parameters, a subset of :data:`INFORMATION_PARAMETERS` (``log(r − 1)``,
        ``log q_in``, ``log q_out``, ``μ``, ``log σ``, ``logit`` of the steady share):
        the Poisson baseline has only ``μ`` and ``log σ``, a mixture adds the share.
    estimate
        The fit's values on that scale.
    covariance
        The inverse of the observed information (minus the Hessian of the marginal
        log-likelihood by central differences); NaN where the information is not
        positive definite (a parameter the data do not identify, e.g. ``r`` near 1).
    at_boundary
        Parameters held at the edge of their range instead (a mixture's steady share
        within :data:`BOUNDARY_SHARE` of 0 or 1: no information there, so the others'
        intervals are those of the fit with the share fixed).
    """

    names: tuple[str, ...]
    estimate: np.ndarray
    covariance: np.ndarray
    at_boundary: tuple[str, ...] = ()

    @property
    def identified(self) -> bool:
        """False when the observed information is not positive definite."""
        return bool(np.all(np.isfinite(self.covariance)))

    @property
    def standard_errors(self) -> dict[str, float]:
        """On the transformed scale of :attr:`names`."""
        return dict(zip(self.names, np.sqrt(np.diag(self.covariance)).tolist(), strict=True))

    def interval(self, level: float = 0.9) -> dict[str, tuple[float, float]]:
        """Central ``level`` intervals on the natural scale: ``ratio``, ``q_in``, ``q_out``
        (per hour), ``quiet_days``, ``burst_days``, ``mu``, ``sigma``, ``steady_share``
        (those the fit has), each the image of the Normal interval of its transformed
        parameter."""
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + level / 2.0))
        se = np.sqrt(np.diag(self.covariance))
        bounds = {
            name: (x - z * s, x + z * s)
            for name, x, s in zip(self.names, self.estimate, se, strict=True)
        }
        out: dict[str, tuple[float, float]] = {}

        def put(key, source, f, decreasing=False):
            if source in bounds:
                lo, hi = (f(b) for b in bounds[source])
                out[key] = (hi, lo) if decreasing else (lo, hi)

        put("ratio", "log_ratio_excess", lambda x: 1.0 + np.exp(x))
        put("q_in", "log_q_in", np.exp)
        put("q_out", "log_q_out", np.exp)
        put("quiet_days", "log_q_in", lambda x: 1.0 / (24.0 * np.exp(x)), decreasing=True)
        put("burst_days", "log_q_out", lambda x: 1.0 / (24.0 * np.exp(x)), decreasing=True)
        put("mu", "mu", float)
        put("sigma", "log_sigma", np.exp)
        put("steady_share", "logit_steady_share", expit)
        return {k: (float(lo), float(hi)) for k, (lo, hi) in out.items()}


def information(fitted: BurstFit, runs: VisitRuns, *, step: float = 0.01) -> BurstIntervals:
    """The observed information of a :func:`fit` at its estimates, as intervals.

    Minus the Hessian of the marginal log-likelihood (the one :func:`fit` maximises, the
    population integrated over each page's grid) by central differences of ``step`` on the
    transformed parameters; every page likelihood at every point is a full grid pass
    (no scan). Costs ``1 + 2k + 2k(k − 1)`` passes for ``k`` chain parameters (19 for
    the MMPP, 1 for the Poisson baseline).

    Parameters
    ----------
    fitted
        A :func:`fit` of ``runs``.
    runs
        The data it was fitted to.
    step
        The difference step on the transformed scale.
    """
    p = fitted.params
    chain_names, population_names, share_name = (
        INFORMATION_PARAMETERS[:3],
        INFORMATION_PARAMETERS[3:5],
        INFORMATION_PARAMETERS[5],
    )
    chain = [] if fitted.poisson else list(chain_names)
    names = [*chain, *population_names]
    values = [] if fitted.poisson else [np.log(p.ratio - 1.0), np.log(p.q_in), np.log(p.q_out)]
    values += [p.mu, np.log(p.sigma)]
    share = fitted.steady_share
    mixture = share > 0.0
    free_share = BOUNDARY_SHARE < share < 1.0 - BOUNDARY_SHARE
    if free_share:
        names.append(share_name)
        values.append(np.log(share / (1.0 - share)))
    x0 = np.array(values, dtype=np.float64)
    theta = fitted.theta
    steady_ll = grid_loglik(runs, theta, 1.0, 0.0, 0.0) if mixture or fitted.poisson else None
    cache: dict[tuple[float, ...], np.ndarray] = {}

    def chain_loglik(x):
        if fitted.poisson:
            return steady_ll
        key = tuple(np.round(x[:3], 12))
        if key not in cache:
            cache[key] = grid_loglik(runs, theta, 1.0 + np.exp(x[0]), np.exp(x[1]), np.exp(x[2]))
        return cache[key]

    def total(x):
        k = len(chain)
        mix = expit(x[k + 2]) if free_share else share
        terms = _class_terms(chain_loglik(x), steady_ll, theta, x[k], np.exp(x[k + 1]), mix)
        bursty, steady = terms
        per_page = bursty if steady is None else np.logaddexp(bursty, steady)
        return float(per_page.sum())

    n = len(x0)
    eye = np.eye(n) * step
    f0 = total(x0)
    hessian = np.empty((n, n))
    for i in range(n):
        hessian[i, i] = (total(x0 + eye[i]) - 2.0 * f0 + total(x0 - eye[i])) / step**2
        for j in range(i):
            corners = [total(x0 + si * eye[i] + sj * eye[j]) for si in (1, -1) for sj in (1, -1)]
            value = (corners[0] - corners[1] - corners[2] + corners[3]) / (4.0 * step**2)
            hessian[i, j] = hessian[j, i] = value
    info = -hessian
    if np.all(np.linalg.eigvalsh(info) > 0):
        covariance = np.linalg.inv(info)
    else:
        covariance = np.full((n, n), np.nan)
    boundary = (share_name,) if mixture and not free_share else ()
    return BurstIntervals(tuple(names), x0, covariance, boundary)


def heldout_log_score(fitted: BurstFit, train: VisitRuns, full: VisitRuns) -> np.ndarray:
    """``log p(later intervals | earlier ones)`` per page, at the fitted parameters.

    ``full`` holds each page's whole sequence and ``train`` its first part (the data
    ``fitted`` was fitted to); the difference of their marginal log-likelihoods is the
    predictive log score of the rest, with the page's rate and hidden state carried over.
    """
    if full.n_pages != train.n_pages:
        raise ObservationError("train and full runs must hold the same pages")
    p = fitted.params
    ll_full = grid_loglik(full, fitted.theta, p.ratio, p.q_in, p.q_out)
    steady_full = grid_loglik(full, fitted.theta, 1.0, 0.0, 0.0) if fitted.steady_share else None
    return fitted.page_marginal(ll_full, steady_full) - fitted.page_marginal()


def simulate_changes(
    runs: VisitRuns, lam: np.ndarray, params: BurstParameters, rng: np.random.Generator
) -> np.ndarray:
    """One detection flag per interval of ``runs`` (runs expanded, in order).

    Page ``p`` changes at quiet rate ``lam[p]``; its state path follows ``params``' chain,
    started from the stationary distribution (the ``mu``/``sigma`` of ``params`` are not
    used).
    """
    simulate = _kernels()[2]
    lam = np.asarray(lam, dtype=np.float64)
    if lam.shape != (runs.n_pages,):
        raise ObservationError(f"need one quiet rate per page ({runs.n_pages}), got {lam.shape}")
    n = int(runs.count.sum())
    return simulate(
        runs.offsets,
        runs.tau,
        runs.count,
        lam,
        float(params.ratio),
        float(params.q_in),
        float(params.q_out),
        rng.random(runs.n_pages),
        rng.random(n),
    )


def replicate_changes(fitted: BurstFit, runs: VisitRuns, rng: np.random.Generator) -> np.ndarray:
    """:func:`simulate_changes` with each page's quiet rate drawn from its posterior.

    The conditional replication of :mod:`bayesrate.checks.ppc`: ``runs`` must be the
    sequences ``fitted`` was fitted to (one posterior per page).
    """
    if fitted.page_loglik.shape[0] != runs.n_pages:
        raise ObservationError("runs must hold the pages the fit was fitted to")

    def quiet_rates(steady: bool) -> np.ndarray:
        cdf = np.cumsum(fitted.page_posterior(steady), axis=1)
        pick = (cdf < rng.random((runs.n_pages, 1)) * cdf[:, -1:]).sum(axis=1)
        return np.exp(fitted.theta[np.minimum(pick, len(fitted.theta) - 1)])

    flags = simulate_changes(runs, quiet_rates(False), fitted.params, rng)
    if not fitted.steady_share:
        return flags
    steady = rng.random(runs.n_pages) < fitted.steady_probability()
    other = simulate_changes(runs, quiet_rates(True), fitted.steady, rng)
    interval_page = np.repeat(np.repeat(np.arange(runs.n_pages), np.diff(runs.offsets)), runs.count)
    return np.where(steady[interval_page], other, flags)


@dataclass(frozen=True)
class WindowPredictive:
    """Each page's predictive for its next intervals (:func:`window_predictive`).

    Attributes
    ----------
    pmf
        Per page, ``P(K = c)`` of its detections for ``c`` up to a cap at least the one
        asked for, and beyond which less than :data:`TAIL_MASS` is left.
    prob_change
        ``(n_pages,)``: probability of at least one change in the page's window.
    mean_rate
        ``(n_pages,)``: posterior mean of the long-run rate ``λ(π₀ + rπ₁)`` per hour.
    """

    pmf: list[np.ndarray]
    prob_change: np.ndarray
    mean_rate: np.ndarray

    def at(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``P(K = k)`` and ``P(K < k)`` per page (``k``: ``(n_pages,)`` or ``(…, n_pages)``)."""
        k = np.asarray(k)
        prob = np.zeros(k.shape)
        below = np.zeros(k.shape)
        for p, pmf in enumerate(self.pmf):
            kk = k[..., p]
            inside = kk < len(pmf)
            cdf = np.concatenate([[0.0], np.cumsum(pmf)])
            prob[..., p] = np.where(inside, pmf[np.minimum(kk, len(pmf) - 1)], 0.0)
            below[..., p] = cdf[np.minimum(kk, len(pmf))]
        return prob, below

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, n_pages)`` counts drawn page by page from the predictive."""
        out = np.empty((n, len(self.pmf)), dtype=np.int64)
        for p, pmf in enumerate(self.pmf):
            out[:, p] = rng.choice(len(pmf), size=n, p=pmf / pmf.sum())
        return out


def window_predictive(
    fitted: BurstFit,
    train: VisitRuns,
    offsets: np.ndarray,
    tau: np.ndarray,
    lead_hours: np.ndarray,
    window_hours: np.ndarray,
    cap: np.ndarray,
) -> WindowPredictive:
    """The predictive of each page's next visits, given the sequence ``fitted`` saw.

    Page ``p``'s quiet rate is integrated over its posterior (:meth:`BurstFit.page_posterior`);
    at each rate its hidden state starts from the filtered distribution after its last
    training visit. A mixture fit mixes the bursty and the steady predictive with the
    page's posterior class probabilities.

    Parameters
    ----------
    fitted, train
        A fit and the sequences it was fitted to.
    offsets, tau
        The next intervals of page ``p``: ``tau[offsets[p]:offsets[p + 1]]`` (hours).
    lead_hours, window_hours
        Per page, from its last training visit to the start of the window whose change
        probability is wanted (``prob_change``), and that window's length.
    cap
        Per page, the largest count whose probability is wanted.
    """
    steady = fitted.steady_probability()
    classes = [(1.0 - steady, fitted.params, False)]
    if fitted.steady_share:
        classes.append((steady, fitted.steady, True))
    args = (fitted.theta, train, offsets, tau, lead_hours, window_hours, cap)
    parts = [
        (weight, _chain_predictive(chain, fitted.page_posterior(is_steady), *args))
        for weight, chain, is_steady in classes
    ]
    pmfs = []
    for page in range(train.n_pages):
        size = max(len(part.pmf[page]) for _, part in parts)
        pmfs.append(
            sum(
                w[page] * np.pad(part.pmf[page], (0, size - len(part.pmf[page])))
                for w, part in parts
            )
        )
    return WindowPredictive(
        pmfs,
        sum(w * part.prob_change for w, part in parts),
        sum(w * part.mean_rate for w, part in parts),
    )


def _chain_predictive(
    p: BurstParameters,
    post: np.ndarray,
    theta: np.ndarray,
    train: VisitRuns,
    offsets: np.ndarray,
    tau: np.ndarray,
    lead_hours: np.ndarray,
    window_hours: np.ndarray,
    cap: np.ndarray,
) -> WindowPredictive:
    """:func:`window_predictive` of one chain, the pages' rate posteriors ``post``."""
    count_pmf = _kernels()[3]
    _, burst = filtered(train, theta, p.ratio, p.q_in, p.q_out)
    lam = np.exp(theta)
    share = p.burst_share
    pmfs, prob_change = [], np.empty(train.n_pages)
    for page in range(train.n_pages):
        keep = np.flatnonzero(post[page] > WEIGHT_FLOOR)
        w = post[page, keep] / post[page, keep].sum()
        intervals = np.ascontiguousarray(tau[offsets[page] : offsets[page + 1]], dtype=np.float64)
        size = max(int(cap[page]), 8)
        while True:
            size = min(size, len(intervals))
            pmf = np.zeros(size + 1)
            for weight, k in zip(w, keep, strict=True):
                pmf += weight * count_pmf(
                    burst[page, k], lam[k], p.ratio, p.q_in, p.q_out, intervals, size
                )
            if size == len(intervals) or 1.0 - pmf.sum() < TAIL_MASS:
                break
            size *= 2
        pmfs.append(pmf)
        # the state drifts (changes or not) up to the window, which must then stay quiet
        drift, _ = transfer_matrices(0.0, 1.0, p.q_in, p.q_out, float(lead_hours[page]))
        quiet = 0.0
        for weight, k in zip(w, keep, strict=True):
            start = np.array([1.0 - burst[page, k], burst[page, k]])
            no_change, _ = transfer_matrices(
                lam[k], p.ratio, p.q_in, p.q_out, float(window_hours[page])
            )
            quiet += weight * float(start @ drift @ no_change.sum(axis=1))
        prob_change[page] = 1.0 - quiet
    mean_rate = (post * lam[None, :]).sum(axis=1) * (1.0 + share * (p.ratio - 1.0))
    return WindowPredictive(pmfs, prob_change, mean_rate)
