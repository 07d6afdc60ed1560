"""DescribeConfigs entries: every broker and topic key, their sources layer by layer,
synonyms in Kafka's order, Kafka's types, and secrets never shown."""

from __future__ import annotations

import dataclasses

from minibroker.broker.admin.broker_configs import DYNAMIC_KEYS, effective_config, lenient_typed
from minibroker.broker.config.broker_config import BrokerConfig, TopicConfig
from minibroker.broker.config.config_describe import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    BrokerLayers,
    ConfigType,
    describe_broker,
    describe_topic,
)


def describe(layers: BrokerLayers, **kwargs: object) -> dict[str, dict[str, object]]:
    typed = lenient_typed({**layers.default, **layers.broker})
    entries = describe_broker(
        layers,
        dynamic=DYNAMIC_KEYS,
        effective=effective_config(layers.config, typed),
        **kwargs,  # type: ignore[arg-type]
    )
    return {str(e["name"]): dict(e) for e in entries}


def test_a_broker_describes_every_key_it_has() -> None:
    entries = describe(BrokerLayers(BrokerConfig()))
    assert set(entries) == {f.metadata["name"] for f in dataclasses.fields(BrokerConfig)}
    assert len(entries) > 100
    assert entries["broker.id"]["read_only"] is True
    assert entries["log.retention.bytes"]["read_only"] is False  # topics inherit it
    assert entries["leader.replication.throttled.rate"]["read_only"] is False


def test_each_layer_is_a_synonym_and_the_first_one_gives_value_and_source() -> None:
    layers = BrokerLayers(
        BrokerConfig(log_segment_bytes=2_000_000, min_insync_replicas=2),
        broker={"log.segment.bytes": "3000000"},
        default={"log.segment.bytes": "4000000", "compression.type": "zstd"},
    )
    entries = describe(layers, include_synonyms=True)
    segment = entries["log.segment.bytes"]
    assert (segment["value"], segment["config_source"]) == ("3000000", SOURCE_DYNAMIC_BROKER_CONFIG)
    assert segment["synonyms"] == [
        {"name": "log.segment.bytes", "value": "3000000", "source": SOURCE_DYNAMIC_BROKER_CONFIG},
        {
            "name": "log.segment.bytes",
            "value": "4000000",
            "source": SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
        },
        {"name": "log.segment.bytes", "value": "2000000", "source": SOURCE_STATIC_BROKER_CONFIG},
        {"name": "log.segment.bytes", "value": "1073741824", "source": SOURCE_DEFAULT_CONFIG},
    ]
    assert entries["compression.type"]["config_source"] == SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
    assert entries["min.insync.replicas"]["config_source"] == SOURCE_STATIC_BROKER_CONFIG
    assert entries["num.partitions"]["config_source"] == SOURCE_DEFAULT_CONFIG
    assert describe(layers)["log.segment.bytes"]["synonyms"] == []


def test_a_retention_set_in_hours_is_the_synonym_of_retention_ms() -> None:
    layers = BrokerLayers(BrokerConfig(log_retention_hours=2))
    entries = describe(layers, include_synonyms=True)
    assert [(s["name"], s["source"]) for s in entries["log.retention.ms"]["synonyms"]] == [
        ("log.retention.hours", SOURCE_STATIC_BROKER_CONFIG),
        ("log.retention.hours", SOURCE_DEFAULT_CONFIG),
    ]
    [topic] = describe_topic(
        layers, {}, effective=layers.config, keys=["retention.ms"], include_synonyms=True
    )
    assert (topic["value"], topic["config_source"]) == ("7200000", SOURCE_STATIC_BROKER_CONFIG)


def test_a_topic_key_lists_its_override_then_the_broker_keys_it_inherits() -> None:
    layers = BrokerLayers(BrokerConfig(), default={"log.cleanup.policy": "compact"})
    typed = lenient_typed(layers.default)
    entries = {
        e["name"]: e
        for e in describe_topic(
            layers,
            {"max.message.bytes": "5000"},
            effective=effective_config(layers.config, typed),
            include_synonyms=True,
            include_documentation=True,
        )
    }
    assert set(entries) == {f.metadata["name"] for f in dataclasses.fields(TopicConfig)}
    assert [(s["name"], s["source"]) for s in entries["max.message.bytes"]["synonyms"]] == [
        ("max.message.bytes", SOURCE_TOPIC_CONFIG),
        ("message.max.bytes", SOURCE_DEFAULT_CONFIG),
    ]
    policy = entries["cleanup.policy"]
    assert (policy["value"], policy["config_source"]) == (
        "compact",
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert entries["flush.ms"]["synonyms"] == []
    assert all(e["documentation"] for e in entries.values())


def test_types_are_kafkas() -> None:
    entries = {
        e["name"]: e["config_type"]
        for e in describe_topic(BrokerLayers(BrokerConfig()), {}, effective=BrokerConfig())
    }
    assert entries["retention.bytes"] == ConfigType.LONG
    assert entries["retention.ms"] == ConfigType.LONG
    assert entries["segment.bytes"] == ConfigType.INT
    assert entries["min.cleanable.dirty.ratio"] == ConfigType.DOUBLE
    assert entries["unclean.leader.election.enable"] == ConfigType.BOOLEAN
    assert entries["compression.type"] == ConfigType.STRING


def test_passwords_are_sensitive_and_never_returned() -> None:
    layers = BrokerLayers(
        BrokerConfig(
            sasl_jaas_config="org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="secret";'
        )
    )
    entries = describe(layers, include_synonyms=True)
    jaas = entries["sasl.jaas.config"]
    assert jaas["is_sensitive"] is True and jaas["value"] is None
    assert jaas["config_type"] == ConfigType.PASSWORD
    assert jaas["synonyms"] and all(s["value"] is None for s in jaas["synonyms"])
    assert entries["ssl.key.password"]["is_sensitive"] is True
