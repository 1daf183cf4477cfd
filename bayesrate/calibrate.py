"""The main job: data → models → checks → priors, with a report.

:func:`calibrate` fits each requested model, runs the posterior predictive checks on the
censored observation process, compares the models by leave-one-page-out ELPD, exports a
prior artifact for every exportable model whose gates pass (or all, when forced), marks
the best exported one as recommended, and writes a Markdown report with PNG figures. The
artifacts and the report are kept together or not at all.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesrate.atomic import atomic_directory, atomic_path, directory_lock
from bayesrate.errors import ArtifactError
from bayesrate.observations import Observations

DEFAULT_MODELS = ("censored", "hierarchical", "modulated", "excursion")
#: The main job's settings of a default model, under the user's ``model_configs``. Annual
#: excursions: the epochs at which the excursion fit passes its Laplace check on ota-contrib
#: (90-day ones pass the gap check but not the Laplace check, at 2.3 times the cost;
#: docs/calibration.md).
DEFAULT_MODEL_CONFIGS: dict[str, dict[str, Any]] = {"excursion": {"epoch_days": 365.0}}
RECOMMENDED_FILE = "recommended.json"


@dataclass
class CalibrationResult:
    """What :func:`calibrate` produced."""

    dataset: str
    observations: Observations
    fits: dict[str, Any]
    ppc: dict[str, Any]
    comparison: Any
    artifacts: dict[str, Path]
    refused: dict[str, str]
    recommended: str | None
    report: Path
    seconds: dict[str, float] = field(default_factory=dict)


def check_artifact_owner(
    models_root: str | Path, dataset: str, fingerprint: str, *, force: bool = False
) -> None:
    """Refuse to overwrite artifacts named ``dataset`` that were fitted on other data.

    Every ``<models_root>/<dataset>/*/priors.json`` records the fingerprint of the data it
    was fitted on; one that differs from ``fingerprint`` raises :class:`ArtifactError`
    unless ``force`` (then it will be overwritten).
    """
    from bayesrate.priors import PRIORS_FILE, PriorSet

    directory = Path(models_root) / dataset
    if force or not directory.is_dir():
        return
    for path in sorted(directory.glob(f"*/{PRIORS_FILE}")):
        theirs = PriorSet.load(path).metadata.get("data_fingerprint")
        if theirs and theirs != fingerprint:
            raise ArtifactError(
                f"{path.parent} holds priors fitted on other data (fingerprint {theirs[:12]}; "
                f"this data {fingerprint[:12]}): choose another --name, or pass --force to "
                "overwrite them"
            )


def calibrate(
    obs: Observations,
    *,
    dataset: str,
    models: Sequence[str] = DEFAULT_MODELS,
    out: str | Path | None = None,
    models_root: str | Path = "models",
    method: str = "nuts",
    sampler: Mapping[str, Any] | None = None,
    model_configs: Mapping[str, Mapping[str, Any]] | None = None,
    force: bool = False,
    seed: int | str = "bayesrate-calibrate",
    command: str = "",
    progress: Callable[[str], None] = lambda message: None,
) -> CalibrationResult:
    """Fit, check, compare and export; see the module docstring.

    Parameters
    ----------
    obs
        Observations to calibrate on.
    dataset
        Name used for the artifact directory ``<models_root>/<dataset>/<model>/``.
    models
        Model names (default ``censored``, ``hierarchical``, ``modulated``, ``excursion``;
        any model of :data:`bayesrate.models.MODELS` with integrated leave-one-page-out).
    out
        Report directory (default ``reports/<dataset>``); the full fits are saved there as
        ``fit-<model>.nc`` (the artifacts keep a compact copy).
    method, sampler, model_configs
        Fitting method, sampler overrides (draws, tune, chains, seed), per-model config
        (merged over :data:`DEFAULT_MODEL_CONFIGS`).
    force
        Export even when gates fail; the artifacts then say they were forced.

    Notes
    -----
    The outputs are all or nothing: the artifacts (and ``recommended.json``) are written
    into a hidden staging directory under ``models_root`` and renamed into place with what
    they replace kept aside; the report is written last. If anything fails (a full disk, an
    interrupt), the run's artifacts are removed and the earlier ones, their
    ``recommended.json`` and the earlier report are as they were. Only ``<out>.partial``
    (:func:`partial_directory`: the models fitted so far) is kept.
    """
    from bayesrate.checks.compare import compare
    from bayesrate.models.base import seed_int

    start = time.perf_counter()
    check_artifact_owner(models_root, dataset, obs.fingerprint, force=force)
    out = Path(out) if out is not None else Path("reports") / dataset
    seconds: dict[str, float] = {}
    sampler = dict(sampler or {})
    sampler.setdefault("seed", seed_int(seed))
    fits, checks = {}, {}
    partial = partial_directory(out)
    try:
        for name in models:
            config = {**DEFAULT_MODEL_CONFIGS.get(name, {}), **(model_configs or {}).get(name, {})}
            fits[name], checks[name] = _fit_and_check(
                name, obs, config, sampler, method, f"{seed}-ppc-{name}", seconds, progress
            )
            _keep_finished(partial, name, fits[name], checks[name], seconds, progress)
    except BaseException:
        if fits:
            progress(f"stopped; the finished models ({', '.join(fits)}) are kept in {partial}")
        raise

    progress("comparing models by leave-one-page-out ELPD ...")
    t0 = time.perf_counter()
    comparison = compare(fits)
    seconds["loo"] = time.perf_counter() - t0
    progress(f"  {comparison.verdict}")

    # All or nothing: the artifacts are written into a staging root, then put in place with
    # what they replace kept aside; the report is written and put in place last. A failure
    # anywhere (a full disk) puts back what was there before and removes what this run put.
    models_root = Path(models_root)
    final = models_root / dataset
    # the directories this run makes (deepest first), removed on failure if empty
    created = _missing_directories(final) + _missing_directories(out.parent)
    final.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dataset}.", suffix=".staging", dir=models_root))
    swap = _Swap()
    with ExitStack() as held:
        try:
            staged, refused = _export(
                fits, checks, comparison, dataset, stage, force, command, obs.notes, progress
            )
            # concurrent runs into one place put their outputs in one at a time: one run wins whole
            held.enter_context(directory_lock(final))
            recommended = next((n for n in comparison.table.index if n in staged), None)
            if recommended is not None:
                (stage / dataset / RECOMMENDED_FILE).write_text(
                    json.dumps({"model": recommended, "reason": comparison.verdict}, indent=2)
                )
            artifacts = {name: final / path.name for name, path in staged.items()}
            for name, path in staged.items():
                swap.put(path, artifacts[name])
            if recommended is not None:
                swap.put(stage / dataset / RECOMMENDED_FILE, final / RECOMMENDED_FILE)
            seconds["total_before_report"] = time.perf_counter() - start

            from bayesrate.report import write_report

            progress(f"writing report to {out} ...")
            with atomic_directory(out) as staging:
                for name, model in fits.items():
                    model.save(staging / f"fit-{name}.nc")
                report = (
                    out
                    / write_report(
                        staging,
                        dataset=dataset,
                        obs=obs,
                        fits=fits,
                        ppc=checks,
                        comparison=comparison,
                        artifacts=artifacts,
                        refused=refused,
                        recommended=recommended,
                        seconds=seconds,
                        command=command,
                    ).name
                )
        except BaseException:
            swap.undo()
            shutil.rmtree(stage, ignore_errors=True)
            for directory in created:
                _remove_if_empty(directory)
            progress(
                "stopped: no artifact and no report of this run were kept; earlier ones are intact"
            )
            raise
        swap.forget()
    shutil.rmtree(stage, ignore_errors=True)
    for path in artifacts.values():
        progress(f"  exported {path}")
    shutil.rmtree(partial, ignore_errors=True)  # the report now holds every finished model
    seconds["total"] = time.perf_counter() - start
    return CalibrationResult(
        dataset=dataset,
        observations=obs,
        fits=fits,
        ppc=checks,
        comparison=comparison,
        artifacts=artifacts,
        refused=refused,
        recommended=recommended,
        report=report,
        seconds=seconds,
    )


class _Swap:
    """Put staged files or directories in place, keeping what they replace until the end.

    :meth:`put` renames the target aside (beside it, hidden) and the staged path onto it;
    :meth:`undo` removes what was put and renames every target's former content back (in
    reverse order); :meth:`forget` deletes the former contents once all is in place.
    Renames within one file system need no space, so a full disk cannot stop them halfway.
    """

    def __init__(self) -> None:
        self.done: list[tuple[Path, Path | None]] = []

    def put(self, staged: Path, target: Path) -> None:
        """Rename ``staged`` onto ``target``, keeping ``target``'s content aside."""
        aside = None
        if target.exists() or target.is_symlink():
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old",
                                          dir=target.parent)) / target.name  # fmt: skip
            os.replace(target, aside)
        try:
            os.replace(staged, target)
        except BaseException:
            if aside is not None:
                os.replace(aside, target)
                aside.parent.rmdir()
            raise
        self.done.append((target, aside))

    def undo(self) -> None:
        """Remove what was put and put the former contents back."""
        for target, aside in reversed(self.done):
            _remove(target)
            if aside is not None:
                os.replace(aside, target)
                aside.parent.rmdir()
        self.done = []

    def forget(self) -> None:
        """Delete the former contents (everything is in place)."""
        for _, aside in self.done:
            if aside is not None:
                shutil.rmtree(aside.parent, ignore_errors=True)
        self.done = []


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _missing_directories(directory: Path) -> list[Path]:
    """``directory`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:  # not empty (or gone): leave it
        pass


def partial_directory(out: str | Path) -> Path:
    """Where :func:`calibrate` keeps each model as soon as it is checked: ``<out>.partial``
    beside the report directory (removed once the report is written).

    It holds ``fit-<model>.nc`` (load it with :meth:`~bayesrate.models.base.RateModel.load`)
    and ``<model>.json`` (its convergence diagnostics, the PPC statistics that are extreme,
    and its seconds), so a run that is interrupted, or whose later model fails, keeps the
    models it finished.
    """
    out = Path(out)
    return out.parent / f"{out.name}.partial"


def _keep_finished(partial: Path, name: str, model, checks, seconds, progress) -> None:
    """Write one finished model's fit and summary into ``partial`` (each file atomically)."""
    partial.mkdir(parents=True, exist_ok=True)
    model.save(partial / f"fit-{name}.nc")  # atomic (bayesrate.atomic.write_netcdf)
    summary = {
        "model": name,
        "diagnostics": model.diagnostics_.to_dict(),
        "ppc_extreme": {r: checks.failures(replication=r) for r in checks.replications},
        "seconds": {k: v for k, v in seconds.items() if k.endswith(f"_{name}")},
    }
    with atomic_path(partial / f"{name}.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, default=str))  # as `fit` writes them
    progress(f"  {name}: kept in {partial}")


def _fit_and_check(name, obs, config, sampler, method, seed, seconds, progress):
    """Fit one model and run its posterior predictive checks, reporting as it goes."""
    from bayesrate.checks.ppc import ppc_for
    from bayesrate.models import get_model

    progress(f"fitting {name} ({method}) on {obs.n_pages:,} pages ...")
    t0 = time.perf_counter()
    model = get_model(name)(config, sampler)
    with warnings.catch_warnings():
        # a failed gate is reported in the diagnostics and the report, not as a warning
        warnings.simplefilter("ignore")
        model.fit(obs, method=method, progress=progress)
    seconds[f"fit_{name}"] = time.perf_counter() - t0
    d = model.diagnostics_
    progress(
        f"  {name}: {seconds[f'fit_{name}']:.0f} s, r_hat_max {d.r_hat_max:.3f}, "
        f"ess_bulk_min {d.ess_bulk_min:.0f}, divergences {d.divergences} — "
        + ("converged" if model.converged_ else "FAILED convergence gates")
    )
    t0 = time.perf_counter()
    checks = ppc_for(model, obs, seed=seed)
    seconds[f"ppc_{name}"] = time.perf_counter() - t0
    for replication in checks.replications:
        failed = checks.failures(replication=replication)
        progress(
            f"  {name}: PPC extreme statistics ({replication}): "
            + (", ".join(failed) if failed else "none")
        )
    return model, checks


def _export(fits, checks, comparison, dataset, models_root, force, command, notes, progress):
    """Write an artifact for every exportable model whose gates pass (or all, if forced)."""
    from bayesrate.export import write_artifact

    artifacts: dict[str, Path] = {}
    refused: dict[str, str] = {}
    for name, model in fits.items():
        if model.export_gates is None:  # no domain structure to export
            continue
        try:
            artifacts[name] = write_artifact(
                model,
                dataset=dataset,
                root=models_root,
                ppc=checks[name],
                comparison=comparison,
                force=force,
                command=command,
                notes=notes,
            )
        except ArtifactError as exc:
            refused[name] = str(exc)
            progress(f"  not exported: {exc}")
    return artifacts, refused
