"""Kafka's Java client (3.9.2) and Kafka Streams against a 3-broker cluster's Kafka
listener, through java/'s judge programs (dev.minibroker.judges): an idempotent
KafkaProducer with acks=all in every compression codec, read back by a KafkaConsumer;
three KafkaConsumers sharing a group with the range and the cooperative-sticky
assignors; the Admin client's calls; a Kafka Streams word count with a state store,
its repartition and changelog topics checked from outside; the same word count with
exactly_once_v2, killed and restarted mid-stream (extended tier).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import confluent_kafka
import pytest
from kafka import KafkaConsumer

from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA_VERSION, ToolSession, kafka_classpath, run_java

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


EOS_LINES = 1200
EOS_WORDS_PER_LINE = 5
EOS_LINES_PER_S = 40


@pytest.mark.extended
@pytest.mark.judge(STREAMS, "exactly_once_v2 word count killed (-9) mid-stream, restarted: exact")
def test_an_exactly_once_word_count_killed_mid_stream_and_restarted_counts_every_word_once(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Lines arrive at a steady rate while a Kafka Streams word count with
    processing.guarantee=exactly_once_v2 runs; the JVM is killed with SIGKILL once a
    fifth of the counts are out (a transaction is open then: input never pauses),
    restarted on the same state directory, and left to finish. Read committed, every
    word's counts on the output topic are exactly 1, 2, ... its number of occurrences:
    no update lost, none applied twice, whatever the killed instance had in flight."""
    create_topics(cluster, ("eos-lines", 3), ("eos-counts", 3))
    vocabulary = [f"word{i}" for i in range(11)]
    lines = [
        " ".join(vocabulary[(n * EOS_WORDS_PER_LINE + i) % len(vocabulary)] for i in range(5))
        for n in range(EOS_LINES)
    ]
    expected = Counter(w for line in lines for w in line.split())
    total = sum(expected.values())

    def feed() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
        started = time.monotonic()
        for n, line in enumerate(lines):
            producer.produce("eos-lines", line.encode())
            producer.poll(0)
            ahead = started + n / EOS_LINES_PER_S - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # a steady input rate, not a wait for an event
        assert producer.flush(30) == 0

    app = [
        *("java", "-cp", kafka_classpath(), "dev.minibroker.judges.StreamsJudge"),
        *(cluster.kafka_bootstrap, "eos-wordcount", "eos-lines", "eos-counts", str(total)),
        *("exactly_once_v2", str(tmp_path / "streams-state")),
    ]
    counts = committed_reader(cluster, "eos-counts")
    feeder = threading.Thread(target=feed, daemon=True)
    first = subprocess.Popen(app, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        feeder.start()
        seen = 0
        deadline = time.monotonic() + 120
        while seen < total // 5:
            assert time.monotonic() < deadline, f"{seen} counts out before the kill"
            assert first.poll() is None, first.communicate()
            seen += len(counts.consume(500, timeout=0.5))
    finally:
        first.kill()
        first.communicate()
    assert feeder.is_alive(), "the input ended before the kill: not mid-stream"
    finished = subprocess.run(app, capture_output=True, text=True, timeout=240, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    feeder.join(timeout=60)
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    assert report["store"] == dict(expected), report

    counts.close()
    updates: dict[str, list[int]] = {}
    reader = committed_reader(cluster, "eos-counts")
    try:
        deadline = time.monotonic() + 60
        while sum(len(v) for v in updates.values()) < total and time.monotonic() < deadline:
            for message in reader.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                updates.setdefault(message.key().decode(), []).append(
                    int.from_bytes(message.value(), "big")
                )
    finally:
        reader.close()
    assert {w: values for w, values in updates.items()} == {
        w: list(range(1, n + 1)) for w, n in expected.items()
    }


def committed_reader(cluster: LocalCluster, topic: str) -> confluent_kafka.Consumer:
    """A read_committed consumer of ``topic`` from its beginning (no group offsets)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": f"{topic}-checker-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    return consumer
