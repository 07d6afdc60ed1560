"""ConnectionLimits: how many connections the broker holds, per address, and how fast
it takes new ones (Kafka's ``max.connections``, ``max.connections.per.ip`` with
``max.connections.per.ip.overrides``, and ``max.connection.creation.rate``, KIP-612).

Shared by every listener of the broker (one budget of file descriptors). A new
connection is checked once accepted (``admit``), before any byte is read from it:

- over ``max.connections`` (all listeners together) or its address's
  ``max.connections.per.ip`` (an override names ``host:count`` pairs), it is closed at
  once, counted as a close for ``max_connections`` / ``max_connections_per_ip``.
  Kafka's default for ``max.connections`` is unbounded; here -1 means three quarters
  of the process's open-file limit, so a flood of connections ends as refusals, not as
  a broker that can no longer open a log segment;
- above ``max.connection.creation.rate`` new connections a second (per listener, a
  token bucket with a second's burst), a new one waits in its own task until the rate
  allows it (``creation_wait_s``), as Kafka throttles its acceptor, and the wait is
  counted (``throttle_time_s``: Kafka's connection-accept-throttle-time).

``release`` gives a connection's place back when it closes. Every count is O(1); the
per-address table holds only addresses with an open connection.
"""

from __future__ import annotations

import resource
from collections import Counter
from collections.abc import Callable
from typing import Final

import trio

from minibroker.protocol.errors import ConfigError

UNBOUNDED: Final = 2**31 - 1
"""Kafka's default for the per-address count and the rate (Integer.MAX_VALUE)."""

FILE_LIMIT_SHARE: Final = 0.75
"""Of the open-file limit, what ``max.connections=-1`` lets connections take: the rest
is for log segments, indexes and the broker's own sockets."""


def parse_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's max.connections.per.ip.overrides)."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, _, count = item.rpartition(":")
        if not host or not count.isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        overrides[host] = int(count)
    return overrides


def default_max_connections() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNBOUNDED
    return max(int(soft * FILE_LIMIT_SHARE), 1)


class ConnectionLimits:
    def __init__(
        self,
        *,
        max_connections: int = -1,
        max_per_ip: int = UNBOUNDED,
        overrides: dict[str, int] | None = None,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.max_connections = default_max_connections() if max_connections < 0 else max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides or {}
        self.clock = clock
        self.open = 0
        self.by_address: Counter[str] = Counter()

    def admit(self, address: str) -> str | None:
        """Take a place for a connection from ``address``; the close reason if there
        is none (then nothing is taken)."""
        if self.open >= self.max_connections:
            return "max_connections"
        if self.by_address[address] >= self.overrides.get(address, self.max_per_ip):
            return "max_connections_per_ip"
        self.open += 1
        self.by_address[address] += 1
        return None

    def release(self, address: str) -> None:
        self.open -= 1
        left = self.by_address[address] - 1
        if left > 0:
            self.by_address[address] = left
        else:
            del self.by_address[address]


class CreationRate:
    """One listener's ``max.connection.creation.rate``: a token bucket of a second."""

    def __init__(
        self, rate_per_s: int = UNBOUNDED, clock: Callable[[], float] = trio.current_time
    ) -> None:
        self.rate_per_s = rate_per_s
        self.clock = clock
        self._tokens = float(rate_per_s)
        self._when = -1.0
        self.throttle_time_s = 0.0
        """Total time new connections waited for the rate (a metric)."""
        self.created = 0

    def creation_wait_s(self) -> float:
        """Take a token for one new connection; how long it must wait for it."""
        self.created += 1
        if self.rate_per_s >= UNBOUNDED:
            return 0.0
        now = self.clock()
        if self._when < 0:
            self._when = now
        self._tokens = min(
            float(self.rate_per_s), self._tokens + (now - self._when) * self.rate_per_s
        )
        self._when = now
        self._tokens -= 1
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.rate_per_s
        self.throttle_time_s += wait
        return wait
