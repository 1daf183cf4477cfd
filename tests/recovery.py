"""Judging recovery tests by their statistics, not by one seed's luck.

A recovery test fits a model to a world simulated with known truths and asserts that the
posterior holds them. Each assertion here passes on a correct model for *any* seed with
probability at least ``1 − ALPHA`` (per assertion), and still fails on a model that is
wrong by more than its own sampling noise:

- counts of truths inside their 90% intervals: at least :func:`min_inside` of ``m``, the
  Binomial(m, 0.9) lower ``ALPHA`` quantile (four calibrated 90% intervals all hold their
  truth only 66% of the time, so "each one inside" is a coin toss);
- coverage of many pages: within :func:`coverage_band`, the Binomial band at ``Z`` standard
  errors plus :data:`MCSE_ALLOWANCE` for intervals read from finitely many draws;
- mixing: :func:`assert_mixed` asks for chains that agree (R-hat ≤ :data:`R_HAT_TEST`) and
  enough effective draws for the 90% intervals read (bulk ESS ≥ :data:`ESS_TEST`: the
  5% quantile's Monte Carlo error is then ≤ 0.016 in probability). The production gate
  (R-hat ≤ 1.01, ESS ≥ 400) is a decision rule tested on its own
  (``tests/models/test_convergence.py``); at a few hundred effective draws R-hat's own
  sampling noise crosses 1.01 on correct fits at some seeds.

``pytest --recovery-seeds N`` runs every recovery test at N seeds (the first is the
test's fixed one) to measure its pass rate.
"""

from __future__ import annotations

import math

from scipy.stats import binom

#: chance that one assertion fails on a correct model
ALPHA = 0.002
#: standard errors of the binomial coverage band (two-sided 0.001)
Z = 3.29
#: coverage of intervals read from ~400+ effective draws sits slightly inside nominal
MCSE_ALLOWANCE = 0.01
R_HAT_TEST = 1.02
ESS_TEST = 200


def min_inside(m: int, level: float = 0.9, alpha: float = ALPHA) -> int:
    """The largest ``k`` with ``P(Binomial(m, level) < k) ≤ alpha``."""
    k = 0
    while k < m and binom.cdf(k, m, level) <= alpha:
        k += 1
    return k


def coverage_band(n: int, level: float = 0.9) -> tuple[float, float]:
    """Band for the share of ``n`` truths inside their ``level`` intervals."""
    half = Z * math.sqrt(level * (1 - level) / n) + MCSE_ALLOWANCE
    return level - half, min(level + half, 1.0)


def assert_coverage(hits, name: str = "coverage", level: float = 0.9) -> None:
    """The share of ``hits`` (booleans) is inside :func:`coverage_band`."""
    import numpy as np

    hits = np.asarray(hits, dtype=bool).ravel()
    lo, hi = coverage_band(hits.size, level)
    share = float(hits.mean())
    assert lo <= share <= hi, f"{name}: {share:.3f} of {hits.size} outside [{lo:.3f}, {hi:.3f}]"


def assert_inside_count(hits, level: float = 0.9) -> None:
    """At least :func:`min_inside` of the ``hits`` (booleans) are inside."""
    import numpy as np

    hits = np.asarray(hits, dtype=bool).ravel()
    need = min_inside(hits.size, level)
    assert hits.sum() >= need, f"{int(hits.sum())} of {hits.size} inside, need {need}: {hits}"


def assert_mixed(diagnostics) -> None:
    """No divergence, R-hat ≤ :data:`R_HAT_TEST`, bulk and tail ESS ≥ :data:`ESS_TEST`."""
    d = diagnostics
    problems = []
    if d.divergences > 0:
        problems.append(f"{d.divergences} divergences")
    if not d.r_hat_max <= R_HAT_TEST:
        problems.append(f"R-hat {d.r_hat_max:.3f} ({d.worst_r_hat})")
    if not min(d.ess_bulk_min, d.ess_tail_min) >= ESS_TEST:
        problems.append(f"ESS {d.ess_bulk_min:.0f}/{d.ess_tail_min:.0f} ({d.worst_ess})")
    assert not problems, "; ".join(problems)


def assert_read_mixed(model, names: list[str]) -> None:
    """:func:`assert_mixed` on the variables ``names`` a test reads (their R-hat and ESS
    recomputed from ``model``'s posterior), with no divergence anywhere in the fit. For
    short chains of a hierarchy over a few domains: its population mean mixes more slowly
    than the pages and walk sizes it pools, and a recovery test that reads only those
    needs only those mixed."""
    from bayesrate.models.diagnostics import compute

    read = compute(model.idata_, names, method="nuts", seconds=0.0)
    read.divergences = model.diagnostics_.divergences
    assert_mixed(read)


def seed_name(base: str, index: int) -> str:
    """The ``index``-th seed of a recovery test whose fixed seed is ``base``."""
    return base if index == 0 else f"{base}#{index}"


def assert_truths_within(draws, truths, name: str, log: bool = False) -> None:
    """Every truth within ``z`` posterior standard deviations of its posterior mean, ``z``
    the two-sided Bonferroni quantile over the ``m`` truths at :data:`ALPHA` (m = 4: 3.35).
    ``draws`` ``(S, m)`` (or ``(S,)`` for one truth); ``log`` judges positive scales on
    the log scale, where their posteriors are close to normal. Unlike a count of truths
    inside 90% intervals, this keeps its power when there are only a few truths, and the
    mean and sd are read from all draws (no extreme quantiles)."""
    import numpy as np
    from scipy.stats import norm

    draws = np.asarray(draws, dtype=float).reshape(len(draws), -1)
    truths = np.asarray(truths, dtype=float).ravel()
    if log:
        draws, truths = np.log(draws), np.log(truths)
    z = norm.isf(ALPHA / (2 * truths.size))
    score = (truths - draws.mean(axis=0)) / draws.std(axis=0)
    assert np.all(np.abs(score) <= z), f"{name}: z-scores {np.round(score, 2)} beyond ±{z:.2f}"
