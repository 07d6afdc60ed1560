"""Notifications and admin requests the controller consumes.

Sequential znodes brokers write for the controller (``/isr_change_notification``,
``/log_dir_event_notification``: "read the partition states again", "ask me which of my
replicas failed") and the admin requests tools write (``/admin/reassign_partitions``,
``/admin/preferred_replica_election``). The controller watches each parent, reads the
children, acts, and deletes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import (
    NodeExists,
    NoNode,
    ZkError,
)
from minibroker.zk.model import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    decode_log_dir_event,
    decode_partition_list,
    decode_reassignment,
    encode_log_dir_event,
    encode_partition_list,
    encode_reassignment,
    isr_change_path,
    log_dir_event_path,
)
from minibroker.zk.values import ZkDataError
from minibroker.zk.znodes import ZnodeAccess

log = logging.getLogger("minibroker.zk")


class NotificationZnodes(ZnodeAccess):
    async def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """A broker reports ISR changes; returns the sequential znode's name."""
        path = await self.zk.create(
            isr_change_path(ISR_CHANGE_PREFIX),
            encode_partition_list(partitions),
            sequence=True,
            makepath=True,
        )
        return path.rsplit("/", 1)[-1]

    async def get_isr_change_notifications(self, *, watch: bool = False) -> list[str]:
        """Pending notification names in creation order; ``watch`` arms the child watch."""
        names = await self._children(ISR_CHANGE_NOTIFICATION_PATH, watch)
        return sorted(n for n in names if n.startswith(ISR_CHANGE_PREFIX))

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        """Union of the partitions the named notifications report (gone ones skipped)."""
        paths = [isr_change_path(n) for n in names]
        changed: set[TopicPartition] = set()
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            changed |= decode_partition_list(result[0], path)
        return changed

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        await self._delete_all_present(isr_change_path(name) for name in names)

    async def create_log_dir_event_notification(self, broker_id: int) -> str:
        """A broker reports that one of its log dirs failed; returns the znode's name."""
        path = await self.zk.create(
            log_dir_event_path(LOG_DIR_EVENT_PREFIX),
            encode_log_dir_event(broker_id),
            sequence=True,
            makepath=True,
        )
        return path.rsplit("/", 1)[-1]

    async def get_log_dir_event_notifications(self, *, watch: bool = False) -> list[str]:
        """Pending log dir event names in creation order; ``watch`` arms the child watch."""
        names = await self._children(LOG_DIR_EVENT_NOTIFICATION_PATH, watch)
        return sorted(n for n in names if n.startswith(LOG_DIR_EVENT_PREFIX))

    async def read_log_dir_event_notifications(self, names: Iterable[str]) -> set[int]:
        """The brokers the named events report (gone ones skipped; one that is not
        Kafka's JSON is logged and skipped, so it cannot wedge the controller)."""
        paths = [log_dir_event_path(n) for n in names]
        brokers: set[int] = set()
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            try:
                brokers.add(decode_log_dir_event(result[0], path))
            except ZkDataError as exc:
                log.warning("ignoring %s: %s", path, exc)
        return brokers

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        await self._delete_all_present(log_dir_event_path(name) for name in names)

    async def get_reassignment(
        self, *, watch: bool = False
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """Requested targets (RAR) from /admin/reassign_partitions, {} when absent.
        ``watch`` arms an exists watch (fires on create, change and delete)."""
        return await self._read_optional(REASSIGN_PARTITIONS_PATH, watch, decode_reassignment, dict)

    async def set_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Write the pending reassignments; an empty mapping deletes the znode (Kafka)."""
        if not targets:
            await self.delete_reassignment()
            return
        await self._set_or_create(REASSIGN_PARTITIONS_PATH, encode_reassignment(targets))

    async def delete_reassignment(self) -> None:
        await self._delete_if_present(REASSIGN_PARTITIONS_PATH)

    async def get_preferred_replica_election(self, *, watch: bool = False) -> set[TopicPartition]:
        return await self._read_optional(
            PREFERRED_REPLICA_ELECTION_PATH,
            watch,
            lambda data: decode_partition_list(data, PREFERRED_REPLICA_ELECTION_PATH),
            set,
        )

    async def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> bool:
        """False if an election is already pending (Kafka refuses a second one)."""
        try:
            await self.zk.create(
                PREFERRED_REPLICA_ELECTION_PATH, encode_partition_list(partitions), makepath=True
            )
        except NodeExists:
            return False
        return True

    async def delete_preferred_replica_election(self) -> None:
        await self._delete_if_present(PREFERRED_REPLICA_ELECTION_PATH)
