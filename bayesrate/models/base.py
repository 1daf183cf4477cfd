"""Base class of the PyMC change-rate models (in the manner of pymc-marketing's ModelBuilder).

A model is configured by two dicts merged over class defaults:

``model_config``
    Priors and structural choices; what the model *is*. Hashed into :attr:`RateModel.config_hash`.
``sampler_config``
    How it is fitted (draws, tune, chains, seed, ...); not part of the hash.

Life cycle (lifelines style; fitted attributes end in ``_``)::

    model = HierarchicalModel({"page_sd_scale": 0.5})
    model.fit(observations, method="nuts")        # or "advi", "pathfinder"
    model.idata_            # arviz DataTree: posterior, sample_stats, log_likelihood, constant_data
    model.diagnostics_      # bayesrate.models.diagnostics.Diagnostics
    model.page_summary_     # DataFrame per page: rate_per_day mean, lower/upper 90%, n_visits, ...
    model.save("fit.nc")
    HierarchicalModel.load("fit.nc", data=observations)   # refuses mismatches (ArtifactError)

The fitted result always contains, whatever the model (the interface later stages use):

* ``posterior["log_rate"]`` and ``posterior["rate"]`` — ``(chain, draw, page)``, per hour;
  ``rate`` is the page's time-averaged rate (for the modulated model, base rate × mean multiplier).
* ``log_likelihood["loglik"]`` — ``(chain, draw, page)``: each page's exact interval-censored
  log-likelihood at that draw (the page is the unit of prediction, for LOO).
* ``constant_data`` — per page ``domain`` (label), ``n_visits``, ``n_changes``, ``exposure_hours``.

and the root attributes ``bayesrate_model_type``, ``bayesrate_model_config`` (JSON),
``bayesrate_sampler_config`` (JSON), ``bayesrate_config_hash``, ``bayesrate_data_fingerprint``,
``bayesrate_versions`` (JSON), ``bayesrate_method``, ``bayesrate_diagnostics`` (JSON) and
``converged`` (1 or 0).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_PAGE, HOURS_PER_DAY
from bayesrate.errors import ArtifactError, ObservationError
from bayesrate.models import diagnostics as diag_mod

if TYPE_CHECKING:
    import pymc as pm
    import xarray as xr

    from bayesrate.observations import Observations

log = logging.getLogger(__name__)

METHODS = ("nuts", "advi", "pathfinder")

DEFAULT_SAMPLER_CONFIG: dict[str, Any] = {
    "draws": 1000,
    "tune": 1000,
    "chains": 4,
    "cores": 2,
    "seed": 0,
    "target_accept": 0.8,
    "advi_iterations": 30_000,
    "vi_draws": 1000,
    "pathfinder_paths": 4,
}

#: quantiles reported as the 90% interval in page tables
LOWER_Q, UPPER_Q = 0.05, 0.95


def seed_int(seed: int | str) -> int:
    """The sampler's 32-bit seed (:func:`bayesrate.seeds.seed_int` mod 2^32)."""
    from bayesrate import seeds

    return seeds.seed_int(seed if isinstance(seed, str) else int(seed), bits=32)


def library_versions() -> dict[str, str]:
    """Versions of the libraries a fit depends on."""
    import importlib.metadata as md

    out = {}
    for name in (
        "bayesrate",
        "pymc",
        "pytensor",
        "arviz",
        "nutpie",
        "pymc-extras",
        "numpy",
        "xarray",
    ):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "missing"
    return out


def _merge(defaults: Mapping[str, Any], given: Mapping[str, Any] | None, what: str) -> dict:
    out = copy.deepcopy(dict(defaults))
    for key, value in (given or {}).items():
        if key not in out:
            raise ValueError(f"unknown {what} key {key!r}; known: {sorted(out)}")
        out[key] = value
    return out


def check_config_numbers(
    config: Mapping[str, Any], *, positive: tuple[str, ...] = (), finite: tuple[str, ...] = ()
) -> None:
    """Raise ``ValueError`` unless the ``positive`` keys are finite numbers > 0 and the
    ``finite`` keys finite numbers (booleans are not numbers here)."""
    for key in (*positive, *finite):
        value = config[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and (key not in positive or value > 0)):
            kind = "a finite number > 0" if key in positive else "a finite number"
            raise ValueError(f"model_config {key!r} must be {kind}, got {value!r}")


class RateModel:
    """A PyMC model of per-page change rates fitted on sufficient statistics.

    Subclasses set :attr:`model_type`, :attr:`default_model_config` and implement
    :meth:`_build` (the PyMC graph) and :meth:`pointwise_loglik` (the same likelihood in
    numpy, per draw and page); they may extend :meth:`_postprocess`.

    Parameters
    ----------
    model_config
        Overrides of :attr:`default_model_config` (unknown keys raise ``ValueError``).
    sampler_config
        Overrides of :data:`DEFAULT_SAMPLER_CONFIG`.
    """

    model_type: ClassVar[str] = "base"
    default_model_config: ClassVar[dict[str, Any]] = {}
    #: per-class overrides of DEFAULT_SAMPLER_CONFIG
    sampler_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        model_config: Mapping[str, Any] | None = None,
        sampler_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_config = _merge(self.default_model_config, model_config, "model_config")
        defaults = {**DEFAULT_SAMPLER_CONFIG, **self.sampler_defaults}
        self.sampler_config = _merge(defaults, sampler_config, "sampler_config")
        self._validate_config()
        self.model: pm.Model | None = None
        self.data_: Observations | None = None
        self.idata_: xr.DataTree | None = None
        self.diagnostics_: diag_mod.Diagnostics | None = None
        self.method_: str | None = None
        self.data_fingerprint_: str | None = None
        self._build_notes: dict[str, Any] = {}

    # ------------------------------------------------------------------ config
    def _validate_config(self) -> None:
        """Subclass hook: raise ``ValueError`` on an invalid model_config."""

    @property
    def config_hash(self) -> str:
        """SHA-256 of the model type and model_config (sorted JSON)."""
        payload = json.dumps(
            {"model_type": self.model_type, "model_config": self.model_config},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def __repr__(self) -> str:
        state = "fitted" if self.idata_ is not None else "unfitted"
        return f"{type(self).__name__}({self.model_config!r}, {state})"

    # ------------------------------------------------------------------ building
    @staticmethod
    def check_data(data: Observations) -> None:
        """Raise :class:`ObservationError` if the data cannot be fitted at all."""
        if data.n_pages == 0:
            raise ObservationError("no pages to fit", field="page")
        if data.n_intervals == 0:
            raise ObservationError(
                "no intervals to fit: every page has a single visit, so no change can be observed",
                field="time",
                pages=list(data.pages.index),
            )

    def coords(self, data: Observations) -> dict[str, Any]:
        """Coordinates of the fixed dimensions."""
        return {DIM_PAGE: _labels(data.pages.index)}

    def build_model(self, data: Observations) -> pm.Model:
        """Build (and keep in :attr:`model`) the PyMC model of ``data``."""
        self.check_data(data)
        self._build_notes = {}
        self.model = self._build(data)
        self.data_ = data
        return self.model

    def _build(self, data: Observations) -> pm.Model:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        data: Observations,
        method: str = "nuts",
        *,
        progressbar: bool = False,
        **sampler_overrides: Any,
    ) -> Self:
        """Fit the model to ``data``.

        Parameters
        ----------
        data
            The observations.
        method
            ``"nuts"`` (nutpie), ``"advi"`` (PyMC mean-field ADVI) or ``"pathfinder"``
            (pymc-extras).
        progressbar
            Show the sampler's progress bar.
        **sampler_overrides
            Per-call overrides of :attr:`sampler_config` (e.g. ``draws=200``).

        Returns
        -------
        RateModel
            ``self``, with ``idata_``, ``diagnostics_`` and ``page_summary_`` set. A fit
            that misses the convergence gates emits
            :class:`~bayesrate.models.diagnostics.ConvergenceWarning` and is marked
            ``converged = 0``.
        """
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
        cfg = _merge(self.sampler_config, sampler_overrides, "sampler_config")
        start = time.perf_counter()
        model = self.build_model(data)
        timing: dict[str, float] = {}
        method_failures: list[str] = []
        if method == "nuts":
            idata = self._fit_nuts(model, cfg, progressbar, timing)
        elif method == "advi":
            idata = self._fit_advi(model, cfg, progressbar, timing, method_failures)
        else:
            idata = self._fit_pathfinder(model, cfg, progressbar, timing, method_failures)
        idata = self._postprocess(idata, data)
        seconds = time.perf_counter() - start
        extra = dict(self._build_notes)
        if method_failures:
            extra["method_failures"] = method_failures
        diag = diag_mod.compute(
            idata,
            self.diagnostic_vars(idata),
            method=method,
            seconds=seconds,
            compile_seconds=timing.get("compile", math.nan),
            sampling_seconds=timing.get("sampling", math.nan),
            extra=extra,
        )
        self.idata_ = idata
        self.diagnostics_ = diag
        self.method_ = method
        self.data_fingerprint_ = data.fingerprint
        self._stamp(cfg)
        diag_mod.check(diag, self.model_type)
        return self

    def _fit_nuts(self, model, cfg, progressbar, timing) -> xr.DataTree:
        import nutpie

        t0 = time.perf_counter()
        compiled = nutpie.compile_pymc_model(model)
        t1 = time.perf_counter()
        idata = nutpie.sample(
            compiled,
            draws=int(cfg["draws"]),
            tune=int(cfg["tune"]),
            chains=int(cfg["chains"]),
            cores=max(1, min(int(cfg["cores"]), int(cfg["chains"]))),
            seed=seed_int(cfg["seed"]),
            progress_bar=progressbar,
            save_warmup=False,
            target_accept=float(cfg["target_accept"]),
        )
        timing["compile"] = t1 - t0
        timing["sampling"] = time.perf_counter() - t1
        return idata

    def _fit_advi(self, model, cfg, progressbar, timing, failures) -> xr.DataTree:
        import pymc as pm

        t0 = time.perf_counter()
        with model:
            approx = pm.fit(
                n=int(cfg["advi_iterations"]),
                method="advi",
                random_seed=seed_int(cfg["seed"]),
                progressbar=progressbar,
            )
            idata = approx.sample(int(cfg["vi_draws"]), random_seed=seed_int(cfg["seed"]) + 1)
        timing["sampling"] = time.perf_counter() - t0
        hist = np.asarray(approx.hist, dtype=float)
        window = max(len(hist) // 10, 1)
        if len(hist) >= 2 * window and np.isfinite(hist[-2 * window :]).all():
            last, prev = hist[-window:].mean(), hist[-2 * window : -window].mean()
            rel = abs(last - prev) / max(abs(last), 1.0)
            self._build_notes["advi_final_loss"] = float(last)
            self._build_notes["advi_relative_loss_change"] = float(rel)
            if rel > 0.01:
                failures.append(f"ADVI loss still moving ({rel:.3%} over the last 10%)")
        else:
            failures.append("ADVI loss is not finite")
        return idata

    def _fit_pathfinder(self, model, cfg, progressbar, timing, failures) -> xr.DataTree:
        with warnings.catch_warnings():
            # better_optimize (a pymc-extras dependency) uses its own deprecated constant
            warnings.filterwarnings(
                "ignore", category=DeprecationWarning, message=".*better_optimize.*"
            )
            import pymc_extras as pmx

            t0 = time.perf_counter()
            idata = pmx.fit(
                method="pathfinder",
                model=model,
                num_paths=int(cfg["pathfinder_paths"]),
                num_draws=int(cfg["vi_draws"]),
                random_seed=seed_int(cfg["seed"]),
                progressbar=progressbar,
            )
        timing["sampling"] = time.perf_counter() - t0
        if "pathfinder" in idata.children:
            pf = idata["pathfinder"].to_dataset()
            if "pareto_k" in pf:
                k = float(np.asarray(pf["pareto_k"]).max())
                self._build_notes["pathfinder_pareto_k"] = k
                if k > 0.7:
                    failures.append(f"pathfinder Pareto k {k:.2f} > 0.7")
            if "all_paths_failed" in pf and bool(pf["all_paths_failed"]):
                failures.append("all pathfinder paths failed")
        return idata

    # ------------------------------------------------------------------ post-processing
    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        """Posterior variables the convergence gates are computed over."""
        names = [rv.name for rv in self.model.free_RVs] if self.model is not None else []
        names.append("log_rate")
        post = idata["posterior"]
        return [n for n in dict.fromkeys(names) if n in post.data_vars]

    def log_rate_draws(self, posterior) -> np.ndarray:
        """``(chain, draw, page)`` log page rates per hour, from the posterior group."""
        return np.asarray(posterior["log_rate"].transpose("chain", "draw", DIM_PAGE))

    def pointwise_loglik(self, posterior, data: Observations) -> np.ndarray:
        """``(chain, draw, page)`` exact log-likelihood per page at each draw."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _postprocess(self, idata: xr.DataTree, data: Observations) -> xr.DataTree:
        """Add ``rate``, ``log_likelihood/loglik`` and ``constant_data`` to the result."""
        import xarray as xr

        post = idata["posterior"].to_dataset()
        if "log_rate" not in post and "rate" in post:
            post["log_rate"] = np.log(post["rate"])
        post = self._add_derived(post, data)
        ll = self.pointwise_loglik(post, data)
        page_coord = {DIM_PAGE: post[DIM_PAGE].values}
        loglik = xr.Dataset(
            {"loglik": (("chain", "draw", DIM_PAGE), ll)},
            coords={"chain": post["chain"].values, "draw": post["draw"].values, **page_coord},
        )
        stats = data.interval_stats
        const = xr.Dataset(
            {
                "domain": ((DIM_PAGE,), _labels(data.pages["domain"])),
                "n_visits": ((DIM_PAGE,), stats.n_visits),
                "n_changes": ((DIM_PAGE,), stats.n_changes),
                "exposure_hours": ((DIM_PAGE,), stats.exposure),
            },
            coords=page_coord,
        )
        children = {"posterior": xr.DataTree(post)}
        for name in ("sample_stats",):
            if name in idata.children:
                children[name] = xr.DataTree(idata[name].to_dataset())
        children["log_likelihood"] = xr.DataTree(loglik)
        children["constant_data"] = xr.DataTree(const)
        return xr.DataTree(children=children)

    def _add_derived(self, post: xr.Dataset, data: Observations) -> xr.Dataset:
        """Subclass hook: add derived variables; default adds ``rate = exp(log_rate)``."""
        post["rate"] = np.exp(post["log_rate"])
        post["rate"].attrs["units"] = "changes per hour"
        return post

    def _stamp(self, cfg: Mapping[str, Any]) -> None:
        attrs = self.idata_.attrs
        attrs["bayesrate_model_type"] = self.model_type
        attrs["bayesrate_model_config"] = json.dumps(self.model_config, sort_keys=True)
        attrs["bayesrate_sampler_config"] = json.dumps(dict(cfg), sort_keys=True, default=str)
        attrs["bayesrate_config_hash"] = self.config_hash
        attrs["bayesrate_data_fingerprint"] = self.data_fingerprint_ or ""
        attrs["bayesrate_versions"] = json.dumps(library_versions(), sort_keys=True)
        attrs["bayesrate_method"] = self.method_ or ""
        attrs["bayesrate_diagnostics"] = json.dumps(self.diagnostics_.to_dict(), default=str)
        attrs["converged"] = int(bool(self.diagnostics_.converged))

    # ------------------------------------------------------------------ results
    def _require_fit(self) -> None:
        if self.idata_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() or load()")

    @property
    def converged_(self) -> bool:
        self._require_fit()
        return bool(self.idata_.attrs.get("converged", 0))

    def rate_draws(self) -> xr.DataArray:
        """Posterior draws of each page's rate per hour, ``(chain, draw, page)``."""
        self._require_fit()
        return self.idata_["posterior"]["rate"]

    @property
    def page_summary_(self) -> pd.DataFrame:
        """Per page: domain, rate_per_day (posterior mean), lower/upper 90%, counts."""
        self._require_fit()
        rate = np.asarray(self.rate_draws().transpose("chain", "draw", DIM_PAGE))
        flat = rate.reshape(-1, rate.shape[-1]) * HOURS_PER_DAY
        const = self.idata_["constant_data"]
        return pd.DataFrame(
            {
                "page": self.idata_["posterior"][DIM_PAGE].values,
                "domain": np.asarray(const["domain"]),
                "rate_per_day": flat.mean(axis=0),
                "lower_per_day": np.quantile(flat, LOWER_Q, axis=0),
                "upper_per_day": np.quantile(flat, UPPER_Q, axis=0),
                "n_visits": np.asarray(const["n_visits"]),
                "n_changes": np.asarray(const["n_changes"]),
            }
        )

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the fitted result (NetCDF4, with self-describing root attributes)."""
        self._require_fit()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.idata_.to_netcdf(path, engine="h5netcdf")
        return path

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        data: Observations | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> RateModel:
        """Load a saved fit; refuse one that does not match.

        Parameters
        ----------
        path
            A file written by :meth:`save`.
        data
            If given, its fingerprint must equal the fitted data's.
        model_config
            If given, the merged config's hash must equal the saved one.

        Raises
        ------
        ArtifactError
            Not a bayesrate fit, a different model type (when called on a subclass),
            a different config, or different data.
        """
        import xarray as xr

        from bayesrate.models import MODELS

        path = Path(path)
        if not path.is_file():
            raise ArtifactError(f"no saved fit at {path}")
        try:
            idata = xr.open_datatree(path, engine="h5netcdf").load()
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{path} is not a readable NetCDF fit: {exc}") from exc
        attrs = idata.attrs
        model_type = attrs.get("bayesrate_model_type")
        if model_type not in MODELS:
            raise ArtifactError(f"{path} is not a bayesrate model fit (model type {model_type!r})")
        target = MODELS[model_type]
        if cls is not RateModel and target is not cls:
            raise ArtifactError(
                f"{path} holds a {model_type!r} fit; cannot load it into {cls.__name__} "
                f"({cls.model_type!r})"
            )
        saved_config = json.loads(attrs["bayesrate_model_config"])
        try:
            model = target(saved_config, json.loads(attrs.get("bayesrate_sampler_config", "{}")))
        except ValueError as exc:
            raise ArtifactError(
                f"{path}: saved config does not fit {target.__name__}: {exc}"
            ) from exc
        if model.config_hash != attrs.get("bayesrate_config_hash"):
            raise ArtifactError(f"{path}: config hash does not match its own config (edited file?)")
        if model_config is not None:
            wanted = target(model_config)
            if wanted.config_hash != model.config_hash:
                raise ArtifactError(
                    f"{path} was fitted with config {saved_config}, not the requested "
                    f"{wanted.model_config}"
                )
        fingerprint = attrs.get("bayesrate_data_fingerprint", "")
        if data is not None and data.fingerprint != fingerprint:
            raise ArtifactError(
                f"{path} was fitted on different data (fingerprint {fingerprint[:12]}..., "
                f"given {data.fingerprint[:12]}...)"
            )
        model.idata_ = idata
        model.data_ = data
        model.method_ = attrs.get("bayesrate_method")
        model.data_fingerprint_ = fingerprint
        model.diagnostics_ = diag_mod.Diagnostics.from_dict(
            json.loads(attrs.get("bayesrate_diagnostics", '{"method": "unknown"}'))
        )
        return model


def _labels(index) -> np.ndarray:
    """Labels as a NetCDF-friendly array (object labels become str)."""
    values = np.asarray(index)
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        return values.astype(str)
    return values
