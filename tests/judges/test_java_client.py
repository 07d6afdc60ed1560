"""Kafka's Java client (3.9.2) and Kafka Streams against a 3-broker cluster's Kafka
listener, through java/'s judge programs (dev.minibroker.judges): an idempotent
KafkaProducer with acks=all in every compression codec, read back by a KafkaConsumer;
three KafkaConsumers sharing a group with the range and the cooperative-sticky
assignors; the Admin client's calls; a Kafka Streams word count with a state store,
its repartition and changelog topics checked from outside.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from kafka import KafkaConsumer

from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA_VERSION, ToolSession, run_java

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

JAVA_CLIENT = f"Java client {KAFKA_VERSION}"
STREAMS = f"Kafka Streams {KAFKA_VERSION}"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FETCH_BY_TOPIC_ID = 17
"""The Fetch version Kafka 3.9's consumer sends minibroker: its newest, by topic id."""


def create_topics(cluster: LocalCluster, *specs: tuple[str, int]) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    for name, partitions in specs:
        tools.create_topic(name, partitions)
    for name, result in tools.run().items():
        assert result.exit == 0, (name, result.stdout, result.stderr)


@pytest.mark.judge(JAVA_CLIENT, "KafkaProducer (idempotent, acks=all) in every codec, read back")
def test_java_producer_writes_every_codec_and_the_consumer_reads_it_back_intact(
    cluster: LocalCluster,
) -> None:
    create_topics(cluster, ("java-codecs", len(CODECS)))
    report = run_java("ClientJudge", "produce", cluster.kafka_bootstrap, "java-codecs", "300")
    # The consumer names topics by id (KIP-516): Fetch v17, Kafka 3.9's newest, as the
    # client's own request log shows.
    assert report["fetch_versions"] == [FETCH_BY_TOPIC_ID], report
    assert report["codecs"] == {
        codec: {
            "acknowledged": 300,
            "first_offset": 0,
            "last_offset": 299,
            "read_back_intact": True,
        }
        for codec in CODECS
    }


@pytest.mark.judge(JAVA_CLIENT, "KafkaConsumer x3 in one group: range and cooperative-sticky")
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_three_java_consumers_share_a_group_and_consume_every_record_once(
    cluster: LocalCluster, assignor: str
) -> None:
    topic = f"java-group-{assignor}"
    create_topics(cluster, (topic, 6))
    report = run_java(
        "ClientJudge", "group", cluster.kafka_bootstrap, topic, f"{topic}-g", assignor, "600"
    )
    assert report["errors"] == []
    assert report["fetch_versions"] == [FETCH_BY_TOPIC_ID], report
    assert (report["distinct_consumed"], report["consumed_more_than_once"]) == (600, 0)
    final = [set(json.loads(m["final"])) for m in report["members"]]
    assert all(final), report  # everyone ended with partitions
    assert sorted(p for owned in final for p in owned) == list(range(6)), report


@pytest.mark.judge(JAVA_CLIENT, "Admin client: every call minibroker serves")
def test_the_java_admin_client_calls_that_minibroker_serves_succeed(cluster: LocalCluster) -> None:
    report = run_java("AdminJudge", cluster.kafka_bootstrap, "java-admin")
    calls = report["calls"]
    # Kafka's answer without an authorizer:
    assert calls.pop("describeAcls").startswith("SecurityDisabledException")
    assert calls == dict.fromkeys(calls, "ok"), calls
    assert report["values"] == {
        "created_partitions": 2,
        "created_retention_ms": "3600000",
        "listed": True,
        "described_partitions": 2,
        "described_operations": 8,
        "cluster_nodes": 3,
        "cluster_has_controller": True,
        "cluster_id_set": True,
        "cluster_operations": 7,
        "config_retention_ms": "3600000",
        "broker_config_entries": report["values"]["broker_config_entries"],
        "latest_offset": 10,
        "earliest_offset": 2,  # deleteRecords before offset 2
        "log_dir_brokers": 3,
        "groups_listed": report["values"]["groups_listed"],
        "group_state": "Empty",
        "group_offset": 4,
    }
    assert report["values"]["broker_config_entries"] > 0


WORDS = ["the quick brown fox", "jumps over the lazy dog", "The dog, the fox!", "quick quick"]


@pytest.mark.judge(STREAMS, "word count: repartition topic, state store, compacted changelog")
def test_a_kafka_streams_word_count_keeps_its_state_and_publishes_every_count(
    cluster: LocalCluster,
) -> None:
    create_topics(cluster, ("streams-lines", 2), ("streams-counts", 2))
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.add("lines", "kafka-console-producer", "--topic", "streams-lines", stdin="\n".join(WORDS))
    assert tools.run()["lines"].exit == 0
    expected = Counter(w.strip(",!").lower() for line in WORDS for w in line.split())
    report = run_java(
        "StreamsJudge",
        *(cluster.kafka_bootstrap, "wordcount", "streams-lines", "streams-counts"),
        str(sum(expected.values())),
    )
    assert report["state"] in ("RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING"), report
    assert report["store"] == dict(expected)

    # The output topic: every update; the last one per word is the final count.
    consumer = KafkaConsumer(
        "streams-counts",
        bootstrap_servers=cluster.kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
    )
    latest: dict[str, int] = {}
    deadline = time.monotonic() + 60
    try:
        while latest != expected and time.monotonic() < deadline:
            for message in consumer:
                latest[message.key.decode()] = int.from_bytes(message.value, "big")
    finally:
        consumer.close()
    assert latest == expected

    tools.add("topics", "kafka-topics", "--list")
    changelog = "wordcount-word-counts-changelog"
    tools.add(
        "changelog",
        "kafka-configs",
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        changelog,
    )
    results = tools.run()
    assert {"wordcount-by-word-repartition", changelog} <= set(results["topics"].lines)
    assert any(
        line.strip().startswith("cleanup.policy=compact ") for line in results["changelog"].lines
    ), results["changelog"].stdout
