"""Revisit scheduler: per-URL change-rate posteriors, decisions, optimal rates, durability.

Never imports PyMC, PyTensor or ArviZ (it consumes fitted priors through
:mod:`bayesrate.priors`). Times are hours since the Unix epoch; rates are per hour.

Modules: :mod:`~bayesrate.scheduler.state` (columnar state, priors, updates),
:mod:`~bayesrate.scheduler.decide` (priorities, ``due``, politeness, plans),
:mod:`~bayesrate.scheduler.optimal` (Azar / Kolobov rates), :mod:`~bayesrate.scheduler.store`
(SQLite persistence), :mod:`~bayesrate.scheduler.pgstore` (PostgreSQL persistence; SQL in
:mod:`~bayesrate.scheduler.pgsql`), :mod:`~bayesrate.scheduler.location` (which store a
location names), :mod:`~bayesrate.scheduler.frontier` (a fleet's leases and reports),
:mod:`~bayesrate.scheduler.harness` (policy comparison harness),
:mod:`~bayesrate.scheduler.baselines` (production crawler policies). psycopg is imported
only by the PostgreSQL modules, which nothing here imports.
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
