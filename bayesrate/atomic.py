"""Atomic file output: write to a temporary name beside the target, rename on success.

A reader (or a crash) never sees a half-written output: the target is either the old file
or the complete new one, and a failed write leaves no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``path``'s directory; rename it to ``path`` on success.

    The temporary name keeps ``path``'s suffixes (writers that choose a format by suffix
    still work). On an exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = "".join(path.suffixes)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
