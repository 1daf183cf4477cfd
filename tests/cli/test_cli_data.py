"""``bayesrate data`` and the light-import promise of the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from bayesrate.cli import main

HEAVY = ("pymc", "pytensor", "arviz", "nutpie")


def test_help_does_not_import_pymc():
    code = (
        "import sys\n"
        "from bayesrate.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: bayesrate" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY="


def test_summary_json_on_input_file(tmp_path, capsys):
    path = tmp_path / "obs.csv"
    pd.DataFrame(
        {
            "page": ["a", "a", "a", "b", "b"],
            "time": [0, 1, 2, 0, 3],
            "changed": [None, 1, 1, None, 0],
        }
    ).to_csv(path, index=False)
    assert main(["data", "summary", "--input", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["pages"], out["visits"], out["changes"]) == (2, 5, 2)
    assert out["pages_changed_every_visit"] == 1 and out["pages_never_changed"] == 1


def test_summary_dataset_text(capsys):
    assert main(["data", "summary", "--dataset", "ota-genai-eu"]) == 0
    out = capsys.readouterr().out
    assert "pages" in out and "ODC" not in out
    assert "excluded" in out  # loader notes are shown


def test_bad_input_gives_clear_error_and_exit_code(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"page": ["a", "a"], "time": [1, 0], "changed": [None, 1]}).to_csv(
        path, index=False
    )
    assert main(["data", "summary", "--input", str(path)]) == 1
    err = capsys.readouterr().err
    assert "out of order" in err and "rows: 1" in err


def test_data_list(capsys):
    assert main(["data", "list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["default"] == "ota-contrib"
    licences = {name: v["licence"] for name, v in out["datasets"].items()}
    assert licences.pop("tldr-pages") == "CC-BY-4.0"
    assert out["datasets"]["tldr-pages"]["kind"] == "change history"
    assert set(licences.values()) == {"ODC-BY-1.0"}
    assert main(["data", "list"]) == 0
    text = capsys.readouterr().out
    assert "tldr-pages [change history]" in text and "tldr-pages contributors" in text


def test_summary_of_a_history_file_says_what_it_got(tmp_path, capsys):
    """Issue 54 (new user): ``data summary --input history.csv`` failed on the missing
    ``changed`` column; a history is summarised as one, and each summary names its kind."""
    path = tmp_path / "history.csv"
    pd.DataFrame(
        {
            "page": ["a", "a", "b", "a"],
            "time": ["2024-01-01T00:00Z", "2024-01-03T00:00Z", "2024-01-02T00:00Z",
                     "2024-01-05T00:00Z"],
            "event": ["created", "changed", "created", "changed"],
        }
    ).to_csv(path, index=False)  # fmt: skip
    assert main(["data", "summary", "--input", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "change history" and (out["pages"], out["changes"]) == (2, 2)
    assert main(["data", "summary", "--input", str(path)]) == 0
    assert "(change history)" in capsys.readouterr().out
    table = tmp_path / "obs.csv"
    pd.DataFrame({"page": ["a", "a"], "time": [0, 1], "changed": [None, 1]}).to_csv(
        table, index=False
    )
    assert main(["data", "summary", "--input", str(table), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "observation table"
    neither = tmp_path / "neither.csv"
    pd.DataFrame({"page": ["a"], "time": [0]}).to_csv(neither, index=False)
    assert main(["data", "summary", "--input", str(neither)]) == 1
    assert "changed" in capsys.readouterr().err


def test_data_crawl_writes_the_observations_of_a_schedule(tmp_path, capsys):
    """Issue 54 (new user): no command crawled a history into an observation table (they
    wrote a script around ``bayesrate.history.crawl``)."""
    import numpy as np

    from bayesrate.history import FixedInterval, crawl
    from bayesrate.io import read_observations
    from bayesrate.io.history import read_history

    history = tmp_path / "history.csv"
    pd.DataFrame(
        {
            "page": ["a", "b", "a", "a", "b", "c"],
            "time": ["2024-01-01T00:00Z", "2024-01-01T06:00Z", "2024-01-02T10:00Z",
                     "2024-01-02T11:00Z", "2024-01-08T00:00Z", "2024-01-10T00:00Z"],
            "event": ["created", "created", "changed", "changed", "changed", "created"],
        }
    ).to_csv(history, index=False)  # fmt: skip
    out = tmp_path / "crawl.csv"
    argv = ["data", "crawl", "--input", str(history), "--out", str(out)]
    assert main([*argv, "--every", "24", "--seed", "7"]) == 0
    assert "wrote " in capsys.readouterr().out
    got = read_observations(out)
    want = crawl(read_history(history), FixedInterval(24.0), "7")
    w = want.observations
    assert list(got.pages.index) == list(w.pages.index)
    assert np.array_equal(got.offsets, w.offsets) and np.array_equal(got.changed, w.changed)
    np.testing.assert_allclose(got.time, w.time, rtol=0, atol=1e-9)  # ns in the CSV
    assert np.array_equal(pd.read_csv(out)["true_changes"], want.true_changes)
    assert got.n_changes == 2 and want.true_changes.sum() == 3  # two of a's in one interval
    # an explicit grid, and a fraction for Poisson visits
    grid = tmp_path / "grid.csv"
    grid.write_text("time\n2024-01-01T12:00Z\n2024-01-03T00:00Z\n2024-01-07T23:00Z\n")
    assert main([*argv, "--grid", str(grid)]) == 0
    frame = pd.read_csv(out)
    assert frame.groupby("page")["true_changes"].sum().to_dict() == {"a": 2, "b": 0}
    assert main([*argv[:-1], str(tmp_path / "p.parquet"), "--poisson", "1/7"]) == 0
    capsys.readouterr()
    # refused before any work: an output format the loaders do not read, no schedule
    assert main([*argv[:-1], str(tmp_path / "c.json"), "--every", "24"]) == 1
    assert "unsupported output type" in capsys.readouterr().err
    assert main(argv) == 2
    assert not (tmp_path / "c.json").exists()
