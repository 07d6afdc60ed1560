"""The controller's events: everything that makes the controller act.

ZooKeeper watches, broker APIs (ControlledShutdown, ElectLeaders, reassignment) and
timers never touch the ControllerContext themselves; they put one of these on the
controller's single queue (controller/event_manager.py), and one task processes them in
order. Events carry only what the watch or request said; the processor re-reads
ZooKeeper for the rest, so a late event can never apply a stale decision.

Events that a caller waits on carry a ``Reply``. When the queue is cleared (session
expiry, resignation) such events are ``preempt``-ed: the caller gets NOT_CONTROLLER and
retries against the new controller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

import trio

from minibroker.protocol.errors import KafkaError, NotControllerError
from minibroker.protocol.topic_partition import TopicPartition

T = TypeVar("T")


class Reply(Generic[T]):
    """A one-shot answer from the event loop to a waiting request handler."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._value: T | None = None
        self._error: KafkaError | None = None

    def set(self, value: T) -> None:
        if not self._done.is_set():
            self._value = value
            self._done.set()

    def fail(self, error: KafkaError) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> T:
        """The answer; raises the KafkaError the controller failed it with."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


class ControllerEvent:
    """Base class. ``preempt`` is called instead of processing when the queue is
    cleared; events without a waiting caller ignore it."""

    def preempt(self) -> None:
        return None


@dataclass(frozen=True)
class Startup(ControllerEvent):
    """The broker started: watch /controller and try to become controller."""


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """/controller was created, changed or deleted."""


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """/controller disappeared: resign if we were controller, then try to win it."""


@dataclass(frozen=True)
class SessionExpired(ControllerEvent):
    """The ZooKeeper session expired: resign; re-register and re-elect on the new one."""


@dataclass(frozen=True)
class ZkReconnected(ControllerEvent):
    """The ZooKeeper connection came back on the same session: kazoo dropped every
    watch while it was down, so the controller re-arms them and re-reads."""


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The children of /brokers/ids changed."""


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """The children of /brokers/topics changed."""


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """/brokers/topics/T changed (partitions added or a reassignment recorded)."""

    topic: str


@dataclass(frozen=True)
class TopicConfigChange(ControllerEvent):
    """A /config/changes notification appeared: some topic's config changed (the
    controller cares about unclean.leader.election.enable)."""


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """The children of /admin/delete_topics changed."""


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponse(ControllerEvent):
    """A broker answered StopReplica: ``deleted`` are the partitions the request asked
    it to delete, ``errors`` the per-partition codes it answered, ``error_code`` the
    top-level one (non-zero fails every partition)."""

    broker_id: int
    deleted: frozenset[TopicPartition]
    errors: Mapping[TopicPartition, int]
    error_code: int = 0


@dataclass(frozen=True)
class PartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions was created or changed."""


@dataclass(frozen=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: partition -> target replicas (None cancels)."""

    reassignments: Mapping[TopicPartition, Sequence[int] | None]
    reply: Reply[dict[TopicPartition, KafkaError | None]] = field(default_factory=Reply)

    def preempt(self) -> None:
        self.reply.fail(NotControllerError("controller moved while reassigning"))


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments: partition -> (replicas, adding, removing)."""

    reply: Reply[dict[TopicPartition, tuple[list[int], list[int], list[int]]]] = field(
        default_factory=Reply
    )

    def preempt(self) -> None:
        self.reply.fail(NotControllerError("controller moved"))


@dataclass(frozen=True)
class PartitionReassignmentIsrChange(ControllerEvent):
    """The state znode of a partition being reassigned changed: maybe RAR caught up."""

    partition: TopicPartition


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """A leader wrote /isr_change_notification/isr_change_<seq>."""


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """A broker wrote /log_dir_event_notification/log_dir_event_<seq>: one of its log
    dirs failed."""


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker answered LeaderAndIsr: ``errors`` are its per-partition codes (a
    KAFKA_STORAGE_ERROR means that replica's log dir failed), ``error_code`` the
    top-level one."""

    broker_id: int
    errors: Mapping[TopicPartition, int]
    error_code: int = 0


@dataclass(frozen=True)
class PreferredReplicaElection(ControllerEvent):
    """Move leadership back to the preferred replica: ``partitions`` None means every
    partition; ``reply`` is set when a broker API (ElectLeaders) waits for the result;
    ``from_zk`` when /admin/preferred_replica_election names the partitions."""

    partitions: frozenset[TopicPartition] | None = None
    reply: Reply[dict[TopicPartition, KafkaError | None]] | None = None
    from_zk: bool = False

    def preempt(self) -> None:
        if self.reply is not None:
            self.reply.fail(NotControllerError("controller moved during election"))


@dataclass(frozen=True)
class UncleanLeaderElection(ControllerEvent):
    """ElectLeaders with election type UNCLEAN: give a leader to each partition that
    has none alive (``partitions`` None means every partition), from outside the ISR if
    need be. The reply maps each partition to None or why it got no leader."""

    partitions: frozenset[TopicPartition] | None
    reply: Reply[dict[TopicPartition, KafkaError | None]] = field(default_factory=Reply)

    def preempt(self) -> None:
        self.reply.fail(NotControllerError("controller moved during election"))


@dataclass(frozen=True)
class AutoPreferredLeaderBalance(ControllerEvent):
    """Timer: check leader imbalance per broker (auto.leader.rebalance.enable)."""


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker asks to stop: the reply is the partitions it still leads afterwards.
    ``broker_epoch`` must be its current registration's (always checked)."""

    broker_id: int
    broker_epoch: int
    reply: Reply[set[TopicPartition]] = field(default_factory=Reply)

    def preempt(self) -> None:
        self.reply.fail(NotControllerError("controller moved during controlled shutdown"))
