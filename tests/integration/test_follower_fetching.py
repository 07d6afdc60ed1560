"""Follower fetching (KIP-392) on a 3-broker cluster, one broker per rack, with Kafka's
``replica.selector.class=...RackAwareReplicaSelector``: a leader points a consumer of
another rack at the in-sync follower in that rack (``preferred_read_replica``, no
records); that follower serves it up to its high watermark; a consumer in the leader's
rack, one naming no rack and an older Fetch keep reading from the leader; a real
client (librdkafka, ``client.rack``) reads every record through its rack's follower.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
import trio

from minibroker.client.producer import Producer
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import NONE, NotLeaderOrFollowerError
from tests.support.broker import KafkaWireClient
from tests.support.cluster import ProcessCluster

pytestmark = pytest.mark.timeout(180)

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "near"
RECORDS = 10


def fetch_body(offset: int, rack: str, epoch: int = -1) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "rack_id": rack,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": offset,
                        "current_leader_epoch": epoch,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


async def fetch(port: int, version: int, rack: str) -> dict[str, Any]:
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        answer = await client.kafka_request(ApiKey.FETCH, version, fetch_body(0, rack))
    (topic,) = answer["topics"]
    (partition,) = topic["partitions"]
    result: dict[str, Any] = partition
    return result


async def test_a_consumer_is_pointed_at_the_in_sync_replica_of_its_rack(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3)
    for broker_id, broker in cluster.brokers.items():
        broker.settings = (
            *broker.settings,
            f"broker.rack=rack-{broker_id}",
            f"replica.selector.class={SELECTOR}",
            "kafka.listeners=127.0.0.1:0",
        )
    async with cluster:
        await cluster.create_topic(TOPIC, -1, -1, assignment={0: [1, 2, 3]})
        async with Producer(f"127.0.0.1:{cluster.brokers[1].port}", acks="all") as producer:
            for i in range(RECORDS):
                await producer.send(TOPIC, b"v%d" % i, key=b"k%d" % i, partition=0)
        metadata = await cluster.request(1, ApiKey.METADATA, {"topics": [{"name": TOPIC}]})
        kafka_port = {b["node_id"]: b["kafka_port"] for b in metadata["brokers"]}
        assert metadata["topics"][0]["partitions"][0]["leader_id"] == 1

        async def follower_caught_up() -> bool:
            answer = await fetch(kafka_port[2], 11, "rack-2")
            return bool(answer["error_code"] == NONE and answer["high_watermark"] == RECORDS)

        await cluster.wait_until(follower_caught_up, "broker 2's high watermark")

        pointed = await fetch(kafka_port[1], 11, "rack-2")
        assert (pointed["error_code"], pointed["preferred_read_replica"]) == (NONE, 2)
        assert not pointed["records"] and pointed["high_watermark"] == RECORDS

        served = await fetch(kafka_port[2], 11, "rack-2")
        assert served["error_code"] == NONE and served["records"]

        for rack in ("rack-1", ""):  # the leader's own rack, or none: read from the leader
            local = await fetch(kafka_port[1], 11, rack)
            assert (local["error_code"], local["preferred_read_replica"]) == (NONE, -1)
            assert local["records"]
        old = await fetch(kafka_port[2], 10, "")  # before v11 only leaders serve consumers
        assert old["error_code"] == NotLeaderOrFollowerError.code

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{kafka_port[1]}",
                "group.id": "near-readers",
                "client.rack": "rack-3",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(values) < RECORDS and time.monotonic() < deadline:
                message = await trio.to_thread.run_sync(consumer.poll, 0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    values.append(message.value())
        finally:
            consumer.close()
        assert values == [b"v%d" % i for i in range(RECORDS)]
