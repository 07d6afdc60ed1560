"""The group APIs' bodies: FindCoordinator (topic creation on first use, both request
shapes, the Kafka listener's address), OffsetFetch in its one-group and batched shapes,
LeaveGroup's single-member shape."""

from __future__ import annotations

from typing import Any

import trio

from minibroker.broker.cluster.metadata_cache import CachedBroker, CachedPartition, MetadataCache
from minibroker.broker.network.kafka_codec import advertise_kafka_coordinators
from minibroker.broker.requests.dispatcher import Deferred
from minibroker.coordinator.apis import CoordinatorApis
from minibroker.coordinator.coordinator import GroupCoordinator
from minibroker.protocol.api import ApiKey, RequestHeader, decode_request, encode_request
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, OffsetCommitValue, partition_for
from minibroker.protocol.topic_partition import TopicPartition
from tests.unit.coordinator.harness import GROUP, join_request, make_coordinator, running, settle
from tests.unit.coordinator.test_coordinator_races import stable_group

HEADER = RequestHeader(0, 0, 1, "test-client")


def cluster_cache(partitions: int, leader: int) -> MetadataCache:
    cache = MetadataCache(1)
    cache.brokers[1] = CachedBroker(1, "h1", 9001, kafka_host="k1", kafka_port=9101)
    cache.brokers[2] = CachedBroker(2, "h2", 9002)
    for p in range(partitions):
        cache.put(
            TopicPartition(OFFSETS_TOPIC, p), CachedPartition(leader, 0, (leader,), (leader,))
        )
    return cache


class Creations:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"topics": [{"name": OFFSETS_TOPIC, "error_code": NONE}]}


def apis_for(c: GroupCoordinator, cache: MetadataCache, nursery: trio.Nursery) -> CoordinatorApis:
    def spawn(fn: Any) -> None:
        nursery.start_soon(fn)

    return CoordinatorApis(
        c,
        cache,
        clock=lambda: 1000,
        num_partitions=50,
        replication_factor=3,
        create_topics=Creations(),
        spawn=spawn,
    )


def validated(api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """The body as the msgpack codec hands it to a handler (defaults filled)."""
    _, decoded = decode_request(encode_request(api_key, 0, 1, "test-client", body))
    return decoded


async def answer_of(result: Any) -> dict[str, Any]:
    if isinstance(result, Deferred):
        body = await result.wait()
        assert body is not None
        return body
    assert isinstance(result, dict)
    return result


async def test_the_first_find_coordinator_creates_the_offsets_topic_capped_by_live_brokers() -> (
    None
):
    cache = MetadataCache(1)
    cache.brokers[1] = CachedBroker(1, "h1", 9001)
    async with trio.open_nursery() as nursery:
        apis = apis_for(make_coordinator(), cache, nursery)
        body = validated(ApiKey.FIND_COORDINATOR, {"key": GROUP})
        answer = await answer_of(apis.handle_find_coordinator(HEADER, body))
        assert answer["error_code"] == CoordinatorNotAvailableError.code
        await settle()
    creations = apis.locators[0].create_topics
    assert isinstance(creations, Creations)
    (created,) = creations.bodies
    (topic,) = created["topics"]
    assert (topic["name"], topic["num_partitions"], topic["replication_factor"]) == (
        OFFSETS_TOPIC,
        50,
        1,
    )
    assert {"name": "cleanup.policy", "value": "compact"} in topic["configs"]


async def test_find_coordinator_names_the_leader_of_the_groups_partition_in_both_shapes() -> None:
    cache = cluster_cache(partitions=5, leader=1)
    cache.put(
        TopicPartition(OFFSETS_TOPIC, partition_for("other", 5)), CachedPartition(2, 0, (2,), (2,))
    )
    async with trio.open_nursery() as nursery:
        apis = apis_for(make_coordinator(), cache, nursery)
        single = await answer_of(
            apis.handle_find_coordinator(HEADER, validated(ApiKey.FIND_COORDINATOR, {"key": GROUP}))
        )
        batch = await answer_of(
            apis.handle_find_coordinator(
                HEADER,
                validated(ApiKey.FIND_COORDINATOR, {"coordinator_keys": [GROUP, "other"]}),
            )
        )
        txn = await answer_of(
            apis.handle_find_coordinator(
                HEADER, validated(ApiKey.FIND_COORDINATOR, {"key": "t", "key_type": 1})
            )
        )
    assert partition_for(GROUP, 5) != partition_for("other", 5)
    assert (single["error_code"], single["node_id"], single["host"], single["port"]) == (
        NONE,
        1,
        "h1",
        9001,
    )
    assert [(c["key"], c["node_id"]) for c in batch["coordinators"]] == [(GROUP, 1), ("other", 2)]
    assert txn["error_code"] == InvalidRequestError.code
    # On the Kafka listener: the coordinator's Kafka address, or none at all.
    kafka = advertise_kafka_coordinators(batch)
    assert (kafka["host"], kafka["port"]) == ("k1", 9101)
    assert kafka["coordinators"][1]["error_code"] == CoordinatorNotAvailableError.code


async def test_offset_fetch_answers_the_one_group_shape_and_the_batched_shape() -> None:
    c = make_coordinator()
    async with running(c), trio.open_nursery() as nursery:
        apis = apis_for(c, cluster_cache(1, 1), nursery)
        commit = c.offsets.commit_offsets(
            GROUP, -1, "", None, {TopicPartition("t", 0): OffsetCommitValue(4, "m", 1)}
        )
        await settle()
        assert commit.get() is not None
        one = await answer_of(
            apis.handle_offset_fetch(
                HEADER,
                validated(
                    ApiKey.OFFSET_FETCH,
                    {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
                ),
            )
        )
        batched = await answer_of(
            apis.handle_offset_fetch(
                HEADER,
                validated(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": GROUP, "topics": None}]}),
            )
        )
        nursery.cancel_scope.cancel()
    assert one["error_code"] == NONE
    assert [
        (p["partition_index"], p["committed_offset"]) for p in one["topics"][0]["partitions"]
    ] == [
        (0, 4),
        (1, -1),
    ]
    (group,) = batched["groups"]
    assert group["group_id"] == GROUP
    assert group["topics"][0]["partitions"][0]["metadata"] == "m"


async def test_leave_group_with_one_member_id_answers_its_error_at_the_top() -> None:
    c = make_coordinator()
    async with running(c), trio.open_nursery() as nursery:
        apis = apis_for(c, cluster_cache(1, 1), nursery)
        (member,) = await stable_group(c, 1)
        unknown = await answer_of(
            apis.handle_leave_group(
                HEADER, validated(ApiKey.LEAVE_GROUP, {"group_id": GROUP, "member_id": "x"})
            )
        )
        batch = await answer_of(
            apis.handle_leave_group(
                HEADER,
                validated(
                    ApiKey.LEAVE_GROUP,
                    {"group_id": GROUP, "members": [{"member_id": member}]},
                ),
            )
        )
        nursery.cancel_scope.cancel()
    assert unknown["error_code"] == UnknownMemberIdError.code
    assert batch["error_code"] == NONE
    assert batch["members"] == [
        {"member_id": member, "group_instance_id": None, "error_code": NONE}
    ]


async def test_describe_groups_shows_protocol_and_assignments_only_once_stable() -> None:
    c = make_coordinator()
    async with running(c), trio.open_nursery() as nursery:
        apis = apis_for(c, cluster_cache(1, 1), nursery)
        body = validated(ApiKey.DESCRIBE_GROUPS, {"groups": [GROUP, "unknown"]})
        (member,) = await stable_group(c, 1)
        stable, unknown = (await answer_of(apis.handle_describe_groups(HEADER, body)))["groups"]
        c.join_group(join_request(member))  # the leader rejoins: a rebalance starts
        await settle()
        (rebalancing, _) = (await answer_of(apis.handle_describe_groups(HEADER, body)))["groups"]
        nursery.cancel_scope.cancel()
    assert (stable["group_state"], stable["protocol_type"], stable["protocol_data"]) == (
        "Stable",
        "consumer",
        "range",
    )
    assert stable["members"][0]["member_assignment"] == member.encode()
    assert stable["members"][0]["member_metadata"] == b"meta"
    assert (unknown["error_code"], unknown["group_state"], unknown["members"]) == (NONE, "Dead", [])
    assert rebalancing["group_state"] == "CompletingRebalance"
    assert rebalancing["protocol_data"] == ""
    assert rebalancing["members"][0]["member_assignment"] == b""
