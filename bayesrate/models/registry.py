"""The model registry: name → model class, filled by :mod:`bayesrate.models` (the core
models) and by any package that adds its own (:func:`register`).

Its own module, importing no model, so that :meth:`RateModel.load
<bayesrate.models.base.RateModel.load>` can look a saved fit's class up without importing
the package that imports every model (an import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayesrate.models.base import RateModel

#: name -> model class (the CLI's ``--model`` choices, ``bayesrate_model_type`` of a saved fit)
MODELS: dict[str, type[RateModel]] = {}


def register(name: str, cls: type[RateModel]) -> type[RateModel]:
    """Register ``cls`` under ``name`` (its ``model_type``); returns ``cls``.

    Registering the same class again is a no-op; another class under a taken name is a
    ``ValueError``.
    """
    if getattr(cls, "model_type", None) != name:
        raise ValueError(f"{cls.__name__}.model_type is {cls.model_type!r}, not {name!r}")
    if MODELS.get(name, cls) is not cls:
        raise ValueError(f"model name {name!r} is taken by {MODELS[name].__name__}")
    MODELS[name] = cls
    return cls


def get_model(name: str) -> type[RateModel]:
    """The model class registered under ``name``."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
