"""Studies that reproduce the source documents' results with the package's own tools.

Each study is a module with ``DESCRIPTION: str``, ``add_arguments(parser)`` and
``run(args) -> int`` that writes tables (CSV/JSON) and plots (PNG) under ``args.out``.
"""

from __future__ import annotations

#: study name -> module (imported only when the study runs)
STUDIES = {
    "case-study": "bayesrate.studies.case_study",
    "online": "bayesrate.studies.online",
    "wikipedia": "bayesrate.studies.wikipedia",
    "recovery": "bayesrate.studies.recovery",
    # library code in bayesrate.studies.forecast; this module is its command-line layer
    "forecast": "bayesrate.commands.study_forecast",
}
