"""What partition transitions do: ZooKeeper first, then requests to brokers."""

from __future__ import annotations

from minibroker.controller.context import ControllerContext, ReassignmentContext
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.request_batch import (
    LEADER_AND_ISR,
    UPDATE_METADATA,
    ControllerBrokerRequestBatch,
)
from minibroker.controller.state_machines import ElectionStrategy, PartitionState, StateChangeFailed
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import FakeStateStore, RecordingSender, make_context

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
P = PartitionState


def machine(
    ctx: ControllerContext, store: FakeStateStore, *, unclean: bool = False
) -> tuple[PartitionStateMachine, RecordingSender, list[TopicPartition]]:
    sender = RecordingSender()
    unclean_seen: list[TopicPartition] = []
    psm = PartitionStateMachine(
        ctx,
        store,
        ControllerBrokerRequestBatch(ctx, 1, sender),
        unclean_allowed=lambda topic: unclean,
        on_unclean_election=unclean_seen.append,
    )
    return psm, sender, unclean_seen


def online(
    ctx: ControllerContext, store: FakeStateStore, tp: TopicPartition, lai: LeaderAndIsr
) -> None:
    ctx.partition_states[tp] = P.ONLINE
    ctx.leadership[tp] = store.znodes[tp] = lai


async def test_new_partition_goes_online_with_first_live_replica_leading_and_live_isr() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}}, epoch=4)
    store = FakeStateStore()
    psm, sender, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.NEW)
    assert ctx.partition_states[T0] is P.NEW and sender.sent == []
    assert await psm.handle_state_changes([T0], P.ONLINE) == {}
    expected = LeaderAndIsr(2, 0, (2, 3), 4, 0)
    assert store.znodes[T0] == expected == ctx.leadership[T0]
    assert ctx.partition_states[T0] is P.ONLINE
    for broker in (2, 3):
        state = sender.partitions(broker, LEADER_AND_ISR)[T0]
        assert (state["leader"], state["isr"], state["is_new"]) == (2, [2, 3], True)
        assert sender.partitions(broker, UPDATE_METADATA)[T0]["leader"] == 2
    assert sender.to(1, LEADER_AND_ISR) == []


async def test_new_partition_with_no_live_replica_stays_new() -> None:
    ctx = make_context([9], {"t": {0: [1, 2]}})
    psm, sender, _ = machine(ctx, FakeStateStore())
    await psm.handle_state_changes([T0], P.NEW)
    failures = await psm.handle_state_changes([T0], P.ONLINE)
    assert isinstance(failures[T0], StateChangeFailed)
    assert ctx.partition_states[T0] is P.NEW and sender.sent == []


async def test_existing_state_znode_makes_initialization_fail() -> None:
    ctx = make_context([1], {"t": {0: [1]}})
    store = FakeStateStore(znodes={T0: LeaderAndIsr(1, 3, (1,), 1, 5)})
    psm, _, _ = machine(ctx, store)
    ctx.partition_states[T0] = P.NEW
    failures = await psm.handle_state_changes([T0], P.ONLINE)
    assert T0 in failures and store.znodes[T0].leader_epoch == 3


async def test_offline_partition_elects_live_isr_member_and_bumps_epoch() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}}, epoch=2)
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1, 3), 1, 8))
    psm, sender, unclean = machine(ctx, store)
    await psm.handle_state_changes([T0], P.OFFLINE)
    assert await psm.handle_state_changes([T0], P.ONLINE) == {}
    assert store.znodes[T0] == LeaderAndIsr(3, 6, (3,), 2, 9)
    assert ctx.leadership[T0] == store.znodes[T0]
    assert set(sender.partitions(2, LEADER_AND_ISR)) == {T0}
    assert sender.partitions(3, LEADER_AND_ISR)[T0]["leader_epoch"] == 6
    assert unclean == []


async def test_offline_partition_without_live_isr_stays_offline_when_unclean_is_disabled() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1,), 1, 8))
    psm, sender, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.OFFLINE)
    failures = await psm.handle_state_changes([T0], P.ONLINE)
    assert isinstance(failures[T0], StateChangeFailed)
    assert ctx.partition_states[T0] is P.OFFLINE
    assert store.znodes[T0].zk_version == 8 and sender.sent == []


async def test_unclean_election_picks_a_live_replica_outside_the_isr_and_is_counted() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1,), 1, 8))
    psm, _, unclean = machine(ctx, store, unclean=True)
    await psm.handle_state_changes([T0], P.OFFLINE)
    assert await psm.handle_state_changes([T0], P.ONLINE) == {}
    assert (store.znodes[T0].leader, store.znodes[T0].isr) == (2, (2,))
    assert unclean == [T0]


async def test_lost_conditional_update_rereads_the_znode_and_decides_again() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore(conflicts_to_inject={T0: 1}, isr_after_conflict={T0: (1, 2)})
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1, 3), 1, 8))
    psm, _, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.OFFLINE)
    assert await psm.handle_state_changes([T0], P.ONLINE) == {}
    # The ISR the old leader wrote meanwhile (1, 2) is what the election used.
    assert store.znodes[T0] == LeaderAndIsr(2, 6, (2,), 1, 10)


async def test_election_decides_from_the_cached_state_without_reading_zookeeper() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1, 3), 1, 8))
    psm, _, _ = machine(ctx, store)
    assert await psm.handle_state_changes([T0], P.ONLINE) == {}
    assert store.reads == 0 and store.znodes[T0].leader == 3


async def test_a_cached_state_that_forbids_the_election_is_reread_first() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1, 3), 1, 8))
    # The leader grew the ISR since the controller last looked; the cache says only 1.
    ctx.leadership[T0] = LeaderAndIsr(1, 5, (1,), 1, 7)
    assert await psm_online(ctx, store) == {}
    assert store.znodes[T0].leader == 3 and store.reads == 1


async def psm_online(ctx: ControllerContext, store: FakeStateStore) -> dict[TopicPartition, object]:
    psm, _, _ = machine(ctx, store)
    return dict(await psm.handle_state_changes([T0], P.ONLINE))


async def test_state_written_by_a_newer_controller_is_not_overwritten() -> None:
    ctx = make_context([2, 3], {"t": {0: [1, 2, 3]}}, epoch=1)
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 5, (1, 2), 2, 8))
    psm, _, _ = machine(ctx, store)
    failures = await psm.handle_state_changes([T0], P.ONLINE)
    assert "controller epoch 2" in str(failures[T0])
    assert store.znodes[T0].zk_version == 8


async def test_controlled_shutdown_election_moves_leadership_and_drops_the_stopping_broker() -> (
    None
):
    ctx = make_context([1, 2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 0, (1, 2, 3), 1, 0))
    ctx.shutting_down_broker_ids.add(1)
    psm, sender, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
    assert (store.znodes[T0].leader, store.znodes[T0].isr) == (2, (2, 3))
    assert T0 in sender.partitions(1, LEADER_AND_ISR)  # the stopping broker hears too


async def test_preferred_election_returns_leadership_to_the_first_replica() -> None:
    ctx = make_context([1, 2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(2, 4, (2, 3, 1), 1, 0))
    psm, _, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.PREFERRED)
    assert (store.znodes[T0].leader, store.znodes[T0].isr) == (1, (2, 3, 1))


async def test_reassigned_election_picks_from_the_target_replicas() -> None:
    ctx = make_context([1, 2, 3, 4], {"t": {0: [3, 4, 1, 2]}})
    store = FakeStateStore()
    online(ctx, store, T0, LeaderAndIsr(1, 4, (1, 2, 3, 4), 1, 0))
    ctx.partitions_being_reassigned[T0] = ReassignmentContext((1, 2), (3, 4))
    psm, sender, _ = machine(ctx, store)
    await psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.REASSIGNED)
    assert store.znodes[T0].leader == 3
    assert set(sender.partitions(3, LEADER_AND_ISR)) == {T0}
    assert sender.to(1, LEADER_AND_ISR) == []


async def test_startup_marks_states_from_leadership_and_brings_new_and_offline_online() -> None:
    ctx = make_context([2], {"t": {0: [1, 2], 1: [2]}, "gone": {0: [2]}})
    store = FakeStateStore()
    ctx.leadership[T0] = store.znodes[T0] = LeaderAndIsr(1, 0, (1, 2), 1, 0)
    ctx.topics_to_be_deleted.add("gone")
    psm, _, _ = machine(ctx, store)
    psm.initialize_states()
    assert ctx.partition_states == {T0: P.OFFLINE, T1: P.NEW, TopicPartition("gone", 0): P.NEW}
    assert await psm.trigger_online_partition_state_change() == {}
    assert ctx.partition_states[T0] is P.ONLINE and ctx.partition_states[T1] is P.ONLINE
    assert ctx.partition_states[TopicPartition("gone", 0)] is P.NEW
    assert ctx.leadership[T0].leader == 2 and ctx.leadership[T1].leader == 2
