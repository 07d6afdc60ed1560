"""Idempotent producers under faults: nothing lost, nothing twice, each producer in order.

The cluster, nemesis, heal and read-back are those of tests/fault/test_durability.py
(three broker processes, RF 3, min.insync.replicas 2, kill -9 / pause of leaders and the
controller). The writers here are four bundled ``Producer``s with idempotence on, each
pipelining batches and retrying on its own through every fault. The checker runs in
its idempotent mode: every acknowledged value at its offset, no value twice - retried
or not - and every producer's values in its send order within each partition; and no
delivery may fail (the delivery timeout outlasts the faults).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from minibroker.client.accumulator import Delivery
from minibroker.client.producer import Producer
from minibroker.protocol.errors import KafkaError
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.fault.test_durability import (
    PARTITIONS,
    TOPIC,
    heal,
    nemesis,
    read_partition,
)
from tests.support.cluster import ProcessCluster
from tests.support.durability import DurabilityChecker, ReadRecord

PRODUCERS = 4
RUN_S = 15.0
"""How long producers and the nemesis run per seed."""
SEND_INTERVAL_S = 0.004
"""Pause between two records of one producer: a few hundred records a second each,
enough to keep batches in flight through every fault without swamping two cores."""
DELIVERY_TIMEOUT_MS = 150_000  # beyond the run plus the heal: no delivery may time out
SEEDS = [11, 12, 13]


async def write(
    producer: Producer,
    name: str,
    seed: int,
    checker: DurabilityChecker,
    failures: list[str],
    stop: trio.Event,
    topic: str = TOPIC,
) -> None:
    """Send numbered values round-robin over the partitions until ``stop``; a task per
    delivery reports its outcome to the checker, and this returns once all settled."""

    async def settle(value: bytes, delivery: Delivery) -> None:
        try:
            metadata = await delivery.result()
        except KafkaError as exc:
            failures.append(f"{value!r}: {exc}")
            return
        checker.acknowledged(value, metadata.topic, metadata.partition, metadata.offset)

    async with trio.open_nursery() as settling:
        sequence = 0
        while not stop.is_set():
            value = f"s{seed}-{name}-{sequence}".encode()
            checker.attempted(value, producer=name)
            delivery = producer.send_nowait(topic, value, partition=sequence % PARTITIONS)
            settling.start_soon(settle, value, delivery)
            sequence += 1
            await trio.sleep(SEND_INTERVAL_S)


async def every_partition_known(producer: Producer, topic: str = TOPIC) -> None:
    """Right after start-up a broker's Metadata may list a topic's partitions only in
    part; the writers name every partition, so wait until the producer knows them all."""
    with trio.fail_after(30):
        while True:
            info = await producer.cluster.topic(topic, timeout_s=30)
            if len(info.partitions) == PARTITIONS:
                return
            await trio.sleep(0.1)


@contextlib.asynccontextmanager
async def idempotent_producers(
    bootstrap: str,
    count: int,
    topic: str = TOPIC,
    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS,
) -> AsyncIterator[list[Producer]]:
    """``count`` idempotent acks=all producers that know every partition of ``topic``,
    closed on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        producers = []
        for _ in range(count):
            producer = Producer(
                bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                request_timeout_ms=3000,
                retry_backoff_ms=100,
                delivery_timeout_ms=delivery_timeout_ms,
            )
            await stack.enter_async_context(producer)
            await every_partition_known(producer, topic)
            producers.append(producer)
        yield producers


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", SEEDS)
async def test_idempotent_producers_lose_nothing_and_write_nothing_twice(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, seed: int
) -> None:
    rng = random.Random(seed)
    checker = DurabilityChecker(idempotent=True)
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        size=3,
        properties={"min.insync.replicas": 2, "unclean.leader.election.enable": "false"},
    )
    history: list[str] = []
    failures: list[str] = []
    stop = trio.Event()
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, PARTITIONS, 3)
        data = KafkaZkClient(zk_client)
        await heal(cluster, data)
        bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        async with idempotent_producers(bootstrap, PRODUCERS) as producers:
            with trio.fail_after(RUN_S + DELIVERY_TIMEOUT_MS / 1000):
                async with trio.open_nursery() as nursery:
                    for i, producer in enumerate(producers):
                        nursery.start_soon(write, producer, f"p{i}", seed, checker, failures, stop)
                    with trio.move_on_after(RUN_S):
                        await nemesis(cluster, rng, history)
                    stop.set()  # the writers return once every delivery settled
                    await heal(cluster, data)
        read: list[ReadRecord] = []
        for partition in range(PARTITIONS):
            read += await read_partition(cluster, partition)
        report = checker.check(read)
        print(f"seed {seed}: {report.summary()}; faults: {', '.join(history)}")
        assert report.ok, f"seed {seed}, faults {history}: {report.summary()}"
        assert not failures, f"seed {seed}, faults {history}: failed deliveries {failures[:5]}"
        assert checker.acknowledged_count > 0, f"nothing was acknowledged; faults {history}"
    finally:
        cluster.close()
