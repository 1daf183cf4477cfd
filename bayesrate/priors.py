"""Per-domain Gamma priors on change rates: the artifact the scheduler consumes.

Light on purpose (json + numpy): :mod:`bayesrate.scheduler` reads priors through this
module without importing PyMC. Writing the artifact from a fit lives in
:mod:`bayesrate.export`.

``priors.json`` schema (``schema_version`` 1), all rates **per day**:

.. code-block:: json

    {
      "schema_version": 1,
      "kind": "bayesrate-priors",
      "units": {"rate": "changes per day", "alpha": "pseudo-changes",
                "beta": "pseudo-exposure days"},
      "dataset": "ota-contrib", "data_fingerprint": "<sha256>",
      "model": "hierarchical", "config_hash": "<sha256>",
      "created_utc": "...", "versions": {"bayesrate": "...", "pymc": "...", ...},
      "forced": false, "gates": {"diagnostics": true, "ppc": true},
      "global": {"alpha": 0.8, "beta": 12.0},
      "domains": {"<domain>": {"alpha": 1.1, "beta": 9.0, "n_pages": 4}, ...},
      "hour_of_week": null | {"timezone": "UTC", "bucket_0": "Monday 00:00-01:00",
                              "multipliers": [168 floats, mean 1]}
    }

``global`` is the prior for pages of domains the artifact has not seen; ``hour_of_week``
(from the modulated model) multiplies the rate by local hour of week.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesrate.constants import N_HOUR_OF_WEEK
from bayesrate.errors import ArtifactError

SCHEMA_VERSION = 1
KIND = "bayesrate-priors"
PRIORS_FILE = "priors.json"
UNITS = {"rate": "changes per day", "alpha": "pseudo-changes", "beta": "pseudo-exposure days"}

#: Used when no artifact exists: mean 1 change/day with one pseudo-change and one
#: pseudo-day of exposure — deliberately weak in β (``docs/science.md`` §3: a strong β
#: drags fast pages down under the censored likelihood).
DEFAULT_PRIOR = (1.0, 1.0)


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(α, β) on a rate in changes per day."""

    alpha: float
    beta: float

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ArtifactError(f"Gamma prior {name} must be a positive number, got {value!r}")

    @property
    def mean(self) -> float:
        return self.alpha / self.beta

    @property
    def variance(self) -> float:
        return self.alpha / self.beta**2

    @classmethod
    def from_moments(cls, mean: float, variance: float) -> GammaPrior:
        """The Gamma with this mean and variance (per day)."""
        return cls(alpha=mean**2 / variance, beta=mean / variance)


@dataclass(frozen=True)
class PriorSet:
    """Priors per domain, a global fallback, and optional hour-of-week multipliers."""

    global_prior: GammaPrior
    domains: Mapping[str, GammaPrior] = field(default_factory=dict)
    hour_of_week: np.ndarray | None = None
    timezone: str = "UTC"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.hour_of_week is not None:
            m = np.asarray(self.hour_of_week, dtype=np.float64)
            if m.shape != (N_HOUR_OF_WEEK,) or not np.all(np.isfinite(m)) or (m <= 0).any():
                raise ArtifactError("hour_of_week multipliers must be 168 positive numbers")

    @property
    def forced(self) -> bool:
        return bool(self.metadata.get("forced", False))

    def for_domain(self, domain: str) -> GammaPrior:
        """The domain's prior, or the global fallback for an unseen domain."""
        return self.domains.get(domain, self.global_prior)

    def arrays(self, domains: np.ndarray | list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized lookup: ``(alpha, beta per day)`` for each domain label."""
        labels = np.asarray(domains, dtype=object)
        uniq, inverse = np.unique(labels, return_inverse=True)
        priors = [self.for_domain(str(d)) for d in uniq]
        alpha = np.array([p.alpha for p in priors])[inverse]
        beta = np.array([p.beta for p in priors])[inverse]
        return alpha, beta

    @classmethod
    def default(cls) -> PriorSet:
        """The documented prior used when no artifact is available."""
        return cls(
            global_prior=GammaPrior(*DEFAULT_PRIOR),
            metadata={"model": "default", "note": "no fitted artifact; weak default prior"},
        )

    # ------------------------------------------------------------------ serialisation
    def to_json(self) -> dict[str, Any]:
        meta = dict(self.metadata)
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "units": UNITS,
            **{k: v for k, v in meta.items() if k not in ("schema_version", "kind", "units")},
            "forced": bool(meta.get("forced", False)),
            "global": {"alpha": self.global_prior.alpha, "beta": self.global_prior.beta},
            "domains": {
                name: {"alpha": p.alpha, "beta": p.beta, **_extra(meta, name)}
                for name, p in sorted(self.domains.items())
            },
            "hour_of_week": None
            if self.hour_of_week is None
            else {
                "timezone": self.timezone,
                "bucket_0": "Monday 00:00-01:00",
                "multipliers": [float(x) for x in self.hour_of_week],
            },
        }
        doc.pop("domain_extra", None)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PriorSet:
        if doc.get("kind") != KIND:
            raise ArtifactError(f"not a bayesrate priors file (kind={doc.get('kind')!r})")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ArtifactError(
                f"priors schema version {doc.get('schema_version')!r} is not supported "
                f"(this bayesrate reads version {SCHEMA_VERSION})"
            )
        try:
            global_prior = GammaPrior(float(doc["global"]["alpha"]), float(doc["global"]["beta"]))
            domains = {
                str(name): GammaPrior(float(v["alpha"]), float(v["beta"]))
                for name, v in doc.get("domains", {}).items()
            }
        except (KeyError, TypeError) as exc:
            raise ArtifactError(f"malformed priors file: missing {exc}") from exc
        multipliers = doc.get("hour_of_week")
        meta = {
            k: v
            for k, v in doc.items()
            if k not in ("global", "domains", "hour_of_week", "units", "kind", "schema_version")
        }
        meta["domain_extra"] = {
            str(name): {k: v for k, v in d.items() if k not in ("alpha", "beta")}
            for name, d in doc.get("domains", {}).items()
        }
        return cls(
            global_prior=global_prior,
            domains=domains,
            hour_of_week=None
            if multipliers is None
            else np.asarray(multipliers["multipliers"], dtype=float),
            timezone="UTC" if multipliers is None else str(multipliers.get("timezone", "UTC")),
            metadata=meta,
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``priors.json`` into ``directory`` atomically; returns its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / PRIORS_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> PriorSet:
        """Read ``priors.json`` (or a directory containing it)."""
        path = Path(path)
        if path.is_dir():
            path = path / PRIORS_FILE
        if not path.exists():
            raise ArtifactError(f"no priors artifact at {path}")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{path} is not valid JSON: {exc}") from exc
        return cls.from_json(doc)


def _extra(meta: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(meta.get("domain_extra", {}).get(name, {}))


def find_artifact(root: str | Path = "models", dataset: str | None = None) -> Path | None:
    """The ``priors.json`` to use from ``root``, if any.

    For a dataset (default: the package's default dataset if it has artifacts, else any),
    the model named in ``<root>/<dataset>/recommended.json`` (written by ``bayesrate
    calibrate`` from the model comparison), else the newest artifact.
    """
    from bayesrate.constants import DEFAULT_DATASET

    root = Path(root)
    if not root.is_dir():
        return None
    if dataset is None:
        dataset = DEFAULT_DATASET if (root / DEFAULT_DATASET).is_dir() else None
    datasets = [root / dataset] if dataset else sorted(p for p in root.iterdir() if p.is_dir())
    for directory in datasets:
        recommended = directory / "recommended.json"
        if recommended.is_file():
            try:
                model = json.loads(recommended.read_text())["model"]
            except (json.JSONDecodeError, KeyError) as exc:
                raise ArtifactError(f"{recommended} is malformed: {exc}") from exc
            path = directory / model / PRIORS_FILE
            if path.is_file():
                return path
    found = [p for d in datasets for p in d.glob(f"*/{PRIORS_FILE}")]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
