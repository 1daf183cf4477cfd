"""Probe the CLI with bad files, bad options, unusable outputs and faults (issue 54).

Every case runs ``python -m bayesrate.cli ...`` in a fresh process inside a temporary
directory of fixtures and is judged on what a user sees:

- it never ends in a traceback, a crash (signal) or the internal-error status 70;
- an expected failure is one line ``bayesrate CMD: error: ...`` (status 1, or 2 for an
  invalid option, after argparse's usage) naming the problem (``match``);
- a case that should work exits 0;
- nothing is left behind by a failed run (no file or directory the case names as ``out``).

Run: ``.venv/bin/python scripts/probe_cli.py [--verbose] [--repo TREE]``; prints the
failing cases (all with ``--verbose``) and a table of pass counts per category
(docs/reliability.md). ``--repo`` probes another source tree (e.g. ``git archive main``).
Fast cases only: no case fits a model except the concurrent ``calibrate`` (a tiny fit).
The category "concurrency and kill -9" runs scenarios of several processes
(:func:`scenarios`): concurrent writers of one state file or one output, and ``kill -9`` of
a stage in the middle of its work; judged on what is left (no acknowledged write lost, the
output whole and from one run, a rerun that works, no process left running).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    category: str
    argv: list[str]
    rc: int  # expected exit status (0, 1 or 2)
    match: str = ""  # in the error line (rc 1/2) or stdout (rc 0)
    out: list[str] = field(default_factory=list)  # must not exist after a failure
    fsize: int | None = None  # RLIMIT_FSIZE in bytes: a full disk


def fixtures(root: Path) -> None:
    """The files the cases use, in ``root``."""
    now = time.time() / 3600
    (root / "good.csv").write_text("page,time,changed\na,0,\na,24,1\nb,0,\nb,12,0\n")
    (root / "hist.csv").write_text(
        "page,time,event\na,2024-01-01T00:00:00Z,created\na,2024-01-05T00:00:00Z,changed\n"
        "b,2024-01-02T00:00:00Z,created\nc,2024-01-09T00:00:00Z,created\n"
    )
    (root / "seconds.csv").write_text("page,time,changed\na,1700000000,\na,1700086400,1\n")
    (root / "huge.csv").write_text("page,time,changed\na,0,\na,1e300,1\n")
    (root / "naive.csv").write_text(
        "page,time,changed\na,2024-01-01T00:00,\na,2024-01-02T00:00,1\n"
    )
    (root / "empty.csv").write_bytes(b"")
    (root / "header.csv").write_text("page,time,changed\n")
    (root / "binary.csv").write_bytes(bytes(range(256)) * 8)
    (root / "ragged.csv").write_bytes(b'page,time,changed\na,0\n"unclosed,1,2,3\n')
    (root / "truncated.csv.gz").write_bytes(gzip.compress(b"page,time,changed\na,0,\n" * 50)[:40])
    (root / "garbage.parquet").write_bytes(b"PAR1 not parquet")
    (root / "x.json").write_text("{}")
    (root / "keep.csv").write_text("keep me\n")
    (root / "fetches.csv").write_text(f"url,time,changed,host\nhttps://a/1,{now - 2},0,a\n")
    (root / "future.csv").write_text(f"url,time,changed\nhttps://a/1,{now + 48},0\n")
    (root / "fetch-seconds.csv").write_text(f"url,time,changed\nhttps://a/1,{now * 3600},1\n")
    (root / "fetch-bad.csv").write_text("url,time,changed\nhttps://a/1,soon,7\n")
    (root / "grid.csv").write_text("time\n2024-01-02T00:00Z\n2024-01-06T00:00Z\n")
    (root / "notastate.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    os.mkfifo(root / "fifo.csv")
    log = root / "log"
    log.mkdir()
    (log / "a.csv").write_text(
        "page,domain,time,changed\na,d,2024-03-01T00:00:00Z,\na,d,2024-03-02T00:00:00Z,1\n"
    )
    (log / "z-empty.csv").write_bytes(b"")
    headers = root / "headers"
    headers.mkdir()
    (headers / "h.csv").write_text("page,domain,time,changed\n")
    repo = root / "repo"
    (repo / "pages").mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-c", "user.name=p", "-c", "user.email=p@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
    (repo / "pages" / "ok.md").write_text("x\n")
    (repo / "pages").joinpath(os.fsdecode(b"bad\xff.md")).write_text("y\n")
    subprocess.run([*git, "add", "."], cwd=repo, env=env, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=repo, env=env, check=True)
    run(["schedule", "init", "state.db"], root)
    run(["schedule", "observe", "state.db", "fetches.csv"], root)
    biglog = root / "biglog"
    biglog.mkdir()
    rng = __import__("random").Random(54)
    for k in range(4):
        rows = ["page,domain,time,changed"]
        for i in range(3000):
            for d in range(20):
                flag = int(rng.random() < 0.3) if d else ""
                rows.append(f"p{k}-{i},d{i % 7},2024-03-{d + 1:02d}T00:00:00Z,{flag}")
        (biglog / f"part{k}.csv").write_text("\n".join(rows) + "\n")
    visits = ["page,domain,time,changed"]
    for i in range(30):
        for d in range(40):
            visits.append(f"v{i},d{i % 3},{24 * d},{int(rng.random() < 0.1 + i / 60) if d else ''}")
    (root / "visits.csv").write_text("\n".join(visits) + "\n")


def cases() -> list[Case]:
    est = ["estimate", "--method", "naive", "--input"]
    files = [
        Case("bad files", [*est, name], 1, match)
        for name, match in [
            ("nope.csv", "no such file"),
            ("empty.csv", "empty"),
            ("header.csv", "empty"),
            ("binary.csv", "cannot read"),
            ("ragged.csv", "cannot read"),
            ("truncated.csv.gz", "cannot read"),
            ("garbage.parquet", "cannot read"),
            ("x.json", "unsupported"),
            ("log", "directory"),
            ("naive.csv", "timezone-naive"),
            ("seconds.csv", "--time-unit s"),
            ("huge.csv", "not a plausible date"),
        ]
    ]
    files += [
        Case("bad files", ["data", "summary", "--input", "hist.csv"], 0, "change history"),
        Case("bad files", ["data", "summary", "--input", "seconds.csv", "--time-unit", "s"], 0),
        Case(
            "bad files",
            ["scale", "aggregate", "--input", "log", "--out", "so", "--workers", "1"],
            1,
            "z-empty.csv is empty",
            ["so"],
        ),
        Case(
            "bad files",
            ["scale", "aggregate", "--input", "headers", "--out", "sh", "--workers", "1"],
            1,
            "has no rows",
            ["sh"],
        ),
        Case(
            "bad files",
            ["data", "from-git", "repo", "--pathspec", "pages/*.md", "--out", "h.csv"],
            1,
            "not valid UTF-8",
            ["h.csv"],
        ),
        Case(
            "bad files",
            ["data", "crawl", "--input", "hist.csv", "--grid", "hist.csv", "--out", "c.csv"],
            1,
            "increasing",
            ["c.csv"],
        ),
    ]
    options = [
        Case("bad options", argv, rc, match)
        for argv, rc, match in [
            (["estimate", "--input", "good.csv", "--method", "mle", "--level", "2"], 1, "--level"),
            (["estimate", "--input", "good.csv", "--method", "sa", "--crawl-rate", "0"], 2,
             "--crawl-rate"),
            (["estimate", "--input", "good.csv", "--method", "gamma-exposure", "--prior-beta",
              "inf"], 2, "--prior-beta"),
            (["fit", "--input", "good.csv", "--out", "f", "--draws", "0"], 2, "--draws"),
            (["fit", "--input", "good.csv", "--out", "f", "--config", "{bad"], 1, "JSON"),
            (["calibrate", "--input", "good.csv", "--name", "../x"], 1, "--name"),
            (["schedule", "simulate", "--pages", "20", "--days", "2", "--tick", "100000"], 1,
             "two ticks"),
            (["schedule", "simulate", "--pages", "20", "--days", "2", "--plot", "f.xyz"], 1,
             "figure"),
            (["schedule", "simulate", "--pages", "5", "--days", "1", "--plan-quantile", "2"], 1,
             "plan_quantile"),
            (["schedule", "plan", "state.db", "--budget", "1/0"], 2, "--budget"),
            (["schedule", "due", "state.db", "--now", "banana"], 1, "cannot read time"),
            (["schedule", "due", "state.db", "--k", "-1"], 2, "--k"),
            (["schedule", "due", "state.db", "--bogus"], 2, "unrecognized arguments"),
            (["study", "forecast", "--dataset", "tldr-pages", "--fast", "--crawl-every",
              "0.00001"], 1, "visits"),
            (["study", "forecast", "--dataset", "tldr-pages", "--fast", "--methods", "nope"], 1,
             "unknown method"),
            (["study", "forecast", "--dataset", "tldr-pages", "--fast", "--split",
              "2020-01-01T12:00"], 1, "time zone"),
            (["scale", "aggregate", "--input", "log", "--out", "s", "--memory-limit", "banana"],
             2, "--memory-limit"),
            (["scale", "aggregate", "--input", "log", "--out", "s", "--timezone", "Mars/Base"],
             1, "time zone"),
            (["data", "from-git", "repo", "--pathspec", "pages/ok.md", "--rev=--output=o.txt",
              "--out", "h.csv"], 1, "not a revision"),
            (["data", "crawl", "--dataset", "tldr-pages", "--every", "24", "--start",
              "2030-01-01", "--out", "c.csv"], 1, "window is empty"),
        ]
    ]  # fmt: skip
    options += [
        Case("bad options", ["schedule", "plan", "state.db", "--budget", "1/7"], 0),
        Case(
            "bad options",
            ["estimate", "--input", "good.csv", "--method", "sa", "--crawl-rate", "1/7"],
            0,
        ),
        Case(
            "bad options",
            [
                "data",
                "crawl",
                "--input",
                "hist.csv",
                "--every",
                "24",
                "--start",
                "2024-01-01",
                "--out",
                "c.csv",
            ],
            0,
            "wrote",
        ),
    ]
    outputs = [
        Case("outputs", argv, 1, match, out)
        for argv, match, out in [
            (["estimate", "--input", "good.csv", "--method", "mle", "--out", "rates.xlsx"],
             "unsupported output type", ["rates.xlsx"]),
            (["estimate", "--input", "good.csv", "--method", "mle", "--out", "fifo.csv"],
             "not a regular file", []),
            (["estimate", "--input", "good.csv", "--method", "mle", "--out", "keep.csv/x.csv"],
             "not a directory", []),
            (["fit", "--input", "good.csv", "--out", "/proc/x"], "cannot write", []),
            (["calibrate", "--input", "good.csv", "--out-dir", "/proc/x"], "cannot write", []),
            (["schedule", "simulate", "--pages", "20", "--days", "2", "--plot", "/proc/f.png"],
             "--plot", []),
            (["data", "from-git", "repo", "--pathspec", "pages/ok.md", "--out", "h.txt"],
             "unsupported output type", ["h.txt"]),
            (["study", "case-study", "--fast", "--out", "keep.csv"], "not a directory", []),
            (["schedule", "init", "/proc/s.db"], "cannot create", []),
        ]
    ]  # fmt: skip
    outputs.append(
        Case(
            "outputs",
            ["estimate", "--input", "good.csv", "--method", "mle", "--out", "rates.json"],
            0,
        )
    )
    state = [
        Case("scheduler state", argv, rc, match)
        for argv, rc, match in [
            (["schedule", "stats", "nope.db"], 1, "no scheduler state"),
            (["schedule", "stats", "good.csv"], 1, "not a scheduler state file"),
            (["schedule", "stats", "notastate.db"], 1, "not a scheduler state file"),
            (["schedule", "observe", "state.db", "future.csv"], 1, "in the future"),
            (["schedule", "observe", "state.db", "fetch-seconds.csv"], 1, "--time-unit s"),
            (["schedule", "observe", "state.db", "fetch-bad.csv"], 1, "must be 0 or 1"),
            (["schedule", "observe", "state.db", "fetches.csv", "--now", "2099-01-01"], 1,
             "wall clock"),
            (["schedule", "reset-url", "state.db", "https://nowhere/"], 1, "unknown URLs"),
            (["schedule", "init", "state.db"], 1, "already exists"),
            (["schedule", "due", "state.db", "--json"], 0, '"due"'),
        ]
    ]  # fmt: skip
    scale = [
        Case("scale", argv, 1, match, out)
        for argv, match, out in [
            (["scale", "posteriors", "--input", "nope", "--out", "p", "--priors", "nope"],
             "not a committed", ["p"]),
            (["scale", "rates", "--input", "log", "--out", "r", "--budget", "3"],
             "not a committed", ["r"]),
            (["scale", "fit", "--input", "nope", "--out", "f"], "not a committed", ["f"]),
        ]
    ]  # fmt: skip
    faults = [
        Case(
            "faults",
            ["estimate", "--input", "good.csv", "--method", "mle", "--out", "keep.csv"],
            1,
            "File too large",
            [],
            fsize=4,
        ),
        Case(
            "faults",
            ["data", "from-git", "repo", "--pathspec", "pages/ok.md", "--out", "keep.csv"],
            1,
            "File too large",
            [],
            fsize=4,
        ),
        Case(
            "faults",
            ["data", "crawl", "--input", "hist.csv", "--every", "1", "--out", "big.csv"],
            1,
            "File too large",
            ["big.csv"],
            fsize=200,
        ),
    ]
    return files + options + outputs + state + scale + faults


# --------------------------------------------------------------------------- concurrency
CONCURRENT = "concurrency and kill -9"
#: what each scenario saw (where the kill landed, how many writers were acknowledged):
#: printed with --verbose
NOTES: list[str] = []


def start(argv: list[str], cwd: Path, repo: Path) -> subprocess.Popen:
    """``python -m bayesrate.cli ARGV`` in the background, in its own process group."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.Popen(
        [sys.executable, "-m", "bayesrate.cli", *argv], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_error_line(done: subprocess.CompletedProcess, match: str = "") -> str:
    """``""`` if ``done`` failed with one ``bayesrate ...: error:`` line containing ``match``."""
    if done.returncode < 0 or done.returncode == 70 or "Traceback" in done.stderr:
        return f"crash or traceback (status {done.returncode}): {done.stderr[-300:]!r}"
    errors = [x for x in done.stderr.splitlines() if ": error: " in x]
    if done.returncode != 1 or len(errors) != 1 or match not in errors[0]:
        return f"status {done.returncode}, errors {errors[-2:]}"
    return ""


def stats(state: str, cwd: Path, repo: Path) -> dict | str:
    done = run(["schedule", "stats", state, "--json"], cwd, repo=repo)
    if done.returncode:
        return f"stats failed: {done.stderr.strip()[-200:]}"
    return json.loads(done.stdout)


def fetch_table(path: Path, urls: list[str], hours_ago: float) -> None:
    now = time.time() / 3600 - hours_ago
    path.write_text("url,time,changed,host\n" + "".join(f"{u},{now},0,h\n" for u in urls))


def group_left(proc: subprocess.Popen) -> bool:
    """Whether any process of ``proc``'s group still runs (then it is killed)."""
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    return True


def concurrent_observes(root: Path, repo: Path) -> str:
    """Six ``observe`` processes at once on one state: 2,000 new URLs each plus five shared
    ones at distinct times. Each is acknowledged (exit 0) or refused whole ("time goes
    backwards", exit 1); the state holds exactly the acknowledged batches."""
    run(["schedule", "init", "many.db"], root, repo=repo)
    shared = [f"https://s/{j}" for j in range(5)]
    procs = []
    for i in range(6):
        fetch_table(root / f"batch{i}.csv", [f"https://c{i}/{j}" for j in range(2000)] + shared,
                    2.0 - i / 60)  # fmt: skip
    for i in range(6):
        procs.append(start(["schedule", "observe", "many.db", f"batch{i}.csv"], root, repo))
    acked = 0
    for proc in procs:
        done = finish(proc)
        if done.returncode == 0:
            acked += 1
        elif problem := one_error_line(done, "backwards"):
            return problem
    got = stats("many.db", root, repo)
    if isinstance(got, str):
        return got
    NOTES.append(f"concurrent observe: {acked} of 6 acknowledged, the others refused whole")
    urls = 2000 * acked + (5 if acked else 0)
    if (got["urls"], got["fetches"]) != (urls, 2005 * acked) or acked == 0:
        return (
            f"{acked} acknowledged: expected {urls} URLs, got {got['urls']} "
            f"({got['fetches']} fetches)"
        )
    return ""


#: seconds an uninterrupted run took, by scenario (the kills land at shares of it)
TIMED: dict[str, float] = {}


def killed_observe(share: float) -> Callable[[Path, Path], str]:
    def scenario(root: Path, repo: Path) -> str:
        """``kill -9`` of an ``observe`` of 100,000 new URLs at ``share`` of the time an
        uninterrupted one takes: the state is readable and holds the batch whole or not at
        all; the rerun completes it."""
        if not (root / "big.csv").exists():
            fetch_table(root / "big.csv", [f"https://k/{j}" for j in range(100_000)], 1.0)
        if "observe" not in TIMED:
            shutil.copy(root / "state.db", root / "timed.db")
            t0 = time.perf_counter()
            done = run(["schedule", "observe", "timed.db", "big.csv"], root, repo=repo)
            TIMED["observe"] = time.perf_counter() - t0
            if done.returncode:
                return f"an uninterrupted observe failed: {done.stderr.strip()[-200:]}"
        delay = share * TIMED["observe"]
        state = f"kill{share}.db"
        shutil.copy(root / "state.db", root / state)
        before = stats(state, root, repo)
        if isinstance(before, str):
            return before
        proc = start(["schedule", "observe", state, "big.csv"], root, repo)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        finish(proc)
        left = group_left(proc)
        after = stats(state, root, repo)
        if isinstance(after, str):
            return after
        landed = "after the commit" if after["urls"] > before["urls"] else "before the commit"
        NOTES.append(f"observe killed after {delay:.2f} s of {TIMED['observe']:.2f} s: {landed}")
        if after["urls"] not in (before["urls"], before["urls"] + 100_000):
            return f"half a batch: {after['urls'] - before['urls']} of 100,000 URLs"
        done = run(["schedule", "observe", state, "big.csv"], root, repo=repo)
        final = stats(state, root, repo)
        if isinstance(final, str):
            return final
        if after["urls"] == before["urls"] and done.returncode != 0:
            return f"rerun failed: {done.stderr.strip()[-200:]}"
        if final["urls"] != before["urls"] + 100_000:
            return f"after the rerun {final['urls'] - before['urls']} of 100,000 URLs"
        return "processes left running" if left else ""

    return scenario


def killed_scale(share: float) -> Callable[[Path, Path], str]:
    def scenario(root: Path, repo: Path) -> str:
        """``kill -9`` of ``scale aggregate`` at ``share`` of the time an uninterrupted run
        takes: no worker is left running, the output is absent or whole; the rerun commits
        the same output as the run that was never killed."""
        argv = ["scale", "aggregate", "--input", "biglog", "--workers", "1", "--out"]
        if "scale" not in TIMED:
            t0 = time.perf_counter()
            done = run([*argv, "agg-ref"], root, repo=repo)
            TIMED["scale"] = time.perf_counter() - t0
            if done.returncode:
                return f"reference run failed: {done.stderr.strip()[-200:]}"
        delay = share * TIMED["scale"]
        out = f"agg{share}"
        proc = start([*argv, out], root, repo)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        finish(proc)
        time.sleep(2.0)
        if group_left(proc):
            return "worker processes left running after kill -9"
        if (root / out).exists() and not (root / out / "_manifest.json").exists():
            return "a partial output in place"
        staged = list(root.glob(f".{out}.staging-*/_parts/*.json"))
        NOTES.append(
            f"scale aggregate killed after {delay:.1f} s of {TIMED['scale']:.1f} s: "
            + ("output committed" if (root / out).exists() else f"{len(staged)} parts staged")
        )
        done = run([*argv, out], root, repo=repo)
        if done.returncode:
            return f"rerun failed: {done.stderr.strip()[-200:]}"
        return _same_output(root / "agg-ref", root / out)

    return scenario


def concurrent_scales(root: Path, repo: Path) -> str:
    """Two ``scale aggregate`` with the same arguments into one ``--out`` at once (they
    share a staging directory): each exits 0 or fails with one line, and the output is the
    one an uninterrupted single run commits."""
    argv = ["scale", "aggregate", "--input", "biglog", "--workers", "1", "--out"]
    if not (root / "agg-ref").exists():
        done = run([*argv, "agg-ref"], root, repo=repo)
        if done.returncode:
            return f"reference run failed: {done.stderr.strip()[-200:]}"
    procs = [start([*argv, "agg-two"], root, repo) for _ in range(2)]
    results = [finish(proc) for proc in procs]
    for done in results:
        if done.returncode and (problem := one_error_line(done)):
            return problem
    NOTES.append(
        "two scale aggregate at once: exit statuses "
        + ", ".join(str(d.returncode) for d in results)
        + "; "
        + "; ".join(x for d in results for x in d.stderr.splitlines() if ": error: " in x)
    )
    if not any(d.returncode == 0 for d in results):
        return "neither run succeeded"
    left = [p.name for p in root.glob(".agg-two.*")]
    if left:
        return f"left behind: {left}"
    return _same_output(root / "agg-ref", root / "agg-two")


def _same_output(a: Path, b: Path) -> str:
    import pandas as pd

    for part in sorted(a.rglob("*.parquet")):
        other = b / part.relative_to(a)
        if not other.exists():
            return f"{other.relative_to(b.parent)} missing"
        if not pd.read_parquet(part).equals(pd.read_parquet(other)):
            return f"{other.relative_to(b.parent)} differs from an uninterrupted run"
    return ""


def concurrent_outputs(
    name: str, variants: list[list[str]], out: str
) -> Callable[[Path, Path], str]:
    def scenario(root: Path, repo: Path) -> str:
        """Commands writing one ``--out`` at once: each exits 0 and the file left is
        exactly one of their outputs written alone (never a mix, never truncated)."""
        solo = []
        for k, argv in enumerate(variants):
            done = run([*argv, "--out", f"solo{k}-{out}"], root, repo=repo)
            if done.returncode:
                return f"{name} alone failed: {done.stderr.strip()[-200:]}"
            solo.append((root / f"solo{k}-{out}").read_bytes())
        if len(set(solo)) != len(solo):
            return "the variants write the same bytes: nothing to tell apart"
        for _ in range(3):
            procs = [start([*argv, "--out", out], root, repo) for argv in variants]
            for proc in procs:
                done = finish(proc)
                if done.returncode:
                    return f"status {done.returncode}: {done.stderr.strip()[-200:]}"
            if (root / out).read_bytes() not in solo:
                return "the output is none of the outputs written alone"
        return ""

    return scenario


def concurrent_calibrates(root: Path, repo: Path) -> str:
    """Two ``calibrate --out-dir`` into one place at once (seeds a and b): both exit 0 (or
    one fails with one line), and the report and the artifacts left are of one run."""
    argv = ["calibrate", "--input", "visits.csv", "--models", "hierarchical", "--draws", "30"]
    argv += ["--tune", "30", "--chains", "1", "--force", "--out-dir", "cal", "--quiet"]
    procs = [start([*argv, "--seed", seed], root, repo) for seed in ("seed-a", "seed-b")]
    for proc in procs:
        done = finish(proc)
        if done.returncode and (problem := one_error_line(done)):
            return problem
    report = (root / "cal/reports/visits/report.md").read_text()
    priors = json.loads((root / "cal/models/visits/hierarchical/priors.json").read_text())
    command = priors["command"]
    seed = command.split("--seed ")[-1].split()[0]
    if f"--seed {seed}" not in report or ("seed-a" in report) == ("seed-b" in report):
        return f"the report and the artifact are of different runs (artifact: {seed})"
    left = [p.name for p in (root / "cal").rglob(".*")]
    return f"left behind: {left}" if left else ""


def scenarios() -> list[tuple[str, Callable[[Path, Path], str]]]:
    """The concurrency and kill -9 scenarios: (description, function of (root, repo))."""
    crawl = ["data", "crawl", "--dataset", "tldr-pages", "--start", "2025-01-01"]
    git = ["data", "from-git", "repo", "--pathspec", "pages/ok.md"]
    return [
        ("6 concurrent schedule observe on one state", concurrent_observes),
        *[
            (f"kill -9 schedule observe at {share:.0%} of its time, rerun", killed_observe(share))
            for share in (0.5, 0.8, 0.95, 0.99)
        ],
        *[
            (f"kill -9 scale aggregate at {share:.0%} of its time, rerun", killed_scale(share))
            for share in (0.5, 0.8, 0.95)
        ],
        ("2 concurrent scale aggregate, same arguments, one --out", concurrent_scales),
        (
            "2 concurrent data crawl --out one file",
            concurrent_outputs(
                "data crawl", [[*crawl, "--every", "168"], [*crawl, "--every", "169"]], "c.csv"
            ),
        ),
        (
            "2 concurrent data from-git --out one file",
            concurrent_outputs(
                "data from-git", [[*git, "--end", "rev"], [*git, "--end", "2030-01-01"]], "g.csv"
            ),
        ),
        ("2 concurrent calibrate --out-dir one place", concurrent_calibrates),
    ]


def run(
    argv: list[str], cwd: Path, fsize: int | None = None, repo: Path = REPO
) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.run(
        [sys.executable, "-m", "bayesrate.cli", *argv], cwd=cwd, env=env, capture_output=True,
        text=True, preexec_fn=limit, check=False, timeout=600,
    )  # fmt: skip


def judge(case: Case, done: subprocess.CompletedProcess, cwd: Path) -> str:
    """``""`` when the case is handled right, else what is wrong."""
    err = done.stderr
    if done.returncode < 0 or done.returncode == 70 or "Traceback" in err:
        return f"crash or traceback (status {done.returncode})"
    if done.returncode != case.rc:
        return f"status {done.returncode}, expected {case.rc}"
    if case.rc == 0:
        return "" if case.match in done.stdout + err else f"{case.match!r} not in the output"
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("[bayesrate]", " "))]
    lines = [x for x in lines if not x.startswith(("usage:", "INFO", "20"))]
    errors = [x for x in lines if ": error: " in x]
    if len(errors) != 1 or not errors[0].startswith("bayesrate "):
        return f"not one error line: {lines[-3:]}"
    if case.match not in errors[0]:
        return f"{case.match!r} not in {errors[0]!r}"
    left = [o for o in case.out if (cwd / o).exists()]
    if left:
        return f"left behind: {left}"
    if (cwd / "keep.csv").read_text() != "keep me\n":
        return "keep.csv damaged"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="source tree to probe (default: this one)"
    )
    parser.add_argument(
        "--no-concurrency", action="store_true", help="skip the concurrency and kill -9 scenarios"
    )
    parser.add_argument("--only-concurrency", action="store_true", help="run only those")
    parser.add_argument("--scenario", help="run only the scenarios whose name contains this")
    args = parser.parse_args()
    passed, total = Counter(), Counter()
    with tempfile.TemporaryDirectory(prefix="bayesrate-probe-") as tmp:
        root = Path(tmp)
        fixtures(root)
        for case in [] if args.only_concurrency else cases():
            done = run(case.argv, root, case.fsize, args.repo)
            verdict = judge(case, done, root)
            total[case.category] += 1
            passed[case.category] += not verdict
            if verdict or args.verbose:
                print(f"{'FAIL' if verdict else 'ok  '} {' '.join(case.argv)}: {verdict}")
        if not args.no_concurrency:
            for name, scenario in scenarios():
                if args.scenario and args.scenario not in name:
                    continue
                verdict = scenario(root, args.repo)
                total[CONCURRENT] += 1
                passed[CONCURRENT] += not verdict
                if verdict or args.verbose:
                    print(f"{'FAIL' if verdict else 'ok  '} {name}: {verdict}")
            if args.verbose:
                print("\n".join(f"  note: {note}" for note in NOTES))
    print("\n| category | cases | right |\n| --- | --- | --- |")
    for category in total:
        print(f"| {category} | {total[category]} | {passed[category]} |")
    print(f"| all | {sum(total.values())} | {sum(passed.values())} |")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
