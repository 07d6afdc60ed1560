"""Kafka clients through a leader's death, on the Kafka listener: confluent-kafka
(librdkafka) and kafka-python producers with acks=all follow NOT_LEADER_OR_FOLLOWER and
broken connections to the new leader through Metadata, and no record they reported as
acknowledged is lost (min.insync.replicas=2, replication factor 3)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from minibroker.client.admin import Admin
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

RECORDS = 3000  # sent while the leader is killed part-way through
KILL_AFTER = 500  # acknowledged records before the kill


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


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
