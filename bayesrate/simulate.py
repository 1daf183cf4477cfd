"""Simulated crawl observations with a known truth.

Change processes generate the (unobserved) times at which a page's content changes; crawl
processes generate the visit times; :func:`detect` turns both into the censored flags a
crawler records ("changed since my previous visit, or not"). :func:`simulate_pages` does
this for many pages at once and returns :class:`SimulatedData` (observations + truth);
:func:`pages_like` reproduces the shape of the published case study (1,000 pages visited
hourly for 30 days).

Conventions: times are hours since the Unix epoch (UTC), rates are changes per hour, a
change at time ``t`` is detected by the first visit at or after ``t`` (intervals are
``(t_{k-1}, t_k]``), and each page's first visit is its baseline (flag 0).

Two simulation paths, equal in law:

* **exact** - sample every change time with ``process.sample(start, end, rng)`` and
  :func:`detect` them. Used for :class:`Bursty` and :class:`Periodic` pages (whose
  intervals are dependent) and whenever ``exact=True``.
* **fast** - for Poisson processes with a deterministic intensity (:class:`Homogeneous`,
  :class:`HourOfWeekModulated`) the numbers of changes in disjoint intervals are
  independent Poisson variables with means ``Lambda_k`` (the integrated intensity), so
  each flag is an independent ``Bernoulli(1 - exp(-Lambda_k))``. No change time is ever
  materialised; 10 million intervals take a few seconds.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.clock import check_timezone, cumulative_multiplier, hour_of_week
from bayesrate.constants import DOMAIN, N_HOUR_OF_WEEK, PAGE
from bayesrate.errors import ObservationError
from bayesrate.observations import DEFAULT_DOMAIN, Observations
from bayesrate.seeds import rng_from

__all__ = [
    "CASE_STUDY_CHANGES",
    "CASE_STUDY_N_VISITS",
    "CASE_STUDY_START",
    "Bursty",
    "ChangeProcess",
    "Homogeneous",
    "HourOfWeekModulated",
    "Periodic",
    "SimulatedData",
    "detect",
    "pages_like",
    "poisson_crawl",
    "regular_grid",
    "rng_from",
    "simulate_pages",
]

#: 2024-01-01T00:00Z (a Monday), in hours since the Unix epoch: hour of week 0 in UTC.
CASE_STUDY_START = 473_352.0
#: Published ``summary(pages$numVisits)`` of the case study (revisits = intervals per page).
CASE_STUDY_N_VISITS = {
    "min": 5.0,
    "q1": 368.8,
    "median": 592.0,
    "mean": 521.7,
    "q3": 719.0,
    "max": 719.0,
}
#: Published ``summary(numChanges)`` (detected changes per page).
CASE_STUDY_CHANGES = {
    "min": 0.0,
    "q1": 19.0,
    "median": 99.0,
    "mean": 182.8,
    "q3": 296.5,
    "max": 719.0,
}


# =========================================================================================
# change processes


class ChangeProcess(ABC):
    """A point process of content changes (times in hours since the epoch)."""

    @abstractmethod
    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        """Sorted change times in ``(start, end]``."""

    @property
    @abstractmethod
    def mean_rate(self) -> float:
        """Long-run changes per hour."""

    @property
    def name(self) -> str:
        return type(self).__name__


class _PoissonProcess(ChangeProcess):
    """A Poisson process with a deterministic intensity: intervals are independent."""

    @abstractmethod
    def integrated_rate(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Expected number of changes in each interval ``(start, end]``."""


def _uniform_times(start: float, end: float, count: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(start + (end - start) * rng.random(count))


def _check_window(start: float, end: float) -> tuple[float, float]:
    start, end = float(start), float(end)
    if not (np.isfinite(start) and np.isfinite(end)) or end < start:
        raise ValueError(f"need finite start <= end, got ({start}, {end})")
    return start, end


@dataclass(frozen=True)
class Homogeneous(_PoissonProcess):
    """Poisson changes at a constant ``rate`` per hour.

    Parameters
    ----------
    rate
        Changes per hour, ``>= 0``.
    """

    rate: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate) and self.rate >= 0):
            raise ValueError(f"rate must be finite and >= 0, got {self.rate}")

    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        start, end = _check_window(start, end)
        return _uniform_times(start, end, int(rng.poisson(self.rate * (end - start))), rng)

    def integrated_rate(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return self.rate * (np.asarray(end, dtype=float) - np.asarray(start, dtype=float))

    @property
    def mean_rate(self) -> float:
        return float(self.rate)


@dataclass(frozen=True, eq=False)
class PiecewiseConstant(_PoissonProcess):
    """Poisson changes at ``rates[i]`` per hour on ``(edges[i], edges[i + 1]]``.

    Before the first edge the rate is ``rates[0]``, after the last ``rates[-1]`` (e.g. a
    page's rate times a shared shock per epoch).

    Parameters
    ----------
    edges
        ``k + 1`` increasing times (hours).
    rates
        ``k`` rates per hour, ``>= 0``.
    """

    edges: np.ndarray
    rates: np.ndarray

    def __post_init__(self) -> None:
        edges = np.asarray(self.edges, dtype=np.float64)
        rates = np.asarray(self.rates, dtype=np.float64)
        if edges.ndim != 1 or len(edges) != len(rates) + 1 or len(rates) < 1:
            raise ValueError("need k + 1 edges for k >= 1 rates")
        if not (np.diff(edges) > 0).all() or not np.isfinite(edges).all():
            raise ValueError("edges must be finite and increasing")
        if not (np.isfinite(rates) & (rates >= 0)).all():
            raise ValueError("rates must be finite and >= 0")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "rates", rates)

    def _cumulative(self, t: np.ndarray) -> np.ndarray:
        """Expected changes from the first edge to ``t`` (negative before it)."""
        t = np.asarray(t, dtype=np.float64)
        at_edges = np.concatenate([[0.0], np.cumsum(self.rates * np.diff(self.edges))])
        inside = np.interp(t, self.edges, at_edges)
        before = (t - self.edges[0]) * self.rates[0]
        after = at_edges[-1] + (t - self.edges[-1]) * self.rates[-1]
        return np.where(t < self.edges[0], before, np.where(t > self.edges[-1], after, inside))

    def integrated_rate(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return self._cumulative(end) - self._cumulative(start)

    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        start, end = _check_window(start, end)
        cuts = np.unique(np.clip(np.concatenate([[start], self.edges, [end]]), start, end))
        out = []
        for lo, hi in itertools.pairwise(cuts):
            mean = float(self.integrated_rate(np.array(lo), np.array(hi)))
            out.append(_uniform_times(lo, hi, int(rng.poisson(mean)), rng))
        return np.sort(np.concatenate(out)) if out else np.zeros(0)

    @property
    def mean_rate(self) -> float:
        return float(np.sum(self.rates * np.diff(self.edges)) / (self.edges[-1] - self.edges[0]))


@dataclass(frozen=True, eq=False)
class HourOfWeekModulated(_PoissonProcess):
    """Poisson changes at ``rate * multipliers[hour_of_week(t, timezone)]`` per hour.

    Sampled exactly by thinning a homogeneous process at ``rate * max(multipliers)``.
    The multipliers are used as given (not normalised); :attr:`mean_rate` is
    ``rate * mean(multipliers)``, the long-run rate (exact over whole local weeks).

    Parameters
    ----------
    rate
        Base changes per hour, ``>= 0``.
    multipliers
        168 non-negative factors; bucket 0 is Monday 00:00-01:00 local time.
    timezone
        IANA name of the clock the buckets are read on.
    """

    rate: float
    multipliers: np.ndarray
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        m = np.asarray(self.multipliers, dtype=np.float64)
        if m.shape != (N_HOUR_OF_WEEK,) or not np.isfinite(m).all() or (m < 0).any():
            raise ValueError("multipliers must be 168 finite non-negative numbers")
        if not (np.isfinite(self.rate) and self.rate >= 0):
            raise ValueError(f"rate must be finite and >= 0, got {self.rate}")
        check_timezone(self.timezone)
        m = m.copy()
        m.setflags(write=False)
        object.__setattr__(self, "multipliers", m)
        object.__setattr__(self, "_mean_multiplier", float(m.mean()))

    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        start, end = _check_window(start, end)
        top = float(self.multipliers.max())
        candidates = Homogeneous(self.rate * top).sample(start, end, rng)
        if top == 0 or len(candidates) == 0:
            return candidates[:0]
        keep = (
            rng.random(len(candidates)) * top
            < self.multipliers[hour_of_week(candidates, self.timezone)]
        )
        return candidates[keep]

    def integrated_rate(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        start = np.asarray(start, dtype=float)
        end = np.asarray(end, dtype=float)
        both = cumulative_multiplier(
            np.concatenate([start, end]), self.multipliers[None, :], None, self.timezone
        )
        return self.rate * (both[len(start) :] - both[: len(start)])

    @property
    def mean_rate(self) -> float:
        return float(self.rate * self._mean_multiplier)

    def __repr__(self) -> str:
        return (
            f"HourOfWeekModulated(rate={self.rate!r}, multipliers=<168: mean "
            f"{self.multipliers.mean():.3g}, max {self.multipliers.max():.3g}>, "
            f"timezone={self.timezone!r})"
        )


@dataclass(frozen=True)
class Bursty(ChangeProcess):
    """Two-state Markov-modulated Poisson process (alternating busy and quiet spells).

    The page alternates between state 0 (rate ``rates[0]``) and state 1 (rate
    ``rates[1]``); the time spent in state ``s`` is exponential with mean
    ``mean_durations[s]`` hours. Every :meth:`sample` starts from the stationary state
    distribution (state 0 with probability ``d0 / (d0 + d1)``), so windows are stationary.

    Parameters
    ----------
    rates
        ``(high, low)`` changes per hour in the two states.
    mean_durations
        ``(h_high, h_low)`` mean sojourn in hours of each state.
    """

    rates: tuple[float, float]
    mean_durations: tuple[float, float]

    def __post_init__(self) -> None:
        r = tuple(float(x) for x in self.rates)
        d = tuple(float(x) for x in self.mean_durations)
        if len(r) != 2 or len(d) != 2:
            raise ValueError("rates and mean_durations must each have two entries")
        if min(r) < 0 or not np.isfinite(r).all():
            raise ValueError(f"rates must be finite and >= 0, got {r}")
        if min(d) <= 0 or not np.isfinite(d).all():
            raise ValueError(f"mean_durations must be finite and > 0, got {d}")
        object.__setattr__(self, "rates", r)
        object.__setattr__(self, "mean_durations", d)

    @property
    def stationary(self) -> tuple[float, float]:
        """Long-run fraction of time in each state."""
        d0, d1 = self.mean_durations
        return d0 / (d0 + d1), d1 / (d0 + d1)

    @property
    def mean_rate(self) -> float:
        p0, p1 = self.stationary
        return p0 * self.rates[0] + p1 * self.rates[1]

    def sojourns(
        self, start: float, end: float, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """State spells covering ``(start, end]``: (spell start, spell end, state)."""
        start, end = _check_window(start, end)
        state0 = int(rng.random() >= self.stationary[0])
        mean_d = np.asarray(self.mean_durations)
        span = end - start
        # spells alternate, so a batch of 2k spells covers ~k * (d0 + d1) hours on average
        batch = max(2, 2 * int(np.ceil(1.2 * span / mean_d.sum())) + 2)
        durations: list[np.ndarray] = []
        total = 0.0
        count = 0
        while total < span or not durations:
            states = (state0 + count + np.arange(batch)) % 2
            d = rng.exponential(mean_d[states])
            durations.append(d)
            total += float(d.sum())
            count += batch
        dur = np.concatenate(durations)
        ends = start + np.cumsum(dur)
        n = int(np.searchsorted(ends, end, side="left")) + 1
        ends = np.minimum(ends[:n], end)
        starts = np.concatenate([[start], ends[:-1]])
        states = (state0 + np.arange(n)) % 2
        return starts, ends, states

    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        starts, ends, states = self.sojourns(start, end, rng)
        lengths = ends - starts
        counts = rng.poisson(np.asarray(self.rates)[states] * lengths)
        times = np.repeat(starts, counts) + rng.random(int(counts.sum())) * np.repeat(
            lengths, counts
        )
        return np.sort(times)


@dataclass(frozen=True)
class Periodic(ChangeProcess):
    """One change per period, near a fixed phase.

    The ``k``-th change happens at ``k * period + phase + e_k`` (hours since the epoch)
    with independent ``e_k ~ Normal(0, jitter)`` (``jitter_kind="normal"``) or
    ``e_k ~ Uniform(-jitter, jitter)`` (``"uniform"``). :attr:`mean_rate` is
    ``1 / period``. Normal jitter is truncated at 12 standard deviations when deciding
    which ``k`` can land in the window (a probability below 1e-32 per change).

    Parameters
    ----------
    period
        Hours between nominal changes, ``> 0`` (e.g. 24 for a daily update).
    phase
        Offset of the nominal change times from the epoch, in hours (e.g. 5 for 05:00 UTC
        with ``period=24``).
    jitter
        Spread of each change around its nominal time, in hours, ``>= 0``.
    jitter_kind
        ``"normal"`` or ``"uniform"``.
    """

    period: float
    phase: float = 0.0
    jitter: float = 0.0
    jitter_kind: str = "normal"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.period) and self.period > 0):
            raise ValueError(f"period must be > 0, got {self.period}")
        if not (np.isfinite(self.jitter) and self.jitter >= 0):
            raise ValueError(f"jitter must be >= 0, got {self.jitter}")
        if self.jitter_kind not in ("normal", "uniform"):
            raise ValueError(f"jitter_kind must be 'normal' or 'uniform', not {self.jitter_kind!r}")

    @property
    def mean_rate(self) -> float:
        return 1.0 / self.period

    def sample(self, start: float, end: float, rng: np.random.Generator) -> np.ndarray:
        start, end = _check_window(start, end)
        reach = self.jitter * (12.0 if self.jitter_kind == "normal" else 1.0)
        k0 = int(np.floor((start - reach - self.phase) / self.period))
        k1 = int(np.ceil((end + reach - self.phase) / self.period))
        nominal = np.arange(k0, k1 + 1) * self.period + self.phase
        if self.jitter == 0:
            times = nominal
        elif self.jitter_kind == "normal":
            times = nominal + rng.normal(0.0, self.jitter, len(nominal))
        else:
            times = nominal + rng.uniform(-self.jitter, self.jitter, len(nominal))
        times = np.sort(times)
        return times[(times > start) & (times <= end)]


# =========================================================================================
# crawl processes and detection


def regular_grid(start: float, end: float, interval: float) -> np.ndarray:
    """Visits at ``start, start + interval, ...`` up to and including ``end``."""
    start, end = _check_window(start, end)
    if not (np.isfinite(interval) and interval > 0):
        raise ValueError(f"interval must be > 0, got {interval}")
    n = int(np.floor((end - start) / interval + 1e-9)) + 1
    return start + interval * np.arange(n)


def poisson_crawl(start: float, end: float, rate: float, rng: np.random.Generator) -> np.ndarray:
    """A visit at ``start``, then visits at the points of a Poisson process of ``rate``/hour
    in ``(start, end]``."""
    start, end = _check_window(start, end)
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be > 0, got {rate}")
    later = Homogeneous(rate).sample(start, end, rng)
    later = later[later > start]
    return np.concatenate([[start], np.unique(later)])


def detect(change_times: np.ndarray, visit_times: np.ndarray) -> np.ndarray:
    """Change flags a crawler records: ``1`` at visit ``k`` if any change in
    ``(t_{k-1}, t_k]``; the first visit is the baseline (``0``).

    Parameters
    ----------
    change_times
        Change times in hours (any order).
    visit_times
        Strictly increasing visit times in hours.

    Returns
    -------
    numpy.ndarray
        ``int8`` flags, one per visit.
    """
    visits = np.asarray(visit_times, dtype=np.float64)
    if visits.ndim != 1:
        raise ValueError("visit_times must be one-dimensional")
    if len(visits) > 1 and not (np.diff(visits) > 0).all():
        raise ObservationError("visit times must be strictly increasing", field="time")
    changes = np.sort(np.asarray(change_times, dtype=np.float64).ravel())
    flags = np.zeros(len(visits), dtype=np.int8)
    if len(visits) > 1:
        seen = np.searchsorted(changes, visits, side="right")
        flags[1:] = np.diff(seen) > 0
    return flags


# =========================================================================================
# many pages


@dataclass(frozen=True, eq=False)
class SimulatedData:
    """Simulated observations and the truth behind them.

    Attributes
    ----------
    observations
        The censored observations, as any loader would return them.
    truth
        Indexed like ``observations.pages``: ``domain``, ``rate_per_hour`` (long-run
        changes per hour of the page's process), ``process`` (class name) and any
        generator-specific columns (e.g. ``tld`` for :func:`pages_like`).
    processes
        The change process of each page (``None`` when only rates were given).
    meta
        How the data were made (generator, seed, parameters).
    """

    observations: Observations
    truth: pd.DataFrame
    processes: tuple[ChangeProcess, ...] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rate_per_hour(self) -> np.ndarray:
        """True long-run rate of every page (changes per hour), in page order."""
        return self.truth["rate_per_hour"].to_numpy()

    def __repr__(self) -> str:
        return f"SimulatedData({self.observations!r})"


def _page_labels(n: int) -> np.ndarray:
    width = max(4, len(str(max(n - 1, 0))))
    return np.array([f"p{i:0{width}d}" for i in range(n)], dtype=object)


def _normalise_visits(
    visit_times: np.ndarray | Sequence[np.ndarray], n_pages: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(concatenated visit times, offsets) after checking every page's visits."""
    if (
        isinstance(visit_times, np.ndarray)
        and visit_times.ndim == 1
        and (visit_times.dtype != object)
    ):
        shared = np.asarray(visit_times, dtype=np.float64)
        if n_pages is None:
            raise ValueError(
                "a shared visit-time array needs the number of pages from "
                "`processes` (an array of rates or a list of processes)"
            )
        _check_visits(shared, np.array([0, len(shared)]), shared_label=True)
        counts = np.full(n_pages, len(shared), dtype=np.int64)
        times = np.tile(shared, n_pages)
        return times, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    per_page = [np.asarray(v, dtype=np.float64).ravel() for v in visit_times]
    if n_pages is not None and len(per_page) != n_pages:
        raise ObservationError(
            f"{len(per_page)} visit-time arrays for {n_pages} pages", field="visit_times"
        )
    counts = np.fromiter((len(v) for v in per_page), dtype=np.int64, count=len(per_page))
    times = np.concatenate(per_page) if per_page else np.zeros(0)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    _check_visits(times, offsets)
    return times, offsets


def _check_visits(times: np.ndarray, offsets: np.ndarray, shared_label: bool = False) -> None:
    """Every page has a visit; times are finite and strictly increasing within pages."""
    n_pages = len(offsets) - 1
    counts = np.diff(offsets)
    page_of_visit = np.repeat(np.arange(n_pages), counts)
    step_ok = np.ones(len(times), dtype=bool)
    step_ok[1:] = times[1:] > times[:-1]
    step_ok[offsets[:-1][counts > 0]] = True  # a page's first visit has no predecessor
    for bad, what in (
        (counts == 0, "pages without any visit"),
        (
            np.bincount(page_of_visit[~np.isfinite(times)], minlength=n_pages) > 0,
            "non-finite visit times",
        ),
        (
            np.bincount(page_of_visit[~step_ok], minlength=n_pages) > 0,
            "visit times not strictly increasing within a page",
        ),
    ):
        if bad.any():
            pages = (
                ["(shared visit times)"] if shared_label else _page_labels(n_pages)[bad].tolist()
            )
            raise ObservationError(what, field="time", pages=pages)


def simulate_pages(
    processes: Sequence[ChangeProcess] | np.ndarray | Sequence[float] | float | ChangeProcess,
    visit_times: np.ndarray | Sequence[np.ndarray],
    domains: Sequence[str] | np.ndarray | None = None,
    *,
    rng: np.random.Generator | int | str | None = None,
    exact: bool = False,
    page_attributes: Mapping[str, Sequence[Any] | np.ndarray] | None = None,
    time_kind: str = "numeric",
    source: str = "simulated",
    meta: Mapping[str, Any] | None = None,
) -> SimulatedData:
    """Simulate the censored observations of many pages.

    Parameters
    ----------
    processes
        Either true rates per hour (one per page: homogeneous Poisson pages, the fast
        vectorized path), or one :class:`ChangeProcess` per page. A single rate or
        process is used for every page (the count then comes from ``visit_times``).
    visit_times
        One 1-D array shared by every page, or one array per page (strictly increasing,
        hours since the epoch, at least one visit each).
    domains
        Domain label of each page (default ``"(none)"``).
    rng
        Generator, or a seed for :func:`rng_from`.
    exact
        Sample every change time and :func:`detect` it, even for Poisson pages (slow; for
        checking the fast path).
    page_attributes
        Extra page-level columns (one value per page) for ``observations.pages`` and
        ``truth``.
    time_kind
        ``"numeric"`` or ``"datetime"`` (how :meth:`Observations.to_frame` shows times).
    source, meta
        Provenance carried into the result.

    Returns
    -------
    SimulatedData
        Page labels are ``"p0000"``, ``"p0001"``, ... (wider when there are more pages).

    Raises
    ------
    ObservationError
        If the numbers of pages disagree, a page has no visit, a rate is negative or not
        finite, or visit times are not finite and strictly increasing within each page.
    """
    if time_kind not in ("numeric", "datetime"):
        raise ValueError(f"time_kind must be 'numeric' or 'datetime', not {time_kind!r}")
    gen = rng_from(rng)
    scalar = isinstance(processes, (ChangeProcess, int, float, np.number))
    n_given: int | None = None if scalar else len(processes)  # type: ignore[arg-type]
    times, offsets = _normalise_visits(visit_times, n_given)
    n_pages = len(offsets) - 1
    if n_pages == 0:
        raise ObservationError("no pages to simulate")
    labels = _page_labels(n_pages)
    procs, mean_rates, names = _processes(processes, scalar, labels)
    domain_values = _domain_labels(domains, labels)

    if procs is None and not exact:
        changed = _flags_homogeneous(mean_rates, times, offsets, gen)
    else:
        changed = _flags_processes(
            procs if procs is not None else [Homogeneous(float(r)) for r in mean_rates],
            times,
            offsets,
            gen,
            exact=exact,
        )

    pages = pd.DataFrame({DOMAIN: domain_values}, index=pd.Index(labels, name=PAGE))
    truth = pages.copy()
    for name, values in (page_attributes or {}).items():
        values = np.asarray(values)
        if values.shape[:1] != (n_pages,):
            raise ObservationError(
                f"page attribute {name!r} has {len(values)} values for {n_pages} pages", field=name
            )
        pages[name] = values
        truth[name] = values
    truth["rate_per_hour"] = mean_rates
    truth["process"] = names
    observations = Observations(
        pages=pages,
        offsets=offsets,
        time=np.ascontiguousarray(times),
        changed=changed,
        time_kind=time_kind,
        source=source,
        meta=dict(meta or {}),
    )
    return SimulatedData(
        observations=observations,
        truth=truth,
        processes=None if procs is None else tuple(procs),
        meta=dict(meta or {}),
    )


def _processes(processes, scalar: bool, labels: np.ndarray):
    """(processes or None for plain rates, mean rate per page, process name per page)."""
    n_pages = len(labels)
    if scalar and isinstance(processes, ChangeProcess):
        procs = [processes] * n_pages
    elif not scalar and all(isinstance(p, ChangeProcess) for p in processes):
        procs = list(processes)
    else:
        try:
            rates = np.broadcast_to(np.asarray(processes, dtype=np.float64), (n_pages,))
        except (TypeError, ValueError) as exc:
            raise ObservationError(
                "processes must be rates per hour or ChangeProcess objects, one per page",
                field="rate_per_hour",
            ) from exc
        bad = ~np.isfinite(rates) | (rates < 0)
        if bad.any():
            raise ObservationError(
                "rates must be finite and >= 0", field="rate_per_hour", pages=labels[bad].tolist()
            )
        return None, np.array(rates, dtype=np.float64), np.full(n_pages, "Homogeneous", object)
    mean_rates = np.array([p.mean_rate for p in procs])
    return procs, mean_rates, np.array([p.name for p in procs], dtype=object)


def _domain_labels(domains, labels: np.ndarray) -> np.ndarray:
    """Domain label per page as strings (default ``"(none)"``); errors name the pages."""
    n_pages = len(labels)
    if domains is None:
        return np.full(n_pages, DEFAULT_DOMAIN, dtype=object)
    values = np.asarray(domains, dtype=object)
    if values.shape != (n_pages,):
        raise ObservationError(f"{len(values)} domains for {n_pages} pages", field=DOMAIN)
    missing = pd.isna(values)
    if missing.any():
        raise ObservationError(
            "missing domain labels", field=DOMAIN, pages=labels[missing].tolist()
        )
    return values.astype(str).astype(object)


def _intervals(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the visit that closes each interval, page of each interval)."""
    counts = np.diff(offsets)
    is_first = np.zeros(int(offsets[-1]), dtype=bool)
    is_first[offsets[:-1][counts > 0]] = True
    ends_at = np.flatnonzero(~is_first)
    page = np.repeat(np.arange(len(counts)), np.maximum(counts - 1, 0))
    return ends_at, page


def _flags_homogeneous(
    rates: np.ndarray, times: np.ndarray, offsets: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Bernoulli(1 - exp(-rate * tau)) per interval."""
    changed = np.zeros(len(times), dtype=np.int8)
    k, page = _intervals(offsets)
    prob = -np.expm1(-rates[page] * (times[k] - times[k - 1]))
    changed[k] = rng.random(len(k)) < prob
    return changed


def _flags_processes(
    procs: list[ChangeProcess],
    times: np.ndarray,
    offsets: np.ndarray,
    rng: np.random.Generator,
    *,
    exact: bool,
) -> np.ndarray:
    """Change flags for all visits (fast path for Poisson pages unless ``exact``)."""
    n_pages = len(procs)
    changed = np.zeros(len(times), dtype=np.int8)
    ends_at, page_of_interval = _intervals(offsets)
    # 0: sample + detect, 1: homogeneous, 2: modulated
    fast_kind = {Homogeneous: 1, HourOfWeekModulated: 2}
    kind = np.zeros(n_pages, dtype=np.int8)
    if not exact:
        kind[:] = [fast_kind.get(type(p), 0) for p in procs]
    rate = np.array(
        [p.rate if k else 0.0 for p, k in zip(procs, kind.tolist(), strict=True)], dtype=np.float64
    )

    sel = kind[page_of_interval] == 1
    if sel.any():
        k = ends_at[sel]
        prob = -np.expm1(-rate[page_of_interval[sel]] * (times[k] - times[k - 1]))
        changed[k] = rng.random(len(k)) < prob

    modulated = np.flatnonzero(kind == 2)
    if len(modulated):
        # group pages by time zone; within a zone, by identical multiplier vectors
        zones: dict[str, list[int]] = {}
        for i in modulated:
            zones.setdefault(procs[i].timezone, []).append(int(i))  # type: ignore[attr-defined]
        for zone, members in zones.items():
            table: dict[bytes, int] = {}
            by_id: dict[int, int] = {}  # pages often share one multiplier array
            row_of_page = np.zeros(n_pages, dtype=np.int64)
            rows: list[np.ndarray] = []
            for i in members:
                m = procs[i].multipliers  # type: ignore[attr-defined]
                row = by_id.get(id(m))
                if row is None:
                    row = table.setdefault(m.tobytes(), len(rows))
                    if row == len(rows):
                        rows.append(m)
                    by_id[id(m)] = row
                row_of_page[i] = row
            in_zone = np.zeros(n_pages, dtype=bool)
            in_zone[members] = True
            sel = in_zone[page_of_interval]
            k = ends_at[sel]
            owner = page_of_interval[sel]
            # F at every visit of these pages once; interval k spans visits k-1 and k
            visit_rows = np.repeat(row_of_page, np.diff(offsets))
            visits = np.flatnonzero(np.repeat(in_zone, np.diff(offsets)))
            f = np.zeros(len(times))
            f[visits] = cumulative_multiplier(
                times[visits], np.vstack(rows), visit_rows[visits], zone
            )
            lam = rate[owner] * np.maximum(f[k] - f[k - 1], 0.0)
            changed[k] = rng.random(len(k)) < -np.expm1(-lam)

    for i in np.flatnonzero(kind == 0):
        lo, hi = offsets[i], offsets[i + 1]
        if hi - lo < 2:
            continue
        visits = times[lo:hi]
        changed[lo:hi] = detect(procs[i].sample(visits[0], visits[-1], rng), visits)
    return changed


# =========================================================================================
# the case study's shape

# inverse CDF of the number of revisits per page: piecewise linear through the published
# quartiles; the top stretch (probability 1 - _FULL_FROM) sits at the 719-revisit maximum.
# _FULL_FROM is solved so that the mean is the published 521.7.
_FULL_FROM = 0.5728
_N_VISIT_KNOTS = ((0.0, 5.0), (0.25, 368.8), (0.5, 592.0), (_FULL_FROM, 719.0), (1.0, 719.0))

# TLD mix: (tld, share of pages, number of sites, log-rate effect of the TLD)
_TLDS = (
    ("com", 0.55, 22, 0.30),
    ("org", 0.08, 5, -0.40),
    ("net", 0.08, 5, 0.10),
    ("de", 0.06, 4, -0.10),
    ("jp", 0.05, 3, 0.20),
    ("uk", 0.04, 3, 0.00),
    ("cn", 0.03, 2, 0.30),
    ("edu", 0.04, 2, -0.80),
    ("gov", 0.03, 2, -0.90),
    ("ca", 0.02, 1, -0.20),
    ("fr", 0.02, 1, 0.00),
)
# page scores: mu + tld effect + site effect (sd _SITE_SD) + page effect (sd _PAGE_SD),
# rate = softplus(score); a fraction _ALWAYS of pages change faster than the crawl can see
# (rate in [10, 100]/h). Calibrated against the published changes-per-page summary.
_SCORE_MU = -1.431
_SITE_SD = 0.6
_PAGE_SD = 2.426
_ALWAYS = 0.0473


def _case_study_intervals(n_pages: int, rng: np.random.Generator) -> np.ndarray:
    """Revisits per page: stratified draws from the piecewise-linear inverse CDF."""
    u = (np.arange(n_pages) + rng.random(n_pages)) / n_pages
    if n_pages > 1:
        u[0], u[-1] = 0.0, 1.0  # the published min and max are attained
    qs, xs = zip(*_N_VISIT_KNOTS, strict=True)
    n = np.rint(np.interp(u, qs, xs)).astype(np.int64)
    return rng.permutation(n)


def _site_names(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(site label, tld, share of pages) for the simulated sites."""
    sites, tlds, shares = [], [], []
    for tld, share, n_sites, _ in _TLDS:
        suffix = "co.uk" if tld == "uk" else tld
        weights = rng.dirichlet(np.full(n_sites, 2.0))
        for j in range(n_sites):
            sites.append(f"site{len(sites):02d}.{suffix}")
            tlds.append(tld)
            shares.append(share * weights[j])
    shares_arr = np.asarray(shares)
    return (
        np.asarray(sites, dtype=object),
        np.asarray(tlds, dtype=object),
        shares_arr / (shares_arr.sum()),
    )


def pages_like(
    n_pages: int = 1000,
    seed: int | str | np.random.Generator = "pages-like",
    history: str = "case-study",
    modulation: np.ndarray | None = None,
    timezone: str = "UTC",
) -> SimulatedData:
    """Simulated pages shaped like the published case study (hourly crawl, 30 days).

    Construction (see ``docs/simulate.md`` for the achieved summaries):

    * **visits** - an hourly grid of 720 visits starting at :data:`CASE_STUDY_START`
      (2024-01-01T00:00Z, a Monday). ``history="case-study"``: page ``i`` has ``n_i``
      revisits (the case study's ``numVisits``, i.e. intervals) drawn from a
      piecewise-linear inverse CDF through the published quartiles (min 5, Q1 368.8,
      median 592, max 719, with about 43% of pages at 719 so the mean is 521.7) and is
      visited on the LAST ``n_i + 1`` hours of the grid (monitoring started late).
      ``history="short"``: 10-50 visits (uniform) on the first hours of the grid.
    * **sites** - 48 sites over 11 TLDs (``.com`` 55% of pages, then ``.org``, ``.net``,
      ``.de``, ``.jp``, ``.uk``, ``.edu``, ``.cn``, ``.gov``, ``.ca``, ``.fr``); the
      ``domain`` is the site (e.g. ``"site07.com"``), ``tld`` is a page attribute.
    * **rates** - per page a score ``s = -1.431 + tld effect + site effect (sd 0.6) +
      page effect (sd 2.426)`` and rate per hour ``log(1 + exp(s))`` (softplus: for
      hourly visits the chance to see a change is then close to ``logistic(s)``);
      4.73% of pages instead change at 10-100/h (they change on every visit, the
      published peak at the maximum). Calibrated (Nelder-Mead over 40 seeds) so detected
      changes per page match the published summary (min 0, Q1 19, median 99, mean
      182.8, Q3 296.5, max 719); see ``docs/simulate.md`` for the spread over seeds.

    Parameters
    ----------
    n_pages
        Number of pages.
    seed
        Seed for :func:`rng_from` (or a generator).
    history
        ``"case-study"`` or ``"short"``.
    modulation
        ``None`` for homogeneous Poisson pages, or 168 hour-of-week multipliers: every
        page is then :class:`HourOfWeekModulated` with the same long-run rate (the base
        rate is divided by the multipliers' mean).
    timezone
        Clock of the modulation.

    Returns
    -------
    SimulatedData
        ``truth`` has ``domain``, ``tld``, ``rate_per_hour``, ``process``.
    """
    if n_pages < 1:
        raise ValueError("n_pages must be >= 1")
    if history not in ("case-study", "short"):
        raise ValueError(f"history must be 'case-study' or 'short', not {history!r}")
    rng = rng_from(seed)
    sites, site_tld, share = _site_names(rng)
    tld_effect = dict((t, e) for t, _, _, e in _TLDS)
    site_effect = rng.normal(0.0, _SITE_SD, len(sites)) + np.array(
        [tld_effect[t] for t in site_tld]
    )
    site_of_page = rng.choice(len(sites), size=n_pages, p=share)
    score = _SCORE_MU + site_effect[site_of_page] + rng.normal(0.0, _PAGE_SD, n_pages)
    rate = np.logaddexp(0.0, score)  # softplus
    always = rng.random(n_pages) < _ALWAYS
    rate[always] = np.exp(rng.uniform(np.log(10.0), np.log(100.0), int(always.sum())))

    grid = CASE_STUDY_START + np.arange(720, dtype=np.float64)
    if history == "case-study":
        n_int = _case_study_intervals(n_pages, rng)
        visits = [grid[719 - n :] for n in n_int]
    else:
        n_vis = rng.integers(10, 51, n_pages)
        visits = [grid[:n] for n in n_vis]

    processes: Any
    if modulation is None:
        processes = rate
    else:
        m = np.asarray(modulation, dtype=np.float64)
        if m.shape != (N_HOUR_OF_WEEK,) or m.mean() <= 0:
            raise ValueError("modulation must be 168 non-negative multipliers with mean > 0")
        processes = [HourOfWeekModulated(r / m.mean(), m, timezone) for r in rate]
    seed_note = (
        int(seed)
        if isinstance(seed, (int, np.integer))
        else seed
        if isinstance(seed, str)
        else "generator"
    )
    return simulate_pages(
        processes,
        visits,
        domains=sites[site_of_page],
        rng=rng,
        page_attributes={"tld": site_tld[site_of_page]},
        time_kind="datetime",
        source=f"simulate.pages_like(n_pages={n_pages}, seed={seed_note!r}, history={history!r})",
        meta={
            "generator": "pages_like",
            "seed": seed_note,
            "history": history,
            "modulated": modulation is not None,
            "timezone": timezone,
        },
    )
