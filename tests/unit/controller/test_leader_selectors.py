"""Leader election rules as tables: (AR, ISR, live) -> (leader, ISR, recipients)."""

from __future__ import annotations

import pytest

from minibroker.controller.leader_selectors import (
    Election,
    elect_for_controlled_shutdown,
    elect_for_new_partition,
    elect_for_offline_partition,
    elect_for_reassigned_partition,
    elect_preferred_leader,
    elect_unclean_leader,
)


@pytest.mark.parametrize(
    ("assignment", "live", "expected"),
    [
        ([1, 2, 3], {1, 2, 3}, Election(1, (1, 2, 3), (1, 2, 3))),
        ([1, 2, 3], {2, 3}, Election(2, (2, 3), (2, 3))),
        ([3, 1, 2], {1, 2}, Election(1, (1, 2), (1, 2))),
        ([1, 2, 3], {4}, None),
        ([], {1}, None),
    ],
)
def test_new_partition_leader_is_first_live_replica_and_isr_is_every_live_replica(
    assignment: list[int], live: set[int], expected: Election | None
) -> None:
    assert elect_for_new_partition(assignment, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        # the first live replica of AR that is in the ISR, ISR shrunk to live members
        ([1, 2, 3], [1, 2, 3], {2, 3}, False, Election(2, (2, 3), (2, 3))),
        ([1, 2, 3], [3, 2], {2, 3}, False, Election(2, (3, 2), (2, 3))),
        ([1, 2, 3], [1, 3], {2, 3}, False, Election(3, (3,), (2, 3))),
        # no ISR member alive: offline unless unclean election is allowed
        ([1, 2, 3], [1], {2, 3}, False, None),
        ([1, 2, 3], [1], {2, 3}, True, Election(2, (2,), (2, 3), unclean=True)),
        # unclean allowed but a clean choice exists: the clean one wins
        ([1, 2, 3], [3], {2, 3}, True, Election(3, (3,), (2, 3))),
        # nobody alive at all
        ([1, 2, 3], [1, 2, 3], set(), True, None),
    ],
)
def test_offline_partition_election(
    assignment: list[int],
    isr: list[int],
    live: set[int],
    unclean: bool,
    expected: Election | None,
) -> None:
    assert elect_for_offline_partition(assignment, isr, live, unclean_allowed=unclean) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        # a live ISR member is still preferred: nothing acknowledged is lost
        ([1, 2, 3], [1, 3], {2, 3}, Election(3, (3,), (2, 3))),
        # otherwise the first live replica of AR leads alone, whatever the topic allows
        ([1, 2, 3], [1], {2, 3}, Election(2, (2,), (2, 3), unclean=True)),
        ([3, 2], [], {2}, Election(2, (2,), (2,), unclean=True)),
        # no live replica at all: nobody can lead
        ([1, 2], [1], {3}, None),
    ],
)
def test_unclean_election_asked_for_prefers_a_live_isr_member_then_any_live_replica(
    assignment: list[int], isr: list[int], live: set[int], expected: Election | None
) -> None:
    assert elect_unclean_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("target", "isr", "live", "expected"),
    [
        (
            [4, 5, 6],
            [1, 2, 3, 4, 5, 6],
            {1, 2, 3, 4, 5, 6},
            Election(4, (1, 2, 3, 4, 5, 6), (4, 5, 6)),
        ),
        ([4, 5, 6], [1, 5, 6], {1, 4, 5, 6}, Election(5, (1, 5, 6), (4, 5, 6))),
        ([4, 5, 6], [1, 4, 5, 6], {1, 5, 6}, Election(5, (1, 4, 5, 6), (4, 5, 6))),
        ([4, 5], [1, 2], {1, 2, 4, 5}, None),
    ],
)
def test_reassigned_partition_leader_comes_from_the_target_replicas_in_the_isr(
    target: list[int], isr: list[int], live: set[int], expected: Election | None
) -> None:
    assert elect_for_reassigned_partition(target, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        ([1, 2, 3], [2, 1, 3], {1, 2, 3}, Election(1, (2, 1, 3), (1, 2, 3))),
        ([1, 2, 3], [2, 3], {1, 2, 3}, None),  # preferred replica not caught up
        ([1, 2, 3], [1, 2, 3], {2, 3}, None),  # preferred replica dead
        ([], [], {1}, None),
    ],
)
def test_preferred_leader_is_first_assigned_replica_only_when_live_and_in_isr(
    assignment: list[int], isr: list[int], live: set[int], expected: Election | None
) -> None:
    assert elect_preferred_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live_or_shutting", "shutting", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, Election(2, (2, 3), (1, 2, 3))),
        ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, Election(3, (3,), (1, 2, 3))),
        ([1, 2, 3], [1, 2, 3], {1, 2}, {1, 2}, None),  # only stopping members in the ISR
        ([1, 2, 3], [1], {1, 2, 3}, {1}, None),  # no other ISR member: stays on 1
        ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, Election(3, (2, 3), (1, 3))),
    ],
)
def test_controlled_shutdown_moves_leader_to_an_isr_member_that_stays(
    assignment: list[int],
    isr: list[int],
    live_or_shutting: set[int],
    shutting: set[int],
    expected: Election | None,
) -> None:
    assert elect_for_controlled_shutdown(assignment, isr, live_or_shutting, shutting) == expected
