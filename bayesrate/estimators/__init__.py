"""Classical, online and conjugate change-rate estimators (numpy/scipy only, no PyMC).

Submodules (import the one you need; this package imports none of them, so
``import bayesrate.estimators.gamma`` stays light):

- :mod:`~bayesrate.estimators.batch` — naive, moment, Cho, MLE, MM over ``IntervalStats``;
- :mod:`~bayesrate.estimators.mle` — the vectorized Newton solver and profile intervals;
- :mod:`~bayesrate.estimators.online` — LLN, SA, SAM and Gamma states, sequence replay;
- :mod:`~bayesrate.estimators.gamma` — exposure-based and ADF Gamma updates;
- :mod:`~bayesrate.estimators.grid` — exact 1-D posterior on a log-rate grid.

Rates are per hour; see ``docs/estimators.md``.
"""
