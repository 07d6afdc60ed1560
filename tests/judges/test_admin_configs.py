"""Configs through other people's admin clients, against the judges' 3-broker cluster:
confluent-kafka's AdminClient describes every broker and topic key with its source and
synonyms, and edits topics and brokers key by key (incremental_alter_configs: SET,
APPEND, SUBTRACT, DELETE); a cluster-wide dynamic default reaches live partitions at
once; the log cleaner takes a new log.cleaner.backoff.ms at run time; kafka-python's
KafkaAdminClient alters through IncrementalAlterConfigs too."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from tests.judges.conftest import judged_cluster
from tests.support.cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)

CONFLUENT = f"confluent-kafka {__import__('confluent_kafka').version()[0]}"
KAFKA_PYTHON = f"kafka-python {__import__('kafka').__version__}"


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})


def create(client: AdminClient, name: str) -> None:
    client.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def describe(client: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return dict(client.describe_configs([resource], request_timeout=30)[resource].result())


def alter(client: AdminClient, resource: ConfigResource, *entries: ConfigEntry) -> None:
    resource = ConfigResource(resource.restype, resource.name, incremental_configs=list(entries))
    client.incremental_alter_configs([resource])[resource].result(30)


@pytest.mark.judge(CONFLUENT, "describe_configs: every broker key, sources and synonyms")
def test_describe_configs_lists_every_broker_key_with_source_and_synonyms(
    cluster: LocalCluster,
) -> None:
    client = admin(cluster)
    broker = ConfigResource("BROKER", "1")
    entries = describe(client, broker)  # librdkafka always asks for synonyms
    assert len(entries) > 100
    retention = entries["log.retention.ms"]
    assert [(s.name, s.source) for s in retention.synonyms.values()] == [
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG.value)
    ]
    assert entries["broker.id"].is_read_only and not entries["log.segment.bytes"].is_read_only
    assert entries["sasl.jaas.config"].is_sensitive and entries["sasl.jaas.config"].value is None
    assert entries["group.initial.rebalance.delay.ms"].source == (
        ConfigSource.STATIC_BROKER_CONFIG.value
    )


@pytest.mark.judge(CONFLUENT, "incremental_alter_configs of a topic: SET, APPEND, SUBTRACT, DELETE")
def test_incremental_alter_configs_edits_a_topic_key_by_key(cluster: LocalCluster) -> None:
    client = admin(cluster)
    create(client, "judged-configs")
    topic = ConfigResource("TOPIC", "judged-configs")
    alter(
        client,
        topic,
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    )
    entries = describe(client, topic)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    alter(
        client,
        topic,
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    )
    entries = describe(client, topic)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        alter(
            client,
            topic,
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND),
        )


@pytest.mark.judge(CONFLUENT, "alter_configs of a broker: a per-broker SASL key, as Kafka takes it")
def test_alter_configs_takes_a_per_broker_sasl_key_as_kafka_does(cluster: LocalCluster) -> None:
    """librdkafka's 0081_admin sets sasl.kerberos.min.time.before.relogin on a broker
    with (non-incremental) AlterConfigs and expects NO_ERROR, as Kafka answers. The
    call replaces the broker's whole override set, so the one found is put back."""
    client = admin(cluster)
    broker = ConfigResource("BROKER", "2")
    before = {
        name: entry.value
        for name, entry in describe(client, broker).items()
        if entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    }
    key = "sasl.kerberos.min.time.before.relogin"
    wanted = ConfigResource("BROKER", "2", set_config={**before, key: "58000"})
    try:
        client.alter_configs([wanted], request_timeout=30)[wanted].result(30)
        entry = describe(client, broker)[key]
        assert (entry.value, entry.source, entry.is_read_only) == (
            "58000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
            False,
        )
    finally:
        restored = ConfigResource("BROKER", "2", set_config=before)
        client.alter_configs([restored], request_timeout=30)[restored].result(30)
    entry = describe(client, broker)[key]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DEFAULT_CONFIG.value)


@pytest.mark.judge(CONFLUENT, "a brokers' dynamic default applies to live partitions at once")
def test_a_cluster_wide_dynamic_default_applies_to_live_partitions(cluster: LocalCluster) -> None:
    """confluent-kafka refuses a BROKER resource without a name, so the default is set
    with minibroker's CLI (kafka-configs --entity-default is judged in test_kafka_tools);
    confluent-kafka's describe and producer see it."""
    client = admin(cluster)
    create(client, "judged-default")
    default = ("--entity-type", "brokers", "--entity-default")
    set_ = cluster.cli("configs", "alter", *default, "--add-config", "message.max.bytes=2000")
    assert set_.returncode == 0, set_.stderr
    try:
        topic = describe(client, ConfigResource("TOPIC", "judged-default"))["max.message.bytes"]
        assert (topic.value, topic.source) == (
            "2000",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        deadline = time.monotonic() + 30
        while (outcome := produce(cluster, "judged-default", 5000)) != "MSG_SIZE_TOO_LARGE":
            assert time.monotonic() < deadline, outcome  # the leader follows the notification
    finally:
        unset = cluster.cli("configs", "alter", *default, "--delete-config", "message.max.bytes")
        assert unset.returncode == 0, unset.stderr
    deadline = time.monotonic() + 30
    while (outcome := produce(cluster, "judged-default", 5000)) != "ok":
        assert time.monotonic() < deadline, outcome


def produce(cluster: LocalCluster, topic: str, size: int) -> str:
    """One record of ``size`` bytes (no batching, so the broker sees its size); the
    delivery's error name or "ok"."""
    producer = Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "message.max.bytes": 100_000}
    )
    outcome: list[str] = []
    producer.produce(
        topic,
        b"x" * size,
        on_delivery=lambda err, _msg: outcome.append("ok" if err is None else err.name()),
    )
    producer.flush(30)
    return outcome[0]


@pytest.mark.judge(KAFKA_PYTHON, "KafkaAdminClient.alter_configs (incremental) of a topic")
def test_kafka_pythons_alter_configs_sets_a_topic_key(cluster: LocalCluster) -> None:
    create(admin(cluster), "judged-kafka-python-configs")
    client = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        resource = KafkaPythonResource(
            ConfigResourceType.TOPIC, "judged-kafka-python-configs", {"segment.ms": "100000"}
        )
        client.alter_configs([resource])
        described = client.describe_configs(
            [KafkaPythonResource(ConfigResourceType.TOPIC, "judged-kafka-python-configs")]
        )
    finally:
        client.close()
    assert described["topic"]["judged-kafka-python-configs"]["segment.ms"]["value"] == "100000"


@pytest.fixture
def idle_cleaner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker whose log cleaner, having found nothing to clean at start, waits ten
    minutes before it looks again."""
    yield from judged_cluster(
        tmp_path_factory, "judged-cleaner", properties=("log.cleaner.backoff.ms=600000",), brokers=1
    )


@pytest.mark.extended  # ~25 s: a cluster of its own
@pytest.mark.judge(
    CONFLUENT, "incremental_alter_configs of log.cleaner.backoff.ms: the idle cleaner takes it"
)
def test_an_idle_log_cleaner_takes_a_new_backoff_at_run_time(idle_cleaner: LocalCluster) -> None:
    """Kafka's log cleaner is reconfigured at run time (Sarama's functional tests set
    log.cleaner.backoff.ms so): a cleaner waiting out a ten-minute backoff takes 100 ms
    and compacts what was written meanwhile."""
    cluster = idle_cleaner
    client = admin(cluster)
    name = "judged-cleaner-backoff"
    compacted = {"cleanup.policy": "compact", "segment.bytes": "2048"}
    topic = NewTopic(name, 1, 1, config={**compacted, "min.cleanable.dirty.ratio": "0.01"})
    client.create_topics([topic])[name].result(30)
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap, "linger.ms": 0})
    failed: list[str] = []
    for _batch in range(20):  # batches of ~1.3 KiB: a segment each
        for i in range(10):
            producer.produce(
                name,
                b"v" * 100,
                key=f"key-{i % 4}",
                on_delivery=lambda err, _m: failed.extend([err.name()] if err else []),
            )
        producer.flush(30)
    assert failed == []
    assert records_in(cluster, name, last=199) == 200  # nothing cleaned: the cleaner waits
    broker = ConfigResource("BROKER", "1")
    set_ = AlterConfigOpType.SET
    alter(client, broker, ConfigEntry("log.cleaner.backoff.ms", "100", incremental_operation=set_))
    entry = describe(client, broker)["log.cleaner.backoff.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "100",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    deadline = time.monotonic() + 30
    while (count := records_in(cluster, name, last=199)) > 50:  # ~4 keys + the active segment
        assert time.monotonic() < deadline, f"{count} records left: the cleaner still waits"
        time.sleep(0.5)  # the cleaner tells no client when it is done


def records_in(cluster: LocalCluster, topic: str, *, last: int) -> int:
    """How many records partition 0 of ``topic`` holds, read from its start to offset
    ``last`` (which compaction keeps: the newest record stays)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "judged-cleaner"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        count, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            # A fetch answered with nothing but the empty batch a cleaned segment holds
            # was reported as MSG_SIZE_TOO_LARGE.
            assert message.error() is None, message.error()
            count += 1
            if message.offset() == last:
                return count
        raise AssertionError(f"offset {last} of {topic} not read in 30 s ({count} read)")
    finally:
        consumer.close()
