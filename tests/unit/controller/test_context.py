"""ControllerContext's derived queries."""

from __future__ import annotations

from minibroker.controller.context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    ReassignmentContext,
)
from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker, make_context

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def lai(leader: int, *isr: int) -> LeaderAndIsr:
    return LeaderAndIsr(leader, 0, isr, 1, 0)


def sample() -> ControllerContext:
    ctx = make_context([1, 2, 3], {"a": {0: [1, 2], 1: [2, 3]}, "b": {0: [3, 1]}})
    ctx.leadership = {A0: lai(1, 1, 2), A1: lai(2, 2, 3), B0: lai(3, 3, 1)}
    return ctx


def test_shutting_down_brokers_are_registered_but_not_live() -> None:
    ctx = sample()
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.live_broker_ids == {1, 3}
    assert ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert not ctx.is_replica_online(2)
    assert ctx.is_replica_online(2, include_shutting_down=True)


def test_removing_a_broker_also_forgets_its_shutdown() -> None:
    ctx = sample()
    ctx.shutting_down_broker_ids.add(2)
    ctx.remove_live_brokers([2])
    assert ctx.shutting_down_broker_ids == set()
    ctx.add_live_brokers([Broker(2)])
    assert ctx.live_broker_ids == {1, 2, 3}


def test_partitions_and_replicas_on_a_broker() -> None:
    ctx = sample()
    assert ctx.partitions_on_broker(1) == {A0, B0}
    assert ctx.replicas_on_brokers([2]) == {
        PartitionReplica("a", 0, 2),
        PartitionReplica("a", 1, 2),
    }
    assert ctx.replicas_for_topic("b") == {PartitionReplica("b", 0, 3), PartitionReplica("b", 0, 1)}
    assert ctx.partitions_led_by(2) == {A1}
    assert ctx.partitions_for_topic("a") == {A0, A1}
    assert ctx.replicas_for(TopicPartition("zzz", 0)) == ()


def test_offline_partitions_have_no_live_leader_and_ignore_topics_being_deleted() -> None:
    ctx = sample()
    ctx.remove_live_brokers([3])
    assert ctx.offline_partitions() == {B0}
    ctx.topics_to_be_deleted.add("b")
    assert ctx.offline_partitions() == set()
    ctx.set_assignment(TopicPartition("c", 0), [1])  # never had a leader
    assert ctx.offline_partitions() == {TopicPartition("c", 0)}


def test_partitions_and_replicas_by_state() -> None:
    ctx = sample()
    ctx.partition_states = {
        A0: PartitionState.ONLINE,
        A1: PartitionState.OFFLINE,
        B0: PartitionState.NEW,
    }
    assert ctx.partitions_in_states([PartitionState.NEW, PartitionState.OFFLINE]) == {A1, B0}
    ctx.replica_states = {
        PartitionReplica("a", 0, 1): ReplicaState.OFFLINE,
        PartitionReplica("b", 0, 3): ReplicaState.OFFLINE,
    }
    assert ctx.replicas_in_state("a", ReplicaState.OFFLINE) == {PartitionReplica("a", 0, 1)}


def test_preferred_replica_imbalance_lists_partitions_not_led_by_their_first_replica() -> None:
    ctx = sample()
    ctx.leadership[A0] = lai(2, 1, 2)
    assert ctx.preferred_replica_imbalance() == {1: {A0}, 2: set(), 3: set()}


def test_metadata_shows_topics_being_deleted_without_leader() -> None:
    ctx = sample()
    ctx.topics_to_be_deleted.add("a")
    shown = ctx.leadership_for_metadata(A0)
    assert shown is not None and shown.leader == LEADER_DURING_DELETE
    assert ctx.leadership_for_metadata(B0) == ctx.leadership[B0]


def test_remove_topic_forgets_every_trace_of_it() -> None:
    ctx = sample()
    ctx.partition_states[A0] = PartitionState.OFFLINE
    ctx.replica_states[PartitionReplica("a", 0, 1)] = ReplicaState.NON_EXISTENT
    ctx.topics_to_be_deleted.add("a")
    ctx.remove_topic("a")
    assert ctx.all_topics == {"b"}
    assert A0 not in ctx.leadership and A0 not in ctx.partition_states
    assert not ctx.replica_states and not ctx.topics_to_be_deleted


def test_reassignment_context_names_added_removed_and_union() -> None:
    r = ReassignmentContext(original=(1, 2, 3), target=(3, 4))
    assert r.adding == (4,)
    assert r.removing == (1, 2)
    assert r.union == (3, 4, 1, 2)


def test_reset_forgets_everything() -> None:
    ctx = sample()
    ctx.epoch = 7
    ctx.reset()
    assert ctx.epoch == 0 and not ctx.live_brokers and not ctx.assignments and not ctx.leadership


def test_new_leader_bumps_the_leader_epoch_and_keeps_the_version() -> None:
    before = LeaderAndIsr(1, 4, (1, 2), 1, 9)
    after = before.new_leader(2, [2], 3)
    assert after == LeaderAndIsr(2, 5, (2,), 3, 9)
