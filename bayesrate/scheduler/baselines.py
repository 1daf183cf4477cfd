"""What production crawlers do today (``docs/science.md`` §6), as simulation policies.

Every policy here keeps one revisit interval per URL and a next-due time; it wants a URL once
it is due, earliest due first. ``scale`` multiplies every interval constant (start, min,
max), which is how the harness gives every policy the same fetch budget.

- ``uniform`` — Nutch DefaultFetchSchedule: one fixed interval (30 days).
- ``nutch-adaptive`` — Nutch AdaptiveFetchSchedule: changed I·(1 − 0.2), unchanged
  I·(1 + 0.4), clamped; start 30 d, min 60 s, max 365 d.
- ``stormcrawler-adaptive`` — StormCrawler AdaptiveScheduler: changed (1 − d)·I + d·I_min,
  unchanged min(I·(1 + i), I_max); start 1 d, min 60 min, max 2 weeks, i = d = 0.5.
- ``heritrix-wait`` — Heritrix 1 WaitEvaluator: changed I/1.5, unchanged 1.5·I; start 1 d,
  min 1 h, max 4 weeks.
- ``pagestate`` — seed 000's ``PageState``: Gamma(1, 7 d) prior, exposure update,
  t_next = t + factor/λ.

None of them uses importance weights (they do not in production either).
"""

from __future__ import annotations

import numpy as np

from bayesrate.constants import HOURS_PER_DAY

DAY = HOURS_PER_DAY


class IntervalPolicy:
    """A per-URL revisit interval with a next-due time; subclasses define the update.

    Parameters
    ----------
    n
        Number of URLs.
    scale
        Multiplier of all interval constants.
    """

    name = "interval"
    start = 30 * DAY
    min_interval = 1 / 60
    max_interval = 365 * DAY

    def __init__(self, n: int, scale: float = 1.0) -> None:
        self.n = n
        self.scale = float(scale)
        self.lo = self.min_interval * self.scale
        self.hi = self.max_interval * self.scale
        self.interval = np.full(n, self.start * self.scale)
        self.next_due = np.zeros(n)

    def reset(self, t0: float, rng: np.random.Generator) -> None:
        """All URLs fetched at ``t0``; first revisits staggered over one interval."""
        self.next_due = t0 + self.interval * rng.uniform(0.0, 1.0, self.n)

    def priority(self, now: float) -> np.ndarray:
        """Earliest due first; ``-inf`` for URLs not due yet."""
        return np.where(self.next_due <= now, -self.next_due, -np.inf)

    def update(self, rows: np.ndarray, changed: np.ndarray) -> None:
        """New intervals of the fetched rows (default: fixed)."""

    def observe(self, rows: np.ndarray, now: float, changed: np.ndarray) -> None:
        self.update(rows, changed.astype(bool))
        self.next_due[rows] = now + self.interval[rows]


class Uniform(IntervalPolicy):
    """Nutch ``DefaultFetchSchedule``: one fixed interval for every URL."""

    name = "uniform"


class NutchAdaptive(IntervalPolicy):
    """Nutch ``AdaptiveFetchSchedule`` (inc 0.4, dec 0.2, min 60 s, max 365 d)."""

    name = "nutch-adaptive"
    inc, dec = 0.4, 0.2

    def update(self, rows: np.ndarray, changed: np.ndarray) -> None:
        i = self.interval[rows]
        i = np.where(changed, i * (1 - self.dec), i * (1 + self.inc))
        self.interval[rows] = np.clip(i, self.lo, self.hi)


class StormCrawlerAdaptive(IntervalPolicy):
    """StormCrawler ``AdaptiveScheduler`` (min 60 min, max 2 weeks, i = d = 0.5)."""

    name = "stormcrawler-adaptive"
    start = 1 * DAY
    min_interval = 1.0
    max_interval = 14 * DAY
    inc, dec = 0.5, 0.5

    def update(self, rows: np.ndarray, changed: np.ndarray) -> None:
        i = self.interval[rows]
        i = np.where(
            changed,
            (1 - self.dec) * i + self.dec * self.lo,
            np.minimum(i * (1 + self.inc), self.hi),
        )
        self.interval[rows] = i


class HeritrixWait(IntervalPolicy):
    """Heritrix 1 ``WaitEvaluator`` (start 1 d, min 1 h, max 4 weeks, factor 1.5)."""

    name = "heritrix-wait"
    start = 1 * DAY
    min_interval = 1.0
    max_interval = 28 * DAY
    factor = 1.5

    def update(self, rows: np.ndarray, changed: np.ndarray) -> None:
        i = self.interval[rows]
        i = np.where(changed, i / self.factor, i * self.factor)
        self.interval[rows] = np.clip(i, self.lo, self.hi)


class PageStatePolicy(IntervalPolicy):
    """Seed 000's ``PageState``: exposure-updated Gamma(1, 7 days), ``t + factor/λ``.

    ``scale`` is the factor. The rate is floored at 1e-6 per day, as in the seed.
    """

    name = "pagestate"

    def __init__(self, n: int, scale: float = 1.0) -> None:
        super().__init__(n, scale)
        self.alpha = np.full(n, 1.0)
        self.beta = np.full(n, 7.0 * DAY)
        self.last = np.zeros(n)
        self.interval = self._interval(np.arange(n))

    def _interval(self, rows: np.ndarray) -> np.ndarray:
        lam = np.maximum(self.alpha[rows] / self.beta[rows], 1e-6 / DAY)
        return self.scale / lam

    def reset(self, t0: float, rng: np.random.Generator) -> None:
        self.last[:] = t0
        super().reset(t0, rng)

    def observe(self, rows: np.ndarray, now: float, changed: np.ndarray) -> None:
        self.beta[rows] += now - self.last[rows]
        self.alpha[rows] += changed
        self.last[rows] = now
        self.interval[rows] = self._interval(rows)
        self.next_due[rows] = now + self.interval[rows]


BASELINES: dict[str, type[IntervalPolicy]] = {
    cls.name: cls
    for cls in (Uniform, NutchAdaptive, StormCrawlerAdaptive, HeritrixWait, PageStatePolicy)
}
