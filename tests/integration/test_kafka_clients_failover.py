"""Kafka clients through a leader's death, on the Kafka listener: confluent-kafka
(librdkafka) and kafka-python producers with acks=all follow NOT_LEADER_OR_FOLLOWER and
broken connections to the new leader through Metadata, and no record they reported as
acknowledged is lost (min.insync.replicas=2, replication factor 3). Idempotent ones
(kafka-python 3's defaults, confluent-kafka's ``enable.idempotence``) retry what the
dead leader may already have written and still leave every record in the log exactly
once, in send order. To be sure such retries happen, those tests first pause the last
replica of the assignment (acks=all then waits for it), let records reach the leader
and the next replica unacknowledged, and kill the leader: the next replica, which holds
them, is elected, and every one of them is sent again. Each test kills one broker; it
is started again after the test."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.producer.future import RecordMetadata

from minibroker.client.admin import Admin
from minibroker.client.cli.dev import pid_running
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

RECORDS = 3000  # sent while the leader is killed part-way through
KILL_AFTER = 500  # acknowledged records before the kill


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


@pytest.fixture(autouse=True)
def every_broker_back(cluster: LocalCluster) -> Iterator[None]:
    """Resumes the broker a test paused, starts again (same ports, Kafka listener
    included) the one it killed."""
    yield
    for broker_id in (1, 2, 3):
        if pid_running(cluster.broker_pid(broker_id)):
            cluster.resume_broker(broker_id)
        else:
            started = cluster.cli(
                *("dev", "start-broker", str(broker_id), "--data-dir", str(cluster.data_dir)),
                bootstrap=False,
                timeout=120,
            )
            assert started.returncode == 0, started.stderr
    cluster.state = cluster._read_state()  # the new pids, for the next kill and the cleanup


async def leader_of(cluster: LocalCluster, topic: str) -> int:
    async with Admin(cluster.bootstrap) as admin:
        [described] = await admin.describe_topics([topic])
    leader: int = described.partitions[0].leader
    return leader


def read_everything(cluster: LocalCluster, topic: str, at_least: int) -> dict[int, bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        found: dict[int, bytes] = {}
        deadline = time.monotonic() + 90
        while len(found) < at_least and time.monotonic() < deadline:
            found.update((m.offset, m.value) for m in consumer)
        return found
    finally:
        consumer.close()


async def test_confluent_kafka_loses_nothing_acknowledged_when_the_leader_is_killed(
    cluster: LocalCluster,
) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("ck-failover", 1, 3, config={"min.insync.replicas": "2"})
    old_leader = await leader_of(cluster, "ck-failover")
    acknowledged: dict[int, bytes] = {}
    enough_before_the_kill = threading.Event()

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is None:
            acknowledged[message.offset()] = message.value()
            if len(acknowledged) >= KILL_AFTER:
                enough_before_the_kill.set()

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 100,
        }
    )
    for i in range(RECORDS):
        producer.produce("ck-failover", value=b"record-%d" % i, on_delivery=delivered)
        producer.poll(0)
        if i == RECORDS // 3:
            while not enough_before_the_kill.is_set():
                producer.poll(0.1)
            cluster.kill_broker(old_leader, signal.SIGKILL)
    assert producer.flush(150) == 0
    assert len(acknowledged) >= KILL_AFTER

    assert await leader_of(cluster, "ck-failover") not in (-1, old_leader)
    found = read_everything(cluster, "ck-failover", len(acknowledged))
    assert {offset: found.get(offset) for offset in acknowledged} == acknowledged


async def test_kafka_python_loses_nothing_acknowledged_when_the_leader_is_killed(
    cluster: LocalCluster,
) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("kp-failover", 1, 2, config={"min.insync.replicas": "1"})
    old_leader = await leader_of(cluster, "kp-failover")
    producer = KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap,
        acks="all",
        enable_idempotence=False,
        retries=20,
        retry_backoff_ms=200,
        request_timeout_ms=10_000,
        linger_ms=2,
    )
    try:
        sent = [(b"r%d" % i, producer.send("kp-failover", value=b"r%d" % i)) for i in range(300)]
        acknowledged = {f.get(timeout=60).offset: value for value, f in sent}
        cluster.kill_broker(old_leader, signal.SIGKILL)
        sent = [(b"s%d" % i, producer.send("kp-failover", value=b"s%d" % i)) for i in range(300)]
        for value, future in sent:
            acknowledged[future.get(timeout=120).offset] = value
    finally:
        producer.close(timeout=30)

    found = read_everything(cluster, "kp-failover", len(acknowledged))
    assert {offset: found.get(offset) for offset in acknowledged} == acknowledged


def read_whole_partition(cluster: LocalCluster, topic: str) -> list[tuple[int, bytes]]:
    """Every record of ``topic``-0 up to its high watermark, as (offset, value)."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        end = consumer.end_offsets([partition])[partition]
        found: dict[int, bytes] = {}
        deadline = time.monotonic() + 90
        while len(found) < end and time.monotonic() < deadline:
            found.update((m.offset, m.value) for m in consumer)
        assert len(found) == end, f"read {len(found)} of {end} records"
        return sorted(found.items())
    finally:
        consumer.close()


def assert_exactly_once_in_send_order(
    log: list[tuple[int, bytes]], acknowledged: dict[int, bytes], sent: list[bytes]
) -> None:
    """Each acknowledged record at its offset, nothing written twice, send order kept."""
    assert {offset: dict(log).get(offset) for offset in acknowledged} == acknowledged
    values = [value for _, value in log]
    assert len(values) == len(set(values)), "a record was written twice"
    position = {value: n for n, value in enumerate(sent)}
    assert [position[v] for v in values] == sorted(position[v] for v in values)


def last_offset_on(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    """The last offset in ``broker_id``'s replica of ``topic``-0 (dump-log), -1 if none."""
    [segment] = (cluster.data_dir / f"broker-{broker_id}").glob(f"logs-*/{topic}-0/*.log")
    dumped = cluster.cli("dump-log", str(segment), bootstrap=False)
    assert dumped.returncode == 0, dumped.stderr
    return max((int(n) for n in re.findall(rb"lastOffset: (\d+)", dumped.stdout)), default=-1)


class UnacknowledgedWrites:
    """Stalls ``topic``-0's acks=all answers, then kills its leader once the next replica
    of the assignment holds records no producer has had acknowledged (see the module
    docstring); ``stall()`` and ``kill_leader()`` are called from the producing loop."""

    def __init__(self, cluster: LocalCluster, topic: str, replicas: tuple[int, ...]) -> None:
        self.cluster = cluster
        self.topic = topic
        self.leader, self.successor, self.straggler = replicas

    def stall(self) -> None:
        self.cluster.pause_broker(self.straggler)

    def kill_leader(self, acknowledged: dict[int, bytes]) -> None:
        deadline = time.monotonic() + 60
        while last_offset_on(self.cluster, self.successor, self.topic) <= max(list(acknowledged)):
            assert time.monotonic() < deadline, "records never reached the next replica"
        self.cluster.kill_broker(self.leader, signal.SIGKILL)
        self.cluster.resume_broker(self.straggler)


async def idempotence_topic(cluster: LocalCluster, topic: str) -> UnacknowledgedWrites:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 3, config={"min.insync.replicas": "2"})
        [described] = await admin.describe_topics([topic])
    partition = described.partitions[0]
    assert partition.leader == partition.replicas[0]
    return UnacknowledgedWrites(cluster, topic, partition.replicas)


STALL_AT = RECORDS // 3  # records sent when the straggler is paused
KILL_AT = RECORDS // 2  # records sent when the leader is killed


async def test_idempotent_confluent_kafka_writes_each_record_once_in_order_through_a_leader_kill(
    cluster: LocalCluster,
) -> None:
    writes = await idempotence_topic(cluster, "ck-idempotent")
    sent = [b"record-%d" % i for i in range(RECORDS)]
    acknowledged: dict[int, bytes] = {}
    failures: list[object] = []

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            acknowledged[message.offset()] = message.value()

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 100,
        }
    )
    for i, value in enumerate(sent):
        producer.produce("ck-idempotent", value=value, on_delivery=delivered)
        producer.poll(0)
        if i == STALL_AT:
            while len(acknowledged) < KILL_AFTER:
                producer.poll(0.1)
            writes.stall()
        elif i == KILL_AT:
            producer.poll(0)
            writes.kill_leader(acknowledged)
    assert producer.flush(150) == 0
    assert failures == []
    assert len(acknowledged) == RECORDS  # idempotence retries until each one is written

    assert await leader_of(cluster, "ck-idempotent") == writes.successor
    log = read_whole_partition(cluster, "ck-idempotent")
    assert_exactly_once_in_send_order(log, acknowledged, sent)
    assert len(log) == RECORDS


async def test_kafka_python_with_default_settings_writes_each_record_once_through_a_leader_kill(
    cluster: LocalCluster,
) -> None:
    writes = await idempotence_topic(cluster, "kp-idempotent")
    sent = [b"record-%d" % i for i in range(RECORDS)]
    acknowledged: dict[int, bytes] = {}
    failures: list[BaseException] = []
    enough_before_the_stall = threading.Event()

    def delivered(value: bytes, metadata: RecordMetadata) -> None:
        acknowledged[metadata.offset] = value
        if len(acknowledged) >= KILL_AFTER:
            enough_before_the_stall.set()

    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)  # idempotent, acks=all
    try:
        for i, value in enumerate(sent):
            future = producer.send("kp-idempotent", value=value)
            future.add_callback(delivered, value).add_errback(failures.append)
            if i == STALL_AT:
                assert enough_before_the_stall.wait(60)
                writes.stall()
            elif i == KILL_AT:
                writes.kill_leader(acknowledged)
        producer.flush(timeout=150)
        assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0
    finally:
        producer.close(timeout=30)
    assert failures == []
    assert len(acknowledged) == RECORDS

    assert await leader_of(cluster, "kp-idempotent") == writes.successor
    log = read_whole_partition(cluster, "kp-idempotent")
    assert_exactly_once_in_send_order(log, acknowledged, sent)
    assert len(log) == RECORDS
