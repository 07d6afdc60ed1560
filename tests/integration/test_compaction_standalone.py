"""Compaction on one in-process broker (no ZooKeeper), through both listeners.

The broker's defaults make every topic compacted with tiny segments, and its cleaner
looks for work every 50 ms; FakeController makes it the leader. What these tests pin
down: the bundled Producer's tombstones (``send`` and ``send_nowait`` with a None
value) arrive as ``value is None``; keyless records are refused INVALID_RECORD on the
msgpack and the Kafka listener; after a cleaning Kafka clients (kafka-python) read the
cleaned log - rebuilt and empty batches - with every key's latest value; the
kafka_log_logcleaner_* gauges are exported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import kafka
import kafka.errors
import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.protocol.errors import InvalidRecordError
from tests.support.broker import FakeController, broker_config, running_broker

pytestmark = pytest.mark.timeout(90)

TOPIC = "table"
KEYS = 20


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(
        tmp_path / "logs",
        kafka_listeners="127.0.0.1:0",
        log_cleanup_policy="compact",
        log_segment_bytes=4096,
        log_cleaner_min_cleanable_ratio="0.01",
        log_cleaner_backoff_ms=50,
    )
    async with running_broker(config) as b:
        await FakeController(b).lead(TOPIC)
        yield b


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


async def cleaned(broker: Broker, at_least: int = 1) -> None:
    stats = broker.parts.log_cleaner.manager.stats
    with trio.fail_after(60):
        while stats.cleanings < at_least:
            await trio.sleep(0.05)


async def test_tombstones_from_the_producer_reach_consumers_as_none_after_cleaning(
    broker: Broker,
) -> None:
    latest: dict[bytes, bytes | None] = {}
    async with Producer(bootstrap(broker), acks=1, linger_ms=1) as producer:
        for r in range(10):
            for k in range(KEYS):
                key, value = b"k%d" % k, b"v%d-%d-" % (k, r) + b"x" * 50
                await producer.send(TOPIC, value, key=key)
                latest[key] = value
        await producer.send(TOPIC, None, key=b"k1")
        delivery = producer.send_nowait(TOPIC, None, key=b"k2")
        last = await delivery.result()
        latest[b"k1"] = latest[b"k2"] = None
        with pytest.raises(InvalidRecordError):
            await producer.send(TOPIC, b"no key")
    await cleaned(broker)
    seen: dict[bytes | None, bytes | None] = {}
    offsets: list[int] = []
    async with Consumer(bootstrap(broker), auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])
        with trio.fail_after(30):
            while not offsets or offsets[-1] < last.offset:
                for record in await consumer.poll(timeout_ms=500, max_records=1000):
                    seen[record.key] = record.value
                    offsets.append(record.offset)
    assert seen == latest
    assert seen[b"k2"] is None
    assert offsets == sorted(set(offsets)) and len(offsets) < 10 * KEYS
    metrics = broker.metrics.render().decode()
    for name in ("max_dirty_percent", "time_since_last_run_seconds", "cleaner_recopy_percent"):
        assert f"kafka_log_logcleaner_{name} " in metrics


async def test_kafka_clients_are_refused_keyless_records_and_read_a_cleaned_log(
    broker: Broker,
) -> None:
    address = broker.kafka_address
    assert address is not None
    servers = f"127.0.0.1:{address[1]}"

    def produce() -> dict[bytes, bytes | None]:
        producer = kafka.KafkaProducer(bootstrap_servers=servers, linger_ms=1)
        try:
            sent = []
            for r in range(10):
                for k in range(KEYS):
                    key, value = b"k%d" % k, b"v%d-%d-" % (k, r) + b"y" * 50
                    sent.append((key, value, producer.send(TOPIC, value, key=key, partition=0)))
            sent.append((b"k3", None, producer.send(TOPIC, None, key=b"k3", partition=0)))
            # The latest value of a key is the one written last, wherever the client's
            # batching put it.
            by_offset = sorted((f.get(timeout=30).offset, key, value) for key, value, f in sent)
            with pytest.raises(kafka.errors.KafkaError) as refused:
                producer.send(TOPIC, b"no key", partition=0).get(timeout=30)
            assert "InvalidRecord" in type(refused.value).__name__
            return {key: value for _, key, value in by_offset}
        finally:
            producer.close(timeout=10)

    latest = await trio.to_thread.run_sync(produce)
    await cleaned(broker)

    def consume() -> dict[bytes | None, bytes | None]:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=3000
        )
        try:
            consumer.assign([kafka.TopicPartition(TOPIC, 0)])
            consumer.seek_to_beginning()
            return {m.key: m.value for m in consumer}
        finally:
            consumer.close()

    assert await trio.to_thread.run_sync(consume) == latest
