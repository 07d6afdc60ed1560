"""The Trio client against a real 3-broker cluster (`minibroker dev up`): leader changes.

The producer must not lose a record it reported as acknowledged when the partition's
leader dies: in-flight batches fail with a network error or NOT_LEADER_OR_FOLLOWER,
the producer refreshes metadata and retries on the new leader, and with acks=all and
min.insync.replicas=2 every acknowledged record is on the new leader at the offset the
producer reported. The consumer follows the leader change transparently too.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

BEFORE = 500  # records acknowledged before the leader dies
AFTER = 500  # records sent after it died (some are in flight while it dies)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


async def test_acknowledged_records_survive_the_leader_being_killed(
    cluster: LocalCluster,
) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("failover", 1, 3, config={"min.insync.replicas": "2"})
        [topic] = await admin.describe_topics(["failover"])
    old_leader = topic.partitions[0].leader

    acknowledged: dict[int, bytes] = {}
    live: dict[int, bytes | None] = {}  # what a consumer reading all along saw

    async def consume_all_along() -> None:
        async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("failover", 0)])
            async for record in consumer:
                live[record.offset] = record.value

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume_all_along)
        await produce_through_the_kill(cluster, old_leader, acknowledged)
        with trio.fail_after(60):  # the live consumer followed the leader to its successor
            while not acknowledged.keys() <= live.keys():
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert {offset: live[offset] for offset in acknowledged} == acknowledged

    async with Admin(cluster.bootstrap) as admin:
        [topic] = await admin.describe_topics(["failover"])
    assert topic.partitions[0].leader not in (-1, old_leader)

    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("failover", 0)])
        found: dict[int, bytes | None] = {}
        with trio.fail_after(60):
            while not acknowledged.keys() <= found.keys():
                for record in await consumer.poll(1000):
                    found[record.offset] = record.value
    assert {offset: found[offset] for offset in acknowledged} == acknowledged

    # The killed leader, started again, catches up and rejoins the ISR.
    await cluster.restart_broker(old_leader)
    async with Admin(cluster.bootstrap) as admin:
        with trio.fail_after(90):
            while True:
                [topic] = await admin.describe_topics(["failover"])
                if old_leader in topic.partitions[0].isr:
                    break
                await trio.sleep(0.2)


async def produce_through_the_kill(
    cluster: LocalCluster, leader: int, acknowledged: dict[int, bytes]
) -> None:
    """Send before, during and after SIGKILL of the leader; record what was acknowledged."""
    async with Producer(
        cluster.bootstrap,
        acks="all",
        linger_ms=1,
        retry_backoff_ms=50,
        request_timeout_ms=10_000,
        delivery_timeout_ms=120_000,
    ) as producer:
        for i in range(BEFORE):
            value = b"before-%d" % i
            acknowledged[(await producer.send("failover", value)).offset] = value
        deliveries = [
            (b"after-%d" % i, producer.send_nowait("failover", b"after-%d" % i))
            for i in range(AFTER // 2)
        ]
        await trio.to_thread.run_sync(cluster.kill_broker, leader, signal.SIGKILL)
        deliveries += [
            (b"after-%d" % i, producer.send_nowait("failover", b"after-%d" % i))
            for i in range(AFTER // 2, AFTER)
        ]
        with trio.fail_after(150):
            for value, delivery in deliveries:
                acknowledged[(await delivery.result()).offset] = value
