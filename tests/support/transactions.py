"""Transactional producers and read_committed consumers of three Kafka libraries, for the
transaction tests (tests/integration/test_transactions.py, tests/fault).

Readers assign every partition of a topic and read from the beginning until they have
seen ``sentinels`` records whose value starts with ``b"sentinel"`` (a test writes one
per partition, committed, after what it checks): an event, not a sleep, says that
everything before it was offered to the consumer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import aiokafka
import confluent_kafka
import kafka

from tests.support.cluster import LocalCluster

READ_TIMEOUT_S = 30.0
SENTINEL = b"sentinel"

Read = list[tuple[int, int, bytes]]
"""(partition, offset, value) in the order read."""


def confluent_reads(bootstrap: str, topic: str, partitions: int, sentinels: int) -> Read:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )
        found: Read = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while _count(found) < sentinels and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            found.append((message.partition(), message.offset(), message.value()))
        return found
    finally:
        consumer.close()


def kafka_python_reads(bootstrap: str, topic: str, partitions: int, sentinels: int) -> Read:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
        found: Read = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while _count(found) < sentinels and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                found += [(r.partition, r.offset, r.value) for r in records]
        return found
    finally:
        consumer.close()


def aiokafka_reads(bootstrap: str, topic: str, partitions: int, sentinels: int) -> Read:
    async def read() -> Read:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(partitions)])
            found: Read = []
            deadline = time.monotonic() + READ_TIMEOUT_S
            while _count(found) < sentinels and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                found += [(r.partition, r.offset, r.value) for b in batches.values() for r in b]
            return found
        finally:
            await consumer.stop()

    return asyncio.run(read())


READERS: dict[str, Callable[[str, str, int, int], Read]] = {
    "confluent-kafka": confluent_reads,
    "kafka-python": kafka_python_reads,
    "aiokafka": aiokafka_reads,
}


def _count(found: Read) -> int:
    return sum(1 for _, _, value in found if value.startswith(SENTINEL))


def confluent_transactional(
    bootstrap: str, transactional_id: str, **extra: object
) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(30)
    return producer


def write_sentinels(bootstrap: str, topic: str, partitions: int, tag: str) -> None:
    """One committed ``sentinel`` record per partition, in a transaction of its own."""
    producer = confluent_transactional(bootstrap, f"sentinels-{tag}")
    producer.begin_transaction()
    for p in range(partitions):
        producer.produce(topic, SENTINEL + b"-" + tag.encode(), partition=p)
    producer.commit_transaction(30)


def values(found: Read) -> list[bytes]:
    return [value for _, _, value in found if not value.startswith(SENTINEL)]


def described_once(cluster: LocalCluster, transactional_id: str, state: str) -> dict[str, Any]:
    """``transactions describe`` of the id once it is in ``state`` (CompleteCommit or
    CompleteAbort: every partition has its marker, as the coordinator writes Complete*
    only then)."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        done = cluster.cli("transactions", "describe", transactional_id, "--format", "json")
        described: dict[str, Any] = json.loads(done.stdout)
        if described["state"] == state or time.monotonic() > deadline:
            return described
        time.sleep(0.05)
