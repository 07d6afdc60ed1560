"""Leader election rules: pure functions from (AR, ISR, live brokers) to an Election.

Each rule answers three questions for one partition: who leads, what the ISR becomes,
and which brokers must hear about it in a LeaderAndIsr request. ``None`` means no
eligible replica is alive; the partition state machine then leaves the partition where
it was (offline, or with its old leader) and logs the failure.

Order matters: every rule walks the assignment (AR) in order, so among equally eligible
replicas the one nearer the preferred leader (AR[0]) wins. That keeps leadership where
the assignment algorithm spread it.

rule                 leader                                   new ISR        told
new partition        first live of AR                         live AR        live AR
offline              first live of AR that is in the ISR      live ISR       live AR
  ... unclean        first live of AR (only if allowed)       [leader]       live AR
unclean (asked for)  as offline, unclean always allowed       as offline     live AR
reassigned           first live of RAR that is in the ISR     unchanged      RAR
preferred            AR[0] if live and in the ISR             unchanged      AR
controlled shutdown  first live of AR in the ISR and staying  ISR minus the  AR on live or
                                                              stopping ones  stopping brokers
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False
    """True when the leader came from outside the ISR: acknowledged data may be lost."""


def _live(replicas: Sequence[int], live: Collection[int]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in live)


def elect_for_new_partition(assignment: Sequence[int], live: Collection[int]) -> Election | None:
    """A partition that never had a leader: every live replica starts in the ISR."""
    live_replicas = _live(assignment, live)
    if not live_replicas:
        return None
    return Election(live_replicas[0], live_replicas, live_replicas)


def elect_for_offline_partition(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    *,
    unclean_allowed: bool,
) -> Election | None:
    """The leader died (or the partition was offline): prefer a live ISR member; fall
    back to any live replica only when unclean election is enabled."""
    live_replicas = _live(assignment, live)
    for replica in live_replicas:
        if replica in isr:
            return Election(replica, _live(isr, live), live_replicas)
    if unclean_allowed and live_replicas:
        leader = live_replicas[0]
        return Election(leader, (leader,), live_replicas, unclean=True)
    return None


def elect_unclean_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """ElectLeaders with election type UNCLEAN: an operator accepts losing data to get
    the partition back. A live ISR member still wins (then nothing is lost); only
    without one does the first live replica lead alone, whatever the topic's
    ``unclean.leader.election.enable`` says."""
    return elect_for_offline_partition(assignment, isr, live, unclean_allowed=True)


def elect_for_reassigned_partition(
    target: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """During a reassignment the leader must come from RAR and be caught up."""
    for replica in target:
        if replica in live and replica in isr:
            return Election(replica, tuple(isr), tuple(target))
    return None


def elect_preferred_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """Move leadership back to AR[0], if it can lead without losing data."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return Election(preferred, tuple(isr), tuple(assignment))
    return None


def elect_for_controlled_shutdown(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """A broker is stopping: hand leadership to an ISR member that stays, and drop the
    stopping brokers from the ISR so they are never chosen while they go away."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    recipients = _live(assignment, live_or_shutting_down)
    for replica in assignment:
        if replica in live_or_shutting_down and replica in new_isr:
            return Election(replica, new_isr, recipients)
    return None
