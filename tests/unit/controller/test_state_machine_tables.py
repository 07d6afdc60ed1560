"""Every (current, target) pair of both state machines: legal ones are exactly Kafka's."""

from __future__ import annotations

import itertools
import logging

import pytest

from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import (
    IllegalStateTransition,
    PartitionReplica,
    PartitionState,
    ReplicaState,
    check_partition_transition,
    check_replica_transition,
)
from minibroker.protocol.topic_partition import TopicPartition
from tests.unit.controller.fakes import FakeStateStore, RecordingSender, make_context

P = PartitionState
R = ReplicaState

# Written out pair by pair (not derived from the module's table) so the test is an
# independent statement of Kafka's rules.
LEGAL_PARTITION_TRANSITIONS = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE),
    (P.ONLINE, P.ONLINE),
    (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE),
    (P.ONLINE, P.OFFLINE),
    (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}

LEGAL_REPLICA_TRANSITIONS = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE),
    (R.ONLINE, R.ONLINE),
    (R.OFFLINE, R.ONLINE),
    (R.DELETION_INELIGIBLE, R.ONLINE),
    (R.NEW, R.OFFLINE),
    (R.ONLINE, R.OFFLINE),
    (R.OFFLINE, R.OFFLINE),
    (R.DELETION_INELIGIBLE, R.OFFLINE),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE),
    (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}

TP = TopicPartition("t", 0)
REPLICA = PartitionReplica("t", 0, 1)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(P, P)))
def test_partition_transition_is_legal_exactly_when_kafka_allows_it(
    current: PartitionState, target: PartitionState
) -> None:
    if (current, target) in LEGAL_PARTITION_TRANSITIONS:
        check_partition_transition(TP, current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"{current.value} -> {target.value}"):
            check_partition_transition(TP, current, target)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(R, R)))
def test_replica_transition_is_legal_exactly_when_kafka_allows_it(
    current: ReplicaState, target: ReplicaState
) -> None:
    if (current, target) in LEGAL_REPLICA_TRANSITIONS:
        check_replica_transition(REPLICA, current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"{current.value} -> {target.value}"):
            check_replica_transition(REPLICA, current, target)


async def test_partition_machine_logs_illegal_transition_and_still_moves_the_legal_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx = make_context([1], {"t": {0: [1], 1: [1]}})
    ctx.partition_states[TopicPartition("t", 1)] = P.ONLINE
    machine = PartitionStateMachine(
        ctx, FakeStateStore(), ControllerBrokerRequestBatch(ctx, 1, RecordingSender())
    )
    with caplog.at_level(logging.ERROR, logger="minibroker.controller.state_change"):
        failures = await machine.handle_state_changes(
            [TopicPartition("t", 0), TopicPartition("t", 1)], P.NEW
        )
    assert set(failures) == {TopicPartition("t", 1)}
    assert isinstance(failures[TopicPartition("t", 1)], IllegalStateTransition)
    assert "OnlinePartition -> NewPartition" in caplog.text
    assert ctx.partition_states[TopicPartition("t", 0)] is P.NEW
    assert ctx.partition_states[TopicPartition("t", 1)] is P.ONLINE


async def test_replica_machine_logs_illegal_transition_and_leaves_state_unchanged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx = make_context([1], {"t": {0: [1]}})
    ctx.replica_states[REPLICA] = R.ONLINE
    machine = ReplicaStateMachine(
        ctx, FakeStateStore(), ControllerBrokerRequestBatch(ctx, 1, RecordingSender())
    )
    with caplog.at_level(logging.ERROR, logger="minibroker.controller.state_change"):
        failures = await machine.handle_state_changes([REPLICA], R.DELETION_STARTED)
    assert isinstance(failures[REPLICA], IllegalStateTransition)
    assert "OnlineReplica -> ReplicaDeletionStarted" in caplog.text
    assert ctx.replica_states[REPLICA] is R.ONLINE
