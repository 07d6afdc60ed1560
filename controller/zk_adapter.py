"""ControllerZk over the ZooKeeper data layer (``zk.data.KafkaZkClient``).

The controller is written against the ``ControllerZk`` Protocol; this adapter maps it
onto ``KafkaZkClient`` and adds the one thing the data layer leaves to its caller:
fencing. ``register_controller`` remembers the znode version of /controller_epoch it
wrote, and every later write of partition states or assignments passes it, so a
controller that lost its place cannot overwrite its successor (the data layer then
raises ControllerMovedError).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from minibroker.controller.controller_zk import ControllerZk
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import BadVersion
from minibroker.zk.config_changes import config_change_names, topics_changed
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import partition_state_path
from minibroker.zk.values import (
    BrokerInfo,
    ControllerMovedError,
    LeaderAndIsr,
    TopicAssignment,
    WriteResult,
)

UNCLEAN_LEADER_ELECTION_KEY = "unclean.leader.election.enable"
TOPIC_ENTITY_PREFIX = "topics/"
TOPIC_ID_WRITE_ATTEMPTS = 3
"""Conditional writes of a topic's new id before leaving it for the next failover."""


class ControllerZkAdapter:
    def __init__(self, data: KafkaZkClient) -> None:
        self.data = data
        self._fence: int | None = None

    # -- partition states (PartitionStateStore) ----------------------------------------

    def _fence_version(self) -> int:
        if self._fence is None:
            raise ControllerMovedError("not the controller: no epoch to fence writes with")
        return self._fence

    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        return await self.data.read_partition_states(partitions)

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        return await self.data.create_partition_states(
            states, controller_epoch_zk_version=self._fence_version()
        )

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        return await self.data.update_partition_states(
            states, controller_epoch_zk_version=self._fence_version()
        )

    # -- election ---------------------------------------------------------------------

    async def get_controller_id(self, *, watch: bool) -> int | None:
        return await self.data.get_controller_id(watch=watch)

    async def register_controller(self, broker_id: int) -> tuple[int, int]:
        self._fence = None
        epoch, version = await self.data.register_controller(broker_id)
        self._fence = version
        return epoch, version

    async def resign_controller(self, broker_id: int) -> None:
        self._fence = None
        await self.data.resign_controller(broker_id)

    # -- brokers and topics -----------------------------------------------------------

    async def get_live_brokers(self, *, watch: bool) -> dict[int, BrokerInfo]:
        return await self.data.get_live_brokers(watch=watch)

    async def get_all_topics(self, *, watch: bool) -> set[str]:
        return await self.data.get_topics(watch=watch)

    async def get_topic_assignments(
        self, topics: Iterable[str], *, watch: bool
    ) -> dict[str, TopicAssignment]:
        return await self.data.get_assignments(topics, watch=watch)

    async def set_topic_assignment(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int]],
        adding: Mapping[int, Sequence[int]],
        removing: Mapping[int, Sequence[int]],
        *,
        topic_id: bytes | None = None,
    ) -> None:
        assignment = TopicAssignment(
            topic,
            {p: tuple(r) for p, r in partitions.items()},
            {p: tuple(r) for p, r in adding.items() if r},
            {p: tuple(r) for p, r in removing.items() if r},
            topic_id=topic_id,
        )
        await self.data.set_assignment(
            assignment, controller_epoch_zk_version=self._fence_version()
        )

    async def set_topic_id(self, topic: str, topic_id: bytes) -> bool:
        for _ in range(TOPIC_ID_WRITE_ATTEMPTS):
            current = await self.data.get_assignment(topic)
            if current is None or current.topic_id is not None:
                return False
            try:
                await self.data.set_assignment(
                    dataclasses.replace(current, topic_id=topic_id),
                    controller_epoch_zk_version=self._fence_version(),
                )
            except BadVersion:
                continue  # the znode changed between the read and the write
            return True
        return False

    async def get_unclean_leader_election_overrides(self, topics: Iterable[str]) -> dict[str, bool]:
        configs = await self.data.get_topic_configs(topics)
        return {
            topic: value.strip().lower() == "true"
            for topic, config in configs.items()
            if (value := config.get(UNCLEAN_LEADER_ELECTION_KEY)) is not None
        }

    async def get_config_changes(self, *, watch: bool) -> list[str]:
        return await config_change_names(self.data.zk, watch=watch)

    async def read_config_change_topics(self, names: Iterable[str]) -> set[str]:
        return await topics_changed(self.data.zk, names)

    # -- deletion ---------------------------------------------------------------------

    async def get_topics_to_delete(self, *, watch: bool) -> set[str]:
        return await self.data.get_topic_deletions(watch=watch)

    async def delete_topic_deletion_marks(self, topics: Iterable[str]) -> None:
        await self.data.delete_topic_deletion_marks(topics)

    async def delete_topic(self, topic: str) -> None:
        self._fence_version()
        await self.data.delete_topic_znodes(topic)
        await self.data.delete_topic_deletion_marks([topic])

    # -- reassignment, preferred election, ISR changes --------------------------------

    async def get_reassignments(self, *, watch: bool) -> dict[TopicPartition, tuple[int, ...]]:
        return await self.data.get_reassignment(watch=watch)

    async def set_reassignments(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        await self.data.set_reassignment(targets)

    async def watch_partition_state(self, tp: TopicPartition) -> None:
        await self.data.zk.exists(partition_state_path(tp), watch=True)

    async def get_preferred_replica_election(self, *, watch: bool) -> set[TopicPartition]:
        return await self.data.get_preferred_replica_election(watch=watch)

    async def delete_preferred_replica_election(self) -> None:
        await self.data.delete_preferred_replica_election()

    async def get_isr_change_notifications(self, *, watch: bool) -> list[str]:
        return await self.data.get_isr_change_notifications(watch=watch)

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        return await self.data.read_isr_change_notifications(names)

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        await self.data.delete_isr_change_notifications(names)

    # -- log dir failures ---------------------------------------------------------------

    async def get_log_dir_event_notifications(self, *, watch: bool) -> list[str]:
        return await self.data.get_log_dir_event_notifications(watch=watch)

    async def read_log_dir_event_notifications(self, names: Iterable[str]) -> set[int]:
        return await self.data.read_log_dir_event_notifications(names)

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        await self.data.delete_log_dir_event_notifications(names)


def _conforms(adapter: ControllerZkAdapter) -> ControllerZk:
    """Never called: makes mypy check that the adapter satisfies ControllerZk."""
    return adapter
