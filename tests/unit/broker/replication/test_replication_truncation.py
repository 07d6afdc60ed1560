"""Follower truncation by leader epoch (KIP-101, KIP-279), as pure decisions."""

from __future__ import annotations

from pathlib import Path

from minibroker.broker.replication.truncation import (
    TruncationStep,
    answer_offset_for_leader_epoch,
    decide_truncation,
)
from minibroker.storage.leader_epoch import LeaderEpochCache


def cache(tmp_path: Path, name: str, entries: list[tuple[int, int]], leo: int) -> LeaderEpochCache:
    directory = tmp_path / name
    directory.mkdir()
    result = LeaderEpochCache(directory, lambda: leo)
    for epoch, start in entries:
        result.assign(epoch, start)
    return result


def follow(
    leader: LeaderEpochCache, follower: LeaderEpochCache, follower_leo: int, hw: int = 0
) -> TruncationStep:
    epoch, end = answer_offset_for_leader_epoch(leader, follower.latest_epoch)
    return decide_truncation(
        epoch,
        end,
        follower_cache=follower,
        follower_log_end_offset=follower_leo,
        follower_high_watermark=hw,
    )


def test_follower_truncates_to_leader_epoch_end_not_high_watermark(tmp_path: Path) -> None:
    # KIP-101 scenario 1: both hold offsets 0..1 of epoch 0, the follower's HW is 1
    # (it has not yet learned that the leader's HW is 2); the leader's epoch 0 ends at 2.
    leader = cache(tmp_path, "leader", [(0, 0)], leo=2)
    follower = cache(tmp_path, "follower", [(0, 0)], leo=2)
    assert follow(leader, follower, follower_leo=2, hw=1) == TruncationStep(2, True)


def test_follower_with_records_of_a_lost_epoch_truncates_where_that_epoch_began(
    tmp_path: Path,
) -> None:
    # KIP-101 scenario 2: the follower wrote offset 1 in epoch 1 as a short-lived
    # leader; the real leader went on from offset 1 in epoch 2.
    leader = cache(tmp_path, "leader", [(0, 0), (2, 1)], leo=2)
    follower = cache(tmp_path, "follower", [(0, 0), (1, 1)], leo=2)
    # The leader answers for epoch 0 (largest <= 1), ending at 1.
    assert follow(leader, follower, follower_leo=2) == TruncationStep(1, True)


def test_follower_never_truncates_above_its_own_log_end(tmp_path: Path) -> None:
    leader = cache(tmp_path, "leader", [(0, 0)], leo=100)
    follower = cache(tmp_path, "follower", [(0, 0)], leo=40)
    assert follow(leader, follower, follower_leo=40) == TruncationStep(40, True)


def test_kip279_follower_iterates_when_the_leader_answers_an_older_epoch(tmp_path: Path) -> None:
    # Fast leader changes: the follower led epochs 1 and 3 briefly, the leader (now in
    # epoch 4) only wrote in 0 and 2. First answer (for 3): epoch 2, ending at 15 on the
    # leader - but the follower never had epoch 2: its log diverges at the end of its
    # own epoch 1.
    leader = cache(tmp_path, "leader", [(0, 0), (2, 8), (4, 15)], leo=15)
    follower_leo = 12
    follower = cache(tmp_path, "follower", [(0, 0), (1, 5), (3, 10)], leo=follower_leo)
    step = follow(leader, follower, follower_leo)
    assert step == TruncationStep(10, False)  # follower's epoch 1 ends at 10
    follower.truncate_from_end(step.offset)
    step = follow(leader, follower, follower_leo=10)
    # Asked about epoch 1, the leader answers epoch 0 ending at 8; ours ends at 5, so
    # offsets 0..4 are shared and done.
    assert step == TruncationStep(5, True)


def test_follower_without_any_epoch_history_falls_back_to_its_high_watermark(
    tmp_path: Path,
) -> None:
    leader = cache(tmp_path, "leader", [(0, 0)], leo=10)
    follower = cache(tmp_path, "follower", [], leo=6)
    assert follow(leader, follower, follower_leo=6, hw=4) == TruncationStep(4, True)


def test_leader_answers_the_largest_epoch_not_above_the_requested_one(tmp_path: Path) -> None:
    leader = cache(tmp_path, "leader", [(0, 0), (2, 8), (5, 20)], leo=30)
    assert answer_offset_for_leader_epoch(leader, 5) == (5, 30)
    assert answer_offset_for_leader_epoch(leader, 4) == (2, 20)
    assert answer_offset_for_leader_epoch(leader, 1) == (0, 8)
    assert answer_offset_for_leader_epoch(leader, 9) == (-1, -1)
