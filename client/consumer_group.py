"""The consumer's group side: subscription, committed offsets, rebalance callbacks.

How this works. A consumer built with a ``group_id`` that ``subscribe``s runs a
:class:`~minibroker.client.group_member.GroupMember` (join, sync, heartbeat) with this
object as its host: the member asks it what the consumer subscribes to and tells it
which partitions to give up and which to start reading. Starting a partition reads its
committed offset (OffsetFetch); without one the consumer's ``auto_offset_reset``
decides. Giving one up commits its position first (with ``enable_auto_commit``) and
calls the listener's ``on_partitions_revoked`` (``on_partitions_lost`` when the
generation was fenced, since another member may already own them; nothing is
committed then).

Beside the member, two tasks: auto-commit every ``auto_commit_interval_ms`` (positions
that moved since the last commit), and a metadata watch every ``metadata_max_age_ms``
that re-matches a pattern subscription against the cluster's topics and, on the
leader, notices partitions added to a subscribed topic; either change starts a
rebalance. A ``position`` is the next offset to read, so that is what is committed.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import trio

from minibroker.client.assignors import assignor
from minibroker.client.background import BackgroundTasks
from minibroker.client.group_coordinator import (
    NO_GENERATION,
    NO_MEMBER,
    CommitFailedError,
    CoordinatorLink,
    commit_offsets,
    fetch_committed,
)
from minibroker.client.group_member import GroupMember, MemberSettings
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.errors import KafkaError, MinibrokerError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Callback = Callable[[list[TopicPartition]], Awaitable[None] | None]
LEAVE_TIMEOUT_S = 5.0  # close() does not wait longer than this for LeaveGroup's answer
FATAL_CHECK_S = 0.1  # wait_for_assignment looks for a fatal group error this often
INTERNAL_TOPIC_PREFIX = "__"  # patterns never match internal topics (__consumer_offsets)


class PartitionReader(Protocol):
    """What the group side needs from the consumer's fetching side."""

    def assignment(self) -> list[TopicPartition]: ...

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None: ...

    def seek(self, topic: str, partition: int, offset: int) -> None: ...

    def position(self, topic: str, partition: int) -> int | None: ...


@dataclass(slots=True)
class Listener:
    """Rebalance callbacks; each gets a sorted list of (topic, partition) and may be a
    coroutine function. ``on_partitions_lost`` defaults to ``on_partitions_revoked``."""

    on_partitions_revoked: Callback | None = None
    on_partitions_assigned: Callback | None = None
    on_partitions_lost: Callback | None = None

    @classmethod
    def of(cls, listener: object) -> Listener:
        """A Listener from an object with any of the three methods (aiokafka style)."""
        return cls(
            getattr(listener, "on_partitions_revoked", None),
            getattr(listener, "on_partitions_assigned", None),
            getattr(listener, "on_partitions_lost", None),
        )


async def _call(callback: Callback | None, partitions: list[TopicPartition]) -> None:
    if callback is None:
        return
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result


@dataclass(frozen=True, slots=True)
class GroupOptions:
    group_id: str
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky")
    group_instance_id: str | None = None
    metadata_max_age_ms: int = 300_000
    request_timeout_s: float = 30.0


class ConsumerGroup:
    """The group membership of one consumer; the GroupHost of its GroupMember."""

    def __init__(self, options: GroupOptions, cluster: ClusterClient, reader: PartitionReader):
        self.options = options
        self.cluster = cluster
        self.reader = reader
        self.link = CoordinatorLink(cluster, options.group_id)
        try:
            assignors = tuple(assignor(n) for n in options.partition_assignment_strategy)
        except ValueError as exc:
            raise MinibrokerError(str(exc)) from None
        if not assignors:
            raise MinibrokerError("partition_assignment_strategy names no assignor")
        settings = MemberSettings(
            group_id=options.group_id,
            assignors=assignors,
            session_timeout_ms=options.session_timeout_ms,
            rebalance_timeout_ms=options.max_poll_interval_ms,
            heartbeat_interval_ms=options.heartbeat_interval_ms,
            group_instance_id=options.group_instance_id,
            request_timeout_s=options.request_timeout_s,
        )
        self.member = GroupMember(settings, self.link, self)
        self.topics: tuple[str, ...] = ()
        self.pattern: re.Pattern[str] | None = None
        self.listener = Listener()
        self.subscribed = False
        self._last_committed: dict[TopicPartition, int] = {}
        self._scope: trio.CancelScope | None = None
        self._polling = 0  # polls in progress: the application is reading
        self._last_poll = 0.0
        self._left_idle = False  # left the group for not polling; the next poll rejoins
        self._rematch_now = trio.Event()  # a new pattern: match it before the next tick

    # --- subscription ---------------------------------------------------------------

    def subscribe(
        self, topics: Sequence[str], pattern: re.Pattern[str] | None, listener: Listener
    ) -> None:
        self.pattern = pattern
        self.listener = listener
        was = self.subscribed
        self.subscribed = True
        if pattern is not None:
            self._rematch_now.set()  # the watch matches it and rejoins if that changed
            return
        self.topics = tuple(sorted(set(topics)))
        self.cluster.topics.update(self.topics)
        if was:
            self.member.request_rejoin("the subscription changed")

    def unsubscribed(self) -> None:
        self.subscribed = False
        self.topics, self.pattern = (), None

    def subscribed_topics(self) -> Sequence[str]:
        return self.topics

    def _match(self, names: Iterable[str]) -> tuple[str, ...]:
        assert self.pattern is not None
        pattern = self.pattern
        return tuple(
            sorted(
                n
                for n in names
                if not n.startswith(INTERNAL_TOPIC_PREFIX) and pattern.fullmatch(n) is not None
            )
        )

    # --- tasks ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The member, auto-commit and the metadata watch, until ``stop``."""
        with trio.CancelScope() as self._scope:
            async with trio.open_nursery() as nursery:
                if self.pattern is not None:
                    await self._rematch()
                task_status.started()
                self._last_poll = trio.current_time()
                nursery.start_soon(self._watch_metadata)
                nursery.start_soon(self._watch_polls)
                if self.options.enable_auto_commit:
                    nursery.start_soon(self._auto_commit)
                self.member.request_rejoin("subscribed")
                await self.member.run()
                nursery.cancel_scope.cancel()  # a fatal error: the consumer raises it

    async def _rematch(self) -> bool:
        meta = await self.cluster.describe_all()
        matched = self._match(meta.topics)
        if matched == self.topics:
            return False
        self.topics = matched
        self.cluster.topics.update(matched)
        return True

    async def _watch_metadata(self) -> None:
        while True:
            with trio.move_on_after(self.options.metadata_max_age_ms / 1000):
                await self._rematch_now.wait()
            self._rematch_now = trio.Event()
            try:
                if self.pattern is not None and await self._rematch():
                    self.member.request_rejoin(f"the pattern now matches {list(self.topics)}")
                elif self.member.is_leader:
                    counts = await self.partition_counts(self.member.assigned_counts, fresh=True)
                    if counts != self.member.assigned_counts:
                        self.member.request_rejoin("subscribed topics changed partitions")
            except KafkaError as exc:
                log.info("group %s: metadata refresh failed: %s", self.options.group_id, exc)

    def poll_started(self) -> None:
        self._polling += 1
        self._last_poll = trio.current_time()
        if self._left_idle:
            self._left_idle = False
            self.member.request_rejoin("the application polls again")

    def poll_ended(self) -> None:
        self._polling -= 1
        self._last_poll = trio.current_time()

    async def _watch_polls(self) -> None:
        """Kafka's max.poll.interval.ms: an application that stopped polling (stuck,
        or too slow with what it got) gives its partitions up, so the group does not
        wait on it; heartbeats alone do not prove that it still reads."""
        limit = self.options.max_poll_interval_ms / 1000
        while True:
            await trio.sleep(min(limit / 4, 1.0))
            idle = trio.current_time() - self._last_poll
            if self._polling or idle <= limit or not self.member.is_stable:
                continue
            log.warning(
                "group %s: no poll for %.1f s (max_poll_interval_ms): leaving the group",
                self.options.group_id,
                idle,
            )
            self._left_idle = True
            owned = self.owned_partitions()
            if owned:
                await self.revoke_partitions(owned, lost=True)
            await self.member.leave(timeout_s=LEAVE_TIMEOUT_S)

    async def _auto_commit(self) -> None:
        while True:
            await trio.sleep(self.options.auto_commit_interval_ms / 1000)
            if self.member.is_stable:
                await self.commit_quietly(self.reader.assignment())

    async def stop(self) -> None:
        """Close the membership: commit (auto-commit), revoke callbacks, LeaveGroup."""
        if self._scope is not None:
            self._scope.cancel()
        if self.subscribed:
            owned = self.owned_partitions()
            if owned and self.member.generation_id != NO_GENERATION:
                await self.revoke_partitions(owned, lost=False)
            await self.member.leave(timeout_s=LEAVE_TIMEOUT_S)
        await self.link.aclose()

    # --- GroupHost --------------------------------------------------------------------

    def owned_partitions(self) -> list[TopicPartition]:
        return sorted(self.reader.assignment())

    async def revoke_partitions(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        if lost:
            await _call(
                self.listener.on_partitions_lost or self.listener.on_partitions_revoked, partitions
            )
        else:
            if self.options.enable_auto_commit:
                await self.commit_quietly(partitions)
            await _call(self.listener.on_partitions_revoked, partitions)
        gone = set(partitions)
        self.reader.set_assignment(tp for tp in self.reader.assignment() if tp not in gone)
        for tp in gone:
            self._last_committed.pop(tp, None)

    async def add_partitions(self, partitions: list[TopicPartition]) -> None:
        committed = {}
        if partitions:
            committed = await fetch_committed(
                self.link, partitions, timeout_s=self.options.request_timeout_s
            )
        self.reader.set_assignment([*self.reader.assignment(), *partitions])
        for tp in partitions:
            offset = committed.get(tp)
            if offset is not None:
                self.reader.seek(tp[0], tp[1], offset)
                self._last_committed[tp] = offset
        await _call(self.listener.on_partitions_assigned, partitions)

    async def partition_counts(
        self, topics: Iterable[str], *, fresh: bool = False
    ) -> dict[str, int]:
        """Partition counts from the metadata cache when it knows every topic (the
        metadata watch refreshes it), else from a Metadata request: that request shares
        the broker connection with fetches and may wait behind a long poll."""
        wanted = sorted(set(topics))
        meta = self.cluster.metadata
        known = [meta.topics.get(t) for t in wanted]
        if fresh or not all(i is not None and i.error_code == 0 and i.partitions for i in known):
            meta = await self.cluster.refresh(wanted)
        counts = {}
        for topic in wanted:
            info = meta.topics.get(topic)
            if info is not None and info.error_code == 0 and info.partitions:
                counts[topic] = len(info.partitions)
        return counts

    # --- offsets ----------------------------------------------------------------------

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The position of each partition that has one (the offsets to commit)."""
        found = {}
        owned = set(self.reader.assignment())
        for tp in partitions:
            if tp in owned:
                position = self.reader.position(*tp)
                if position is not None and position >= 0:
                    found[tp] = position
        return found

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit with this member's generation (or as a non-member when not subscribed)."""
        if self.subscribed and self.member.generation_id == NO_GENERATION:
            raise CommitFailedError(
                f"group {self.options.group_id!r}: cannot commit during a rebalance "
                "(the partitions may move); commit again once it completes",
                27,
            )
        if not offsets:
            return
        generation, member = (
            (self.member.generation_id, self.member.member_id)
            if self.subscribed
            else (NO_GENERATION, NO_MEMBER)
        )
        try:
            await commit_offsets(
                self.link,
                offsets,
                generation_id=generation,
                member_id=member,
                group_instance_id=self.options.group_instance_id,
                timeout_s=self.options.request_timeout_s,
            )
        except CommitFailedError:
            self.member.request_rejoin("a commit was refused")
            raise
        self._last_committed.update(offsets)

    async def commit_quietly(self, partitions: Iterable[TopicPartition]) -> None:
        """Auto-commit: commit the positions that moved; failures are only logged (the
        next rebalance settles who owns what)."""
        positions = self.positions(partitions)
        offsets = {tp: o for tp, o in positions.items() if self._last_committed.get(tp) != o}
        try:
            await self.commit(offsets)
        except (KafkaError, MinibrokerError, trio.TooSlowError) as exc:
            log.info("group %s: auto-commit failed: %s", self.options.group_id, exc)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        return await fetch_committed(
            self.link, partitions, timeout_s=self.options.request_timeout_s
        )


def listener_from(listener: object | None, **callbacks: Any) -> Listener:
    base = Listener.of(listener) if listener is not None else Listener()
    for name, callback in callbacks.items():
        if callback is not None:
            setattr(base, name, callback)
    return base


class GroupMethods:
    """The Consumer's group methods (the Consumer inherits them); they need a
    ``group_id``. Kept here, beside what they drive, so consumer.py stays about reading."""

    _group: ConsumerGroup | None
    _states: dict[TopicPartition, Any]
    _tasks: BackgroundTasks
    _data: trio.Event

    def _raise_partition_error(self) -> None: ...

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: object | None = None,
        on_partitions_revoked: Callback | None = None,
        on_partitions_assigned: Callback | None = None,
        on_partitions_lost: Callback | None = None,
    ) -> None:
        """Read the partitions the group gives this consumer, of ``topics`` or of every
        topic whose whole name matches ``pattern``; replaces an earlier subscription.

        The callbacks (or ``listener``'s methods of those names) get the partitions
        this consumer gives up or starts reading at each rebalance."""
        group = self._group
        if group is None:
            raise MinibrokerError("subscribe() needs a group_id (or use assign())")
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        if bool(names) == (pattern is not None):
            raise MinibrokerError("subscribe() takes topics or a pattern (exactly one)")
        if not group.subscribed and self._states:
            raise MinibrokerError("assign() and subscribe() exclude each other")
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        callbacks = listener_from(
            listener,
            on_partitions_revoked=on_partitions_revoked,
            on_partitions_assigned=on_partitions_assigned,
            on_partitions_lost=on_partitions_lost,
        )
        started = group.subscribed
        group.subscribe(names, compiled, callbacks)
        nursery = self._tasks.nursery
        if not started and nursery is not None:
            nursery.start_soon(group.run)

    async def wait_for_assignment(self) -> None:
        """Return once the group has given this consumer its partitions (after each
        rebalance the member is stable again); raises a fatal group error."""
        group = self._need_group("wait_for_assignment")
        while not group.member.is_stable:
            self._raise_partition_error()
            with trio.move_on_after(FATAL_CHECK_S):
                await group.member.wait_stable()

    async def unsubscribe(self) -> None:
        """Give the partitions up (committing, with auto-commit), leave the group; the
        consumer may then ``assign`` or ``subscribe`` again."""
        group = self._need_group("unsubscribe")
        if group.subscribed:
            await group.stop()
            group.unsubscribed()

    def subscription(self) -> list[str]:
        """The topics subscribed to (a pattern's current matches)."""
        return list(self._group.topics) if self._group is not None else []

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Store the group's offsets: by default every assigned partition's position
        (the next record poll would return). Raises CommitFailedError when the group
        rebalanced meanwhile."""
        group = self._need_group("commit")
        await group.commit(offsets if offsets is not None else group.positions(self._states))

    async def committed(
        self, partitions: TopicPartition | Iterable[TopicPartition] | None = None
    ) -> Any:
        """The group's committed offset of one partition (None if it has none), or a
        dict of them for several (default: the assigned ones)."""
        group = self._need_group("committed")
        if isinstance(partitions, tuple) and len(partitions) == 2 and type(partitions[0]) is str:
            single: TopicPartition = partitions
            return (await group.committed([single]))[single]
        wanted = list(self._states)
        if partitions is not None:
            wanted = list(cast(Iterable[TopicPartition], partitions))
        return await group.committed(wanted)

    def _need_group(self, what: str) -> ConsumerGroup:
        if self._group is None:
            raise MinibrokerError(f"{what}() needs a group_id")
        return self._group

    def _data_arrived(self) -> None:
        self._data.set()
