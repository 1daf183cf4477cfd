"""The models' observed distributions: interval groups as Binomials, in PyTensor.

A page's intervals are grouped by *pattern* (:mod:`bayesrate.models.groups`): intervals
of one pattern have the same exposure ``E`` (hours; for the modulated model the integral
of its hour-of-week multiplier over the interval), so ``n`` of them with ``c`` detections
are ``Binomial(n, p)`` with ``p = 1 − e^{−Λ}``, ``Λ = λ_page·E``. Its log-probability,
written stably from ``log Λ``::

    c · log(1 − e^{−Λ}) − (n − c) · Λ + log C(n, c)

(``bayesrate.likelihood`` is the numpy home of the same formula). Two observed variables:

``detections`` (dim ``interval_group``)
    One Binomial per group with at least one detection. The modulated model's and the
    predictive models' go through the fused numba Op of :mod:`bayesrate.models.fused`.
``quiet`` (dim ``page``)
    The groups without a detection, one term per page: their probability of no detection is
    ``e^{−λ·U}`` with ``U = Σ n·E`` the page's quiet exposure (exact, and one number per
    page however irregular the visits). With hour-of-week multipliers ``U`` is computed as
    the page's whole span (first to last visit) minus its groups with a detection
    (:class:`QuietSpan`): O(pages + groups) per gradient instead of a pages × 168
    product. Its value is the number of detections among those intervals, always 0 in the
    data; draws of it are the sum of the groups' Binomials.

Both are ``pm.CustomDist`` with a ``dist`` of PyMC Binomials, so that
``pm.sample_posterior_predictive`` draws them and ``pm.compute_log_likelihood`` evaluates
them per group (per page for ``quiet``). Their logp returns one term per element
(signature ``(p),(q)->(g)``: the groups' exposures are parameters of another length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bayesrate.clock import CumulativeTerms, cumulative_terms, evaluate_cumulative
from bayesrate.likelihood import SERIES_BELOW

if TYPE_CHECKING:
    from bayesrate.models.groups import IntervalGroups
    from bayesrate.observations import Observations

#: names of the observed variables
DETECTIONS = "detections"
QUIET = "quiet"


def log1mexp_of_log(log_lam):
    """``log(1 − exp(−Λ))`` from ``log Λ``, stable for any ``log Λ`` (PyTensor).

    PyTensor's ``log1mexp`` branches per element (Mächler 2012) and evaluates only the
    branch it needs; below ``log Λ = −20`` the series ``a − e^a/2 + e^{2a}/24`` (the
    numpy twin is :func:`bayesrate.likelihood.log1mexp_of_log`). Both branches are finite
    everywhere, so gradients through the switch are finite too.
    """
    import pytensor.tensor as pt

    lam = pt.exp(pt.maximum(log_lam, SERIES_BELOW))
    exact = pt.log1mexp(-lam)
    small = pt.minimum(log_lam, SERIES_BELOW)
    lam_small = pt.exp(small)
    series = small - lam_small / 2 + lam_small**2 / 24
    return pt.switch(log_lam > SERIES_BELOW, exact, series)


def binomial_detection_logp(value, log_lam, trials):
    """``c·log(1 − e^{−Λ}) − (n − c)·Λ + log C(n, c)`` elementwise (PyTensor)."""
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import binomln

    return (
        value * log1mexp_of_log(log_lam)
        - (trials - value) * pt.exp(log_lam)
        + binomln(trials, value)
    )


def log_exposure(groups: IntervalGroups, log_multiplier=None):
    """``log E`` of every pattern: ``log(basis · m)`` with ``m = exp(log_multiplier)``.

    Constant-rate models pass no multiplier (their basis is one column: the length).
    """
    import pytensor.tensor as pt

    if log_multiplier is None:
        return pt.as_tensor_variable(np.log(groups.basis[:, 0]))
    return pt.log(pt.dot(groups.basis, pt.exp(log_multiplier)))


def _detection_probability(log_lam):
    import pytensor.tensor as pt

    return -pt.expm1(-pt.exp(log_lam))


def group_log_rate(groups: IntervalGroups, log_rate, log_pattern, log_added=None):
    """``log Λ`` of every group: its page's log-rate plus its pattern's log exposure, and
    with ``log_added`` (``(n_patterns,)``: an integrated rate every page of the pattern
    gets on top of its own, the mass-edit model's) ``log(e^{that} + e^{log_added})``.

    The indices enter as graph constants (indexing with numpy arrays walks every element
    in Python: 2.7 s for 49,000 groups).
    """
    import pytensor.tensor as pt

    pattern = pt.as_tensor_variable(groups.pattern)
    own = log_rate[pt.as_tensor_variable(groups.page)] + log_pattern[pattern]
    return own if log_added is None else pt.logaddexp(own, log_added[pattern])


def detections(groups: IntervalGroups, log_rate, log_pattern, log_added=None):
    """The observed ``detections``: one Binomial per group (in the current model context).

    Parameters
    ----------
    groups
        The groups (every one becomes an element of ``interval_group``).
    log_rate
        ``(n_pages,)`` log page rates per hour.
    log_pattern
        ``(n_patterns,)`` log exposure of each pattern.
    log_added
        ``(n_patterns,)`` log of an integrated rate added to every group of the pattern
        (:func:`group_log_rate`), or ``None``.

    The log-probability of the observed counts goes through the fused numba Op (without
    ``log_added``); of any other value (PyMC never asks) through the PyTensor formula.
    """
    import pymc as pm

    from bayesrate.constants import DIM_GROUP
    from bayesrate.models.fused import binomial_logp

    page, pattern = groups.page, groups.pattern
    trials, detected = groups.trials, groups.detected
    model = pm.modelcontext(None)
    if DIM_GROUP not in model.coords:
        model.add_coord(DIM_GROUP, np.arange(groups.n_groups))
    params = [log_rate, log_pattern] + ([] if log_added is None else [log_added])

    def dist(*args):
        log_lam = group_log_rate(groups, *args[:-1])
        return pm.Binomial.dist(n=trials, p=_detection_probability(log_lam))

    def logp(value, *args):
        if log_added is None and _is_constant(value, detected):
            return binomial_logp(*args, page, pattern, trials, detected)
        return binomial_detection_logp(value, group_log_rate(groups, *args), trials)

    return pm.CustomDist(
        DETECTIONS,
        *params,
        dist=dist,
        logp=logp,
        signature="(p),(q)->(g)" if log_added is None else "(p),(q),(q)->(g)",
        observed=detected,
        dims=DIM_GROUP,
    )


@dataclass(frozen=True)
class QuietSpan:
    """Each page's quiet exposure under hour-of-week multipliers, without a pages × 168
    product: the integrated multiplier over the page's span (first to last visit; a
    difference of :func:`bayesrate.clock.evaluate_cumulative`, exact across daylight
    saving) minus its groups with a detection (``busy``: trials × pattern exposure)."""

    #: terms of every page's first visit, then every page's last (one set, so that the
    #: daylight-saving jumps between any two of them are counted)
    ends: CumulativeTerms
    busy: IntervalGroups

    @classmethod
    def of(cls, data: Observations, timezone: str, busy: IntervalGroups) -> QuietSpan:
        """The span terms of ``data``'s pages on ``timezone``'s clock."""
        first = data.time[data.offsets[:-1]]
        last = data.time[data.offsets[1:] - 1]
        return cls(cumulative_terms(np.concatenate([first, last]), timezone), busy)

    def exposure(self, multiplier):
        """``(n_pages,)`` quiet exposure for ``multiplier`` (168, PyTensor)."""
        import pytensor.tensor as pt

        busy = self.busy
        at_ends = evaluate_cumulative(self.ends, multiplier, pt)
        span = at_ends[busy.n_pages :] - at_ends[: busy.n_pages]
        pattern_exposure = pt.dot(busy.basis, multiplier)
        busy_exposure = busy.trials * pattern_exposure[busy.pattern]
        return pt.inc_subtensor(pt.zeros(busy.n_pages)[busy.page], -busy_exposure) + span


def quiet(
    groups: IntervalGroups,
    log_rate,
    log_multiplier=None,
    span: QuietSpan | None = None,
    *,
    effects=None,
    added=None,
):
    """The observed ``quiet``: per page, the groups without a detection (current model).

    Parameters
    ----------
    groups
        The page's groups with ``detected == 0`` (their patterns index ``groups.basis``).
    log_rate
        ``(n_pages,)`` log page rates per hour.
    log_multiplier
        The modulated model's log hour-of-week multipliers (168), or ``None``.
    span
        With ``log_multiplier``: the quiet exposure as span minus busy groups (the same
        value, in O(pages + groups)); ``None``: ``groups``' own exposure.
    effects
        Instead of ``log_multiplier``: ``(param, log_pattern_of, page_exposure_of)``, a
        parameter tensor of two dims (the shocks model's ``shock``), the log exposure of
        every pattern ``groups.pattern`` indexes as a function of it (for drawing), and each
        page's quiet exposure as a function of it (for the log-probability).
    added
        With ``effects``: ``(param, log_added_of, page_added_of)``, a rate every page gets on
        top of its own (the mass-edit model's, a parameter of two dims): the log of its
        integrated rate over every pattern, and over each page's quiet intervals.
    """
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import check_parameters

    from bayesrate.constants import DIM_PAGE
    from bayesrate.models.groups import sum_by_page

    page, pattern, trials = groups.page, groups.pattern, groups.trials
    n_pages = groups.n_pages
    # Σ n·basis per page: the page's quiet exposure is this times m
    by_span = span is not None and log_multiplier is not None
    exposure_basis = (
        None
        if by_span or effects is not None
        else sum_by_page((trials[:, None] * groups.basis[pattern]).T, page, n_pages).T
    )
    by_pattern = effects is not None
    if by_pattern and log_multiplier is not None:
        raise ValueError("give log_multiplier or effects, not both")
    if added is not None and not by_pattern:
        raise ValueError("added needs effects")
    if by_pattern and added is not None:
        params, signature = [log_rate, effects[0], added[0]], "(p),(d,e),(d,e)->(p)"
    elif by_pattern:
        params, signature = [log_rate, effects[0]], "(p),(d,e)->(p)"
    elif log_multiplier is None:
        params, signature = [log_rate], "(p)->(p)"
    else:
        params, signature = [log_rate, log_multiplier], "(p),(h)->(p)"

    def multiplier(extra):
        return pt.ones(1) if not extra else pt.exp(extra[0])

    def pattern_log_exposure(extra):
        if by_pattern:
            return effects[1](extra[0])
        return pt.log(pt.dot(groups.basis, multiplier(extra)))

    def dist(log_rate, *rest):
        *extra, _size = rest
        log_added = None if added is None else added[1](extra[1])
        log_lam = group_log_rate(groups, log_rate, pattern_log_exposure(extra), log_added)
        draws = pm.Binomial.dist(n=trials, p=_detection_probability(log_lam))
        return pt.zeros((n_pages,), dtype="int64")[pt.as_tensor_variable(page)].inc(draws)

    def logp(value, log_rate, *extra):
        if by_pattern:
            exposure = effects[2](extra[0])
        elif by_span:
            exposure = span.exposure(multiplier(extra))
        else:
            exposure = pt.dot(exposure_basis, multiplier(extra))
        log_quiet = -pt.exp(log_rate) * exposure
        if added is not None:
            log_quiet = log_quiet - added[2](extra[1])
        return check_parameters(
            log_quiet,
            pt.all(pt.eq(value, 0)),
            msg="quiet intervals: the log-probability is that of no detection (value 0)",
        )

    return pm.CustomDist(
        QUIET,
        *params,
        dist=dist,
        logp=logp,
        signature=signature,
        observed=np.zeros(n_pages, dtype=np.int64),
        dims=DIM_PAGE,
    )


def _is_constant(value, expected: np.ndarray) -> bool:
    """Whether ``value`` is a graph constant equal to ``expected`` (the observed data)."""
    data = getattr(value, "data", None)
    if data is None:
        return False
    data = np.asarray(data)
    return data.shape == expected.shape and bool(np.array_equal(data, expected))


# --------------------------------------------------------------------------- Gamma-mixed intervals
def mixed_log_quiet(log_lam, log_shape):
    """``−κ·log(1 + Λ/κ)`` from ``log Λ`` and ``log κ`` (PyTensor twin of
    :func:`bayesrate.likelihood.mixed_log_quiet`)."""
    import pytensor.tensor as pt

    return -pt.exp(log_shape) * pt.softplus(log_lam - log_shape)


def mixed_log_detection(log_lam, log_shape):
    """``log(1 − (1 + Λ/κ)^{−κ})`` (PyTensor twin of
    :func:`bayesrate.likelihood.mixed_log_detection`); both branches of the series switch
    are finite, so are the gradients."""
    import pytensor.tensor as pt

    from bayesrate.likelihood import LOG_SOFTPLUS_SERIES_BELOW as below

    z = log_lam - log_shape
    exact = pt.log(pt.softplus(pt.maximum(z, below)))
    low = pt.minimum(z, below)
    log_softplus = pt.switch(z > below, exact, low - pt.exp(low) / 2)
    return log1mexp_of_log(log_shape + log_softplus)


def mixed_detections(groups: IntervalGroups, log_rate, log_shape):
    """The observed ``detections`` of Gamma-mixed intervals: ``Binomial(n, p)`` per group,
    ``p = 1 − (1 + λE/κ)^{−κ}`` with the page's ``κ`` (``log_shape``, per page)."""
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import binomln

    from bayesrate.constants import DIM_GROUP

    trials, detected = groups.trials, groups.detected
    page = pt.as_tensor_variable(groups.page)
    log_pattern = log_exposure(groups)
    model = pm.modelcontext(None)
    if DIM_GROUP not in model.coords:
        model.add_coord(DIM_GROUP, np.arange(groups.n_groups))

    def terms(log_rate, log_shape):
        log_lam = group_log_rate(groups, log_rate, log_pattern)
        return mixed_log_detection(log_lam, log_shape[page]), mixed_log_quiet(
            log_lam, log_shape[page]
        )

    def dist(log_rate, log_shape, size):
        return pm.Binomial.dist(n=trials, p=pt.exp(terms(log_rate, log_shape)[0]))

    def logp(value, log_rate, log_shape):
        log_p, log_q = terms(log_rate, log_shape)
        return value * log_p + (trials - value) * log_q + binomln(trials, value)

    return pm.CustomDist(
        DETECTIONS,
        log_rate,
        log_shape,
        dist=dist,
        logp=logp,
        signature="(p),(p)->(g)",
        observed=detected,
        dims=DIM_GROUP,
    )


def mixed_quiet(groups: IntervalGroups, log_rate, log_shape):
    """The observed ``quiet`` of Gamma-mixed intervals: per page ``Σ n·log(1 − p)`` over
    its groups without a detection (not linear in ``λ``: one term per group, summed)."""
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.distributions.dist_math import check_parameters

    from bayesrate.constants import DIM_PAGE

    page = pt.as_tensor_variable(groups.page)
    trials, n_pages = groups.trials, groups.n_pages
    log_pattern = log_exposure(groups)

    def dist(log_rate, log_shape, size):
        log_lam = group_log_rate(groups, log_rate, log_pattern)
        p = pt.exp(mixed_log_detection(log_lam, log_shape[page]))
        draws = pm.Binomial.dist(n=trials, p=p)
        return pt.zeros((n_pages,), dtype="int64")[page].inc(draws)

    def logp(value, log_rate, log_shape):
        log_lam = group_log_rate(groups, log_rate, log_pattern)
        per_group = trials * mixed_log_quiet(log_lam, log_shape[page])
        return check_parameters(
            pt.zeros(n_pages)[page].inc(per_group),
            pt.all(pt.eq(value, 0)),
            msg="quiet intervals: the log-probability is that of no detection (value 0)",
        )

    return pm.CustomDist(
        QUIET,
        log_rate,
        log_shape,
        dist=dist,
        logp=logp,
        signature="(p),(p)->(p)",
        observed=np.zeros(n_pages, dtype=np.int64),
        dims=DIM_PAGE,
    )


__all__ = [
    "DETECTIONS",
    "QUIET",
    "QuietSpan",
    "binomial_detection_logp",
    "detections",
    "log1mexp_of_log",
    "log_exposure",
    "mixed_detections",
    "mixed_log_detection",
    "mixed_log_quiet",
    "mixed_quiet",
    "quiet",
]
