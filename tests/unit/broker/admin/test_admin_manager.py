"""CreateTopics and DeleteTopics (broker/admin/admin_manager.py) as request body -> response
body."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from minibroker.broker.admin.admin_manager import AdminManager
from minibroker.protocol.errors import KafkaError, TopicAlreadyExistsError
from minibroker.zk.values import BrokerInfo, EndPoint


def live_broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),))


@dataclass
class AdminZk:
    live: dict[int, BrokerInfo] = field(
        default_factory=lambda: {b: live_broker(b) for b in (1, 2, 3)}
    )
    topics: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    marked: set[str] = field(default_factory=set)
    deleted: trio.Event = field(default_factory=trio.Event)
    """Set by a test when "the controller" has deleted every marked topic."""

    async def get_live_brokers(self, *, watch: bool = False) -> dict[int, BrokerInfo]:
        return self.live

    async def get_topics(self, *, watch: bool = False) -> set[str]:
        return set(self.topics)

    async def create_topics(
        self, topics: Mapping[str, tuple[Mapping[int, Sequence[int]], Mapping[str, str]]]
    ) -> dict[str, KafkaError | None]:
        outcome: dict[str, KafkaError | None] = {}
        for topic, (partitions, config) in topics.items():
            if topic in self.topics:
                outcome[topic] = TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
                continue
            self.topics[topic] = {p: list(r) for p, r in partitions.items()}
            self.configs[topic] = dict(config)
            outcome[topic] = None
        return outcome

    async def mark_topic_for_deletion(self, topic: str) -> bool:
        self.marked.add(topic)
        return True

    async def wait_for_topics_deleted(self, topics: Any) -> None:
        await self.deleted.wait()

    def finish_deletions(self) -> None:
        for topic in self.marked:
            self.topics.pop(topic, None)
        self.deleted.set()


def create(name: str, partitions: int = -1, rf: int = -1, **extra: Any) -> dict[str, Any]:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": rf}
    topic.setdefault("assignments", [])
    topic.setdefault("configs", [])
    topic |= extra
    return {"topics": [topic], "timeout_ms": 0, "validate_only": False}


async def test_create_topics_writes_kafkas_assignment_with_defaults() -> None:
    zk = AdminZk()
    admin = AdminManager(zk, num_partitions=3, default_replication_factor=2, rng=random.Random(1))
    body = create("t", configs=[{"name": "retention.ms", "value": "100"}])
    (result,) = (await admin.create_topics(body))["topics"]
    assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (
        0,
        3,
        2,
    )
    assert sorted(zk.topics["t"]) == [0, 1, 2]
    assert sorted(r[0] for r in zk.topics["t"].values()) == [1, 2, 3]
    assert zk.configs["t"] == {"retention.ms": "100"}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (create("a b", 1, 1), 17),
        (create("old", 1, 1), 36),
        (create("t", 0, 1), 37),
        (create("t", 1, 4), 38),
        (create("t", assignments=[{"partition_index": 0, "broker_ids": [1, 1]}]), 39),
        (create("t", assignments=[{"partition_index": 1, "broker_ids": [1]}]), 39),
        (create("t", assignments=[{"partition_index": 0, "broker_ids": [9]}]), 39),
        (create("t", 2, assignments=[{"partition_index": 0, "broker_ids": [1]}]), 42),
    ],
)
async def test_bad_create_topics_input_gets_the_kafka_error_code(
    body: dict[str, Any], code: int
) -> None:
    zk = AdminZk(topics={"old": {0: [1]}})
    (result,) = (await AdminManager(zk).create_topics(body))["topics"]
    assert result["error_code"] == code
    assert set(zk.topics) == {"old"}


async def test_explicit_assignment_and_validate_only() -> None:
    zk = AdminZk()
    admin = AdminManager(zk)
    body = create("t", assignments=[{"partition_index": 0, "broker_ids": [3, 1]}])
    body["validate_only"] = True
    assert (await admin.create_topics(body))["topics"][0]["error_code"] == 0
    assert zk.topics == {}
    body["validate_only"] = False
    await admin.create_topics(body)
    assert zk.topics == {"t": {0: [3, 1]}}


async def test_create_topics_waits_for_the_new_topic_in_local_metadata() -> None:
    ready = trio.Event()
    waited: list[str] = []

    async def topics_ready(topics: Any) -> None:
        waited.extend(topics)
        await ready.wait()

    admin = AdminManager(AdminZk(), topics_ready=topics_ready)
    body = create("t", 1, 1)
    body["timeout_ms"] = 10_000
    async with trio.open_nursery() as nursery:
        nursery.start_soon(admin.create_topics, body)
        await trio.testing.wait_all_tasks_blocked()
        assert waited == ["t"]
        ready.set()


async def test_delete_topics_marks_existing_topics_only() -> None:
    zk = AdminZk(topics={"t": {0: [1]}})
    response = await AdminManager(zk).delete_topics({"topic_names": ["t", "nope"], "timeout_ms": 0})
    assert [r["error_code"] for r in response["topics"]] == [0, 3]
    assert zk.marked == {"t"} and "t" in zk.topics  # timeout 0: answered once marked
    disabled = AdminManager(zk, delete_topic_enable=False)
    response = await disabled.delete_topics({"topic_names": ["t"], "timeout_ms": 0})
    assert response["topics"][0]["error_code"] == 73


async def test_delete_topics_answers_once_the_controller_has_deleted_the_topic() -> None:
    zk = AdminZk(topics={"t": {0: [1]}})
    admin = AdminManager(zk)
    answers: list[dict[str, Any]] = []

    async def delete() -> None:
        answers.append(await admin.delete_topics({"topic_names": ["t"], "timeout_ms": 10_000}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete)
        await trio.testing.wait_all_tasks_blocked()
        assert zk.marked == {"t"} and answers == []
        zk.finish_deletions()
    assert answers == [
        {"topics": [{"name": "t", "topic_id": bytes(16), "error_code": 0, "error_message": None}]}
    ]


async def test_delete_topics_times_out_while_the_deletion_cannot_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    zk = AdminZk(topics={"t": {0: [1]}, "u": {0: [2]}})
    admin = AdminManager(zk)
    response = await admin.delete_topics({"topic_names": ["t", "u"], "timeout_ms": 30_000})
    assert [(r["name"], r["error_code"]) for r in response["topics"]] == [("t", 7), ("u", 7)]
    assert "not deleted within 30000 ms" in response["topics"][0]["error_message"]
    assert zk.marked == {"t", "u"}  # still marked: the controller goes on when it can
