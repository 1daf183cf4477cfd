"""The numba kernels of :mod:`bayesrate.models.hmm` (each page's path summed out on a
log-rate grid), at module level so that numba's on-disk cache holds them across processes
(functions defined inside another function, or referring to ones that are, recompile in
every process)."""

from __future__ import annotations

import numba
import numpy as np

from bayesrate.models.fused import binomial_terms_kernel

#: transition entries below this fraction of their row's largest are not used
BAND_TOLERANCE = 1e-17


def _njit(fn):
    return numba.njit(cache=True, nogil=True)(fn)


@_njit
def bands(transitions):
    """Per domain and row: the first and last column with a used entry."""
    n_domains, k, _ = transitions.shape
    lo = np.zeros((n_domains, k), dtype=np.int64)
    hi = np.zeros((n_domains, k), dtype=np.int64)
    for d in range(n_domains):
        for i in range(k):
            top = 0.0
            for j in range(k):
                top = max(top, transitions[d, i, j])
            a, b = k, -1
            for j in range(k):
                if transitions[d, i, j] > BAND_TOLERANCE * top:
                    a = min(a, j)
                    b = max(b, j)
            lo[d, i], hi[d, i] = a, b + 1
    return lo, hi


@_njit
def forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms):
    """Scaled forward pass of page ``p`` into ``alphas[first:last+1]``, ``norms``."""
    k = init.shape[1]
    f, end, d = first[p], last[p], domain[p]
    total = 0.0
    for j in range(k):
        alphas[f, j] = init[p, j] * emission[p, f, j]
        total += alphas[f, j]
    norms[f] = total
    for j in range(k):
        alphas[f, j] /= total
    for e in range(f + 1, end + 1):
        for j in range(k):
            alphas[e, j] = 0.0
        for i in range(k):
            a = alphas[e - 1, i]
            if a == 0.0:
                continue
            for j in range(lo[d, i], hi[d, i]):
                alphas[e, j] += a * transitions[d, i, j]
        total = 0.0
        for j in range(k):
            alphas[e, j] *= emission[p, e, j]
            total += alphas[e, j]
        norms[e] = total
        for j in range(k):
            alphas[e, j] /= total


@_njit
def posterior_slopes(alphas, beta, slope, p, e, out):
    """``out[m, p, e] = Σ_k γ_e(k) slope[m, p, e, k]``, ``γ_e = α̂_e β̂_e`` the state's
    posterior, for every table ``m`` of slopes."""
    for m in range(slope.shape[0]):
        total = 0.0
        for j in range(alphas.shape[1]):
            total += alphas[e, j] * beta[j] * slope[m, p, e, j]
        out[m, p, e] = total


@_njit
def logp_grad(init, transitions, emission, domain, first, last, slope):
    """``(Σ_p log Σ_paths, ∂/∂init, ∂/∂T, ∂/∂slopes)`` (see :mod:`bayesrate.models.hmm`)."""
    per_page = np.zeros(emission.shape[0])
    return pages_logp_grad(init, transitions, emission, domain, first, last, slope, per_page)


@_njit
def page_logp_grad(init, transitions, emission, domain, first, last):
    """``(per-page log Σ_paths, ∂ Σ_p/∂init, ∂ Σ_p/∂T)``: the pages' terms of
    :func:`logp_grad` (``∂/∂init[p]`` is page ``p``'s own term's)."""
    per_page = np.zeros(emission.shape[0])
    no_slope = np.zeros((0, 0, 0, 0))
    _, grad_init, grad_t, _ = pages_logp_grad(
        init, transitions, emission, domain, first, last, no_slope, per_page
    )
    return per_page, grad_init, grad_t


@_njit
def pages_logp_grad(init, transitions, emission, domain, first, last, slope, per_page):
    """:func:`logp_grad`, each page's term also written to ``per_page``."""
    n_pages, n_epochs, k = emission.shape
    lo, hi = bands(transitions)
    alphas = np.empty((max(n_epochs, 1), k))
    norms = np.empty(max(n_epochs, 1))
    beta = np.empty(k)
    weight = np.empty(k)
    grad_init = np.zeros_like(init)
    grad_t = np.zeros_like(transitions)
    shifted = slope.shape[0] > 0
    grad_shift = np.zeros((slope.shape[0], n_pages if shifted else 0, n_epochs))
    logp = 0.0
    for p in range(n_pages):
        f, end, d = first[p], last[p], domain[p]
        if f >= n_epochs:
            continue
        forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
        for e in range(f, end + 1):
            logp += np.log(norms[e])
            per_page[p] += np.log(norms[e])
        for j in range(k):
            beta[j] = 1.0
        for e in range(end, f, -1):
            if shifted:
                posterior_slopes(alphas, beta, slope, p, e, grad_shift)
            for j in range(k):
                weight[j] = emission[p, e, j] * beta[j] / norms[e]
            for i in range(k):
                a = alphas[e - 1, i]
                s = 0.0
                for j in range(lo[d, i], hi[d, i]):
                    grad_t[d, i, j] += a * weight[j]
                    s += transitions[d, i, j] * weight[j]
                beta[i] = s
        for j in range(k):
            grad_init[p, j] = emission[p, f, j] * beta[j] / norms[f]
        if shifted:
            posterior_slopes(alphas, beta, slope, p, f, grad_shift)
    return logp, grad_init, grad_t, grad_shift


@_njit
def filter_at(init, transitions, emission, domain, first, last, column):
    """``(pages, K)`` each page's distribution in ``column`` (≥ its last) given its data."""
    n_pages, n_epochs, k = emission.shape
    lo, hi = bands(transitions)
    alphas = np.empty((max(n_epochs, 1), k))
    norms = np.empty(max(n_epochs, 1))
    out = np.empty((n_pages, k))
    state = np.empty(k)
    nxt = np.empty(k)
    for p in range(n_pages):
        d = domain[p]
        if first[p] >= n_epochs:
            out[p] = init[p]
            continue
        forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
        for j in range(k):
            state[j] = alphas[last[p], j]
        for _ in range(last[p], column):
            for j in range(k):
                nxt[j] = 0.0
            for i in range(k):
                for j in range(lo[d, i], hi[d, i]):
                    nxt[j] += state[i] * transitions[d, i, j]
            for j in range(k):
                state[j] = nxt[j]
        out[p] = state
    return out


@_njit
def page_logps(init, transitions, emission, domain, first, last):
    """``(pages,)`` each page's ``log Σ_paths`` (of the scaled emission table)."""
    n_pages, n_epochs, k = emission.shape
    lo, hi = bands(transitions)
    alphas = np.empty((max(n_epochs, 1), k))
    norms = np.empty(max(n_epochs, 1))
    out = np.zeros(n_pages)
    for p in range(n_pages):
        if first[p] >= n_epochs:
            continue
        forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
        for e in range(first[p], last[p] + 1):
            out[p] += np.log(norms[e])
    return out


@_njit
def pick(weights, u):
    """The index at which the running sum of ``weights`` first exceeds ``u`` times
    their total (the last positive one if rounding leaves none)."""
    total = 0.0
    for j in range(weights.shape[0]):
        total += weights[j]
    target, running, chosen = u * total, 0.0, -1
    for j in range(weights.shape[0]):
        if weights[j] > 0.0:
            chosen = j
            running += weights[j]
            if running > target:
                return j
    return chosen


@_njit
def sample_paths(init, transitions, emission, domain, first, last, uniforms):
    """``(pages, epochs)`` one path per page from its posterior given its data (forward
    filtering, backward sampling; ``uniforms`` one per page and column); −1 outside
    each page's columns ``first … last``."""
    n_pages, n_epochs, k = emission.shape
    lo, hi = bands(transitions)
    alphas = np.empty((max(n_epochs, 1), k))
    norms = np.empty(max(n_epochs, 1))
    weights = np.empty(k)
    states = np.full((n_pages, n_epochs), -1, dtype=np.int64)
    for p in range(n_pages):
        f, end, d = first[p], last[p], domain[p]
        if f >= n_epochs:
            continue
        forward_page(p, init, transitions, emission, domain, first, last, lo, hi, alphas, norms)
        states[p, end] = pick(alphas[end], uniforms[p, end])
        for e in range(end - 1, f - 1, -1):
            j = states[p, e + 1]
            for i in range(k):
                weights[i] = alphas[e, i] * transitions[d, i, j]
            states[p, e] = pick(weights, uniforms[p, e])
    return states


@_njit
def shifted_tables(
    grid,
    shift,
    added,
    term_row,
    term_tau,
    log_tau,
    entry_start,
    entry_key,
    entry_count,
    unchanged,
    cell_group,
    cell_page,
    cell_epoch,
    n_pages,
    n_epochs,
):
    """Emission table (scaled per cell), its log-slopes with respect to the cell's
    group's shift and added log-rate (``(2, pages, epochs, K)``), and each page's sum of
    the cells' log scales, at rates ``exp(grid[k] + shift[g]) + exp(added[g])`` (see
    :class:`ShiftedEmission`). The exponentials and ``log(1 − e^{−λτ})`` are evaluated
    once per (group, state) and (group, τ, state), not per cell."""
    n_groups, k = shift.shape[0], grid.shape[0]
    log_rate = np.empty(n_groups * k)
    rate = np.empty(n_groups * k)
    own_share = np.empty(n_groups * k)
    for g in range(n_groups):
        for j in range(k):
            own = grid[j] + shift[g]  # finite, so top is
            top = max(own, added[g])
            total = top + np.log(np.exp(own - top) + np.exp(added[g] - top))
            log_rate[g * k + j] = total
            rate[g * k + j] = np.exp(total)
            own_share[g * k + j] = np.exp(own - total)
    n_terms = term_row.shape[0]
    values, slopes, _, _ = binomial_terms_kernel(
        log_rate,
        log_tau,
        term_row,
        term_tau,
        np.zeros(n_terms),
        np.ones(n_terms),
        np.zeros(n_terms),
    )
    emission = np.ones((n_pages, n_epochs, k))
    slope = np.zeros((2, n_pages, n_epochs, k))
    scale = np.zeros(n_pages)
    ll = np.empty(k)
    sl = np.empty(k)
    for c in range(cell_page.shape[0]):
        p, e, base = cell_page[c], cell_epoch[c], cell_group[c] * k
        for j in range(k):
            quiet = rate[base + j] * unchanged[c]
            ll[j] = -quiet
            sl[j] = -quiet
        for t in range(entry_start[c], entry_start[c + 1]):
            at, n = entry_key[t] * k, entry_count[t]
            for j in range(k):
                ll[j] += n * values[at + j]
                sl[j] += n * slopes[at + j]
        top = ll[0]
        for j in range(1, k):
            top = max(top, ll[j])
        scale[p] += top
        for j in range(k):
            emission[p, e, j] = np.exp(ll[j] - top)
            w = own_share[base + j]
            slope[0, p, e, j] = sl[j] * w
            slope[1, p, e, j] = sl[j] * (1.0 - w)
    return emission, slope, scale


@_njit
def shifted_logp_grad(
    init,
    transitions,
    shift,
    added,
    grid,
    term_row,
    term_tau,
    log_tau,
    entry_start,
    entry_key,
    entry_count,
    unchanged,
    cell_group,
    cell_page,
    cell_epoch,
    domain,
    first,
    last,
):
    n_pages = first.shape[0]
    n_epochs = cell_epoch.max() + 1 if cell_epoch.shape[0] else 0
    emission, slope, scale = shifted_tables(
        grid,
        shift,
        added,
        term_row,
        term_tau,
        log_tau,
        entry_start,
        entry_key,
        entry_count,
        unchanged,
        cell_group,
        cell_page,
        cell_epoch,
        n_pages,
        n_epochs,
    )
    logp, grad_init, grad_t, grad_cells = logp_grad(
        init, transitions, emission, domain, first, last, slope
    )
    grad_shift = np.zeros(shift.shape[0])
    grad_added = np.zeros(shift.shape[0])
    for c in range(cell_page.shape[0]):
        g = cell_group[c]
        grad_shift[g] += grad_cells[0, cell_page[c], cell_epoch[c]]
        grad_added[g] += grad_cells[1, cell_page[c], cell_epoch[c]]
    return logp + scale.sum(), grad_init, grad_t, grad_shift, grad_added
