"""Revisit scheduler: per-URL change-rate posteriors, decisions, optimal rates, durability.

Never imports PyMC, PyTensor or ArviZ (it consumes fitted priors through
:mod:`bayesrate.priors`). Times are hours since the Unix epoch; rates are per hour.

Modules: :mod:`~bayesrate.scheduler.state` (columnar state, priors, updates),
:mod:`~bayesrate.scheduler.decide` (priorities, ``due``, politeness, plans),
:mod:`~bayesrate.scheduler.optimal` (Azar / Kolobov rates), :mod:`~bayesrate.scheduler.store`
(SQLite persistence), :mod:`~bayesrate.scheduler.harness` (policy comparison harness),
:mod:`~bayesrate.scheduler.baselines` (production crawler policies).
"""

from bayesrate.scheduler.decide import decision_rates, due, next_check, plan, priority
from bayesrate.scheduler.optimal import azar_rates, harmonic_rates, optimal_rates
from bayesrate.scheduler.state import SchedulerConfig, SchedulerState

__all__ = [
    "SchedulerConfig",
    "SchedulerState",
    "azar_rates",
    "decision_rates",
    "due",
    "harmonic_rates",
    "next_check",
    "optimal_rates",
    "plan",
    "priority",
]
