"""Fleet workers for the tests: lease, fetch, report, on a simulated clock.

``python -m tests.scheduler.fleet_worker LOCATION NAME ROUNDS K STEP LOG [--hold]``: for
round ``r`` the clock is ``T0 + r * STEP`` hours; the worker leases ``K`` URLs, reports each
(changed when the fetch id is odd) at that time, and reports every other batch twice (a
retry after a lost acknowledgement). After each acknowledged report it appends the fetch
ids to ``LOG`` (one per line): what the worker knows was accepted. ``--hold``: lease once,
write the fetch ids, then sleep holding the leases (for kill -9). :func:`serve` is the
HTTP end-to-end test's worker (a ``multiprocessing`` process).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bayesrate.scheduler.frontier import Frontier

T0 = 480_000.0


def main(argv: list[str]) -> int:
    location, name, rounds, k, step, log = argv[:6]
    hold = "--hold" in argv
    with Frontier.open(location) as frontier, open(log, "a") as out:
        for r in range(int(rounds)):
            now = T0 + r * float(step)
            # the workers' clocks are simulated and drift apart: leases outlive the run
            leases = frontier.lease(name, int(k), now=now, hours=None if hold else 1000.0)
            if hold:
                out.write("".join(f"{x.fetch_id}\n" for x in leases))
                out.flush()
                time.sleep(600)
            results = [(x.fetch_id, now, x.fetch_id % 2) for x in leases]
            frontier.report(results, now=now)
            if r % 2:
                frontier.report(results, now=now)  # a retry: must not count twice
            out.write("".join(f"{x.fetch_id}\n" for x in leases))
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def serve(location: str, name: str, pipe: Any) -> None:
    """A worker process of the HTTP end-to-end test: for each ``(now, k)`` received, lease
    ``k`` URLs, GET each (``?at=now``: the test server's simulated clock), tell a change by
    the content's SHA-256 against the digest handed out with the lease, report the batch,
    and send back how many fetches were reported. ``None`` ends the worker."""
    import hashlib
    import urllib.request

    with Frontier.open(location) as frontier:
        while (job := pipe.recv()) is not None:
            now, k = job
            results = []
            for lease in frontier.lease(name, k, now=now, hours=1.0):
                with urllib.request.urlopen(f"{lease.url}?at={now!r}", timeout=30) as reply:
                    digest = hashlib.sha256(reply.read()).hexdigest()
                changed = int(lease.digest is not None and digest != lease.digest)
                results.append((lease.fetch_id, now, changed, digest))
            frontier.report(results, now=now)
            pipe.send(len(results))
