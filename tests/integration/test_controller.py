"""The controller with a real ZooKeeper and real in-process brokers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.broker.cluster_member import ClusterMembership
from minibroker.broker.replication.hosted_replicas import FetcherHook
from minibroker.broker.replication.partition import Partition
from minibroker.controller.controller import KafkaController
from minibroker.node.node import Node
from minibroker.protocol.api import ApiKey
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.topic_partition import TopicPartition as BrokerTopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.support.broker import WireClient, batch, broker_config, produce_body, produced

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
    def __init__(
        self,
        nursery: trio.Nursery,
        root: Path,
        zk_connect: str,
        props: dict[str, Any],
        log_dirs: int = 1,
    ):
        self.nursery = nursery
        self.root = root
        self.zk_connect = zk_connect
        self.props = props
        self.log_dirs = log_dirs
        self.brokers: dict[int, Broker] = {}
        self.nodes: dict[int, Node] = {}
        self.scopes: dict[int, trio.CancelScope] = {}

    def log_dirs_of(self, broker_id: int) -> list[Path]:
        home = self.root / f"broker-{broker_id}"
        return [home] if self.log_dirs == 1 else [home / f"logs-{i}" for i in range(self.log_dirs)]

    async def start(self, broker_id: int) -> Broker:
        dirs = self.log_dirs_of(broker_id)
        config = broker_config(
            dirs[0],
            broker_id=broker_id,
            zookeeper_connect=self.zk_connect,
            zookeeper_session_timeout_ms=4000,
            **({"log_dirs": ",".join(map(str, dirs))} if len(dirs) > 1 else {}),
            **self.props,
        )
        scope = trio.CancelScope()
        node = Node(config)
        self.nodes[broker_id] = node

        async def run(task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await node.run(task_status=task_status)

        broker: Broker = await self.nursery.start(run)
        self.brokers[broker_id] = broker
        self.scopes[broker_id] = scope
        return broker

    def stop(self, broker_id: int) -> None:
        self.scopes.pop(broker_id).cancel()
        del self.brokers[broker_id]

    def controllers(self) -> list[int]:
        return [b for b in self.brokers if _controller(self.nodes[b]).is_active]

    async def request(
        self, api_key: ApiKey, body: dict[str, Any], broker_id: int | None = None
    ) -> Any:
        broker = self.brokers[broker_id if broker_id is not None else min(self.brokers)]
        async with await WireClient.connect(broker.port) as client:
            return await client.request(api_key, body)


def _controller(node: Node) -> KafkaController:
    assert node.controller is not None, "the broker has not joined the cluster"
    return node.controller


def _membership(broker: Broker) -> ClusterMembership:
    assert broker.membership is not None, "a standalone broker"
    return broker.membership


@asynccontextmanager
async def cluster(
    root: Path, zk_connect: str, size: int = 3, *, log_dirs: int = 1, **props: Any
) -> AsyncIterator[Cluster]:
    """``size`` in-process brokers with ``log_dirs`` log dirs each; waits for a controller."""
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, root, zk_connect, props, log_dirs)
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
        active = [
            b.metrics.registry.get_sample_value(
                "kafka_controller_kafkacontroller_activecontrollercount"
            )
            or 0.0
            for b in c.brokers.values()
        ]
        assert sorted(active) == [0, 0, 1]
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


async def partition_states(zk_client: ZkClient, topic: str, partitions: int) -> dict[int, Any]:
    states = await KafkaZkClient(zk_client).read_partition_states(
        [TopicPartition(topic, p) for p in range(partitions)]
    )
    return {tp.partition: state for tp, state in states.items()}


async def test_killing_the_controller_elects_another_with_a_higher_epoch_that_fences_the_old(
    tmp_path: Path, zk_connect: str
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        (old,) = c.controllers()
        old_epoch = _controller(c.nodes[old]).context.epoch
        c.stop(old)
        await wait_until(lambda: len(c.controllers()) == 1, "a new controller")
        (new,) = c.controllers()
        assert new != old
        assert _controller(c.nodes[new]).context.epoch > old_epoch
        await wait_until(
            lambda: all(b.metadata_cache.controller_id == new for b in c.brokers.values()),
            "every broker to hear from the new controller",
        )
        stale = {
            "controller_id": old,
            "controller_epoch": old_epoch,
            "partition_states": [],
            "live_brokers": [],
        }
        for broker_id in c.brokers:
            response = await c.request(ApiKey.UPDATE_METADATA, stale, broker_id)
            # Its connection proves nothing (the old controller's registration is gone):
            # the fence refuses before it even looks at the epoch.
            assert response["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED


async def test_a_dead_leaders_partitions_get_leaders_from_their_isr(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("t", 6, 3))
        before = await partition_states(zk_client, "t", 6)
        victim = next(b for b in c.brokers if b not in c.controllers())
        led = [p for p, s in before.items() if s.leader == victim]
        assert led
        c.stop(victim)

        async def moved() -> bool:
            now = await partition_states(zk_client, "t", 6)
            return all(now[p].leader not in (victim, -1) for p in led)

        await wait_until_async(moved, "new leaders for the dead broker's partitions")
        after = await partition_states(zk_client, "t", 6)
        for p in led:
            assert after[p].leader in before[p].isr and after[p].leader != victim
            assert victim not in after[p].isr
            assert after[p].leader_epoch > before[p].leader_epoch


@pytest.mark.parametrize("unclean", [False, True])
async def test_without_a_live_isr_member_a_partition_stays_offline_unless_unclean_is_enabled(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, unclean: bool
) -> None:
    async with cluster(
        tmp_path, zk_connect, unclean_leader_election_enable=str(unclean).lower()
    ) as c:
        controller_id = c.controllers()[0]
        others = sorted(b for b in c.brokers if b != controller_id)
        assignment = [{"partition_index": 0, "broker_ids": others}]
        body = {"topics": [{"name": "u", "assignments": assignment}], "timeout_ms": 10_000}
        assert (await c.request(ApiKey.CREATE_TOPICS, body))["topics"][0]["error_code"] == 0
        data = KafkaZkClient(zk_client)
        tp = TopicPartition("u", 0)
        state = (await data.read_partition_states([tp]))[tp]
        leader, follower = others
        # The leader shrank the ISR to itself (as it would after a lagging follower).
        shrunk = state.new_leader(leader, [leader], state.controller_epoch)
        assert tp in (await data.update_partition_states({tp: shrunk})).written
        c.stop(leader)

        async def current_leader() -> int:
            return (await data.read_partition_states([tp]))[tp].leader

        with trio.fail_after(WAIT_S):
            while await current_leader() == leader:
                await trio.sleep(POLL_S)
        if unclean:
            assert await current_leader() == follower
        else:
            assert await current_leader() == -1
            controller = _controller(c.nodes[controller_id])
            assert tp in controller.context.offline_partitions()
            # Allowing it for this topic afterwards elects the surviving replica.
            await data.set_topic_config("u", {"unclean.leader.election.enable": "true"})

            async def follower_leads() -> bool:
                return await current_leader() == follower

            await wait_until_async(follower_leads, "the unclean election after the change")


async def test_controlled_shutdown_moves_every_leadership_off_the_broker_first(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("t", 6, 3))
        leaving = next(b for b in c.brokers if b not in c.controllers())
        assert any(
            s.leader == leaving for s in (await partition_states(zk_client, "t", 6)).values()
        )
        assert await _membership(c.brokers[leaving]).controlled_shutdown()
        after = await partition_states(zk_client, "t", 6)
        assert all(s.leader != leaving for s in after.values())
        c.stop(leaving)


async def test_the_last_live_broker_stops_retrying_controlled_shutdown_at_once(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    # A backoff no test could wait for: the shutdown must not retry at all.
    backoff = {"controlled_shutdown_retry_backoff_ms": 600_000}
    async with cluster(tmp_path, zk_connect, size=2, **backoff) as c:
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("t", 2, 2))
        last = min(c.brokers)
        c.stop(max(c.brokers))
        data = KafkaZkClient(zk_client)

        async def alone() -> bool:
            return set(await data.get_live_brokers()) == {last}

        await wait_until_async(alone, "the other broker gone from ZooKeeper")
        with trio.fail_after(60):
            assert not await _membership(c.brokers[last]).controlled_shutdown()


async def test_deleting_a_topic_removes_its_directories_from_every_broker(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("gone", 3, 3))
        await c.request(ApiKey.CREATE_TOPICS, create_topic_body("kept", 1, 3))

        def dirs(prefix: str) -> list[Path]:
            return [
                d
                for b in c.brokers.values()
                for log_dir in b.config.log_dirs
                for d in Path(log_dir).iterdir()
                if d.name.startswith(prefix)
            ]

        await wait_until(lambda: len(dirs("gone-")) == 9, "the topic's 9 replica directories")
        response = await c.request(ApiKey.DELETE_TOPICS, {"topic_names": ["gone"]})
        assert response["topics"][0]["error_code"] == 0
        await wait_until(lambda: not dirs("gone-"), "the directories to disappear")
        data = KafkaZkClient(zk_client)
        await wait_until_async(lambda: _topic_gone(data, "gone"), "the topic's znodes to go")
        assert len(dirs("kept-")) == 3


async def _topic_gone(data: KafkaZkClient, topic: str) -> bool:
    return topic not in await data.get_topics() and topic not in await data.get_topic_deletions()


async def wait_until_async(
    condition: Callable[[], Any], what: str, timeout: float = WAIT_S
) -> None:
    with trio.move_on_after(timeout):
        while not await condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"timed out waiting for {what}")


class HeldFetches:
    """A broker's replica-fetcher hook (``ReplicaManager.fetcher``) that holds back the
    partitions in ``held`` until ``release()``: the test, not the scheduler, decides when
    a new replica starts catching up, so a reassignment's in-progress phase can be looked
    at without racing its completion. Everything else passes straight through."""

    def __init__(self, inner: FetcherHook, held: set[BrokerTopicPartition]) -> None:
        self._inner = inner
        self._held = held
        self._waiting: dict[BrokerTopicPartition, Partition] = {}

    def add_partitions(self, partitions: Sequence[Partition]) -> None:
        for partition in partitions:
            if partition.tp in self._held:
                self._waiting[partition.tp] = partition
        self._inner.add_partitions([p for p in partitions if p.tp not in self._held])

    def remove_partitions(self, tps: Iterable[BrokerTopicPartition]) -> None:
        tps = list(tps)
        for tp in tps:
            self._waiting.pop(tp, None)
        self._inner.remove_partitions(tps)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def release(self) -> None:
        self._held = set()
        waiting, self._waiting = list(self._waiting.values()), {}
        self._inner.add_partitions(waiting)

    def __getattr__(self, name: str) -> Any:  # metrics read the fetcher manager's state
        return getattr(self._inner, name)


async def test_reassignment_from_1_2_to_2_3_follows_the_oar_rar_steps(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        assignment = [{"partition_index": 0, "broker_ids": [1, 2]}]
        body = {"topics": [{"name": "r", "assignments": assignment}], "timeout_ms": 10_000}
        assert (await c.request(ApiKey.CREATE_TOPICS, body))["topics"][0]["error_code"] == 0
        (controller_id,) = c.controllers()
        data = KafkaZkClient(zk_client)
        tp = TopicPartition("r", 0)
        before = (await data.read_partition_states([tp]))[tp]
        for value in (b"a", b"b", b"c"):
            body = produce_body("r", 0, batch(value), acks=-1)  # on every ISR replica
            answer = await c.request(ApiKey.PRODUCE, body, before.leader)
            assert produced(answer)["error_code"] == 0
        # Broker 3 may not fetch r-0 until the test has seen phase one: it is three
        # records, and under load it would catch up before ListPartitionReassignments.
        new_replica = c.brokers[3].parts.replica_manager
        assert new_replica is not None and new_replica.replicas.fetcher is not None
        held = HeldFetches(new_replica.replicas.fetcher, {BrokerTopicPartition("r", 0)})
        new_replica.replicas.fetcher = held
        alter = {
            "topics": [{"name": "r", "partitions": [{"partition_index": 0, "replicas": [2, 3]}]}]
        }
        response = await c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter, controller_id)
        assert response["topics"][0]["partitions"][0]["error_code"] == 0
        # Phase one (done before the controller answers): AR = RAR + (OAR - RAR) in
        # ZooKeeper with the adding/removing lists, a new leader epoch so every replica
        # hears that AR, and the new replica created on 3.
        during = await data.get_assignment("r")
        assert during is not None and during.partitions[0] == (2, 3, 1)
        assert during.adding_replicas == {0: (3,)} and during.removing_replicas == {0: (1,)}
        during_state = (await data.read_partition_states([tp]))[tp]
        assert during_state.leader == before.leader
        assert during_state.leader_epoch > before.leader_epoch
        assert 3 not in during_state.isr
        log_dir = Path(c.brokers[3].config.log_dirs[0])
        await wait_until(lambda: (log_dir / "r-0").is_dir(), "the new replica's directory")
        listing = await c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {}, controller_id)
        assert listing["topics"] == [
            {
                "name": "r",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replicas": [2, 3, 1],
                        "adding_replicas": [3],
                        "removing_replicas": [1],
                    }
                ],
            }
        ]
        # Phase two: once 3 fetched up to the HW the leader adds it to the ISR, and the
        # controller moves leadership into RAR, drops and deletes 1, and writes AR = RAR.
        held.release()

        async def finished() -> bool:
            now = await data.get_assignment("r")
            return now is not None and now.partitions[0] == (2, 3) and not now.adding_replicas

        await wait_until_async(finished, "the reassignment to complete")
        partition = new_replica.replicas.partitions[BrokerTopicPartition("r", 0)]
        # A replica joins the ISR once it reaches the HW it saw, so the last records
        # may still be on their way when the reassignment completes.
        await wait_until(lambda: partition.log.log_end_offset == 3, "the data on broker 3")
        final = (await data.read_partition_states([tp]))[tp]
        assert final.leader == 2 and 1 not in final.isr
        old_dir = Path(c.brokers[1].config.log_dirs[0])
        await wait_until(lambda: not (old_dir / "r-0").exists(), "the old replica's deletion")
        assert await data.get_reassignment() == {}
        listing = await c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {}, controller_id)
        assert listing["topics"] == []


async def test_a_controller_whose_session_expires_resigns_and_another_takes_over(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, zk_session_killer: Any
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        (old,) = c.controllers()
        old_controller = _controller(c.nodes[old])
        old_epoch = old_controller.context.epoch
        await zk_session_killer(_membership(c.brokers[old]).zk.zk)
        await wait_until(
            lambda: len(c.controllers()) == 1 and c.controllers()[0] != old,
            "another broker to become controller",
        )
        (new,) = c.controllers()
        assert _controller(c.nodes[new]).context.epoch > old_epoch
        assert not old_controller.is_active
        data = KafkaZkClient(zk_client)

        async def old_broker_registered_again() -> bool:
            return old in await data.get_live_brokers()

        await wait_until_async(old_broker_registered_again, "the old broker to re-register")
        await wait_until(
            lambda: old_controller.active_controller_id == new,
            "the old broker to follow the new controller",
        )
