"""What a forecast run measured (:class:`ForecastResult`): the score table, the JSON, the
per-page table and the study's files (tables, ``forecast.json``, the three figures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesrate.constants import HOURS_PER_DAY
from bayesrate.predictive import COVERAGE_TARGET, PIT_BAND
from bayesrate.studies import StudyResult
from bayesrate.studies.forecast.scoring import MethodForecast


@dataclass
class ForecastResult:
    """What :func:`run` measured.

    Attributes
    ----------
    split, horizon_days, crawl_every_hours
        The design (``split`` as an ISO timestamp).
    pages
        Page labels scored (alive at the split, with at least one training interval and one
        test interval).
    detected
        Per page, the number of test intervals with a detected change (``k``).
    test_intervals
        Per page, the number of test intervals.
    changed
        Per page, whether it changed at all in the test window (exact history).
    true_rate
        Per page, exact changes per hour in the test window.
    methods
        Per method, a :class:`MethodForecast`.
    """

    source: str
    split: str
    horizon_days: float
    crawl_every_hours: float
    pages: pd.Index
    domain: np.ndarray
    detected: np.ndarray
    test_intervals: np.ndarray
    changed: np.ndarray
    true_rate: np.ndarray
    methods: dict[str, MethodForecast]
    training: dict[str, Any]
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    reference: MethodForecast | None = None
    #: (rate per hour, log score) of :func:`~bayesrate.studies.level.level_oracle` with one
    #: rate for every page
    constant_rate_oracle: tuple[float, float] | None = None

    #: the central band of the randomised PIT that coverage90 counts (the figures draw it)
    pit_band = PIT_BAND

    @property
    def n_pages(self) -> int:
        return len(self.pages)

    def to_json(self) -> dict[str, Any]:
        """The issue's JSON shape: split, horizon, schedule, pages, and per method its scores,
        seconds and (fitted models) convergence gates (:meth:`MethodForecast.summary`)."""
        return {
            "split": self.split,
            "horizon_days": self.horizon_days,
            "crawl_every_hours": self.crawl_every_hours,
            "pages": self.n_pages,
            "methods": {name: m.summary() for name, m in self.methods.items()},
        }

    def table(self) -> pd.DataFrame:
        """Scores per method (rows), with fit seconds and convergence where there is a fit."""
        rows = []
        for name, m in self.methods.items():
            d = m.diagnostics or {}
            rows.append(
                {
                    "method": name,
                    **m.scores(),
                    "worlds_cov90_q05": m.worlds.q05 if m.worlds else np.nan,
                    "worlds_cov90_q95": m.worlds.q95 if m.worlds else np.nan,
                    "level_factor": m.level_factor,
                    "level_log_score": m.level_log_score,
                    "seconds": m.seconds,
                    "r_hat_max": d.get("r_hat_max", np.nan),
                    "ess_bulk_min": d.get("ess_bulk_min", np.nan),
                    "divergences": d.get("divergences", np.nan),
                }
            )
        return pd.DataFrame(rows).set_index("method")

    @property
    def json(self) -> dict[str, Any]:
        """What ``--json`` prints: :meth:`to_json`."""
        return self.to_json()

    @property
    def text(self) -> str:
        """The score table for the terminal."""
        lines = [
            f"{self.source}: {self.n_pages:,} pages, crawl every {self.crawl_every_hours:g} h, "
            f"split {self.split}, horizon {self.horizon_days:g} days",
            self.table().to_string(float_format=lambda v: f"{v:.4f}"),
        ]
        if self.reference is not None:
            ref = self.reference
            lines.append(
                f"hindsight reference (knows each page's realised test rate): log score "
                f"{ref.log_score:.4f}, Brier {ref.brier:.4f}, coverage90 {ref.coverage90:.3f}"
            )
        return "\n".join(lines)

    def pages_table(self) -> pd.DataFrame:
        """Per page and method: P(observed count), PIT, P(change), predicted rate per day."""
        frame = pd.DataFrame(
            {
                "page": self.pages.to_numpy(),
                "domain": self.domain,
                "test_intervals": self.test_intervals,
                "detected": self.detected,
                "changed": self.changed.astype(int),
                "true_rate_per_day": self.true_rate * HOURS_PER_DAY,
            }
        )
        for name, m in self.methods.items():
            frame[f"{name}_p_detected"] = m.prob_at_k
            frame[f"{name}_pit"] = m.pit
            frame[f"{name}_p_change"] = m.prob_change
            frame[f"{name}_rate_per_day"] = m.rate_per_hour * HOURS_PER_DAY
        return frame

    def study_result(self) -> StudyResult:
        """Tables (``scores``, ``pages``), ``forecast.json`` and the three figures."""
        from bayesrate import plots

        scores = self.table().reset_index()
        return StudyResult(
            name="forecast",
            tables={"scores": scores, "pages": self.pages_table()},
            summary=self.details(),
            figures={
                "calibration": plots.forecast_calibration(self),
                "pit": plots.forecast_pit(self),
                "log-score": plots.forecast_log_scores(self),
            },
            text=self.text,
            summary_file="forecast.json",
        )

    def save(self, directory: str | Path) -> list[Path]:
        """Write the tables, ``forecast.json`` and the figures (atomically)."""
        return self.study_result().save(directory)

    def details(self) -> dict[str, Any]:
        """Everything in :meth:`to_json` plus design, training data, diagnostics and notes."""
        out = self.to_json()
        out["source"] = self.source
        out["training"] = self.training
        out["test"] = {
            "intervals": int(self.test_intervals.sum()),
            "pages_changed": int(self.changed.sum()),
            "pages_with_detection": int((self.detected > 0).sum()),
        }
        for name, m in self.methods.items():
            out["methods"][name] |= {
                "seconds": round(m.seconds, 2),
                "floored_probabilities": m.floored_probabilities,
                "expected_detections": float(m.expected_count.sum()),
                "level_oracle": {"factor": m.level_factor, "log_score": m.level_log_score},
                **({"coverage90_worlds": m.worlds.to_json()} if m.worlds else {}),
                **({"diagnostics": m.diagnostics} if m.diagnostics else {}),
            }
        if self.reference is not None:
            out["hindsight_reference"] = {
                **self.reference.scores(),
                "what": "plug-in Binomial with each page's realised rate over its test intervals "
                "(knows the future: how much any constant-rate forecast loses to the window's "
                "own rate; not a bound, since changes cluster within the window)",
            }
        out["test"]["detections"] = int(self.detected.sum())
        if self.constant_rate_oracle is not None:
            rate, log_score = self.constant_rate_oracle
            out["constant_rate_oracle"] = {
                "rate_per_day": rate * HOURS_PER_DAY,
                "log_score": log_score,
                "what": "one rate for every page, the best for the test window (knows its "
                "level): what the window's level alone scores, with no page told apart",
            }
        out["level_oracle"] = (
            "per method, its rates times the single factor that scores best on the test "
            "window (knows the window's level, not which pages change), and that log score: "
            "a method that loses only by its level scores here like the others"
        )
        out["coverage90_worlds"] = (
            "per method, coverage90 of worlds drawn from its own predictive (one posterior "
            "draw per world, shared by every page, then each page's test count): its 5% and "
            f"95% quantiles, the share of worlds in {list(COVERAGE_TARGET)}, and where the "
            "observed coverage90 falls among them"
        )
        out["seconds"] = {k: round(v, 2) for k, v in self.seconds.items()}
        out["notes"] = list(self.notes)
        return out
