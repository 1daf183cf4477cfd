"""The public model registry (``bayesrate.models.registry``): the core's five models, ``register``,
and the entry-point group other packages (the research models) add theirs through."""

from __future__ import annotations

from typing import ClassVar

import pytest

import bayesrate.models.registry as M
from bayesrate.cli import main
from bayesrate.models import CORE_MODELS, HierarchicalModel


class ToyModel(HierarchicalModel):
    model_type: ClassVar[str] = "toy"


class OtherToy(HierarchicalModel):
    model_type: ClassVar[str] = "toy"


@pytest.fixture
def registry(monkeypatch):
    """``MODELS`` restored after the test; no installed entry point but ``eps``."""
    monkeypatch.setattr(M, "MODELS", dict(M.MODELS))
    eps: dict = {}
    monkeypatch.setattr(M, "_entry_points", lambda: eps)
    return eps


def test_the_core_lists_its_five_models():
    assert CORE_MODELS == ("censored", "hierarchical", "modulated", "dynamic", "excursion")
    assert set(CORE_MODELS) <= set(M.MODELS)
    assert all(M.get_model(name).model_type == name for name in CORE_MODELS)


def test_unknown_model_says_how_to_get_the_research_models(registry):
    with pytest.raises(ValueError, match=r"unknown model 'shocks'.*pip install -e research"):
        M.get_model("shocks")


def test_register_checks_the_class_and_the_name(registry):
    assert M.register("toy", ToyModel) is ToyModel
    assert M.get_model("toy") is ToyModel and "toy" in M.model_names()
    M.register("toy", ToyModel)  # the same class again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        M.register("toy", OtherToy)
    with pytest.raises(ValueError, match="model_type"):
        M.register("other", ToyModel)
    with pytest.raises(TypeError, match="RateModel"):
        M.register("toy", dict)


def test_entry_points_load_on_first_use(registry):
    loads = []

    class EntryPoint:
        name = "toy"

        def load(self):
            loads.append(1)
            return ToyModel

    registry["toy"] = EntryPoint()
    assert "toy" in M.model_names() and "toy" not in M.MODELS  # listed, not loaded
    assert M.get_model("toy") is ToyModel and M.get_model("toy") is ToyModel
    assert loads == [1] and M.MODELS["toy"] is ToyModel


def test_cli_names_the_research_package_for_an_unknown_model(registry, capsys, tmp_path):
    assert main(["fit", "--input", str(tmp_path / "x.csv"), "--model", "shocks"]) == 2
    assert "pip install -e research" in capsys.readouterr().err
