"""Atomic file output: write to a temporary name beside the target, rename on success.

A reader (or a crash) never sees a half-written output: the target is either the old file
or the complete new one, and a failed write leaves no temporary file behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``path``'s directory; rename it to ``path`` on success.

    The temporary name keeps ``path``'s suffixes (writers that choose a format by suffix
    still work). On an exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        # a device or a pipe (``/dev/full``): the rename would replace it by a file
        raise FileExistsError(
            errno.EEXIST, "exists and is not a regular file; not replacing it", str(path)
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = "".join(path.suffixes)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o666 & ~_umask())  # mkstemp makes it private; the result is an ordinary file
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a write error names no file
            exc.filename = str(path)
        raise


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; it replaces ``path`` on success.

    A reader sees the old directory or the complete new one (the old one is moved aside
    and removed after the new one is in place); on an exception the temporary directory is
    removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
        os.replace(path, old / path.name)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def lock_directory(path: str | Path, *, wait: bool = True) -> int | None:
    """Take an exclusive lock on the directory ``path`` (which must exist).

    ``flock`` on the directory itself: no lock file is left, and a process that dies
    releases it. Returns the open descriptor that holds the lock (``os.close`` releases
    it), or ``None`` when ``wait`` is false and another holder has it.
    """
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def directory_lock(path: str | Path) -> Iterator[None]:
    """Hold :func:`lock_directory` on ``path`` while in the block.

    Writers that rename several outputs into one place take it so that two of them never
    leave a mix of their outputs (``calibrate``: artifacts and report).
    """
    fd = lock_directory(path)
    try:
        yield
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_netcdf(data: Any, path: str | Path, **kwargs: Any) -> Path:
    """Write an xarray ``DataTree``/``Dataset`` as NetCDF4 (h5netcdf) at ``path``, atomically.

    The file is built in memory and written with a plain write: HDF5 writing straight to a
    full disk crashed the process (segfault, issue 54), where a plain write fails with an
    ``OSError`` (the temporary file is removed and an existing ``path`` kept).
    ``kwargs`` go to ``to_netcdf`` (``encoding=``).
    """
    import io

    buffer = io.BytesIO()
    data.to_netcdf(buffer, engine="h5netcdf", **kwargs)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())
    return Path(path)
