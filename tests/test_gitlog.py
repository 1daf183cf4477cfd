"""``bayesrate data from-git`` on a repository made in the test: create, edit, rename, delete."""

from __future__ import annotations

import os
import shutil
import subprocess

import pandas as pd
import pytest

from bayesrate import gitlog
from bayesrate.cli import main
from bayesrate.io.history import read_history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


def git(repo, *args, when=None):
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if when is not None:
        stamp = f"@{T0 + when} +0000"
        env |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo, env=env, check=True, capture_output=True,
    )  # fmt: skip


def iso(offset: int) -> str:
    return pd.Timestamp(T0 + offset, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "docs"
    (r / "pages" / "linux").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "pages" / "linux" / "ls.md").write_text("ls\n")
    (r / "pages" / "linux" / "old name.md").write_text("cp\n")
    (r / "README.md").write_text("not a page\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "create", when=0)
    (r / "pages" / "linux" / "ls.md").write_text("ls -la\n")
    git(r, "commit", "-qam", "edit", when=3600)
    git(r, "mv", "pages/linux/old name.md", "pages/linux/cp.md")
    git(r, "commit", "-qm", "rename", when=7200)
    git(r, "rm", "-q", "pages/linux/ls.md")
    git(r, "commit", "-qm", "delete", when=10800)
    # a side branch merged into main: its file lands at the merge commit's time
    git(r, "checkout", "-qb", "side")
    (r / "pages" / "osx").mkdir()
    (r / "pages" / "osx" / "open.md").write_text("open\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "side work", when=12000)
    git(r, "checkout", "-q", "main")
    git(r, "merge", "-q", "--no-ff", "side", "-m", "merge", when=14400)
    return r


def test_history_frame_matches_the_commits(repo):
    got = gitlog.history_frame(repo, "pages/**/*.md", domain_depth=1)
    want = pd.DataFrame(
        [
            ["linux/ls", "linux", iso(0), "created"],
            ["linux/old name", "linux", iso(0), "created"],
            ["linux/ls", "linux", iso(3600), "changed"],
            ["linux/old name", "linux", iso(7200), "deleted"],
            ["linux/cp", "linux", iso(7200), "created"],
            ["linux/ls", "linux", iso(10800), "deleted"],
            ["osx/open", "osx", iso(14400), "created"],  # first parent: the merge time
        ],
        columns=["page", "domain", "time", "event"],
    )
    sort = ["time", "page", "event"]
    pd.testing.assert_frame_equal(
        got.sort_values(sort).reset_index(drop=True), want.sort_values(sort).reset_index(drop=True)
    )
    no_domain = gitlog.history_frame(repo, "pages/**/*.md")
    assert list(no_domain.columns) == ["page", "time", "event"]


def test_cli_writes_a_valid_history(repo, tmp_path, capsys):
    out = tmp_path / "hist.csv.gz"
    args = ["data", "from-git", str(repo), "--pathspec", "pages/**/*.md", "--domain-depth", "1"]
    assert main([*args, "--out", str(out)]) == 0
    assert "wrote 7 events of 4 pages" in capsys.readouterr().out
    h = read_history(out)
    by = dict(zip(h.pages.index, range(h.n_pages), strict=True))
    assert h.changes_per_page[by["linux/ls"]] == 1
    ls = by["linux/ls"]
    assert h.life_end[h.life_offsets[ls]] - h.life_start[h.life_offsets[ls]] == pytest.approx(3.0)
    assert h.alive_at(h.end - 1e-6)[by["linux/cp"]]
    # the record ends with its last event (the merge), which creates osx/open
    assert h.life_start[h.life_offsets[by["osx/open"]]] == h.end


def test_clear_errors(repo, tmp_path, monkeypatch, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(gitlog.GitError, match="not a git repository"):
        gitlog.history_frame(plain, "*.md")
    with pytest.raises(gitlog.GitError, match="no such directory"):
        gitlog.history_frame(tmp_path / "missing", "*.md")
    with pytest.raises(gitlog.GitError, match="no commit of HEAD touches"):
        gitlog.history_frame(repo, "specs/**/*.txt")
    out = str(tmp_path / "x.csv")
    assert main(["data", "from-git", str(plain), "--pathspec", "*.md", "--out", out]) == 1
    assert "not a git repository" in capsys.readouterr().err
    monkeypatch.setattr(gitlog.shutil, "which", lambda name: None)
    with pytest.raises(gitlog.GitError, match="git is not installed"):
        gitlog.history_frame(repo, "pages/**/*.md")


def test_rev_cannot_inject_a_git_option(repo, tmp_path, capsys, monkeypatch):
    """Issue 54 row 6: ``from-git --rev=--output=x.txt`` made git write its log to x.txt."""
    target = tmp_path / "x.txt"
    with pytest.raises(gitlog.GitError, match="not a revision"):
        gitlog.history_frame(repo, "pages/**/*.md", rev=f"--output={target}")
    out = str(tmp_path / "h.csv")
    argv = ["data", "from-git", str(repo), "--pathspec", "pages/**/*.md", "--out", out]
    assert main([*argv, f"--rev=--output={target}"]) == 1
    err = capsys.readouterr().err
    assert "bayesrate data from-git: error: --rev" in err and "Traceback" not in err
    assert not target.exists() and not (tmp_path / "h.csv").exists()
    # and git itself is told where the options end
    calls = []
    real = gitlog.run_git
    monkeypatch.setattr(gitlog, "run_git", lambda *a: calls.append(a) or real(*a))
    gitlog.history_frame(repo, "pages/**/*.md", rev="HEAD")
    log_call = next(c for c in calls if c[1] == "log")
    assert log_call.index("--end-of-options") == log_call.index("HEAD") - 1


@pytest.mark.slow
def test_disk_full_keeps_an_existing_output(repo, tmp_path):
    """Issue 54 row 4 (from-git): ``--out`` was written in place, so a full disk truncated
    an existing good file. Now the write goes to a temporary file (removed on failure)."""
    import resource
    import sys

    out = tmp_path / "h.csv"
    good = "a good history from an earlier run\n" * 20
    out.write_text(good)

    def small_files() -> None:  # "disk full" for this process: files at most 64 bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    argv = ["data", "from-git", str(repo), "--pathspec", "pages/**/*.md", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bayesrate.cli", *argv],
        capture_output=True, text=True, preexec_fn=small_files, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "bayesrate data from-git: error:" in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "h.csv"]


def test_file_names_that_are_not_utf8_are_named(tmp_path, capsys):
    """Issue 54 row 7: a repository holding a file named with invalid UTF-8 ended in a
    UnicodeEncodeError traceback when the table was written."""
    r = tmp_path / "r"
    (r / "pages").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "pages" / "ok.md").write_text("x\n")
    (r / "pages").joinpath(os.fsdecode(b"bad\xff.md")).write_text("y\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "create", when=0)
    out = tmp_path / "h.csv"
    argv = ["data", "from-git", str(r), "--pathspec", "pages/**/*.md", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "pages/bad\\xff.md" in err and "Traceback" not in err
    assert not out.exists()
    assert main([*argv[:4], "pages/ok.md", *argv[5:]]) == 0  # left out: the rest works


def test_foxtrot_merge_collapsing_the_main_line_is_warned_about(tmp_path, repo, capsys):
    """Issue 54 (new user): a feature branch that merged master into itself and was then
    fast-forwarded became the first-parent line; 65 commits collapsed into one instant
    with no warning. The plain repository (a normal merge) gives none."""
    r = tmp_path / "fox"
    (r / "pages").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "pages" / "a.md").write_text("a\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "create", when=0)
    git(r, "checkout", "-qb", "feature")
    (r / "pages" / "f.md").write_text("f\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "feature work", when=100)
    git(r, "checkout", "-q", "main")
    for i in range(5):  # the main line moves on
        (r / "pages" / "a.md").write_text(f"a{i}\n")
        git(r, "commit", "-qam", f"main {i}", when=200 + 100 * i)
    git(r, "checkout", "-q", "feature")
    git(r, "merge", "-q", "--no-ff", "main", "-m", "Merge branch 'main' into feature", when=900)
    git(r, "checkout", "-q", "main")
    git(r, "merge", "-q", "--ff-only", "feature", when=900)
    warnings = gitlog.first_parent_warnings(r, "pages/**/*.md")
    assert len(warnings) == 1 and "brings 5 commit(s)" in warnings[0]
    assert gitlog.first_parent_warnings(repo, "pages/**/*.md") == []
    out = tmp_path / "h.csv"
    argv = ["data", "from-git", str(r), "--pathspec", "pages/**/*.md", "--out", str(out)]
    assert main(argv) == 0
    assert "warning: merge " in capsys.readouterr().err and out.exists()


def test_end_of_the_record_from_the_revision_or_a_time(repo, tmp_path, capsys):
    """Issue 54 (new user): the history ended at the last matching event, not at the
    revision's time, with no option to set the end. ``--end rev`` / ``--end TIME`` write
    it in the table (column ``record_end``), which every reader of the table uses."""
    (repo / "README.md").write_text("edited later, not a page\n")
    git(repo, "commit", "-qam", "readme", when=20000)
    out = tmp_path / "h.csv"
    argv = ["data", "from-git", str(repo), "--pathspec", "pages/**/*.md", "--out", str(out)]
    assert main(argv) == 0
    assert read_history(out).end == pytest.approx((T0 + 14400) / 3600)  # the last event
    assert main([*argv, "--end", "rev"]) == 0
    history = read_history(out)
    assert history.end == pytest.approx((T0 + 20000) / 3600)  # the revision's time
    by = dict(zip(history.pages.index, range(history.n_pages), strict=True))
    assert history.alive_at(history.end - 1e-6)[by["osx/open"]]
    assert main([*argv, "--end", "2030-01-01"]) == 0
    assert read_history(out).end == pytest.approx(
        pd.Timestamp("2030-01-01", tz="UTC").value / 3.6e12
    )
    capsys.readouterr()
    before = out.read_text()
    assert main([*argv, "--end", "2023-01-01"]) == 1  # before the last event
    assert "events after the given end" in capsys.readouterr().err
    assert out.read_text() == before
