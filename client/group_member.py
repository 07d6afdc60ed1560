"""One consumer's membership of a group: join, sync, heartbeat, rejoin, leave.

How this works (Kafka's classic group protocol, client side). ``run`` joins the group
and then waits for a reason to join again; a second task sends heartbeats while the
member is stable. Joining is two requests to the coordinator:

1. **JoinGroup** with the member's subscription encoded for every assignor it knows
   (Kafka's ConsumerProtocol bytes). A new member first gets MEMBER_ID_REQUIRED with
   its member id and joins again with it. The answer, once every member has joined,
   names the generation, the chosen assignor and the leader; the leader also gets
   every member's subscription.
2. **SyncGroup**: the leader sends everyone's assignment (computed with the chosen
   assignor, client/assignors.py); every member gets its own back.

Rebalance protocols. With an *eager* assignor (range, roundrobin) a member gives up
every partition before it joins. With *cooperative-sticky* it keeps them; after the
sync it gives up only those no longer assigned to it and, if there were any, joins
again at once so that the next round can hand them to their new member.

Errors (as Kafka's AbstractCoordinator reads them): REBALANCE_IN_PROGRESS (from a
heartbeat or a sync) means join again; ILLEGAL_GENERATION means this generation is
over and UNKNOWN_MEMBER_ID that the member was removed (its id is dropped too): the
partitions are *lost* (the callbacks are told, nothing is committed for them) and the
member joins again. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and broken connections
make the link find the coordinator again. Anything else (INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, FENCED_INSTANCE_ID, ...) is fatal: ``run`` stores it in
``fatal`` and stops; the consumer raises it from ``poll``.

The member's state moves along one table, ``TRANSITIONS``; anything else raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

import trio

from minibroker.client.assignors import Assignor, MemberSubscription, RebalanceProtocol
from minibroker.client.errors import wire_error
from minibroker.client.group_coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    CoordinatorLink,
)
from minibroker.protocol.api import ApiKey
from minibroker.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic,
)
from minibroker.protocol.errors import KafkaError, NetworkError, RequestTimedOutError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
NO_GENERATION = -1
JOIN_REQUEST_MARGIN_S = 5.0
"""A JoinGroup is held by the coordinator up to the rebalance timeout; the request may
take that long plus this (Kafka adds the same 5 s to its request timeout)."""


class MemberState(Enum):
    UNJOINED = "unjoined"  # no generation: not joined yet, or it was lost
    JOINING = "joining"  # JoinGroup sent
    SYNCING = "syncing"  # JoinGroup answered, SyncGroup sent
    STABLE = "stable"  # assignment received; heartbeats flow


_UNJOINED, _JOINING, _SYNCING, _STABLE = MemberState
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    _UNJOINED: frozenset({_JOINING}),
    _JOINING: frozenset({_JOINING, _SYNCING, _UNJOINED}),  # retry, joined, fenced
    _SYNCING: frozenset({_JOINING, _STABLE, _UNJOINED}),  # rejoin, synced, fenced
    _STABLE: frozenset({_JOINING, _UNJOINED}),  # rebalance, fenced or left
}


class IllegalMemberTransition(RuntimeError):
    pass


class GroupHost(Protocol):
    """What the member needs from its consumer."""

    def subscribed_topics(self) -> Sequence[str]: ...

    def owned_partitions(self) -> list[TopicPartition]: ...

    async def revoke_partitions(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        """Stop reading them (committing first unless ``lost``) and tell the listener."""
        ...

    async def add_partitions(self, partitions: list[TopicPartition]) -> None:
        """Start reading them from their committed offsets and tell the listener."""
        ...

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each topic that exists (the leader assigns these)."""
        ...


@dataclass(frozen=True, slots=True)
class MemberSettings:
    group_id: str
    assignors: tuple[Assignor, ...]
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    heartbeat_interval_ms: int = 3_000
    group_instance_id: str | None = None
    retry_backoff_s: float = 0.1
    request_timeout_s: float = 30.0


class GroupMember:
    """The membership state machine of one consumer; see the module docstring."""

    def __init__(self, settings: MemberSettings, link: CoordinatorLink, host: GroupHost) -> None:
        self.settings = settings
        self.link = link
        self.host = host
        self.state = MemberState.UNJOINED
        self.generation_id = NO_GENERATION
        self.member_id = ""
        self.leader_id = ""
        self.protocol_name: str | None = None
        self.fatal: KafkaError | None = None
        self.assigned_counts: dict[str, int] = {}
        """The partition counts the leader assigned from (to see them change)."""
        self._rejoin = trio.Event()
        self._rejoin.set()  # the first join
        self._stable = trio.Event()
        self._generation_lost = False
        self.on_fatal: Callable[[], None] = lambda: None

    # --- state ----------------------------------------------------------------------

    def _move(self, to: MemberState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalMemberTransition(f"member {self.state.value} -> {to.value}")
        self.state = to
        if to is MemberState.STABLE:
            self._stable.set()
        else:
            self._stable = trio.Event() if self._stable.is_set() else self._stable

    @property
    def is_stable(self) -> bool:
        return self.state is MemberState.STABLE

    @property
    def is_leader(self) -> bool:
        return self.is_stable and self.leader_id == self.member_id

    @property
    def protocol(self) -> RebalanceProtocol:
        chosen = self._assignor(self.protocol_name) or self.settings.assignors[0]
        return chosen.rebalance_protocol

    async def wait_stable(self) -> None:
        await self._stable.wait()

    def request_rejoin(self, reason: str) -> None:
        if not self._rejoin.is_set():
            log.info("group %s: rejoining (%s)", self.settings.group_id, reason)
        self._rejoin.set()

    def _reset_generation(self, *, forget_member: bool) -> None:
        """This generation is over (fenced): partitions held are lost."""
        self.generation_id = NO_GENERATION
        if forget_member:
            self.member_id = ""
        self._generation_lost = True
        if self.state is not MemberState.UNJOINED:
            self._move(MemberState.UNJOINED)

    # --- tasks ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Join, heartbeat, rejoin when needed; returns only on a fatal error."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeats)
            task_status.started()
            try:
                while self.fatal is None:
                    await self._rejoin.wait()
                    if self.fatal is None:
                        await self.join()
            except KafkaError as exc:
                self._fail(exc)
            nursery.cancel_scope.cancel()

    def _fail(self, error: KafkaError) -> None:
        log.error("group %s: %s", self.settings.group_id, error)
        self.fatal = error
        self.on_fatal()
        self._rejoin.set()  # wakes run, which stops

    async def join(self) -> None:
        """One complete rebalance from this member's side, until it is stable again."""
        self._rejoin = trio.Event()
        owned = self.host.owned_partitions()
        if owned and (self._generation_lost or self.protocol is RebalanceProtocol.EAGER):
            await self.host.revoke_partitions(owned, lost=self._generation_lost)
        self._generation_lost = False
        while True:
            if self.state is not MemberState.JOINING:
                self._move(MemberState.JOINING)
            joined = await self._join_group()
            if joined is None:
                continue
            assignments = await self._assign(joined) if joined["leader"] == self.member_id else {}
            self._move(MemberState.SYNCING)
            assignment = await self._sync_group(assignments)
            if assignment is None:
                if self._generation_lost:  # fenced mid-sync: what we hold is lost
                    held = self.host.owned_partitions()
                    if held:
                        await self.host.revoke_partitions(held, lost=True)
                    self._generation_lost = False
                continue
            await self._complete(assignment)
            return

    async def _join_group(self) -> dict[str, Any] | None:
        """A successful JoinGroup answer, or None to send it again."""
        settings = self.settings
        owned = group_by_topic(self.host.owned_partitions())
        topics = tuple(sorted(self.host.subscribed_topics()))
        protocols = [
            {
                "name": a.name,
                "metadata": encode_subscription(
                    Subscription(topics, a.user_data(self.generation_id), owned)
                ),
            }
            for a in settings.assignors
        ]
        body = {
            "group_id": settings.group_id,
            "session_timeout_ms": settings.session_timeout_ms,
            "rebalance_timeout_ms": settings.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": settings.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": protocols,
        }
        timeout = settings.rebalance_timeout_ms / 1000 + JOIN_REQUEST_MARGIN_S
        response = await self._request(ApiKey.JOIN_GROUP, body, timeout)
        if response is None:
            return None
        code = response.get("error_code", 0)
        if code == 0:
            self.generation_id = response["generation_id"]
            self.member_id = response["member_id"]
            self.leader_id = response["leader"]
            self.protocol_name = response.get("protocol_name")
            return response
        if code == MEMBER_ID_REQUIRED:
            self.member_id = response["member_id"]  # join again at once, with this id
        elif code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
        elif self.link.moved(code) or code in (COORDINATOR_LOAD_IN_PROGRESS, REBALANCE_IN_PROGRESS):
            await trio.sleep(settings.retry_backoff_s)
        else:
            raise wire_error(code, f"group {settings.group_id!r}", "joining")
        return None

    async def _sync_group(self, assignments: dict[str, bytes]) -> Assignment | None:
        """This member's assignment, or None to join again."""
        settings = self.settings
        body = {
            "group_id": settings.group_id,
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": settings.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }
        response = await self._request(ApiKey.SYNC_GROUP, body, settings.request_timeout_s)
        if response is None:
            return None
        code = response.get("error_code", 0)
        if code == 0:
            try:
                return decode_assignment(response.get("assignment") or b"")
            except ConsumerProtocolError as exc:
                what = f"group {settings.group_id!r}"
                raise wire_error(-1, what, f"bad assignment: {exc}") from exc
        if code == REBALANCE_IN_PROGRESS:
            return None
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self._reset_generation(forget_member=code == UNKNOWN_MEMBER_ID)
            return None
        if self.link.moved(code) or code == COORDINATOR_LOAD_IN_PROGRESS:
            await trio.sleep(settings.retry_backoff_s)
            return None
        raise wire_error(code, f"group {settings.group_id!r}", "syncing")

    async def _request(
        self, api_key: ApiKey, body: dict[str, Any], timeout: float
    ) -> dict[str, Any] | None:
        try:
            return await self.link.request(api_key, body, timeout=timeout)
        except (NetworkError, RequestTimedOutError) as exc:
            log.info("group %s: %s failed (%s)", self.settings.group_id, api_key.name, exc)
            await trio.sleep(self.settings.retry_backoff_s)
            return None

    async def _assign(self, joined: dict[str, Any]) -> dict[str, bytes]:
        """The leader's work: every member's assignment as ConsumerProtocol bytes."""
        chosen = self._assignor(self.protocol_name)
        if chosen is None:
            raise wire_error(
                INCONSISTENT_GROUP_PROTOCOL,
                f"group {self.settings.group_id!r}",
                f"unknown assignor {self.protocol_name!r}",
            )
        members = []
        for entry in joined["members"]:
            try:
                subscription = decode_subscription(entry["metadata"])
            except ConsumerProtocolError as exc:
                log.warning("member %s sent a bad subscription: %s", entry["member_id"], exc)
                subscription = Subscription(())
            members.append(
                MemberSubscription(entry["member_id"], subscription, entry.get("group_instance_id"))
            )
        topics = {t for m in members for t in m.subscription.topics}
        counts = await self.host.partition_counts(topics)
        self.assigned_counts = counts
        result = chosen.assign(counts, members)
        return {
            m.member_id: encode_assignment(Assignment(group_by_topic(result.get(m.member_id, ()))))
            for m in members
        }

    def _assignor(self, name: str | None) -> Assignor | None:
        return next((a for a in self.settings.assignors if a.name == name), None)

    async def _complete(self, assignment: Assignment) -> None:
        new = set(assignment.partitions())
        owned = set(self.host.owned_partitions())
        revoked = sorted(owned - new)
        if revoked:  # cooperative: give up what moves, then rejoin to hand it over
            await self.host.revoke_partitions(revoked, lost=False)
        await self.host.add_partitions(sorted(new - owned))
        self._move(MemberState.STABLE)
        if revoked:
            self.request_rejoin(f"{len(revoked)} partitions revoked for other members")
        log.info(
            "group %s: generation %d, member %s, %d partitions (%s)",
            self.settings.group_id,
            self.generation_id,
            self.member_id,
            len(new),
            self.protocol_name,
        )

    async def _heartbeats(self) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        while True:
            await self.wait_stable()
            generation, member = self.generation_id, self.member_id
            body = {
                "group_id": self.settings.group_id,
                "generation_id": generation,
                "member_id": member,
                "group_instance_id": self.settings.group_instance_id,
            }
            response = await self._request(ApiKey.HEARTBEAT, body, self.settings.request_timeout_s)
            if response is None or not self.is_stable or generation != self.generation_id:
                continue  # failed (retry after the backoff), or a rebalance began meanwhile
            code = response.get("error_code", 0)
            if code == 0:
                await trio.sleep(interval)
            elif code == REBALANCE_IN_PROGRESS:
                self.request_rejoin("the group is rebalancing")
            elif code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                log.info("group %s: heartbeat: %s", self.settings.group_id, code)
                self._reset_generation(forget_member=code == UNKNOWN_MEMBER_ID)
                self.request_rejoin("this member's generation is over")
            elif code == FENCED_INSTANCE_ID:  # another process took our group_instance_id
                self._reset_generation(forget_member=True)
                self._fail(wire_error(code, f"group {self.settings.group_id!r}", "heartbeat"))
                return
            elif self.link.moved(code) or code == COORDINATOR_LOAD_IN_PROGRESS:
                await trio.sleep(self.settings.retry_backoff_s)
            else:
                log.warning("group %s: heartbeat answered %d", self.settings.group_id, code)
                await trio.sleep(interval)

    async def leave(self, *, timeout_s: float) -> None:
        """Leave the group now, so others need not wait out this member's session.
        Static members (group_instance_id) do not leave on close, as in Kafka."""
        if not self.member_id or self.settings.group_instance_id is not None:
            return
        body = {
            "group_id": self.settings.group_id,
            "members": [{"member_id": self.member_id, "group_instance_id": None}],
        }
        with trio.move_on_after(timeout_s):
            try:
                await self.link.request(ApiKey.LEAVE_GROUP, body, timeout=timeout_s)
            except KafkaError as exc:
                log.info("group %s: leave failed: %s", self.settings.group_id, exc)
        self.member_id = ""
        self.generation_id = NO_GENERATION
        if self.state is not MemberState.UNJOINED:
            self._move(MemberState.UNJOINED)
