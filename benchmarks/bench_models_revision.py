"""The models against an earlier revision of the package, in one process, interleaved.

Usage::

    .venv/bin/python benchmarks/bench_models_revision.py --rev 05e8ace [--only gradient,fits]
        [--rounds 4] [--modulated-pages 300,7000]

The revision's ``bayesrate`` package is exported with ``git archive`` into a temporary
directory and imported as ``bayesrate_baseline`` (its imports renamed), so both versions
run side by side on the same data under the same machine load:

1. **gradient** — one log-density + gradient (PyMC's ``logp_dlogp_function``) of the
   hierarchical model on ``pages_like(1000)`` and of the modulated model on
   ``pages_like(n)`` for each ``--modulated-pages`` (default 300), at the same point, with
   BLAS single-threaded (as in fits), 300 rounds of 10 calls alternating between the
   versions; median and minimum per call, and their ratio (current / baseline).
2. **fits** — full NUTS fits (4 chains × 1,000 draws + 1,000 tune) of both models on
   ``pages_like(300)``, alternating the order of the versions by round (after a warm-up fit
   of each, so that numba's compilations are charged to neither).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import warnings
from functools import partial
from pathlib import Path

from gradient_timing import interleaved_ms, logp_dlogp_at

REPO = Path(__file__).resolve().parents[1]
BASELINE = "bayesrate_baseline"


def export_revision(rev: str, into: Path) -> None:
    """``git archive`` the revision's package into ``into/bayesrate_baseline``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "bayesrate"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "bayesrate").rename(into / BASELINE)
    pattern = re.compile(r"\b(from|import) bayesrate(\.| )")
    for path in (into / BASELINE).rglob("*.py"):
        text = pattern.sub(rf"\1 {BASELINE}\2", path.read_text())
        path.write_text(text.replace('"bayesrate.', f'"{BASELINE}.'))


def _data(package, n: int):
    return package.simulate.pages_like(n, seed="bench-models", history="case-study").observations


def bench_gradient(versions: dict, modulated_pages: list[int]) -> dict:
    """Interleaved timings, BLAS single-threaded as during NUTS fits."""
    out = {}
    cases = [("hierarchical", 1000)] + [("modulated", n) for n in modulated_pages]
    for name, n in cases:
        calls = {}
        for label, package in versions.items():
            model = package.models.MODELS[name]().build_model(_data(package, n))
            f, x0 = logp_dlogp_at(model)
            calls[label] = partial(f, x0)
        ms = interleaved_ms(calls, rounds=300)
        row = {
            f"{label}_{stat}_ms": ms[label][i]
            for label in ms
            for i, stat in enumerate(("median", "min"))
        }
        row["ratio_median"] = row["current_median_ms"] / row["baseline_median_ms"]
        row["ratio_min"] = row["current_min_ms"] / row["baseline_min_ms"]
        out[f"{name}_{n}"] = row
        print(
            f"[gradient] {name} ({n} pages): logp+grad median baseline "
            f"{row['baseline_median_ms']:.3f} ms, "
            f"current {row['current_median_ms']:.3f} ms (x{row['ratio_median']:.3f}); min "
            f"{row['baseline_min_ms']:.3f} / {row['current_min_ms']:.3f} ms "
            f"(x{row['ratio_min']:.3f})",
            flush=True,
        )
    return out


def bench_fits(versions: dict, rounds: int) -> dict:
    sampler = {"draws": 1000, "tune": 1000, "chains": 4, "seed": "bench-models"}
    warm = {**sampler, "draws": 20, "tune": 20, "chains": 2}
    data = {label: _data(package, 300) for label, package in versions.items()}
    for label, package in versions.items():
        for name in ("hierarchical", "modulated"):
            package.models.MODELS[name](sampler_config=warm).fit(data[label].subset(range(5)))
    out = {label: [] for label in versions}
    for r in range(rounds):
        order = list(versions) if r % 2 == 0 else list(versions)[::-1]
        for label in order:
            row = {}
            for name in ("hierarchical", "modulated"):
                model = versions[label].models.MODELS[name](sampler_config=sampler)
                d = model.fit(data[label]).diagnostics_
                row[name] = {
                    "seconds": d.seconds,
                    "sampling": d.sampling_seconds,
                    "compile": d.compile_seconds,
                    "grad_evals": d.grad_evals_per_draw,
                }
                print(
                    f"[fits] round {r} {label} {name}: {d.seconds:.1f} s (compile "
                    f"{d.compile_seconds:.1f}, sampling {d.sampling_seconds:.1f}, "
                    f"{d.grad_evals_per_draw:.1f} gradient evaluations per draw)",
                    flush=True,
                )
            out[label].append(row)
    for name in ("hierarchical", "modulated"):
        total = {label: sum(r[name]["sampling"] for r in out[label]) for label in out}
        print(
            f"[fits] {name}: sampling seconds over {rounds} rounds baseline "
            f"{total['baseline']:.1f}, current {total['current']:.1f} "
            f"(x{total['current'] / total['baseline']:.3f})"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rev", required=True, help="the baseline revision (git)")
    parser.add_argument("--only", default="gradient,fits")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--modulated-pages", default="300", help="page counts of the modulated gradient"
    )
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # convergence gates are not what is measured here
    import importlib

    import bayesrate.models  # the current version: its subpackages become attributes
    import bayesrate.simulate  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        export_revision(args.rev, Path(tmp))
        sys.path.insert(0, tmp)
        baseline = importlib.import_module(BASELINE)
        importlib.import_module(f"{BASELINE}.models")
        importlib.import_module(f"{BASELINE}.simulate")
        versions = {"baseline": baseline, "current": sys.modules["bayesrate"]}
        only = set(args.only.split(","))
        results = {"baseline_revision": args.rev}
        if "gradient" in only:
            pages = [int(n) for n in args.modulated_pages.split(",")]
            results["gradient"] = bench_gradient(versions, pages)
        if "fits" in only:
            results["fits"] = bench_fits(versions, args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
