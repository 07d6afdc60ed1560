"""The group coordinator's core: its state, its tasks, and the rebalance engine every
request that changes a group's membership drives.

How a rebalance runs between the requests. ``_maybe_prepare_rebalance`` moves a group
that may rebalance to PreparingRebalance (answering parked SyncGroups of the previous
generation with REBALANCE_IN_PROGRESS) and starts a *delayed join*, keyed by group id
in the join purgatory: it completes when every known member has rejoined, or when the
longest rebalance timeout passes. An Empty group's first rebalance waits
``group.initial.rebalance.delay.ms`` instead, extended while members keep arriving
(Kafka's InitialDelayedJoin), so a starting application's consumers land in one
generation (with no delay, in short rounds: ``ZERO_DELAY_ROUND_S``). Completion drops
dynamic members that did not rejoin, bumps the generation, picks the protocol every
member supports (by vote), answers every parked join (the leader gets the members'
metadata) and moves to CompletingRebalance; with nobody left the group is Empty and
that is stored. Each rebalance carries a token: a delayed join whose token is stale (a
newer rebalance started, or the group was unloaded) does nothing.

Work that writes to the log (the leader's assignment, commits, deletions) runs in the
coordinator's own nursery (``run``), not in the request's task, so a client closing
its connection mid-write cannot leave memory and log disagreeing.

``GroupCoordinator`` (coordinator/coordinator.py: JoinGroup and SyncGroup) owns one
``GroupRebalancer`` and hands it to its other collaborators, ``GroupMembership``
(coordinator/membership.py: heartbeats, session expiry, LeaveGroup, leadership changes)
and ``GroupOffsetOperations`` (coordinator/offset_operations.py): the one state they
share is here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from minibroker.broker.replication.purgatory import Purgatory
from minibroker.coordinator.answers import join_answer, sync_error
from minibroker.coordinator.group import Answer, Group, GroupState, KeyT, Member, Written
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager
from minibroker.protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    KafkaError,
    RebalanceInProgressError,
)
from minibroker.storage.log_config import Clock

# One logger for the whole GroupCoordinator, whichever of its parts reports.
log = logging.getLogger("minibroker.coordinator.coordinator")


ZERO_DELAY_ROUND_S = 0.05
"""An empty group's first rebalance with ``group.initial.rebalance.delay.ms`` 0 still
waits this long, again while members keep arriving, then for every member it knows.
Kafka completes even a 0 ms delay from its purgatory's timer, going round again while
members are added (InitialDelayedJoin), and its joins took 30-260 ms on the 2-core VM
under load (a lone consumer's assignment: 60-110 ms): three consumers started together
landed in one generation. Completing at once, minibroker formed a generation of one or
two, and a member joining 6-40 ms later sent the others back to rejoin, which librdkafka
does at most once a second: 1.5-3 s until the group settled."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    zero_delay_round_s: float = ZERO_DELAY_ROUND_S
    """The round of an initial rebalance with no delay (tests with a clock they move by
    hand set 0: one scheduler pass)."""


class GroupRebalancer:
    """The coordinator's state and tasks, and the rebalance between the joins; shared
    by the GroupCoordinator's collaborators."""

    def __init__(self, manager: GroupMetadataManager, config: GroupConfig, *, clock: Clock) -> None:
        self.manager = manager
        self.config = config
        self.clock = clock
        self.join_purgatory: Purgatory[str] = Purgatory("Rebalance")
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the timers and background writes until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        if self._nursery is None:
            raise CoordinatorNotAvailableError("the group coordinator is not running")
        self._nursery.start_soon(fn, *args)

    def detached(self, fn: Callable[[], Awaitable[Written[KeyT]]]) -> Answer[Written[KeyT]]:
        """Run ``fn`` in the coordinator's nursery; what it answers lands in the Answer."""
        answer: Answer[Written[KeyT]] = Answer()

        async def run() -> None:
            try:
                answer.set(await fn())
            except KafkaError as exc:
                answer.set({"error_code": exc.code, "_error": exc})
            except Exception as exc:
                log.exception("group coordinator task failed")
                answer.set({"error_code": KafkaError.code, "_error": KafkaError(repr(exc))})

        self.spawn(run)
        return answer

    def check_group(self, group_id: str) -> None:
        """The membership APIs need a group id (the offset APIs accept "", as Kafka's
        do for old clients) coordinated here."""
        if not group_id:
            raise InvalidGroupIdError("group id must not be empty")
        self.manager.check_owner(group_id)

    def extend_session(self, member: Member) -> None:
        """A sign of life: the member's session runs one session timeout from now."""
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000

    # -- rebalance -----------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_assignments(group, RebalanceInProgressError())
        initial = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock())
        group.rebalance_token += 1
        log.info(
            "group %r preparing rebalance after generation %d: %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        self.spawn(self._delayed_join, group, group.rebalance_token, initial)

    async def _delayed_join(self, group: Group, token: int, initial: bool) -> None:
        def stale() -> bool:
            return group.rebalance_token != token or not group.is_(GroupState.PREPARING_REBALANCE)

        rebalance_s = group.max_rebalance_timeout_ms() / 1000
        configured_delay = self.config.initial_rebalance_delay_ms / 1000
        if initial:
            # Kafka's InitialDelayedJoin: wait the delay (a short round when it is 0);
            # while members keep arriving, wait again (never past the rebalance timeout
            # in all). Those that joined before this task first ran are already here.
            group.new_member_added = False
            delay = configured_delay or self.config.zero_delay_round_s
            remaining = max(rebalance_s - delay, 0.0)
            while True:
                await trio.sleep(delay)
                if stale():
                    return
                if group.new_member_added and remaining > 0:
                    group.new_member_added = False
                    delay = min(delay, remaining)
                    remaining -= delay
                    continue
                break
        if not initial or not configured_delay:
            # Every known member (a pending one too) rejoins, or the rebalance timeout
            # passes: Kafka's DelayedJoin.
            deadline = trio.current_time() + rebalance_s
            while True:
                with self.join_purgatory.watch([group.group_id]) as waiter:
                    if stale():
                        return
                    if group.all_members_joined():
                        break
                    if not await waiter.wait_until(deadline):
                        break
        if not stale():
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                log.info(
                    "group %r: member %s did not rejoin in time", group.group_id, member.member_id
                )
                group.remove(member.member_id)
        if group.leader_id is not None and group.members[group.leader_id].awaiting_join is None:
            rejoined = [m.member_id for m in group.members.values() if m.awaiting_join is not None]
            if rejoined:
                group.leader_id = rejoined[0]
        now = self.clock()
        group.generation_id += 1
        group.rebalance_token += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now)
            self.spawn(self._store_empty_group, group, group.generation_id)
            log.info("group %r is empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        for member in group.members.values():
            if member.awaiting_join is not None:
                member.awaiting_join.set(join_answer(group, member))
                member.awaiting_join = None
                member.is_new = False
                self.extend_session(member)
        log.info(
            "group %r completing rebalance: generation %d, %d members, protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )

    async def _store_empty_group(self, group: Group, generation: int) -> None:
        error = await self.manager.store_group(group, {})
        if error is not None:
            log.warning(
                "cannot store empty group %r at generation %d: %s",
                group.group_id,
                generation,
                error,
            )

    def reset_assignments(self, group: Group, error: KafkaError) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                member.awaiting_sync.set(sync_error(error))
                member.awaiting_sync = None
