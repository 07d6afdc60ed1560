"""Members' lives in a group: heartbeats, session expiry, LeaveGroup, and what a
change of this broker's leadership of an offsets partition does to them.

How this works. Every member has a heartbeat deadline, one session timeout after its
last sign of life (a Heartbeat, a JoinGroup or SyncGroup); a task per member
(``_watch_session``) sleeps until it and removes a member that let it pass. A member
parked in a join or sync counts as alive. A Heartbeat answers REBALANCE_IN_PROGRESS
while the group rebalances, telling the member to rejoin. A pending member id (handed
out with MEMBER_ID_REQUIRED, KIP-394) is dropped after one session timeout unless its
client joins with it.

A member that leaves or expires answers its parked requests UNKNOWN_MEMBER_ID and
starts a rebalance of a Stable or CompletingRebalance group. A static member
(``group.instance.id``) leaves by its instance id; another member id for that instance
is FENCED_INSTANCE_ID.

When this broker starts leading an offsets partition, the members loaded from it get a
full session timeout to heartbeat; when it stops, every parked request of its groups
answers NOT_COORDINATOR and their pending rebalances are abandoned.

A collaborator of GroupCoordinator (coordinator/coordinator.py), working on the state
and tasks of its ``GroupRebalancer`` (coordinator/rebalance.py).
"""

from __future__ import annotations

import logging

import trio

from minibroker.coordinator.answers import join_error, sync_error
from minibroker.coordinator.group import Group, GroupState, Member
from minibroker.coordinator.rebalance import GroupRebalancer
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from minibroker.protocol.messages import bodies

log = logging.getLogger("minibroker.coordinator.coordinator")  # the GroupCoordinator's


class GroupMembership:
    """Heartbeats, session expiry, LeaveGroup and leadership changes."""

    def __init__(self, rebalancer: GroupRebalancer) -> None:
        self.rebalancer = rebalancer
        self.manager = rebalancer.manager
        self.manager.on_unload = self._on_group_unloaded

    # -- Heartbeat -----------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> None:
        """Raises the error a Heartbeat answers; returns when it answers NONE."""
        self.rebalancer.check_group(group_id)
        group = self.manager.group(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id!r} does not exist")
        if group.is_static_member_fenced(member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id!r} is held by another")
        if group.is_(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id!r} is being removed")
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            raise UnknownMemberIdError(f"{member_id} is not a member of {group_id!r}")
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not the group's {group.generation_id}"
            )
        self.rebalancer.extend_session(member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing: rejoin")

    async def watch_session(self, group: Group, member: Member) -> None:
        """Expire ``member`` once a session timeout passes without a sign of life."""
        while True:
            await trio.sleep_until(member.heartbeat_deadline)
            if group.members.get(member.member_id) is not member or group.is_(GroupState.DEAD):
                return
            if trio.current_time() < member.heartbeat_deadline:
                continue
            if member.awaiting_join is not None or member.awaiting_sync is not None:
                # Parked in the protocol: alive by definition.
                self.rebalancer.extend_session(member)
                continue
            log.info(
                "group %r: member %s missed its session timeout", group.group_id, member.member_id
            )
            self._remove_member_and_update_group(group, member)
            return

    async def expire_pending_member(self, group: Group, member_id: str, session_ms: int) -> None:
        await trio.sleep(session_ms / 1000)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.rebalancer.join_purgatory.notify(group.group_id)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        if member.awaiting_join is not None:
            member.awaiting_join.set(join_error(UnknownMemberIdError(), member.member_id))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            member.awaiting_sync.set(sync_error(UnknownMemberIdError()))
            member.awaiting_sync = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.rebalancer.maybe_prepare_rebalance(group, f"member {member.member_id} left")
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.members or group.pending_members:
            self.rebalancer.join_purgatory.notify(group.group_id)
        else:
            # Nobody is left to wait for: the group is Empty within this request, as in
            # Kafka, so the answer to the next request already sees it so.
            self.rebalancer.complete_join(group)

    # -- LeaveGroup ----------------------------------------------------------------------------

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> list[bodies.LeaveGroupResponseMember]:
        """Remove members; per member {member_id, group_instance_id, error_code}. Raises
        what the whole request answers."""
        self.rebalancer.check_group(group_id)
        group = self.manager.group(group_id)
        results: list[bodies.LeaveGroupResponseMember] = []
        for member_id, instance_id in leaving:
            code = NONE
            if group is None:
                code = UnknownMemberIdError.code
            elif group.is_(GroupState.DEAD):
                raise CoordinatorNotAvailableError(f"group {group_id!r} is being removed")
            else:
                code = self._leave_one(group, member_id, instance_id)
            results.append(
                {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            )
        return results

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            holder = group.static_member_id(instance_id)
            if holder is None:
                return UnknownMemberIdError.code
            if member_id and member_id != holder:
                return FencedInstanceIdError.code
            member_id = holder
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.rebalancer.join_purgatory.notify(group.group_id)
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UnknownMemberIdError.code
        log.info("group %r: member %s left", group.group_id, member_id)
        self._remove_member_and_update_group(group, member)
        return NONE

    # -- leadership ----------------------------------------------------------------------------

    async def partition_led(self, partition: int, epoch: int) -> None:
        """This broker leads ``partition`` at ``epoch``: load it, then watch the loaded
        members' sessions (they must heartbeat the new coordinator in time)."""
        await self.manager.became_leader(partition, epoch)
        for group in self.manager.owned_groups():
            if self.manager.partition_of(group.group_id) != partition:
                continue
            for member in group.members.values():
                if member.heartbeat_deadline == 0.0:
                    self.rebalancer.extend_session(member)
                    self.rebalancer.spawn(self.watch_session, group, member)

    def _on_group_unloaded(self, group: Group) -> None:
        group.rebalance_token += 1
        for member in group.members.values():
            if member.awaiting_join is not None:
                member.awaiting_join.set(join_error(NotCoordinatorError(), member.member_id))
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                member.awaiting_sync.set(sync_error(NotCoordinatorError()))
                member.awaiting_sync = None
        self.rebalancer.join_purgatory.notify(group.group_id)
