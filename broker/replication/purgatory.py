"""Purgatory: requests parked until something happens to a partition, or a deadline.

Kafka's DelayedOperationPurgatory keeps operations watched under keys (partitions) and
re-checks them when an event touches a key. Here the operation itself is a Trio task
(the request's own ``Pending`` reply), so the purgatory only has to wake it:

    waiter = purgatory.watch(keys)        # register first, then check the condition:
    with waiter:                          # no await between check and wait, so no
        if not condition():               # wake-up can be lost (Trio is single-threaded)
            await waiter.wait_until(deadline)
    # re-check the condition (a wake-up means "maybe", not "yes")

``notify(key)`` wakes every waiter watching that key. The broker keeps two: one notified
when a partition's log grows (delayed fetch) and one when its high watermark moves
(delayed produce with acks=all).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from types import TracebackType
from typing import Generic, TypeVar

import trio

K = TypeVar("K", bound=Hashable)


class Waiter(Generic[K]):
    """One parked request: woken by a notify of any of its keys."""

    __slots__ = ("_event", "_keys", "_purgatory")

    def __init__(self, purgatory: Purgatory[K], keys: tuple[K, ...]) -> None:
        self._purgatory = purgatory
        self._keys = keys
        self._event = trio.Event()

    @property
    def woken(self) -> bool:
        return self._event.is_set()

    def wake(self) -> None:
        self._event.set()

    async def wait_until(self, deadline: float) -> bool:
        """Wait for a wake-up until ``deadline`` (trio time); False if it timed out."""
        with trio.move_on_at(deadline):
            await self._event.wait()
            return True
        return False

    def __enter__(self) -> Waiter[K]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._purgatory._unwatch(self, self._keys)


class Purgatory(Generic[K]):
    """Waiters indexed by key; see the module docstring."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[K, set[Waiter[K]]] = {}
        self.notifications = 0
        """How many notifies there have been, of any key: a check made when this was N
        still holds while it is N."""

    def watch(self, keys: Iterable[K]) -> Waiter[K]:
        """Register a waiter on ``keys``; use it as a context manager to unregister."""
        keys = tuple(keys)
        waiter = Waiter(self, keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        return waiter

    def notify(self, key: K) -> int:
        """Wake every waiter of ``key``; returns how many were woken."""
        self.notifications += 1
        waiters = self._watchers.pop(key, None)
        if not waiters:
            return 0
        for waiter in waiters:
            waiter.wake()
        return len(waiters)

    def notify_all(self) -> None:
        """Wake everyone (shutdown, or a change that touches every partition)."""
        self.notifications += 1
        watchers, self._watchers = self._watchers, {}
        for waiters in watchers.values():
            for waiter in waiters:
                waiter.wake()

    @property
    def watched(self) -> int:
        """Number of distinct waiters parked (a gauge for metrics and tests)."""
        return len({w for waiters in self._watchers.values() for w in waiters})

    def _unwatch(self, waiter: Waiter[K], keys: tuple[K, ...]) -> None:
        for key in keys:
            waiters = self._watchers.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._watchers[key]
