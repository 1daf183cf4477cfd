"""ARCHITECTURE.md's module map names every module, and its "imports PyMC?" column holds."""

from __future__ import annotations

import ast
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.slow  # compiles every numba kernel in a new process: ~20 s on cold caches
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

    again = run()
    if any(int(misses) for _, _, misses in again):  # this checkout had no cache: now it has
        again = run()
    assert [name for name, _, _ in again] == ["logp_grad", "laplace_logp_grad", "expm2_scaled"]
    for name, hits, misses in again:
        assert int(hits) >= 1 and int(misses) == 0, (name, hits, misses)


# -- the import graph -----------------------------------------------------------------------
#
# Every import statement that runs counts, wherever it is: at module level or inside a
# function (a function-level import hides a cycle from Python, not from a reader). Imports
# under ``if TYPE_CHECKING:`` never run: they name a type for annotations and are left out
# (``sufficient`` annotates its functions with ``Observations``, whose cached properties
# build the statistics).

PACKAGE = REPO / "bayesrate"


def module_files() -> dict[str, Path]:
    """``module name -> file`` for every module of the package (packages by ``__init__``)."""
    files = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _type_checking(node):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def imported_modules(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules one module imports: ``import a.b``, ``from a import b`` (``a.b``
    when ``b`` is a submodule, else ``a``), relative imports resolved against the module."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in known else source)
    edges = set()
    for name in found:
        # ``import a.b.c`` names ``a.b.c``; keep the longest prefix that is one of ours
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            candidate = ".".join(parts[:k])
            if candidate in known:
                edges.add(candidate)
                break
    edges.discard(module)
    return edges


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {m: imported_modules(m, p, known) for m, p in files.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, by breadth-first search."""
    inside = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & inside):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {component}")


def test_import_graph_has_no_cycles():
    """No import cycle between the package's modules, function-level imports included.

    A package's ``__init__`` counts as the module named by the package.
    """
    graph = import_graph()
    components = strongly_connected(graph)
    report = "\n".join(
        f"  {' -> '.join(one_cycle(graph, c))}   (component: {', '.join(c)})" for c in components
    )
    assert not components, f"{len(components)} import cycle(s):\n{report}"


# -- logic on the models ---------------------------------------------------------------------
#
# A model class answers for itself (its predictive, its leave-one-page-out terms, its PPC
# replication, its export blocks): the studies, checks, export and the main job never ask
# which model they hold.

DISPATCH_FREE = ("bayesrate/studies", "bayesrate/checks", "bayesrate/export.py",
                 "bayesrate/calibrate.py")  # fmt: skip


def model_class_names() -> set[str]:
    """Names of the classes defined in ``bayesrate/models`` (the model classes and theirs)."""
    names = set()
    for path in (PACKAGE / "models").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Model"):
                names.add(node.name)
    return names


def _named(node: ast.AST) -> str:
    return ast.unparse(node)


def dispatch_sites(path: Path, classes: set[str]) -> list[str]:
    """``isinstance(x, SomeModel)``, ``hasattr(model, ...)`` and comparisons of a
    ``model_type`` in one file, as ``path:line: code``."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        why = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id == "isinstance" and len(args) == 2:
                kinds = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
                if any(_named(k).split(".")[-1] in classes for k in kinds):
                    why = "isinstance on a model class"
            elif node.func.id == "hasattr" and args and re.search(r"model|fit", _named(args[0])):
                why = "hasattr on a model"
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any("model_type" in _named(side) for side in sides):
                why = "model_type compared"
        if why:
            rel = path.relative_to(REPO)
            hits.append(f"{rel}:{node.lineno}: {why}: {_named(node)[:90]}")
    return hits


def test_no_dispatch_on_model_classes_outside_models():
    classes = model_class_names()
    files = []
    for entry in DISPATCH_FREE:
        target = REPO / entry
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    hits = [hit for path in files for hit in dispatch_sites(path, classes)]
    assert not hits, "dispatch on model classes outside bayesrate/models:\n" + "\n".join(hits)


def test_the_core_never_imports_the_research_package():
    """research/ registers its models through the entry points; the core does not know it."""
    sources = sorted((REPO / "bayesrate").rglob("*.py"))
    offenders = [str(p.relative_to(REPO)) for p in sources if "bayesrate_research" in p.read_text()]
    assert not offenders, f"the core imports the research package: {offenders}"


# -- small modules ---------------------------------------------------------------------------
#
# A module holds one idea; past this many lines it is a package of small modules with public
# names (as ``studies.forecast`` became: 1,086 lines in one file before issue #51).

MAX_MODULE_LINES = 700

#: modules over the limit, each with why it is not split yet; a module that falls under the
#: limit leaves the list (the test says so)
LONG_MODULES = {
    "bayesrate/models/base.py": "the model base class (config, fit, save/load, forecast "
    "predictive, leave-one-page-out, export gates): being reworked by issue #51 item 3",
    "bayesrate/models/dynamic.py": "the dynamic model on the grid and Laplace paths: being "
    "reworked concurrently (issue #51)",
    "bayesrate/history.py": "ChangeHistory, its table validation and the crawl schedules: "
    "one data type with its loaders, not yet split",
    "bayesrate/estimators/mmpp.py": "the MMPP's visit runs, forward recursion, fit and exact "
    "predictive: one estimator, not yet split",
    "bayesrate/scheduler/replay.py": "the replay harness, its policies and freshness: not yet "
    "split",
    "bayesrate/scheduler/state.py": "the scheduler's columnar state with both posterior "
    "families: not yet split",
    "bayesrate/priors.py": "the priors.json schema (v1 Gamma, v2 population): one artifact, "
    "not yet split",
    "bayesrate/simulate.py": "change processes, crawl processes and the simulated pages: not "
    "yet split",
}


def module_lines() -> dict[str, int]:
    return {
        str(path.relative_to(REPO)): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_modules_are_small():
    lines = module_lines()
    long = {p: n for p, n in lines.items() if n > MAX_MODULE_LINES and p not in LONG_MODULES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"
    stale = [p for p in LONG_MODULES if lines.get(p, 0) <= MAX_MODULE_LINES]
    assert not stale, f"LONG_MODULES lists modules no longer over the limit: {stale}"


# -- public names between modules -------------------------------------------------------------
#
# What one module imports from another is public: no leading underscore. A private module
# (``models._hmm_kernels``) is its package's own: only its siblings import it.

#: ``(importer, module, name)`` still importing a private name, with why
PRIVATE_IMPORTS = {
    ("bayesrate.models._laplace_kernels", "bayesrate.models._hmm_kernels", "_njit"): "between "
    "two private kernel modules; renaming it recompiles numba's on-disk cache",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports() -> set[tuple[str, str, str]]:
    """``(importer, module, name)`` for every private name a module takes from another one
    of the package: ``from m import _x``, ``m._x`` on an imported module ``m``, and a private
    module imported from outside its own package."""
    files = module_files()
    known = set(files)
    found = set()
    for module, path in files.items():
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        modules_bound: dict[str, str] = {}  # local name -> one of our modules
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source not in known:
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in known:
                        modules_bound[alias.asname or alias.name] = sub
                    if _private(alias.name) and not (sub in known and source == ".".join(here)):
                        found.add((module, source, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known and alias.asname:
                        modules_bound[alias.asname] = alias.name
                    parts = alias.name.split(".")
                    if alias.name in known and _private(parts[-1]) and parts[:-1] != here:
                        found.add((module, ".".join(parts[:-1]), parts[-1]))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules_bound
                and _private(node.attr)
            ):
                found.add((module, modules_bound[node.value.id], node.attr))
    return found


def test_modules_import_only_public_names_of_each_other():
    found = private_imports()
    new = sorted(found - set(PRIVATE_IMPORTS))
    assert not new, "private names imported from another module (make them public):\n" + "\n".join(
        f"  {importer}: {name} from {source}" for importer, source, name in new
    )
    stale = sorted(set(PRIVATE_IMPORTS) - found)
    assert not stale, f"PRIVATE_IMPORTS lists imports that are gone: {stale}"


def test_the_figures_take_data_and_never_import_the_studies():
    graph = import_graph()
    plots = [m for m in graph if m == "bayesrate.plots" or m.startswith("bayesrate.plots.")]
    assert plots
    offenders = {m: sorted(graph[m]) for m in plots
                 if any(w.startswith("bayesrate.studies") for w in graph[m])}  # fmt: skip
    assert not offenders, f"figures import the studies: {offenders}"
