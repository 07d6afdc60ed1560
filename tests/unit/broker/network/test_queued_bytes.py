"""QueuedBytes: the broker-wide budget pauses the connections holding their share of it
when full, and lets the others through."""

from __future__ import annotations

import trio
import trio.testing

from minibroker.broker.network.queued_bytes import QueuedBytes, queued_max_bytes


async def test_below_the_limit_nobody_waits() -> None:
    budget = QueuedBytes(limit=100)
    budget.opened()
    budget.add(99)
    await budget.wait_for_room(lambda: 99)
    assert budget.paused_reads == 0


async def test_when_full_a_holder_of_its_share_waits_until_bytes_are_freed() -> None:
    budget = QueuedBytes(limit=100)
    budget.opened()
    budget.opened()
    budget.add(120)  # the share of each of the two connections is 50
    released = trio.Event()

    async def hog() -> None:
        await budget.wait_for_room(lambda: 60)
        released.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hog)
        await trio.testing.wait_all_tasks_blocked()
        assert not released.is_set()
        assert budget.paused_reads == 1
        budget.add(-10)  # still full: keeps waiting
        await trio.testing.wait_all_tasks_blocked()
        assert not released.is_set()
        budget.add(-30)  # below the limit
        await released.wait()


async def test_when_full_a_connection_holding_less_than_its_share_is_still_read() -> None:
    budget = QueuedBytes(limit=100)
    for _ in range(4):
        budget.opened()
    budget.add(500)
    await budget.wait_for_room(lambda: 0)  # returns at once: share is 25, it holds 0
    assert budget.paused_reads == 0


async def test_a_closed_connection_grows_the_others_share() -> None:
    budget = QueuedBytes(limit=100)
    budget.opened()
    budget.opened()
    budget.add(100)
    released = trio.Event()

    async def holder_of_60() -> None:
        await budget.wait_for_room(lambda: 60)
        released.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(holder_of_60)
        await trio.testing.wait_all_tasks_blocked()
        assert not released.is_set()  # 60 >= 100 / 2
        budget.closed()  # now its share is the whole 100
        await released.wait()


def test_minus_one_means_unbounded_as_in_kafka() -> None:
    assert queued_max_bytes(-1) == float("inf")
    assert queued_max_bytes(1024) == 1024
