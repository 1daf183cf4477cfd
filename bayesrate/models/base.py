"""Base class of the PyMC change-rate models (in the manner of pymc-marketing's ModelBuilder).

A model is configured by two dicts merged over class defaults:

``model_config``
    Priors and structural choices; what the model *is*. Hashed into :attr:`RateModel.config_hash`.
``sampler_config``
    How it is fitted (draws, tune, chains, seed, ...); not part of the hash.

Life cycle (lifelines style; fitted attributes end in ``_``)::

    model = HierarchicalModel({"page_sd_scale": 0.5})
    model.fit(observations, method="nuts")        # or "advi", "pathfinder"
    model.idata_            # arviz DataTree: posterior, sample_stats, observed_data, ...
    model.diagnostics_      # bayesrate.models.diagnostics.Diagnostics
    model.page_summary_     # DataFrame per page: rate_per_day mean, lower/upper 90%, n_visits, ...
    model.compute_log_likelihood()         # PyMC's pointwise log-likelihood, per group
    model.sample_posterior_predictive()    # PyMC's predictive draws of the observed groups
    model.predict(new_observations)        # detections of new pages on their visit times
    model.save("fit.nc")
    HierarchicalModel.load("fit.nc")       # rebuilt from its fit_data; refuses mismatches

The likelihood is observed (``bayesrate.models.likelihood``): ``detections`` (one
Binomial per interval group with a detection, dim ``interval_group``) and ``quiet`` (per
page, the groups without one). The fitted result always contains, whatever the model:

* ``posterior["log_rate"]`` and ``posterior["rate"]`` — ``(chain, draw, page)``, per hour;
  ``rate`` is the page's time-averaged rate (for the modulated model, base rate × mean multiplier).
* ``observed_data`` — ``detections`` and ``quiet`` as PyMC observed them.
* ``constant_data`` — per page ``domain`` (label), ``n_visits``, ``n_changes``,
  ``exposure_hours``; per interval group its ``group_page`` and ``group_trials``.
* ``fit_data`` — the observations themselves (visits and pages), from which :meth:`load`
  rebuilds the data and the model.

and, when asked, ``log_likelihood`` (:meth:`compute_log_likelihood`) and
``posterior_predictive`` (:meth:`sample_posterior_predictive`); the root attributes
``bayesrate_model_type``, ``bayesrate_model_config`` (JSON), ``bayesrate_sampler_config``
(JSON), ``bayesrate_config_hash``, ``bayesrate_data_fingerprint``, ``bayesrate_versions``
(JSON), ``bayesrate_method``, ``bayesrate_diagnostics`` (JSON) and ``converged`` (1 or 0).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
import pandas as pd

from bayesrate.constants import DIM_PAGE, HOURS_PER_DAY, MAX_DIVERGENCES
from bayesrate.errors import ArtifactError, ObservationError
from bayesrate.models import diagnostics as diag_mod
from bayesrate.models import likelihood as lik_names
from bayesrate.models.progress import silent

if TYPE_CHECKING:
    import pymc as pm
    import xarray as xr

    from bayesrate.models.groups import IntervalGroups
    from bayesrate.observations import Observations
    from bayesrate.predictive import Groups, Prediction

log = logging.getLogger(__name__)

METHODS = ("nuts", "advi", "pathfinder")

DEFAULT_SAMPLER_CONFIG: dict[str, Any] = {
    "draws": 1000,
    #: nutpie's step size and mass matrix settle within 300 steps for the censored and
    #: hierarchical models on every data set measured (docs/models.md, "Sampler defaults";
    #: nutpie's own default is 400); the modulated and bursty models keep 1,000
    "tune": 300,
    "chains": 4,
    "cores": 2,
    "seed": 0,
    "target_accept": 0.8,
    #: NUTS is run again at each of these, in turn, while a run has divergent transitions
    "target_accept_retry": [],
    #: a near miss of R-hat or ESS samples once more with MORE_DRAWS times the draws
    #: (False: never; for fits whose convergence nothing reads, e.g. API tests)
    "more_draws": True,
    "advi_iterations": 30_000,
    "vi_draws": 1000,
    "pathfinder_paths": 4,
}

#: after divergences at every ``target_accept`` (and after the model's own fallback,
#: :meth:`RateModel._fall_back`), NUTS runs once more at the last ``target_accept`` with
#: this many tuning steps (or three times ``tune``, whichever is more): an excursion
#: recovery world (4 domains × 60 pages, domain means already non-centred) kept 1
#: divergence at 0.99 after 300 steps and none after 1,000 (docs/models.md)
LONGER_TUNE = 1000

#: a NUTS fit without divergences that misses the R-hat or ESS gate by at most this factor
#: (:func:`bayesrate.models.diagnostics.near_miss`) runs once more with this many times the
#: draws, at the settings of its last run: the main job's excursion fit of ota-contrib
#: missed R-hat by 0.001 (1.011 on ``sigma_page``, 4 × 2,000 draws)
MORE_DRAWS = 2

#: quantiles reported as the 90% interval in page tables
LOWER_Q, UPPER_Q = 0.05, 0.95
#: how :meth:`RateModel.page_summary` summarises each page's posterior
PAGE_SUMMARY_METHODS = ("auto", "conditional", "draws")
#: how :meth:`RateModel.predict` gives pages their rates
PAGE_RATES = ("population", "posterior")
#: the predictive models' deterministic: each group's probability of a detection
DETECTION_PROBABILITY = "detection_probability"


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


@contextlib.contextmanager
def reproducible_compilation():
    """Compile PyTensor graphs with IEEE arithmetic (numba ``fastmath`` off) in this block.

    PyTensor's numba backend compiles with LLVM fast-math flags by default (``contract``,
    ``reassoc``, ``afn``, ...). A graph compiled from scratch then differs in its last bits
    from the same graph assembled from PyTensor's on-disk numba cache (cached kernels are
    linked as object code, so the optimiser contracts and reorders different operations),
    and NUTS amplifies one-ulp differences in the gradient into different draws: at a fixed
    seed a fit's draws depended on whether the compile cache was cold or warm. With IEEE
    arithmetic the compiled function is bit-identical either way (``docs/models.md``,
    "Reproducibility"); it costs 0–9% of a gradient (``benchmarks/bench_ieee_compile.py``).
    Every PyTensor compile of a
    model (sampling, predictive draws, pointwise log-likelihood) runs inside this block.
    """
    import pytensor

    with pytensor.config.change_flags(numba__fastmath=False):
        yield


@contextlib.contextmanager
def _quiet_pymc_sampling_log():
    """Silence PyMC's ``Sampling: [...]`` info line (a library call is not a session)."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _last_run_settings(run: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """The tuning and ``target_accept`` of one of ``nuts_runs``, to sample again alike."""
    return {
        "tune": run.get("tune", cfg["tune"]),
        "target_accept": run["target_accept"],
        "target_accept_retry": [],
    }


def target_accepts(sampler_config: Mapping[str, Any]) -> list[float]:
    """``target_accept`` then the retries above it; ``ValueError`` outside (0, 1).

    A user's higher ``target_accept`` skips the retries it already exceeds.
    """
    first = float(sampler_config["target_accept"])
    retries = sorted(float(v) for v in sampler_config.get("target_accept_retry") or [])
    if not all(0.0 < v < 1.0 for v in (first, *retries)):
        raise ValueError(
            "target_accept and target_accept_retry must lie within (0, 1), got "
            f"{first} and {retries}"
        )
    return [first, *(v for v in retries if v > first)]


def _merge(defaults: Mapping[str, Any], given: Mapping[str, Any] | None, what: str) -> dict:
    out = copy.deepcopy(dict(defaults))
    for key, value in (given or {}).items():
        if key not in out:
            raise ValueError(f"unknown {what} key {key!r}; known: {sorted(out)}")
        out[key] = value
    return out


def config_hash(model_type: str, model_config: Mapping[str, Any]) -> str:
    """SHA-256 of a model type and a model_config (sorted JSON)."""
    payload = json.dumps(
        {"model_type": model_type, "model_config": dict(model_config)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


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
    :meth:`_page_log_rates` (the page level of the graph), :meth:`_population_log_rates`
    (log-rates of new pages, for :meth:`predict`) and :meth:`_new_page_draws` (the
    population's draws for new pages in numpy); a model with hour-of-week multipliers
    overrides :meth:`_log_multiplier`. They may extend :meth:`_add_derived`.

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
    #: whether :mod:`bayesrate.checks.marginal` integrates its pages' rates out (the
    #: leave-one-page-out of ``bayesrate calibrate``)
    marginal_loo: ClassVar[bool] = True
    #: the PPC statistics that gate a prior artifact, per replication (``{"mixed":
    #: POPULATION_GATES}``); ``None``: the model has no domain structure to export
    #: (:func:`bayesrate.export.write_artifact` refuses it)
    export_gates: ClassVar[Mapping[str, tuple[str, ...]] | None] = None
    #: whether the likelihood is observed (interval groups; the dynamic models' pages, their
    #: paths integrated out), so that PyMC's pointwise log-likelihood and posterior
    #: predictive draws of it exist
    observed_groups: ClassVar[bool] = True
    #: whether :meth:`page_summary` can average each page's exact conditional posterior
    #: over the population draws (pages independent given the population parameters, with
    #: the plain censored likelihood)
    conditional_pages: ClassVar[bool] = False

    def __init__(
        self,
        model_config: Mapping[str, Any] | None = None,
        sampler_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_config = _merge(self.default_model_config, model_config, "model_config")
        defaults = {**DEFAULT_SAMPLER_CONFIG, **self.sampler_defaults}
        self.sampler_config = _merge(defaults, sampler_config, "sampler_config")
        target_accepts(self.sampler_config)
        self._validate_config()
        self._model: pm.Model | None = None
        self.data_: Observations | None = None
        self.idata_: xr.DataTree | None = None
        self.diagnostics_: diag_mod.Diagnostics | None = None
        self.method_: str | None = None
        self.data_fingerprint_: str | None = None
        self._build_notes: dict[str, Any] = {}
        self._page_summaries: dict[tuple, pd.DataFrame] = {}
        #: the parameterisation a fit fell back to after divergences (:meth:`_fall_back`)
        self._fallback: str | None = None
        #: the model last compiled for NUTS and its compilation, while a fit runs
        self._compiled: tuple[Any, Any] | None = None

    # ------------------------------------------------------------------ config
    def _validate_config(self) -> None:
        """Subclass hook: raise ``ValueError`` on an invalid model_config."""

    @property
    def config_hash(self) -> str:
        """SHA-256 of the model type and model_config (sorted JSON)."""
        return config_hash(self.model_type, self.model_config)

    @property
    def timezone(self) -> str:
        """The clock of hour-of-week effects and checks (``"UTC"`` unless configured)."""
        return str(self.model_config.get("timezone", "UTC"))

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
        return {DIM_PAGE: coord_labels(data.pages.index)}

    def build_model(self, data: Observations) -> pm.Model:
        """Build (and keep in :attr:`model`) the PyMC model of ``data``."""
        self.check_data(data)
        self._build_notes = {}
        self._model = self._build(data)
        self.data_ = data
        return self._model

    @property
    def model(self) -> pm.Model | None:
        """The PyMC model of the fitted data (rebuilt on first use after :meth:`load`)."""
        if self._model is None and self.data_ is not None:
            self.build_model(self.data_)
        return self._model

    def _build(self, data: Observations) -> pm.Model:
        """The fitted model: page log-rates, multipliers, observed interval groups."""
        import pymc as pm

        with pm.Model(coords=self.coords(data)) as model:
            log_rate = self._page_log_rates(data)
            log_multiplier = self._log_multiplier()
            self._add_likelihood(data, log_rate, log_multiplier)
        return model

    def _page_log_rates(self, data: Observations):  # pragma: no cover - abstract
        """Add the page level to the current model; return log page rates per hour."""
        raise NotImplementedError

    def _log_multiplier(self):
        """Add hour-of-week effects to the current model; ``None`` for constant rates."""
        return None

    def fitted_groups(self, data: Observations) -> IntervalGroups:
        """The interval groups the fitted likelihood observes (by interval length here)."""
        from bayesrate.models.groups import interval_groups

        return interval_groups(data)

    def _add_likelihood(self, data: Observations, log_rate, log_multiplier) -> None:
        from bayesrate.models import likelihood as lik

        groups = self.fitted_groups(data)
        changed = groups.select(groups.detected > 0)
        lik.detections(changed, log_rate, lik.log_exposure(changed, log_multiplier))
        quiet = groups.select(groups.detected == 0)
        lik.quiet(quiet, log_rate, log_multiplier, self._quiet_span(data, changed))

    def _quiet_span(self, data: Observations, busy: IntervalGroups):
        """The quiet exposure as span minus ``busy`` groups (models with multipliers)."""
        return None

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        data: Observations,
        method: str = "nuts",
        *,
        progressbar: bool = False,
        progress: Callable[[str], None] | None = None,
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
            Show the sampler's own progress bar (a terminal or notebook widget).
        progress
            Receives plain progress lines as the fit goes: compiling, then every
            :data:`~bayesrate.models.progress.PROGRESS_EVERY` seconds the chains, draws,
            divergences and elapsed time of NUTS
            (:class:`~bayesrate.models.progress.SamplerProgress`), then the post-fit. The
            CLI prints them on stderr unless ``--quiet``.
        **sampler_overrides
            Per-call overrides of :attr:`sampler_config` (e.g. ``draws=200``).

        Returns
        -------
        RateModel
            ``self``, with ``idata_``, ``diagnostics_`` and ``page_summary_`` set. NUTS
            that keeps divergences at every ``target_accept`` runs again, first with the
            model's fallback parameterisation (:meth:`_fall_back`), then once with
            :data:`LONGER_TUNE` tuning steps. A NUTS fit without divergences that misses
            R-hat or ESS by at most a factor :data:`MORE_DRAWS`
            (:func:`~bayesrate.models.diagnostics.near_miss`) samples once more with
            that many times the draws: decided on the sampled variables before the
            post-processing when they show the near miss (only the rerun's draws are
            post-processed then), else on all :meth:`diagnostic_vars` after it
            (``sampler_config["more_draws"] = False``: never).
            ``diagnostics_.extra["nuts_runs"]`` lists every run and what changed. A fit
            that misses the convergence gates emits
            :class:`~bayesrate.models.diagnostics.ConvergenceWarning` and is marked
            ``converged = 0``.
        """
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
        cfg = _merge(self.sampler_config, sampler_overrides, "sampler_config")
        start = time.perf_counter()
        timing: dict[str, float] = {}
        method_failures: list[str] = []
        say = progress if progress is not None else silent
        self._fallback = None
        with reproducible_compilation():
            say(f"{self.model_type}: building the model on {data.n_pages:,} pages ...")
            model = self.build_model(data)
            if method == "nuts":
                model, idata = self._sample_nuts(data, model, cfg, progressbar, timing, progress)
            else:
                say(f"{self.model_type}: {method} ...")
                fit_vi = self._fit_advi if method == "advi" else self._fit_pathfinder
                idata = fit_vi(model, cfg, progressbar, timing, method_failures)
            if method == "nuts" and cfg["more_draws"]:
                # decided on the sampled variables first, so that only a rerun's draws
                # are post-processed (a dynamic model's derived draws and Laplace check
                # take tens of seconds on ota-contrib)
                names = self.diagnostic_vars(idata)  # those the draws hold before it
                sampled = (
                    self._diagnostics(idata, names, method, start, timing, self._build_notes)
                    if names
                    else None
                )
                if sampled is not None and diag_mod.near_miss(sampled, MORE_DRAWS):
                    idata = self._more_draws(model, cfg, sampled, progressbar, timing, progress)
            idata, diag = self._checked(idata, data, method, start, timing, method_failures, say)
            if (
                method == "nuts"
                and cfg["more_draws"]
                and "more_draws" not in self._build_notes
                and diag_mod.near_miss(diag, MORE_DRAWS)
            ):
                idata = self._more_draws(model, cfg, diag, progressbar, timing, progress)
                idata, diag = self._checked(
                    idata, data, method, start, timing, method_failures, say
                )
        say(f"{self.model_type}: fitted in {diag.seconds:.0f} s")
        self.idata_ = idata
        self._page_summaries = {}
        self.diagnostics_ = diag
        self.method_ = method
        self.data_fingerprint_ = data.fingerprint
        self._compiled = None
        self._stamp(cfg)
        diag_mod.check(diag, self.model_type)
        return self

    def _sample_nuts(self, data, model, cfg, progressbar, timing, progress):
        """NUTS at each ``target_accept`` in turn; after divergences at every one, once
        more with the model's fallback parameterisation (:meth:`_fall_back`, which
        rebuilds the model), then once with :data:`LONGER_TUNE` tuning steps. Returns the
        model sampled last and its draws."""
        say = progress if progress is not None else silent
        idata = self._fit_nuts(model, cfg, progressbar, timing, progress)
        if self._diverged() and self._fall_back():
            say(f"{self.model_type}: divergences at every target_accept; again with "
                f"{self._fallback} ...")  # fmt: skip
            runs = self._build_notes["nuts_runs"]
            model = self.build_model(data)  # new notes: the runs so far passed on
            idata = self._again(model, cfg, runs, progressbar, timing, progress)
            self._build_notes["fallback"] = self._fallback
        if self._diverged():
            tune = max(LONGER_TUNE, 3 * int(cfg["tune"]))
            last = target_accepts(cfg)[-1]
            longer = {**cfg, "tune": tune, "target_accept": last, "target_accept_retry": []}
            say(f"{self.model_type}: divergences at every target_accept; again with "
                f"{tune} tuning steps ...")  # fmt: skip
            runs = self._build_notes["nuts_runs"]
            idata = self._again(model, longer, runs, progressbar, timing, progress, tune=tune)
            self._build_notes["longer_tuning"] = tune
        return model, idata

    def _more_draws(self, model, cfg, diag, progressbar, timing, progress) -> xr.DataTree:
        """NUTS once more with :data:`MORE_DRAWS` times the draws, at the tuning and
        ``target_accept`` of the last run, after the near miss ``diag``."""
        say = progress if progress is not None else silent
        draws = MORE_DRAWS * int(cfg["draws"])
        say(f"{self.model_type}: {'; '.join(diag.failures)}; again with {draws} draws ...")
        runs = self._build_notes["nuts_runs"]
        more = {**cfg, **_last_run_settings(runs[-1], cfg), "draws": draws}
        idata = self._again(model, more, runs, progressbar, timing, progress, draws=draws)
        self._build_notes["more_draws"] = draws
        return idata

    def _checked(self, idata, data, method, start, timing, method_failures, say):
        """Post-process the draws, run the method's own checks and compute the
        diagnostics; returns ``(idata, diagnostics)``."""
        say(f"{self.model_type}: post-processing the draws ...")
        idata = self._postprocess(idata, data)
        failures = [*method_failures, *self._fit_checks(idata, data)]
        extra = dict(self._build_notes)
        if failures:
            extra["method_failures"] = failures
        names = self.diagnostic_vars(idata)
        return idata, self._diagnostics(idata, names, method, start, timing, extra)

    def _diagnostics(self, idata, names, method, start, timing, extra) -> diag_mod.Diagnostics:
        """The convergence diagnostics of ``idata`` over the variables ``names``."""
        return diag_mod.compute(
            idata,
            names,
            method=method,
            seconds=time.perf_counter() - start,
            compile_seconds=timing.get("compile", math.nan),
            sampling_seconds=timing.get("sampling", math.nan),
            extra=dict(extra),
        )

    def _diverged(self) -> bool:
        """The last NUTS run kept more than :data:`MAX_DIVERGENCES` divergences."""
        return self._build_notes["nuts_runs"][-1]["divergences"] > MAX_DIVERGENCES

    def _again(self, model, cfg, runs, progressbar, timing, progress, **changed) -> xr.DataTree:
        """NUTS once more after divergences at every ``target_accept``: ``runs`` (those so
        far) and the new ones in ``nuts_runs``, each new one tagged with what changed
        (``changed``, and the fallback parameterisation if any), the compile and sampling
        seconds of every attempt added up."""
        if self._fallback is not None:
            changed["parameterisation"] = self._fallback
        first = dict(timing)
        idata = self._fit_nuts(model, cfg, progressbar, timing, progress)
        for key, seconds in first.items():
            timing[key] += seconds
        new = [{**run, **changed} for run in self._build_notes["nuts_runs"]]
        self._build_notes["nuts_runs"] = runs + new
        return idata

    def _fall_back(self) -> bool:
        """After NUTS kept divergences at every ``target_accept``: switch to a
        parameterisation that removes the funnel they point at, set :attr:`_fallback` to
        its name and return True (the fit rebuilds the model and samples again, and
        reports both attempts in ``diagnostics_.extra["nuts_runs"]``); False if there is
        nothing to switch (the default)."""
        return False

    def _fit_nuts(self, model, cfg, progressbar, timing, progress=None) -> xr.DataTree:
        """NUTS by nutpie, with BLAS single-threaded while the chains run.

        nutpie runs chains in threads; a multi-threaded BLAS inside each gradient (the
        modulated model's pages × 168 exposure product) contends with them
        (``benchmarks/RESULTS.md``, "Single-threaded BLAS during fits").
        """
        import nutpie
        from threadpoolctl import threadpool_limits

        from bayesrate.models.progress import SamplerProgress

        t0 = time.perf_counter()
        # the retries that keep the model (longer tuning, more draws) reuse its compilation
        if self._compiled is not None and self._compiled[0] is model:
            compiled = self._compiled[1]
        else:
            if progress is not None:
                progress(f"{self.model_type}: compiling ...")
            compiled = nutpie.compile_pymc_model(model)
            self._compiled = (model, compiled)
        t1 = time.perf_counter()
        timing["compile"] = t1 - t0
        runs = []
        for target_accept in target_accepts(cfg):
            start = time.perf_counter()
            callback = None
            if progress is not None:
                label = f"{self.model_type} NUTS (target_accept {target_accept:g})"
                callback = SamplerProgress(progress, label)
            with threadpool_limits(limits=1, user_api="blas"):
                idata = nutpie.sample(
                    compiled,
                    draws=int(cfg["draws"]),
                    tune=int(cfg["tune"]),
                    chains=int(cfg["chains"]),
                    cores=max(1, min(int(cfg["cores"]), int(cfg["chains"]))),
                    seed=seed_int(cfg["seed"]),
                    progress_bar=progressbar,
                    progress_callback=callback,
                    save_warmup=False,
                    target_accept=target_accept,
                )
            divergences = int(np.asarray(idata["sample_stats"]["diverging"]).sum())
            runs.append(
                {
                    "target_accept": target_accept,
                    "divergences": divergences,
                    "seconds": round(time.perf_counter() - start, 3),
                }
            )
            if divergences <= MAX_DIVERGENCES:
                break
        if len(runs) > 1:
            log.info("NUTS re-run at higher target_accept after divergences: %s", runs)
        self._build_notes["nuts_runs"] = runs
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
    def _fit_checks(self, idata: xr.DataTree, data: Observations) -> list[str]:
        """Subclass hook: failures of checks the fit's own method needs (none here)."""
        return []

    def diagnostic_vars(self, idata: xr.DataTree) -> list[str]:
        """Posterior variables the convergence gates are computed over."""
        names = [rv.name for rv in self.model.free_RVs] if self.model is not None else []
        names.append("log_rate")
        post = idata["posterior"]
        return [n for n in dict.fromkeys(names) if n in post.data_vars]

    def log_rate_draws(self, posterior) -> np.ndarray:
        """``(chain, draw, page)`` log page rates per hour, from the posterior group."""
        return np.asarray(posterior["log_rate"].transpose("chain", "draw", DIM_PAGE))

    def _postprocess(self, idata: xr.DataTree, data: Observations) -> xr.DataTree:
        """Add ``rate``, ``observed_data``, ``constant_data`` and ``fit_data``."""
        import xarray as xr

        from bayesrate.models.fit_data import observations_to_dataset

        post = idata["posterior"].to_dataset()
        if "log_rate" not in post and "rate" in post:
            post["log_rate"] = np.log(post["rate"])
        post = self._add_derived(post, data)
        children = {"posterior": xr.DataTree(post)}
        if "sample_stats" in idata.children:
            children["sample_stats"] = xr.DataTree(idata["sample_stats"].to_dataset())
        children["observed_data"] = xr.DataTree(self._observed_data())
        children["constant_data"] = xr.DataTree(self._constant_data(data))
        children["fit_data"] = xr.DataTree(observations_to_dataset(data))
        return xr.DataTree(children=children)

    def _observed_data(self) -> xr.Dataset:
        """The observed variables' values, with their dims (as PyMC stores them)."""
        import xarray as xr

        model = self.model
        out = {}
        for rv in model.observed_RVs:
            dims = model.named_vars_to_dims.get(rv.name, ())
            out[rv.name] = (dims, np.asarray(model.rvs_to_values[rv].data))
        coords = {d: np.asarray(model.coords[d]) for var in out.values() for d in var[0]}
        return xr.Dataset(out, coords=coords)

    def _constant_data(self, data: Observations) -> xr.Dataset:
        import xarray as xr

        from bayesrate.constants import DIM_GROUP

        stats = data.interval_stats
        groups = self.fitted_groups(data)
        changed = groups.select(groups.detected > 0)
        labels = coord_labels(data.pages.index)
        return xr.Dataset(
            {
                "domain": ((DIM_PAGE,), coord_labels(data.pages["domain"])),
                "n_visits": ((DIM_PAGE,), stats.n_visits),
                "n_changes": ((DIM_PAGE,), stats.n_changes),
                "exposure_hours": ((DIM_PAGE,), stats.exposure),
                "group_page": ((DIM_GROUP,), labels[changed.page]),
                "group_trials": ((DIM_GROUP,), changed.trials),
            },
            coords={DIM_PAGE: labels, DIM_GROUP: np.arange(changed.n_groups)},
        )

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

    # ------------------------------------------------------------------ PyMC's own functions
    def thinned_posterior(self, max_draws: int | None = None) -> xr.Dataset:
        """The posterior, every k-th draw of each chain so that at most ``max_draws`` remain."""
        self._require_fit()
        post = self.idata_["posterior"].to_dataset()
        if max_draws is None:
            return post
        step = max(1, math.ceil(post.sizes["chain"] * post.sizes["draw"] / max_draws))
        return post.isel(draw=slice(None, None, step))

    def _require_model(self) -> pm.Model:
        self._require_fit()
        if self.model is None:
            raise RuntimeError(
                f"{type(self).__name__} has no data to rebuild its model from (a compact "
                "fit without fit_data): load it with data=..."
            )
        return self.model

    def compute_log_likelihood(self, max_draws: int | None = None) -> xr.Dataset:
        """PyMC's pointwise log-likelihood (``pm.compute_log_likelihood``), kept in ``idata_``.

        ``detections`` per interval group and ``quiet`` per page, at every draw of
        :meth:`thinned_posterior`. Each page's sum is its exact log-likelihood plus the
        Binomial constants ``Σ log C(n, c)``. The dynamic models observe
        ``page_detections`` instead: per page, its likelihood with its path integrated out
        (:meth:`marginal_page_loglik`'s terms).
        """
        import pymc as pm
        import xarray as xr

        model = self._require_model()
        tree = xr.DataTree(self.thinned_posterior(max_draws), name="posterior")
        with reproducible_compilation():
            out = pm.compute_log_likelihood(
                xr.DataTree(children={"posterior": tree}),
                model=model,
                extend_inferencedata=False,
                progressbar=False,
            )
        self.idata_["log_likelihood"] = out
        return out

    def sample_posterior_predictive(
        self, max_draws: int | None = None, seed: int | str = "posterior-predictive"
    ) -> xr.Dataset:
        """PyMC's draws of the observed variables (``pm.sample_posterior_predictive``).

        Kept in ``idata_`` as the ``posterior_predictive`` group: ``detections`` per
        interval group and ``quiet`` per page, one draw per posterior draw kept (the
        dynamic models: ``page_detections`` per page, each page's path drawn given its
        data).
        """
        import pymc as pm

        model = self._require_model()
        with _quiet_pymc_sampling_log(), reproducible_compilation(), warnings.catch_warnings():
            # a CustomDist drawn by a Python function (the dynamic models' paths, forward
            # filtering and backward sampling) runs in Numba's object mode, as it must
            warnings.filterwarnings(
                "ignore",
                message="Numba will use object mode to run CustomDist_",
                category=UserWarning,
            )
            out = pm.sample_posterior_predictive(
                self.thinned_posterior(max_draws),
                model=model,
                random_seed=seed_int(seed),
                progressbar=False,
            )
        self.idata_["posterior_predictive"] = out["posterior_predictive"]
        return out["posterior_predictive"].to_dataset()

    def predict(
        self,
        observations: Observations,
        *,
        n_draws: int | None = 500,
        seed: int | str = "predict",
        page_rates: str = "population",
    ) -> xr.DataTree:
        """Posterior predictive detections of pages on their own visit times.

        Parameters
        ----------
        observations
            The pages and their visit times (their change flags are kept as
            ``observed_data``, not used).
        n_draws
            Posterior draws used (thinned evenly); ``None`` for all.
        seed
            Seed of the draws (int or string).
        page_rates
            ``"population"``: the pages are *new* pages: a page of a fitted domain draws
            its log-rate from that domain's population, a page of another domain from a
            new domain whose mean is drawn from the global level (models without a
            population draw from their fixed prior). ``"posterior"``: the pages are the
            fitted pages, each with its own posterior (the conditional predictive).

        Returns
        -------
        xarray.DataTree
            ``posterior_predictive``: ``detections`` ``(chain, draw, interval_group)``,
            ``detection_probability`` (same dims), ``page_detections``
            ``(chain, draw, page)``; ``observed_data``; ``constant_data`` with each
            group's ``group_page``, ``group_trials``, ``group_length_hours`` and
            ``group_end_bucket`` (the hour-of-week bucket of its detecting visits), and
            each page's ``domain`` and ``known_domain``. The groups are those of
            :func:`bayesrate.models.groups.visit_patterns` on the model's clock (the shocks
            model splits them further by epoch).
        """
        import pymc as pm

        if page_rates not in PAGE_RATES:
            raise ValueError(f"page_rates must be one of {PAGE_RATES}, got {page_rates!r}")
        self._require_fit()
        self.check_data(observations)
        posterior = self.thinned_posterior(n_draws)
        if page_rates == "posterior":
            fitted = posterior[DIM_PAGE].values
            if not np.array_equal(fitted, coord_labels(observations.pages.index)):
                raise ValueError("page_rates='posterior' needs the fitted pages, in order")
        patterns = self._prediction_patterns(observations)
        model = self._predictive_model(observations, patterns, page_rates)
        with _quiet_pymc_sampling_log(), reproducible_compilation():
            out = pm.sample_posterior_predictive(
                posterior,
                model=model,
                var_names=[lik_names.DETECTIONS, DETECTION_PROBABILITY],
                random_seed=seed_int(seed),
                progressbar=False,
            )
        return self._prediction(observations, patterns, out)

    def predictive_patterns(self, observations: Observations):
        """The groups of :meth:`predict`'s result on ``observations``, as
        :class:`~bayesrate.models.groups.VisitPatterns` (what the checks count by)."""
        return self._prediction_patterns(observations)

    def _prediction_patterns(self, observations: Observations):
        """The groups :meth:`predict` draws (:func:`~bayesrate.models.groups.visit_patterns`
        on the model's clock)."""
        from bayesrate.models.groups import visit_patterns

        return visit_patterns(observations, self.timezone)

    def _prediction(self, observations: Observations, patterns, out) -> xr.DataTree:
        """``predict``'s result: PyMC's draws, page totals, the groups' descriptions."""
        import xarray as xr

        from bayesrate.constants import DIM_GROUP
        from bayesrate.models.groups import sum_by_page

        pred = out["posterior_predictive"].to_dataset()
        counts = pred[lik_names.DETECTIONS].transpose("chain", "draw", DIM_GROUP)
        by_page = sum_by_page(counts.values, patterns.group_page, observations.n_pages)
        labels = coord_labels(observations.pages.index)
        domains = coord_labels(observations.pages["domain"])
        pred["page_detections"] = (("chain", "draw", DIM_PAGE), by_page)
        pred = pred.assign_coords({DIM_PAGE: labels})
        lengths = patterns.pattern_length[patterns.group_pattern]
        const = xr.Dataset(
            {
                "group_page": ((DIM_GROUP,), labels[patterns.group_page]),
                "group_trials": ((DIM_GROUP,), patterns.group_n),
                "group_length_hours": ((DIM_GROUP,), lengths),
                "group_end_bucket": ((DIM_GROUP,), patterns.group_end_bucket),
                "domain": ((DIM_PAGE,), domains),
                "known_domain": ((DIM_PAGE,), np.isin(domains, self._fitted_domains())),
            },
            coords={DIM_PAGE: labels, DIM_GROUP: pred[DIM_GROUP].values},
        )
        return xr.DataTree(
            children={
                "posterior_predictive": xr.DataTree(pred),
                "observed_data": xr.DataTree(out["observed_data"].to_dataset()),
                "constant_data": xr.DataTree(const),
            }
        )

    def _fitted_domains(self) -> np.ndarray:
        const = self.idata_["constant_data"]
        return np.unique(np.asarray(const["domain"]).astype(str))

    def _predictive_model(self, data: Observations, patterns, page_rates: str) -> pm.Model:
        """Page log-rates (posterior or population), multipliers and *every* group."""
        import pymc as pm

        from bayesrate.constants import DIM_GROUP

        groups = patterns.groups("hour_of_week" if self.has_multipliers else "length")
        coords = {DIM_PAGE: coord_labels(data.pages.index), DIM_GROUP: np.arange(groups.n_groups)}
        with pm.Model(coords=coords) as model:
            if page_rates == "posterior":
                log_rate = pm.Flat("log_rate", dims=DIM_PAGE)
            else:
                log_rate = self._population_log_rates(data)
            self._predictive_detections(data, groups, log_rate)
        return model

    def _predictive_detections(self, data: Observations, groups: IntervalGroups, log_rate):
        """Every group's observed ``detections`` and its :data:`DETECTION_PROBABILITY`
        (in the current model context)."""
        from bayesrate.models import likelihood as lik

        log_multiplier = self._predictive_log_multiplier()
        self._add_predictive_detections(groups, log_rate, lik.log_exposure(groups, log_multiplier))

    @staticmethod
    def _add_predictive_detections(
        groups: IntervalGroups, log_rate, log_pattern, log_added=None
    ) -> None:
        """``detections`` of ``groups`` at pattern log-exposures ``log_pattern`` (and log
        integrated added rates ``log_added``), and their :data:`DETECTION_PROBABILITY` (in
        the current model context)."""
        import pymc as pm

        from bayesrate.constants import DIM_GROUP
        from bayesrate.models import likelihood as lik

        lik.detections(groups, log_rate, log_pattern, log_added)
        log_lam = lik.group_log_rate(groups, log_rate, log_pattern, log_added)
        pm.Deterministic(DETECTION_PROBABILITY, -pm.math.expm1(-pm.math.exp(log_lam)),
                         dims=DIM_GROUP)  # fmt: skip

    @property
    def has_multipliers(self) -> bool:
        """Whether the model has hour-of-week multipliers (exposures are overlaps)."""
        return False

    def _predictive_log_multiplier(self):
        """The fitted multipliers as a placeholder (values come from the posterior)."""
        return None

    def _population_log_rates(self, data: Observations):  # pragma: no cover - abstract
        """Log-rates of ``data``'s pages as new pages (in the current model context)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ leave-one-page-out
    #: whether leaving a page out is exact (a fixed prior: the page's marginal likelihood is
    #: the same under every draw, no importance sampling; :func:`bayesrate.checks.compare.loo`)
    exact_loo: ClassVar[bool] = False

    def marginal_page_loglik(self, post: xr.Dataset, data: Observations | None = None):
        """``(draws, pages)`` ``log p(y_p | θ_s)``: each page's data with its own rate (or
        path) integrated out given the population parameters of each draw of ``post`` — the
        unit of leave-one-page-out (:mod:`bayesrate.checks.compare`,
        :mod:`bayesrate.checks.marginal`). ``data``: the fitted pages (default the fitted
        data; a compact fit loaded without them needs it). Every model answers for itself;
        the base class has no population to integrate over."""
        raise ValueError(f"leave-one-page-out is not available for the {self.model_type} model")

    def _loo_data(self, data: Observations | None, fitted_only: bool = False) -> Observations:
        """The observations :meth:`marginal_page_loglik` integrates: ``data``, else the
        fitted data; with ``fitted_only`` (terms computed from the fitted data's own
        structures) ``data`` must be the fitted data."""
        self._require_fit()
        if data is None or fitted_only:
            if self.data_ is None:
                raise RuntimeError("the fitted data are needed: load the fit with data=...")
            if (
                data is not None
                and data is not self.data_
                and (data.fingerprint != self.data_.fingerprint)
            ):
                raise ValueError(f"the {self.model_type} model's terms are of its fitted data")
            return self.data_
        return data

    # ------------------------------------------------------------------ forecast predictive
    def forecast_groups(self, d, by_length: Groups) -> Groups:
        """The test intervals of a forecast design ``d``
        (:func:`bayesrate.studies.forecast.design`) grouped as this model's predictive
        needs them: by (page, length), ``by_length``, for a rate constant in time."""
        return by_length

    def forecast_predictive(
        self, d, groups: Groups, keep: np.ndarray, seed: int | str, walks: str = "summed"
    ) -> Prediction:
        """Per kept posterior draw (flat positions ``keep``), the integrated rate of each test
        group (:meth:`forecast_groups`) and of each page's test window: each draw's page
        rate times the hours (``walks``: the dynamic models' choice, see
        :func:`bayesrate.studies.forecast.model_prediction`)."""
        from bayesrate.predictive import Prediction

        base, mean_rate = self._forecast_rates(keep)
        return Prediction(
            group_lambda=base[:, groups.page] * groups.key[None, :],
            window_lambda=base * d.window_hours[None, :],
            rate_per_hour=mean_rate,
        )

    def _forecast_rates(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(kept draws, pages)`` page rates ``exp(log_rate)`` and the posterior mean ``rate``."""
        from bayesrate.draws import stack_draws

        post = self.idata_["posterior"]
        base = np.exp(stack_draws(post["log_rate"], DIM_PAGE)[keep])
        return base, stack_draws(post["rate"], DIM_PAGE).mean(axis=0)

    def forecast_diagnostics(self) -> dict[str, Any]:
        """What the forecast study records of this fit beyond its convergence diagnostics."""
        return {}

    # ------------------------------------------------------------------ numpy log-likelihood
    def page_loglik(self, max_draws: int | None = None) -> np.ndarray:
        """``(draws, pages)`` exact log-likelihood of each page at each kept posterior draw.

        Evaluated by :mod:`bayesrate.likelihood` (no Binomial constants); the page is the
        unit of leave-one-page-out (:mod:`bayesrate.checks.compare`).
        """
        from bayesrate.likelihood import pointwise_loglik

        _, log_rate = self._loglik_draws(max_draws)
        return pointwise_loglik(self.data_.interval_stats.groups, log_rate)

    def _loglik_draws(self, max_draws: int | None) -> tuple[xr.Dataset, np.ndarray]:
        """The thinned posterior and its ``(draws, pages)`` log-rates, for :meth:`page_loglik`
        (which needs the fitted data)."""
        from bayesrate.draws import stack_draws

        self._require_fit()
        if self.data_ is None:
            raise RuntimeError("the fitted data are needed: load the fit with data=...")
        post = self.thinned_posterior(max_draws)
        return post, stack_draws(post["log_rate"], DIM_PAGE)

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
        """Per page: domain, rate_per_day (posterior mean), lower/upper 90%, counts
        (:meth:`page_summary` with its defaults)."""
        return self.page_summary()

    def page_summary(self, method: str = "auto", max_draws: int | None = None) -> pd.DataFrame:
        """Per page: domain, rate_per_day (posterior mean), lower/upper 90%, counts.

        Parameters
        ----------
        method
            ``"conditional"``: each page's exact conditional posterior given the population
            parameters, averaged over their draws (:mod:`bayesrate.models.page_posterior`;
            the same posterior as the page's draws, with far less Monte Carlo error), for
            models whose pages are conditionally independent given those parameters
            (:attr:`conditional_pages`). ``"draws"``: the page's own posterior draws.
            ``"auto"`` (default): ``"conditional"`` where the model has it and the fitted
            data are at hand.
        max_draws
            Population draws averaged by ``"conditional"`` (thinned evenly; default all).

        The frame's ``attrs["method"]`` says which was used.
        """
        self._require_fit()
        if method not in PAGE_SUMMARY_METHODS:
            raise ValueError(f"method must be one of {PAGE_SUMMARY_METHODS}, got {method!r}")
        if method == "auto":
            usable = self.conditional_pages and self.data_ is not None
            method = "conditional" if usable else "draws"
        if method == "conditional" and not self.conditional_pages:
            raise ValueError(f"{self.model_type} has no conditional page posteriors; use 'draws'")
        if method == "conditional" and self.data_ is None:
            raise RuntimeError("the fitted data are needed: load the fit with data=...")
        key = (method, max_draws)
        if key not in self._page_summaries:
            const = self.idata_["constant_data"]
            if method == "conditional":
                post = self._conditional_page_posterior(max_draws)
                mean, (lower, upper) = post.mean, post.quantiles
            else:
                rate = np.asarray(self.rate_draws().transpose("chain", "draw", DIM_PAGE))
                flat = rate.reshape(-1, rate.shape[-1])
                mean = flat.mean(axis=0)
                lower, upper = np.quantile(flat, [LOWER_Q, UPPER_Q], axis=0)
            frame = pd.DataFrame(
                {
                    "page": self.idata_["posterior"][DIM_PAGE].values,
                    "domain": np.asarray(const["domain"]),
                    "rate_per_day": mean * HOURS_PER_DAY,
                    "lower_per_day": lower * HOURS_PER_DAY,
                    "upper_per_day": upper * HOURS_PER_DAY,
                    "n_visits": np.asarray(const["n_visits"]),
                    "n_changes": np.asarray(const["n_changes"]),
                }
            )
            frame.attrs["method"] = method
            self._page_summaries = {key: frame}
        return self._page_summaries[key].copy()

    def _conditional_page_posterior(self, max_draws: int | None):  # pragma: no cover
        """Subclass hook (:attr:`conditional_pages`): the pages' averaged conditionals."""
        raise NotImplementedError

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the fitted result (NetCDF4, self-describing root attributes, compressed
        ``fit_data``)."""
        from bayesrate.atomic import write_netcdf
        from bayesrate.models.fit_data import netcdf_encoding

        self._require_fit()
        return write_netcdf(self.idata_, path, encoding=netcdf_encoding(self.idata_))

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        data: Observations | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> RateModel:
        """Load a saved fit and its data; refuse one that does not match.

        The observations come from the file's ``fit_data`` group (checked against the
        saved fingerprint), so the model can be rebuilt (:attr:`model`) with no data
        argument.

        Parameters
        ----------
        path
            A file written by :meth:`save`.
        data
            If given, its fingerprint must equal the fitted data's (and it is used instead
            of ``fit_data``; a compact fit without ``fit_data`` needs it to rebuild).
        model_config
            If given, the merged config's hash must equal the saved one.

        Raises
        ------
        ArtifactError
            Not a bayesrate fit, a different model type (when called on a subclass),
            a different config, different data, or ``fit_data`` that does not match the
            fingerprint.
        """
        import xarray as xr

        from bayesrate.models.registry import get_model

        path = Path(path)
        if not path.is_file():
            raise ArtifactError(f"no saved fit at {path}")
        try:
            idata = xr.open_datatree(path, engine="h5netcdf").load()
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{path} is not a readable NetCDF fit: {exc}") from exc
        attrs = idata.attrs
        model_type = attrs.get("bayesrate_model_type")
        if model_type is None:
            raise ArtifactError(f"{path} is not a bayesrate model fit (model type None)")
        try:
            target = get_model(model_type)
        except ValueError as exc:
            raise ArtifactError(f"{path} is not a fit of a known model: {exc}") from None
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
        # the saved config against its own hash (a config saved before an option was added
        # loads with that option's default, which keeps the model it was)
        if config_hash(model_type, saved_config) != attrs.get("bayesrate_config_hash"):
            raise ArtifactError(f"{path}: config hash does not match its own config (edited file?)")
        if model_config is not None:
            wanted = target(model_config)
            if wanted.config_hash != model.config_hash:
                raise ArtifactError(
                    f"{path} was fitted with config {saved_config}, not the requested "
                    f"{wanted.model_config}"
                )
        fingerprint = attrs.get("bayesrate_data_fingerprint", "")
        model.idata_ = idata
        model._page_summaries = {}
        model.data_ = _fitted_data(path, idata, fingerprint, data)
        model.method_ = attrs.get("bayesrate_method")
        model.data_fingerprint_ = fingerprint
        model.diagnostics_ = diag_mod.Diagnostics.from_dict(
            json.loads(attrs.get("bayesrate_diagnostics", '{"method": "unknown"}'))
        )
        # the graph is rebuilt as it was fitted: with the parameterisation it fell back to
        model._fallback = model.diagnostics_.extra.get("fallback")
        return model


def _fitted_data(
    path: Path, idata: xr.DataTree, fingerprint: str, data: Observations | None
) -> Observations | None:
    """The observations of a saved fit: ``data`` if given (it must match the fingerprint),
    else rebuilt from its ``fit_data`` group (which must match too), else ``None``."""
    from bayesrate.models.fit_data import observations_from_dataset

    if data is not None:
        if data.fingerprint != fingerprint:
            raise ArtifactError(
                f"{path} was fitted on different data (fingerprint {fingerprint[:12]}..., "
                f"given {data.fingerprint[:12]}...)"
            )
        return data
    if "fit_data" not in idata.children:
        return None
    data = observations_from_dataset(idata["fit_data"].to_dataset())
    if data.fingerprint != fingerprint:
        raise ArtifactError(
            f"{path}: its fit_data do not match its data fingerprint (edited file?)"
        )
    return data


def coord_labels(index) -> np.ndarray:
    """Labels as a NetCDF-friendly array (object labels become str)."""
    values = np.asarray(index)
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        return values.astype(str)
    return values
