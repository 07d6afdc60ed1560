"""The controller-only APIs (ElectLeaders, reassignment, controlled shutdown:
controller/apis.py) as request body -> response body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from minibroker.controller.apis import ControllerApis
from minibroker.controller.controller import ControllerConfig, KafkaController
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker, FakeControllerZk, RecordingChannel

T0 = TopicPartition("t", 0)


def idle_controller() -> KafkaController:
    return KafkaController(ControllerConfig(1), FakeControllerZk(), RecordingChannel())


async def test_controller_apis_answer_not_controller_on_other_brokers() -> None:
    admin = ControllerApis(idle_controller())
    elect = {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000}
    assert (await admin.elect_leaders(elect))["error_code"] == 41
    assert (await admin.list_partition_reassignments({"topics": None, "timeout_ms": 1000}))[
        "error_code"
    ] == 41
    shutdown = {"broker_id": 2, "broker_epoch": 0}
    assert (await admin.controlled_shutdown(shutdown, sender=2))["error_code"] == 41


@asynccontextmanager
async def active_admin() -> AsyncIterator[tuple[ControllerApis, FakeControllerZk]]:
    zk = FakeControllerZk()
    zk.brokers = {b: Broker(b) for b in (1, 2, 3, 4)}
    zk.add_topic("t", {0: [1, 2, 3]})
    zk.znodes[T0] = LeaderAndIsr(2, 0, (2, 1, 3), 0, 0)
    controller = KafkaController(ControllerConfig(1), zk, RecordingChannel())
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        await controller.events.wait_idle()
        yield ControllerApis(controller), zk
        nursery.cancel_scope.cancel()


async def test_elect_leaders_runs_a_preferred_election_on_the_controller() -> None:
    async with active_admin() as (admin, zk):
        body = {
            "election_type": 0,
            "topic_partitions": [{"topic": "t", "partitions": [0, 7]}],
            "timeout_ms": 5000,
        }
        response = await admin.elect_leaders(body)
        assert response["error_code"] == 0
        (topic,) = response["replica_election_results"]
        assert [(r["partition_id"], r["error_code"]) for r in topic["partition_result"]] == [
            (0, 0),
            (7, 3),
        ]
        assert zk.znodes[T0].leader == 1
        unknown = {"election_type": 2, "topic_partitions": None, "timeout_ms": 5000}
        assert (await admin.elect_leaders(unknown))["error_code"] == 42


async def test_unclean_elect_leaders_answers_election_not_needed_for_a_live_leader() -> None:
    async with active_admin() as (admin, zk):
        named = {
            "election_type": 1,
            "topic_partitions": [{"topic": "t", "partitions": [0]}],
            "timeout_ms": 5000,
        }
        response = await admin.elect_leaders(named)
        (topic,) = response["replica_election_results"]
        assert [(r["partition_id"], r["error_code"]) for r in topic["partition_result"]] == [
            (0, 84)
        ]
        everything = named | {"topic_partitions": None}
        assert await admin.elect_leaders(everything) == {
            "error_code": 0,
            "replica_election_results": [],
        }
        assert zk.znodes[T0].leader == 2


async def test_reassignment_apis_and_controlled_shutdown_on_the_controller() -> None:
    async with active_admin() as (admin, _):
        alter = {
            "timeout_ms": 5000,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [2, 4]}]}],
        }
        response = await admin.alter_partition_reassignments(alter)
        assert response["topics"][0]["partitions"][0]["error_code"] == 0
        listing = await admin.list_partition_reassignments({"topics": None, "timeout_ms": 5000})
        assert listing["topics"][0]["partitions"][0]["removing_replicas"] == [1, 3]
        shutdown = {"broker_id": 2, "broker_epoch": 0}
        for sender in (-1, 3):  # only broker 2's own proven connection may ask
            refused = await admin.controlled_shutdown(shutdown, sender=sender)
            assert refused == {"error_code": 31, "remaining_partitions": []}
        response = await admin.controlled_shutdown(shutdown, sender=2)
        assert response == {"error_code": 0, "remaining_partitions": []}
