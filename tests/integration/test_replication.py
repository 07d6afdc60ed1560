"""Replication across broker processes with a real ZooKeeper: ISR and acks=all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    UnknownLeaderEpochError,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    fetched,
    partition_state,
    produce_body,
    running_broker,
)
from tests.support.cluster import ProcessCluster

pytestmark = pytest.mark.timeout(120)


@asynccontextmanager
async def process_cluster(
    tmp_path: Path, zk_connect: str, **properties: Any
) -> AsyncIterator[ProcessCluster]:
    async with ProcessCluster(tmp_path, zk_connect, size=3, properties=properties) as cluster:
        yield cluster


async def isr_of(data: KafkaZkClient, topic: str) -> tuple[int, tuple[int, ...]]:
    tp = TopicPartition(topic, 0)
    state = (await data.read_partition_states([tp]))[tp]
    return state.leader, tuple(sorted(state.isr))


async def leads(cluster: ProcessCluster, broker_id: int, topic: str) -> bool:
    """The broker serves the partition as its leader (it applied the LeaderAndIsr)."""
    body = {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    response = await cluster.request(broker_id, ApiKey.LIST_OFFSETS, body)
    return bool(response["topics"][0]["partitions"][0]["error_code"] == 0)


async def produce(cluster: ProcessCluster, broker_id: int, topic: str, value: bytes) -> Any:
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": topic, "partitions": [{"index": 0, "records": batch(value)}]}],
    }
    response = await cluster.request(broker_id, ApiKey.PRODUCE, body, timeout=15)
    return response["topics"][0]["partitions"][0]


async def test_isr_shrinks_when_a_follower_is_paused_and_expands_after_it_resumes(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    data = KafkaZkClient(zk_client)
    # The follower falls out after 1.5 s of silence - before its 4 s ZooKeeper session
    # would expire, so it is the leader's lag check that removes it, not the controller.
    async with process_cluster(
        tmp_path, zk_connect, **{"replica.lag.time.max.ms": 1500, "min.insync.replicas": 2}
    ) as cluster:
        await cluster.create_topic("isr", 1, 3)

        async def full() -> bool:
            return len((await isr_of(data, "isr"))[1]) == 3

        await cluster.wait_until(full, "a full ISR")
        leader, isr = await isr_of(data, "isr")
        await cluster.wait_until(lambda: leads(cluster, leader, "isr"), "the leader to serve")
        follower = next(b for b in isr if b != leader)
        assert (await produce(cluster, leader, "isr", b"before"))["error_code"] == 0

        cluster.pause(follower)

        async def shrunk() -> bool:
            return follower not in (await isr_of(data, "isr"))[1]

        await cluster.wait_until(shrunk, "the paused follower to leave the ISR", timeout=20)
        answer = await produce(cluster, leader, "isr", b"while-paused")
        assert answer["error_code"] == 0  # two in sync still meet min.insync.replicas

        cluster.resume(follower)

        async def expanded() -> bool:
            return follower in (await isr_of(data, "isr"))[1]

        await cluster.wait_until(expanded, "the resumed follower to rejoin the ISR", timeout=40)


async def test_acks_all_with_min_insync_2_survives_one_follower_down_and_refuses_two(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    data = KafkaZkClient(zk_client)
    async with process_cluster(tmp_path, zk_connect) as cluster:
        # A topic override: the brokers' own default stays 1.
        await cluster.create_topic("acks", 1, 3, {"min.insync.replicas": "2"})

        async def full() -> bool:
            return len((await isr_of(data, "acks"))[1]) == 3

        await cluster.wait_until(full, "a full ISR")
        leader, isr = await isr_of(data, "acks")
        await cluster.wait_until(lambda: leads(cluster, leader, "acks"), "the leader to serve")
        first, second = (b for b in isr if b != leader)
        assert (await produce(cluster, leader, "acks", b"all-up"))["error_code"] == 0

        cluster.kill(first)

        async def without(*gone: int) -> bool:
            current_leader, current = await isr_of(data, "acks")
            return current_leader == leader and not set(gone) & set(current)

        await cluster.wait_until(lambda: without(first), "the dead follower to leave the ISR")
        answer = await produce(cluster, leader, "acks", b"one-down")
        assert (answer["error_code"], answer["base_offset"]) == (0, 1)

        cluster.kill(second)
        await cluster.wait_until(lambda: without(first, second), "an ISR of the leader alone")
        answer = await produce(cluster, leader, "acks", b"two-down")
        assert answer["error_code"] == NotEnoughReplicasError.code


def epoch_query(topic: str, epoch: int, current: int) -> dict[str, Any]:
    partition = {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
    return {"replica_id": 2, "topics": [{"topic": topic, "partitions": [partition]}]}


async def test_offset_for_leader_epoch_answers_epoch_ends_and_fences_other_epochs(
    tmp_path: Path,
) -> None:
    async with running_broker(broker_config(tmp_path / "logs")) as broker:
        controller = FakeController(broker)
        await controller.lead("t", leader_epoch=0)
        async with await WireClient.connect(broker.port) as client:
            await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a", b"b")))
            state = partition_state("t", 0, leader=1, leader_epoch=2, replicas=[1])
            await controller.leader_and_isr([state])
            await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"c")))

            async def ask(epoch: int, current: int = 2) -> tuple[int, int, int]:
                response = await client.request(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH, epoch_query("t", epoch, current)
                )
                answer = response["topics"][0]["partitions"][0]
                return answer["error_code"], answer["leader_epoch"], answer["end_offset"]

            assert await ask(0) == (0, 0, 2)  # epoch 0 ends where epoch 2 starts
            assert await ask(1) == (0, 0, 2)  # KIP-279: the largest epoch not above 1
            assert await ask(2) == (0, 2, 3)  # the current epoch ends at the LEO
            assert await ask(2, current=1) == (FencedLeaderEpochError.code, -1, -1)
            assert await ask(2, current=3) == (UnknownLeaderEpochError.code, -1, -1)
            stale = fetch_body("t", {0: 0}, leader_epoch=1)
            response = await client.request(ApiKey.FETCH, {**stale, "replica_id": 2})
            assert fetched(response)["error_code"] == FencedLeaderEpochError.code


async def test_unclean_election_is_a_per_topic_choice_when_no_isr_replica_survives(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    data = KafkaZkClient(zk_client)
    async with process_cluster(tmp_path, zk_connect) as cluster:
        pinned = {0: [1, 2]}
        await cluster.create_topic("clean", 1, 2, assignment=pinned)
        await cluster.create_topic(
            "dirty", 1, 2, {"unclean.leader.election.enable": "true"}, assignment=pinned
        )

        async def both(leader: int, isr: tuple[int, ...]) -> bool:
            return all([await isr_of(data, t) == (leader, isr) for t in ("clean", "dirty")])

        await cluster.wait_until(lambda: both(1, (1, 2)), "broker 1 leading both, full ISRs")
        cluster.kill(2)
        await cluster.wait_until(lambda: both(1, (1,)), "the dead follower out of both ISRs")
        cluster.kill(1)  # the only in-sync replica dies
        await cluster.start(2)

        async def dirty_led_by_2() -> bool:
            return (await isr_of(data, "dirty"))[0] == 2

        await cluster.wait_until(dirty_led_by_2, "an unclean election for the opted-in topic")

        async def clean_known() -> bool:  # the restarted broker learns it from the controller
            return bool((await cluster.metadata("clean"))["partitions"])

        await cluster.wait_until(clean_known, "the restarted broker's metadata for the clean topic")
        metadata = await cluster.metadata("clean")
        assert metadata["partitions"][0]["leader_id"] == -1  # the other waits for broker 1
