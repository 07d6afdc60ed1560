"""A failed log dir moves leadership, not the broker, with a real ZooKeeper and
three real in-process brokers with two log dirs each: the broker takes the dir offline
and writes a log dir event notification; the controller resends LeaderAndIsr, reads
KAFKA_STORAGE_ERROR for the replica in that dir and elects another leader from the ISR,
while the broker keeps leading its partition in the other dir."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import ReplicaNotAvailableError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.topic_partition import TopicPartition as BrokerTopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.integration.test_controller import cluster, wait_until, wait_until_async

pytestmark = pytest.mark.timeout(120)


def assigned_to(topic: str, replicas: list[int]) -> dict[str, object]:
    """CreateTopics for one partition with the given AR (AR[0] becomes the leader)."""
    assignment = [{"partition_index": 0, "broker_ids": replicas}]
    return {"topics": [{"name": topic, "assignments": assignment}], "timeout_ms": 10_000}


async def test_a_failed_log_dir_moves_its_leaderships_and_the_broker_keeps_serving_the_other(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect, log_dirs=2) as c:
        (controller_id,) = c.controllers()
        x = next(b for b in sorted(c.brokers) if b != controller_id)
        y, z = sorted(b for b in c.brokers if b != x)
        failing, healthy = c.log_dirs_of(x)
        bootstrap = f"127.0.0.1:{c.brokers[x].port}"
        data = KafkaZkClient(zk_client)
        lost, kept = TopicPartition("lost", 0), TopicPartition("kept", 0)

        async with Admin(bootstrap) as admin:
            # Broker x is to keep "lost" in the dir that fails and "kept" in the other.
            async def placed() -> bool:
                try:
                    answers = await admin.alter_replica_log_dirs(
                        {("lost", 0, x): str(failing), ("kept", 0, x): str(healthy)}
                    )
                except Exception:  # x's metadata does not list every broker yet
                    return False
                return all(isinstance(e, ReplicaNotAvailableError) for e in answers.values())

            await wait_until_async(placed, "the preferred dirs on broker x")
        for topic in ("lost", "kept"):
            response = await c.request(ApiKey.CREATE_TOPICS, assigned_to(topic, [x, y, z]))
            assert response["topics"][0]["error_code"] == 0
        before = await data.read_partition_states([lost, kept])
        assert before[lost].leader == x and before[kept].leader == x
        await wait_until(lambda: (failing / "lost-0").is_dir(), "lost-0 in the failing dir")
        await wait_until(lambda: (healthy / "kept-0").is_dir(), "kept-0 in the healthy dir")
        async with Producer(bootstrap, acks="all") as producer:
            for topic in ("lost", "kept"):
                assert (await producer.send(topic, b"before", partition=0)).offset == 0

        shutil.rmtree(failing)  # the disk is gone

        async def lost_has_a_new_leader() -> bool:
            state = (await data.read_partition_states([lost]))[lost]
            return state.leader not in (x, -1)

        await wait_until_async(lost_has_a_new_leader, "a new leader for lost-0")
        after = await data.read_partition_states([lost, kept])
        assert after[lost].leader in (y, z) and x not in after[lost].isr
        assert after[lost].leader_epoch > before[lost].leader_epoch
        # The broker is up, still registered and still leading its partition in the other dir.
        assert x in await data.get_live_brokers()
        assert after[kept].leader == x and after[kept].leader_epoch == before[kept].leader_epoch
        assert not c.scopes[x].cancel_called
        # The controller consumed the notification and tells everyone the replica is offline.
        assert await data.get_log_dir_event_notifications() == []
        new_leader = c.brokers[after[lost].leader]

        def offline_replica_known() -> bool:
            info = new_leader.metadata_cache.partition(BrokerTopicPartition("lost", 0))
            return info is not None and x in info.offline_replicas

        await wait_until(offline_replica_known, "x's replica of lost-0 listed offline")

        async with Producer(bootstrap, acks="all") as producer:
            assert (await producer.send("lost", b"after", partition=0)).offset == 1
            assert (await producer.send("kept", b"after", partition=0)).offset == 1
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("lost", 0), ("kept", 0)])
            seen: dict[tuple[str, int], bytes | None] = {}
            with trio.fail_after(30):
                while len(seen) < 4:
                    for record in await consumer.poll(1000):
                        seen[(record.topic, record.offset)] = record.value
        assert seen == {
            ("lost", 0): b"before",
            ("lost", 1): b"after",
            ("kept", 0): b"before",
            ("kept", 1): b"after",
        }
