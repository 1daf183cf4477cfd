"""Studies that reproduce the source documents' results with the package's own tools.

Each study module has ``DESCRIPTION: str`` and a typed entry point
``run(*, seed, fast, progress, ...) -> StudyResult``: tables, a JSON-ready summary, figures
and a short text for the terminal. ``StudyResult.save(directory)`` writes them (CSV, JSON,
PNG). The command line (``bayesrate study NAME``, :mod:`bayesrate.commands.study`) is a thin
layer over ``run``; notebooks call ``run`` directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.models.progress import Progress as Progress  # one home for both
from bayesrate.models.progress import silent as silent

#: study name -> module (imported only when the study runs)
STUDIES = {
    "case-study": "bayesrate.studies.case_study",
    "online": "bayesrate.studies.online",
    "wikipedia": "bayesrate.studies.wikipedia",
    "recovery": "bayesrate.studies.recovery",
    "forecast": "bayesrate.studies.forecast",
    "bursts": "bayesrate.studies.bursts",
}


@dataclass
class StudyResult:
    """What a study produced.

    Attributes
    ----------
    name
        Study name.
    tables
        Named tables (written as ``<name>.csv``).
    summary
        JSON-ready headline numbers (written as ``summary.json``, or the file named by
        ``summary_file``).
    figures
        Named matplotlib figures (written as ``<name>.png``).
    text
        A short plain-text rendering of the main table, for the terminal.
    """

    name: str
    tables: Mapping[str, Any] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""
    summary_file: str = "summary.json"

    def save(self, directory: str | Path) -> list[Path]:
        """Write every table, the summary and every figure into ``directory`` (replaced as a
        whole, atomically: a failed save leaves the previous output as it was)."""
        from bayesrate.atomic import atomic_directory

        target = Path(directory)
        with atomic_directory(target) as tmp:
            names = self._write(tmp)
        return [target / name for name in names]

    def _write(self, directory: Path) -> list[str]:
        from bayesrate import plots

        paths = []
        for name, table in self.tables.items():
            path = directory / f"{name}.csv"
            table.to_csv(path, index=False)
            paths.append(path)
        path = directory / self.summary_file
        path.write_text(json.dumps(self.summary, indent=2, default=_json_default) + "\n")
        paths.append(path)
        for name, fig in self.figures.items():
            paths.append(plots.save(fig, directory / f"{name}.png"))
        return [p.name for p in paths]


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
