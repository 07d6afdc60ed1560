"""Where a follower's log must be cut before it fetches: truncation by leader epoch.

Why not to the high watermark. A follower learns the leader's HW one fetch late, so its
own HW can lag behind records the leader already acknowledged (acks=all). Cutting to
that stale HW after a restart, then becoming leader, loses an acknowledged record
(KIP-101's first scenario); and two replicas that crashed together can keep different
records at the same offset (its second scenario). Epochs fix both: every batch carries
the epoch of the leader that wrote it, each replica keeps "epoch E started at offset S"
(storage.leader_epoch), and the follower asks the leader where the follower's latest
epoch ends on the leader's log (OffsetForLeaderEpoch). Everything from there on is not
the leader's history and goes.

KIP-279 (fast leader changes): the leader answers for the largest epoch it knows that
is not above the one asked about. When that epoch is not the one the follower asked
about, the follower's own log may diverge earlier, at the end of that smaller epoch in
the *follower's* log. So the follower cuts to ``min(its end of that epoch, its LEO)``
and asks again (now about its new latest epoch); when the epochs agree it cuts to
``min(leader's end offset, its own end of that epoch)``. Every round strictly lowers
the follower's latest epoch, so the loop ends.

``decide_truncation`` is the sans-IO step the replica fetcher runs per answer; the
leader's side is ``answer_offset_for_leader_epoch``.
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)


@dataclass(frozen=True, slots=True)
class TruncationStep:
    """Cut the follower's log to ``offset``; ask the leader again unless ``complete``."""

    offset: int
    complete: bool


def decide_truncation(
    leader_epoch: int,
    leader_end_offset: int,
    *,
    follower_cache: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
) -> TruncationStep:
    """One round of the follower's truncation, given the leader's answer.

    - The leader knows no epoch at or below the one asked about (answer -1/-1): the
      follower has no epoch history the leader shares, the one case left where the HW
      is the only bound Kafka has; cut to it.
    - The follower never tracked the answered epoch (its end for it is undefined): cut
      to the leader's end offset (never past our own LEO).
    - The follower's epoch at or below the answered one differs from it: our log
      diverges at the end of our epoch; cut there and ask again.
    - Otherwise: cut to the smaller of both ends of that epoch; done.
    """
    leo = follower_log_end_offset
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationStep(min(follower_high_watermark, leo), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationStep(min(leader_end_offset, leo), True)
    follower_epoch, follower_end = follower_cache.end_offset_for(leader_epoch)
    if follower_end == UNDEFINED_EPOCH_OFFSET:
        return TruncationStep(min(leader_end_offset, leo), True)
    if follower_epoch != leader_epoch:
        return TruncationStep(min(follower_end, leo), False)
    return TruncationStep(min(leader_end_offset, follower_end, leo), True)


def answer_offset_for_leader_epoch(
    cache: LeaderEpochCache, requested_epoch: int
) -> tuple[int, int]:
    """The leader's answer: (largest known epoch <= requested, where it ends).

    The end of the leader's current epoch is its log end offset; an older epoch ends
    where the next one starts; (-1, -1) when the leader knows no such epoch.
    """
    return cache.end_offset_for(requested_epoch)
