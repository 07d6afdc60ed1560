"""Kafka's own clients against a 3-broker cluster's Kafka listeners (`dev up
--kafka-base-port`): kcat (librdkafka) and kafka-python produce and consume with keys
and headers, see every broker and partition, and interoperate byte for byte with the
bundled msgpack client. kafka-python 3 producers run with their default settings
(idempotent: InitProducerId, then sequence-numbered batches), one round trip also with
idempotence off.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import aiokafka
import confluent_kafka
import confluent_kafka.admin
import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

KCAT_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


def kcat(cluster: LocalCluster, *argv: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap, *argv],
        input=stdin,
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


async def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(name, partitions, 3)


def consume_with_kafka_python(
    cluster: LocalCluster, topic: str, partitions: int, count: int
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        found = []
        deadline = time.monotonic() + 60
        while len(found) < count and time.monotonic() < deadline:
            found += [(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in consumer]
        return found
    finally:
        consumer.close()


async def test_kcat_lists_every_broker_and_partition(cluster: LocalCluster) -> None:
    await create_topic(cluster, "listed", 4)
    metadata = json.loads(kcat(cluster, "-L", "-J", "-t", "listed"))
    kafka_ports = {b["kafka_port"] for b in cluster.state["brokers"].values()}
    assert {b["id"] for b in metadata["brokers"]} == {1, 2, 3}
    assert {int(b["name"].rsplit(":", 1)[1]) for b in metadata["brokers"]} == kafka_ports
    [topic] = metadata["topics"]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2, 3]
    for partition in topic["partitions"]:
        assert partition["leader"] in (1, 2, 3)
        assert sorted(r["id"] for r in partition["replicas"]) == [1, 2, 3]


async def test_kcat_reads_back_every_record_it_produced_with_keys_and_headers(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "kcat-round-trip", 1)
    lines = b"".join(b"key-%d:value-%d\n" % (i, i) for i in range(200))
    kcat(cluster, "-P", "-t", "kcat-round-trip", "-K:", "-H", "origin=kcat", stdin=lines)
    out = kcat(
        cluster, "-C", "-t", "kcat-round-trip", "-e", "-q", "-f", "%o %k %s %h\n"
    ).splitlines()
    assert out == [b"%d key-%d value-%d origin=kcat" % (i, i, i) for i in range(200)]


async def test_kafka_python_producer_and_consumer_round_trip(cluster: LocalCluster) -> None:
    await create_topic(cluster, "kafka-python", 3)
    sent = []
    for acks in (1, "all"):
        producer = KafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap, acks=acks, enable_idempotence=False
        )
        try:
            futures = [
                producer.send(
                    "kafka-python",
                    key=b"k%d" % i,
                    value=b"v%d-%s" % (i, str(acks).encode()),
                    headers=[("n", b"%d" % i)],
                    partition=i % 3,
                )
                for i in range(30)
            ]
            producer.flush(timeout=30)
            sent += [
                (f.get(timeout=30), b"k%d" % i, b"v%d-%s" % (i, str(acks).encode()), i)
                for i, f in enumerate(futures)
            ]
        finally:
            producer.close()

    found = consume_with_kafka_python(cluster, "kafka-python", 3, len(sent))
    expected = sorted(
        (meta.partition, meta.offset, key, value, [("n", b"%d" % i)])
        for meta, key, value, i in sent
    )
    assert sorted(found) == expected
    for partition in range(3):  # in offset order within each partition
        offsets = [offset for p, offset, *_ in found if p == partition]
        assert offsets == sorted(offsets) == list(range(len(offsets)))


def producer_ids_stored(cluster: LocalCluster, topic: str, partition: int) -> set[int]:
    """The producer ids of every batch of ``topic``-``partition`` on every replica."""
    segments = (cluster.data_dir).glob(f"broker-*/logs-*/{topic}-{partition}/*.log")
    found: set[int] = set()
    for segment in segments:
        dumped = cluster.cli("dump-log", str(segment), bootstrap=False)
        assert dumped.returncode == 0, dumped.stderr
        found |= {int(n) for n in re.findall(rb"producerId: (-?\d+)", dumped.stdout)}
    return found


async def test_kafka_python_producer_with_default_settings_is_idempotent(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "kafka-python-default", 3)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        futures = [
            producer.send(
                "kafka-python-default",
                key=b"k%d" % i,
                value=b"v%d" % i,
                headers=[("n", b"%d" % i)],
                partition=i % 3,
            )
            for i in range(90)
        ]
        producer.flush(timeout=30)
        sent = [(f.get(timeout=30), i) for i, f in enumerate(futures)]
        producer_id = producer._transaction_manager.producer_id_and_epoch.producer_id
    finally:
        producer.close()

    assert producer_id >= 0  # it asked for an id: idempotence is on by default
    found = consume_with_kafka_python(cluster, "kafka-python-default", 3, len(sent))
    assert sorted(found) == sorted(
        (meta.partition, meta.offset, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)])
        for meta, i in sent
    )
    for partition in range(3):  # once each, in send order, at offsets 0..n-1
        mine = [(offset, value) for p, offset, _, value, _ in sorted(found) if p == partition]
        assert mine == [(n, b"v%d" % i) for n, i in enumerate(range(partition, 90, 3))]
        assert producer_ids_stored(cluster, "kafka-python-default", partition) == {producer_id}


async def test_kafka_python_finds_offsets_by_timestamp(cluster: LocalCluster) -> None:
    await create_topic(cluster, "by-time", 1)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        for i in range(10):
            producer.send("by-time", value=b"%d" % i, timestamp_ms=1_000_000 + i * 1000)
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        tp = TopicPartition("by-time", 0)
        found = consumer.offsets_for_times({tp: 1_004_500})[tp]
        assert (found.offset, found.timestamp) == (5, 1_005_000)
        assert consumer.end_offsets([tp]) == {tp: 10}
        assert consumer.beginning_offsets([tp]) == {tp: 0}
    finally:
        consumer.close()


async def test_what_kcat_writes_the_bundled_consumer_reads_byte_for_byte(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "kcat-to-bundled", 1)
    lines = "".join(f"κ{i}:välue {i} ✓\n" for i in range(50)).encode()
    kcat(cluster, "-P", "-t", "kcat-to-bundled", "-K:", "-H", "h=ü", stdin=lines)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("kcat-to-bundled", 0)])
        records = []
        while len(records) < 50:
            records += await consumer.poll(1000)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, f"κ{i}".encode(), f"välue {i} ✓".encode()) for i in range(50)
    ]
    assert all(list(r.headers) == [("h", "ü".encode())] for r in records)


async def test_what_the_bundled_producer_writes_kafka_clients_read_byte_for_byte(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "bundled-to-kafka", 1)
    payloads = [(bytes([i, 0, 255 - i]), bytes(range(i, i + 20))) for i in range(40)]
    async with Producer(cluster.bootstrap, acks="all") as producer:
        for key, value in payloads:
            await producer.send("bundled-to-kafka", value, key=key, headers=[("b", b"\x00\x01")])
    found = consume_with_kafka_python(cluster, "bundled-to-kafka", 1, len(payloads))
    assert found == [
        (0, i, key, value, [("b", b"\x00\x01")]) for i, (key, value) in enumerate(payloads)
    ]
    out = kcat(cluster, "-C", "-t", "bundled-to-kafka", "-e", "-q", "-f", "%o:%K:%S\n")
    assert out.splitlines() == [b"%d:3:20" % i for i in range(40)]


def test_cluster_info_shows_each_brokers_kafka_address(cluster: LocalCluster) -> None:
    info = cluster.cli("cluster", "info", "--format", "json")
    assert info.returncode == 0, info.stderr
    brokers = json.loads(info.stdout)["brokers"]
    assert {b["id"]: b["kafka"] for b in brokers} == {
        int(i): f"127.0.0.1:{b['kafka_port']}" for i, b in cluster.state["brokers"].items()
    }


def test_a_malformed_kafka_frame_closes_only_its_own_connection(cluster: LocalCluster) -> None:
    port = int(cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as bad:
        bad.sendall(b"\x00\x00\x00\x03\x00\x03\x00")  # a 3-byte "request": no header
        assert bad.recv(1) == b""  # closed by the broker
    metadata = json.loads(kcat(cluster, "-L", "-J"))  # the listener serves on
    assert {b["id"] for b in metadata["brokers"]} == {1, 2, 3}


CODECS = ("gzip", "snappy", "lz4", "zstd")


def assert_stored_in(cluster: LocalCluster, topic: str, codec: str) -> None:
    """Every replica's segment of ``topic``-0 holds only batches in ``codec`` (dump-log)."""
    segments = [
        segment
        for broker_id in (1, 2, 3)
        for segment in (cluster.data_dir / f"broker-{broker_id}").glob(f"logs-*/{topic}-0/*.log")
    ]
    assert len(segments) == 3  # one segment on each of the three replicas
    for segment in segments:
        dumped = cluster.cli("dump-log", str(segment), bootstrap=False)
        assert dumped.returncode == 0, dumped.stderr
        batches = [line for line in dumped.stdout.splitlines() if b"compresscodec:" in line]
        assert batches and all(b"compresscodec: " + codec.encode() in b for b in batches)


@pytest.mark.parametrize("codec", CODECS)
async def test_batches_kcat_compresses_are_stored_as_sent_and_read_by_every_client(
    cluster: LocalCluster, codec: str
) -> None:
    topic = f"kcat-{codec}"
    await create_topic(cluster, topic, 1)
    lines = b"".join(b"key-%d:%s\n" % (i, b"compressible " * 20 + b"%d" % i) for i in range(100))
    kcat(cluster, "-P", "-t", topic, "-K:", "-z", codec, stdin=lines)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        records = []
        while len(records) < 100:
            records += await consumer.poll(1000)
    assert [(r.key, r.value) for r in records] == [
        (b"key-%d" % i, b"compressible " * 20 + b"%d" % i) for i in range(100)
    ]
    assert_stored_in(cluster, topic, codec)  # as sent


@pytest.mark.parametrize("codec", CODECS)
async def test_batches_the_bundled_producer_compresses_kcat_reads(
    cluster: LocalCluster, codec: str
) -> None:
    topic = f"bundled-{codec}"
    await create_topic(cluster, topic, 1)
    async with Producer(cluster.bootstrap, acks="all", compression=codec, linger_ms=50) as producer:
        deliveries = [
            producer.send_nowait(topic, b"payload %d " % i * 10, key=b"%d" % i) for i in range(100)
        ]
        await producer.flush()
        for delivery in deliveries:
            await delivery.result()
    out = kcat(cluster, "-C", "-t", topic, "-e", "-q", "-f", "%k=%s\n").splitlines()
    assert out == [b"%d=%s" % (i, b"payload %d " % i * 10) for i in range(100)]


async def test_confluent_kafka_admin_lists_every_topic_and_broker(cluster: LocalCluster) -> None:
    await create_topic(cluster, "confluent-listed", 2)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    listed = await trio.to_thread.run_sync(lambda: admin.list_topics(timeout=30))
    assert set(listed.brokers) == {1, 2, 3}
    assert sorted(listed.topics["confluent-listed"].partitions) == [0, 1]


def test_kafka_python_admin_creates_describes_alters_and_deletes_topics(
    cluster: LocalCluster,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        created = admin.create_topics(
            [NewTopic("admin-made", 3, 2, topic_configs={"retention.ms": "100000"})]
        )
        assert [(t["name"], t["error_code"]) for t in created["topics"]] == [("admin-made", 0)]
        described = admin.describe_cluster()
        assert sorted(b["port"] for b in described["brokers"]) == sorted(
            b["kafka_port"] for b in cluster.state["brokers"].values()
        )
        assert described["controller_id"] in (1, 2, 3)
        altered = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "admin-made", configs={"retention.ms": "1"})]
        )
        assert altered == {"topic": {"admin-made": "OK"}}
        dirs = admin.describe_log_dirs()
        hosted = {
            (p["partition_index"], entry["broker"])
            for entry in dirs
            for log_dir in entry["log_dirs"]
            for topic in log_dir["topics"]
            if topic["name"] == "admin-made"
            for p in topic["partitions"]
        }
        assert len(hosted) == 6  # 3 partitions x 2 replicas
        assert admin.list_partition_reassignments() == {}
        deleted = admin.delete_topics(["admin-made"])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("admin-made", 0)]
    finally:
        admin.close()
    deadline = time.monotonic() + 60  # the controller deletes in the background
    while time.monotonic() < deadline:
        info = cluster.cli("topic", "describe", "--format", "json")
        if "admin-made" not in {t["name"] for t in json.loads(info.stdout)}:
            break
        time.sleep(0.2)
    else:
        pytest.fail("admin-made was never deleted")


@pytest.mark.parametrize("codec", ["none", *CODECS])
async def test_confluent_kafka_produces_with_every_codec_and_reads_back_in_order(
    cluster: LocalCluster, codec: str
) -> None:
    topic = f"confluent-{codec}"
    await create_topic(cluster, topic, 2)
    failures: list[object] = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "compression.type": codec, "acks": "all"}
    )
    for i in range(200):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"value %d " % i * 5,
            headers=[("i", b"%d" % i)],
            partition=i % 2,
            on_delivery=lambda error, _: failures.append(error) if error else None,
        )
    assert producer.flush(60) == 0
    assert failures == []

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "unused-with-manual-assignment",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])
        found: list[tuple[int, int, bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while len(found) < 200 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            found.append((message.partition(), message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    for partition in (0, 1):
        mine = [(offset, key, value) for p, offset, key, value in found if p == partition]
        assert mine == [
            (n, b"k%d" % i, b"value %d " % i * 5) for n, i in enumerate(range(partition, 200, 2))
        ]


async def test_confluent_kafka_admin_is_told_every_operation_when_no_authorizer_is_set(
    cluster: LocalCluster,
) -> None:
    """DescribeTopics / DescribeCluster / DescribeConsumerGroups with
    include_authorized_operations (KIP-430): without an authorizer everything the
    resource type supports is allowed, as Kafka answers (librdkafka's 0081)."""
    await create_topic(cluster, "described-ops", 1)
    op = confluent_kafka.admin.AclOperation
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    topics = confluent_kafka.TopicCollection(["described-ops"])
    described = admin.describe_topics(topics, include_authorized_operations=True)
    topic = described["described-ops"].result(timeout=KCAT_TIMEOUT_S)
    assert set(topic.authorized_operations) == {
        op.READ, op.WRITE, op.CREATE, op.DELETE, op.ALTER, op.DESCRIBE,
        op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
    }  # fmt: skip
    without = admin.describe_topics(topics)["described-ops"].result(timeout=KCAT_TIMEOUT_S)
    assert not without.authorized_operations
    cluster_ops = admin.describe_cluster(include_authorized_operations=True).result(
        timeout=KCAT_TIMEOUT_S
    )
    assert set(cluster_ops.authorized_operations) == {
        op.CREATE, op.CLUSTER_ACTION, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
        op.IDEMPOTENT_WRITE, op.ALTER, op.DESCRIBE,
    }  # fmt: skip
    del admin  # destroyed now, while its brokers are up


@pytest.mark.parametrize("batch_size", [1_000_000, 1])
async def test_keyless_records_to_a_compacted_topic_fail_alone_and_name_their_batch_index(
    cluster: LocalCluster, batch_size: int
) -> None:
    """Produce v8+ record errors (KIP-467): of 100 records, every tenth without a key, to
    a compacted topic, exactly those 10 are INVALID_RECORD. In one batch the other 90
    fail with it (librdkafka's _INVALID_DIFFERENT_RECORD: not their fault, retry them);
    one record per batch, the 90 are written (librdkafka's 0011 record_fail)."""
    topic = f"compacted-keyless-{batch_size}"
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 3, config={"cleanup.policy": "compact"})
    outcomes: Counter[int] = Counter()
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "linger.ms": 200,
            "batch.size": batch_size,
            "acks": "all",
        }
    )
    for i in range(100):
        producer.produce(
            topic,
            key=None if i % 10 == 0 else b"k%d" % i,
            value=b"v%d" % i,
            partition=0,
            on_delivery=lambda error, _: outcomes.update([error.code() if error else 0]),
        )
    assert producer.flush(60) == 0
    invalid = confluent_kafka.KafkaError.INVALID_RECORD
    if batch_size == 1:
        assert outcomes == {invalid: 10, 0: 90}
    else:
        assert outcomes == {invalid: 10, confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD: 90}


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produces_every_codec_and_reads_back_with_keys_and_headers(
    cluster: LocalCluster, codec: str
) -> None:
    topic = f"aiokafka-{codec}"
    trio.run(create_topic, cluster, topic, 1)

    async def round_trip() -> list[tuple[int, bytes | None, bytes | None, list[Any]]]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap,
            acks="all",
            compression_type=codec,
            linger_ms=20,
        )
        await producer.start()
        try:
            sent = [
                await producer.send(
                    topic, value=b"a%d" % i * 20, key=b"k%d" % i, headers=[("h", b"%d" % i)]
                )
                for i in range(50)
            ]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(topic, 0)
            consumer.assign([partition])
            records = []
            while len(records) < 50:
                batches = await consumer.getmany(timeout_ms=1000)
                records += [r for batch in batches.values() for r in batch]
            return [(r.offset, r.key, r.value, list(r.headers)) for r in records]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(round_trip(), 120)) == [
        (i, b"k%d" % i, b"a%d" % i * 20, [("h", b"%d" % i)]) for i in range(50)
    ]
    assert_stored_in(cluster, topic, codec)


async def test_a_topics_compression_type_re_encodes_what_producers_send(
    cluster: LocalCluster,
) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("stored-zstd", 1, 3, config={"compression.type": "zstd"})
    lines = b"".join(b"k%d:%s\n" % (i, b"same text again " * 10) for i in range(50))
    kcat(cluster, "-P", "-t", "stored-zstd", "-K:", "-z", "gzip", stdin=lines)
    out = kcat(cluster, "-C", "-t", "stored-zstd", "-e", "-q", "-f", "%o %k\n").splitlines()
    assert out == [b"%d k%d" % (i, i) for i in range(50)]
    assert_stored_in(cluster, "stored-zstd", "zstd")


def test_dev_up_prints_the_kafka_bootstrap_address(cluster: LocalCluster) -> None:
    printed = (cluster.data_dir / "dev-up.out").read_text()
    [line] = [line for line in printed.splitlines() if "Kafka bootstrap" in line]
    assert cluster.kafka_bootstrap in line
