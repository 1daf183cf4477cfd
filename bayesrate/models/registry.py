"""The model registry: name → model class, filled by :mod:`bayesrate.models` (the core
models), by :func:`register`, and by the entry points of :data:`ENTRY_POINT_GROUP` that
:func:`get_model` loads on first use of a name (the research package's models).

Its own module, importing no model, so that :meth:`RateModel.load
<bayesrate.models.base.RateModel.load>` can look a saved fit's class up without importing
the package that imports every model (an import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bayesrate.models.base import RateModel

#: the entry-point group other packages register models under (``name = "module:Class"``)
ENTRY_POINT_GROUP = "bayesrate.models"
#: how to get the research models, named when a model is not found
RESEARCH_HINT = (
    "the research models (bursty, shocks, drift, shocks_ar1, mass_edits, dynamic_shocks, "
    "dynamic_edits) are in the bayesrate-research package: pip install -e research"
)

#: what makes a class a model (RateModel's interface)
_REQUIRED = ("build_model", "fit", "save", "load", "marginal_page_loglik")
#: name -> model class (the CLI's ``--model`` choices, ``bayesrate_model_type`` of a saved fit)
MODELS: dict[str, type[RateModel]] = {}


def register(name: str, cls: type[RateModel]) -> type[RateModel]:
    """Register the model class ``cls`` under ``name`` (its ``model_type``): ``get_model``,
    the CLI's ``--model`` and ``RateModel.load`` then know it.

    Registering the same class again is a no-op; another class under a taken name is a
    ``ValueError``; anything but a ``RateModel`` subclass is a ``TypeError``. Returns ``cls``.
    """
    # duck-typed: importing the base class here would make base -> registry -> base a cycle
    if not (isinstance(cls, type) and all(callable(getattr(cls, m, None)) for m in _REQUIRED)):
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
