"""Progress lines of a running fit (``bayesrate.models.progress``)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from bayesrate.models.progress import SamplerProgress, sampler_line


def _chain(done, total=300, divergences=0, tuning=False, started=True):
    return SimpleNamespace(
        finished_draws=done,
        total_draws=total,
        divergences=divergences,
        tuning=tuning,
        started=started,
    )


def test_line_reports_draws_in_all_chain_states_divergences_and_time():
    chains = [
        _chain(120, tuning=True, divergences=1),
        _chain(80, tuning=True),
        _chain(300),
        _chain(0, started=False),
    ]
    # 120 + 80 + 300 + 0 of 4 × 300 draws; two chains tuning, one waiting for a core,
    # one finished; 1 divergence in all
    assert sampler_line("m", chains, 12.4) == (
        "m: 4 chains (2 tuning, 1 waiting), 500/1,200 draws, 1 divergence, 12 s"
    )
    assert sampler_line("m", [_chain(0, started=False)], 0.0) == (
        "m: 1 chain (1 waiting), 0/300 draws, 0 divergences, 0 s"
    )
    # a finished chain still flagged as tuning (nutpie's last report) is not counted
    assert sampler_line("m", [_chain(300, tuning=True), _chain(300)], 9.0) == (
        "m: 2 chains, 600/600 draws, 0 divergences, 9 s"
    )


def test_callback_is_throttled_and_reports_the_end_once():
    now = [0.0]
    lines: list[str] = []
    progress = SamplerProgress(lines.append, "m", every=10.0, clock=lambda: now[0])
    for t, done in [(0.1, 10), (5.0, 50), (9.9, 90), (10.2, 100), (15.0, 150), (16.0, 300)]:
        now[0] = t
        progress([_chain(done), _chain(done)])
    now[0] = 17.0
    progress([_chain(300), _chain(300)])  # nutpie may call again after the end: no repeat
    # t=0.1 (first), t=10.2 (10.1 s later), t=16 (the end, though only 5.8 s later)
    assert [line.split(", ")[1] for line in lines] == [
        "20/600 draws",
        "200/600 draws",
        "600/600 draws",
    ]
    assert lines[-1].endswith("16 s")


@pytest.fixture(scope="module")
def fit_lines():
    """A tiny censored NUTS fit with ``progress`` collecting its lines."""
    from bayesrate import simulate as sim
    from bayesrate.models import CensoredModel

    obs = sim.pages_like(n_pages=12, seed="progress-lines", history="short").observations
    lines: list[str] = []
    model = CensoredModel(sampler_config={"draws": 150, "tune": 150, "chains": 2, "seed": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 150 draws need not pass the gates
        model.fit(obs, progress=lines.append)
    return model, lines


def test_fit_reports_building_compiling_sampling_and_the_end(fit_lines):
    model, lines = fit_lines
    assert lines[0].startswith("censored: building the model on 12 pages")
    assert "censored: compiling ..." in lines
    nuts = [line for line in lines if " NUTS " in line]
    # nutpie calls back from its first draws, so at least the first and the last line
    assert len(nuts) >= 2
    # 2 × (150 tune + 150 draws), or twice the draws if the fit reran for a near miss
    draws = 300 if "more_draws" not in model.diagnostics_.extra else 450
    assert f"2 chains, {2 * draws}/{2 * draws} draws" in nuts[-1]
    divergences = int(model.diagnostics_.divergences)
    assert f"{divergences} divergence" in nuts[-1]
    assert lines[-1].startswith("censored: fitted in ")
