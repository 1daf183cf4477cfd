"""``bayesrate schedule`` on a PostgreSQL state: every command takes a database URL, and
``lease``/``report``/``crawl-delay`` run a fleet's frontier; bad input is one line."""

from __future__ import annotations

import json

import pytest

from bayesrate.cli import main
from tests.scheduler.conftest import pg_location, postgres_server  # noqa: F401 (fixtures)

T0 = 480_000.0


def test_a_fleet_round_trip_through_the_cli(pg_location, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)  # the default priors (one change a day), not ./models
    db = pg_location
    assert main(["schedule", "init", db, "--politeness-limit", "2"]) == 0
    obs = tmp_path / "o.csv"
    obs.write_text(f"url,time,changed,host\na,{T0},0,h1\nb,{T0},0,h1\nc,{T0},0,h2\n")
    assert main(["schedule", "observe", db, str(obs), "--now", str(T0 + 1)]) == 0
    capsys.readouterr()
    assert main(["schedule", "lease", db, "--worker", "w", "-n", "5", "--now",
                 str(T0 + 48), "--json"]) == 0  # fmt: skip
    leases = json.loads(capsys.readouterr().out)["leases"]
    # h1 has a crawl delay of half an hour (limit 2 per hour): one of its URLs per lease
    assert sorted(x["host"] for x in leases) == ["h1", "h2"]
    rep = tmp_path / "r.csv"
    rep.write_text("fetch_id,time,changed\n" + "".join(
        f"{x['fetch_id']},{T0 + 48},1\n" for x in leases))  # fmt: skip
    for _ in range(2):  # the second report is a retry: counted once
        assert main(["schedule", "report", db, str(rep), "--now", str(T0 + 48)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "reported 2 fetches: 2 applied, 0 already reported, 0 stale (older than their URL's "
        "last fetch)",
        "reported 2 fetches: 0 applied, 2 already reported, 0 stale (older than their URL's "
        "last fetch)",
    ]
    assert main(["schedule", "stats", db, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["fetches"] == 5 and stats["urls"] == 3
    assert main(["schedule", "plan", db, "--budget", "2"]) == 0
    assert main(["schedule", "due", db, "--now", str(T0 + 49), "--k", "2"]) == 0
    assert main(["schedule", "crawl-delay", db, "h1", "0"]) == 0
    assert main(["schedule", "reset-url", db, "a"]) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["lease", "{file}", "--worker", "w"], "is not a database: leases need a PostgreSQL"),
        (["report", "{db}", "{bad}"], "lacks columns ['fetch_id']"),
        (["report", "{db}", "{ids}"], "unknown fetch ids"),
        (["crawl-delay", "{db}", "nowhere", "1"], "unknown host 'nowhere'"),
        (["crawl-delay", "{db}", "h", "-1"], "crawl delay must be a non-negative number"),
        (["init", "{db}"], "already holds a scheduler state"),
    ],
)
def test_fleet_commands_fail_in_one_line(pg_location, tmp_path, capsys, args, message):  # noqa: F811
    assert main(["schedule", "init", pg_location]) == 0
    state = tmp_path / "s.db"
    assert main(["schedule", "init", str(state)]) == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(f"url,time,changed\na,{T0},0\n")
    ids = tmp_path / "ids.csv"
    ids.write_text(f"fetch_id,time,changed\n7,{T0},0\n")
    obs = tmp_path / "o.csv"
    obs.write_text(f"url,time,changed,host\na,{T0},0,h\n")
    assert main(["schedule", "observe", pg_location, str(obs)]) == 0
    names = {"file": str(state), "db": pg_location, "bad": str(bad), "ids": str(ids)}
    capsys.readouterr()
    assert main(["schedule", *(a.format(**names) for a in args)]) != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bayesrate schedule")
    assert message in lines[0]
