"""Process-wide settings a broker with thousands of partitions needs, applied once at
start (``minibroker broker``; a broker run inside another program leaves them to it).

``share_the_gil``: the event loop thread holds the GIL while it serves requests; a
worker thread (kazoo's connection thread, the thread creating a LeaderAndIsr's logs or
fsyncing) needs it back after every system call. With Python's 5 ms switch interval
each of those waits could last 5 ms on a busy broker: creating thousands of logs next
to a busy thread took several times as long as next to an idle one, and reading 10,000
partition states through kazoo on a failover took seconds (docs/performance.md,
"Figures behind the code"). The shorter interval costs nothing while no other thread
wants the GIL.

``raise_open_files_limit``: each partition holds a descriptor for its active segment
(and two index mappings once it has data), so a broker needs more than the usual soft
limit of 1,024. The soft limit goes up to the hard one, as the JVM does for Kafka
(``-XX:+MaxFDLimit``).
"""

from __future__ import annotations

import logging
import resource
import sys

GIL_SWITCH_INTERVAL_S = 0.001
"""How long the event loop may keep the GIL from a waiting worker thread (see above)."""

NO_HARD_LIMIT_TARGET = 1 << 20
"""The soft limit asked for when there is no hard one: Linux's default fs.nr_open."""

log = logging.getLogger(__name__)


def share_the_gil() -> None:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, NO_HARD_LIMIT_TARGET)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # a container may refuse; the old limit stays
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, target, exc)
        else:
            soft = target
    return soft
