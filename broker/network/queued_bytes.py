"""The broker-wide budget of queued request and response bytes (``queued.max.request.bytes``).

How this works. ``QueuedBytes`` counts the bytes of received requests not yet handled
and of responses not yet written, over all connections and listeners of one broker
(the connections of broker/network/server_connection.py add and free them). While it is full,
a connection holding at least its share of it (the limit divided by the open
connections) starts reading no new request; one holding less still does, so a few
clients filling the budget do not stall the rest. Requests already received are still
handled, so nothing can deadlock on it. As in Kafka's request memory pool, a frame is
reserved whole once its length prefix is in, and admitted while the budget is not yet
full: it may overshoot by one frame. Response bytes are counted by their length,
including memoryviews spliced from record data, since those pin their memory as long
as they are queued.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

DEFAULT_QUEUED_MAX_BYTES = 512 * 1024 * 1024
"""Default broker-wide bound on queued request and response bytes: well above what
normal traffic queues, well below a small host's memory (Kafka's -1, unbounded, is what
let non-reading clients take 13 GB)."""


class QueuedBytes:
    """The broker-wide budget of queued request and response bytes (one per broker,
    shared by its listeners); see the module docstring.

    ``add`` never blocks (bytes already in memory are counted, not refused); readers
    ``await wait_for_room(held)`` before they read a new request.
    """

    def __init__(self, limit: float = DEFAULT_QUEUED_MAX_BYTES) -> None:
        self.limit = limit
        self.used = 0
        self.connections = 0  # open connections over all listeners: they share the limit
        self.paused_reads = 0  # times a reader waited for room (a metric)
        self._freed: trio.Event | None = None

    @property
    def full(self) -> bool:
        return self.used >= self.limit

    def add(self, n: int) -> None:
        """Count ``n`` more bytes (negative: bytes freed)."""
        self.used += n
        if n < 0:
            self._wake()

    def opened(self) -> None:
        self.connections += 1

    def closed(self) -> None:
        self.connections -= 1
        self._wake()  # every other connection's share just grew

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def _over_share(self, held: int) -> bool:
        return self.used >= self.limit and held >= self.limit / max(self.connections, 1)

    async def wait_for_room(self, held: Callable[[], int]) -> None:
        """Wait while the budget is full and the caller ``held()`` at least its share of
        it: a few connections that fill the budget pause themselves, not everyone."""
        if not self._over_share(held()):
            return
        self.paused_reads += 1
        while self._over_share(held()):
            if self._freed is None:
                self._freed = trio.Event()
            await self._freed.wait()


def queued_max_bytes(configured: int) -> float:
    """queued.max.request.bytes as a limit (-1, as in Kafka, means unbounded)."""
    return math.inf if configured < 0 else configured
