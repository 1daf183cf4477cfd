"""The research notebooks: paired sources in sync, committed outputs from a full run, and every
notebook running top to bottom in fast mode (``BAYESRATE_FAST=1``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import run_notebooks  # noqa: E402

SOURCES = run_notebooks.sources()
IDS = [p.stem for p in SOURCES]
MIN_FIGURES = 3


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_the_notebooks_exist():
    """Four here; the model comparison (03, the research models) is in research/notebooks."""
    assert len(SOURCES) >= 4, SOURCES
    orphans = [p.name for p in ROOT.glob("notebooks/*.ipynb") if not p.with_suffix(".py").exists()]
    assert not orphans, f"every .ipynb needs its percent-format source: {orphans}"


@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_paired_notebook_is_in_sync(path):
    """The committed .ipynb has exactly the cells of its percent-format source."""
    committed = path.with_suffix(".ipynb")
    assert committed.exists(), f"{committed.name} missing: run scripts/run_notebooks.py"
    assert _cells(nbformat.read(committed, as_version=4)) == _cells(jupytext.read(path)), (
        f"{committed.name} is out of date with {path.name}: run scripts/run_notebooks.py"
    )


@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_committed_outputs_come_from_a_full_run(path):
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    assert nb.metadata.get("bayesrate", {}).get("mode") == "full"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "a code cell was not executed"
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= MIN_FIGURES, f"{len(figures)} figures"
    last_markdown = [c for c in nb.cells if c.cell_type == "markdown"][-1].source
    assert "what we learned" in last_markdown.lower()
    assert any(ch.isdigit() for ch in last_markdown), "the closing section gives numbers"


@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_notebook_uses_the_public_api_only(path):
    """No private names: a notebook is a template users copy."""
    tree = ast.parse(path.read_text())
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayesrate"):
            private += [a.name for a in node.names if a.name.startswith("_")]
            private += [p for p in (node.module or "").split(".") if p.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            if not node.attr.startswith("__"):
                private.append(node.attr)
    assert not private, f"private names used: {private}"


@pytest.mark.slow
@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_notebook_runs_in_fast_mode(path):
    run_notebooks.execute(path, fast=True)  # raises CellExecutionError on any failing cell
