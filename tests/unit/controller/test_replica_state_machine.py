"""What replica transitions do."""

from __future__ import annotations

from minibroker.controller.context import NO_LEADER, ControllerContext
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ControllerBrokerRequestBatch,
)
from minibroker.controller.state_machines import PartitionReplica, ReplicaState, StateChangeFailed
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import FakeStateStore, RecordingSender, make_context

T0 = TopicPartition("t", 0)
R = ReplicaState


def machine(
    ctx: ControllerContext, store: FakeStateStore
) -> tuple[ReplicaStateMachine, RecordingSender]:
    sender = RecordingSender()
    return ReplicaStateMachine(ctx, store, ControllerBrokerRequestBatch(ctx, 1, sender)), sender


def with_leader(ctx: ControllerContext, store: FakeStateStore, lai: LeaderAndIsr) -> None:
    ctx.leadership[T0] = store.znodes[T0] = lai


async def test_offline_replica_is_stopped_and_removed_from_the_isr() -> None:
    ctx = make_context([1, 2, 3], {"t": {0: [1, 2, 3]}}, epoch=3)
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 2, (1, 2, 3), 1, 4))
    rsm, sender = machine(ctx, store)
    replica = PartitionReplica("t", 0, 3)
    ctx.replica_states[replica] = R.ONLINE
    assert await rsm.handle_state_changes([replica], R.OFFLINE) == {}
    assert store.znodes[T0] == LeaderAndIsr(1, 3, (1, 2), 3, 5)
    assert ctx.replica_states[replica] is R.OFFLINE
    stop = sender.partitions(3, STOP_REPLICA)[T0]
    assert stop["delete_partition"] is False
    assert set(sender.partitions(1, LEADER_AND_ISR)) == {T0}
    assert sender.to(3, LEADER_AND_ISR) == []
    assert sender.partitions(2, UPDATE_METADATA)[T0]["isr"] == [1, 2]


async def test_offline_leader_leaves_the_partition_leaderless_but_keeps_the_last_isr_member() -> (
    None
):
    ctx = make_context([1, 2], {"t": {0: [1, 2]}})
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 0, (1,), 1, 0))
    rsm, _ = machine(ctx, store)
    replica = PartitionReplica("t", 0, 1)
    ctx.replica_states[replica] = R.ONLINE
    await rsm.handle_state_changes([replica], R.OFFLINE)
    assert (store.znodes[T0].leader, store.znodes[T0].isr) == (NO_LEADER, (1,))


async def test_offline_replica_not_in_isr_needs_no_zookeeper_write() -> None:
    ctx = make_context([1, 2], {"t": {0: [1, 2]}})
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 0, (1,), 1, 0))
    rsm, _ = machine(ctx, store)
    replica = PartitionReplica("t", 0, 2)
    ctx.replica_states[replica] = R.ONLINE
    await rsm.handle_state_changes([replica], R.OFFLINE)
    assert store.updates == 0 and ctx.replica_states[replica] is R.OFFLINE


async def test_new_replica_is_told_the_current_leadership_as_a_new_follower() -> None:
    ctx = make_context([1, 2, 3], {"t": {0: [1, 2, 3]}})
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 0, (1, 2), 1, 0))
    rsm, sender = machine(ctx, store)
    replica = PartitionReplica("t", 0, 3)
    assert await rsm.handle_state_changes([replica], R.NEW) == {}
    state = sender.partitions(3, LEADER_AND_ISR)[T0]
    assert (state["leader"], state["is_new"], state["replicas"]) == (1, True, [1, 2, 3])


async def test_the_leader_cannot_become_a_new_replica() -> None:
    ctx = make_context([1], {"t": {0: [1]}})
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 0, (1,), 1, 0))
    rsm, _ = machine(ctx, store)
    failures = await rsm.handle_state_changes([PartitionReplica("t", 0, 1)], R.NEW)
    assert isinstance(failures[PartitionReplica("t", 0, 1)], StateChangeFailed)


async def test_new_replica_going_online_joins_the_assignment_in_memory() -> None:
    ctx = make_context([1, 4], {"t": {0: [1]}})
    rsm, sender = machine(ctx, FakeStateStore())
    replica = PartitionReplica("t", 0, 4)
    ctx.replica_states[replica] = R.NEW
    await rsm.handle_state_changes([replica], R.ONLINE)
    assert ctx.replicas_for(T0) == (1, 4) and sender.sent == []


async def test_returning_replica_is_resent_the_leadership() -> None:
    ctx = make_context([1, 2], {"t": {0: [1, 2]}})
    store = FakeStateStore()
    with_leader(ctx, store, LeaderAndIsr(1, 7, (1,), 1, 0))
    rsm, sender = machine(ctx, store)
    replica = PartitionReplica("t", 0, 2)
    ctx.replica_states[replica] = R.OFFLINE
    await rsm.handle_state_changes([replica], R.ONLINE)
    assert sender.partitions(2, LEADER_AND_ISR)[T0]["leader_epoch"] == 7
    assert ctx.replica_states[replica] is R.ONLINE


async def test_deletion_walks_started_successful_nonexistent_and_drops_the_replica() -> None:
    ctx = make_context([1, 2], {"t": {0: [1, 2]}})
    rsm, sender = machine(ctx, FakeStateStore())
    replica = PartitionReplica("t", 0, 2)
    ctx.replica_states[replica] = R.OFFLINE
    await rsm.handle_state_changes([replica], R.DELETION_STARTED)
    assert sender.partitions(2, STOP_REPLICA)[T0]["delete_partition"] is True
    await rsm.handle_state_changes([replica], R.DELETION_SUCCESSFUL)
    await rsm.handle_state_changes([replica], R.NON_EXISTENT)
    assert ctx.replicas_for(T0) == (1,)
    assert replica not in ctx.replica_states


async def test_startup_marks_replicas_on_dead_brokers_ineligible() -> None:
    ctx = make_context([1], {"t": {0: [1, 2]}})
    rsm, _ = machine(ctx, FakeStateStore())
    rsm.initialize_states()
    assert ctx.replica_states == {
        PartitionReplica("t", 0, 1): R.ONLINE,
        PartitionReplica("t", 0, 2): R.DELETION_INELIGIBLE,
    }
