"""auto.create.topics.enable: Metadata naming an unknown topic creates it, as Kafka does."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from minibroker.broker.cluster.metadata_cache import (
    AUTO_CREATE_RETRY_S,
    CachedPartition,
    MetadataCache,
)
from minibroker.broker.cluster.topic_auto_creation import TopicAutoCreator
from minibroker.protocol.errors import (
    InvalidReplicationFactorError,
    InvalidTopicError,
    LeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition
from tests.unit.broker.cluster.test_metadata_cache import state, update


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _error(cache: MetadataCache, name: str) -> int:
    code: int = cache.metadata_response([name])["topics"][0]["error_code"]
    return code


def test_a_topic_being_created_is_leader_not_available_until_its_metadata_arrives() -> None:
    cache = MetadataCache(1)
    assert cache.start_auto_creation(["t", "t"]) == ["t"]
    assert _error(cache, "t") == LeaderNotAvailableError.code
    cache.finish_auto_creation("t", 0)
    assert _error(cache, "t") == LeaderNotAvailableError.code
    cache.update(update([state(0, 1, [1], [1])], [1]))
    assert _error(cache, "t") == 0


def test_creation_is_asked_once_while_under_way_and_never_for_known_or_invalid_names() -> None:
    cache = MetadataCache(1)
    cache.update(update([state(0, 1, [1], [1])], [1]))
    assert cache.start_auto_creation(["t", "bad/name", "new"]) == ["new"]
    assert cache.start_auto_creation(["new"]) == []
    assert _error(cache, "bad/name") == InvalidTopicError.code


def test_a_failed_creation_is_answered_then_tried_again_after_a_while() -> None:
    clock = FakeClock()
    cache = MetadataCache(1, clock=clock)
    cache.start_auto_creation(["t"])
    cache.finish_auto_creation("t", InvalidReplicationFactorError.code)
    assert cache.start_auto_creation(["t"]) == []
    assert _error(cache, "t") == InvalidReplicationFactorError.code
    clock.now += AUTO_CREATE_RETRY_S
    assert cache.start_auto_creation(["t"]) == ["t"]
    assert _error(cache, "t") == LeaderNotAvailableError.code


async def test_the_creator_sends_create_topics_with_broker_defaults() -> None:
    cache = MetadataCache(1)
    creator = TopicAutoCreator(cache)
    creator.request(["before-run"])  # not running: a standalone broker creates nothing
    assert _error(cache, "before-run") == UnknownTopicOrPartitionError.code
    asked: list[dict[str, Any]] = []
    answered = trio.Event()

    async def create_topics(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(body)
        answered.set()
        return {
            "topics": [
                {"name": "made", "error_code": 0},
                {"name": "raced", "error_code": TopicAlreadyExistsError.code},
            ]
        }

    async with trio.open_nursery() as nursery:
        await nursery.start(creator.run, create_topics)
        creator.request(["made", "raced"])
        await answered.wait()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    [body] = asked
    assert [(t["name"], t["num_partitions"], t["replication_factor"]) for t in body["topics"]] == [
        ("made", -1, -1),
        ("raced", -1, -1),
    ]
    assert body["timeout_ms"] == 0
    assert _error(cache, "made") == LeaderNotAvailableError.code
    assert _error(cache, "raced") == LeaderNotAvailableError.code
    cache.put(
        TopicPartition("made", 0),
        CachedPartition(leader=1, leader_epoch=0, isr=(1,), replicas=(1,)),
    )
    assert _error(cache, "made") == 0


async def test_a_failed_create_topics_call_is_answered_with_its_error() -> None:
    cache = MetadataCache(1)
    creator = TopicAutoCreator(cache)

    async def create_topics(body: dict[str, Any]) -> dict[str, Any]:
        raise InvalidReplicationFactorError("3 > 1 live brokers")

    async with trio.open_nursery() as nursery:
        await nursery.start(creator.run, create_topics)
        creator.request(["t"])
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert _error(cache, "t") == InvalidReplicationFactorError.code
