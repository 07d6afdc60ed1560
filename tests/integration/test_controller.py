"""The controller with a real ZooKeeper and real in-process brokers (issue 4)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.broker import Broker
from controller.context import TopicPartition
from controller.zk_client import ZkClient
from controller.zk_data import KafkaZkClient
from protocol.api import ApiKey
from storage.names import TopicPartition as BrokerTopicPartition
from tests.support.broker import WireClient, broker_config

pytestmark = pytest.mark.timeout(90)

POLL_S = 0.02
"""Interval of wait_until: these conditions span processes' state with no event to
wait on (metadata caches, ZooKeeper znodes)."""
WAIT_S = 30.0


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    with trio.move_on_after(timeout):
        while not condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, nursery: trio.Nursery, root: Path, zk_connect: str, props: dict[str, Any]):
        self.nursery = nursery
        self.root = root
        self.zk_connect = zk_connect
        self.props = props
        self.brokers: dict[int, Broker] = {}
        self.scopes: dict[int, trio.CancelScope] = {}

    async def start(self, broker_id: int) -> Broker:
        config = broker_config(
            self.root / f"broker-{broker_id}",
            broker_id=broker_id,
            zookeeper_connect=self.zk_connect,
            zookeeper_session_timeout_ms=4000,
            **self.props,
        )
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await Broker(config).run(task_status=task_status)

        broker: Broker = await self.nursery.start(run)
        self.brokers[broker_id] = broker
        self.scopes[broker_id] = scope
        return broker

    def stop(self, broker_id: int) -> None:
        self.scopes.pop(broker_id).cancel()
        del self.brokers[broker_id]

    def controllers(self) -> list[int]:
        return [b for b, broker in self.brokers.items() if _member(broker).controller.is_active]

    async def request(
        self, api_key: ApiKey, body: dict[str, Any], broker_id: int | None = None
    ) -> Any:
        broker = self.brokers[broker_id if broker_id is not None else min(self.brokers)]
        async with await WireClient.connect(broker.port) as client:
            return await client.request(api_key, body)


def _member(broker: Broker) -> Any:
    return broker.cluster_member  # type: ignore[attr-defined]


@asynccontextmanager
async def cluster(
    root: Path, zk_connect: str, size: int = 3, **props: Any
) -> AsyncIterator[Cluster]:
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, root, zk_connect, props)
        for broker_id in range(1, size + 1):
            await c.start(broker_id)
        await wait_until(lambda: len(c.controllers()) == 1, "a controller")
        try:
            yield c
        finally:
            nursery.cancel_scope.cancel()


def create_topic_body(name: str, partitions: int, rf: int) -> dict[str, Any]:
    return {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf}],
        "timeout_ms": 10_000,
    }


async def test_three_brokers_elect_one_controller_and_agree_with_zookeeper_on_a_new_topic(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        assert len(c.controllers()) == 1
        response = await c.request(ApiKey.CREATE_TOPICS, create_topic_body("orders", 6, 3))
        assert response["topics"][0]["error_code"] == 0
        data = KafkaZkClient(zk_client)
        assignment = await data.get_assignment("orders")
        assert assignment is not None and len(assignment.partitions) == 6
        states = await data.read_partition_states([TopicPartition("orders", p) for p in range(6)])
        leaders = [states[TopicPartition("orders", p)].leader for p in range(6)]
        assert sorted(leaders) == [1, 1, 2, 2, 3, 3]

        def agrees() -> bool:
            for broker in c.brokers.values():
                for p in range(6):
                    info = broker.metadata_cache.partition(BrokerTopicPartition("orders", p))
                    state = states[TopicPartition("orders", p)]
                    if info is None or (info.leader, info.isr, info.replicas) != (
                        state.leader,
                        state.isr,
                        assignment.partitions[p],
                    ):
                        return False
            return True

        await wait_until(agrees, "every broker's metadata to match ZooKeeper")


async def test_bad_create_topics_requests_get_kafka_error_codes(
    tmp_path: Path, zk_connect: str
) -> None:
    async with cluster(tmp_path, zk_connect, size=2) as c:
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("exists", 1, 1))
        cases = [("bad/name", 1, 1, 17), ("x", 1, 3, 38), ("y", 0, 1, 37), ("exists", 1, 1, 36)]
        for name, partitions, rf, code in cases:
            response = await c.request(
                ApiKey.CREATE_TOPICS, create_topic_body(name, partitions, rf)
            )
            assert response["topics"][0]["error_code"] == code, name
