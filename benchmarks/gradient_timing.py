"""Shared by the model benchmarks: a compiled log-density + gradient at a fixed point, and
interleaved timings of several such functions (BLAS single-threaded, as in NUTS fits)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def logp_dlogp_at(pm_model, jitter: float = 0.1, seed: int = 1, mode: str | None = None):
    """PyMC's compiled ``logp_dlogp_function`` and a point: the initial point moved by
    ``jitter`` standard normals (away from the prior's centre). ``mode``: PyTensor's
    compile mode (``"NUMBA"``: nutpie's backend), PyMC's default if ``None``."""
    kwargs = {} if mode is None else {"mode": mode}
    f = pm_model.logp_dlogp_function(ravel_inputs=True, **kwargs)
    f.set_extra_values({})
    point = pm_model.initial_point()
    x0 = np.concatenate([np.ravel(point[v.name]) for v in f._grad_vars])
    x0 = x0 + jitter * np.random.default_rng(seed).standard_normal(len(x0))
    f(x0)  # the first call pays for any lazy set-up
    return f, x0


def interleaved_ms(
    funcs: dict[str, Callable[[], object]], rounds: int, calls: int = 10
) -> dict[str, tuple[float, float]]:
    """Per label, the median and minimum milliseconds per call over ``rounds`` rounds of
    ``calls`` calls, the labels alternating within each round."""
    from threadpoolctl import threadpool_limits

    times: dict[str, list[float]] = {label: [] for label in funcs}
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(rounds):
            for label, call in funcs.items():
                t = time.perf_counter()
                for _ in range(calls):
                    call()
                times[label].append((time.perf_counter() - t) / calls)
    return {k: (1e3 * float(np.median(v)), 1e3 * float(np.min(v))) for k, v in times.items()}
