"""PyMC change-rate models on sufficient statistics (imports PyMC lazily, on build).

``MODELS`` maps the CLI names to the core's classes: ``censored`` (independent pages),
``hierarchical`` (pages pooled within domains, domains pooled globally), ``modulated``
(hierarchical page rates × hour-of-day × day-of-week effects), ``dynamic`` (each page's
log-rate a random walk over epochs, its path summed out on a grid) and ``excursion`` (each
page's log-rate a stationary AR(1) around its own level). See ``docs/models.md``.

Other packages add models through the public registry: :func:`register` (at import), or
an entry point of the group :data:`ENTRY_POINT_GROUP` (``name = "module:Class"``) that
:func:`get_model` loads on first use of the name. The research models (``bursty``,
``shocks``, ``drift``, ``shocks_ar1``, ``mass_edits``, ``dynamic_shocks``,
``dynamic_edits``) live in ``research/`` (``pip install -e research``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bayesrate.models.base import RateModel
from bayesrate.models.censored import CensoredModel
from bayesrate.models.diagnostics import ConvergenceWarning, Diagnostics
from bayesrate.models.dynamic import DynamicModel
from bayesrate.models.excursion import ExcursionModel
from bayesrate.models.hierarchical import HierarchicalModel
from bayesrate.models.modulated import ModulatedModel
from bayesrate.models.registry import (
    ENTRY_POINT_GROUP,
    MODELS,
    RESEARCH_HINT,
    get_model,
    model_names,
    register,
)

for _cls in (CensoredModel, HierarchicalModel, ModulatedModel, DynamicModel, ExcursionModel):
    register(_cls.model_type, _cls)
#: the core models (the research package registers more)
CORE_MODELS = tuple(MODELS)


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
        if name not in names or name not in model_names():
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
    "CORE_MODELS",
    "ENTRY_POINT_GROUP",
    "MODELS",
    "RESEARCH_HINT",
    "CensoredModel",
    "ConvergenceWarning",
    "Diagnostics",
    "DynamicModel",
    "ExcursionModel",
    "HierarchicalModel",
    "ModulatedModel",
    "RateModel",
    "get_model",
    "model_names",
    "parse_model_configs",
    "register",
]
