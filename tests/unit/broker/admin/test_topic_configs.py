"""Topic config validation, DescribeConfigs merging, applying a change to live
partitions and logs, the standalone APIs, and the cluster id codec."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from minibroker.broker.admin.topic_configs import (
    TopicConfigs,
    describe_topic_config,
    validate_topic_overrides,
)
from minibroker.broker.cluster.metadata_cache import CachedPartition, MetadataCache
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.config.config_describe import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    ConfigType,
)
from minibroker.broker.replication.hosted_replicas import HostedReplicas, to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.requests.dispatcher import Deferred
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.errors import InvalidConfigError, InvalidRequestError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_manager import LogManager
from minibroker.zk.cluster_id import decode_cluster_id, encode_cluster_id, new_cluster_id
from minibroker.zk.values import ZkDataError
from tests.support.broker import broker_config

TP = TopicPartition("t", 0)


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
        ("cleanup.policy", "compress"),
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
        "synonyms": [],
        "config_type": ConfigType.INT,
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


# -- applying changes on a broker (no network, no ZooKeeper) -----------------------------


def leader_state() -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=1, leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,)
    )


@pytest.fixture
async def log_manager(tmp_path: Path) -> AsyncIterator[LogManager]:
    config = broker_config(tmp_path)
    manager = LogManager(config.log_dirs, to_log_config(config.topic_config()))
    try:
        yield manager
    finally:
        manager.close()


def replica_manager(
    log_manager: LogManager, tmp_path: Path, overrides: Mapping[str, str] | None = None
) -> ReplicaManager:
    return ReplicaManager(
        HostedReplicas(
            broker_config(tmp_path),
            log_manager,
            MetadataCache(1),
            clock=lambda: 1_000,
            topic_overrides=lambda topic: overrides or {},
        )
    )


async def test_a_config_change_reaches_live_partitions_and_their_logs(
    log_manager: LogManager, tmp_path: Path
) -> None:
    manager = replica_manager(log_manager, tmp_path)
    await manager.leadership.become_leader_or_follower(1, {TP: leader_state()})
    partition = manager.replicas.get_partition(TP)
    assert partition is not None

    await manager.replicas.update_topic_overrides(
        "t",
        {
            "retention.ms": "1000",
            "max.message.bytes": "100",
            "min.insync.replicas": "2",
            "message.timestamp.type": "LogAppendTime",
        },
    )
    assert partition.config.min_insync_replicas == 2 and partition.config.log_append_time
    assert (partition.log.config.retention_ms, partition.log.config.max_message_bytes) == (
        1000,
        100,
    )

    await manager.replicas.update_topic_overrides("t", {})  # every override removed
    assert partition.config == manager.replicas.config.topic_config()
    assert partition.log.config == to_log_config(manager.replicas.config.topic_config())


async def test_a_log_loaded_at_start_up_takes_its_topics_overrides_on_leader_and_isr(
    log_manager: LogManager, tmp_path: Path
) -> None:
    loaded = log_manager.get_or_create_log(TP)  # as recovery opens it: broker defaults
    manager = replica_manager(log_manager, tmp_path, {"retention.ms": "1000"})
    await manager.leadership.become_leader_or_follower(1, {TP: leader_state()})
    assert loaded.config.retention_ms == 1000


# -- the APIs on a standalone broker ----------------------------------------------------


async def call(handler: Any, body: dict[str, Any]) -> dict[str, Any]:
    result = handler(RequestHeader(ApiKey.DESCRIBE_CONFIGS, 0, 1, "t"), body)
    assert isinstance(result, Deferred)
    answer = await result.wait()
    assert answer is not None
    return answer


async def test_a_standalone_broker_describes_defaults_and_refuses_alter(
    log_manager: LogManager, tmp_path: Path
) -> None:
    manager = replica_manager(log_manager, tmp_path)
    cache = MetadataCache(1)
    cache.put(TP, CachedPartition(leader=1, leader_epoch=0, isr=(1,), replicas=(1,)))
    apis = TopicConfigs(manager.replicas.config, manager.replicas, cache, zk=None)
    resource = {"resource_type": 2, "resource_name": "t", "configuration_keys": None}
    body = {"resources": [resource], "include_synonyms": False, "include_documentation": False}
    [described] = (await call(apis.handle_describe_configs, body))["results"]
    assert described["error_code"] == 0
    assert {c["config_source"] for c in described["configs"]} == {SOURCE_DEFAULT_CONFIG}

    unknown = {"resource_type": 2, "resource_name": "u", "configuration_keys": None}
    broker = {"resource_type": 4, "resource_name": "1", "configuration_keys": None}
    body = {
        "resources": [unknown, broker],
        "include_synonyms": False,
        "include_documentation": False,
    }
    codes = [r["error_code"] for r in (await call(apis.handle_describe_configs, body))["results"]]
    assert codes == [3, InvalidRequestError.code]

    altered = {"resource_type": 2, "resource_name": "t", "configs": [{"name": "x", "value": "1"}]}
    body = {"resources": [altered], "validate_only": False}
    [bad] = (await call(apis.handle_alter_configs, body))["responses"]
    assert bad["error_code"] == InvalidConfigError.code and "x" in bad["error_message"]
    altered["configs"] = [{"name": "retention.ms", "value": "1"}]
    [refused] = (await call(apis.handle_alter_configs, body))["responses"]
    assert refused["error_code"] == InvalidRequestError.code
