"""Purgatory: waiters parked on partitions are woken by notify, or time out."""

from __future__ import annotations

import trio
import trio.testing

from minibroker.broker.replication.purgatory import Purgatory


async def test_notify_wakes_every_waiter_of_that_key_only() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    a = purgatory.watch(["p0"])
    b = purgatory.watch(["p0", "p1"])
    c = purgatory.watch(["p1"])
    assert purgatory.notify("p0") == 2
    assert a.woken and b.woken and not c.woken


async def test_wait_until_returns_false_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    with purgatory.watch(["p0"]) as waiter:
        assert await waiter.wait_until(trio.current_time() + 5) is False
    assert purgatory.watched == 0


async def test_a_notify_during_the_wait_ends_it() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    with purgatory.watch(["p0"]) as waiter:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter.wait_until, trio.current_time() + 60)
            await trio.testing.wait_all_tasks_blocked()
            purgatory.notify("p0")
        assert waiter.woken


async def test_leaving_the_block_unregisters_from_every_key() -> None:
    purgatory: Purgatory[str] = Purgatory("test")
    with purgatory.watch(["p0", "p1"]):
        assert purgatory.watched == 1
    assert purgatory.watched == 0
    assert purgatory.notify("p0") == 0


async def test_notify_all_wakes_everyone() -> None:
    purgatory: Purgatory[int] = Purgatory("test")
    waiters = [purgatory.watch([i]) for i in range(3)]
    purgatory.notify_all()
    assert all(w.woken for w in waiters)
