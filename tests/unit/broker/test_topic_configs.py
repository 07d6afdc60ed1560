"""Topic config validation, DescribeConfigs merging and the cluster id codec."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.topic_configs import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    describe_topic_config,
    validate_topic_overrides,
)
from controller.cluster_id import decode_cluster_id, encode_cluster_id, new_cluster_id
from controller.zk_model import ZkDataError
from protocol.errors import InvalidConfigError


def by_name(entries: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(e["name"]): e for e in entries}


def test_valid_overrides_give_the_typed_topic_config() -> None:
    config = validate_topic_overrides(
        BrokerConfig(),
        {
            "retention.ms": "60000",
            "min.insync.replicas": "2",
            "message.timestamp.type": "LogAppendTime",
        },
    )
    assert config.retention_ms == 60000
    assert config.min_insync_replicas == 2
    assert config.log_append_time


def test_an_unknown_key_is_invalid_config_naming_the_key() -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.msx"):
        validate_topic_overrides(BrokerConfig(), {"retention.msx": "1"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "soon"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "maybe"),
        ("message.timestamp.type", "WallClock"),
        ("segment.bytes", "13"),
        ("cleanup.policy", "compact"),
    ],
)
def test_a_bad_value_is_invalid_config_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        validate_topic_overrides(BrokerConfig(), {key: value})


def test_broker_keys_are_not_topic_keys() -> None:
    with pytest.raises(InvalidConfigError, match=r"log\.retention\.ms"):
        validate_topic_overrides(BrokerConfig(), {"log.retention.ms": "1000"})


def test_describe_lists_every_topic_key_with_overrides_as_topic_config() -> None:
    entries = by_name(describe_topic_config(BrokerConfig(), {"retention.ms": "60000"}))
    assert entries["retention.ms"]["value"] == "60000"
    assert entries["retention.ms"]["config_source"] == SOURCE_TOPIC_CONFIG
    assert entries["min.insync.replicas"] == {
        "name": "min.insync.replicas",
        "value": "1",
        "read_only": False,
        "config_source": SOURCE_DEFAULT_CONFIG,
        "is_sensitive": False,
        "documentation": None,
    }
    assert "unclean.leader.election.enable" in entries
    assert entries["unclean.leader.election.enable"]["value"] == "false"
    assert "segment.bytes" in entries and "max.message.bytes" in entries


def test_describe_inherits_the_broker_value_as_static_broker_config() -> None:
    broker = BrokerConfig.from_properties(
        overrides={"min.insync.replicas": "2", "log.retention.hours": "1"}
    )
    entries = by_name(describe_topic_config(broker, {}))
    assert entries["min.insync.replicas"]["value"] == "2"
    assert entries["min.insync.replicas"]["config_source"] == SOURCE_STATIC_BROKER_CONFIG
    assert entries["retention.ms"]["value"] == str(3_600_000)
    assert entries["max.message.bytes"]["config_source"] == SOURCE_DEFAULT_CONFIG


def test_describe_filters_by_requested_keys_and_adds_documentation() -> None:
    entries = describe_topic_config(
        BrokerConfig(), {}, keys=["retention.ms", "no.such.key"], include_documentation=True
    )
    assert [e["name"] for e in entries] == ["retention.ms"]
    assert entries[0]["documentation"]


def test_cluster_id_is_kafka_json_with_a_22_character_base64_uuid() -> None:
    cluster_id = new_cluster_id()
    assert len(cluster_id) == 22 and "=" not in cluster_id
    data = encode_cluster_id(cluster_id)
    assert data == b'{"version":"1","id":"' + cluster_id.encode() + b'"}'
    assert decode_cluster_id(data) == cluster_id


@pytest.mark.parametrize("data", [b"", b"[]", b'{"version":"1"}', b'{"id":""}', b"\xff"])
def test_a_malformed_cluster_id_znode_is_a_zk_data_error(data: bytes) -> None:
    with pytest.raises(ZkDataError):
        decode_cluster_id(data)
