"""ARCHITECTURE.md's module map names every module, and its "imports PyMC?" column holds."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys

import pytest

import bayesrate
from tests.helpers import REPO

HEAVY = ("pymc", "pytensor", "arviz", "nutpie")


def module_map() -> dict[str, str]:
    """``module -> imports-PyMC cell`` from the table in ARCHITECTURE.md.

    A row may name several modules (``a``, ``b``) or a package with a wildcard (``x.*``).
    """
    text = (REPO / "ARCHITECTURE.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`bayesrate"):
            continue
        for name in re.findall(r"`(bayesrate[\w.*]*)`", cells[0]):
            rows[name] = cells[2].lower()
    return rows


def package_modules() -> list[str]:
    names = ["bayesrate"]
    for info in pkgutil.walk_packages(bayesrate.__path__, "bayesrate."):
        if info.name.split(".")[-1] != "__main__":
            names.append(info.name)
    return sorted(names)


def entry_for(module: str, rows: dict[str, str]) -> str | None:
    """The map's row for a module: itself, or the nearest ``package.*`` above it."""
    if module in rows:
        return module
    parts = module.split(".")
    for k in range(len(parts) - 1, 0, -1):
        star = ".".join(parts[:k]) + ".*"
        if star in rows:
            return star
    return None


def test_module_map_names_every_module():
    rows = module_map()
    missing = [m for m in package_modules() if entry_for(m, rows) is None]
    assert not missing, f"ARCHITECTURE.md's module map does not name: {missing}"
    stale = [r for r in rows if not r.endswith(".*") and r not in package_modules()]
    assert not stale, f"ARCHITECTURE.md names modules that do not exist: {stale}"


def light_modules() -> list[str]:
    rows = module_map()
    return [
        m
        for m in package_modules()
        if (e := entry_for(m, rows)) is not None and rows[e].startswith(("no", "**never"))
    ]


@pytest.mark.parametrize("chunk", range(4))
def test_modules_marked_light_import_no_pymc(chunk):
    modules = light_modules()[chunk::4]
    code = (
        "import importlib, sys\n"
        f"bad = {{}}\nfor m in {modules!r}:\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(m)\n"
        f"    heavy = [h for h in {HEAVY!r} if h in sys.modules]\n"
        "    if heavy: bad[m] = heavy; break\n"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "{}", out.stdout


KERNEL_CALLS = """
import numpy as np
from bayesrate.estimators import _mmpp_kernels as mmpp
from bayesrate.models import _hmm_kernels as hmm, _laplace_kernels as laplace

def ints(*v):
    return np.array(v, dtype=np.int64)

def floats(*v):
    return np.array(v, dtype=np.float64)

one = ints(0)
hmm.logp_grad(np.full((1, 3), 1 / 3), np.full((1, 3, 3), 1 / 3), np.ones((1, 2, 3)), one, one,
              one + 1, np.zeros((0, 0, 0, 0)))
laplace.laplace_logp_grad(floats(-3.0), floats(1.0), floats(0.5), floats(1.0), floats(0.0),
                          ints(0, 1), ints(0),
                          floats(100.0), ints(0, 1), floats(24.0), floats(2.0), floats(-3.0),
                          np.zeros((3, 1)), np.zeros(3), 2)
mmpp.expm2_scaled(-1.0, 0.5, 0.5, -2.0, 3.0)
for kernel in (hmm.logp_grad, laplace.laplace_logp_grad, mmpp.expm2_scaled):
    print(kernel.__name__, sum(kernel.stats.cache_hits.values()),
          sum(kernel.stats.cache_misses.values()))
"""


def test_numba_kernels_load_from_the_disk_cache_in_a_new_process():
    """The kernels that call other kernels (the grid's forward pass, the Laplace pages, the
    MMPP transfer matrices) are module-level functions: a kernel defined inside a function
    and calling another such kernel misses numba's cache in every new process (~4 s of
    compiling for the Laplace kernel alone)."""

    def run() -> list[list[str]]:
        out = subprocess.run(
            [sys.executable, "-c", KERNEL_CALLS],
            capture_output=True, text=True, check=True, cwd=REPO,
        )  # fmt: skip
        return [line.split() for line in out.stdout.strip().splitlines()]

    run()  # fills the cache if this checkout has none
    again = run()
    assert [name for name, _, _ in again] == ["logp_grad", "laplace_logp_grad", "expm2_scaled"]
    for name, hits, misses in again:
        assert int(hits) >= 1 and int(misses) == 0, (name, hits, misses)


def test_the_core_never_imports_the_research_package():
    """research/ registers its models through the entry points; the core does not know it."""
    sources = sorted((REPO / "bayesrate").rglob("*.py"))
    offenders = [str(p.relative_to(REPO)) for p in sources if "bayesrate_research" in p.read_text()]
    assert not offenders, f"the core imports the research package: {offenders}"
