"""The group state machine's table, against Kafka's ``validPreviousStates`` written out
independently here (GroupMetadata.scala: each state and the states it may follow)."""

from __future__ import annotations

import itertools

import pytest

from minibroker.coordinator.group import (
    TRANSITIONS,
    Group,
    GroupState,
    IllegalGroupTransition,
    consumer_subscription_topics,
)

E, PR, CR, ST, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
KAFKA_VALID_PREVIOUS = {
    D: {ST, PR, CR, E, D},
    CR: {PR},
    ST: {CR},
    PR: {ST, CR, E},
    E: {PR},
}


def test_the_table_is_kafkas_valid_previous_states_turned_around() -> None:
    allowed = {(src, dst) for dst, sources in KAFKA_VALID_PREVIOUS.items() for src in sources}
    table = {(src, dst) for src, targets in TRANSITIONS.items() for dst in targets}
    assert table == allowed


@pytest.mark.parametrize(("source", "target"), list(itertools.product(GroupState, repeat=2)))
def test_transition_to_follows_the_table_and_raises_otherwise(
    source: GroupState, target: GroupState
) -> None:
    group = Group("g", state=source)
    if target in TRANSITIONS[source]:
        group.transition_to(target, now_ms=123)
        assert group.state is target
        assert group.current_state_timestamp == 123
    else:
        with pytest.raises(IllegalGroupTransition):
            group.transition_to(target, now_ms=123)
        assert group.state is source


def test_only_empty_stable_and_completing_groups_can_start_a_rebalance() -> None:
    can = {state for state in GroupState if Group("g", state=state).can_rebalance()}
    assert can == {E, ST, CR}


def test_consumer_subscription_topics_reads_kafkas_subscription_bytes() -> None:
    # version 1, two topics, then user data and owned partitions (ignored)
    raw = (
        b"\x00\x01"
        + (2).to_bytes(4, "big")
        + b"\x00\x06orders"
        + b"\x00\x05users"
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x00"
    )
    assert consumer_subscription_topics(raw) == {"orders", "users"}
    with pytest.raises(ValueError):
        consumer_subscription_topics(b"\x00\x01\x00\x00\x00\x01\x00\x09abc")
