"""Run the research notebooks and write their ``.ipynb`` files with outputs.

Every notebook's source is a percent-format script ``notebooks/NN-name.py`` (jupytext); the
``.ipynb`` beside it is produced here, from a full run, and committed with its outputs.

Run all notebooks (full mode, writes the ``.ipynb`` files)::

    .venv/bin/python scripts/run_notebooks.py

Run some of them in fast mode (``BAYESRATE_FAST=1``, small draws; nothing is written)::

    .venv/bin/python scripts/run_notebooks.py --fast 01 04
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: where the online-estimators notebook looks for the (unshipped) Wikipedia traces
WIKIPEDIA_VARIABLE = "BAYESRATE_WIKIPEDIA_DIR"
#: the environment variable every notebook reads to shrink draws and replications
FAST_VARIABLE = "BAYESRATE_FAST"
CELL_TIMEOUT = 3600


def sources() -> list[Path]:
    """The notebook sources (percent-format scripts), in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.py"))


def execute(path: Path, *, fast: bool) -> tuple[nbformat.NotebookNode, float]:
    """Execute the notebook whose source is ``path``; return it with outputs and the seconds."""
    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    previous = os.environ.get(FAST_VARIABLE)
    os.environ[FAST_VARIABLE] = "1" if fast else "0"
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    shared = Path(os.environ.get("BAYESRATE_SHARED", ROOT.parent / "shared")) / "data"
    if WIKIPEDIA_VARIABLE not in os.environ and (shared / "wikipedia-revisions-westhad").is_dir():
        os.environ[WIKIPEDIA_VARIABLE] = str(shared)
    try:
        client = nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    finally:
        if previous is None:
            os.environ.pop(FAST_VARIABLE, None)
        else:
            os.environ[FAST_VARIABLE] = previous
    return nb, seconds


def write(nb: nbformat.NotebookNode, path: Path, seconds: float) -> Path:
    """Write the executed notebook as the ``.ipynb`` paired with ``path``."""
    from bayesrate import __version__

    nb.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    nb.metadata["bayesrate"] = {
        "mode": "full",
        "seconds": round(seconds, 1),
        "version": __version__,
    }
    target = path.with_suffix(".ipynb")
    tmp = target.with_name(target.name + ".tmp")
    nbformat.write(nb, tmp)
    tmp.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    parser.add_argument("--fast", action="store_true", help="fast mode; write nothing")
    args = parser.parse_args(argv)
    chosen = [
        p for p in sources() if not args.names or any(p.stem.startswith(n) for n in args.names)
    ]
    if not chosen:
        parser.error(f"no notebook matches {args.names} in {NOTEBOOKS}")
    for path in chosen:
        print(f"{path.stem}: running ({'fast' if args.fast else 'full'} mode)", flush=True)
        nb, seconds = execute(path, fast=args.fast)
        if not args.fast:
            write(nb, path, seconds)
        print(f"{path.stem}: {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
