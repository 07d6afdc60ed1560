"""Growing topics (CreatePartitions) and deleting records (DeleteRecords) on a 3-broker
cluster, judged by Kafka's clients.

CreatePartitions: confluent-kafka's and kafka-python's admin clients add partitions
with and without explicit replicas, validate-only changes nothing, shrinking is
INVALID_PARTITIONS, a keyed producer that refreshes its metadata spreads over the new
partitions; `minibroker topic alter` does the same from the shell.

DeleteRecords: confluent-kafka's and kafka-python's admin clients move the log start;
the answer's low watermark is where every replica now starts; ListOffsets earliest and
a consumer from the beginning start there; the leader's whole segments below it are
gone; an offset past the high watermark and a compacted topic are refused;
`minibroker topic delete-records` takes flags or kafka-delete-records' JSON file.

Offsets and auto-creation: ListOffsets' max timestamp (-3, KIP-734) through
confluent-kafka's OffsetSpec.max_timestamp; OffsetCommit metadata strings come back
from OffsetFetch to confluent-kafka and kafka-python consumers; a producer's Metadata
creates a topic with the cluster's num.partitions and default.replication.factor, a
Metadata that does not allow auto-creation does not.

Topic ids (KIP-516): a created topic's id is in its ZooKeeper znode as Kafka writes it
and in every replica's partition.metadata, survives CreatePartitions, and comes back in
confluent-kafka's describe_topics and in Metadata v12 asked by id; DeleteTopics v6
deletes a topic named by its id alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
import trio
from confluent_kafka.admin import AdminClient, NewPartitions, OffsetSpec
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KafkaPythonNewPartitions
from kafka.errors import InvalidPartitionsError as KafkaPythonInvalidPartitions
from kazoo.client import KazooClient

from minibroker.client.admin import Admin
from minibroker.client.producer import Producer
from minibroker.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from minibroker.protocol.topic_ids import parse_topic_id
from tests.support.broker import KafkaWireClient
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(180)]

ADMIN_TIMEOUT_S = 30
AUTO_CREATION_DEFAULTS = ("num.partitions=3", "default.replication.factor=2")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        kafka_listeners=True,
        properties=AUTO_CREATION_DEFAULTS,
    ) as running:
        yield running


async def create_topic(
    cluster: LocalCluster, name: str, partitions: int, rf: int = 2, **config: str
) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(name, partitions, rf, config=config)


async def produce(cluster: LocalCluster, topic: str, count: int, size: int = 100) -> None:
    async with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(count):
            await producer.send(topic, b"%d:" % i + b"x" * size, key=None)


async def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    async with Admin(cluster.bootstrap) as admin:
        (described,) = await admin.describe_topics([topic])
        return described.partitions[partition].leader


def segment_bases(cluster: LocalCluster, broker: int, topic: str, partition: int = 0) -> list[int]:
    """The base offsets of the segments a broker holds of the partition."""
    dirs = list((Path(cluster.data_dir) / f"broker-{broker}").glob(f"logs-*/{topic}-{partition}"))
    assert len(dirs) == 1, dirs
    return sorted(int(f.stem) for f in dirs[0].glob("*.log"))


async def partitions_of(cluster: LocalCluster, name: str) -> list[tuple[int, ...]]:
    """Each partition's replicas, as the Metadata of a broker reports them."""
    async with Admin(cluster.bootstrap) as admin:
        (topic,) = await admin.describe_topics([name])
        assert all(p.leader >= 0 for p in topic.partitions)
        return [p.replicas for p in topic.partitions]


def confluent_grow(
    admin: AdminClient, *changes: NewPartitions, validate_only: bool = False
) -> None:
    for future in admin.create_partitions(list(changes), validate_only=validate_only).values():
        future.result(timeout=ADMIN_TIMEOUT_S)


async def test_confluent_kafka_grows_a_topic_and_keyed_records_reach_the_new_partitions(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "grown", 2)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "topic.metadata.refresh.interval.ms": 500}
    )
    keys = [b"key-%d" % i for i in range(64)]

    def partitions_used() -> set[int]:
        used: set[int] = set()
        for key in keys:
            producer.produce(
                "grown", key=key, value=b"v", on_delivery=lambda err, m: used.add(m.partition())
            )
        assert producer.flush(ADMIN_TIMEOUT_S) == 0
        return used

    assert partitions_used() == {0, 1}

    confluent_grow(admin, NewPartitions("grown", 4), validate_only=True)
    assert len(await partitions_of(cluster, "grown")) == 2
    confluent_grow(admin, NewPartitions("grown", 4))
    replicas = await partitions_of(cluster, "grown")
    assert len(replicas) == 4
    assert all(len(r) == 2 and len(set(r)) == 2 for r in replicas)
    # The producer learns the new count from its next metadata refresh.
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while (used := partitions_used()) != {0, 1, 2, 3}:
        assert time.monotonic() < deadline, used

    with pytest.raises(confluent_kafka.KafkaException) as shrink:
        confluent_grow(admin, NewPartitions("grown", 3))
    assert shrink.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    with pytest.raises(confluent_kafka.KafkaException) as same:
        confluent_grow(admin, NewPartitions("grown", 4))
    assert same.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    with pytest.raises(confluent_kafka.KafkaException) as unknown:
        confluent_grow(admin, NewPartitions("no-such-topic", 4))
    assert unknown.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    confluent_grow(admin, NewPartitions("grown", 6, replica_assignment=[[3, 1], [2, 3]]))
    assert (await partitions_of(cluster, "grown"))[4:] == [(3, 1), (2, 3)]


async def test_kafka_python_adds_partitions_with_and_without_replica_lists(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "kafka-python-grown", 1, rf=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(3)})
        assert len(await partitions_of(cluster, "kafka-python-grown")) == 3
        admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(4, [[2, 3, 1]])})
        assert (await partitions_of(cluster, "kafka-python-grown"))[3] == (2, 3, 1)
        with pytest.raises(KafkaPythonInvalidPartitions):
            admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(2)})
    finally:
        admin.close()


async def test_bad_replica_lists_are_refused_and_change_nothing(cluster: LocalCluster) -> None:
    await create_topic(cluster, "refused-growth", 1)
    async with Admin(cluster.bootstrap) as admin:
        for bad in ([[1, 1]], [[1, 9]], [[1]], [[1, 2], [2, 3]]):
            with pytest.raises(InvalidReplicaAssignmentError):
                await admin.create_partitions("refused-growth", 2, assignments=bad)
        with pytest.raises(InvalidPartitionsError):
            await admin.create_partitions("refused-growth", 1)
    assert len(await partitions_of(cluster, "refused-growth")) == 1


def test_topic_alter_adds_partitions_from_the_shell(cluster: LocalCluster) -> None:
    assert cluster.cli("topic", "create", "shell-grown", "--partitions", "1").returncode == 0
    checked = cluster.cli(
        "topic", "alter", "shell-grown", "--partitions", "3", "--validate-only", "--format", "json"
    )
    assert json.loads(checked.stdout) == {
        "topic": "shell-grown",
        "partitions": 3,
        "validate_only": True,
    }
    done = cluster.cli("topic", "alter", "shell-grown", "--partitions", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "Topic shell-grown now has 3 partitions\n"
    described = json.loads(
        cluster.cli("topic", "describe", "shell-grown", "--format", "json").stdout
    )
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1, 2]
    shrink = cluster.cli("topic", "alter", "shell-grown", "--partitions", "2")
    assert shrink.returncode == 1
    assert "INVALID_PARTITIONS" in shrink.stderr.decode()


SMALL_SEGMENTS = {"segment.bytes": "1024"}  # ~8 records of 100 bytes a segment


async def test_confluent_kafka_deletes_records_and_readers_start_at_the_low_watermark(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "trimmed", 1, rf=3, **SMALL_SEGMENTS)
    await produce(cluster, "trimmed", 60)
    leader = await leader_of(cluster, "trimmed")
    assert segment_bases(cluster, leader, "trimmed")[0] == 0
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    tp = confluent_kafka.TopicPartition("trimmed", 0, 25)

    deleted = admin.delete_records([tp])[tp].result(timeout=ADMIN_TIMEOUT_S)

    assert deleted.low_watermark == 25  # every replica starts there now
    earliest = confluent_kafka.TopicPartition("trimmed", 0)
    listed = admin.list_offsets({earliest: OffsetSpec.earliest()})[earliest]
    assert listed.result(timeout=ADMIN_TIMEOUT_S).offset == 25
    bases = segment_bases(cluster, leader, "trimmed")
    assert bases[0] <= 25 and all(b > 25 for b in bases[1:]), bases  # whole segments went
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "trimmed-readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["trimmed"])
        first = None
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while first is None and time.monotonic() < deadline:
            first = consumer.poll(1.0)
        assert first is not None and first.error() is None
        assert (first.offset(), first.value()[:3]) == (25, b"25:")
    finally:
        consumer.close()

    past = confluent_kafka.TopicPartition("trimmed", 0, 61)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        admin.delete_records([past])[past].result(timeout=ADMIN_TIMEOUT_S)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE


async def test_kafka_python_deletes_records_below_the_high_watermark(cluster: LocalCluster) -> None:
    await create_topic(cluster, "kafka-python-trimmed", 1)
    await produce(cluster, "kafka-python-trimmed", 10)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        tp = KafkaPythonTopicPartition("kafka-python-trimmed", 0)
        answer = admin.delete_records({tp: -1})  # -1: everything below the high watermark
        assert answer[tp]["low_watermark"] == 10
    finally:
        admin.close()


async def test_compacted_topics_and_offsets_past_the_end_are_refused(cluster: LocalCluster) -> None:
    await create_topic(cluster, "compacted-trim", 1, **{"cleanup.policy": "compact"})
    await create_topic(cluster, "short-trim", 1)
    await produce(cluster, "short-trim", 3)
    async with Admin(cluster.bootstrap) as admin:
        results = await admin.delete_records({("compacted-trim", 0): 0, ("short-trim", 0): 4})
        assert isinstance(results[("compacted-trim", 0)], PolicyViolationError)
        assert isinstance(results[("short-trim", 0)], OffsetOutOfRangeError)
        assert await admin.delete_records({("short-trim", 0): 2}) == {("short-trim", 0): 2}
        assert await admin.delete_records({("short-trim", 0): 1}) == {("short-trim", 0): 2}


def test_topic_delete_records_from_the_shell_with_flags_or_kafkas_json(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    assert cluster.cli("topic", "create", "shell-trimmed", "--partitions", "2").returncode == 0
    lines = "".join(f"{i % 2}:v{i}\n" for i in range(20)).encode()
    produced = cluster.cli("produce", "shell-trimmed", "--key-separator", ":", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    described = json.loads(
        cluster.cli("topic", "describe", "shell-trimmed", "--format", "json").stdout
    )
    assert len(described[0]["partitions"]) == 2

    flags = cluster.cli(
        "topic", "delete-records", "shell-trimmed", "--partition", "0", "--before-offset", "3"
    )
    assert flags.returncode == 0, flags.stderr
    assert flags.stdout.decode() == "partition: shell-trimmed-0\tlow_watermark: 3\n"

    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "shell-trimmed", "partition": 0, "offset": 4},
                    {"topic": "shell-trimmed", "partition": 1, "offset": 2},
                ],
            }
        )
    )
    from_file = cluster.cli(
        "topic", "delete-records", "--offset-json-file", str(plan), "--format", "json"
    )
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout) == [
        {"topic": "shell-trimmed", "partition": 0, "low_watermark": 4},
        {"topic": "shell-trimmed", "partition": 1, "low_watermark": 2},
    ]
    usage = cluster.cli("topic", "delete-records", "shell-trimmed", "--partition", "0")
    assert usage.returncode == 2


async def test_list_offsets_max_timestamp_finds_the_first_record_with_the_largest_timestamp(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "timestamps", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    for timestamp in (1_000, 5_000, 3_000, 5_000, 2_000):
        producer.produce("timestamps", value=b"t%d" % timestamp, timestamp=timestamp)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    tp = confluent_kafka.TopicPartition("timestamps", 0)

    found = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(ADMIN_TIMEOUT_S)

    assert (found.offset, found.timestamp) == (1, 5_000)


async def test_offset_commit_metadata_comes_back_from_offset_fetch(cluster: LocalCluster) -> None:
    await create_topic(cluster, "committed-notes", 1)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "noting-readers"}
    )
    try:
        note = confluent_kafka.TopicPartition("committed-notes", 0, 7, "checkpoint:7")
        consumer.commit(offsets=[note], asynchronous=False)
        (read,) = consumer.committed([confluent_kafka.TopicPartition("committed-notes", 0)])
        assert (read.offset, read.metadata) == (7, "checkpoint:7")
    finally:
        consumer.close()
    other = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap, group_id="noting-readers-2")
    try:
        tp = KafkaPythonTopicPartition("committed-notes", 0)
        other.commit({tp: OffsetAndMetadata(3, "from kafka-python", -1)})
        assert other.committed(tp, metadata=True).metadata == "from kafka-python"
    finally:
        other.close()


async def test_metadata_auto_creates_topics_with_the_cluster_defaults_only_when_allowed(
    cluster: LocalCluster,
) -> None:
    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    async with KafkaWireClient(await trio.open_tcp_stream(host, int(port))) as client:
        refused = await client.kafka_request(
            3, 9, {"topics": [{"name": "never-made"}], "allow_auto_topic_creation": False}
        )
    assert refused["topics"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    producer.produce("made-on-first-use", value=b"first")
    assert producer.flush(ADMIN_TIMEOUT_S) == 0

    replicas = await partitions_of(cluster, "made-on-first-use")
    assert len(replicas) == 3 and {len(r) for r in replicas} == {2}
    async with Admin(cluster.bootstrap) as admin:
        assert "never-made" not in await admin.list_topics()


def topic_znode(cluster: LocalCluster, topic: str) -> dict[str, object]:
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.state['zookeeper']['port']}")
    zk.start(timeout=ADMIN_TIMEOUT_S)
    try:
        data, _ = zk.get(f"/brokers/topics/{topic}")
    finally:
        zk.stop()
        zk.close()
    znode: dict[str, object] = json.loads(data)
    return znode


async def test_a_topic_id_is_kept_in_zookeeper_in_each_replica_and_served_by_metadata(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "identified", 2, rf=3)
    znode = topic_znode(cluster, "identified")
    assert znode["version"] == 3
    text = str(znode["topic_id"])
    topic_id = parse_topic_id(text)

    def metadata_files() -> list[Path]:
        return [
            d / "partition.metadata"
            for broker in (1, 2, 3)
            for d in (Path(cluster.data_dir) / f"broker-{broker}").glob("logs-*/identified-*")
        ]

    # Followers make their logs on LeaderAndIsr, and write the file after answering it.
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while len(files := [f for f in metadata_files() if f.exists()]) < 6:
        assert time.monotonic() < deadline, metadata_files()
        await trio.sleep(0.05)
    assert {f.read_text() for f in files} == {f"version: 0\ntopic_id: {text}\n"}

    async with Admin(cluster.bootstrap) as admin:
        await admin.create_partitions("identified", 3)
    assert topic_znode(cluster, "identified")["topic_id"] == text

    admin_client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    described = admin_client.describe_topics(confluent_kafka.TopicCollection(["identified"]))
    description = described["identified"].result(timeout=ADMIN_TIMEOUT_S)
    uuid = description.topic_id  # librdkafka prints ids in standard base64, not Kafka's
    halves = (uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    assert halves == (
        int.from_bytes(topic_id[:8], "big", signed=True),
        int.from_bytes(topic_id[8:], "big", signed=True),
    )
    assert len(description.partitions) == 3

    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    async with KafkaWireClient(await trio.open_tcp_stream(host, int(port))) as client:
        unknown = bytes(16 - len(b"nope")) + b"nope"
        answer = await client.kafka_request(
            3,
            12,
            {
                "topics": [
                    {"name": None, "topic_id": topic_id},
                    {"name": None, "topic_id": unknown},
                ],
                "allow_auto_topic_creation": False,
            },
        )
    by_id, missing = answer["topics"]
    assert (by_id["error_code"], by_id["name"], by_id["topic_id"]) == (0, "identified", topic_id)
    assert len(by_id["partitions"]) == 3
    assert (missing["error_code"], missing["name"]) == (100, None)  # UNKNOWN_TOPIC_ID

    # Fetch v13+ names topics by id alone: the answer comes back under that id.
    leader = next(p["leader_id"] for p in by_id["partitions"] if p["partition_index"] == 0)
    broker = next(b for b in answer["brokers"] if b["node_id"] == leader)
    async with KafkaWireClient(
        await trio.open_tcp_stream(broker["host"], broker["port"])
    ) as client:
        asked = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
        fetched = await client.kafka_request(
            1,
            13,
            {
                "max_wait_ms": 0,
                "min_bytes": 0,
                "topics": [
                    {"topic_id": topic_id, "partitions": asked},
                    {"topic_id": unknown, "partitions": asked},
                ],
            },
        )
    found, not_found = fetched["topics"]
    assert found["topic_id"] == topic_id
    assert [
        (p["partition_index"], p["error_code"], p["high_watermark"]) for p in found["partitions"]
    ] == [(0, 0, 0)]
    assert not_found["topic_id"] == unknown
    assert [(p["partition_index"], p["error_code"]) for p in not_found["partitions"]] == [(0, 100)]


async def test_delete_topics_v6_deletes_a_topic_named_by_its_id(cluster: LocalCluster) -> None:
    await create_topic(cluster, "deleted-by-id", 1)
    topic_id = parse_topic_id(str(topic_znode(cluster, "deleted-by-id")["topic_id"]))
    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    async with KafkaWireClient(await trio.open_tcp_stream(host, int(port))) as client:
        answer = await client.kafka_request(
            20,
            6,
            {
                "topics": [
                    {"name": None, "topic_id": topic_id},
                    {"name": None, "topic_id": bytes(15) + b"\x07"},
                ],
                "timeout_ms": ADMIN_TIMEOUT_S * 1000,
            },
        )
    deleted, unknown = answer["topics"]
    assert (deleted["name"], deleted["topic_id"], deleted["error_code"]) == (
        "deleted-by-id",
        topic_id,
        0,
    )
    assert (unknown["name"], unknown["error_code"]) == (None, 100)  # UNKNOWN_TOPIC_ID
    async with Admin(cluster.bootstrap) as admin:
        assert "deleted-by-id" not in await admin.list_topics()
