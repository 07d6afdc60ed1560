"""Start-up progress of the log manager, one log dir at a time.

Loading thousands of partitions after a crash takes seconds; without a word in between
an operator cannot tell a broker recovering from a hung one. Kafka's LogManager says,
per log dir, whether it recovers (no clean-shutdown marker) and how many of its logs are
loaded of how many. ``LogLoadProgress`` does the same, in its own words:

    loading 10000 logs in /data/a (no clean shutdown: recovering past each recovery point)
    loaded 4210/10000 logs in /data/a (4210 recovered) after 1.0 s
    loaded 10000/10000 logs in /data/a (10000 recovered) in 2.3 s

A progress line at most every ``interval_s`` (one line per log, as Kafka writes, would
be 10,000 lines on every start); the first and last lines always.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

LOAD_PROGRESS_INTERVAL_S = 1.0
"""How often a long load says how far it got: often enough to see it move against a
10 s start-up budget, seldom enough to stay a handful of lines."""

log = logging.getLogger(__name__)


class LogLoadProgress:
    """Counts the logs of one log dir as they load and logs how far it got."""

    def __init__(
        self,
        log_dir: Path,
        total: int,
        *,
        clean: bool,
        interval_s: float = LOAD_PROGRESS_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_dir = log_dir
        self.total = total
        self.loaded = 0
        self.recovered = 0
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._started = monotonic()
        self._next_line = self._started + interval_s
        how = (
            "clean shutdown: no recovery"
            if clean
            else "no clean shutdown: recovering past each recovery point"
        )
        log.info("loading %d logs in %s (%s)", total, log_dir, how)

    def log_loaded(self, *, recovered: bool) -> None:
        """One more log of this dir is loaded (``recovered``: it revalidated a segment)."""
        self.loaded += 1
        self.recovered += recovered
        now = self._monotonic()
        if now >= self._next_line and self.loaded < self.total:
            self._next_line = now + self._interval_s
            log.info(
                "loaded %d/%d logs in %s (%d recovered) after %.1f s",
                self.loaded,
                self.total,
                self.log_dir,
                self.recovered,
                now - self._started,
            )

    def finish(self) -> float:
        """Log the dir's last line; the seconds its load took."""
        elapsed = self._monotonic() - self._started
        log.info(
            "loaded %d/%d logs in %s (%d recovered) in %.1f s",
            self.loaded,
            self.total,
            self.log_dir,
            self.recovered,
            elapsed,
        )
        return elapsed
