"""Producer, Consumer and Admin against one real in-process broker (no ZooKeeper).

The broker is standalone, so FakeController plays the controller: it makes the broker
leader of a topic's partitions. What these tests pin down: keyed records land where
Kafka's murmur2 partitioner puts them and come back in order with keys, values and
headers; offsets reported to the producer are where the consumer finds the records;
gzip batches round-trip; a NOT_LEADER_OR_FOLLOWER answer is retried after a metadata
refresh without losing acknowledged records.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer, ConsumerRecord
from minibroker.client.partitioner import partition_for_key
from minibroker.client.producer import Producer
from minibroker.protocol.errors import UnknownTopicOrPartitionError
from tests.support.broker import FakeController, broker_config, partition_state, running_broker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running_broker(broker_config(tmp_path / "logs")) as b:
        yield b


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


async def poll_until(consumer: Consumer, count: int) -> list[ConsumerRecord]:
    """Poll until ``count`` records arrived (a test timeout ends a hang)."""
    records: list[ConsumerRecord] = []
    while len(records) < count:
        records += await consumer.poll(1000, count - len(records))
    return records


async def test_keyed_records_land_on_murmur2_partitions_and_read_back_in_order(
    broker: Broker,
) -> None:
    await FakeController(broker).lead("events", partitions=4)
    sent: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(4)}
    async with Producer(bootstrap(broker), acks=1, linger_ms=2) as producer:
        deliveries = []
        for i in range(2000):
            key, value = f"key-{i % 97}".encode(), f"value-{i}".encode()
            deliveries.append((key, value, producer.send_nowait("events", value, key=key)))
        await producer.flush()
        for key, value, delivery in deliveries:
            meta = await delivery.result()
            assert meta.partition == partition_for_key(key, 4)
            sent[meta.partition].append((key, value))
    async with Consumer(bootstrap(broker)) as consumer:
        consumer.assign([("events", p) for p in range(4)])
        await consumer.seek_to_beginning()
        got: dict[int, list[tuple[bytes | None, bytes | None]]] = {p: [] for p in range(4)}
        with trio.fail_after(30):
            while sum(map(len, got.values())) < 2000:
                for r in await consumer.poll(1000):
                    assert r.offset == len(got[r.partition])
                    got[r.partition].append((r.key, r.value))
    assert got == sent


async def test_send_reports_the_offset_the_consumer_finds_with_headers(broker: Broker) -> None:
    await FakeController(broker).lead("t")
    async with Producer(bootstrap(broker), acks="all") as producer:
        first = await producer.send("t", b"a", headers=[("h", b"1")], timestamp_ms=1234)
        second = await producer.send("t", None, key=b"k")
    assert (first.partition, first.offset, first.timestamp) == (0, 0, 1234)
    assert second.offset == 1
    async with Consumer(bootstrap(broker), auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 2)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, None, b"a", (("h", b"1"),)),
        (1, b"k", None, ()),
    ]
    assert records[0].timestamp == 1234


@pytest.mark.parametrize("acks", [1, "all"])
async def test_sends_cut_short_at_any_point_still_write_each_record_once_in_order(
    broker: Broker, acks: int | str
) -> None:
    await FakeController(broker).lead("t")
    rng = random.Random(23)
    values = [b"%04d" % i for i in range(300)]
    cut_short = 0
    async with Producer(bootstrap(broker), acks=acks, linger_ms=0) as producer:
        for value in values:
            # Cancelled before the request is written, while it waits for its answer,
            # or not at all: the record goes anyway, sent by the producer's own task.
            with trio.move_on_after(rng.choice((0, 0, 1e-5, 1e-4, 1))) as scope:
                await producer.send("t", value)
            cut_short += scope.cancelled_caught
    assert cut_short > 0
    async with Consumer(bootstrap(broker), auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, len(values))
        assert not await consumer.poll(200)  # and nothing twice
    assert [r.value for r in records] == values


async def test_gzip_batches_round_trip(broker: Broker) -> None:
    await FakeController(broker).lead("z")
    async with Producer(bootstrap(broker), acks=1, compression="gzip") as producer:
        for i in range(500):
            producer.send_nowait("z", b"compressible " * 20 + str(i).encode())
    async with Consumer(bootstrap(broker), auto_offset_reset="earliest") as consumer:
        consumer.assign([("z", 0)])
        values: list[bytes | None] = []
        with trio.fail_after(20):
            async for record in consumer:
                values.append(record.value)
                if len(values) == 500:
                    break
    assert values[-1] == b"compressible " * 20 + b"499"


async def test_consumer_seeks_by_offset_time_and_end(broker: Broker) -> None:
    await FakeController(broker).lead("s")
    async with Producer(bootstrap(broker), acks=1) as producer:
        for i in range(10):
            await producer.send("s", str(i).encode(), timestamp_ms=1000 + i * 10)
    async with Consumer(bootstrap(broker)) as consumer:
        consumer.assign([("s", 0)])
        consumer.seek("s", 0, 7)
        assert [r.value for r in await poll_until(consumer, 3)] == [b"7", b"8", b"9"]
        found = await consumer.offsets_for_times({("s", 0): 1045})
        assert found[("s", 0)] == (5, 1050)
        assert (await consumer.offsets_for_times({("s", 0): 99_999}))[("s", 0)] is None
        await consumer.seek_to_end()
        assert consumer.position("s", 0) == 10
        assert await consumer.poll(200) == []


async def test_acks_zero_sends_without_waiting_for_an_answer(broker: Broker) -> None:
    await FakeController(broker).lead("fire")
    async with Producer(bootstrap(broker), acks=0) as producer:
        meta = await producer.send("fire", b"x")
        assert meta.offset == -1
    async with Consumer(bootstrap(broker), auto_offset_reset="earliest") as consumer:
        consumer.assign([("fire", 0)])
        [record] = await poll_until(consumer, 1)
    assert record.value == b"x"


async def test_unknown_topic_fails_the_record_naming_the_topic(broker: Broker) -> None:
    async with Producer(bootstrap(broker), max_block_ms=500) as producer:
        delivery = producer.send_nowait("nope", b"x")
        with pytest.raises(UnknownTopicOrPartitionError, match="nope"):
            await delivery.result()


async def test_producer_retries_not_leader_after_metadata_refresh(broker: Broker) -> None:
    controller = FakeController(broker)
    await controller.lead("moving", leader_epoch=0)
    async with Producer(bootstrap(broker), acks=1, retry_backoff_ms=20) as producer:
        before = await producer.send("moving", b"before")
        # Leadership "moves" to broker 2 (which does not exist): produce gets
        # NOT_LEADER_OR_FOLLOWER and the producer keeps retrying with fresh metadata.
        follower = [
            partition_state("moving", 0, leader=2, leader_epoch=1, replicas=[1, 2], isr=[1, 2])
        ]
        await controller.leader_and_isr(follower)
        delivery = producer.send_nowait("moving", b"after")
        await trio.sleep(0.3)
        assert not delivery.done()
        await controller.lead("moving", leader_epoch=2)  # and back: the retry succeeds
        with trio.fail_after(20):
            after = await delivery.result()
    assert (before.offset, after.offset) == (0, 1)


async def test_admin_describes_the_standalone_broker(broker: Broker) -> None:
    await FakeController(broker).lead("described", partitions=2)
    async with Admin(bootstrap(broker)) as admin:
        cluster = await admin.describe_cluster()
        [topic] = await admin.describe_topics(["described"])
        assert "described" in await admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
            await admin.describe_topics(["missing"])
    assert [b.node_id for b in cluster.brokers] == [1]
    assert [(p.partition, p.leader) for p in topic.partitions] == [(0, 1), (1, 1)]


async def test_latest_reset_reads_only_records_produced_after_assignment(broker: Broker) -> None:
    await FakeController(broker).lead("late")
    async with Producer(bootstrap(broker), acks=1) as producer:
        await producer.send("late", b"old")
        async with Consumer(bootstrap(broker)) as consumer:  # auto_offset_reset="latest"
            consumer.assign([("late", 0)])
            with trio.fail_after(10):
                while consumer.position("late", 0) is None:
                    await consumer.poll(50)
            assert consumer.position("late", 0) == 1
            await producer.send("late", b"new")
            [record] = await poll_until(consumer, 1)
    assert (record.offset, record.value) == (1, b"new")


async def test_poll_batches_reads_what_poll_reads_from_a_seek_inside_a_batch(
    broker: Broker,
) -> None:
    await FakeController(broker).lead("v")
    async with Producer(bootstrap(broker), acks=1, linger_ms=50) as producer:
        for i in range(300):
            producer.send_nowait("v", b"value-%d" % i, key=b"k" if i % 3 else None)
        await producer.flush()
    async with Consumer(bootstrap(broker)) as consumer:
        consumer.assign([("v", 0)])
        consumer.seek("v", 0, 5)
        expected = await poll_until(consumer, 295)
        consumer.seek("v", 0, 5)
        views = []
        with trio.fail_after(20):
            while sum(len(view) for view in views) < 295:
                views += await consumer.poll_batches(1000)
        assert consumer.position("v", 0) == 300
    assert [r for view in views for r in view.records()] == expected
    assert [bytes(v) for view in views for v in view.values() if v is not None] == [
        r.value for r in expected
    ]
    assert [o for view in views for o in view.offsets()] == list(range(5, 300))
