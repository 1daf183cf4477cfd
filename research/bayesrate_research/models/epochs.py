"""The shocks models' epoch patterns, on the core's epoch grid (:mod:`bayesrate.models.epochs`:
:func:`~bayesrate.models.epochs.epoch_overlap` gives every interval's hours in each epoch
it overlaps; :class:`EpochPatterns` groups them).

Epochs are consecutive spans of ``epoch_hours`` counted back from an *anchor* (the fitted
data's last visit): epoch −1 is ``(anchor − L, anchor]``, −2 the span before it, and epochs
0, 1, … lie after the anchor (a forecast's future). An interval ``(s, t]`` has some hours in
every epoch it overlaps (exact; most intervals lie in one epoch).

Intervals are grouped per page by *pattern*: the page's domain and the interval's hours per
epoch (its length and epoch when it lies in one epoch; a straddling interval is a pattern of
its own). Intervals of one pattern have the same integrated rate under epoch × domain
effects, so ``n`` of them with ``c`` detections are one Binomial: sufficient statistics per
(page, epoch, interval length), as :mod:`bayesrate.models.groups` has per (page, length).
A pattern's exposure is ``E = Σ_e hours_e · exp(shock[domain, e])``; :func:`log_exposure`
and :func:`log_exposure_draws` are its PyTensor and numpy forms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesrate.models.epochs import epoch_overlap
from bayesrate.models.groups import PATTERN_RESOLUTION_HOURS, IntervalGroups
from bayesrate.ragged import concat_ranges


@dataclass(frozen=True, eq=False)
class EpochPatterns:
    """Intervals grouped by (page, pattern) on an epoch grid.

    Attributes
    ----------
    anchor, epoch_hours
        The grid: epoch ``k`` is ``(anchor + k·L, anchor + (k + 1)·L]``.
    first_epoch, n_epochs
        Epoch numbers ``first_epoch … first_epoch + n_epochs − 1`` are columns
        ``0 … n_epochs − 1`` of a shock matrix.
    groups
        The (page, pattern) groups; ``basis`` holds each pattern's length (hours).
    pattern_domain, pattern_start, pattern_end
        Domain code of each pattern, and one of its intervals.
    interval_group
        Per interval (in the order given): its group.
    entry_pattern, entry_epoch, entry_hours
        Per (pattern, epoch) piece, sorted by pattern: its pattern, epoch column and hours.
    """

    anchor: float
    epoch_hours: float
    first_epoch: int
    n_epochs: int
    groups: IntervalGroups
    pattern_domain: np.ndarray
    pattern_start: np.ndarray
    pattern_end: np.ndarray
    interval_group: np.ndarray
    entry_pattern: np.ndarray
    entry_epoch: np.ndarray
    entry_hours: np.ndarray

    @property
    def n_patterns(self) -> int:
        return len(self.pattern_domain)

    def entry_cell(self, n_epochs: int | None = None) -> np.ndarray:
        """Flat index ``domain · n_epochs + epoch`` of each piece into a shock matrix."""
        width = self.n_epochs if n_epochs is None else n_epochs
        return self.pattern_domain[self.entry_pattern] * width + self.entry_epoch

    def select(self, mask: np.ndarray) -> EpochPatterns:
        """The groups where ``mask`` holds, with only the patterns they use (renumbered);
        ``interval_group`` is dropped (−1 for every interval)."""
        g = self.groups
        mask = np.asarray(mask, dtype=bool)
        used, pattern = np.unique(g.pattern[mask], return_inverse=True)
        new_number = np.full(self.n_patterns, -1, dtype=np.int64)
        new_number[used] = np.arange(len(used))
        keep = new_number[self.entry_pattern] >= 0
        return EpochPatterns(
            anchor=self.anchor,
            epoch_hours=self.epoch_hours,
            first_epoch=self.first_epoch,
            n_epochs=self.n_epochs,
            groups=IntervalGroups(
                n_pages=g.n_pages,
                page=g.page[mask],
                pattern=pattern.reshape(-1).astype(np.int64),
                trials=g.trials[mask],
                detected=g.detected[mask],
                basis=g.basis[used],
            ),
            pattern_domain=self.pattern_domain[used],
            pattern_start=self.pattern_start[used],
            pattern_end=self.pattern_end[used],
            interval_group=np.full(len(self.interval_group), -1, dtype=np.int64),
            entry_pattern=new_number[self.entry_pattern[keep]],
            entry_epoch=self.entry_epoch[keep],
            entry_hours=self.entry_hours[keep],
        )

    def page_hours(self) -> np.ndarray:
        """``(n_pages, n_epochs)``: each page's interval hours in each epoch (all groups,
        trials included): the exposure of its quiet intervals is this times ``exp(shock)``."""
        g = self.groups
        starts = np.searchsorted(self.entry_pattern, g.pattern)
        ends = np.searchsorted(self.entry_pattern, g.pattern, side="right")
        counts = ends - starts
        entry = concat_ranges(starts, counts)
        group = np.repeat(np.arange(len(g.page)), counts)
        out = np.zeros((g.n_pages, self.n_epochs))
        hours = g.trials[group] * self.entry_hours[entry]
        np.add.at(out, (g.page[group], self.entry_epoch[entry]), hours)
        return out

    def visit_patterns(self, timezone: str = "UTC"):
        """The same groups as :class:`~bayesrate.models.groups.VisitPatterns` (for the
        predictive's group descriptions)."""
        from bayesrate.models.groups import VisitPatterns

        g = self.groups
        return VisitPatterns(
            timezone=timezone,
            n_pages=g.n_pages,
            pattern_start=self.pattern_start,
            pattern_end=self.pattern_end,
            group_page=g.page,
            group_pattern=g.pattern,
            group_n=g.trials,
            group_changed=g.detected,
            interval_group=self.interval_group,
        )


def interval_patterns(
    start: np.ndarray,
    end: np.ndarray,
    page: np.ndarray,
    changed: np.ndarray,
    page_domain: np.ndarray,
    n_pages: int,
    anchor: float,
    epoch_hours: float,
    first_epoch: int | None = None,
    refine: np.ndarray | None = None,
) -> EpochPatterns:
    """Group intervals (any order) by (page, pattern) on the epoch grid of ``anchor``.

    ``first_epoch`` fixes the grid's first column (default: the earliest epoch touched);
    epochs before it are an error. ``refine``: an integer per interval that patterns must
    also share (e.g. the hour-of-week pattern, so that groups keep the hour of their
    detecting visits).
    """
    if epoch_hours <= 0:
        raise ValueError(f"epoch_hours must be positive, got {epoch_hours}")
    owner, epoch, hours = epoch_overlap(start, end, anchor, epoch_hours)
    lo = int(epoch.min()) if len(epoch) else 0
    first = lo if first_epoch is None else int(first_epoch)
    if lo < first:
        raise ValueError(f"intervals reach epoch {lo}, before the grid's first {first}")
    n_epochs = (int(epoch.max()) - first + 1) if len(epoch) else 0
    column = epoch - first
    n = len(start)
    pieces = np.bincount(owner, minlength=n)
    single = pieces == 1
    domain = np.asarray(page_domain)[page]
    ticks = np.round((np.asarray(end) - np.asarray(start)) / PATTERN_RESOLUTION_HOURS)
    first_piece = np.cumsum(pieces) - pieces
    key = pd.MultiIndex.from_arrays(
        [
            domain,
            np.where(single, column[first_piece] if n else 0, -1),
            np.where(single, ticks, -1 - np.arange(n)),
            np.zeros(n, dtype=np.int64) if refine is None else np.asarray(refine),
        ]
    )
    pattern, _ = pd.factorize(key)
    pattern = pattern.astype(np.int64)
    n_patterns = int(pattern.max()) + 1 if n else 0
    representative = np.full(n_patterns, n, dtype=np.int64)
    np.minimum.at(representative, pattern, np.arange(n))
    # the pieces of each pattern's first interval: its exposure per epoch
    rep_pieces = np.isin(owner, representative)
    rep_owner = owner[rep_pieces]
    entry_pattern = pattern[rep_owner]
    order = np.argsort(entry_pattern, kind="stable")
    group_key, interval_group, counts = np.unique(
        page * max(n_patterns, 1) + pattern, return_inverse=True, return_counts=True
    )
    detected = np.bincount(
        interval_group.reshape(-1), weights=np.asarray(changed, dtype=np.float64),
        minlength=len(group_key),
    )  # fmt: skip
    group_page, group_pattern = np.divmod(group_key, max(n_patterns, 1))
    start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    lengths = (end - start)[representative]
    groups = IntervalGroups(
        n_pages=n_pages,
        page=group_page.astype(np.int64),
        pattern=group_pattern.astype(np.int64),
        trials=counts.astype(np.int64),
        detected=np.rint(detected).astype(np.int64),
        basis=lengths[:, None],
    )
    return EpochPatterns(
        anchor=float(anchor),
        epoch_hours=float(epoch_hours),
        first_epoch=first,
        n_epochs=n_epochs,
        groups=groups,
        pattern_domain=domain[representative].astype(np.int64),
        pattern_start=start[representative],
        pattern_end=end[representative],
        interval_group=interval_group.reshape(-1).astype(np.int64),
        entry_pattern=entry_pattern[order],
        entry_epoch=column[rep_pieces][order],
        entry_hours=hours[rep_pieces][order],
    )


def epoch_patterns(
    obs,
    epoch_hours: float,
    anchor: float | None = None,
    *,
    first_epoch: int | None = None,
    refine: np.ndarray | None = None,
) -> EpochPatterns:
    """The intervals of observations (visits after each page's first, in visit order)
    grouped on the epoch grid (``anchor`` default: the last visit)."""
    ends = np.flatnonzero(~obs.is_baseline)
    anchor = float(obs.time.max()) if anchor is None else float(anchor)
    return interval_patterns(
        obs.time[ends - 1],
        obs.time[ends],
        obs.page_of_visit[ends],
        obs.changed[ends],
        obs.domain_codes,
        obs.n_pages,
        anchor,
        epoch_hours,
        first_epoch=first_epoch,
        refine=refine,
    )


def log_exposure(patterns: EpochPatterns, shock):
    """``log E`` of every pattern for a ``(domains, n_epochs)`` shock tensor (PyTensor)."""
    import pytensor.tensor as pt

    cell = pt.as_tensor_variable(patterns.entry_cell(patterns.n_epochs))
    weights = patterns.entry_hours * pt.exp(pt.as_tensor_variable(shock).reshape((-1,))[cell])
    index = pt.as_tensor_variable(patterns.entry_pattern)
    return pt.log(pt.zeros(patterns.n_patterns)[index].inc(weights))


def page_exposure(page_hours: np.ndarray, page_domain: np.ndarray, shock):
    """``(n_pages,)`` ``Σ_e hours[p, e]·exp(shock[domain(p), e])`` (PyTensor): dense, no
    scatter (a scatter over many small patterns cost ~10x more per gradient)."""
    import pytensor.tensor as pt

    rows = pt.exp(pt.as_tensor_variable(shock))[pt.as_tensor_variable(page_domain)]
    return (rows * page_hours).sum(axis=1)


def log_exposure_draws(patterns: EpochPatterns, shock: np.ndarray) -> np.ndarray:
    """``(draws, n_patterns)`` ``log E`` for ``(draws, domains, n_epochs)`` shocks (numpy)."""
    shock = np.asarray(shock, dtype=np.float64)
    flat = shock.reshape(shock.shape[0], -1)
    weights = patterns.entry_hours[None, :] * np.exp(flat[:, patterns.entry_cell(shock.shape[2])])
    if not patterns.n_patterns:
        return np.zeros((shock.shape[0], 0))
    starts = np.searchsorted(patterns.entry_pattern, np.arange(patterns.n_patterns))
    with np.errstate(divide="ignore"):  # a pattern of zero hours has exposure 0
        return np.log(np.add.reduceat(weights, starts, axis=1))
