"""Write the research notebooks (code cells only; outputs are produced by running them).

Run: ``.venv/bin/python scripts/make_notebooks.py``. Each notebook reads
``BAYESRATE_FAST=1`` (set by the tests) to run small versions of its fits.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

OUT = Path(__file__).resolve().parents[1] / "notebooks"

FAST = """import os
FAST = os.environ.get("BAYESRATE_FAST") == "1"  # CI runs the notebooks in this mode
"""


def notebook(cells):
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbf.v4.new_markdown_cell(c[1]) if c[0] == "md" else nbf.v4.new_code_cell(c[1])
        for c in cells
    ]
    return nb


CENSORING = [
    (
        "md",
        "# Censoring bias: why naive change rates are too low\n\n"
        "A crawler sees only *changed since my last visit, or not*. Several changes between "
        "visits look like one, so the fraction of visits that find a change under-counts. "
        "This notebook reproduces the case study's simulation with the package's own "
        "simulators and estimators.",
    ),
    (
        "code",
        FAST
        + """import numpy as np
import matplotlib.pyplot as plt
from bayesrate import simulate
from bayesrate.estimators import batch

reps = 200 if FAST else 2000
visits = simulate.regular_grid(0.0, 720.0, 1.0)  # hourly for 30 days
""",
    ),
    (
        "md",
        "Simulate many pages at two true rates (changes per hour) and estimate each page's "
        "rate three ways.",
    ),
    (
        "code",
        """rows = []
for true_rate in (4.0, 0.25):
    data = simulate.simulate_pages(np.full(reps, true_rate), visits, rng=simulate.rng_from("nb-censoring"))
    stats = data.observations.interval_stats
    for name, est in [("naive", batch.naive(stats)), ("moment", batch.moment(stats)), ("mle", batch.mle(stats))]:
        rows.append((true_rate, name, est.rate.mean(), est.rate.std()))
for row in rows:
    print("true %.2f/h  %-7s mean %.3f  sd %.4f" % row)
""",
    ),
    (
        "code",
        """fig, ax = plt.subplots(figsize=(6, 3))
for true_rate in (4.0, 0.25):
    ests = [r for r in rows if r[0] == true_rate]
    ax.bar([f"{r[1]}\\n{true_rate}/h" for r in ests], [r[2] / true_rate for r in ests])
ax.axhline(1.0, color="k", lw=0.8)
ax.set_ylabel("mean estimate / true rate")
ax.set_title("Naive estimates collapse when several changes share an interval");
""",
    ),
    (
        "md",
        "The revisit interval that keeps P(two or more changes between visits) ≤ 5% solves "
        "1 − e^{−λτ}(1 + λτ) = 0.05, i.e. λτ ≈ 0.355.",
    ),
    (
        "code",
        """from scipy.optimize import brentq
x = brentq(lambda x: 1 - np.exp(-x) * (1 + x) - 0.05, 1e-6, 5)
print(f"lambda * tau = {x:.4f}: a page changing once an hour needs a visit every {60 * x:.0f} minutes")
""",
    ),
]

CALIBRATE = [
    (
        "md",
        "# Calibrating priors on Open Terms Archive\n\n"
        "Load the embedded `ota-contrib` dataset (ODC-BY 1.0, Open Terms Archive "
        "contributors), fit the censored and hierarchical models on sufficient statistics, "
        "check them against replicated *detections*, compare them by leave-one-page-out "
        "ELPD, and turn the hierarchical posterior into per-domain Gamma priors.",
    ),
    (
        "code",
        FAST
        + """import numpy as np
from bayesrate import datasets
from bayesrate.checks.ppc import ppc_for
from bayesrate.checks.compare import compare
from bayesrate.export import domain_priors
from bayesrate.models import get_model

obs = datasets.load("ota-contrib")
print(obs)
for note in obs.notes:
    print(" -", note)
if FAST:  # a subset of the largest domains keeps CI quick
    big = obs.pages["domain"].value_counts().index[:25]
    obs = obs.subset(np.flatnonzero(obs.pages["domain"].isin(big).to_numpy()))
print(obs.summary()["changes_per_page"])
""",
    ),
    (
        "code",
        """sampler = {"draws": 300, "tune": 300, "chains": 2} if FAST else {}
fits = {}
for name in ("censored", "hierarchical"):
    fits[name] = get_model(name)(sampler_config=sampler).fit(obs)
    d = fits[name].diagnostics_
    print(f"{name}: r_hat_max {d.r_hat_max:.3f}, ess_bulk_min {d.ess_bulk_min:.0f}, "
          f"divergences {d.divergences}, {d.seconds:.1f} s, converged {fits[name].converged_}")
""",
    ),
    (
        "code",
        """checks = {name: ppc_for(model, obs, seed="notebook") for name, model in fits.items()}
checks["hierarchical"].table()[["replication", "statistic", "observed", "replicated_mean", "p_value", "extreme"]]
""",
    ),
    (
        "code",
        """import tempfile, pathlib
figdir = pathlib.Path(tempfile.mkdtemp())
checks["hierarchical"].plot(figdir)
from IPython.display import Image
Image(filename=str(figdir / "ppc.png"))
""",
    ),
    (
        "code",
        """comparison = compare(fits)
print(comparison.verdict)
comparison.table[["elpd", "se", "elpd_diff", "dse"]]
""",
    ),
    (
        "code",
        """priors = domain_priors(fits["hierarchical"])
g = priors.global_prior
print(f"new domain: Gamma({g.alpha:.3g}, {g.beta:.3g} days), mean {g.mean:.3g} changes/day")
top = sorted(priors.domains.items(), key=lambda kv: -kv[1].mean)[:10]
for domain, p in top:
    print(f"{domain:30s} mean {p.mean:8.3f}/day  alpha {p.alpha:.3g}  beta {p.beta:.3g} days")
""",
    ),
]

SCHEDULER = [
    (
        "md",
        "# From priors to revisit decisions\n\n"
        "The scheduler imports no PyMC. It reads the `priors.json` artifact (or a weak "
        "default), updates each URL's Gamma posterior with the censoring-exact rule, and "
        "decides what to fetch under a budget and per-host politeness.",
    ),
    (
        "code",
        FAST
        + """import sys
import numpy as np
from bayesrate.priors import PriorSet, find_artifact
from bayesrate.scheduler import SchedulerState
from bayesrate.scheduler.harness import compare as simulate_policies

path = find_artifact("../models")
priors = PriorSet.load(path) if path else PriorSet.default()
print("priors:", path or "default", "| heavy modules loaded:",
      [m for m in ("pymc", "pytensor", "arviz") if m in sys.modules])
""",
    ),
    (
        "code",
        """result = simulate_policies(n_pages=800 if FAST else 10_000, days=15 if FAST else 60,
                           budget=0.2, seed="notebook", priors=priors)
for name, r in sorted(result["policies"].items(), key=lambda kv: -kv[1]["freshness"]):
    print(f"{name:22s} freshness {r['freshness']:.3f}  harmonic staleness {r['harmonic_staleness']:.3f}  fetches {r['fetches']}")
""",
    ),
]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, cells in (
        ("01-censoring-bias.ipynb", CENSORING),
        ("02-calibrate-ota.ipynb", CALIBRATE),
        ("03-scheduler.ipynb", SCHEDULER),
    ):
        nbf.write(notebook(cells), OUT / name)
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
