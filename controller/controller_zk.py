"""What the controller needs from ZooKeeper, and how watch firings become events.

``ControllerZk`` is the Protocol the controller is written against:
controller/zk_adapter.py provides it over the ZooKeeper data layer (``zk.data``), and
the unit tests over a dict. Every read that takes ``watch=True`` (re-)arms a one-shot
watch on that znode; the firing arrives on the ZooKeeper client's event channel, and
``event_for_watch`` turns it into the controller event to queue. The controller never
acts on a watch directly: the event handler re-reads ZooKeeper (docs/architecture.md,
"The controller").

Writes of the active controller are fenced: the implementation checks the version of
``/controller_epoch`` it bumped and raises ControllerMovedError when another controller
bumped it since.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from minibroker.controller.context import BrokerAddress
from minibroker.controller.events import (
    BrokerChange,
    ControllerChange,
    ControllerEvent,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
    PreferredReplicaElection,
    Reelect,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
)
from minibroker.controller.state_machines import PartitionStateStore
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.model import (
    BROKER_IDS_PATH,
    CONFIG_CHANGES_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
)
from minibroker.zk.types import WatchEvent, WatchType


class TopicReplicas(Protocol):
    """A topic's assignment as /brokers/topics/T stores it."""

    @property
    def partitions(self) -> Mapping[int, tuple[int, ...]]: ...
    @property
    def adding_replicas(self) -> Mapping[int, tuple[int, ...]]: ...
    @property
    def removing_replicas(self) -> Mapping[int, tuple[int, ...]]: ...
    @property
    def topic_id(self) -> bytes | None: ...


class ControllerZk(PartitionStateStore, Protocol):
    # -- election -------------------------------------------------------------------
    async def get_controller_id(self, *, watch: bool) -> int | None: ...

    async def register_controller(self, broker_id: int) -> tuple[int, int]:
        """Create the ephemeral /controller and bump /controller_epoch atomically;
        returns (new epoch, its znode version) and fences every later write with it.
        Raises ControllerMovedError when another broker is or became controller."""
        ...

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if ``broker_id`` still holds it."""
        ...

    # -- brokers and topics -----------------------------------------------------------
    async def get_live_brokers(self, *, watch: bool) -> Mapping[int, BrokerAddress]: ...

    async def get_all_topics(self, *, watch: bool) -> set[str]: ...

    async def get_topic_assignments(
        self, topics: Iterable[str], *, watch: bool
    ) -> Mapping[str, TopicReplicas]: ...

    async def set_topic_assignment(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int]],
        adding: Mapping[int, Sequence[int]],
        removing: Mapping[int, Sequence[int]],
        *,
        topic_id: bytes | None = None,
    ) -> None: ...

    async def set_topic_id(self, topic: str, topic_id: bytes) -> bool:
        """Write ``topic_id`` into the topic's znode if it still has none (KIP-516: a
        topic from before ids); False if the topic is gone or got an id meanwhile."""
        ...

    async def get_unclean_leader_election_overrides(self, topics: Iterable[str]) -> dict[str, bool]:
        """``unclean.leader.election.enable`` from /config/topics/T, of those of
        ``topics`` that set it (one round trip)."""
        ...

    async def get_config_changes(self, *, watch: bool) -> list[str]:
        """Names of the /config/changes notifications, oldest first."""
        ...

    async def read_config_change_topics(self, names: Iterable[str]) -> set[str]:
        """The topics whose config the named notifications announce."""
        ...

    # -- deletion ---------------------------------------------------------------------
    async def get_topics_to_delete(self, *, watch: bool) -> set[str]: ...

    async def delete_topic_deletion_marks(self, topics: Iterable[str]) -> None: ...

    async def delete_topic(self, topic: str) -> None:
        """Remove /brokers/topics/T (recursively), /config/topics/T and the mark."""
        ...

    # -- reassignment, preferred election, ISR changes --------------------------------
    async def get_reassignments(self, *, watch: bool) -> dict[TopicPartition, tuple[int, ...]]: ...

    async def set_reassignments(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Rewrite /admin/reassign_partitions; an empty mapping deletes it."""
        ...

    async def watch_partition_state(self, tp: TopicPartition) -> None: ...

    async def get_preferred_replica_election(self, *, watch: bool) -> set[TopicPartition]:
        """The partitions /admin/preferred_replica_election names; empty when absent."""
        ...

    async def delete_preferred_replica_election(self) -> None: ...

    async def get_isr_change_notifications(self, *, watch: bool) -> list[str]: ...

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]: ...

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None: ...

    # -- log dir failures ---------------------------------------------------------------
    async def get_log_dir_event_notifications(self, *, watch: bool) -> list[str]:
        """Names of the pending /log_dir_event_notification children, oldest first."""
        ...

    async def read_log_dir_event_notifications(self, names: Iterable[str]) -> set[int]:
        """The brokers the named notifications report."""
        ...

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None: ...


def _state_znode_partition(path: str) -> TopicPartition | None:
    """/brokers/topics/T/partitions/P/state -> (T, P)."""
    parts = path.split("/")
    shape_ok = len(parts) == 7 and parts[1:3] == ["brokers", "topics"]
    if shape_ok and parts[4] == "partitions" and parts[6] == "state" and parts[5].isdigit():
        return TopicPartition(parts[3], int(parts[5]))
    return None


def event_for_watch(event: WatchEvent) -> ControllerEvent | None:
    """The controller event a watch firing means, or None if the controller does not
    care about it (paths are relative to the chroot)."""
    path, kind = event.path, event.type
    if path == CONTROLLER_PATH:
        return Reelect() if kind is WatchType.DELETED else ControllerChange()
    if kind is WatchType.CHILD:
        return {
            BROKER_IDS_PATH: BrokerChange(),
            TOPICS_PATH: TopicChange(),
            DELETE_TOPICS_PATH: TopicDeletion(),
            ISR_CHANGE_NOTIFICATION_PATH: IsrChangeNotification(),
            CONFIG_CHANGES_PATH: TopicConfigChange(),
            LOG_DIR_EVENT_NOTIFICATION_PATH: LogDirEventNotification(),
        }.get(path)
    # Deletions of the admin znodes are events too: the handler's read re-arms the
    # exists watch, without which the next request would go unnoticed.
    if path == REASSIGN_PARTITIONS_PATH:
        return PartitionReassignment()
    if path == PREFERRED_REPLICA_ELECTION_PATH:
        return PreferredReplicaElection(from_zk=True)
    if path.startswith(TOPICS_PATH + "/") and kind is WatchType.CHANGED:
        tp = _state_znode_partition(path)
        if tp is not None:
            return PartitionReassignmentIsrChange(tp)
        topic = path[len(TOPICS_PATH) + 1 :]
        if "/" not in topic:
            return PartitionModifications(topic)
    return None
