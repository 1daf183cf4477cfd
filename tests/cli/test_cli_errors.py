"""One error boundary (issue 11, item 5): every expected failure of the CLI is one line
``bayesrate CMD: error: ...`` and a non-zero exit, never a traceback, and nothing is left
half-written. Each case here raised a traceback, printed NaN/Infinity, silently used a
default, or wrote output before failing, before the fix."""

from __future__ import annotations

import gzip
import json
import sqlite3
import time

import numpy as np
import pandas as pd
import pytest

from bayesrate.cli import main

T0 = 480_000.0


@pytest.fixture
def good_csv(tmp_path):
    path = tmp_path / "good.csv"
    pd.DataFrame(
        {
            "page": ["a", "a", "a", "b", "b", "b"],
            "domain": ["d", "d", "d", "e", "e", "e"],
            "time": [0.0, 24.0, 48.0, 0.0, 12.0, 36.0],
            "changed": [None, 1, 0, None, 0, 1],
        }
    ).to_csv(path, index=False)
    return path


def _bad_inputs(tmp_path):
    """The unreadable inputs of the issue, by name."""
    good = "page,time,changed\na,0,\na,24,1\n"
    files = {
        "empty.csv": b"",
        "truncated.csv.gz": gzip.compress(good.encode() * 200)[:60],
        "not-gzip.csv.gz": good.encode(),
        "binary.csv": bytes(range(256)) * 20,
        "ragged.csv": b'page,time,changed\na,0\n"unclosed,1,2,3\n',
        "garbage.parquet": b"PAR1 this is not parquet at all",
        "empty.parquet": b"",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    (tmp_path / "a-directory.csv").mkdir()
    return [*files, "a-directory.csv"]


def run(argv, capsys):
    """Run the CLI; return (exit code, stdout, stderr) and check that no traceback leaked."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return rc, out, err


def assert_error(argv, capsys, match, rc=1):
    """The command fails with status ``rc`` and one message line naming ``match``."""
    code, _, err = run(argv, capsys)
    assert code == rc, err
    lines = [line for line in err.splitlines() if not line.startswith("[bayesrate]")]
    if rc == 1:  # argparse (status 2) prints its usage first
        assert len(lines) == 1, err
    assert lines[-1].startswith(f"bayesrate {argv[0]}") and ": error: " in lines[-1], err
    assert match in lines[-1], err
    return lines[-1]


@pytest.mark.parametrize("command", ["data", "estimate", "fit"])
def test_unreadable_inputs_are_one_line_errors(tmp_path, capsys, command):
    argv = {
        "data": ["data", "summary"],
        "estimate": ["estimate", "--method", "naive"],
        "fit": ["fit", "--out", tmp_path / "fit-out"],
    }[command]
    for name in _bad_inputs(tmp_path):
        assert_error([*argv, "--input", tmp_path / name], capsys, name)
    assert not (tmp_path / "fit-out").exists()


@pytest.mark.parametrize("command", ["data", "estimate", "fit", "calibrate"])
def test_epoch_seconds_read_as_hours_are_refused_with_a_unit_hint(tmp_path, capsys, command):
    """Issue 54 row 5: epoch seconds with the default unit (hours) gave rates 3,600x too low,
    exit 0; 1e300 h was accepted. Now one line naming the rows and ``--time-unit s``."""
    seconds = tmp_path / "seconds.csv"
    seconds.write_text("page,time,changed\na,1700000000,\na,1700086400,1\na,1700172800,0\n")
    huge = tmp_path / "huge.csv"
    huge.write_text("page,time,changed\na,0,\na,1e300,1\n")
    argv = {
        "data": ["data", "summary"],
        "estimate": ["estimate", "--method", "naive"],
        "fit": ["fit", "--out", tmp_path / "fit-out"],
        "calibrate": [
            "calibrate",
            "--name",
            "x",
            "--models-dir",
            tmp_path / "models",
            "--out",
            tmp_path / "report",
        ],
    }[command]
    line = assert_error([*argv, "--input", seconds], capsys, "--time-unit s")
    assert "not a plausible date" in line and "rows: 0, 1, 2" in line
    assert "not a plausible date" in assert_error([*argv, "--input", huge], capsys, "rows: 1")
    assert not any((tmp_path / d).exists() for d in ("fit-out", "models", "report"))


def test_missing_and_unsupported_inputs(tmp_path, capsys):
    assert_error(["data", "summary", "--input", tmp_path / "nope.csv"], capsys, "no such file")
    (tmp_path / "x.json").write_text("{}")
    assert_error(["data", "summary", "--input", tmp_path / "x.json"], capsys, "unsupported")
    (tmp_path / "header.csv").write_text("page,time,changed\n")
    assert_error(["data", "summary", "--input", tmp_path / "header.csv"], capsys, "empty")


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"no_such_key": 1}', "unknown model_config key"),
        ('{"log_sd": -1}', "'log_sd' must be a finite number > 0"),
        ('{"log_sd": Infinity}', "'log_sd' must be a finite number > 0"),
        ('{"log_sd": true}', "'log_sd' must be a finite number > 0"),
        ('{"log_mean_per_day": "high"}', "'log_mean_per_day' must be a finite number"),
        ('{"parameterisation": "sideways"}', "parameterisation"),
    ],
)
def test_fit_config_errors_before_any_work(good_csv, tmp_path, capsys, config, match):
    out = tmp_path / "out"
    argv = ["fit", "--input", good_csv, "--out", out, "--model", "hierarchical"]
    assert_error([*argv, "--config", config], capsys, match)
    assert not out.exists()


@pytest.mark.parametrize(
    "option",
    [
        ["--draws", "-5"],
        ["--draws", "0"],
        ["--tune", "-1"],
        ["--chains", "0"],
        ["--draws", "many"],
    ],
)
def test_fit_sampler_options_are_validated(good_csv, tmp_path, capsys, option):
    out = tmp_path / "out"
    assert_error(["fit", "--input", good_csv, "--out", out, *option], capsys, option[0], rc=2)
    assert not out.exists()


def test_outputs_onto_files_or_unwritable_places_fail_before_any_work(good_csv, tmp_path, capsys):
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me\n")
    start = time.perf_counter()
    assert_error(["fit", "--input", good_csv, "--out", existing], capsys, "not a directory")
    assert_error(["fit", "--input", good_csv, "--out", existing / "sub"], capsys, "is a file")
    assert_error(["fit", "--input", good_csv, "--out", "/proc/bayesrate-out"], capsys,
                 "cannot write")  # fmt: skip
    assert_error(["estimate", "--input", good_csv, "--method", "naive", "--out", tmp_path],
                 capsys, "is a directory")  # fmt: skip
    assert_error(["estimate", "--input", good_csv, "--method", "naive", "--out",
                  existing / "x.csv"], capsys, "not a directory")  # fmt: skip
    assert_error(["calibrate", "--input", good_csv, "--out", existing,
                  "--models-dir", tmp_path / "m"], capsys, "not a directory")  # fmt: skip
    assert_error(["calibrate", "--input", good_csv, "--models-dir", existing,
                  "--out", tmp_path / "r"], capsys, "--models-dir")  # fmt: skip
    assert_error(["study", "case-study", "--fast", "--out", existing], capsys,
                 "not a directory")  # fmt: skip
    assert time.perf_counter() - start < 60  # refused up front, not after a fit
    assert existing.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.txt", "good.csv"]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--prior-beta", "inf"),
        ("--prior-alpha", "inf"),
        ("--prior-alpha", "nan"),
        ("--prior-beta", "0"),
        ("--crawl-rate", "0"),
        ("--crawl-rate", "-2"),
    ],
)
def test_estimate_rejects_non_finite_priors_and_zero_crawl_rate(good_csv, capsys, option, value):
    method = "sa" if option == "--crawl-rate" else "gamma-exposure"
    argv = ["estimate", "--input", good_csv, "--method", method, option, value]
    assert_error(argv, capsys, f"argument {option}", rc=2)


def test_estimate_output_is_written_atomically(good_csv, tmp_path, capsys):
    out = tmp_path / "est.csv"
    rc, _, _ = run(["estimate", "--input", good_csv, "--method", "mle", "--out", out], capsys)
    assert rc == 0
    assert pd.read_csv(out, dtype={"page": str})["page"].tolist() == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["est.csv", "good.csv"]


def test_estimate_out_writes_the_format_its_name_says(good_csv, tmp_path, capsys):
    """Issue 54 row 11: ``estimate --out rates.json`` wrote CSV text into the .json file."""
    argv = ["estimate", "--input", good_csv, "--method", "mle", "--out"]
    rc, _, _ = run([*argv, tmp_path / "rates.json"], capsys)
    assert rc == 0
    records = json.loads((tmp_path / "rates.json").read_text())
    assert [r["page"] for r in records] == ["a", "b"] and "rate_per_day" in records[0]
    rc, _, _ = run([*argv, tmp_path / "rates.tsv"], capsys)
    assert rc == 0 and "\t" in (tmp_path / "rates.tsv").read_text().splitlines()[0]
    (tmp_path / "rates.xlsx").write_text("keep me")
    assert_error([*argv, tmp_path / "rates.xlsx"], capsys, "unsupported output type")
    assert (tmp_path / "rates.xlsx").read_text() == "keep me"


# ---------------------------------------------------------------------- scheduler
@pytest.fixture
def state(tmp_path, capsys):
    db = tmp_path / "s.db"
    fetches = tmp_path / "f.csv"
    fetches.write_text(
        f"url,time,changed,host\nhttps://a/1,{T0},0,a\nhttps://a/2,{T0},0,a\n"
        f"https://a/1,{T0 + 3},1,a\n"
    )
    assert run(["schedule", "init", db], capsys)[0] == 0
    assert run(["schedule", "observe", db, fetches], capsys)[0] == 0
    return db


def test_scheduler_state_file_errors(tmp_path, capsys, state):
    for name, content in (("garbage.db", b"garbage" * 500), ("empty.db", b""),
                          ("half.db", state.read_bytes()[:3000])):  # fmt: skip
        (tmp_path / name).write_bytes(content)
        for op in (["stats"], ["due", "--now", str(T0 + 10)], ["plan", "--budget", "5"]):
            assert_error(["schedule", op[0], tmp_path / name, *op[1:]], capsys, name)
    assert (tmp_path / "empty.db").stat().st_size == 0  # never written
    assert_error(["schedule", "stats", tmp_path / "missing.db"], capsys, "schedule init")
    assert_error(["schedule", "init", tmp_path / "no" / "dir" / "s.db"], capsys,
                 "does not exist")  # fmt: skip
    assert not (tmp_path / "no").exists()
    assert_error(["schedule", "init", state], capsys, "already exists")


def test_scheduler_damaged_meta_and_rows(tmp_path, capsys, state):
    con = sqlite3.connect(state)
    con.execute("UPDATE urls SET alpha = -1 WHERE url = 'https://a/2'")
    con.commit()
    assert_error(["schedule", "stats", state], capsys, "impossible 'alpha'")
    con.execute("UPDATE urls SET alpha = 1")
    con.execute("UPDATE urls SET host = 3")
    con.commit()
    assert_error(["schedule", "due", state, "--now", str(T0 + 10)], capsys, "impossible 'host'")
    con.execute("UPDATE meta SET value = 'not json' WHERE key = 'priors'")
    con.commit()
    con.close()
    assert_error(["schedule", "stats", state], capsys, "meta 'priors'")


def test_scheduler_stats_on_a_foreign_sqlite_file_changes_nothing(tmp_path, capsys):
    other = tmp_path / "app.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    before = other.read_bytes()
    assert_error(["schedule", "stats", other], capsys, "not a scheduler state")
    assert other.read_bytes() == before
    con = sqlite3.connect(other)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_scheduler_observe_errors(tmp_path, capsys, state):
    assert_error(["schedule", "observe", state, tmp_path / "missing.csv"], capsys, "no such file")
    (tmp_path / "empty.csv").write_bytes(b"")
    assert_error(["schedule", "observe", state, tmp_path / "empty.csv"], capsys, "empty")
    (tmp_path / "header.csv").write_text("url,time,changed\n")
    assert_error(["schedule", "observe", state, tmp_path / "header.csv"], capsys, "no fetches")
    (tmp_path / "flags.csv").write_text(f"url,time,changed\nhttps://a/1,{T0 + 4},yes\n")
    assert_error(["schedule", "observe", state, tmp_path / "flags.csv"], capsys, "0 or 1")
    (tmp_path / "seconds.csv").write_text("url,time,changed\nhttps://a/1,1736000000,0\n")
    err = assert_error(["schedule", "observe", state, tmp_path / "seconds.csv"], capsys,
                       "not a plausible date")  # fmt: skip
    assert "--time-unit s" in err
    future = time.time() / 3600 + 48
    (tmp_path / "future.csv").write_text(f"url,time,changed\nhttps://a/1,{future},0\n")
    assert_error(["schedule", "observe", state, tmp_path / "future.csv"], capsys, "future")
    # one rule for timestamps everywhere: without an offset they are refused, by row
    (tmp_path / "naive.csv").write_text(
        "url,time,changed\nhttps://a/1,2025-01-02T00:00Z,0\nhttps://a/1,2025-01-03T00:00,1\n"
    )
    err = assert_error(["schedule", "observe", state, tmp_path / "naive.csv"], capsys, "naive")
    assert "rows: 1" in err
    # nothing of the above was applied
    rc, out, _ = run(["schedule", "stats", state, "--json"], capsys)
    assert rc == 0 and json.loads(out)["fetches"] == 3


@pytest.mark.parametrize(
    ("now", "match"),
    [
        ("inf", "finite"),
        ("nan", "finite"),
        ("1700000010", "not a plausible date"),
        ("-1e300", "not a plausible date"),
        ("yesterday-ish", "cannot read time"),
        ("9999-01-01T00:00:00Z", "not a plausible date"),
        ("2025-01-01T00:00", "no offset"),
    ],
)
def test_due_now_is_validated(state, capsys, now, match):
    assert_error(["schedule", "due", state, f"--now={now}"], capsys, match)


def test_json_outputs_are_strict(tmp_path, capsys, state):
    def strict(text):
        def refuse(name):
            raise AssertionError(f"non-standard JSON constant {name}")

        return json.loads(text, parse_constant=refuse)

    rc, out, _ = run(["schedule", "due", state, "--now", str(T0 + 10), "--json"], capsys)
    assert rc == 0
    due = strict(out)["due"]
    assert {d["url"] for d in due} == {"https://a/1", "https://a/2"}
    assert [d["urgent"] for d in due if d["url"] == "https://a/2"] == [False]
    db = tmp_path / "empty-state.db"
    assert run(["schedule", "init", db], capsys)[0] == 0
    rc, out, _ = run(["schedule", "stats", db, "--json"], capsys)
    assert rc == 0 and strict(out)["rate_per_day_q10_q50_q90"] == [None, None, None]
    never = tmp_path / "never.csv"
    never.write_text(f"url,time,changed,host\nhttps://b/1,{T0},0,b\n")
    assert run(["schedule", "observe", db, never], capsys)[0] == 0
    rc, out, _ = run(["schedule", "due", db, "--now", str(T0 + 24 * 40), "--json"], capsys)
    assert strict(out)["due"][0]["urgent"] is True  # past max_interval: was "Infinity"


@pytest.mark.parametrize(
    "option",
    [["--days=nan"], ["--days=0"], ["--pages=0"], ["--budget=inf"], ["--tick=-1"]],
)
def test_schedule_simulate_options_are_validated(capsys, option):
    assert_error(["schedule", "simulate", *option], capsys, option[0].split("=")[0], rc=2)


@pytest.mark.parametrize(
    ("argv", "match", "rc"),
    [
        (["schedule", "simulate", "--pages", "20", "--days", "2", "--tick", "100000"],
         "fewer than two ticks", 1),
        (["schedule", "simulate", "--pages", "20", "--days", "2", "--tick", "48"],
         "fewer than two ticks", 1),
        (["schedule", "simulate", "--pages", "20", "--days", "2", "--plot", "{tmp}/f.xyz"],
         "cannot write a figure as 'f.xyz'", 1),
        (["schedule", "simulate", "--pages", "20", "--days", "2", "--plot", "/proc/f.png"],
         "--plot /proc/f.png", 1),
        (["study", "forecast", "--dataset", "tldr-pages", "--fast", "--crawl-every", "0.00001"],
         "would make 2.72e+13 visits", 1),
        (["scale", "aggregate", "--input", "{tmp}", "--out", "{tmp}/o", "--memory-limit",
          "banana"], "argument --memory-limit", 2),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_errors_before_any_work(tmp_path, capsys, argv, match, rc):
    """Issue 54 rows 7 and 8: these ended in tracebacks (ZeroDivisionError, matplotlib's
    ValueError after the whole simulation, a 198 TiB allocation, Dask's ValueError)."""
    start = time.perf_counter()
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert_error(argv, capsys, match, rc=rc)
    assert time.perf_counter() - start < 30  # refused up front
    assert list(tmp_path.iterdir()) == []


def test_reset_url_command(tmp_path, capsys, state):
    con = sqlite3.connect(state)
    con.execute("UPDATE urls SET last_fetch = 1700000000 WHERE url = 'https://a/1'")
    con.commit()
    con.close()
    assert_error(["schedule", "due", state, "--now", str(T0 + 10)], capsys, "reset-url")
    rc, out, _ = run(["schedule", "reset-url", state, "https://a/1"], capsys)
    assert rc == 0 and "reset 1 URLs" in out
    rc, out, _ = run(["schedule", "due", state, "--now", str(T0 + 10), "--json"], capsys)
    first = json.loads(out)["due"][0]
    assert rc == 0 and (first["url"], first["urgent"]) == ("https://a/1", True)
    assert_error(["schedule", "reset-url", state, "https://nowhere/"], capsys, "unknown URLs")


def test_unexpected_errors_say_where_to_report(monkeypatch, capsys):
    from bayesrate.commands import data

    def broken(args):
        raise RuntimeError("an unforeseen failure")

    monkeypatch.setattr(data, "_list", broken)
    rc = main(["data", "list"])
    err = capsys.readouterr().err
    assert rc == 70
    assert "bayesrate data list: internal error: RuntimeError: an unforeseen failure" in err
    assert "please report it" in err and "Traceback" in err


def test_nan_in_numeric_output_is_not_json_nan():
    from bayesrate.commands.common import strict_json

    text = json.dumps(strict_json({"a": np.nan, "b": [np.inf, 1.5], "c": np.float32(2)}),
                      allow_nan=False)  # fmt: skip
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": 2.0}


# ---------------------------------------------------------------------- issue 54: new user
def test_unknown_option_prints_the_subcommands_usage(capsys):
    """The top-level usage ("bayesrate [-h] [--version] COMMAND ...") said nothing useful."""
    rc = main(["schedule", "due", "state.db", "--bogus"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("usage: bayesrate schedule due ")
    assert "bayesrate schedule due: error: unrecognized arguments: --bogus" in err
    assert main(["study", "forecast", "--bogus"]) == 2
    assert capsys.readouterr().err.startswith("usage: bayesrate study forecast ")


@pytest.mark.parametrize(
    "argv",
    [
        ["schedule", "plan", "s.db"],
        ["schedule", "simulate"],
        ["schedule", "replay", "--dataset", "x", "--start", "2020-01-01T00:00Z", "--days", "1"],
        ["scale", "rates", "--input", "p", "--out", "r"],
    ],
)
def test_budget_accepts_fractions(argv, capsys):
    """``--budget 1/7`` (once a week) was refused as not a number."""
    from bayesrate.cli import build_parser

    parser = build_parser()
    assert parser.parse_args([*argv, "--budget", "1/7"]).budget == pytest.approx(1 / 7)
    assert parser.parse_args([*argv, "--budget", "0.25"]).budget == 0.25
    for bad in ("1/0", "one/7", "inf/1"):
        assert main([*argv, "--budget", bad]) == 2
        assert "argument --budget" in capsys.readouterr().err


def test_plan_with_a_fractional_budget_runs(state, capsys):
    rc, out, _ = run(["schedule", "plan", state, "--budget", "1/7", "--json"], capsys)
    assert rc == 0 and json.loads(out)


def test_plan_hedge_spreads_a_share_of_the_budget_uniformly(state, capsys):
    """``schedule plan --hedge 1``: every URL gets budget / URLs (the uniform policy); the
    share is in the output; 0.5 gives each URL at least half of an even share; a share
    outside [0, 1] is an option error."""
    from bayesrate.scheduler.store import Store

    rc, out, _ = run(["schedule", "plan", state, "--budget", "2", "--hedge", "1", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["hedge"] == 1.0
    assert doc["fetches_per_day"] == pytest.approx(2.0, rel=1e-12)
    with Store.open(state) as store:
        np.testing.assert_allclose(store.state.target, 1.0 / 24, rtol=1e-12)  # 2 a day / 2 URLs
    rc, out, _ = run(["schedule", "plan", state, "--budget", "2", "--hedge", "1/2"], capsys)
    assert rc == 0 and "0.5 of the budget spread uniformly" in out
    with Store.open(state) as store:
        assert store.state.target.min() >= 0.5 / 24 * (1 - 1e-12)
    assert_error(["schedule", "plan", state, "--budget", "2", "--hedge", "1.5"], capsys,
                 "argument --hedge", rc=2)  # fmt: skip


def test_a_date_alone_means_midnight_utc(capsys):
    """``--split 2020-01-01`` was refused for having no time zone; it means 00:00 UTC and
    the help says so. A time of day without a zone is still refused where it is read."""
    from bayesrate.cli import build_parser
    from bayesrate.history import hours_of

    parser = build_parser()
    for argv in (
        ["study", "forecast", "--split", "2020-01-01"],
        ["study", "bursts", "--split", "2020-01-01"],
    ):
        split = parser.parse_args(argv).split
        assert hours_of(split, "split") == hours_of("2020-01-01T00:00:00Z")
    replay = ["schedule", "replay", "--dataset", "x", "--start", "2020-01-01", "--days", "1"]
    assert parser.parse_args([*replay, "--budget", "1"]).start == "2020-01-01T00:00:00Z"
    assert parser.parse_args(["study", "forecast", "--split", "2020-01-01T12:00"]).split == (
        "2020-01-01T12:00"
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["study", "forecast", "--help"])
    assert "00:00 UTC" in " ".join(capsys.readouterr().out.split())


def test_schedule_init_names_the_priors_it_picked(tmp_path, monkeypatch, capsys):
    """``schedule init`` silently took the newest priors under ./models."""
    from bayesrate.priors import GammaPrior, PriorSet

    monkeypatch.chdir(tmp_path)
    PriorSet(GammaPrior(2.0, 3.0), {"d": GammaPrior(1.0, 1.0)}).save(
        tmp_path / "models" / "mine" / "hierarchical"
    )
    rc, out, _ = run(["schedule", "init", "a.db"], capsys)
    assert rc == 0
    assert "models/mine/hierarchical/priors.json, found under ./models" in out
    assert "newest" in out and "--priors" in out
    rc, out, _ = run(["schedule", "init", "b.db", "--priors", "models/mine/hierarchical"], capsys)
    assert rc == 0 and "found under" not in out


@pytest.mark.parametrize(
    "argv",
    [
        ["study", "forecast", "--fast"],
        ["study", "bursts", "--fast"],
        ["schedule", "replay", "--start", "2020-01-01", "--days", "1", "--budget", "1"],
    ],
)
def test_histories_are_given_with_input_like_every_other_table(tmp_path, capsys, argv):
    """forecast/replay took ``--history`` where every other command takes ``--input``; now
    ``--input`` works and ``--history`` stays as its alias."""
    missing = tmp_path / "history.csv"
    out = ["--out", str(tmp_path / "o")] if argv[0] == "study" else []
    for flag in ("--input", "--history"):
        assert_error([*argv, *out, flag, missing], capsys, f"no such file: {missing}")
    assert list(tmp_path.iterdir()) == []


def test_output_onto_a_pipe_or_device_is_refused_before_any_work(good_csv, tmp_path, capsys):
    """Issue 54 probe: ``estimate --out /dev/full`` exited 0 and replaced the device by a
    file (as root); a FIFO likewise."""
    import os
    import stat

    fifo = tmp_path / "rates.csv"
    os.mkfifo(fifo)
    argv = ["estimate", "--input", good_csv, "--method", "mle", "--out", fifo]
    assert_error(argv, capsys, "is not a regular file")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_simulate_on_a_tiny_world_does_not_divide_by_zero(capsys):
    """Issue 54 probe: ``schedule simulate --pages 5 --days 1`` ended in ZeroDivisionError
    (no baseline fetch in calibration; no staleness to compare). Undefined ratios are null."""
    rc, out, _ = run(["schedule", "simulate", "--pages", "5", "--days", "1", "--json"], capsys)
    assert rc == 0
    summary = json.loads(out)["summary"]
    assert summary["oracle_over_ours_harmonic"] is None or summary["oracle_over_ours_harmonic"] > 0


def test_running_out_of_memory_is_one_line(monkeypatch, capsys):
    """Issue 54 row 7: a decompression bomb ended in a MemoryError traceback (exit 70)."""
    from bayesrate.commands import data

    def bomb(args, **kwargs):
        raise MemoryError("Unable to allocate 198. TiB")

    monkeypatch.setattr(data, "load_observations", bomb)
    line = assert_error(["data", "summary", "--dataset", "ota-pga"], capsys, "out of memory")
    assert "198. TiB" in line


def test_dates_and_fractions_in_scheduler_and_estimate_options(state, good_csv, capsys):
    """Issue 54 probe: ``observe --now 2099-01-01`` said "no offset" (a date alone is 00:00
    UTC, and that now is then refused as later than the wall clock); ``estimate
    --crawl-rate 1/7`` was refused as not a number."""
    import datetime

    fetches = good_csv.parent / "fetches.csv"
    fetches.write_text(f"url,time,changed\nhttps://a/1,{time.time() / 3600 - 1},0\n")
    line = assert_error(["schedule", "observe", state, fetches, "--now", "2099-01-01"], capsys,
                        "later than the wall clock")  # fmt: skip
    assert "the year 2099" in line
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    rc, out, _ = run(["schedule", "due", state, "--now", today, "--json"], capsys)
    assert rc == 0 and json.loads(out)["now_iso"].startswith(f"{today}T00:00:00")
    argv = ["estimate", "--input", good_csv, "--method", "sa", "--crawl-rate"]
    rc, weekly, _ = run([*argv, "1/7"], capsys)
    assert rc == 0
    rc, same, _ = run([*argv, str(1 / 7)], capsys)
    assert weekly == same


@pytest.mark.parametrize("command", ["estimate", "fit", "calibrate"])
def test_a_history_given_as_a_visit_table_says_how_to_crawl_it(tmp_path, capsys, command):
    """Issue 54 (new user): a history given where a visit table is expected failed on the
    missing ``changed`` column; the error now says what the file is and how to crawl it."""
    history = tmp_path / "history.csv"
    history.write_text(
        "page,time,event\na,2024-01-01T00:00Z,created\na,2024-01-02T00:00Z,changed\n"
    )
    argv = {
        "estimate": ["estimate", "--method", "naive"],
        "fit": ["fit", "--out", tmp_path / "f"],
        "calibrate": ["calibrate", "--models-dir", tmp_path / "m", "--out", tmp_path / "r"],
    }[command]
    line = assert_error([*argv, "--input", history], capsys, "is a change history")
    assert "bayesrate data crawl --input" in line
