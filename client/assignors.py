"""Partition assignors: which member of a consumer group reads which partition.

The group's leader runs one of these over every member's subscription (decoded from
the JoinGroup response) and sends the result in SyncGroup. They are pure functions of
their input, named as Kafka names them so that members of other clients pick the same
one: ``range``, ``roundrobin`` and ``cooperative-sticky``.

- **range** (Kafka's RangeAssignor): per topic, the members subscribed to it in order
  each take a contiguous range; the first ``partitions % members`` take one more.
- **roundrobin** (RoundRobinAssignor): every partition of every subscribed topic, in
  (topic, partition) order, dealt to the members in turn, skipping a member that is not
  subscribed to that topic.
- **cooperative-sticky** (CooperativeStickyAssignor): members keep what they own as
  far as balance allows (no member more than one partition above another that could
  take it), the rest is dealt to the least loaded. It is *cooperative*: a partition
  that moves from one member to another is left out of this round's assignment, so
  its owner revokes it (and only it) and rejoins, and the next round gives it to its
  new member. Members keep reading everything else throughout.

Members are ordered by ``group_instance_id`` when both have one, else by member id,
as Kafka orders them, so every client computes the same answer.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from minibroker.protocol.consumer_protocol import Subscription

TopicPartition = tuple[str, int]
Assignments = dict[str, list[TopicPartition]]
"""member id -> partitions, each list sorted."""

_GENERATION = struct.Struct(">i")


class RebalanceProtocol(Enum):
    EAGER = "eager"  # every member gives up everything before each rebalance
    COOPERATIVE = "cooperative"  # members give up only what moves


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member's subscription as the leader sees it in the JoinGroup response."""

    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None

    @property
    def sort_key(self) -> tuple[int, str, str]:
        if self.group_instance_id is not None:
            return (0, self.group_instance_id, self.member_id)
        return (1, "", self.member_id)


class Assignor(Protocol):
    name: str
    rebalance_protocol: RebalanceProtocol

    def user_data(self, generation_id: int) -> bytes | None:
        """What the member adds to its subscription for this assignor."""
        ...

    def assign(
        self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> Assignments:
        """``partitions``: topic -> partition count of every topic some member wants
        (topics that do not exist are absent)."""
        ...


def _ordered(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members, key=lambda m: m.sort_key)


def _empty(members: Sequence[MemberSubscription]) -> Assignments:
    return {m.member_id: [] for m in members}


class RangeAssignor:
    name = "range"
    rebalance_protocol = RebalanceProtocol.EAGER

    def user_data(self, generation_id: int) -> bytes | None:
        return None

    def assign(
        self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> Assignments:
        result = _empty(members)
        for topic in sorted(partitions):
            subscribers = [m for m in _ordered(members) if topic in m.subscription.topics]
            if not subscribers:
                continue
            per_member, extra = divmod(partitions[topic], len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                length = per_member + (1 if i < extra else 0)
                result[member.member_id] += [(topic, p) for p in range(start, start + length)]
                start += length
        return {m: sorted(tps) for m, tps in result.items()}


class RoundRobinAssignor:
    name = "roundrobin"
    rebalance_protocol = RebalanceProtocol.EAGER

    def user_data(self, generation_id: int) -> bytes | None:
        return None

    def assign(
        self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> Assignments:
        result = _empty(members)
        ordered = _ordered(members)
        if not ordered:
            return result
        turn = 0
        for topic in sorted(partitions):
            for partition in range(partitions[topic]):
                # The next member (in turn order) subscribed to the topic takes it.
                for step in range(len(ordered)):
                    member = ordered[(turn + step) % len(ordered)]
                    if topic in member.subscription.topics:
                        result[member.member_id].append((topic, partition))
                        turn = (turn + step + 1) % len(ordered)
                        break
        return result


class CooperativeStickyAssignor:
    name = "cooperative-sticky"
    rebalance_protocol = RebalanceProtocol.COOPERATIVE

    def user_data(self, generation_id: int) -> bytes | None:
        # Kafka's CooperativeStickyAssignor puts the generation the owned partitions
        # belong to in the user data (subscription v1 has no field for it).
        return _GENERATION.pack(generation_id)

    def assign(
        self, partitions: Mapping[str, int], members: Sequence[MemberSubscription]
    ) -> Assignments:
        ordered = _ordered(members)
        owners = _previous_owners(partitions, ordered)
        current: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
        for tp, member_id in sorted(owners.items()):
            current[member_id].append(tp)
        eligible = {m.member_id: set(m.subscription.topics) for m in ordered}
        unassigned = [
            (t, p)
            for t in sorted(partitions)
            for p in range(partitions[t])
            if (t, p) not in owners and any(t in topics for topics in eligible.values())
        ]
        order = [m.member_id for m in ordered]
        for tp in unassigned:
            takers = [m for m in order if tp[0] in eligible[m]]
            least = min(takers, key=lambda m: len(current[m]))
            current[least].append(tp)
        _balance(current, eligible, order)
        # A partition that changes hands is withheld this round: its owner revokes it
        # first, then the rebalance that revocation triggers hands it over.
        return {m: sorted(tp for tp in tps if owners.get(tp, m) == m) for m, tps in current.items()}


def _generation_of(sub: Subscription) -> int:
    if sub.generation_id >= 0:
        return sub.generation_id
    if sub.user_data is not None and len(sub.user_data) == _GENERATION.size:
        generation: int = _GENERATION.unpack(sub.user_data)[0]
        return generation
    return -1


def _previous_owners(
    partitions: Mapping[str, int], members: Sequence[MemberSubscription]
) -> dict[TopicPartition, str]:
    """Who validly owns each partition: a claim from the newest generation wins; two
    claims from one generation cancel (neither keeps it); a partition of a topic the
    member no longer subscribes to, or that no longer exists, is owned by nobody."""
    claims: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in members:
        generation = _generation_of(member.subscription)
        for topic, parts in member.subscription.owned_partitions:
            if topic not in member.subscription.topics or topic not in partitions:
                continue
            for p in parts:
                if not 0 <= p < partitions[topic]:
                    continue
                best = claims.get((topic, p))
                if best is None or generation > best[0]:
                    claims[(topic, p)] = (generation, [member.member_id])
                elif generation == best[0]:
                    best[1].append(member.member_id)
    return {tp: ids[0] for tp, (_, ids) in claims.items() if len(ids) == 1}


def _balance(
    current: dict[str, list[TopicPartition]], eligible: dict[str, set[str]], order: list[str]
) -> None:
    """Move partitions from the most to the least loaded member that may take them,
    until no move makes two eligible members differ by less. Every move lowers the
    sum of squared loads, so this ends; the bound is a safety net."""
    for _ in range(sum(len(tps) for tps in current.values()) * max(len(order), 1) + 1):
        moved = False
        for giver in sorted(order, key=lambda m: -len(current[m])):
            for tp in sorted(current[giver], reverse=True):  # the highest partitions move first
                takers = [
                    m
                    for m in order
                    if tp[0] in eligible[m] and len(current[m]) + 1 < len(current[giver])
                ]
                if takers:
                    taker = min(takers, key=lambda m: len(current[m]))
                    current[giver].remove(tp)
                    current[taker].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


ASSIGNORS: dict[str, Assignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor())
}
"""Assignors by protocol name; ``round-robin`` is accepted as an alias below."""

_ALIASES = {"round-robin": "roundrobin"}


def assignor(name: str) -> Assignor:
    """The assignor named ``name`` (Kafka's protocol names; "round-robin" also works)."""
    found = ASSIGNORS.get(_ALIASES.get(name, name))
    if found is None:
        raise ValueError(
            f"unknown partition assignment strategy {name!r} "
            f"(one of {', '.join(sorted(ASSIGNORS))})"
        )
    return found
