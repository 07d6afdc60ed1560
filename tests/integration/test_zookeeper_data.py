"""Kafka's znodes through KafkaZkClient against the real ZooKeeper (one chroot per test)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import trio

from minibroker.protocol.errors import TopicAlreadyExistsError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.broker_registration import BrokerIdInUseError
from minibroker.zk.client import (
    BadVersion,
    StateChange,
    WatchEvent,
    WatchType,
    ZkClient,
    ZkEvent,
    ZkState,
    open_zk_client,
)
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.server import ZooKeeperServer, packets_received
from minibroker.zk.values import (
    BrokerInfo,
    ControllerMovedError,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
)
from minibroker.zk.znodes import OPS_PER_TRANSACTION
from tests.support.zookeeper import ExpireSession

pytestmark = pytest.mark.timeout(30)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),))


async def next_event(
    events: trio.MemoryReceiveChannel[ZkEvent], accept: Callable[[ZkEvent], bool]
) -> ZkEvent:
    with trio.fail_after(10):
        async for event in events:
            if accept(event):
                return event
    raise AssertionError("event channel closed")


@pytest.fixture
async def kzk(zk_client: ZkClient) -> AsyncIterator[KafkaZkClient]:
    client = KafkaZkClient(zk_client, clock=lambda: 1234)
    await client.create_top_level_paths()
    yield client


async def test_watched_reads_work_on_a_cluster_nobody_initialised(zk_client: ZkClient) -> None:
    kzk = KafkaZkClient(zk_client)  # no create_top_level_paths()
    events = zk_client.subscribe()
    assert await kzk.get_live_brokers(watch=True) == {}
    assert await kzk.get_topics(watch=True) == set()
    assert await kzk.get_topic_deletions(watch=True) == set()
    assert await kzk.get_isr_change_notifications(watch=True) == []
    await kzk.register_broker(broker(1))
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/brokers/ids"))


async def test_broker_registration_is_ephemeral_and_watched(
    kzk: KafkaZkClient, zk_connect: str
) -> None:
    events = kzk.zk.subscribe()
    assert await kzk.get_live_brokers(watch=True) == {}
    async with open_zk_client(zk_connect) as session:
        brokers = KafkaZkClient(session)
        epoch = await brokers.register_broker(broker(1))
        assert await brokers.register_broker(broker(1)) == epoch  # same session: fine
        await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/brokers/ids"))
        live = await kzk.get_live_brokers(watch=True)
        assert list(live) == [1]
        assert (live[1].host, live[1].port, live[1].epoch) == ("127.0.0.1", 9001, epoch)
        data, _ = await kzk.zk.get("/brokers/ids/1")
        assert json.loads(data)["endpoints"] == ["PLAINTEXT://127.0.0.1:9001"]
        with pytest.raises(BrokerIdInUseError):
            await kzk.register_broker(broker(1))
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/brokers/ids"))
    assert await kzk.get_live_brokers() == {}


async def test_registration_can_wait_for_a_predecessors_znode_to_vanish(
    kzk: KafkaZkClient, zk_connect: str
) -> None:
    previous = ZkClient(zk_connect)
    await previous.start()
    await KafkaZkClient(previous).register_broker(broker(1))
    with pytest.raises(BrokerIdInUseError):
        await kzk.register_broker(broker(1))  # no wait: refused at once (Kafka)

    waiting = trio.Event()
    epochs: list[int] = []

    async def register() -> None:
        epochs.append(await kzk.register_broker(broker(1), stale_wait=10))

    with _on_log("minibroker.zk", "waiting up to", waiting.set), trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(register)
            await waiting.wait()
            await previous.close()  # the old session ends and takes its znode along
    assert (await kzk.get_live_brokers())[1].epoch == epochs[0]


@contextlib.contextmanager
def _on_log(logger_name: str, text: str, callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` when ``logger_name`` logs a message containing ``text``."""

    class Trigger(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                callback()

    logger = logging.getLogger(logger_name)
    handler = Trigger()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


async def test_exactly_one_of_several_candidates_becomes_controller(
    kzk: KafkaZkClient, zk_connect: str
) -> None:
    winners: list[tuple[int, int]] = []
    losers: list[int] = []
    async with (
        open_zk_client(zk_connect) as c1,
        open_zk_client(zk_connect) as c2,
        open_zk_client(zk_connect) as c3,
        open_zk_client(zk_connect) as c4,
    ):

        async def candidate(broker_id: int, zk: ZkClient) -> None:
            try:
                epoch, _ = await KafkaZkClient(zk).register_controller(broker_id)
                winners.append((broker_id, epoch))
            except ControllerMovedError:
                losers.append(broker_id)

        async with trio.open_nursery() as nursery:
            for broker_id, zk in enumerate((c1, c2, c3, c4), start=1):
                nursery.start_soon(candidate, broker_id, zk)

        assert len(winners) == 1 and len(losers) == 3
        winner, epoch = winners[0]
        assert epoch == 1
        assert await kzk.get_controller_id() == winner
        assert await kzk.get_controller_epoch() == (1, 1)
        assert not await kzk.try_create_controller(99)
    assert await kzk.get_controller_id() is None  # its session ended: /controller gone
    epoch, version = await kzk.register_controller(7)
    assert (epoch, version) == (2, 2)
    data, _ = await kzk.zk.get("/controller")
    assert json.loads(data) == {"version": 1, "brokerid": 7, "timestamp": "1234"}


async def test_controller_epoch_increments_only_from_the_version_read(
    kzk: KafkaZkClient,
) -> None:
    assert await kzk.get_controller_epoch() is None
    assert await kzk.increment_controller_epoch() == (1, 1)  # created at 0, then bumped
    epoch, version = await kzk.increment_controller_epoch()
    assert (epoch, version) == (2, 2)
    await kzk.zk.set("/controller_epoch", b"3", version=version)  # a rival controller
    with pytest.raises(BadVersion):  # our conditional set names the version we read
        await kzk.zk.set("/controller_epoch", str(epoch + 1).encode(), version=version)
    assert await kzk.increment_controller_epoch() == (4, 4)


async def test_watch_on_controller_reports_resignation(kzk: KafkaZkClient) -> None:
    events = kzk.zk.subscribe()
    await kzk.register_controller(1)
    assert await kzk.get_controller_id(watch=True) == 1
    await kzk.resign_controller(2)  # not ours: left alone
    assert await kzk.get_controller_id() == 1
    await kzk.resign_controller(1)
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.DELETED, "/controller"
    )


async def test_partition_state_update_fails_on_stale_zk_version_and_succeeds_after_reread(
    kzk: KafkaZkClient,
) -> None:
    await kzk.create_topic("t", {0: [1, 2], 1: [2, 1]}, {})
    initial = {
        T0: LeaderAndIsr(1, 0, (1, 2), 1, -1),
        T1: LeaderAndIsr(2, 0, (2, 1), 1, -1),
    }
    created = await kzk.create_partition_states(initial)
    assert created.conflicts == set() and created.written[T0].zk_version == 0
    again = await kzk.create_partition_states({T0: initial[T0]})
    assert again.conflicts == {T0}

    # A leader shrinks T0's ISR meanwhile; the controller's copy is now stale.
    shrunk = await kzk.update_partition_states({T0: LeaderAndIsr(1, 0, (1,), 1, 0)})
    assert shrunk.written[T0].zk_version == 1
    stale = created.written[T0].new_leader(2, (2,), controller_epoch=1)
    result = await kzk.update_partition_states({T0: stale, T1: created.written[T1]})
    assert result.conflicts == {T0}
    assert result.written[T1].zk_version == 1

    current = (await kzk.read_partition_states([T0, T1, TopicPartition("t", 9)]))[T0]
    assert current == LeaderAndIsr(1, 0, (1,), 1, 1)
    retried = await kzk.update_partition_states({T0: current.new_leader(2, (2,), 1)})
    assert retried.written[T0] == LeaderAndIsr(2, 1, (2,), 1, 2)
    data, stat = await kzk.zk.get("/brokers/topics/t/partitions/0/state")
    assert stat.version == 2
    assert json.loads(data) == {
        "controller_epoch": 1,
        "leader": 2,
        "version": 1,
        "leader_epoch": 1,
        "isr": [2],
    }


async def test_many_fenced_state_writes_cost_a_few_requests_and_keep_per_partition_outcomes(
    kzk: KafkaZkClient, zookeeper_server: ZooKeeperServer
) -> None:
    # A failover updates thousands of state znodes: one ZooKeeper request each made it
    # take seconds. They go as transactions of many writes, and a write that loses its
    # race still fails alone.
    count = 2 * OPS_PER_TRANSACTION + 50
    await kzk.create_topic("many", {p: [1, 2] for p in range(count)}, {})
    _, fence = await kzk.register_controller(1)
    tps = [TopicPartition("many", p) for p in range(count)]
    created = await kzk.create_partition_states(
        {tp: LeaderAndIsr(1, 0, (1, 2), 1, -1) for tp in tps}, controller_epoch_zk_version=fence
    )
    assert created.conflicts == set() and len(created.written) == count
    racing = tps[OPS_PER_TRANSACTION + 7]  # a leader changes this one's ISR meanwhile
    await kzk.update_partition_states({racing: LeaderAndIsr(1, 0, (1,), 1, 0)})

    before = packets_received("127.0.0.1", zookeeper_server.port)
    elected = {tp: state.new_leader(2, (2,), 1) for tp, state in created.written.items()}
    result = await kzk.update_partition_states(elected, controller_epoch_zk_version=fence)
    requests = packets_received("127.0.0.1", zookeeper_server.port) - before
    assert result.conflicts == {racing}
    assert set(result.written) == set(tps) - {racing}
    # Three transactions, the one holding the conflict again without it, maybe a ping.
    assert requests <= 5
    states = await kzk.read_partition_states(tps)
    assert states[racing].isr == (1,) and states[tps[0]].leader == 2


async def test_two_conflicts_in_one_transaction_each_fail_alone(kzk: KafkaZkClient) -> None:
    await kzk.create_topic("two", {p: [1, 2] for p in range(6)}, {})
    tps = [TopicPartition("two", p) for p in range(6)]
    created = await kzk.create_partition_states(
        {tp: LeaderAndIsr(1, 0, (1, 2), 1, -1) for tp in tps}
    )
    for racing in (tps[1], tps[4]):
        await kzk.update_partition_states({racing: LeaderAndIsr(1, 0, (1,), 1, 0)})
    elected = {tp: state.new_leader(2, (2,), 1) for tp, state in created.written.items()}
    result = await kzk.update_partition_states(elected)
    assert result.conflicts == {tps[1], tps[4]}
    assert {tp: s.zk_version for tp, s in result.written.items()} == {
        tp: 1 for tp in tps if tp not in (tps[1], tps[4])
    }


async def test_writes_fenced_by_an_old_controller_epoch_are_refused(kzk: KafkaZkClient) -> None:
    await kzk.create_topic("t", {0: [1]}, {})
    _, old_epoch_version = await kzk.register_controller(1)
    await kzk.resign_controller(1)
    _, new_epoch_version = await kzk.register_controller(2)
    state = {T0: LeaderAndIsr(1, 0, (1,), 1, -1)}
    with pytest.raises(ControllerMovedError):
        await kzk.create_partition_states(state, controller_epoch_zk_version=old_epoch_version)
    assert await kzk.read_partition_states([T0]) == {}
    done = await kzk.create_partition_states(state, controller_epoch_zk_version=new_epoch_version)
    with pytest.raises(ControllerMovedError):
        await kzk.update_partition_states(
            {T0: done.written[T0]}, controller_epoch_zk_version=old_epoch_version
        )
    assignment = await kzk.get_assignment("t")
    assert assignment is not None
    with pytest.raises(ControllerMovedError):
        await kzk.set_assignment(assignment, controller_epoch_zk_version=old_epoch_version)


async def test_topic_creation_writes_assignment_and_config(kzk: KafkaZkClient) -> None:
    events = kzk.zk.subscribe()
    assert await kzk.get_topics(watch=True) == set()
    await kzk.create_topic("t", {0: [1, 2], 1: [2, 3]}, {"retention.ms": "1000"})
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/brokers/topics"))
    assert await kzk.get_topics() == {"t"}
    assignment = await kzk.get_assignment("t")
    assert assignment.topic_id is not None and len(assignment.topic_id) == 16  # KIP-516
    expected = TopicAssignment("t", {0: (1, 2), 1: (2, 3)}, zk_version=0)
    assert assignment == dataclasses.replace(expected, topic_id=assignment.topic_id)
    assert await kzk.get_topic_config("t") == {"retention.ms": "1000"}
    with pytest.raises(TopicAlreadyExistsError):
        await kzk.create_topic("t", {0: [1]}, {})

    moved = TopicAssignment("t", {0: (1, 2, 3), 1: (2, 3)}, adding_replicas={0: (3,)}, zk_version=0)
    assert (await kzk.set_assignment(moved)).zk_version == 1
    with pytest.raises(BadVersion):
        await kzk.set_assignment(moved)  # still names version 0
    assert (await kzk.get_assignments(["t", "missing"]))["t"].adding_replicas == {0: (3,)}


async def test_topic_deletion_marks_and_cleanup(kzk: KafkaZkClient) -> None:
    events = kzk.zk.subscribe()
    await kzk.create_topic("t", {0: [1]}, {"a": "b"})
    await kzk.create_partition_states({T0: LeaderAndIsr(1, 0, (1,), 1, -1)})
    assert await kzk.get_topic_deletions(watch=True) == set()
    assert await kzk.mark_topic_for_deletion("t")
    assert not await kzk.mark_topic_for_deletion("t")
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/admin/delete_topics"))
    assert await kzk.get_topic_deletions() == {"t"}
    await kzk.delete_topic_znodes("t")
    await kzk.delete_topic_deletion_marks(["t"])
    assert await kzk.get_topics() == set()
    assert await kzk.get_topic_deletions() == set()
    assert await kzk.get_topic_config("t") == {}


async def test_isr_change_notifications_are_sequential_and_consumed(kzk: KafkaZkClient) -> None:
    events = kzk.zk.subscribe()
    assert await kzk.get_isr_change_notifications(watch=True) == []
    first = await kzk.create_isr_change_notification([T0])
    second = await kzk.create_isr_change_notification([T1, T0])
    assert (first, second) == ("isr_change_0000000000", "isr_change_0000000001")
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/isr_change_notification"))
    names = await kzk.get_isr_change_notifications()
    assert names == [first, second]
    assert await kzk.read_isr_change_notifications(names) == {T0, T1}
    data, _ = await kzk.zk.get(f"/isr_change_notification/{first}")
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    await kzk.delete_isr_change_notifications(names)
    assert await kzk.get_isr_change_notifications() == []


async def test_reassignment_znode_read_write_delete_with_watch(kzk: KafkaZkClient) -> None:
    events = kzk.zk.subscribe()
    assert await kzk.get_reassignment(watch=True) == {}
    await kzk.set_reassignment({T0: [2, 3]})
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.CREATED, "/admin/reassign_partitions"
    )
    assert await kzk.get_reassignment(watch=True) == {T0: (2, 3)}
    await kzk.set_reassignment({})
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.DELETED, "/admin/reassign_partitions"
    )
    assert await kzk.get_reassignment() == {}


async def test_preferred_replica_election_znode(kzk: KafkaZkClient) -> None:
    assert await kzk.get_preferred_replica_election() == set()
    assert await kzk.create_preferred_replica_election([T0, T1])
    assert not await kzk.create_preferred_replica_election([T0])
    assert await kzk.get_preferred_replica_election() == {T0, T1}
    await kzk.delete_preferred_replica_election()
    assert await kzk.get_preferred_replica_election() == set()


@pytest.mark.timeout(45)
async def test_broker_re_registers_after_its_session_expires(
    kzk: KafkaZkClient, zk_session_killer: ExpireSession
) -> None:
    events = kzk.zk.subscribe()
    old_epoch = await kzk.register_broker(broker(1))
    await zk_session_killer(kzk.zk)
    await next_event(events, lambda e: isinstance(e, StateChange) and e.state is ZkState.EXPIRED)
    reconnected = await next_event(
        events, lambda e: isinstance(e, StateChange) and e.state is ZkState.CONNECTED
    )
    assert isinstance(reconnected, StateChange) and reconnected.new_session
    assert await kzk.get_live_brokers() == {}
    new_epoch = await kzk.register_broker(broker(1))
    assert new_epoch > old_epoch
    assert list(await kzk.get_live_brokers()) == [1]


async def test_concurrent_creations_of_one_topic_make_it_once_and_tell_the_rest_it_exists(
    kzk: KafkaZkClient,
) -> None:
    # Two brokers auto-creating the same topic for two producers race on its config
    # znode and its assignment znode; the loser is told the topic exists, never a
    # ZooKeeper error that aborts the rest of its CreateTopics request.
    for round_ in range(5):
        topic = f"raced-{round_}"
        outcomes: list[str] = []

        async def create(
            broker_id: int, topic: str = topic, outcomes: list[str] = outcomes
        ) -> None:
            try:
                await kzk.create_topic(topic, {0: [broker_id]}, {"retention.ms": "1000"})
            except TopicAlreadyExistsError:
                outcomes.append("exists")
            else:
                outcomes.append("created")

        async with trio.open_nursery() as nursery:
            for broker_id in (1, 2, 3, 4):
                nursery.start_soon(create, broker_id)
        assert sorted(outcomes) == ["created", "exists", "exists", "exists"]
        assert await kzk.get_topic_config(topic) == {"retention.ms": "1000"}
