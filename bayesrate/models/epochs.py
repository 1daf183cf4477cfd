"""Epochs of the visit timeline: the one home of the epoch grid and its numbering.

Epochs are consecutive spans of ``epoch_hours`` counted back from an *anchor* (the fitted
data's last visit): epoch −1 is ``(anchor − L, anchor]``, −2 the span before it, and epochs
0, 1, … lie after the anchor (a forecast's future). An interval ``(s, t]`` has some hours in
every epoch it overlaps (:func:`epoch_overlap`: exact; most intervals lie in one epoch; the
forecast window's pieces). The dynamic models group intervals per epoch of their *closing*
visit (:func:`end_epochs`, :class:`EpochCells`: one rate per page and epoch). The research
package's shocks models build their per-(page, epoch, length) patterns on this grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bayesrate.likelihood import CensoredGroups


def epoch_overlap(
    start: np.ndarray, end: np.ndarray, anchor: float, epoch_hours: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hours of each interval ``(start, end]`` in each epoch it overlaps.

    Returns
    -------
    owner, epoch, hours
        One row per (interval, epoch) piece, in interval order: the interval's position,
        the epoch number (−1 = the span ending at ``anchor``) and the hours in it.
    """
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    first = np.floor((start - anchor) / epoch_hours).astype(np.int64)
    last = np.maximum(end_epochs(end, anchor, epoch_hours), first)
    pieces = last - first + 1
    owner = np.repeat(np.arange(len(start)), pieces)
    within = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    epoch = first[owner] + within
    lo = np.maximum(start[owner], anchor + epoch * epoch_hours)
    hi = np.minimum(end[owner], anchor + (epoch + 1) * epoch_hours)
    return owner, epoch, hi - lo


def end_epochs(end: np.ndarray, anchor: float, epoch_hours: float) -> np.ndarray:
    """Epoch number of each interval's closing visit (−1: the epoch ending at ``anchor``)."""
    return np.ceil((np.asarray(end, dtype=np.float64) - anchor) / epoch_hours).astype(np.int64) - 1


@dataclass(frozen=True, eq=False)
class EpochCells:
    """Intervals per (page, epoch of the closing visit), grouped by length.

    Attributes
    ----------
    anchor, epoch_hours, first_epoch, n_epochs
        The grid: column ``c`` is epoch ``first_epoch + c``, ``(anchor + k·L, anchor + (k+1)·L]``.
    cell_page, cell_epoch
        Page and column of each cell with intervals.
    groups
        The cells' sufficient statistics, one "page" of :class:`CensoredGroups` per cell.
    first_column, last_column
        Per page: the columns of its first and last cells (``n_epochs`` and −1 for a page
        without intervals).
    """

    anchor: float
    epoch_hours: float
    first_epoch: int
    n_epochs: int
    n_pages: int
    cell_page: np.ndarray
    cell_epoch: np.ndarray
    groups: CensoredGroups
    first_column: np.ndarray
    last_column: np.ndarray


def epoch_cells(
    start: np.ndarray,
    end: np.ndarray,
    page: np.ndarray,
    changed: np.ndarray,
    n_pages: int,
    anchor: float,
    epoch_hours: float,
) -> EpochCells:
    """Group intervals ``(start, end]`` of ``page`` by (page, epoch of ``end``, length)."""
    from bayesrate.likelihood import CensoredGroups

    if epoch_hours <= 0:
        raise ValueError(f"epoch_hours must be positive, got {epoch_hours}")
    start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    page, changed = np.asarray(page, dtype=np.int64), np.asarray(changed, dtype=bool)
    epoch = end_epochs(end, anchor, epoch_hours)
    first = int(epoch.min()) if len(epoch) else 0
    n_epochs = int(epoch.max()) - first + 1 if len(epoch) else 0
    column = epoch - first
    cell_key, cell_of = np.unique(page * max(n_epochs, 1) + column, return_inverse=True)
    cell_of = cell_of.reshape(-1)
    cell_page, cell_epoch = np.divmod(cell_key, max(n_epochs, 1))
    tau = end - start
    unchanged = np.bincount(cell_of[~changed], weights=tau[~changed], minlength=len(cell_key))
    busy = np.flatnonzero(changed)
    taus, tau_code = np.unique(tau[busy], return_inverse=True)
    key, count = np.unique(cell_of[busy] * len(taus) + tau_code.reshape(-1), return_counts=True)
    group_cell, group_tau = np.divmod(key, max(len(taus), 1))
    groups = CensoredGroups(
        unchanged=unchanged,
        group_page=group_cell.astype(np.int64),
        group_log_exposure=np.log(taus[group_tau]) if len(key) else np.zeros(0),
        group_count=count.astype(np.float64),
    )
    first_column = np.full(n_pages, n_epochs, dtype=np.int64)
    np.minimum.at(first_column, cell_page, cell_epoch)
    last_column = np.full(n_pages, -1, dtype=np.int64)
    np.maximum.at(last_column, cell_page, cell_epoch)
    return EpochCells(
        anchor=float(anchor),
        epoch_hours=float(epoch_hours),
        first_epoch=first,
        n_epochs=n_epochs,
        n_pages=n_pages,
        cell_page=cell_page.astype(np.int64),
        cell_epoch=cell_epoch.astype(np.int64),
        groups=groups,
        first_column=first_column,
        last_column=last_column,
    )
