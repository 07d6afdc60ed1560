"""One consumer group's state: its members, generation, protocol and the state machine.

The state machine is Kafka's (GroupMetadata.scala), one table below; ``transition_to``
raises ``IllegalGroupTransition`` for anything else:

    Empty               -> PreparingRebalance (a member joins), Dead
    PreparingRebalance  -> CompletingRebalance (every member rejoined, or the
                           rebalance timeout passed), Empty (nobody rejoined), Dead
    CompletingRebalance -> Stable (the leader's assignment is stored),
                           PreparingRebalance (a member joins, leaves or fails), Dead
    Stable              -> PreparingRebalance (a member joins, leaves, fails or
                           changes its protocols), Dead
    Dead                -> Dead (the group was deleted, expired, or its partition
                           moved to another coordinator)

Nothing here does I/O or waits: answers to parked JoinGroup / SyncGroup requests are
``Answer`` slots the coordinator (coordinator/coordinator.py) fills, and the requests'
tasks wait on them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeAlias, TypedDict, TypeVar

import trio

from minibroker.protocol.errors import KafkaError, MinibrokerError
from minibroker.protocol.messages import bodies
from minibroker.protocol.offsets_topic import OffsetCommitValue
from minibroker.protocol.topic_partition import TopicPartition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


TRANSITIONS: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.DEAD}
    ),
    GroupState.STABLE: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.DEAD: frozenset({GroupState.DEAD}),
}
"""From each state, the states a group may move to (the module docstring says when)."""


class IllegalGroupTransition(MinibrokerError):
    """A transition the table does not allow: a coordinator bug, never a client's."""


AnswerT = TypeVar("AnswerT")
KeyT = TypeVar("KeyT")


class Answer(Generic[AnswerT]):
    """A parked request's answer: set once by the coordinator, awaited by the request."""

    __slots__ = ("_event", "_value")

    _value: AnswerT
    """Assigned by the first ``set``; read only once the event is set."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self, value: AnswerT) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def get(self) -> AnswerT | None:
        """The answer if set, else None."""
        return self._value if self._event.is_set() else None

    async def wait(self) -> AnswerT:
        await self._event.wait()
        return self._value


class Written(TypedDict, Generic[KeyT], total=False):
    """What a write the coordinator runs detached from the request answers: each key's
    error code once written, or (``error_code`` and ``_error``) the error that failed
    it as a whole, which the request's handler raises."""

    errors: dict[KeyT, int]
    error_code: int
    _error: KafkaError


JoinAnswer: TypeAlias = Answer[bodies.JoinGroupResponse]
"""A JoinGroup's answer (coordinator/answers.py builds the bodies)."""
SyncAnswer: TypeAlias = Answer[bodies.SyncGroupResponse]
"""A SyncGroup's answer."""


@dataclass(slots=True, eq=False)
class Member:
    """One member: what it joined with, its assignment, and its parked requests."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinAnswer | None = None
    awaiting_sync: SyncAnswer | None = None
    heartbeat_deadline: float = 0.0
    """Trio time after which the member is expired (unless awaiting join or sync)."""
    is_new: bool = True
    """Joined in the current rebalance and not yet answered."""

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols


@dataclass(slots=True, eq=False)
class Group:
    """A group's metadata as Kafka's GroupMetadata keeps it."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    """Member ids handed out with MEMBER_ID_REQUIRED whose JoinGroup is still to come."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> the member id that holds it."""
    current_state_timestamp: int = -1
    """Wall-clock ms of the last state change (the offsets' retention counts from it)."""
    new_member_added: bool = False
    """A member joined during the current (initial) rebalance delay."""
    rebalance_token: int = 0
    """Bumped on every new rebalance, so a stale delayed-join task knows to stop."""
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    """Committed offsets, as written to the offsets topic."""
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetCommitValue]] = field(
        default_factory=dict
    )
    """Offsets of open transactions, per producer id: committed by their marker
    (TxnOffsetCommit; GroupMetadataManager.complete_txn)."""
    offset_commit_order: dict[TopicPartition, int] = field(default_factory=dict)
    """Per partition, the place in the log's order of the commit ``offsets`` holds
    (GroupMetadataManager.store_offsets: a commit replicated late never replaces a later one)."""

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if target not in TRANSITIONS[self.state]:
            raise IllegalGroupTransition(
                f"group {self.group_id!r}: {self.state.value} -> {target.value} is not allowed"
            )
        self.state = target
        self.current_state_timestamp = now_ms

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return GroupState.PREPARING_REBALANCE in TRANSITIONS[self.state]

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id is now held by another member id."""
        if instance_id is None:
            return False
        holder = self.static_members.get(instance_id)
        return holder is not None and holder != member_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a rejoining static member a new member id (its old requests are fenced)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """A joining member fits when the group is empty (then it needs a type and at
        least one protocol) or shares the type and a protocol every member offers."""
        names = set(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred candidate protocol."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume, when every member speaks the consumer protocol
        (None: unknown, so every topic counts as subscribed)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= consumer_subscription_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics


def consumer_subscription_topics(metadata: bytes) -> set[str]:
    """The topics of Kafka's ConsumerProtocol Subscription: int16 version, then an int32
    count of int16-length strings (the rest - user data, owned partitions - is skipped)."""
    if len(metadata) < 6:
        raise ValueError("subscription too short")
    count = int.from_bytes(metadata[2:6], "big", signed=True)
    pos = 6
    topics: set[str] = set()
    for _ in range(max(count, 0)):
        if pos + 2 > len(metadata):
            raise ValueError("subscription truncated")
        n = int.from_bytes(metadata[pos : pos + 2], "big", signed=True)
        pos += 2
        if n < 0 or pos + n > len(metadata):
            raise ValueError("subscription truncated")
        topics.add(metadata[pos : pos + n].decode(errors="replace"))
        pos += n
    return topics
