"""ControllerEventManager: one queue, one consumer.

How this works: producers (ZooKeeper watch dispatch, request handlers, timers) call
``put`` from any Trio task; it never blocks (the channel is unbounded: watches are
one-shot and requests are bounded by connections, so the queue cannot grow without
bound). ``run`` takes events one at a time and awaits the processor, so two events are
never processed concurrently and the ControllerContext needs no lock.

``clear_and_put`` drops everything queued and enqueues one event: on session expiry or
resignation the queued work belongs to a controllership that is over. Dropped events
are ``preempt``-ed so waiting callers are answered NOT_CONTROLLER instead of hanging.

A processor exception is logged and the loop continues: one bad event must not stop the
controller. Cancellation (shutdown) ends the loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import trio

from minibroker.controller.events import ControllerEvent

log = logging.getLogger("minibroker.controller.events")

EventProcessor = Callable[[ControllerEvent], Awaitable[None]]


class ControllerEventManager:
    def __init__(self, process: EventProcessor) -> None:
        self._process = process
        self._send, self._receive = trio.open_memory_channel[ControllerEvent](math.inf)
        self.processed = 0
        """Events handled so far (tests wait on queue progress with it)."""
        self._idle = trio.Event()
        self._idle.set()

    def put(self, event: ControllerEvent) -> None:
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self._send.send_nowait(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        while True:
            try:
                dropped = self._receive.receive_nowait()
            except trio.WouldBlock:
                break
            log.info("dropping queued %s", type(dropped).__name__)
            dropped.preempt()
        self.put(event)

    @property
    def queue_size(self) -> int:
        return self._send.statistics().current_buffer_used

    async def wait_idle(self) -> None:
        """Return once every event put so far has been processed (for tests)."""
        await self._idle.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with self._receive:
            while True:
                if self.queue_size == 0:
                    self._idle.set()
                event = await self._receive.receive()
                try:
                    await self._process(event)
                except Exception:
                    log.exception("controller failed to process %r", event)
                finally:
                    self.processed += 1
