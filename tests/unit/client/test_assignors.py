"""The partition assignors, as Kafka's range, roundrobin and cooperative-sticky assign."""

from __future__ import annotations

import pytest

from minibroker.client.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    assignor,
)
from minibroker.protocol.consumer_protocol import Subscription, group_by_topic


def member(
    member_id: str,
    *topics: str,
    owned: list[tuple[str, int]] = (),
    generation: int = -1,
    instance: str | None = None,
) -> MemberSubscription:
    sub = Subscription(
        tuple(topics), CooperativeStickyAssignor().user_data(generation), group_by_topic(owned)
    )
    return MemberSubscription(member_id, sub, instance)


def test_range_gives_each_member_a_contiguous_range_per_topic_extra_to_the_first() -> None:
    result = RangeAssignor().assign(
        {"t": 7, "u": 2}, [member("b", "t", "u"), member("a", "t", "u"), member("c", "t")]
    )
    assert result == {
        "a": [("t", 0), ("t", 1), ("t", 2), ("u", 0)],
        "b": [("t", 3), ("t", 4), ("u", 1)],
        "c": [("t", 5), ("t", 6)],
    }


def test_range_orders_static_members_by_instance_id() -> None:
    result = RangeAssignor().assign(
        {"t": 2}, [member("a", "t", instance="z"), member("b", "t", instance="y")]
    )
    assert result == {"b": [("t", 0)], "a": [("t", 1)]}


def test_roundrobin_deals_partitions_in_turn_skipping_unsubscribed_members() -> None:
    result = RoundRobinAssignor().assign(
        {"t": 3, "u": 3}, [member("a", "t", "u"), member("b", "t"), member("c", "u")]
    )
    assert result == {
        "a": [("t", 0), ("t", 2), ("u", 1)],
        "b": [("t", 1)],
        "c": [("u", 0), ("u", 2)],
    }


def test_assignors_ignore_topics_that_do_not_exist() -> None:
    for strategy in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        assert strategy.assign({}, [member("a", "missing")]) == {"a": []}


def test_sticky_first_assignment_is_balanced_and_complete() -> None:
    members = [member(m, "t") for m in "abc"]
    result = CooperativeStickyAssignor().assign({"t": 6}, members)
    assert sorted(tp for tps in result.values() for tp in tps) == [("t", p) for p in range(6)]
    assert [len(tps) for tps in result.values()] == [2, 2, 2]


def test_sticky_new_member_takes_over_only_moved_partitions_after_they_are_revoked() -> None:
    owned = {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4), ("t", 5)]}
    members = [
        member("a", "t", owned=owned["a"], generation=4),
        member("b", "t", owned=owned["b"], generation=4),
        member("c", "t"),
    ]
    first = CooperativeStickyAssignor().assign({"t": 6}, members)
    # Nobody is given a partition someone else still owns: a and b each keep 2.
    assert len(first["a"]) == len(first["b"]) == 2 and first["c"] == []
    assert set(first["a"]) <= set(owned["a"]) and set(first["b"]) <= set(owned["b"])
    # After a and b revoked one each, the next round hands those two to c.
    members = [
        member("a", "t", owned=first["a"], generation=5),
        member("b", "t", owned=first["b"], generation=5),
        member("c", "t", generation=5),
    ]
    second = CooperativeStickyAssignor().assign({"t": 6}, members)
    assert second["a"] == first["a"] and second["b"] == first["b"]
    assert sorted(second["c"]) == sorted(
        {("t", p) for p in range(6)} - set(first["a"]) - set(first["b"])
    )


def test_sticky_departed_members_partitions_go_to_the_remaining_at_once() -> None:
    members = [
        member("a", "t", owned=[("t", 0), ("t", 1)], generation=3),
        member("b", "t", owned=[("t", 2), ("t", 3)], generation=3),
    ]
    result = CooperativeStickyAssignor().assign({"t": 6}, members)
    assert result["a"][:2] == [("t", 0), ("t", 1)] and result["b"][:2] == [("t", 2), ("t", 3)]
    assert len(result["a"]) == len(result["b"]) == 3


def test_sticky_claim_from_an_older_generation_loses_to_a_newer_one() -> None:
    members = [
        member("a", "t", owned=[("t", 0)], generation=2),
        member("b", "t", owned=[("t", 0)], generation=3),
    ]
    result = CooperativeStickyAssignor().assign({"t": 2}, members)
    assert result == {"a": [("t", 1)], "b": [("t", 0)]}


def test_sticky_balances_members_with_different_subscriptions() -> None:
    members = [member("a", "t", "u"), member("b", "t")]
    result = CooperativeStickyAssignor().assign({"t": 4, "u": 2}, members)
    assert len(result["a"]) == len(result["b"]) == 3
    assert all(t == "t" for t, _ in result["b"])


def test_assignors_are_found_by_kafkas_names() -> None:
    assert [
        assignor(n).name for n in ("range", "roundrobin", "round-robin", "cooperative-sticky")
    ] == ["range", "roundrobin", "roundrobin", "cooperative-sticky"]
    with pytest.raises(ValueError, match="unknown partition assignment strategy"):
        assignor("sticky-ish")
