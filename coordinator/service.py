"""The group coordinator as a broker service: built on a running Broker's parts.

``run_group_coordinator(broker)`` (a ``BrokerService``, started by node/) assembles the
GroupMetadataManager over the broker's ReplicaManager, the GroupCoordinator and its
API handlers, registers the handlers with the broker's dispatcher and the metrics with
its registry, listens to the ReplicaManager's leadership changes (load an offsets
partition on becoming its leader, drop it on losing it), and runs the offsets expiry
until the broker stops.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

import trio

from minibroker.broker.broker import Broker
from minibroker.broker.replication.partition import Partition
from minibroker.coordinator.apis import CoordinatorApis
from minibroker.coordinator.coordinator import GroupCoordinator
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager, OffsetsConfig
from minibroker.coordinator.metrics import CoordinatorCollector
from minibroker.coordinator.offsets_log import ReplicaOffsetsLog
from minibroker.coordinator.rebalance import GroupConfig
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class GroupService(NamedTuple):
    """The parts of a running group coordinator other services build on."""

    apis: CoordinatorApis
    coordinator: GroupCoordinator
    manager: GroupMetadataManager


async def run_group_coordinator(
    broker: Broker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The group coordinator alone, as a ``BrokerService``."""
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_group_coordinator, broker)
        task_status.started()


async def serve_group_coordinator(
    broker: Broker,
    *,
    task_status: trio.TaskStatus[GroupService] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The group coordinator; ``nursery.start`` returns its parts once it serves."""
    config = broker.config
    parts = broker.parts  # a service starts once the broker's parts are built
    replica_manager = parts.replica_manager
    cache = broker.metadata_cache

    def partition_count() -> int:
        if cache.contains(OFFSETS_TOPIC):
            return len(cache.metadata_response([OFFSETS_TOPIC])["topics"][0]["partitions"])
        return config.offsets_topic_num_partitions

    offsets_log = ReplicaOffsetsLog(
        replica_manager, timeout_ms=config.offsets_commit_timeout_ms, clock=broker.clock
    )
    manager = GroupMetadataManager(
        offsets_log,
        OffsetsConfig(
            num_partitions=config.offsets_topic_num_partitions,
            retention_ms=config.offsets_retention_minutes * 60_000,
            metadata_max_bytes=config.offset_metadata_max_bytes,
        ),
        clock=broker.clock,
        num_partitions=partition_count,
    )
    coordinator = GroupCoordinator(
        manager,
        GroupConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
        ),
        clock=broker.clock,
    )
    collector = CoordinatorCollector(manager, offsets_log)
    registry = broker.metrics.registry
    async with trio.open_nursery() as nursery:

        def spawn(fn: Callable[[], Awaitable[None]]) -> None:
            nursery.start_soon(fn)

        admin = parts.admin_manager
        apis = CoordinatorApis(
            coordinator,
            cache,
            clock=broker.clock,
            num_partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            create_topics=None if admin is None else admin.create_topics,
            spawn=spawn,
        )
        await nursery.start(coordinator.run)

        def leadership_changed(
            leaders: Sequence[Partition], resigned: Sequence[TopicPartition]
        ) -> None:
            for tp in resigned:
                if tp.topic == OFFSETS_TOPIC:
                    manager.resigned(tp.partition)
            for partition in leaders:
                if partition.tp.topic == OFFSETS_TOPIC:
                    nursery.start_soon(
                        coordinator.membership.partition_led,
                        partition.tp.partition,
                        partition.leader_epoch,
                    )

        replica_manager.replicas.leadership_listeners.append(leadership_changed)
        already_led = [
            p
            for tp, p in replica_manager.replicas.partitions.items()
            if p.is_leader and tp.topic == OFFSETS_TOPIC
        ]
        leadership_changed(already_led, [])
        apis.install(broker.dispatcher)
        registry.register(collector)
        try:
            nursery.start_soon(_expire_offsets, manager, config.offsets_retention_check_interval_ms)
            task_status.started(GroupService(apis, coordinator, manager))
            await trio.sleep_forever()
        finally:
            replica_manager.replicas.leadership_listeners.remove(leadership_changed)
            registry.unregister(collector)


async def _expire_offsets(manager: GroupMetadataManager, interval_ms: int) -> None:
    while True:
        await trio.sleep(interval_ms / 1000)
        try:
            removed = await manager.expire_offsets()
        except Exception:
            log.exception("offsets expiry failed")
            continue
        if removed:
            log.info("expired %d committed offsets", removed)
