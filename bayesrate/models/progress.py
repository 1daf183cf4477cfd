"""Progress lines of a running fit: chains, draws, divergences and elapsed time.

:meth:`~bayesrate.models.base.RateModel.fit` takes ``progress``, a callable that receives
one line of text at a time (the CLI prints it on stderr; ``--quiet`` passes none). During
NUTS, :class:`SamplerProgress` is nutpie's ``progress_callback``: nutpie calls it on a
background thread with one ``ChainProgress`` per chain, and it passes a line on at most
every ``every`` seconds, plus one when every chain has finished. No terminal control
characters, so a log file or a CI console reads the same as a terminal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

#: seconds between two progress lines of one sampler run
PROGRESS_EVERY = 10.0

#: a progress callback: receives one line of text at a time
Progress = Callable[[str], None]


def silent(message: str) -> None:
    """The default progress callback: say nothing."""


def sampler_line(label: str, chains: Sequence[Any], elapsed: float) -> str:
    """One line summarising nutpie's ``ChainProgress`` objects.

    Parameters
    ----------
    label
        What is being sampled (the model's name).
    chains
        Objects with ``finished_draws``, ``total_draws``, ``divergences``, ``tuning`` and
        ``started`` (nutpie's ``ChainProgress``).
    elapsed
        Seconds since sampling started.

    Returns
    -------
    str
        e.g. ``"excursion: 4 chains (2 tuning, 2 waiting), 1,250/9,200 draws, 0
        divergences, 35 s"``: the draws summed over the chains (tuning included, as nutpie
        counts them); chains that wait for a core (more chains than cores) and chains
        still tuning are named, so a run whose first chains are busy does not read as
        stuck.
    """
    n = len(chains)
    done = sum(int(c.finished_draws) for c in chains)
    total = sum(int(c.total_draws) for c in chains)
    running = [c for c in chains if c.started and int(c.finished_draws) < int(c.total_draws)]
    tuning = sum(1 for c in running if c.tuning)
    divergences = sum(int(c.divergences) for c in chains)
    waiting = sum(1 for c in chains if not c.started)
    states = [f"{tuning} tuning"] if tuning else []
    states += [f"{waiting} waiting"] if waiting else []
    phase = f" ({', '.join(states)})" if states else ""
    return (
        f"{label}: {n} chain{'s' if n != 1 else ''}{phase}, {done:,}/{total:,} draws, "
        f"{divergences} divergence{'s' if divergences != 1 else ''}, {elapsed:.0f} s"
    )


class SamplerProgress:
    """nutpie ``progress_callback`` that hands :func:`sampler_line` to ``emit``, throttled.

    Parameters
    ----------
    emit
        Receives each line (thread-safe use: calls are serialised by a lock).
    label
        What is being sampled.
    every
        Minimum seconds between two lines; the last state (all chains finished) is
        always reported once.
    clock
        Monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        emit: Callable[[str], None],
        label: str,
        every: float = PROGRESS_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit = emit
        self.label = label
        self.every = float(every)
        self.clock = clock
        self.start = clock()
        self._last = -float("inf")
        self._finished = False
        self._lock = threading.Lock()

    def __call__(self, chains: Sequence[Any]) -> None:
        now = self.clock()
        finished = bool(chains) and all(int(c.finished_draws) >= int(c.total_draws) for c in chains)
        with self._lock:
            if self._finished or (now - self._last < self.every and not finished):
                return
            self._last = now
            self._finished = finished
            self.emit(sampler_line(self.label, chains, now - self.start))
