"""Log lines a peer can trigger at will, throttled: the first few per interval, then a count.

A client that sends 21,000 bad requests must not write 21,000 log lines: a broker's log
is for its operators, and an unthrottled line per refused request turns any client into
a disk filler. ``LogRateLimiter`` lets ``burst`` lines through per ``interval_s``; the
rest are counted, and the first line of a later interval is preceded by one summary
("... N similar messages suppressed ..."). Suppressed lines cost a counter increment.

One limiter per kind of message (per call site), so a flood of one kind does not hide
another. Time comes from ``clock`` (seconds, monotonic) so tests can drive it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_BURST = 10
"""Lines let through per interval: enough to see what a misbehaving client sends."""

DEFAULT_INTERVAL_S = 60.0
"""Length of an interval: at most ``burst`` + 1 lines a minute per call site."""


class LogRateLimiter:
    """Logs through ``logger`` at most ``burst`` lines per ``interval_s``."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = DEFAULT_BURST,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or interval_s <= 0:
            raise ValueError(f"need burst >= 1 and interval_s > 0, got {burst}, {interval_s}")
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self.clock = clock
        self._interval_start = -float("inf")
        self._logged = 0  # lines let through in the current interval
        self.suppressed = 0  # lines dropped since the last summary

    def log(self, level: int, msg: str, *args: object) -> None:
        """Log ``msg % args`` unless this interval's burst is used up."""
        if not self.logger.isEnabledFor(level):
            return
        now = self.clock()
        if now - self._interval_start >= self.interval_s:
            if self.suppressed:
                self.logger.log(
                    level,
                    "%d similar messages suppressed in the last %.0f s (at most %d per interval)",
                    self.suppressed,
                    now - self._interval_start,
                    self.burst,
                )
                self.suppressed = 0
            self._interval_start = now
            self._logged = 0
        if self._logged < self.burst:
            self._logged += 1
            self.logger.log(level, msg, *args)
        else:
            self.suppressed += 1

    def warning(self, msg: str, *args: object) -> None:
        self.log(logging.WARNING, msg, *args)

    def info(self, msg: str, *args: object) -> None:
        self.log(logging.INFO, msg, *args)
