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
