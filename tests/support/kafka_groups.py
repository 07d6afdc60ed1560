"""Kafka group consumers for tests: kafka-python, aiokafka, confluent-kafka and the
bundled Consumer each run in a thread of their own as ``Member``s of one group, publish
what they consumed and which partitions they hold, and are read back with
kafka-python's admin client (OffsetFetch, DescribeGroups). Records are produced with
the bundled Producer on the msgpack listener."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import aiokafka
import aiokafka.errors
import confluent_kafka
import kafka.errors
import pytest
import trio
from aiokafka.coordinator.assignors.roundrobin import (
    RoundRobinPartitionAssignor as AioRoundRobin,
)
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from minibroker.client.consumer import Consumer
from minibroker.client.group_coordinator import CommitFailedError
from minibroker.client.producer import Producer
from tests.support import groups
from tests.support.cluster import LocalCluster

CONSUME_TIMEOUT_S = 90
SESSION_TIMEOUT_MS = 10_000
"""Long enough that a client starved of CPU on a loaded machine keeps its membership."""

Record = tuple[int, int, bytes]
"""(partition, offset, value) of a consumed record."""


def create_topic(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """``topic`` with replication factor 3, from a thread that is not in Trio."""
    trio.run(groups.create_topic, cluster.bootstrap, topic, partitions)


def produce(
    cluster: LocalCluster, topic: str, partitions: int, count: int, *, tag: bytes = b"r"
) -> list[Record]:
    """``count`` records spread round the partitions, as (partition, offset, value)."""

    async def run() -> list[Record]:
        async with Producer(cluster.bootstrap, acks="all") as producer:
            sent = []
            for i in range(count):
                value = b"%s-%s-%d" % (topic.encode(), tag, i)
                meta = await producer.send(topic, value, partition=i % partitions)
                sent.append((meta.partition, meta.offset, value))
            return sent

    return trio.run(run)


def committed_offsets(cluster: LocalCluster, group: str) -> dict[int, int]:
    """The group's committed offset per partition, read with kafka-python's admin
    client (OffsetFetch from a client other than the committing one)."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


def described_group(cluster: LocalCluster, group: str) -> dict[str, Any]:
    """``group`` as kafka-python's admin client describes it (DescribeGroups)."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        described: dict[str, Any] = admin.describe_groups([group])[group]
    finally:
        admin.close()
    return described


def group_state(cluster: LocalCluster, group: str) -> tuple[str, str, int]:
    """(state, protocol type, member count) of ``group``."""
    described = described_group(cluster, group)
    return described["group_state"], described["protocol_type"], len(described["members"])


def log_ends(records: list[Record]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for partition, offset, _ in records:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


class Member:
    """One group consumer running in its own thread: what it consumed and which
    partitions it holds, published under ``changed`` (shared by the group's members)
    whenever its poll loop goes round."""

    def __init__(self, name: str, changed: threading.Condition) -> None:
        self.name = name
        self.changed = changed
        self.consumed: list[Record] = []
        self.assigned: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.noted: list[object] = []  # errors the client recovers from (a failed commit)
        self.revoked: list[frozenset[int]] = []  # what each revocation took (confluent)
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, run: Callable[[Member], None]) -> None:
        def guarded() -> None:
            try:
                run(self)
            except BaseException as exc:  # reported by the test, not lost in the thread
                with self.changed:
                    self.error = exc
                    self.changed.notify_all()

        self._thread = threading.Thread(target=guarded, name=self.name, daemon=True)
        self._thread.start()

    def polled(self, records: list[Record], assigned: frozenset[int]) -> None:
        with self.changed:
            self.consumed += records
            self.assigned = assigned
            self.changed.notify_all()

    def join(self) -> None:
        assert self._thread is not None
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error


def kafka_python_member(bootstrap: str, group: str, topic: str) -> Callable[[Member], None]:
    def run(member: Member) -> None:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=member.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
        )
        try:
            while not member.stop.is_set():
                batches = consumer.poll(timeout_ms=200)
                if batches:
                    try:
                        consumer.commit()
                    except kafka.errors.KafkaError as exc:  # the next owner reads them again
                        member.noted.append(exc)
                records = [(r.partition, r.offset, r.value) for b in batches.values() for r in b]
                member.polled(records, frozenset(tp.partition for tp in consumer.assignment()))
        finally:
            consumer.close()

    return run


def aiokafka_member(bootstrap: str, group: str, topic: str) -> Callable[[Member], None]:
    async def consume(member: Member) -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=member.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            partition_assignment_strategy=(AioRoundRobin,),
        )
        await consumer.start()
        try:
            while not member.stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                if batches:
                    try:
                        await consumer.commit()
                    except aiokafka.errors.KafkaError as exc:
                        member.noted.append(exc)
                records = [(r.partition, r.offset, r.value) for b in batches.values() for r in b]
                member.polled(records, frozenset(tp.partition for tp in consumer.assignment()))
        finally:
            await consumer.stop()

    return lambda member: asyncio.run(consume(member))


def confluent_member(
    bootstrap: str, group: str, topic: str, strategy: str = "roundrobin"
) -> Callable[[Member], None]:
    def revoked(member: Member, partitions: list[confluent_kafka.TopicPartition]) -> None:
        with member.changed:
            member.revoked.append(frozenset(tp.partition for tp in partitions))

    def run(member: Member) -> None:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": member.name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "partition.assignment.strategy": strategy,
            }
        )
        try:
            consumer.subscribe([topic], on_revoke=lambda _, tps: revoked(member, tps))
            while not member.stop.is_set():
                message = consumer.poll(0.2)
                records = []
                if message is not None and message.error() is not None:
                    if message.error().fatal():
                        raise confluent_kafka.KafkaException(message.error())
                    member.noted.append(message.error())  # a broker gone, ...
                elif message is not None:
                    try:
                        consumer.commit(message=message, asynchronous=False)
                    except confluent_kafka.KafkaException as exc:
                        member.noted.append(exc)
                    records.append((message.partition(), message.offset(), message.value()))
                member.polled(records, frozenset(tp.partition for tp in consumer.assignment()))
        finally:
            consumer.close()

    return run


def bundled_member(
    bootstrap: str, group: str, topic: str, strategy: str = "roundrobin"
) -> Callable[[Member], None]:
    """The bundled Consumer, on the msgpack listener (``bootstrap``)."""

    async def consume(member: Member) -> None:
        async with Consumer(
            bootstrap,
            group_id=group,
            client_id=member.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            partition_assignment_strategy=strategy,
        ) as consumer:
            consumer.subscribe([topic])
            while not member.stop.is_set():
                polled = await consumer.poll(200)
                if polled:
                    try:
                        await consumer.commit()
                    except CommitFailedError as exc:
                        member.noted.append(exc)
                records = [(r.partition, r.offset, r.value) for r in polled]
                member.polled(records, frozenset(p for _, p in consumer.assignment()))

    return lambda member: trio.run(consume, member)


def wait_for(condition: Callable[[], bool], what: str, members: list[Member]) -> None:
    """Until ``condition`` holds over the members' published state (or one fails)."""
    changed = members[0].changed
    with changed:
        met = changed.wait_for(
            lambda: condition() or any(m.error is not None for m in members), CONSUME_TIMEOUT_S
        )
        state = {m.name: (sorted(m.assigned), len(m.consumed)) for m in members}
    for member in members:
        if member.error is not None:
            raise AssertionError(f"{member.name} failed") from member.error
    if not met:
        pytest.fail(f"timed out waiting for {what}: {state}")


KAFKA_LIBRARIES = {
    "kafka-python": kafka_python_member,
    "aiokafka": aiokafka_member,
    "confluent": confluent_member,
}
