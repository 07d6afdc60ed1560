"""One queue, one consumer: events are processed one at a time, in order."""

from __future__ import annotations

import pytest
import trio

from minibroker.controller.event_manager import ControllerEventManager
from minibroker.controller.events import (
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    PartitionModifications,
    SessionExpired,
    TopicChange,
)
from minibroker.protocol.errors import NotControllerError


@pytest.mark.timeout(10)
async def test_events_are_processed_in_order_never_two_at_once() -> None:
    seen: list[ControllerEvent] = []
    running = 0

    async def process(event: ControllerEvent) -> None:
        nonlocal running
        running += 1
        assert running == 1
        await trio.sleep(0)
        seen.append(event)
        running -= 1

    manager = ControllerEventManager(process)
    events = [PartitionModifications(str(i)) for i in range(20)]
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for event in events:
            manager.put(event)
        await manager.wait_idle()
        nursery.cancel_scope.cancel()
    assert seen == events


@pytest.mark.timeout(10)
async def test_a_failing_event_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[ControllerEvent] = []

    async def process(event: ControllerEvent) -> None:
        if isinstance(event, BrokerChange):
            raise ValueError("boom")
        seen.append(event)

    manager = ControllerEventManager(process)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        manager.put(BrokerChange())
        manager.put(TopicChange())
        await manager.wait_idle()
        nursery.cancel_scope.cancel()
    assert seen == [TopicChange()]
    assert "boom" in caplog.text


@pytest.mark.timeout(10)
async def test_clear_and_put_drops_queued_events_and_answers_waiting_callers() -> None:
    seen: list[ControllerEvent] = []

    async def process(event: ControllerEvent) -> None:
        seen.append(event)

    manager = ControllerEventManager(process)
    shutdown = ControlledShutdown(3, 0)
    manager.put(TopicChange())
    manager.put(shutdown)
    manager.clear_and_put(SessionExpired())
    assert manager.queue_size == 1
    with pytest.raises(NotControllerError):
        await shutdown.reply.wait()
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        await manager.wait_idle()
        nursery.cancel_scope.cancel()
    assert seen == [SessionExpired()]
