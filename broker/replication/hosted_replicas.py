"""The replicas a broker hosts, and what serves them.

``HostedReplicas`` holds the state every part of the ReplicaManager works on: the
partitions by topic-partition, the purgatories where fetches and acks=all produces
wait (``fetch_waiters``, ``produce_waiters``), the FetchReader (broker/replication/fetch_reader.py),
the IsrManager (broker/replication/isr.py), the high-watermark checkpoint, the hooks a broker plugs
in (replica fetchers, corruption repair, leadership listeners), and the topics' configs
(the broker's defaults under /config/topics/T as loaded, under ``topic_overrides``).

It answers the questions every request asks first: which partition (``partition_or_error``
refuses one in an offline log dir or being repaired), with which config; and it keeps
the high watermark and the ISR moving when a follower fetches or the ISR changes,
waking whatever waits on the partition.

``ReplicaManager`` (broker/replication/replica_manager.py: produce, fetch, acks=all,
periodic work) owns these replicas as ``replicas``, and a ``LeadershipChanges``
(broker/replication/leadership_changes.py: LeaderAndIsr, StopReplica, UpdateMetadata)
handed them. Who needs only the replicas (log dirs, the cleaner, configs, metrics,
corruption repair) is handed this object itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.config.broker_config import BrokerConfig, TopicConfig
from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.quotas.replication_quota import ReplicationQuotas
from minibroker.broker.replication.delayed_produce import DelayedProducePurgatory
from minibroker.broker.replication.epoch_checkpoints import EpochCheckpointWriter
from minibroker.broker.replication.fetch_reader import FetchPartition, FetchReader
from minibroker.broker.replication.hw_checkpoint import HighWatermarkCheckpoint
from minibroker.broker.replication.isr import IsrManager, IsrStore, record_follower_fetch
from minibroker.broker.replication.partition import Partition, ReadResult
from minibroker.broker.replication.partition_metadata_writer import PartitionMetadataWriter
from minibroker.broker.replication.purgatory import Purgatory
from minibroker.broker.replication.replica_selector import RackAwareReplicaSelector
from minibroker.protocol.errors import ConfigError, KafkaStorageError, UnknownTopicOrPartitionError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.log_config import Clock, LogConfig
from minibroker.storage.log_manager import LogManager
from minibroker.storage.producer_entries import DEFAULT_PRODUCER_ID_EXPIRATION_MS

# One logger for the whole ReplicaManager, whichever of its parts reports.
log = logging.getLogger("minibroker.broker.replication.replica_manager")


TopicConfigLoader = Callable[[str], Awaitable[Mapping[str, str]]]
"""A topic's overrides as stored in ZooKeeper (/config/topics/T)."""

LogDirFailureHandler = Callable[[Path], Collection[TopicPartition]]
"""Takes a failed log dir offline; returns the partitions it held (none if already)."""


class CorruptionHook(Protocol):
    """What broker/logdirs/corruption.py offers: take a corrupt replica out of service, and
    repair it once the controller has stopped it."""

    def found(
        self, partition: Partition, error: CorruptRecordError, source: str, *, counted: bool = ...
    ) -> None: ...
    def stopped(self, partition: Partition) -> None: ...
    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """Reports corrupt replicas to the controller until cancelled."""
        ...


class FetcherHook(Protocol):
    """What the ReplicaFetcherManager (broker/replication/replica_fetcher.py) offers the
    ReplicaManager."""

    def add_partitions(self, partitions: Sequence[Partition]) -> None: ...
    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None: ...
    def shutdown(self) -> None: ...
    def max_lag(self) -> int: ...


def to_log_config(
    topic: TopicConfig, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
) -> LogConfig:
    compact = "compact" in topic.cleanup_policy
    return LogConfig(
        segment_bytes=topic.segment_bytes,
        # A compacted log's records must reach a closed segment within max.compaction.lag.ms
        segment_ms=min(topic.segment_ms, topic.max_compaction_lag_ms)
        if compact
        else topic.segment_ms,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        retention_ms=topic.retention_ms,
        retention_bytes=topic.retention_bytes,
        max_message_bytes=topic.max_message_bytes,
        file_delete_delay_ms=topic.file_delete_delay_ms,
        producer_id_expiration_ms=producer_id_expiration_ms,
        cleanup_policy=topic.cleanup_policy,
        min_cleanable_dirty_ratio=topic.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=topic.min_compaction_lag_ms,
        max_compaction_lag_ms=topic.max_compaction_lag_ms,
        delete_retention_ms=topic.delete_retention_ms,
    )


LeadershipListener = Callable[[Sequence[Partition], Sequence[TopicPartition]], None]
"""Called with the partitions this broker became leader of and those it stopped leading."""


class HostedReplicas:
    """The replicas this broker hosts (see the module doc)."""

    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        *,
        clock: Clock,
        topic_overrides: Callable[[str], Mapping[str, str]] | None = None,
        metrics: BrokerMetrics | None = None,
        fetcher: FetcherHook | None = None,
        replication_quotas: ReplicationQuotas | None = None,
        isr_store: IsrStore | None = None,
        topic_config_loader: TopicConfigLoader | None = None,
        on_log_dir_failure: LogDirFailureHandler | None = None,
        corruption: Callable[[HostedReplicas], CorruptionHook] | None = None,
    ) -> None:
        """Cluster mode passes ``isr_store`` (ISR changes are written to ZooKeeper) and
        ``topic_config_loader`` (/config/topics/T); standalone, both stay None.
        ``on_log_dir_failure`` takes a log dir that failed an I/O offline and returns
        the partitions that went with it. ``corruption`` builds, for this manager, what
        takes corrupt replicas out of service and repairs them (broker/logdirs/corruption.py)."""
        self.config = config
        # The broker keys topics inherit, with this broker's dynamic overrides applied
        # (broker/admin/broker_configs.py); ``config`` itself never changes.
        self.topic_defaults = config
        self.metrics = metrics or BrokerMetrics()
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.topic_overrides = topic_overrides or (lambda topic: {})
        self.topic_config_loader = topic_config_loader
        self._stored_overrides: dict[str, dict[str, str]] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_waiters: Purgatory[TopicPartition] = Purgatory("fetch")
        self.produce_waiters = DelayedProducePurgatory(self.get_partition)
        # DeleteRecords waits here for followers to report their new log start.
        self.delete_records_waiters: Purgatory[TopicPartition] = Purgatory("delete_records")
        self.fetcher = fetcher
        # The replication throttle (broker/quotas/replication_quota.py) lives with the reads it
        # limits; ``replication_quotas`` below reaches it.
        self.fetch_reader = FetchReader(
            broker_id=self.broker_id,
            partitions=self.partitions,
            partition_or_error=self.partition_or_error,
            fetch_waiters=self.fetch_waiters,
            replication_quotas=replication_quotas or ReplicationQuotas.unlimited(),
            on_corrupt_read=self._corrupt_read,
            on_follower_fetch=self._record_follower_fetch,
            replica_selector=RackAwareReplicaSelector(self.broker_id, self._rack_of)
            if config.replica_selector_class
            else None,
        )
        self._on_log_dir_failure = on_log_dir_failure
        self.corruption = None if corruption is None else corruption(self)
        self.isr_manager = IsrManager(
            partitions=lambda: self.partitions.values(),
            store=isr_store,
            on_isr_changed=lambda partition, expanded: self._on_isr_changed(partition),
            clock=clock,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        )
        self.epoch_checkpoints = EpochCheckpointWriter()
        self.partition_metadata = PartitionMetadataWriter()  # topic ids, KIP-516
        # The LogManager is not thread-safe: whoever hands it to a worker thread (log
        # creation and deletion here, retention and checkpoints in log maintenance)
        # holds this lock, so no two threads - or a thread and the loop - use it at once.
        self.log_manager_lock = trio.Lock()
        self.hw_checkpoint = HighWatermarkCheckpoint(log_manager)
        self.leadership_listeners: list[LeadershipListener] = []
        """Told after every LeaderAndIsr / StopReplica which partitions this broker now
        leads and which it stopped leading (the group coordinator loads and drops
        ``__consumer_offsets`` partitions this way, as Kafka's onLeadershipChange)."""

    @property
    def replication_quotas(self) -> ReplicationQuotas:
        """The replication throttle: its rates are set by broker/admin/broker_configs.py, the
        leader side limits reads here, the fetchers share the follower side."""
        return self.fetch_reader.replication_quotas

    @replication_quotas.setter
    def replication_quotas(self, quotas: ReplicationQuotas) -> None:
        self.fetch_reader.replication_quotas = quotas

    # -- lookup ----------------------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def log_dir_failed(self, log_dir: Path) -> None:
        """An I/O error in ``log_dir``: take it offline now, stop fetching into its
        partitions and wake the requests waiting on them (they answer with an error)."""
        if self._on_log_dir_failure is None:
            return
        lost = self._on_log_dir_failure(log_dir)
        if self.fetcher is not None and lost:
            self.fetcher.remove_partitions(lost)
        for tp in lost:
            self.fetch_waiters.notify(tp)
            self.produce_waiters.notify(tp)

    def partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"broker {self.broker_id} has no replica of {tp}")
        offline = self.log_manager.offline_log_dirs  # a failed log dir
        if offline and partition.log.dir.parent in offline:
            raise KafkaStorageError(f"{tp} is in offline log dir {partition.log.dir.parent}")
        if partition.corruption is not None:
            raise KafkaStorageError(f"{tp}: this replica is corrupt and being repaired")
        return partition

    def topic_config(self, topic: str) -> TopicConfig:
        overrides = {**self._stored_overrides.get(topic, {}), **self.topic_overrides(topic)}
        try:
            return self.topic_defaults.topic_config(overrides)
        except ConfigError as exc:
            log.warning("ignoring the config overrides of topic %s: %s", topic, exc)
            return self.topic_defaults.topic_config()

    async def load_topic_overrides(self, topics: Iterable[str]) -> None:
        """Read /config/topics/T (cluster mode) for topics this broker has no replica
        of yet, so their min.insync.replicas & co. are the topic's own."""
        loader = self.topic_config_loader
        if loader is None:
            return
        for topic in set(topics) - self._stored_overrides.keys():
            try:
                self._stored_overrides[topic] = dict(await loader(topic))
            except Exception as exc:  # ZooKeeper trouble: broker defaults, retried later
                log.warning("cannot read the config of topic %s: %r", topic, exc)

    async def update_topic_defaults(self, defaults: BrokerConfig) -> None:
        """A dynamic change of the broker keys topics inherit (log.retention.ms & co.,
        broker/admin/broker_configs.py): every hosted topic's partitions and logs take it."""
        if defaults == self.topic_defaults:
            return
        self.topic_defaults = defaults
        for topic in sorted({tp.topic for tp in self.partitions}):
            await self._apply_topic_config(topic)

    async def update_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A dynamic change of ``topic``'s /config/topics/T (broker/admin/topic_configs.py):
        its live partitions and logs take the new overrides at once."""
        self._stored_overrides[topic] = dict(overrides)
        await self._apply_topic_config(topic)

    async def _apply_topic_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for partition in self.partitions.values():
            if partition.tp.topic == topic:
                partition.config = config
        async with self.log_manager_lock:
            self.log_manager.update_config(
                topic,
                to_log_config(
                    config, producer_id_expiration_ms=self.config.producer_id_expiration_ms
                ),
            )

    # -- follower fetches and ISR changes -------------------------------------------------

    def _corrupt_read(self, partition: Partition, error: CorruptRecordError) -> None:
        if self.corruption is not None:
            self.corruption.found(partition, error, "read")

    def _rack_of(self, broker_id: int) -> str | None:
        broker = self.metadata_cache.broker(broker_id)
        return None if broker is None else broker.rack

    def _record_follower_fetch(
        self, partition: Partition, replica_id: int, request: FetchPartition, result: ReadResult
    ) -> None:
        """A follower fetched at ``request.fetch_offset``: its LEO and log start; maybe
        the HW and the ISR move."""
        record_follower_fetch(
            partition, replica_id, request.fetch_offset, result.log_end_offset, self.clock()
        )
        replica = partition.remote_replicas.get(replica_id)
        if replica is not None and replica.log_start_offset != request.log_start_offset:
            replica.log_start_offset = request.log_start_offset
            self.delete_records_waiters.notify(partition.tp)
        if partition.maybe_increment_high_watermark():
            self.wake(partition.tp)  # consumers can read more, acks=all may be done
        self.isr_manager.maybe_expand(partition, replica_id)

    def _on_isr_changed(self, partition: Partition) -> None:
        """A shrink may let the HW move; any change may end acks=all waits (min ISR)."""
        partition.maybe_increment_high_watermark()
        self.wake(partition.tp)

    def wake(self, tp: TopicPartition) -> None:
        self.fetch_waiters.notify(tp)
        self.produce_waiters.notify(tp)
