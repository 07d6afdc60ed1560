"""MetadataCache: filled by UpdateMetadata, answers Metadata like Kafka's cache."""

from __future__ import annotations

from typing import Any

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.protocol.errors import (
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition


def update(states: list[dict[str, Any]], brokers: list[int], epoch: int = 1) -> dict[str, Any]:
    return {
        "controller_id": 9,
        "controller_epoch": epoch,
        "partition_states": states,
        "live_brokers": [
            {"id": b, "host": f"h{b}", "port": 9000 + b, "rack": None} for b in brokers
        ],
    }


def state(partition: int, leader: int, replicas: list[int], isr: list[int]) -> dict[str, Any]:
    return {
        "topic_name": "t",
        "partition_index": partition,
        "controller_epoch": 1,
        "leader": leader,
        "leader_epoch": 4,
        "isr": isr,
        "zk_version": 2,
        "replicas": replicas,
        "offline_replicas": [],
    }


def test_partitions_report_leader_replicas_and_isr_of_live_brokers() -> None:
    cache = MetadataCache(1)
    cache.update(update([state(0, 1, [1, 2], [1, 2])], [1, 2]))
    response = cache.metadata_response(None)
    assert response["controller_id"] == 9
    assert [b["node_id"] for b in response["brokers"]] == [1, 2]
    [partition] = response["topics"][0]["partitions"]
    assert partition["error_code"] == 0
    assert (partition["leader_id"], partition["leader_epoch"]) == (1, 4)
    assert partition["replica_nodes"] == [1, 2] and partition["isr_nodes"] == [1, 2]


def test_dead_leader_is_leader_not_available_and_dead_replicas_are_listed_offline() -> None:
    cache = MetadataCache(1)
    cache.update(update([state(0, 3, [3, 1], [3, 1]), state(1, 1, [1, 2, 3], [1])], [1]))
    partitions = cache.metadata_response(["t"])["topics"][0]["partitions"]
    assert partitions[0]["error_code"] == LeaderNotAvailableError.code
    assert partitions[0]["leader_id"] == -1
    assert partitions[1]["error_code"] == 0
    assert partitions[1]["replica_nodes"] == [1, 2, 3]
    assert partitions[1]["isr_nodes"] == [1]
    assert partitions[1]["offline_replicas"] == [2, 3]


def test_offline_replicas_the_controller_names_are_kept_even_on_a_live_broker() -> None:
    cache = MetadataCache(1)
    offline_dir = state(0, 1, [1, 2], [1]) | {"offline_replicas": [2]}
    cache.update(update([offline_dir], [1, 2]))
    [partition] = cache.metadata_response(["t"])["topics"][0]["partitions"]
    assert partition["replica_nodes"] == [1, 2]
    assert partition["offline_replicas"] == [2]


def test_unknown_topic_is_unknown_topic_or_partition() -> None:
    cache = MetadataCache(1)
    [topic] = cache.metadata_response(["nope"])["topics"]
    assert topic["error_code"] == UnknownTopicOrPartitionError.code


def test_leader_during_delete_removes_the_partition() -> None:
    cache = MetadataCache(1)
    cache.update(update([state(0, 1, [1], [1])], [1]))
    deleted = cache.update(update([state(0, -2, [1], [1])], [1], epoch=2))
    assert deleted == [TopicPartition("t", 0)]
    assert not cache.contains("t")


def test_live_brokers_are_replaced_not_merged_and_self_registration_is_kept_until_then() -> None:
    cache = MetadataCache(1)
    cache.register_self("me", 9092)
    assert cache.broker(1) is not None and cache.broker(1).host == "me"  # type: ignore[union-attr]
    cache.update(update([], [2]))
    assert cache.broker(1) is None
    assert cache.broker(2) is not None


def test_a_remembered_answer_is_forgotten_when_the_cache_changes() -> None:
    cache = MetadataCache(1)
    cache.update(update([state(0, 1, [1], [1])], [1]))
    first = cache.metadata_response(["t"])
    assert cache.metadata_response(["t"]) is first
    cache.update(update([state(0, 1, [1], [1]), state(1, 1, [1], [1])], [1], epoch=2))
    assert len(cache.metadata_response(["t"])["topics"][0]["partitions"]) == 2


def test_brokers_kafka_listeners_from_update_metadata_appear_in_metadata_answers() -> None:
    cache = MetadataCache(1)
    body = update([state(0, 1, [1], [1])], [1, 2])
    body["live_brokers"][0] |= {"kafka_host": "k1", "kafka_port": 19001}
    cache.update(body)
    brokers = cache.metadata_response(None)["brokers"]
    assert brokers[0] == {
        "node_id": 1,
        "host": "h1",
        "port": 9001,
        "rack": None,
        "kafka_host": "k1",
        "kafka_port": 19001,
    }
    assert "kafka_host" not in brokers[1]


def test_a_standalone_broker_publishes_its_own_kafka_listener() -> None:
    cache = MetadataCache(4)
    cache.register_self("h", 9092, None, ("h", 19092))
    [broker] = cache.metadata_response(None)["brokers"]
    assert (broker["kafka_host"], broker["kafka_port"]) == ("h", 19092)
