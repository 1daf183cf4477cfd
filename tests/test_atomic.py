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
