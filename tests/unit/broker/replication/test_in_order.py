"""InOrder: controller requests take effect in arrival order, whatever the task order."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from minibroker.broker.replication.controller_apis import InOrder


async def test_jobs_run_in_ticket_order_even_when_started_in_reverse() -> None:
    queue = InOrder()
    tickets = [queue.ticket() for _ in range(5)]
    ran: list[int] = []

    def job(n: int) -> Any:
        async def run() -> dict[str, Any]:
            await trio.sleep(0)
            ran.append(n)
            return {}

        return run

    async with trio.open_nursery() as nursery:
        for ticket in reversed(tickets):
            nursery.start_soon(queue.run, ticket, job(ticket))
    assert ran == tickets


async def test_a_job_cancelled_before_its_turn_does_not_block_later_ones() -> None:
    queue = InOrder()
    first, second, third = queue.ticket(), queue.ticket(), queue.ticket()
    gate = trio.Event()
    ran: list[int] = []

    async def slow() -> dict[str, Any]:
        await gate.wait()
        ran.append(first)
        return {}

    async def quick() -> dict[str, Any]:
        ran.append(third)
        return {}

    async with trio.open_nursery() as nursery:
        nursery.start_soon(queue.run, first, slow)
        nursery.start_soon(queue.run, third, quick)
        async with trio.open_nursery() as inner:  # the second's connection goes away
            inner.start_soon(queue.run, second, quick)
            await trio.testing.wait_all_tasks_blocked()
            inner.cancel_scope.cancel()
        gate.set()
    assert ran == [first, third]
