"""Atomic outputs: a failed write leaves the previous output as it was."""

from __future__ import annotations

import pytest

from bayesrate.atomic import atomic_directory, atomic_path


def test_atomic_directory_replaces_on_success_and_keeps_the_old_on_failure(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target) as d:
        (d / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError), atomic_directory(target) as d:
        (d / "a.txt").write_text("half")
        raise RuntimeError("crash mid-write")
    assert (target / "a.txt").read_text() == "first"
    with atomic_directory(target) as d:
        (d / "b.txt").write_text("second")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]  # replaced as a whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no leftovers


def test_atomic_path_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "x.csv"
    target.write_text("old")
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_text("new")
        raise ValueError
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


def test_outputs_get_ordinary_permissions_not_the_temporaries_private_ones(tmp_path):
    """mkstemp/mkdtemp create private (0600/0700) temporaries; the renamed result must have
    the permissions of an ordinary file or directory under the process's umask."""
    import os

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "out.json") as p:
            p.write_text("{}")
        with atomic_directory(tmp_path / "artifact") as d:
            (d / "a.txt").write_text("a")
    finally:
        os.umask(old)
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "artifact").stat().st_mode & 0o777 == 0o755


def test_a_device_or_pipe_is_never_replaced_by_a_file(tmp_path):
    """Issue 54 probe: ``estimate --out /dev/full`` (as root) replaced the device node by a
    regular file; a FIFO likewise. Now the write is refused and the node stays."""
    import os
    import stat

    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    with pytest.raises(FileExistsError, match="not a regular file"):
        with atomic_path(fifo) as tmp:
            tmp.write_text("x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
