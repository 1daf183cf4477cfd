"""The dynamic models' forecast with each page's future walk summed out on the grid.

Given one posterior draw of the population (and of the shocks or edits), a page's log-rate
in the last fitted epoch has its filtered distribution on the model's grid
(:meth:`~bayesrate.models.dynamic.DynamicModel.filtered`), and each later epoch takes one
step of the walk (the draw's transition matrix of the page's domain). A test interval
has the rate of its closing visit's epoch; the window ("changes at all") the rates of the
epochs it overlaps. The count of detections ``K`` of a page sums Binomials whose
probabilities depend on the state of their epoch, so per draw its distribution is a
forward pass over (grid state, count so far):

    α_0(s, ·) = π(s) δ₀,   α_a = (Tᵀ α_{a−1}) ⊛ Binomials of epoch a,   P(K = c) = Σ_s α_A(s, c)

(``⊛``: each state's count distribution convolved with its own Binomials), truncated at a
cap per page. The predictive mixes that over the kept draws. For a grid fit it is the law
the sampled paths of :func:`bayesrate.studies.forecast.model_prediction`
(``walks="sampled"``) draw from, without their Monte Carlo error (a Laplace fit's sampled
paths start from its Normal ``log_rate`` draws; here every fit starts from the grid).
With one path per draw, the probability of a count far in the tail (a page whose rate
jumped) is set by the few most extreme of the sampled steps, and varies by hundreds of
nats between seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

#: kept draws whose filtered distributions are computed at once
DRAW_CHUNK = 64
#: the worlds' counts up to this quantile per page get their exact predictive probability
#: (:meth:`WalkForecast.count_distribution`)
WORLD_QUANTILE = 0.99
#: rounding allowance on a page's mass below its cap
MASS_MARGIN = 1e-9


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})  # vector sums
def walk_count_pmf(pi0, trans, page_walk, group_start, group_ahead, group_n, log_q, lam,
                   coef_start, log_coef, window_start, window_ahead, window_log_survival,
                   page_steps, pmf_start, pmf_out, no_change_out, expected_out):  # fmt: skip
    """Add one draw's count distribution of every page (up to its cap) to ``pmf_out``,
    its probability of no change in the window to ``no_change_out`` and its expected count
    to ``expected_out``.

    Parameters
    ----------
    pi0
        ``(pages, K)`` state distribution in the last fitted epoch.
    trans, page_walk
        ``(walks, K, K)`` one epoch's walk step (a domain's, or a page's) and which of
        them each page takes.
    group_start, group_ahead, group_n
        Test groups sorted by (page, epochs ahead): page ``p``'s are
        ``group_start[p]:group_start[p + 1]``; epochs after the last fitted one; intervals.
    log_q, lam
        ``(groups, K)`` per group and state ``log(1 − e^{−Λ})`` and ``Λ`` of one interval.
    coef_start, log_coef
        Group ``g``'s ``log C(n, j)`` for ``j`` up to its cap at
        ``log_coef[coef_start[g]:coef_start[g + 1]]``.
    window_start, window_ahead, window_log_survival
        The window's pieces per page (sorted by epochs ahead) and ``(pieces, K)`` their
        ``−Λ``.
    page_steps
        Per page, the last epoch ahead with a group or a window piece.
    pmf_start
        Page ``p``'s counts ``0 … cap`` sit at ``pmf_out[pmf_start[p]:pmf_start[p + 1]]``.
    """
    n_pages, k = pi0.shape
    width = 1
    for p in range(n_pages):
        width = max(width, pmf_start[p + 1] - pmf_start[p])
    alpha, moved = np.empty((k, width)), np.empty((k, width))
    marginal, survive = np.empty(k), np.empty(k)
    new_marginal, new_survive = np.empty(k), np.empty(k)
    binom = np.empty(width)
    for p in range(n_pages):
        size = pmf_start[p + 1] - pmf_start[p]
        walk = page_walk[p]
        for s in range(k):
            alpha[s, 0] = pi0[p, s]
            marginal[s] = survive[s] = pi0[p, s]
        reach = 0  # counts above this have probability 0 in every state so far
        g, piece = group_start[p], window_start[p]
        expected = 0.0
        for a in range(page_steps[p] + 1):
            if a > 0:
                for t in range(k):
                    new_marginal[t] = new_survive[t] = 0.0
                    for c in range(reach + 1):
                        moved[t, c] = 0.0
                for s in range(k):
                    if marginal[s] == 0.0:
                        continue
                    for t in range(k):
                        step = trans[walk, s, t]
                        if step == 0.0:
                            continue
                        new_marginal[t] += step * marginal[s]
                        new_survive[t] += step * survive[s]
                        for c in range(reach + 1):
                            moved[t, c] += step * alpha[s, c]
                for t in range(k):
                    marginal[t], survive[t] = new_marginal[t], new_survive[t]
                    for c in range(reach + 1):
                        alpha[t, c] = moved[t, c]
            while g < group_start[p + 1] and group_ahead[g] == a:
                n = group_n[g]
                top = min(n, size - 1)
                coef = coef_start[g]
                new_reach = min(reach + top, size - 1)
                for s in range(k):
                    expected += n * marginal[s] * np.exp(log_q[g, s])
                    if marginal[s] == 0.0:
                        for c in range(reach + 1, new_reach + 1):
                            alpha[s, c] = 0.0
                        continue
                    hit, miss = log_q[g, s], -lam[g, s]  # log P(change), log P(none)
                    for j in range(top + 1):
                        binom[j] = np.exp(log_coef[coef + j] + j * hit + (n - j) * miss)
                    for c in range(new_reach, -1, -1):  # in place: c − j ≤ c is read first
                        total = 0.0
                        for j in range(max(0, c - reach), min(c, top) + 1):
                            total += alpha[s, c - j] * binom[j]
                        alpha[s, c] = total
                reach = new_reach
                g += 1
            while piece < window_start[p + 1] and window_ahead[piece] == a:
                for s in range(k):
                    survive[s] *= np.exp(window_log_survival[piece, s])
                piece += 1
        no_change = 0.0
        for s in range(k):
            no_change += survive[s]
            for c in range(reach + 1):
                pmf_out[pmf_start[p] + c] += alpha[s, c]
        no_change_out[p] += no_change
        expected_out[p] += expected


@dataclass(frozen=True, eq=False)
class WalkForecast:
    """A dynamic model's predictive of the test counts with the page walks summed out.

    It answers what :func:`bayesrate.studies.forecast.score` asks of a prediction
    (:meth:`draw_worlds`, :meth:`count_distribution`) exactly in each page's walk, mixed
    over ``len(keep)`` posterior draws.

    Attributes
    ----------
    model
        The fitted dynamic model.
    draws
        Its population (:attr:`~bayesrate.models.dynamic.DynamicModel.filter_vars`) at
        the kept draws.
    page_domain
        Domain code of each scored page.
    group_page, group_ahead, group_tau, group_n
        Test groups sorted by (page, epochs after the last fitted one): interval length
        (hours) and number of intervals.
    window_page, window_ahead, window_hours
        The window's pieces, per page and epoch.
    log_shift, log_added
        ``(draws, domains, steps + 1)``: the log-rate offset (a shock) and the log of an
        added rate (edits; ``−inf``: none) of each epoch from the last fitted one.
    rate_per_hour
        Per page, the posterior mean rate in the last fitted epoch.
    """

    model: Any
    draws: dict[str, np.ndarray]
    page_domain: np.ndarray
    group_page: np.ndarray
    group_ahead: np.ndarray
    group_tau: np.ndarray
    group_n: np.ndarray
    window_page: np.ndarray
    window_ahead: np.ndarray
    window_hours: np.ndarray
    log_shift: np.ndarray
    log_added: np.ndarray
    rate_per_hour: np.ndarray

    @property
    def n_draws(self) -> int:
        return len(self.draws["sigma_page"])

    @property
    def n_pages(self) -> int:
        return len(self.page_domain)

    @property
    def grid(self) -> np.ndarray:
        return self.model.grid(self.model.data_)

    def _draws(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {name: value[rows] for name, value in self.draws.items()}

    def _rates(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``i``'s ``(groups, K)`` ``log(1 − e^{−Λ})`` and ``Λ`` of one interval and
        ``(pieces, K)`` ``−Λ`` of the window's pieces."""
        from bayesrate.likelihood import log1mexp_of_log

        grid = self.grid

        def log_rate(page, ahead):
            dom = self.page_domain[page]
            level = grid[None, :] + self.log_shift[i, dom, ahead][:, None]
            return np.logaddexp(level, self.log_added[i, dom, ahead][:, None])

        with np.errstate(divide="ignore"):  # an interval of length 0 never shows a change
            log_tau = np.log(self.group_tau)
        log_lam = log_rate(self.group_page, self.group_ahead) + log_tau[:, None]
        window = log_rate(self.window_page, self.window_ahead)
        return (
            log1mexp_of_log(log_lam),
            np.exp(log_lam),
            -np.exp(window) * self.window_hours[:, None],
        )

    @property
    def page_walk(self) -> np.ndarray:
        """Which of :meth:`_transitions`' matrices each page walks by."""
        return self.model._walk_index(self.model.data_)

    def _transitions(self, i: int) -> np.ndarray:
        return self.model._chain(self.draws, i, self.model.data_)[1]

    def _filtered(self, rows: np.ndarray) -> np.ndarray:
        return self.model.filtered(self._draws(rows), self.model.data_)

    def draw_worlds(self, n_worlds: int, seed: int | str):
        """Worlds from the predictive (:func:`bayesrate.studies.forecast.draw_worlds`):
        each takes one kept draw; each page a path of states from that draw's filtered
        distribution and walk, and its test counts from the path's Binomials."""
        from bayesrate.predictive import Worlds
        from bayesrate.seeds import draw_states, rng_from

        rng = rng_from(f"{seed}-worlds")
        draw = rng.integers(self.n_draws, size=n_worlds)
        noise = rng.random((n_worlds, self.n_pages))
        counts = np.zeros((n_worlds, self.n_pages), dtype=np.int64)
        steps = int(self.group_ahead.max(initial=0))
        for lo in range(0, n_worlds, DRAW_CHUNK):
            rows = draw[lo : lo + DRAW_CHUNK]
            filtered = self._filtered(rows)
            for w, i in enumerate(rows):
                trans = self._transitions(i)
                log_q = self._rates(i)[0]
                state = draw_states(filtered[w], rng)
                path = [state]
                for _ in range(steps):
                    state = draw_states(trans[self.page_walk, state], rng)
                    path.append(state)
                states = np.stack(path, axis=1)[self.group_page, self.group_ahead]
                hits = rng.binomial(self.group_n, np.exp(log_q[np.arange(len(states)), states]))
                counts[lo + w] = np.bincount(self.group_page, weights=hits, minlength=self.n_pages)
        return Worlds(counts=counts, noise=noise)

    def count_distribution(self, k: np.ndarray, world_counts: np.ndarray | None = None):
        """Per page the predictive ``P(K = c)`` (as
        :func:`bayesrate.predictive.count_pmf`'s buckets), the expected count and the
        probability of a change in the window, mixed over the kept draws.

        The pmf goes up to ``k`` and to the :data:`WORLD_QUANTILE` quantile of the worlds'
        counts (``world_counts``, ``(worlds, pages)``), not to their largest: a world's
        count beyond has ``P(K < c)`` above the PIT band's upper end wherever the mass up
        there is (:func:`~bayesrate.predictive.pmf_at`), so the worlds' coverage is
        exact; a page where it is not is computed again up to its largest world count.
        The largest counts of a page whose rate may walk high would cost most of the work.
        """
        from bayesrate.predictive import PIT_BAND, pmf_buckets

        cap = np.asarray(k, dtype=np.int64)
        if world_counts is None:
            pmfs, expected, change = self._mixture(cap)
            return pmf_buckets(pmfs, cap), expected, change
        high = np.quantile(world_counts, WORLD_QUANTILE, axis=0, method="higher")
        cap = np.maximum(cap, high.astype(np.int64))
        pmfs, expected, change = self._mixture(cap)
        top = world_counts.max(axis=0)
        mass = np.array([pmf.sum() for pmf in pmfs])
        short = (top > cap) & (mass <= PIT_BAND[1] + MASS_MARGIN)
        if short.any():
            again = self._mixture(np.where(short, top, 0))[0]
            for p in np.flatnonzero(short):
                pmfs[p] = again[p]
            cap = np.where(short, top, cap)
        return pmf_buckets(pmfs, cap), expected, change

    def _mixture(self, cap: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Per page ``P(K = c)`` for ``c ≤ cap``, the expected count and the probability of
        a change in the window, mixed over the kept draws."""
        from concurrent.futures import ThreadPoolExecutor
        from os import cpu_count

        from scipy.special import gammaln

        cap = np.asarray(cap, dtype=np.int64)
        n_pages = self.n_pages
        group_start = np.searchsorted(self.group_page, np.arange(n_pages + 1))
        window_start = np.searchsorted(self.window_page, np.arange(n_pages + 1))
        steps = np.zeros(n_pages, dtype=np.int64)
        np.maximum.at(steps, self.group_page, self.group_ahead)
        np.maximum.at(steps, self.window_page, self.window_ahead)
        pmf_start = np.concatenate([[0], np.cumsum(cap + 1)])
        top = np.minimum(self.group_n, cap[self.group_page])
        coef_start = np.concatenate([[0], np.cumsum(top + 1)])
        j = np.arange(coef_start[-1]) - np.repeat(coef_start[:-1], top + 1)
        n = np.repeat(self.group_n, top + 1)
        log_coef = gammaln(n + 1) - gammaln(j + 1) - gammaln(n - j + 1)
        workers = cpu_count() or 1
        sums = [
            (np.zeros(pmf_start[-1]), np.zeros(n_pages), np.zeros(n_pages)) for _ in range(workers)
        ]

        def one(slot: int, i: int, pi0: np.ndarray) -> None:
            log_q, lam, survival = self._rates(i)
            walk_count_pmf(
                pi0, self._transitions(i), self.page_walk, group_start, self.group_ahead,
                self.group_n, log_q, lam, coef_start, log_coef, window_start,
                self.window_ahead, survival, steps, pmf_start, *sums[slot],
            )  # fmt: skip

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for lo in range(0, self.n_draws, DRAW_CHUNK):
                rows = np.arange(lo, min(lo + DRAW_CHUNK, self.n_draws))
                filtered = self._filtered(rows)

                def share(slot: int, rows=rows, filtered=filtered, lo=lo) -> None:
                    for i in rows[slot::workers]:
                        one(slot, i, filtered[i - lo])

                list(pool.map(share, range(workers)))
        pmf, no_change, expected = (sum(parts) / self.n_draws for parts in zip(*sums, strict=True))
        pages = [pmf[pmf_start[p] : pmf_start[p + 1]] for p in range(n_pages)]
        return pages, expected, 1.0 - no_change


def walk_forecast(model, d, groups, keep: np.ndarray, mean_rate: np.ndarray, seed: int | str):
    """The :class:`WalkForecast` of a fitted dynamic model for the study design ``d`` and
    its test groups by closing epoch (:func:`~bayesrate.studies.forecast.closing_epoch_groups`),
    on the posterior draws ``keep`` (flat positions); fresh shocks and edits of the epochs
    after the last fitted one are drawn as for the sampled paths."""
    from bayesrate.predictive import future_epochs

    future = future_epochs(model, d, groups, keep, seed)
    flat = model._stacked(model.idata_["posterior"])
    order = np.lexsort((future.group_ahead, groups.page))  # the kernel's order
    return WalkForecast(
        model=model,
        draws={name: value[keep] for name, value in flat.items()},
        page_domain=d.train.domain_codes,
        group_page=groups.page[order],
        group_ahead=future.group_ahead[order],
        group_tau=np.asarray(groups.key, dtype=np.float64)[order],
        group_n=groups.count[order].astype(np.int64),
        window_page=future.window_page,
        window_ahead=future.window_ahead,
        window_hours=future.window_hours,
        log_shift=future.log_shift,
        log_added=future.log_added,
        rate_per_hour=mean_rate,
    )
