"""Per-URL scheduler state in columnar arrays, with the prior lookup and batch updates.

One row per URL: the posterior of its change rate, last fetch, last fetch that detected a
change, importance weight, host, fetch/change counters and planned fetch rate. Arrays grow
by doubling (``docs/scheduler.md``). Two posterior families (``SchedulerConfig.posterior``):

- ``"grid"`` (opt-in): the posterior of ``log λ`` on one shared grid of ``K`` nodes, as
  float32 log-probabilities per URL (:mod:`bayesrate.scheduler.rategrid`). It starts from
  the artifact's fitted population (``priors.json`` v2: a normal mixture of ``log λ``;
  v1: the Gamma prior, discretised exactly), takes the exact censored likelihood of every
  interval, and lets ``log λ`` drift as a random walk between fetches when the artifact
  (or ``SchedulerConfig.drift``) gives a volatility ``σ_rw``. Means, quantiles and
  Thompson draws come from that posterior.
- ``"gamma"`` (default): Gamma(α, β) per URL (per hour; β in hours of exposure), updated by the
  censoring-exact moment-matched update (:func:`bayesrate.estimators.gamma.adf_update`) or,
  for comparison, the first source document's exposure update (``update="exposure"``).

When the priors carry hour-of-week multipliers, an interval's exposure is its integrated
modulation ``∫ m(hour_of_week(u)) du`` instead of its length (the drift runs on clock time).

New URLs start from their host's prior (the host is the ``domain`` of the priors artifact;
unseen hosts get the artifact's global prior). Without an artifact the documented default
:meth:`bayesrate.priors.PriorSet.default` applies (Gamma(1, 1 day): one change per day,
deliberately weak). ``priors.json`` is per day; the state is per hour (``β_h = 24 β_d``).

The first fetch of a URL is its baseline: it sets ``last_fetch`` and carries no change
information (its flag is counted in ``baseline_flags_ignored``, not used).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bayesrate.clock import UTC_NAMES, cumulative_multiplier
from bayesrate.constants import EPOCH_HOUR_OF_WEEK, HOURS_PER_DAY, N_HOUR_OF_WEEK
from bayesrate.errors import ObservationError
from bayesrate.estimators.gamma import adf_update, exposure_update
from bayesrate.priors import PriorSet
from bayesrate.scheduler.rategrid import (
    CHUNK_ROWS,
    GRID_MAX_PER_DAY,
    GRID_MIN_PER_DAY,
    GRID_SIZE,
    LogRateGrid,
    merge_unchanged,
    run_filter,
)

UPDATES = ("adf", "exposure")
POSTERIORS = ("grid", "gamma")
#: a crawl log applied at once (:meth:`SchedulerState.observe_log`) merges runs of unchanged
#: intervals into blocks of at most this many hours (exact without drift)
LOG_BLOCK_HOURS = 7 * HOURS_PER_DAY


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling knobs. Times in hours, rates per hour.

    Attributes
    ----------
    posterior
        ``"gamma"`` (default: one Gamma per URL, started from the artifact's Gamma view) or
        ``"grid"`` (opt-in: the posterior on a shared log-rate grid, started from the
        fitted population).
    update
        Gamma posterior only: ``"adf"`` (censoring-exact, default) or ``"exposure"``
        (seed ``PageState``).
    grid_size, grid_min_per_day, grid_max_per_day
        Grid posterior only: nodes of the shared grid and the rates (per day) of its first
        and last node.
    drift
        Grid posterior only: random-walk volatility of ``log λ`` per √day; ``None`` takes
        it from the priors artifact (v2 ``drift``), and none there means no drift.
    plan_expected
        Plan from posterior expectations of the freshness gain (default; :func:`~bayesrate.
        scheduler.decide.plan`, either posterior family); ``False``: from point rates
        (``plan_quantile``, or Thompson draws).
    min_interval
        Shortest allowed revisit interval; pages that changed at every visit are scheduled
        at it (no extrapolation above the sampling frequency).
    max_interval
        Revisit floor (exploration): no URL waits longer than this.
    factor
        ``t_next = t_last + factor / λ`` (``docs/science.md`` §5).
    rate_floor
        Smallest rate used in decisions (per hour).
    politeness_limit
        Maximum fetches per host per ``politeness_window`` (``None``: no limit).
    politeness_window
        Window of the politeness limit, hours.
    thompson
        Draw λ from the posterior in decisions instead of using its mean.
    plan_quantile
        When planning from point rates (``plan_expected=False``): this quantile of each
        URL's posterior instead of its mean (a lower confidence bound on the rate:
        optimism about how long a fetch stays fresh). ``None`` plans with the posterior
        mean. Default 0.3
        (``docs/scheduler.md``).
    cap_after
        A URL counts as "changed at every visit" (and is scheduled at ``min_interval``)
        once it has at least this many intervals, all changed.
    """

    update: str = "adf"
    posterior: str = "gamma"
    grid_size: int = GRID_SIZE
    grid_min_per_day: float = GRID_MIN_PER_DAY
    grid_max_per_day: float = GRID_MAX_PER_DAY
    drift: float | None = None
    plan_expected: bool = True
    min_interval: float = 1.0
    max_interval: float = 30 * HOURS_PER_DAY
    factor: float = 1.0
    rate_floor: float = 1e-6
    politeness_limit: int | None = None
    politeness_window: float = 1.0
    thompson: bool = False
    plan_quantile: float | None = 0.3
    cap_after: int = 3

    def __post_init__(self) -> None:
        if self.update not in UPDATES:
            raise ObservationError(f"update must be one of {UPDATES}", field="update")
        if self.posterior not in POSTERIORS:
            raise ObservationError(f"posterior must be one of {POSTERIORS}", field="posterior")
        try:
            LogRateGrid(self.grid_size, self.grid_min_per_day, self.grid_max_per_day)
        except (ValueError, TypeError) as exc:
            raise ObservationError(str(exc), field="grid") from exc
        d = self.drift
        if d is not None and not (isinstance(d, (int, float)) and np.isfinite(d) and d >= 0):
            raise ObservationError(f"drift must be a number >= 0 or None, got {d!r}", field="drift")
        for name in ("min_interval", "max_interval", "factor", "rate_floor", "politeness_window"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ObservationError(f"{name} must be a positive number, got {v!r}", field=name)
        if self.max_interval < self.min_interval:
            raise ObservationError("max_interval must be >= min_interval", field="max_interval")
        q = self.plan_quantile
        if q is not None and not (isinstance(q, (int, float)) and 0 < q < 1):
            raise ObservationError("plan_quantile must be in (0, 1) or None", field="plan_quantile")
        if self.politeness_limit is not None and int(self.politeness_limit) < 1:
            raise ObservationError("politeness_limit must be >= 1", field="politeness_limit")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def plans_expected(self) -> bool:
        """Whether :func:`~bayesrate.scheduler.decide.plan` uses posterior expectations."""
        return bool(self.plan_expected)

    def grid(self) -> LogRateGrid:
        """The shared log-rate grid of this configuration."""
        return LogRateGrid(int(self.grid_size), self.grid_min_per_day, self.grid_max_per_day)


# ---------------------------------------------------------------------- modulation
class Modulation:
    """Integrated hour-of-week multipliers ``M(s, t) = ∫_s^t m(hour_of_week(u)) du`` (hours).

    Exact in any time zone: differences of :func:`bayesrate.clock.cumulative_multiplier`,
    which stays continuous across changes of UTC offset.
    """

    def __init__(self, multipliers: np.ndarray | None, timezone: str = "UTC") -> None:
        self.timezone = timezone
        self.multipliers = None if multipliers is None else np.asarray(multipliers, dtype=float)
        if self.multipliers is not None:
            self._cum = np.concatenate([[0.0], np.cumsum(self.multipliers)])

    @property
    def active(self) -> bool:
        return self.multipliers is not None

    def _cumulative(self, t: np.ndarray) -> np.ndarray:
        return cumulative_multiplier(t, self.multipliers[None, :], timezone=self.timezone)

    def integral(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """``M(start, end)`` per interval (= ``end - start`` without multipliers)."""
        start = np.asarray(start, dtype=np.float64)
        end = np.asarray(end, dtype=np.float64)
        if self.multipliers is None:
            return end - start
        return np.maximum(self._cumulative(end) - self._cumulative(start), 0.0)

    def advance(self, start: np.ndarray, amount: np.ndarray) -> np.ndarray:
        """The time ``t`` with ``M(start, t) = amount`` (UTC clock; mean rate otherwise)."""
        start = np.asarray(start, dtype=np.float64)
        amount = np.asarray(amount, dtype=np.float64)
        if self.multipliers is None or self.timezone not in UTC_NAMES:
            return start + amount
        target = self._cumulative(start) + amount
        total = self._cum[-1]
        weeks = np.floor(target / total)
        rem = target - weeks * total
        cell = np.clip(np.searchsorted(self._cum, rem, side="right") - 1, 0, N_HOUR_OF_WEEK - 1)
        frac = (rem - self._cum[cell]) / self.multipliers[cell]
        return weeks * N_HOUR_OF_WEEK + cell + frac - EPOCH_HOUR_OF_WEEK


# ---------------------------------------------------------------------- state
#: columns every state has (``docs/scheduler.md``)
BASE_COLUMNS = ("host", "weight", "last_fetch", "last_change", "n_fetch", "n_changed", "target")
#: the posterior's columns, per family (``log_weights``: float32 log-probabilities, K per URL)
POSTERIOR_COLUMNS = {"gamma": ("alpha", "beta"), "grid": ("log_weights",)}
_FLOAT_COLUMNS = ("weight", "last_fetch", "last_change", "target")
_INT_COLUMNS = ("host", "n_fetch", "n_changed")
#: every per-URL column of a Gamma state, in storage order
COLUMNS = (
    "host",
    "weight",
    "alpha",
    "beta",
    "last_fetch",
    "last_change",
    "n_fetch",
    "n_changed",
    "target",
)


def storage_columns(posterior: str) -> tuple[str, ...]:
    """The per-URL columns a state of this posterior family stores."""
    return (*BASE_COLUMNS, *POSTERIOR_COLUMNS[posterior])


def host_name(value: object) -> str | None:
    """A host as given, or ``None`` when it is missing (``None``, NaN or ``""``).

    Host names are strings used as they are: ``"NA"``, ``"null"`` and ``"007"`` are hosts.
    """
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = str(value)
    return text if text else None


class SchedulerState:
    """Columnar per-URL state.

    Parameters
    ----------
    priors
        Per-domain priors (per day); hosts are looked up as domains.
    config
        :class:`SchedulerConfig`.
    capacity
        Initial array capacity (grows by doubling).
    """

    def __init__(
        self,
        priors: PriorSet | None = None,
        config: SchedulerConfig | None = None,
        capacity: int = 1024,
    ) -> None:
        self.priors = priors if priors is not None else PriorSet.default()
        self.config = config if config is not None else SchedulerConfig()
        self.posterior = self.config.posterior
        self.grid = self.config.grid() if self.posterior == "grid" else None
        self.columns = storage_columns(self.posterior)
        self.modulation = Modulation(self.priors.hour_of_week, self.priors.timezone)
        self.n = 0
        self.urls: list[str] = []
        self.index: dict[str, int] = {}
        self.hosts: list[str] = []
        self.host_index: dict[str, int] = {}
        self._host_prior: list[Any] = []  # per host code: log-probabilities or (α, β_h)
        self._host_sigma2: list[float] = []  # per host code: drift variance per hour
        self._cap = 0
        self._grow(max(int(capacity), 16))
        # politeness log: (host code, time) of recent fetches
        self.log_host = np.zeros(0, dtype=np.int32)
        self.log_time = np.zeros(0, dtype=np.float64)
        self.baseline_flags_ignored = 0
        self.version = 0  # number of applied batches

    # ------------------------------------------------------------------ storage
    def _column_specs(self) -> list[tuple[str, Any, tuple[int, ...], float]]:
        """(name, dtype, trailing shape, fill) of every array column."""
        specs = [(c, np.float64, (), np.nan if c.startswith("last") else 0.0)
                 for c in _FLOAT_COLUMNS]  # fmt: skip
        specs += [(c, np.int32, (), 0) for c in _INT_COLUMNS]
        if self.posterior == "gamma":
            specs += [("alpha", np.float64, (), 0.0), ("beta", np.float64, (), 0.0)]
        else:
            specs += [("log_weights", np.float32, (self.grid.size,), 0.0),
                      ("rate_mean", np.float64, (), 0.0)]  # fmt: skip
        return specs

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap)
        for name, dtype, shape, fill in self._column_specs():
            new = np.full((cap, *shape), fill, dtype=dtype)
            if self._cap:
                new[: self.n] = getattr(self, "_" + name)[: self.n]
            setattr(self, "_" + name, new)
        self._cap = cap

    def column(self, name: str) -> np.ndarray:
        """View of one column for the ``n`` URLs (``last_fetch``, ``alpha``, ...)."""
        try:
            return getattr(self, "_" + name)[: self.n]
        except AttributeError:
            raise AttributeError(f"a {self.posterior!r} state has no column {name!r}") from None

    alpha = property(lambda self: self.column("alpha"))
    beta = property(lambda self: self.column("beta"))
    log_weights = property(lambda self: self.column("log_weights"))
    last_fetch = property(lambda self: self.column("last_fetch"))
    last_change = property(lambda self: self.column("last_change"))
    weight = property(lambda self: self.column("weight"))
    host = property(lambda self: self.column("host"))
    n_fetch = property(lambda self: self.column("n_fetch"))
    n_changed = property(lambda self: self.column("n_changed"))
    target = property(lambda self: self.column("target"))

    def nbytes(self) -> dict[str, int]:
        """Bytes held: numeric columns (per allocated row) and the URL index (estimate)."""
        import sys

        arrays = sum(getattr(self, "_" + c[0])[: self.n].nbytes for c in self._column_specs())
        strings = sum(sys.getsizeof(u) for u in self.urls)
        index = sys.getsizeof(self.index) + sys.getsizeof(self.urls) + 8 * self.n
        return {"arrays": arrays, "url_strings": strings, "url_index": index}

    # ------------------------------------------------------------------ priors
    def prior_per_hour(self, hosts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(α, β in hours)`` of the Gamma priors (or Gamma views) of these hosts."""
        if len(hosts) == 0:
            return np.zeros(0), np.zeros(0)
        a, b_day = self.priors.arrays(np.asarray(hosts, dtype=object))
        return a.astype(float), b_day.astype(float) * HOURS_PER_DAY

    def prior_log_weights(self, host: str) -> np.ndarray:
        """The grid prior of a host's new URLs: the population's cell masses (v2 artifact)
        or the Gamma prior's (v1), as log-probabilities."""
        population = self.priors.population_for(host)
        if population is not None:
            mix = population.predictive
            means = np.asarray(mix.means) - np.log(HOURS_PER_DAY)
            return self.grid.prior_normal_mixture(mix.weights, means, mix.sds)
        gamma = self.priors.for_domain(host)
        return self.grid.prior_gamma(gamma.alpha, gamma.beta * HOURS_PER_DAY)

    def drift_variance(self, host: str) -> float:
        """``σ_rw²`` per hour of a host's URLs (``config.drift``, else the artifact's)."""
        sigma = self.config.drift
        if sigma is None:
            population = self.priors.population_for(host)
            sigma = None if population is None else population.sigma_rw_per_day
        return 0.0 if sigma is None else float(sigma) ** 2 / HOURS_PER_DAY

    def _host_codes(self, hosts: Sequence[str]) -> np.ndarray:
        index = self.host_index
        for h in set(hosts) - index.keys():
            index[h] = len(self.hosts)
            self.hosts.append(h)
        get = index.__getitem__
        return np.fromiter(map(get, hosts), dtype=np.int32, count=len(hosts))

    def _host_tables(self) -> tuple[Any, np.ndarray]:
        """Per host code: prior (grid: ``(H, K)`` log-probabilities; Gamma: ``(α, β_h)``
        arrays) and drift variance per hour, computed once per host."""
        for h in self.hosts[len(self._host_prior) :]:
            if self.posterior == "grid":
                self._host_prior.append(self.prior_log_weights(h))
            else:
                a, b = self.prior_per_hour([h])
                self._host_prior.append((a[0], b[0]))
            self._host_sigma2.append(self.drift_variance(h) if self.posterior == "grid" else 0.0)
        sigma2 = np.asarray(self._host_sigma2, dtype=np.float64)
        if self.posterior == "grid":
            return np.asarray(self._host_prior).reshape(-1, self.grid.size), sigma2
        table = np.asarray(self._host_prior, dtype=np.float64).reshape(-1, 2)
        return (table[:, 0], table[:, 1]), sigma2

    def _set_prior(self, rows: np.ndarray) -> None:
        prior, _ = self._host_tables()
        codes = self._host[rows]
        if self.posterior == "grid":
            self._log_weights[rows] = prior[codes]
            self._rate_mean[rows] = self.grid.mean(prior)[codes]
        else:
            self._alpha[rows] = prior[0][codes]
            self._beta[rows] = prior[1][codes]

    # ------------------------------------------------------------------ adding URLs
    def add(
        self, urls: Sequence[str], hosts: Sequence[str], weights: Sequence[float] | None = None
    ) -> np.ndarray:
        """Register new URLs (never fetched yet); returns their row indices.

        Raises :class:`ObservationError` (and adds nothing) for URLs already present or
        repeated, and for weights that are not finite and positive.
        """
        urls = [str(u) for u in urls]
        if len(hosts) != len(urls):
            raise ObservationError("urls and hosts must have the same length", field="host")
        hosts = [host_name(h) for h in hosts]
        blank = [i for i, h in enumerate(hosts) if h is None]
        if blank:
            raise ObservationError(
                "missing host", field="host", rows=blank, pages=[urls[i] for i in blank]
            )
        w = self._check_weights(weights, len(urls))
        dup = [i for i, u in enumerate(urls) if u in self.index]
        if dup:
            raise ObservationError(
                "URLs already scheduled", field="url", rows=dup, pages=[urls[i] for i in dup]
            )
        seen: set[str] = set()
        rep = [i for i, u in enumerate(urls) if u in seen or seen.add(u)]
        if rep:
            raise ObservationError(
                "URLs repeated in one add", field="url", rows=rep, pages=[urls[i] for i in rep]
            )
        return self._append(urls, hosts, w)

    def _append(self, urls: list[str], hosts: list[str], w: np.ndarray) -> np.ndarray:
        k = len(urls)
        start = self.n
        self._grow(start + k)
        idx = np.arange(start, start + k)
        self._host[idx] = self._host_codes(hosts)
        self._weight[idx] = w
        self._last_fetch[idx] = np.nan
        self._last_change[idx] = np.nan
        self._n_fetch[idx] = 0
        self._n_changed[idx] = 0
        self._target[idx] = 0.0
        self.index.update(zip(urls, range(start, start + k), strict=True))
        self.urls.extend(urls)
        self.n += k
        self._set_prior(idx)
        return idx

    def set_rows(self, urls: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Overwrite the rows of known URLs and append new ones; returns their positions.

        For persistence (:mod:`bayesrate.scheduler.store`): ``urls`` are distinct,
        ``columns`` holds an array for every name in :attr:`columns` and host codes index
        :attr:`hosts`. No validation or update happens here.
        """
        urls = list(urls)
        get = self.index.get
        pos = np.fromiter((get(u, -1) for u in urls), dtype=np.int64, count=len(urls))
        new = np.flatnonzero(pos < 0)
        if len(new):
            start = self.n
            self._grow(start + len(new))
            pos[new] = np.arange(start, start + len(new))
            added = [urls[i] for i in new.tolist()]
            self.urls.extend(added)
            self.index.update(zip(added, pos[new].tolist(), strict=True))
            self.n += len(new)
        for name in self.columns:
            getattr(self, "_" + name)[pos] = columns[name]
        if self.posterior == "grid" and len(pos):
            self._rate_mean[pos] = self.grid.mean(self._log_weights[pos])
        return pos

    def reset(self, urls: Sequence[str], *, keep_rate: bool = False) -> np.ndarray:
        """Forget URLs' fetch history, so that their next fetch is a new baseline.

        For operators correcting a URL whose state is wrong (e.g. a fetch time in the
        future). ``last_fetch``, ``last_change``, the fetch/change counters and the planned
        rate are cleared; the rate posterior goes back to the host's prior unless
        ``keep_rate``. Unknown URLs raise :class:`ObservationError` (nothing changes).
        Returns the positions reset.
        """
        rows = self.rows(urls)
        if not keep_rate:
            self._set_prior(rows)
        self._last_fetch[rows] = np.nan
        self._last_change[rows] = np.nan
        self._n_fetch[rows] = 0
        self._n_changed[rows] = 0
        self._target[rows] = 0.0
        self.version += 1
        return rows

    @staticmethod
    def _check_weights(weights: Sequence[float] | None, n: int) -> np.ndarray:
        if weights is None:
            return np.ones(n)
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,):
            raise ObservationError(f"expected {n} weights, got shape {w.shape}", field="weight")
        bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
        if len(bad):
            raise ObservationError(
                "weights must be finite and > 0 (NaN/inf/<=0 given)", field="weight", rows=bad
            )
        return w

    # ------------------------------------------------------------------ observing
    def observe(
        self,
        urls: Sequence[str],
        times: Sequence[float],
        changed: Sequence[int],
        hosts: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
    ) -> np.ndarray:
        """Apply a batch of fetch results; returns the row indices touched.

        Parameters
        ----------
        urls
            Fetched URLs (a URL may appear several times, in time order).
        times
            Fetch times, hours since the Unix epoch.
        changed
            1 if the content differed from the URL's previous fetch, else 0.
        hosts
            Hosts of the URLs; required for URLs not yet in the state (they are added
            with their host's prior). For known URLs it may be missing (``None``, NaN or
            ``""``); when given it must match the stored host.
        weights
            Importance weights; set (or update) the URLs' weights.

        Raises
        ------
        ObservationError
            Unknown URL without a host, a time not after the URL's previous fetch (time
            going backwards), a flag other than 0/1, a non-finite time, a NaN/non-positive
            weight, a host mismatch. Validation happens before any change: a rejected batch
            changes nothing.
        """
        idx, t, c, w, new_urls, new_hosts, new_w = self._validate(
            urls, times, changed, hosts, weights
        )
        # ---- all checks passed: mutate
        if new_urls:
            added = self._append(new_urls, new_hosts, new_w)
            idx = np.where(idx < 0, added[np.maximum(-idx - 1, 0)], idx)
        if w is not None:
            self._weight[idx] = w
        self._apply(idx, t, c, repeated=self._repeated)
        self.version += 1
        return np.unique(idx) if self._repeated else idx

    def _validate(self, urls, times, changed, hosts, weights):
        urls, t, c = _checked_columns(urls, times, changed)
        n = len(urls)
        w = None if weights is None else self._check_weights(weights, n)
        if hosts is not None and len(hosts) != n:
            raise ObservationError(f"expected {n} hosts", field="host")
        idx, new_urls, new_hosts, first_row = self._resolve_urls(urls, hosts)
        self._repeated = self._check_time_order(idx, t, urls)
        new_w = np.ones(len(new_urls)) if w is None else w[first_row]
        return idx, t, c, w, new_urls, new_hosts, new_w

    def _resolve_urls(self, urls: list[str], hosts) -> tuple[np.ndarray, list, list, list]:
        """Row of each URL (new ones get placeholders ``-(k+1)``), the new URLs, their hosts
        and the batch row that introduced each; unknown URLs without a host and hosts that
        differ from the stored ones are errors."""
        n = len(urls)
        # map URLs (C-speed dict lookups)
        get = self.index.get
        idx = np.fromiter((get(u, -1) for u in urls), dtype=np.int64, count=n)
        names = [None] * n if hosts is None else [host_name(h) for h in hosts]
        new_pos: dict[str, int] = {}
        new_urls: list[str] = []
        new_hosts: list[str | None] = []
        first_row: list[int] = []
        mismatch: list[int] = []
        if hosts is not None:
            # a known URL may omit its host (blank); a host that is given must match
            host_of = self.host_index.get
            codes = np.fromiter(
                (-2 if h is None else host_of(h, -1) for h in names), dtype=np.int64, count=n
            )
            known = (idx >= 0) & (codes != -2)
            mismatch = np.flatnonzero(known & (codes != self._host[np.where(known, idx, 0)]))
            mismatch = mismatch.tolist()
        for i in np.flatnonzero(idx < 0).tolist():
            u = urls[i]
            k = new_pos.get(u)
            if k is None:
                k = len(new_urls)
                new_pos[u] = k
                new_urls.append(u)
                new_hosts.append(names[i])
                first_row.append(i)
            elif names[i] is not None:
                if new_hosts[k] is None:
                    new_hosts[k] = names[i]
                elif new_hosts[k] != names[i]:
                    mismatch.append(i)
            idx[i] = -k - 1
        unknown = [i for i in np.flatnonzero(idx < 0).tolist() if new_hosts[-idx[i] - 1] is None]
        if unknown:
            raise ObservationError(
                "unknown URLs (give their host to add them)",
                field="url",
                rows=unknown,
                pages=[urls[i] for i in unknown],
            )
        if mismatch:
            raise ObservationError(
                "host differs from the URL's stored host",
                field="host",
                rows=mismatch,
                pages=[urls[i] for i in mismatch],
            )
        return idx, new_urls, new_hosts, first_row

    def _check_time_order(self, idx: np.ndarray, t: np.ndarray, urls: list[str]) -> bool:
        """Refuse times that do not increase per URL from its stored last fetch; return
        whether a URL comes more than once in the batch."""
        n = len(idx)
        known = idx >= 0
        slot = np.where(known, idx, self.n - idx - 1)  # new URLs after the known ones
        repeated = n > 0 and np.bincount(slot).max() > 1
        prev = np.full(n, -np.inf)
        prev[known] = self._last_fetch[idx[known]]
        back_mask = t <= np.nan_to_num(prev, nan=-np.inf)
        if repeated:
            order = np.lexsort((np.arange(n), slot))
            si, st = slot[order], t[order]
            back_mask[order[1:][(si[1:] == si[:-1]) & (st[1:] <= st[:-1])]] = True
        back = np.flatnonzero(back_mask)
        if len(back):
            raise ObservationError(
                "time goes backwards: each fetch must come after the URL's previous fetch "
                "(in the state and earlier in the batch)",
                field="time",
                rows=back,
                pages=[urls[i] for i in back],
            )
        return bool(repeated)

    def _apply(self, idx: np.ndarray, t: np.ndarray, c: np.ndarray, repeated: bool = True) -> None:
        """Sequential per-URL updates, vectorized over URLs by occurrence rank."""
        if repeated:
            order = np.lexsort((t, idx))
            idx, t, c = idx[order], t[order], c[order]
            starts = np.r_[True, idx[1:] != idx[:-1]]
            group_start = np.maximum.accumulate(np.where(starts, np.arange(len(idx)), 0))
            rank = np.arange(len(idx)) - group_start
        else:
            rank = np.zeros(len(idx), dtype=np.int64)
        for r in range(int(rank.max()) + 1 if len(rank) else 0):
            sel = rank == r
            i, ti, ci = idx[sel], t[sel], c[sel]
            last = self._last_fetch[i]
            base = np.isnan(last)
            self.baseline_flags_ignored += int(ci[base].sum())
            upd = ~base
            if upd.any():
                iu, cu = i[upd], ci[upd]
                self._update(iu, last[upd], ti[upd], cu)
                self._n_changed[iu] += cu
                chg = iu[cu == 1]
                self._last_change[chg] = ti[upd][cu == 1]
            self._last_fetch[i] = ti
            self._n_fetch[i] += 1
        self._log(self._host[idx], t)

    def _update(self, rows: np.ndarray, start: np.ndarray, end: np.ndarray, changed) -> None:
        """The posterior update of one interval ``(start, end]`` per row (distinct rows)."""
        exposure = self.modulation.integral(start, end)
        if self.posterior == "gamma":
            update = adf_update if self.config.update == "adf" else exposure_update
            self._alpha[rows], self._beta[rows] = update(
                self._alpha[rows], self._beta[rows], exposure, changed
            )
            return
        _, sigma2 = self._host_tables()
        variance = sigma2[self._host[rows]] * (end - start)
        for lo in range(0, len(rows), CHUNK_ROWS):
            part = slice(lo, lo + CHUNK_ROWS)
            chunk = rows[part]
            logp, _, mean = self.grid.step(
                self._log_weights[chunk], variance[part], exposure[part], changed[part]
            )
            self._log_weights[chunk] = logp
            self._rate_mean[chunk] = mean

    def observe_log(
        self, offsets: np.ndarray, times: np.ndarray, changed: np.ndarray
    ) -> np.ndarray | None:
        """Apply a whole crawl log to the first ``len(offsets) - 1`` URLs, never fetched yet.

        Visits of URL ``i`` are ``times[offsets[i]:offsets[i + 1]]`` (increasing) with
        their flags; each URL's first visit is its baseline. For a warm start (the replay's
        warm-up log): equal to observing the visits one by one, except that with drift
        (grid posterior) runs of unchanged intervals are merged into blocks of at most
        :data:`LOG_BLOCK_HOURS` (the rate is held constant within a block; exact without
        drift). No validation: use :meth:`observe` for data from outside.

        Returns the grid filter's log-evidence per URL (the log-probability of its flags
        under the prior and drift: for choosing ``σ_rw`` by marginal likelihood), or
        ``None`` for a Gamma state.
        """
        offsets = np.asarray(offsets, dtype=np.int64)
        times = np.asarray(times, dtype=np.float64)
        changed = np.asarray(changed).astype(np.int8)
        n = len(offsets) - 1
        counts = np.diff(offsets)
        page = np.repeat(np.arange(n), counts)
        later = np.ones(len(times), dtype=bool)
        later[offsets[:-1][counts > 0]] = False  # baselines open no interval
        start = np.concatenate([[np.nan], times[:-1]])[later]
        end, row, flag = times[later], page[later], changed[later]
        self.baseline_flags_ignored += int(changed[~later].sum())
        exposure = self.modulation.integral(start, end)
        if self.posterior == "grid":
            _, sigma2 = self._host_tables()
            s2 = sigma2[self._host[:n]]
            block = merge_unchanged(row, end - start, exposure, flag,
                                    np.inf if not s2.any() else LOG_BLOCK_HOURS)  # fmt: skip
            logp, evidence = run_filter(self.grid, self._log_weights[:n], *block, sigma2=s2)
            self._log_weights[:n] = logp
            self._rate_mean[:n] = self.grid.mean(logp)
        else:
            evidence = None
            self._gamma_log(row, exposure, flag, n)
        fetched = counts > 0
        last = np.full(n, np.nan)
        last[fetched] = times[offsets[1:][fetched] - 1]
        self._last_fetch[:n] = last
        self._n_fetch[:n] = counts
        self._n_changed[:n] = np.bincount(row, weights=flag, minlength=n)
        last_hit = np.full(n, np.nan)
        hits = flag == 1
        last_hit[row[hits]] = end[hits]  # in time order: the last write wins
        self._last_change[:n] = last_hit
        self.version += 1
        return evidence

    def _gamma_log(self, row: np.ndarray, exposure: np.ndarray, flag: np.ndarray, n: int):
        """Gamma posteriors after a crawl log, exactly as one-by-one updates: unchanged
        exposure is conjugate (``β += τ``) and commutes; each changed interval is
        moment-matched after the exposure that preceded it."""
        alpha, beta = self._alpha, self._beta
        update = adf_update if self.config.update == "adf" else exposure_update
        hit = np.flatnonzero(flag == 1)
        unchanged = np.where(flag == 0, exposure, 0.0)
        before = np.cumsum(unchanged)  # unchanged exposure up to each interval (inclusive)
        first = np.searchsorted(row, np.arange(n), side="left")
        row_start_cum = np.concatenate([[0.0], before])[first]
        hit_rank = np.arange(len(hit)) - np.searchsorted(row[hit], row[hit], side="left")
        taken = np.zeros(n)
        for r in range(int(hit_rank.max(initial=-1)) + 1):
            h = hit[hit_rank == r]
            p = row[h]
            gap = before[h] - row_start_cum[p] - taken[p]
            beta[p] += gap
            taken[p] += gap
            alpha[p], beta[p] = update(alpha[p], beta[p], exposure[h], np.ones(len(h)))
        end_cum = np.concatenate([[0.0], before])[np.searchsorted(row, np.arange(n), side="right")]
        beta[:n] += end_cum - row_start_cum - taken

    def _log(self, hosts: np.ndarray, times: np.ndarray) -> None:
        if self.config.politeness_limit is None or len(times) == 0:
            return
        log_host = np.concatenate([self.log_host, hosts.astype(np.int32)])
        log_time = np.concatenate([self.log_time, times])
        order = np.lexsort((log_host, log_time))  # by time (then host), as stored
        self.log_host, self.log_time = log_host[order], log_time[order]
        horizon = self.log_time.max() - self.config.politeness_window
        keep = self.log_time > horizon
        if not keep.all():
            self.log_host, self.log_time = self.log_host[keep], self.log_time[keep]

    def recent_fetches(self, now: float) -> np.ndarray:
        """Fetches per host code in ``(now - window, now]``."""
        sel = (self.log_time > now - self.config.politeness_window) & (self.log_time <= now)
        return np.bincount(self.log_host[sel], minlength=len(self.hosts))

    # ------------------------------------------------------------------ lookups
    def rows(self, urls: Sequence[str]) -> np.ndarray:
        """Row indices of known URLs; :class:`ObservationError` naming unknown ones."""
        out = np.empty(len(urls), dtype=np.int64)
        unknown = []
        for i, u in enumerate(urls):
            j = self.index.get(str(u))
            if j is None:
                unknown.append(i)
            else:
                out[i] = j
        if unknown:
            raise ObservationError(
                "unknown URLs", field="url", rows=unknown, pages=[urls[i] for i in unknown]
            )
        return out

    @property
    def changed_every_visit(self) -> np.ndarray:
        """URLs with at least ``config.cap_after`` intervals, all of which showed a change."""
        n_int = self.n_fetch - 1
        return (n_int >= max(int(self.config.cap_after), 1)) & (self.n_changed == n_int)

    # ------------------------------------------------------------------ posteriors
    def drift_variances(self) -> np.ndarray:
        """``σ_rw²`` per hour of every URL (0 without drift or for a Gamma state)."""
        _, sigma2 = self._host_tables()
        return sigma2[self.host]

    def log_weights_at(self, now: float | None = None) -> np.ndarray:
        """Grid posteriors at ``now``: each URL's posterior after its last fetch, drifted
        over the time since (never-fetched URLs: their prior). ``None``: at the last fetch."""
        if self.posterior != "grid":
            raise ValueError("log_weights_at needs a grid posterior")
        logp = self.log_weights.astype(np.float64)
        if now is None:
            return logp
        elapsed = np.nan_to_num(now - self.last_fetch, nan=0.0)
        return self.grid.diffuse(logp, self.drift_variances() * np.maximum(elapsed, 0.0))

    def posterior_mean(self, now: float | None = None) -> np.ndarray:
        """Posterior mean rate per hour (at the last fetch, or at ``now`` with drift)."""
        if self.posterior == "gamma":
            return self.alpha / self.beta
        if now is None or not self.drift_variances().any():
            return self.column("rate_mean").copy()
        return self.grid.mean(self.log_weights_at(now))

    def posterior_quantile(self, q: float, now: float | None = None) -> np.ndarray:
        """The ``q`` quantile of each URL's rate posterior (per hour)."""
        if self.posterior == "gamma":
            from scipy.special import gammaincinv

            return gammaincinv(self.alpha, float(q)) / self.beta
        return self.grid.quantile(self.log_weights_at(now), float(q))

    def posterior_draw(self, rng: np.random.Generator, now: float | None = None) -> np.ndarray:
        """One draw of each URL's rate from its posterior (per hour)."""
        if self.posterior == "gamma":
            return rng.gamma(self.alpha, 1.0 / self.beta)
        return self.grid.sample(self.log_weights_at(now), rng)

    def expected_changes(self, now: float) -> np.ndarray:
        """Expected changes of each URL since its last fetch (never fetched: since ``now``,
        i.e. 0): ``E[λ]·M(t_last, now)``, times ``(e^a − 1)/a`` with ``a = σ²Δt/2`` under
        drift — the mean growth of a log-normal random walk (``E[λ(t)] = E[λ]·e^{σ²t/2}``,
        exact off the grid's ends) averaged over the interval."""
        last = self.last_fetch
        since = np.where(np.isnan(last), now, last)
        out = self.posterior_mean() * self.modulation.integral(since, np.full_like(since, now))
        if self.posterior == "grid":
            a = 0.5 * self.drift_variances() * (now - since)
            growth = np.where(a > 1e-12, np.expm1(a) / np.where(a > 1e-12, a, 1.0), 1.0)
            out = out * growth
        return out

    def summary(self) -> dict[str, Any]:
        """Counts and rate quantiles (per day) for ``bayesrate schedule stats``."""
        n = self.n
        fetched = int(np.isfinite(self.last_fetch).sum())
        rate_day = self.posterior_mean() * HOURS_PER_DAY
        q = np.quantile(rate_day, [0.1, 0.5, 0.9]).tolist() if n else [np.nan] * 3
        return {
            "urls": n,
            "hosts": len(self.hosts),
            "fetched": fetched,
            "fetches": int(self.n_fetch.sum()),
            "changes_detected": int(self.n_changed.sum()),
            "changed_every_visit": int(self.changed_every_visit.sum()),
            "rate_per_day_q10_q50_q90": q,
            "last_fetch_max_hours": float(np.nanmax(self.last_fetch)) if fetched else None,
            "posterior": self.posterior,
            "update": self.config.update if self.posterior == "gamma" else "exact (grid)",
            "priors": dict(self.priors.metadata).get("model", "artifact"),
            "hour_of_week": self.modulation.active,
            "baseline_flags_ignored": self.baseline_flags_ignored,
        }


def _checked_columns(urls, times, changed) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A batch's URLs as text, finite times and 0/1 change flags (errors name the rows)."""
    urls = (
        urls
        if isinstance(urls, list) and all(type(u) is str for u in urls)
        else [str(u) for u in urls]
    )
    n = len(urls)
    t = np.asarray(times, dtype=np.float64)
    if t.shape != (n,):
        raise ObservationError(f"expected {n} times, got shape {t.shape}", field="time")
    bad = np.flatnonzero(~np.isfinite(t))
    if len(bad):
        raise ObservationError(
            "times must be finite", field="time", rows=bad, pages=[urls[i] for i in bad]
        )
    c_raw = np.asarray(changed)
    if c_raw.shape != (n,):
        raise ObservationError(f"expected {n} change flags", field="changed")
    try:
        c_num = c_raw.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ObservationError("change flags must be 0 or 1", field="changed") from exc
    bad = np.flatnonzero((c_num != 0) & (c_num != 1))
    if len(bad):
        raise ObservationError(
            "change flags must be 0 or 1", field="changed", rows=bad, pages=[urls[i] for i in bad]
        )
    return urls, t, c_num.astype(np.int8)
