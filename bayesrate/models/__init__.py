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

#: the entry-point group other packages register models under (``name = "module:Class"``)
ENTRY_POINT_GROUP = "bayesrate.models"
#: how to get the research models, named when a model is not found
RESEARCH_HINT = (
    "the research models (bursty, shocks, drift, shocks_ar1, mass_edits, dynamic_shocks, "
    "dynamic_edits) are in the bayesrate-research package: pip install -e research"
)

#: the core models; :func:`register` and the entry points add to it
MODELS: dict[str, type[RateModel]] = {
    "censored": CensoredModel,
    "hierarchical": HierarchicalModel,
    "modulated": ModulatedModel,
    "dynamic": DynamicModel,
    "excursion": ExcursionModel,
}
CORE_MODELS = tuple(MODELS)


def register(name: str, cls: type[RateModel]) -> type[RateModel]:
    """Register the model class ``cls`` under ``name`` (its ``model_type``): ``get_model``,
    the CLI's ``--model`` and ``RateModel.load`` then know it. Registering the same class
    twice is a no-op; another class under a taken name is a ``ValueError``. Returns
    ``cls`` (usable as a decorator's body)."""
    if not (isinstance(cls, type) and issubclass(cls, RateModel)):
        raise TypeError(f"model {name!r}: {cls!r} is not a RateModel subclass")
    if cls.model_type != name:
        raise ValueError(f"model {name!r}: the class's model_type is {cls.model_type!r}")
    taken = MODELS.get(name)
    if taken is not None and taken is not cls:
        raise ValueError(f"model {name!r} is already registered ({taken.__qualname__})")
    MODELS[name] = cls
    return cls


def _entry_points() -> dict[str, Any]:
    """The installed entry points of :data:`ENTRY_POINT_GROUP`, by name (not loaded)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def model_names() -> list[str]:
    """Every model name known now: registered, or an installed entry point (not loaded)."""
    return sorted({*MODELS, *_entry_points()})


def get_model(name: str) -> type[RateModel]:
    """The model class registered under ``name``, loading its entry point on first use.

    An unknown name is a ``ValueError`` listing the known ones and how to install the
    research models."""
    if name in MODELS:
        return MODELS[name]
    ep = _entry_points().get(name)
    if ep is None:
        raise ValueError(f"unknown model {name!r}; choose one of {model_names()} ({RESEARCH_HINT})")
    return register(name, ep.load())


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
