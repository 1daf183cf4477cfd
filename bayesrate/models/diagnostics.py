"""Convergence diagnostics of a fit, checked against the package's gates.

Every fit gets a :class:`Diagnostics`: R-hat (max), bulk and tail ESS (min) over the
model's parameters, divergences, wall-clock seconds and gradient evaluations per draw.
A NUTS fit that misses a gate (:data:`bayesrate.constants.R_HAT_MAX`, ``ESS_MIN``,
``MAX_DIVERGENCES``) is *failed*: :func:`check` emits a :class:`ConvergenceWarning`, logs
an error, and the fit's saved result carries ``converged = 0``.

Variational fits (ADVI, pathfinder) have independent draws, so R-hat and divergences do
not apply; their gate is method-specific (ADVI: the loss has settled; pathfinder: the
Pareto k̂ of its importance weights, when available) and is reported in ``failures`` too.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bayesrate.constants import ESS_MIN, MAX_DIVERGENCES, R_HAT_MAX
from bayesrate.models import convergence

log = logging.getLogger(__name__)


class ConvergenceWarning(UserWarning):
    """A fit did not meet the convergence gates; its results should not be trusted."""


@dataclass
class Diagnostics:
    """Summary of one fit's convergence.

    Attributes
    ----------
    method
        ``"nuts"``, ``"advi"`` or ``"pathfinder"``.
    r_hat_max, ess_bulk_min, ess_tail_min
        Worst values over all parameters (NaN for variational fits' R-hat).
    worst_r_hat, worst_ess
        Which parameter (``name[index]``) attains them.
    divergences
        Post-warmup divergent transitions (0 for variational fits).
    seconds, compile_seconds, sampling_seconds
        Wall-clock time of the whole fit and its parts.
    grad_evals_per_draw
        Mean leapfrog steps (gradient evaluations) per post-warmup draw.
    chains, draws
        Shape of the stored posterior.
    converged
        Whether all gates were met.
    failures
        One sentence per missed gate.
    extra
        Model-specific notes (e.g. the hierarchical model's parameterisation choice).
    """

    method: str
    r_hat_max: float = math.nan
    ess_bulk_min: float = math.nan
    ess_tail_min: float = math.nan
    worst_r_hat: str = ""
    worst_ess: str = ""
    divergences: int = 0
    seconds: float = math.nan
    compile_seconds: float = math.nan
    sampling_seconds: float = math.nan
    grad_evals_per_draw: float = math.nan
    chains: int = 0
    draws: int = 0
    converged: bool = False
    failures: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes ``None``)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostics:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in (
            "r_hat_max",
            "ess_bulk_min",
            "ess_tail_min",
            "seconds",
            "compile_seconds",
            "sampling_seconds",
            "grad_evals_per_draw",
        ):
            if known.get(key) is None:
                known[key] = math.nan
        return cls(**known)


def _worst(per_variable: dict[str, np.ndarray], reducer: str) -> tuple[float, str]:
    """(value, 'name[idx]') of the max ('max') or min ('min') over all variables."""
    best_value = -math.inf if reducer == "max" else math.inf
    best_name = ""
    for name, values in per_variable.items():
        finite = np.isfinite(values)
        if not finite.any():
            continue
        idx = int(
            np.argmax(np.where(finite, values, -np.inf))
            if reducer == "max"
            else np.argmin(np.where(finite, values, np.inf))
        )
        value = float(values[idx])
        better = value > best_value if reducer == "max" else value < best_value
        if better:
            best_value = value
            best_name = f"{name}[{idx}]" if values.size > 1 else str(name)
    if not math.isfinite(best_value):
        return math.nan, ""
    return best_value, best_name


def compute(
    idata,
    var_names: list[str],
    *,
    method: str,
    seconds: float,
    compile_seconds: float = math.nan,
    sampling_seconds: float = math.nan,
    extra: dict[str, Any] | None = None,
) -> Diagnostics:
    """Diagnostics of the posterior group of ``idata`` over ``var_names``.

    R-hat is ArviZ's rank-normalised split R-hat, the ESS its bulk and tail ESS, computed
    by :mod:`bayesrate.models.convergence` for all of a variable's elements at once.
    """
    posterior = idata["posterior"].to_dataset()[var_names]
    chains = int(posterior.sizes["chain"])
    draws = int(posterior.sizes["draw"])
    diag = Diagnostics(
        method=method,
        seconds=float(seconds),
        compile_seconds=float(compile_seconds),
        sampling_seconds=float(sampling_seconds),
        chains=chains,
        draws=draws,
        extra=dict(extra or {}),
    )
    if draws >= 4:
        stats = {
            str(name): convergence.summary(
                np.asarray(posterior[name].transpose("chain", "draw", ...).values).reshape(
                    chains, draws, -1
                )
            )
            for name in var_names
        }
        r_hat, ess_bulk, ess_tail = ({n: s[row] for n, s in stats.items()} for row in range(3))
        diag.ess_bulk_min, diag.worst_ess = _worst(ess_bulk, "min")
        diag.ess_tail_min, _ = _worst(ess_tail, "min")
        if chains > 1:
            diag.r_hat_max, diag.worst_r_hat = _worst(r_hat, "max")
    if "sample_stats" in idata.children:
        stats = idata["sample_stats"].to_dataset()
        if "diverging" in stats:
            diag.divergences = int(np.asarray(stats["diverging"]).sum())
        if "n_steps" in stats:
            diag.grad_evals_per_draw = float(np.asarray(stats["n_steps"], dtype=float).mean())
    diag.failures = gate_failures(diag)
    diag.converged = not diag.failures
    return diag


def gate_failures(diag: Diagnostics) -> list[str]:
    """Sentences naming each convergence gate the fit misses."""
    failures: list[str] = []
    if diag.method == "nuts":
        if not math.isfinite(diag.r_hat_max) or diag.r_hat_max > R_HAT_MAX:
            failures.append(f"R-hat {diag.r_hat_max:.3f} > {R_HAT_MAX} (worst: {diag.worst_r_hat})")
        if diag.divergences > MAX_DIVERGENCES:
            failures.append(f"{diag.divergences} divergent transitions > {MAX_DIVERGENCES}")
    if not math.isfinite(diag.ess_bulk_min) or diag.ess_bulk_min < ESS_MIN:
        failures.append(f"bulk ESS {diag.ess_bulk_min:.1f} < {ESS_MIN} (worst: {diag.worst_ess})")
    if not math.isfinite(diag.ess_tail_min) or diag.ess_tail_min < ESS_MIN:
        failures.append(f"tail ESS {diag.ess_tail_min:.1f} < {ESS_MIN}")
    failures.extend(diag.extra.get("method_failures", []))
    return failures


def near_miss(diag: Diagnostics, factor: float) -> bool:
    """Whether ``factor`` times the draws would be expected to pass a NUTS fit's missed gates.

    True only for a fit that misses R-hat or ESS and nothing else (no divergences, no
    method-specific failure), by at most ``factor``: each ESS at least
    ``ESS_MIN / factor`` (the ESS of a chain grows in proportion to its length) and
    ``R-hat - 1`` at most ``factor * (R_HAT_MAX - 1)`` (for chains that mix but slowly,
    ``R-hat**2 - 1`` shrinks in proportion to the draws, so ``R-hat - 1`` nearly does).
    A fit further off, or failing for another reason, is not helped by more draws.
    """
    if diag.method != "nuts" or not diag.failures or diag.divergences > MAX_DIVERGENCES:
        return False
    if diag.extra.get("method_failures"):
        return False
    values = (diag.r_hat_max, diag.ess_bulk_min, diag.ess_tail_min)
    if not all(math.isfinite(v) for v in values):
        return False
    return (
        diag.r_hat_max - 1 <= factor * (R_HAT_MAX - 1)
        and min(diag.ess_bulk_min, diag.ess_tail_min) >= ESS_MIN / factor
    )


def check(diag: Diagnostics, model_name: str) -> bool:
    """Warn loudly (warning + log) if the fit failed its gates; return ``converged``."""
    if diag.converged:
        log.info("%s fit (%s) passed convergence gates", model_name, diag.method)
        return True
    message = (
        f"{model_name} fit ({diag.method}) FAILED convergence gates: "
        + "; ".join(diag.failures)
        + ". Results are marked converged=false."
    )
    log.error(message)
    warnings.warn(message, ConvergenceWarning, stacklevel=3)
    return False
