"""The forecast study's design: the history crawled on a fixed schedule and cut at the split.

Every page alive at the split is crawled every ``crawl_every_hours`` (a random phase per page)
from the start of the history: the visits up to the split are the censored training data, the
only thing a method sees. The same schedule continues through the test window
``(split, split + horizon]``; its intervals (the first one starts at the last training visit)
carry the exact number of changes from the history (:class:`Design`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayesrate.clock import to_timestamp
from bayesrate.constants import HOURS_PER_DAY
from bayesrate.errors import ObservationError
from bayesrate.history import ChangeHistory, FixedInterval, crawl, segment_searchsorted
from bayesrate.observations import Observations, concat_ranges
from bayesrate.seeds import rng_from


@dataclass(frozen=True, eq=False)
class Design:
    """Training observations and the test intervals of the scored pages."""

    train: Observations
    split: float
    history_page: np.ndarray  # history position of each scored page
    interval_page: np.ndarray  # test intervals: page position, start, end, exact changes
    interval_start: np.ndarray
    interval_end: np.ndarray
    interval_truth: np.ndarray
    window_hours: np.ndarray  # per page: (split, split + window] is its test window
    window_changes: np.ndarray
    notes: tuple[str, ...]

    @property
    def n_pages(self) -> int:
        return self.train.n_pages

    @property
    def detected(self) -> np.ndarray:
        hit = self.interval_truth > 0
        return np.bincount(self.interval_page[hit], minlength=self.n_pages)


def design(
    history: ChangeHistory,
    *,
    crawl_every_hours: float,
    split: float,
    horizon_hours: float,
    seed: int | str,
    max_pages: int | None = None,
    phase_step_hours: float = 1.0,
) -> Design:
    """Crawl the history and cut it at the split (see the module docstring).

    Each page is visited at its own phase, drawn on a grid of ``phase_step_hours`` (default
    whole hours: a daily crawl visits each page at a page-specific hour).
    """
    stop = split + horizon_hours
    if not history.start < split < stop <= history.end:
        raise ObservationError(
            f"need start < split < split + horizon <= end of the history "
            f"({iso_time(history.start)} .. {iso_time(history.end)}); "
            f"got split {iso_time(split)}, "
            f"horizon {horizon_hours / HOURS_PER_DAY:g} days",
            field="split",
        )
    schedule = FixedInterval(
        crawl_every_hours, phase_step_hours=min(phase_step_hours, crawl_every_hours)
    )
    crawled = crawl(history, schedule, f"{seed}-crawl", end=stop)
    obs = crawled.observations
    pages_all = np.arange(obs.n_pages)
    n_train = (
        segment_searchsorted(obs.time, obs.offsets, pages_all, split, side="right")
        - obs.offsets[:-1]
    )
    n_visits = obs.visits_per_page
    life = history.lifetime_at(split)[crawled.history_page]
    eligible = (life >= 0) & (n_train >= 2) & (n_visits > n_train)
    notes = [
        f"{int((history.alive_at(split)).sum())} pages alive at the split; "
        f"{int(eligible.sum())} have a training interval and a test interval "
        f"(crawl {schedule.describe()})"
    ]
    chosen = np.flatnonzero(eligible)
    if max_pages is not None and len(chosen) > max_pages:
        chosen = np.sort(rng_from(f"{seed}-pages").choice(chosen, max_pages, replace=False))
        notes.append(f"scored a random subset of {max_pages} of them")
    if len(chosen) == 0:
        raise ObservationError("no page is alive at the split with training and test data")
    starts = obs.offsets[chosen]
    train_idx = concat_ranges(starts, n_train[chosen])
    train_counts = n_train[chosen]
    train = Observations(
        pages=obs.pages.iloc[chosen].copy(),
        offsets=np.concatenate([[0], np.cumsum(train_counts)]).astype(np.int64),
        time=obs.time[train_idx],
        changed=obs.changed[train_idx],
        time_kind="datetime",
        notes=obs.notes,
        source=f"{obs.source}, up to the split",
    )
    n_test = (n_visits - n_train)[chosen]
    end_idx = concat_ranges(starts + n_train[chosen], n_test)
    interval_page = np.repeat(np.arange(len(chosen)), n_test)
    hp = crawled.history_page[chosen]
    window_end = np.minimum(history.life_end[life[chosen]], stop)
    window_changes = history.count_changes(hp, np.full(len(hp), split), window_end)
    return Design(
        train=train,
        split=split,
        history_page=hp,
        interval_page=interval_page,
        interval_start=obs.time[end_idx - 1],
        interval_end=obs.time[end_idx],
        interval_truth=crawled.true_changes[end_idx],
        window_hours=window_end - split,
        window_changes=window_changes,
        notes=tuple(notes),
    )


def pit_noise_of(d: Design, seed: int | str) -> np.ndarray:
    """The uniform noise ``V`` of each page's randomised PIT value (common to all methods)."""
    return rng_from(f"{seed}-pit").random(d.n_pages)


def iso_time(hours: float) -> str:
    """Hours since the epoch as an ISO timestamp (UTC)."""
    return to_timestamp(hours).isoformat()
