"""`minibroker reassign --execute --throttle`: which replicas it lists in the topics'
leader/follower.replication.throttled.replicas, merged with what is already there."""

from __future__ import annotations

from minibroker.client.cli.reassign import merge_throttled_replicas, throttled_replicas
from minibroker.client.reassignment import PartitionMove


def move(topic: str, partition: int, *replicas: int) -> PartitionMove:
    return PartitionMove(topic, partition, replicas, (None,) * len(replicas))


def test_current_replicas_send_and_added_replicas_receive() -> None:
    current = {("a", 0): (1, 2), ("a", 1): (2, 3), ("b", 0): (1,)}
    moves = [move("a", 0, 2, 3), move("a", 1, 3, 2), move("b", 0, 4)]
    assert throttled_replicas(moves, current) == {
        "a": ({"0:1", "0:2"}, {"0:3"}),  # a-1 only reorders: nothing to copy
        "b": ({"0:1"}, {"0:4"}),
    }


def test_new_entries_merge_into_the_existing_list() -> None:
    assert merge_throttled_replicas(None, {"1:2", "0:1"}) == "0:1,1:2"
    assert merge_throttled_replicas("10:1, 0:1", {"2:3"}) == "0:1,2:3,10:1"
    assert merge_throttled_replicas("*", {"0:1"}) == "*"
