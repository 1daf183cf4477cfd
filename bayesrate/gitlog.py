"""A git repository of documents → a change history (``bayesrate data from-git``).

Any repository whose files are published as pages (docs sites, policies, specs, the tldr
pages) holds an exact change history in its first-parent log: each commit of the main
line is the moment its changes went live (a merged pull request lands in one such
commit). :func:`history_frame` runs::

    git log --first-parent -m -M --name-status -z --format=<commit time> REV -- :(glob)GLOB

as a subprocess (no git library) and turns every touched file into events, oldest first:
``A`` → ``created``, ``M``/``T`` → ``changed``, ``D`` → ``deleted``, a rename ``R`` →
``deleted`` of the old path and ``created`` of the new one (a renamed file is published at a
new address), a copy ``C`` → ``created``. Times are committer times (UTC, seconds).

Page ids are paths relative to the glob's literal directory prefix (``pages/`` for
``pages/**/*.md``), without the extension when the glob fixes one (``*.md``);
``domain_depth = K`` makes the first ``K`` directories of the id the domain
(``common/tar`` → ``common`` for ``K = 1``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bayesrate.constants import DOMAIN, PAGE, TIME
from bayesrate.errors import ObservationError
from bayesrate.history import CHANGED, CREATED, DELETED, EVENT
from bayesrate.observations import DEFAULT_DOMAIN

_HEADER = "\x01commit"
_STATUS = re.compile(r"^([AMDTUXB]|[RC]\d*)$")
_GLOB_CHARS = "*?["


class GitError(ObservationError):
    """git is missing, the path is not a repository, or the log cannot be read."""


@dataclass(frozen=True)
class PageNaming:
    """How repository paths become page ids and domains (see the module docstring)."""

    prefix: str
    extension: str | None
    domain_depth: int

    @classmethod
    def from_glob(cls, glob: str, domain_depth: int = 0) -> PageNaming:
        if domain_depth < 0:
            raise GitError("--domain-depth must be >= 0", field="domain_depth")
        first_glob = min((glob.find(c) for c in _GLOB_CHARS if c in glob), default=len(glob))
        literal = glob[:first_glob]
        prefix = literal[: literal.rfind("/") + 1]
        match = re.search(r"\*(\.[A-Za-z0-9_-]+)$", glob)
        return cls(prefix, match.group(1) if match else None, domain_depth)

    def page(self, path: str) -> str:
        rel = path[len(self.prefix) :] if path.startswith(self.prefix) else path
        if self.extension and rel.endswith(self.extension):
            rel = rel[: -len(self.extension)]
        return rel

    def domain(self, page: str) -> str:
        parts = page.split("/")[:-1][: self.domain_depth]
        return "/".join(parts) if parts else DEFAULT_DOMAIN


def run_git(repo: str | Path, *args: str) -> str:
    """Run ``git -C repo args`` and return its stdout; clear errors for the usual failures."""
    git = shutil.which("git")
    if git is None:
        raise GitError("git is not installed or not on PATH; install git to read a repository")
    repo = Path(repo)
    if not repo.is_dir():
        raise GitError(f"no such directory: {repo}", field="repo")
    done = subprocess.run(
        [git, "-C", str(repo), *args], capture_output=True, text=True, encoding="utf-8",
        errors="surrogateescape", check=False,
    )  # fmt: skip
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        if "not a git repository" in done.stderr:
            raise GitError(f"{repo} is not a git repository ({message})", field="repo")
        raise GitError(f"git {' '.join(args[:2])} failed in {repo}: {message}", field="repo")
    return done.stdout


def _is_utf8(text: str) -> bool:
    """Whether ``text`` (decoded with ``surrogateescape``) was valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def history_frame(
    repo: str | Path, glob: str, *, domain_depth: int = 0, rev: str = "HEAD"
) -> pd.DataFrame:
    """Events (``page, domain, time, event``) of the files matching ``glob``, oldest first.

    Parameters
    ----------
    repo
        Path of a git working tree or bare repository.
    glob
        Files to follow, a git glob relative to the repository root (``**`` crosses
        directories), e.g. ``"pages/**/*.md"``.
    domain_depth
        Number of leading directories of the page id that form its domain (0: none).
    rev
        The commit whose first-parent history is read (default ``HEAD``).

    Raises
    ------
    GitError
        git missing, not a repository, an unknown revision or one that starts with ``-``
        (git would read it as an option), no file matching ``glob``, or file names that
        are not valid UTF-8 (named).
    """
    naming = PageNaming.from_glob(glob, domain_depth)
    check_rev(rev)
    run_git(repo, "rev-parse", "--git-dir")
    out = run_git(
        repo, "log", "--first-parent", "-m", "-M", "--name-status", "-z",
        f"--format=%x00{_HEADER} %ct %H", "--end-of-options", rev, "--", f":(glob){glob}",
    )  # fmt: skip
    rows = _parse_log(out)
    if not rows:
        raise GitError(f"no commit of {rev} touches a file matching {glob!r}", field="pathspec")
    undecodable = sorted({path for _, _, path in rows if not _is_utf8(path)})
    if undecodable:
        shown = ", ".join(repr(p.encode("utf-8", "surrogateescape"))[2:-1] for p in undecodable)
        raise GitError(
            f"{len(undecodable)} file name(s) are not valid UTF-8, so they cannot be page ids: "
            f"{shown}; narrow --pathspec to leave them out",
            field="pathspec",
        )
    rows.reverse()  # git lists newest first; within a commit keep git's order
    frame = pd.DataFrame(rows, columns=["seconds", "status", PAGE])
    frame[PAGE] = frame[PAGE].map(naming.page)
    out_frame = pd.DataFrame(
        {
            PAGE: frame[PAGE],
            DOMAIN: frame[PAGE].map(naming.domain),
            TIME: pd.to_datetime(frame["seconds"], unit="s", utc=True).dt.strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            EVENT: frame["status"],
        }
    )
    return out_frame if domain_depth else out_frame.drop(columns=DOMAIN)


def _parse_log(out: str) -> list[tuple[int, str, str]]:
    """(commit seconds, event, path) per touched file, in git's (newest-first) order.

    Within one commit the events are returned in reverse so that reversing the whole list
    restores git's order inside each commit (and a rename's deletion precedes its creation).
    """
    rows: list[tuple[int, str, str]] = []
    commit: list[tuple[int, str, str]] = []
    seconds = 0
    tokens = iter(out.split("\0"))
    for raw in tokens:
        token = raw.lstrip("\n")
        if token.startswith(_HEADER):
            rows.extend(reversed(commit))
            commit = []
            seconds = int(token.split()[1])
            continue
        if not token:
            continue
        if not _STATUS.match(token):
            raise GitError(f"unexpected token in git log output: {token[:60]!r}")
        kind = token[0]
        if kind in "RC":
            old, new = next(tokens), next(tokens)
            if kind == "R":
                commit.append((seconds, DELETED, old))
            commit.append((seconds, CREATED, new))
        else:
            path = next(tokens)
            event = {"A": CREATED, "D": DELETED}.get(kind, CHANGED)
            commit.append((seconds, event, path))
    rows.extend(reversed(commit))
    return rows


#: output formats of an event table (what :func:`bayesrate.io.history.read_history` reads)
HISTORY_FORMATS = ("csv", "parquet")


#: a first-parent merge is reported when its second parent brings at least this many
#: commits touching the glob (and more than the first-parent line made meanwhile)
COLLAPSE_WARN_COMMITS = 3


def check_rev(rev: str) -> str:
    """Raise unless ``rev`` can be a revision: git would obey one starting with ``-`` as an
    option (``--output=FILE`` writes a file)."""
    if not rev or rev.startswith("-"):
        raise GitError(f"--rev {rev!r} is not a revision (it must not start with '-')", field="rev")
    return rev


def revision_time(repo: str | Path, rev: str = "HEAD") -> pd.Timestamp:
    """The committer time of ``rev`` (UTC): when the repository was last seen at it."""
    seconds = run_git(repo, "log", "-1", "--format=%ct", "--end-of-options", check_rev(rev))
    return pd.Timestamp(int(seconds.strip()), unit="s", tz="UTC")


def first_parent_warnings(repo: str | Path, glob: str, *, rev: str = "HEAD") -> list[str]:
    """Merges on the first-parent line that collapse many commits into one instant.

    A merge's diff against its first parent lands at the merge's time. That is the intent
    for a merged feature branch, but a branch that merged the main line into itself and was
    then fast-forwarded ("foxtrot" merge) puts the *branch* on the first-parent line, and
    the main line's commits collapse into the merge (issue 54: 65 commits of two months in
    one instant). Reported: first-parent merges whose second parent is newer than their
    first and brings at least :data:`COLLAPSE_WARN_COMMITS` commits touching ``glob``, more
    than the first-parent side made since the two split. One sentence per merge.
    """
    check_rev(rev)
    spec = f":(glob){glob}"
    merges = run_git(
        repo, "log", "--first-parent", "--merges", "--format=%H %ct %P", "--end-of-options", rev
    )
    out = []
    for line in merges.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        merge, when, first, second = fields[0], int(fields[1]), fields[2], fields[3]
        times = run_git(repo, "show", "-s", "--format=%ct", first, second).split()
        if len(times) < 2 or int(times[1]) <= int(times[0]):
            continue
        side = int(run_git(repo, "rev-list", "--count", f"{first}..{second}", "--", spec))
        own = int(run_git(repo, "rev-list", "--count", f"{second}..{first}", "--", spec))
        if side >= COLLAPSE_WARN_COMMITS and side > own:
            stamp = pd.Timestamp(when, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append(
                f"merge {merge[:12]} ({stamp}) brings {side} commit(s) touching {glob!r} from "
                f"its second parent, newer than its first parent (whose side made {own}): "
                "they all count at the merge's instant. If the main line was merged into a "
                "branch that was then fast-forwarded, the first-parent line is the branch's; "
                "check the history, or pass --rev a commit before that merge"
            )
    return out


def write_history_table(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write an event table as ``.csv``, ``.csv.gz`` or ``.parquet`` (by the file name),
    atomically: a failed write leaves an existing file untouched."""
    from bayesrate.io.table import output_format, write_table

    output_format(path, HISTORY_FORMATS)
    return write_table(frame, path)
