"""Per-URL scheduler state in columnar arrays, with the prior lookup and batch updates.

One row per URL: the Gamma(α, β) posterior of its change rate (per hour; β in hours of
exposure), last fetch, last fetch that detected a change, importance weight, host, and
fetch/change counters. Arrays grow by doubling, so millions of URLs cost a few dozen bytes
each plus the URL strings (``docs/scheduler.md``).

Updates (:meth:`SchedulerState.observe`) use the censoring-exact moment-matched Gamma update
(:func:`bayesrate.estimators.gamma.adf_update`) or, for comparison, the first source
document's exposure update (``update="exposure"``). When the priors carry hour-of-week
multipliers, an interval's exposure is its integrated modulation ``∫ m(hour_of_week(u)) du`` instead
of its length.

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

UPDATES = ("adf", "exposure")


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduling knobs. Times in hours, rates per hour.

    Attributes
    ----------
    update
        ``"adf"`` (censoring-exact, default) or ``"exposure"`` (seed ``PageState``).
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
        The planner (:func:`~bayesrate.scheduler.decide.plan`) uses this quantile of each
        URL's posterior instead of its mean: a lower confidence bound on the rate, i.e.
        optimism about how long a fetch stays fresh, so that URLs whose rate is uncertain
        (and that a plug-in plan would abandon) get fetched until the data say otherwise.
        ``None`` plans with the posterior mean. Default 0.3 (``docs/scheduler.md``).
    cap_after
        A URL counts as "changed at every visit" (and is scheduled at ``min_interval``)
        once it has at least this many intervals, all changed.
    """

    update: str = "adf"
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
_FLOAT_COLUMNS = ("alpha", "beta", "last_fetch", "last_change", "weight", "target")
_INT_COLUMNS = ("host", "n_fetch", "n_changed")
#: every per-URL column, in storage order
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
        Per-domain Gamma priors (per day); hosts are looked up as domains.
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
        self.modulation = Modulation(self.priors.hour_of_week, self.priors.timezone)
        self.n = 0
        self.urls: list[str] = []
        self.index: dict[str, int] = {}
        self.hosts: list[str] = []
        self.host_index: dict[str, int] = {}
        self._cap = 0
        self._grow(max(int(capacity), 16))
        # politeness log: (host code, time) of recent fetches
        self.log_host = np.zeros(0, dtype=np.int32)
        self.log_time = np.zeros(0, dtype=np.float64)
        self.baseline_flags_ignored = 0
        self.version = 0  # number of applied batches

    # ------------------------------------------------------------------ storage
    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap)
        for name in _FLOAT_COLUMNS:
            new = np.full(cap, np.nan if name.startswith("last") else 0.0)
            if self._cap:
                new[: self.n] = getattr(self, "_" + name)[: self.n]
            setattr(self, "_" + name, new)
        for name in _INT_COLUMNS:
            new = np.zeros(cap, dtype=np.int32)
            if self._cap:
                new[: self.n] = getattr(self, "_" + name)[: self.n]
            setattr(self, "_" + name, new)
        self._cap = cap

    def column(self, name: str) -> np.ndarray:
        """View of one column for the ``n`` URLs (``alpha``, ``beta``, ``last_fetch``, ...)."""
        return getattr(self, "_" + name)[: self.n]

    alpha = property(lambda self: self.column("alpha"))
    beta = property(lambda self: self.column("beta"))
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

        arrays = sum(getattr(self, "_" + c)[: self.n].nbytes for c in _FLOAT_COLUMNS)
        arrays += sum(getattr(self, "_" + c)[: self.n].nbytes for c in _INT_COLUMNS)
        strings = sum(sys.getsizeof(u) for u in self.urls)
        index = sys.getsizeof(self.index) + sys.getsizeof(self.urls) + 8 * self.n
        return {"arrays": arrays, "url_strings": strings, "url_index": index}

    # ------------------------------------------------------------------ priors
    def prior_per_hour(self, hosts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(α, β in hours)`` for new URLs of these hosts (domain prior, global fallback)."""
        if len(hosts) == 0:
            return np.zeros(0), np.zeros(0)
        a, b_day = self.priors.arrays(np.asarray(hosts, dtype=object))
        return a.astype(float), b_day.astype(float) * HOURS_PER_DAY

    def _host_codes(self, hosts: Sequence[str]) -> np.ndarray:
        index = self.host_index
        for h in set(hosts) - index.keys():
            index[h] = len(self.hosts)
            self.hosts.append(h)
        get = index.__getitem__
        return np.fromiter(map(get, hosts), dtype=np.int32, count=len(hosts))

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
        codes = self._host_codes(hosts)
        # priors per host, looked up once per host
        alpha, beta = self.prior_per_hour(self.hosts)
        self._alpha[idx] = alpha[codes]
        self._beta[idx] = beta[codes]
        self._weight[idx] = w
        self._host[idx] = codes
        self._last_fetch[idx] = np.nan
        self._last_change[idx] = np.nan
        self._n_fetch[idx] = 0
        self._n_changed[idx] = 0
        self._target[idx] = 0.0
        self.index.update(zip(urls, range(start, start + k), strict=True))
        self.urls.extend(urls)
        self.n += k
        return idx

    def set_rows(self, urls: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Overwrite the rows of known URLs and append new ones; returns their positions.

        For persistence (:mod:`bayesrate.scheduler.store`): ``urls`` are distinct,
        ``columns`` holds an array for every name in :data:`COLUMNS` and host codes index
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
        for name in COLUMNS:
            getattr(self, "_" + name)[pos] = columns[name]
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
            alpha, beta = self.prior_per_hour(self.hosts)
            self._alpha[rows] = alpha[self._host[rows]]
            self._beta[rows] = beta[self._host[rows]]
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
                "change flags must be 0 or 1",
                field="changed",
                rows=bad,
                pages=[urls[i] for i in bad],
            )
        c = c_num.astype(np.int8)
        w = None if weights is None else self._check_weights(weights, n)
        if hosts is not None and len(hosts) != n:
            raise ObservationError(f"expected {n} hosts", field="host")
        # map URLs (C-speed dict lookups); new ones get negative placeholders -(k+1)
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
        # times must increase per URL, starting after the stored last fetch
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
        new_w = np.ones(len(new_urls)) if w is None else w[first_row]
        self._repeated = bool(repeated)
        return idx, t, c, w, new_urls, new_hosts, new_w

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
        update = adf_update if self.config.update == "adf" else exposure_update
        for r in range(int(rank.max()) + 1 if len(rank) else 0):
            sel = rank == r
            i, ti, ci = idx[sel], t[sel], c[sel]
            last = self._last_fetch[i]
            base = np.isnan(last)
            self.baseline_flags_ignored += int(ci[base].sum())
            upd = ~base
            if upd.any():
                iu = i[upd]
                exposure = self.modulation.integral(last[upd], ti[upd])
                a, b = update(self._alpha[iu], self._beta[iu], exposure, ci[upd])
                self._alpha[iu] = a
                self._beta[iu] = b
                self._n_changed[iu] += ci[upd]
                chg = iu[ci[upd] == 1]
                self._last_change[chg] = ti[upd][ci[upd] == 1]
            self._last_fetch[i] = ti
            self._n_fetch[i] += 1
        self._log(self._host[idx], t)

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

    def posterior_mean(self) -> np.ndarray:
        """Posterior mean rate per hour (``α / β``)."""
        return self.alpha / self.beta

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
            "update": self.config.update,
            "priors": dict(self.priors.metadata).get("model", "artifact"),
            "hour_of_week": self.modulation.active,
            "baseline_flags_ignored": self.baseline_flags_ignored,
        }
