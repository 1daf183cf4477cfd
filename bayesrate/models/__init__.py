"""PyMC change-rate models on sufficient statistics (imports PyMC lazily, on build).

``MODELS`` (:mod:`bayesrate.models.registry`; more with :func:`register`) maps the CLI
names to classes: ``censored`` (independent pages), ``hierarchical``
(pages pooled within domains, domains pooled globally), ``modulated`` (hierarchical page
rates × hour-of-day × day-of-week effects), ``bursty`` (hierarchical page rates,
each interval's exposure Gamma-mixed, shape pooled per domain) and ``shocks``
(hierarchical page rates × epoch effects shared globally and per domain), ``drift``
(the same effects as a random walk), ``shocks_ar1`` (the global effect an AR(1) path
that persists and fades), ``dynamic`` (each page's log-rate a random walk
over epochs, its path summed out on a grid), ``dynamic_shocks`` (the page walks with
the shocks model's shared epoch effects on top), ``excursion`` (each page's log-rate a
stationary AR(1) around its own level), ``mass_edits`` (the shocks model plus
a rate every page of a domain gets on top of its own, per epoch) and ``dynamic_edits``
(the page walks, shocks and edits together). See ``docs/models.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bayesrate.models.base import RateModel
from bayesrate.models.bursty import BurstyModel
from bayesrate.models.censored import CensoredModel
from bayesrate.models.diagnostics import ConvergenceWarning, Diagnostics
from bayesrate.models.dynamic import DynamicModel, DynamicShockModel
from bayesrate.models.dynamic_edits import DynamicEditModel
from bayesrate.models.excursion import ExcursionModel
from bayesrate.models.hierarchical import HierarchicalModel
from bayesrate.models.mass_edits import MassEditModel
from bayesrate.models.modulated import ModulatedModel
from bayesrate.models.registry import MODELS, get_model, register
from bayesrate.models.shocks import DriftModel, PersistentShockModel, ShockModel

for _cls in (
    CensoredModel,
    HierarchicalModel,
    ModulatedModel,
    BurstyModel,
    ShockModel,
    DriftModel,
    PersistentShockModel,
    DynamicModel,
    DynamicShockModel,
    ExcursionModel,
    MassEditModel,
    DynamicEditModel,
):
    register(_cls.model_type, _cls)


def parse_model_configs(
    given: Mapping[str, Mapping[str, Any]] | Sequence[str] | str | None,
    names: Sequence[str],
    what: str = "model of this run",
) -> dict[str, dict[str, Any]]:
    """``{model: model_config overrides}`` from a mapping or ``"NAME=JSON"`` texts (the
    CLI's ``--model-config``), each model one of ``names``, each config a JSON object the
    model accepts; anything else is an :class:`~bayesrate.errors.ObservationError` naming
    the model, raised before any fit."""
    import json

    from bayesrate.errors import ObservationError

    if given is None:
        return {}
    if isinstance(given, str):
        given = [given]
    if isinstance(given, Mapping):
        items = [(str(k), v) for k, v in given.items()]
    else:
        items = []
        for text in given:
            name, sep, body = str(text).partition("=")
            if not sep:
                raise ObservationError(
                    f"model config {text!r}: expected NAME=JSON", field="model_config"
                )
            try:
                items.append((name.strip(), json.loads(body)))
            except json.JSONDecodeError as exc:
                raise ObservationError(
                    f"model config of {name!r}: not JSON ({exc})", field="model_config"
                ) from None
    out: dict[str, dict[str, Any]] = {}
    for name, config in items:
        if name not in MODELS or name not in names:
            raise ObservationError(
                f"model config for {name!r}: not a {what} ({', '.join(names) or 'none'})",
                field="model_config",
            )
        if not isinstance(config, Mapping):
            raise ObservationError(
                f"model config of {name!r} must be a JSON object", field="model_config"
            )
        out[name] = {**out.get(name, {}), **config}
        try:
            get_model(name)(model_config=out[name])
        except (TypeError, ValueError) as exc:
            raise ObservationError(
                f"model config of {name!r}: {exc}", field="model_config"
            ) from None
    return out


__all__ = [
    "MODELS",
    "BurstyModel",
    "CensoredModel",
    "ConvergenceWarning",
    "Diagnostics",
    "DriftModel",
    "DynamicEditModel",
    "DynamicModel",
    "DynamicShockModel",
    "HierarchicalModel",
    "MassEditModel",
    "ModulatedModel",
    "PersistentShockModel",
    "RateModel",
    "ShockModel",
    "get_model",
    "parse_model_configs",
    "register",
]
