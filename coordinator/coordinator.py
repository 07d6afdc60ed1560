"""GroupCoordinator: Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and the offset APIs' group checks, over coordinator/group.py's state.

It owns one collaborator per concern and handles JoinGroup and SyncGroup itself:
``rebalancer`` (coordinator/rebalance.py) holds the state, the tasks and the rebalance
between the joins (the delayed join and its completion); ``membership``
(coordinator/membership.py) heartbeats, session expiry, LeaveGroup and leadership
changes; ``offsets`` (coordinator/offset_operations.py) the offset and administration
APIs. The collaborators share the rebalancer, not a base class.

How a rebalance runs. A JoinGroup from a new member first gets MEMBER_ID_REQUIRED and
an id (KIP-394: a client that dies now leaves only a *pending* id, dropped after its
session timeout); with that id it joins. A join moves the group to PreparingRebalance
and parks the request: its answer is an ``Answer`` the rebalance fills. The rebalance
completes (a *delayed join*, parked in the join purgatory keyed by group id) when every
known member has rejoined, or when the longest rebalance timeout passes, when members
that did not rejoin are dropped. An Empty group's first rebalance waits
``group.initial.rebalance.delay.ms`` more (with 0, a 50 ms round), extended while
members keep arriving, so a starting application's consumers land in one generation.
Completion bumps the generation, picks the protocol every member supports (by vote),
answers every parked join (the leader gets the members' metadata) and moves to
CompletingRebalance. The leader's SyncGroup carries the assignments: they are written to
``__consumer_offsets`` (acks=all), then every parked SyncGroup is answered and the group
is Stable.

A join from a known member of a Stable group whose protocols are unchanged (and who is
not the leader) is answered at once with the current generation. A static member
(``group.instance.id``) that rejoins with a new member id takes over its old one (the
old id is then fenced: FENCED_INSTANCE_ID) and, when the group is Stable and its
protocols are unchanged, gets its old assignment back without a rebalance.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import trio

from minibroker.coordinator.answers import join_answer, join_error, sync_answer, sync_error
from minibroker.coordinator.group import Answer, Group, GroupState, JoinAnswer, Member, SyncAnswer
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager
from minibroker.coordinator.membership import GroupMembership
from minibroker.coordinator.offset_operations import GroupOffsetOperations
from minibroker.coordinator.rebalance import GroupConfig, GroupRebalancer
from minibroker.protocol.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from minibroker.storage.log_config import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True


class GroupCoordinator:
    """The group coordinator of one broker: ``run`` it in a nursery, then hand it (and
    its ``membership`` and ``offsets``) the requests of the groups whose offsets
    partitions this broker leads."""

    def __init__(self, manager: GroupMetadataManager, config: GroupConfig, *, clock: Clock) -> None:
        self.manager = manager
        self.config = config
        self.clock = clock
        self.rebalancer = GroupRebalancer(manager, config, clock=clock)
        self.membership = GroupMembership(self.rebalancer)
        self.offsets = GroupOffsetOperations(self.rebalancer)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the timers and background writes until cancelled."""
        await self.rebalancer.run(task_status=task_status)

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, request: JoinRequest) -> JoinAnswer:
        """Handle a JoinGroup: its Answer is filled now (errors, MEMBER_ID_REQUIRED) or
        when the rebalance completes."""
        answer: JoinAnswer = Answer()
        try:
            self._join(request, answer)
        except KafkaError as exc:
            answer.set(join_error(exc, request.member_id))
        return answer

    def _join(self, req: JoinRequest, answer: JoinAnswer) -> None:
        self.rebalancer.check_group(req.group_id)
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside "
                f"[{self.config.min_session_timeout_ms}, {self.config.max_session_timeout_ms}]"
            )
        group = self.manager.group(req.group_id)
        if group is None:
            if req.member_id:
                raise UnknownMemberIdError(f"group {req.group_id!r} has no member {req.member_id}")
            group = self.manager.add_group(
                Group(req.group_id, current_state_timestamp=self.clock())
            )
        if group.is_(GroupState.DEAD):
            # Deleted or moved meanwhile: the client finds the coordinator again.
            raise CoordinatorNotAvailableError(f"group {req.group_id!r} is being removed")
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            raise InconsistentGroupProtocolError(
                f"protocols of type {req.protocol_type!r} do not match group {req.group_id!r}"
            )
        if not req.member_id:
            self._join_unknown_member(group, req, answer)
        else:
            self._join_known_member(group, req, answer)

    def _join_unknown_member(self, group: Group, req: JoinRequest, answer: JoinAnswer) -> None:
        new_id = f"{req.client_id or 'member'}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, req, old_id, new_id, answer)
                return
            self._add_member_and_rebalance(group, req, new_id, answer)
            return
        if req.require_known_member_id:
            if len(group.members) + len(group.pending_members) >= self.config.max_size:
                raise GroupMaxSizeReachedError(f"group {group.group_id!r} is full")
            group.pending_members.add(new_id)
            self.rebalancer.spawn(
                self.membership.expire_pending_member, group, new_id, req.session_timeout_ms
            )
            answer.set(
                {
                    **join_error(MemberIdRequiredError(), new_id),
                    "member_id": new_id,
                }
            )
            return
        self._add_member_and_rebalance(group, req, new_id, answer)

    def _join_known_member(self, group: Group, req: JoinRequest, answer: JoinAnswer) -> None:
        if req.member_id in group.pending_members:
            group.pending_members.discard(req.member_id)
            self._add_member_and_rebalance(group, req, req.member_id, answer)
            return
        if group.is_static_member_fenced(req.member_id, req.group_instance_id):
            raise FencedInstanceIdError(
                f"instance {req.group_instance_id!r} is held by another member id"
            )
        member = group.members.get(req.member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            raise UnknownMemberIdError(f"{req.member_id} is not a member of {group.group_id!r}")
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, answer)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # A retry of a join whose answer was lost: answer the same generation.
                answer.set(join_answer(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, answer)
        elif group.is_(GroupState.STABLE):
            if member.member_id == group.leader_id or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, answer)
            else:
                answer.set(join_answer(group, member))

    def _replace_static_member(
        self, group: Group, req: JoinRequest, old_id: str, new_id: str, answer: JoinAnswer
    ) -> None:
        old = group.members[old_id]
        # The old incarnation's parked requests learn they are fenced.
        if old.awaiting_join is not None:
            old.awaiting_join.set(join_error(FencedInstanceIdError(), old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            old.awaiting_sync.set(sync_error(FencedInstanceIdError()))
            old.awaiting_sync = None
        same_protocols = old.matches(req.protocols)
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self.rebalancer.extend_session(member)  # its session task keeps watching the same Member
        if group.is_(GroupState.STABLE) and same_protocols:
            # Nothing changed for the group: the member gets its old assignment back
            # through SyncGroup, no rebalance (KIP-345).
            answer.set(join_answer(group, member))
            return
        member.protocols = list(req.protocols)
        member.awaiting_join = answer
        self.rebalancer.maybe_prepare_rebalance(
            group, f"static member {req.group_instance_id} rejoined"
        )
        self.rebalancer.join_purgatory.notify(group.group_id)

    def _add_member_and_rebalance(
        self, group: Group, req: JoinRequest, member_id: str, answer: JoinAnswer
    ) -> None:
        if len(group.members) >= self.config.max_size:
            raise GroupMaxSizeReachedError(f"group {group.group_id!r} is full")
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            awaiting_join=answer,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # the initial rebalance may wait for more (Kafka's rule)
        group.add(member)
        self.rebalancer.extend_session(member)
        self.rebalancer.spawn(self.membership.watch_session, group, member)
        self.rebalancer.maybe_prepare_rebalance(group, f"member {member_id} joined")
        self.rebalancer.join_purgatory.notify(group.group_id)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, answer: JoinAnswer
    ) -> None:
        if member.awaiting_join is not None and member.awaiting_join is not answer:
            # The client gave up on its earlier join and sent another: answer that one.
            member.awaiting_join.set(join_error(RebalanceInProgressError(), member.member_id))
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.awaiting_join = answer
        self.rebalancer.extend_session(member)
        self.rebalancer.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self.rebalancer.join_purgatory.notify(group.group_id)

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncAnswer:
        answer: SyncAnswer = Answer()
        try:
            self.rebalancer.check_group(group_id)
            group = self.manager.group(group_id)
            if group is None:
                raise UnknownMemberIdError(f"group {group_id!r} does not exist")
            if group.is_static_member_fenced(member_id, group_instance_id):
                raise FencedInstanceIdError(f"instance {group_instance_id!r} is held by another")
            member = group.members.get(member_id)
            if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
                raise UnknownMemberIdError(f"{member_id} is not a member of {group_id!r}")
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} is not the group's {group.generation_id}"
                )
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise InconsistentGroupProtocolError("protocol does not match the group's")
            if group.is_(GroupState.PREPARING_REBALANCE):
                raise RebalanceInProgressError(f"group {group_id!r} is rebalancing")
            if group.is_(GroupState.STABLE):
                answer.set(sync_answer(group, member.assignment))
                return answer
            # CompletingRebalance: park until the leader's assignment is stored.
            if member.awaiting_sync is not None:
                member.awaiting_sync.set(sync_error(RebalanceInProgressError()))
            member.awaiting_sync = answer
            self.rebalancer.extend_session(member)
            if member_id == group.leader_id:
                self.rebalancer.spawn(
                    self._store_assignment, group, group.generation_id, assignments
                )
        except KafkaError as exc:
            answer.set(sync_error(exc))
        return answer

    async def _store_assignment(
        self, group: Group, generation: int, assignments: dict[str, bytes]
    ) -> None:
        full = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        error = await self.manager.store_group(group, full)
        if group.generation_id != generation or not group.is_(GroupState.COMPLETING_REBALANCE):
            return  # a member joined or left meanwhile: that rebalance answers everyone
        if error is not None:
            log.warning("cannot store the assignment of group %r: %s", group.group_id, error)
            self.rebalancer.reset_assignments(group, error)
            self.rebalancer.prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member_id, member in group.members.items():
            member.assignment = full.get(member_id, b"")
            if member.awaiting_sync is not None:
                member.awaiting_sync.set(sync_answer(group, member.assignment))
                member.awaiting_sync = None
                self.rebalancer.extend_session(member)
        group.transition_to(GroupState.STABLE, self.clock())
        log.info("group %r stable at generation %d", group.group_id, generation)
