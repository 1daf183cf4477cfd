"""The README's Python example imports names that exist (its fits are run by the tests of
each model; here only what a reader would copy first)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_imports_resolve():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks
    imported = 0
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    submodule = hasattr(module, "__path__") and importlib.util.find_spec(
                        f"{node.module}.{alias.name}"
                    )
                    assert hasattr(module, alias.name) or submodule, (
                        f"README: {node.module} has no {alias.name}"
                    )
                    imported += 1
    assert imported >= 3


ROOT = README.parent
#: the documents whose relative links must resolve (README, the docs, the module map, the
#: research notes)
LINKED_DOCS = [README, ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md")),
               *sorted((ROOT / "research" / "docs").glob("*.md"))]  # fmt: skip
#: docs/models.md describes the core models; the lab log lives in research/docs/models-log.md
MODELS_DOC_MAX_LINES = 500


def relative_links(text: str) -> list[str]:
    """The targets of the markdown links and images in ``text`` that are paths in the
    repository (no URL, no bare ``#anchor``), their ``#fragment`` dropped; fenced code
    blocks are skipped."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    return [
        t.split("#", 1)[0]
        for t in targets
        if not re.match(r"^[a-z][a-z0-9+.-]*:", t, flags=re.I) and not t.startswith("#")
    ]


def test_relative_links_resolve():
    broken = [
        f"{doc.relative_to(ROOT)}: {target}"
        for doc in LINKED_DOCS
        for target in relative_links(doc.read_text())
        if not (doc.parent / target).exists()
    ]
    assert not broken, f"links to missing files: {broken}"


def test_relative_links_are_found():
    """The link finder sees plain links, images, titles and fragments, and skips URLs."""
    text = '[a](docs/x.md#sec) ![b](img.png "t") [c](https://e.org/y.md) [d](#top)\n'
    text += "```\n[e](z)\n```\n"
    assert relative_links(text) == ["docs/x.md", "img.png"]


def test_models_doc_is_short():
    lines = len((ROOT / "docs" / "models.md").read_text().splitlines())
    assert lines < MODELS_DOC_MAX_LINES, f"docs/models.md has {lines} lines"
    assert "../research/docs/models-log.md" in (ROOT / "docs" / "models.md").read_text()
