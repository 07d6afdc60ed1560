"""CreatePartitions' checks and writes against an in-memory ZooKeeper: Kafka's error
for every refusal, Kafka's placement for the new partitions, validate_only writes
nothing, and a concurrent change of the topic znode is re-read, never overwritten."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import pytest

from minibroker.broker.admin.create_partitions import CreatePartitions
from minibroker.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    ReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from minibroker.zk.client import BadVersion
from minibroker.zk.values import TopicAssignment

pytestmark = pytest.mark.timeout(30)

TOPIC_ID = bytes(range(16))


class GrowthZk:
    def __init__(self, assignments: Mapping[str, TopicAssignment], *, conflicts: int = 0) -> None:
        self.assignments = dict(assignments)
        self.writes: list[TopicAssignment] = []
        self.conflicts = conflicts  # writes that find the znode changed first
        self.deleting: set[str] = set()

    async def get_live_brokers(self, *, watch: bool = False) -> Mapping[int, Any]:
        return {1: None, 2: None, 3: None}

    async def get_assignment(self, topic: str, *, watch: bool = False) -> TopicAssignment | None:
        return self.assignments.get(topic)

    async def get_topic_deletions(self, *, watch: bool = False) -> set[str]:
        return self.deleting

    async def set_assignment(
        self, assignment: TopicAssignment, *, controller_epoch_zk_version: int | None = None
    ) -> TopicAssignment:
        if self.conflicts:
            self.conflicts -= 1
            raise BadVersion()
        self.writes.append(assignment)
        written = dataclasses.replace(assignment, zk_version=assignment.zk_version + 1)
        self.assignments[assignment.topic] = written
        return written


async def ready(topic: str, count: int) -> None:
    return None


def grow(zk: GrowthZk, *topics: dict[str, Any], validate_only: bool = False) -> Any:
    api = CreatePartitions(zk, ready, max_new_partitions=100, rng=random.Random(1))
    request: Any = {"topics": list(topics), "timeout_ms": 1000, "validate_only": validate_only}
    return api.create_partitions(request)


def errors(response: Any) -> dict[str, int]:
    return {r["name"]: r["error_code"] for r in response["results"]}


TWO = TopicAssignment("t", {0: (2, 3), 1: (3, 1)}, zk_version=4, topic_id=TOPIC_ID)


async def test_placed_partitions_continue_the_leaders_round_from_partition_0() -> None:
    zk = GrowthZk({"t": TWO})
    assert errors(await grow(zk, {"name": "t", "count": 5, "assignments": None})) == {"t": 0}
    (written,) = zk.writes
    assert written.topic_id == TOPIC_ID and written.zk_version == 4  # conditional, id kept
    # partition 0 leads from broker 2 (index 1): partition p's leader is (p + 1) mod 3
    assert [written.partitions[p][0] for p in (2, 3, 4)] == [1, 2, 3]
    assert all(len(set(written.partitions[p])) == 2 for p in (2, 3, 4))


async def test_refusals_are_kafkas_errors_and_write_nothing() -> None:
    zk = GrowthZk({"t": TWO, "moving": dataclasses.replace(TWO, adding_replicas={0: (1,)})})
    zk.deleting = {"going"}
    zk.assignments["going"] = TWO
    cases = {
        "t": ({"count": 1, "assignments": None}, InvalidPartitionsError),
        "moving": ({"count": 3, "assignments": None}, ReassignmentInProgressError),
        "going": ({"count": 3, "assignments": None}, InvalidTopicError),
        "none": ({"count": 3, "assignments": None}, UnknownTopicOrPartitionError),
    }
    for name, (fields, error) in cases.items():
        assert errors(await grow(zk, {"name": name, **fields})) == {name: error.code}
    for bad in ([[1, 1]], [[1, 9]], [[1]], [[1, 2], [2, 3]]):
        topic = {"name": "t", "count": 3, "assignments": [{"broker_ids": b} for b in bad]}
        assert errors(await grow(zk, topic)) == {"t": InvalidReplicaAssignmentError.code}
    twice = {"name": "t", "count": 3, "assignments": None}
    response = await grow(zk, twice, twice)
    assert [r["error_code"] for r in response["results"]] == [InvalidRequestError.code] * 2
    assert zk.writes == []


async def test_validate_only_checks_and_writes_nothing() -> None:
    zk = GrowthZk({"t": TWO})
    topic = {"name": "t", "count": 3, "assignments": [{"broker_ids": [1, 3]}]}
    assert errors(await grow(zk, topic, validate_only=True)) == {"t": 0}
    assert zk.writes == []


async def test_a_topic_changed_meanwhile_is_read_again_and_grown_once() -> None:
    zk = GrowthZk({"t": TWO}, conflicts=2)
    topic = {"name": "t", "count": 3, "assignments": [{"broker_ids": [1, 3]}]}
    assert errors(await grow(zk, topic)) == {"t": 0}
    assert len(zk.writes) == 1 and zk.writes[0].partitions[2] == (1, 3)
