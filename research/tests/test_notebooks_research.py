"""research/notebooks: paired sources in sync, and each running top to bottom in fast mode
(``BAYESRATE_FAST=1``; the kernel finds the research models through their entry points, so
the package must be installed: ``make test-research``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import run_notebooks  # noqa: E402

SOURCES = sorted((ROOT / "research" / "notebooks").glob("[0-9][0-9]-*.py"))
IDS = [p.stem for p in SOURCES]


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_the_research_notebooks_exist():
    assert SOURCES, "research/notebooks holds the model comparison"


@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_paired_notebook_is_in_sync(path):
    committed = path.with_suffix(".ipynb")
    assert _cells(nbformat.read(committed, as_version=4)) == _cells(jupytext.read(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", SOURCES, ids=IDS)
def test_notebook_runs_in_fast_mode(path):
    from bayesrate.models.registry import _entry_points

    if "bursty" not in _entry_points():
        pytest.skip("the research package is not installed (pip install -e research)")
    run_notebooks.execute(path, fast=True)
