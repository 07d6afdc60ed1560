"""Consumer-group test helpers: cluster settings for quick rebalances, in-process
members that keep what they read, topics and records, waiting on a condition.

``GROUP_PROPERTIES`` let sessions be short (``group.min.session.timeout.ms``) and start
a new group's first rebalance quickly, so a SIGKILLed member's partitions move in about
two seconds instead of Kafka's 45; ``FAST`` are the matching consumer settings.
"""

from __future__ import annotations

import inspect
from typing import Any

import trio

from minibroker.client.admin import Admin
from minibroker.client.admin_groups import GroupDescription
from minibroker.client.consumer import Consumer, ConsumerRecord
from minibroker.client.producer import Producer

GROUP_PROPERTIES = (
    "group.initial.rebalance.delay.ms=100",
    "group.min.session.timeout.ms=500",
    "offsets.topic.num.partitions=6",
)
SESSION_MS = 2_000  # a killed member is noticed after this long
FAST = {  # a consumer that notices rebalances and commits quickly
    "session_timeout_ms": SESSION_MS,
    "heartbeat_interval_ms": 200,
    "auto_commit_interval_ms": 200,
    "auto_offset_reset": "earliest",
}


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions=partitions, replication_factor=3)


async def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int) -> None:
    """``count`` records, spread evenly, values ``"<start + i>"``."""
    async with Producer(bootstrap) as producer:
        for i in range(start, start + count):
            producer.send_nowait(topic, str(i).encode(), partition=i % partitions)
        await producer.flush()


async def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Until ``condition()`` (a function or a coroutine function) is true."""
    with trio.move_on_after(timeout):
        while True:
            result = condition()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await trio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Reader:
    """An in-process group consumer that polls in a task, keeping what it read."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.records: list[ConsumerRecord] = []
        self.scope = trio.CancelScope()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.consumer:
            task_status.started()
            with self.scope:
                async for record in self.consumer:
                    self.records.append(record)
            # leaving the block commits (auto-commit) and leaves the group


async def describe(bootstrap: str, group: str) -> GroupDescription:
    async with Admin(bootstrap) as admin:
        return await admin.describe_group(group)
