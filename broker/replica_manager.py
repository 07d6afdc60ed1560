"""ReplicaManager: every partition replica this broker holds, and the requests on them.

Kafka's division of labour, kept here: KafkaApis decodes a request and calls the
ReplicaManager; the ReplicaManager finds the Partition, checks the controller's epoch
and the leader epoch, and the Partition does the work on its Log.

- ``become_leader_or_follower`` (LeaderAndIsr): refuses a stale controller epoch as a
  whole (STALE_CONTROLLER_EPOCH); per partition, refuses a leader epoch that is not
  newer than the one applied (STALE_CONTROLLER_EPOCH, as Kafka 2.x answers) and a
  state that does not list this broker as a replica (UNKNOWN_TOPIC_OR_PARTITION);
  otherwise creates the log if needed (in the least loaded log dir, LogManager's rule)
  and makes the partition leader or follower. Followers are handed to the replica
  fetcher after their log is truncated there.
- ``stop_replicas`` (StopReplica): drops partitions, deleting their logs if asked.
- ``append_records`` (Produce): acks validation, then per partition
  ``append_records_to_leader``; wakes parked fetches of partitions that grew.
- ``fetch_messages`` / ``wait_for_fetch`` (Fetch): delegated to the FetchReader
  (broker/fetch_reader.py); a follower's fetch comes back here to move its LEO, the HW
  and the ISR.
- Two purgatories keyed by partition: ``fetch_waiters`` (woken on append and HW move)
  and ``produce_waiters`` (HW, ISR or leadership changes: acks=all, offset-ordered -
  broker/delayed_produce.py).

State changes from the controller are serialised by one Trio lock (Kafka's
replicaStateChangeLock); data-path calls are synchronous and never wait on it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

from minibroker.broker.assignment import validate_topic_name
from minibroker.broker.config import BrokerConfig, TopicConfig
from minibroker.broker.delayed_produce import DelayedProducePurgatory, PendingAck, await_replication
from minibroker.broker.fetch_reader import FetchPartition as FetchPartition
from minibroker.broker.fetch_reader import FetchReader
from minibroker.broker.fetch_reader import FetchRequest as FetchRequest
from minibroker.broker.fetch_reader import PartitionRead as PartitionRead
from minibroker.broker.hw_checkpoint import HighWatermarkCheckpoint
from minibroker.broker.isr import IsrManager, IsrStore, record_follower_fetch
from minibroker.broker.metadata_cache import MetadataCache
from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.partition import (
    AppendResult,
    Partition,
    PartitionState,
    ReadResult,
)
from minibroker.broker.purgatory import Purgatory
from minibroker.broker.replication_quota import ReplicationQuotas
from minibroker.protocol.errors import (
    NONE,
    ConfigError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    MinibrokerError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.leader_epoch import LeaderEpochCache
from minibroker.storage.log_config import Clock, LogConfig
from minibroker.storage.log_manager import LogManager
from minibroker.storage.names import TopicPartition
from minibroker.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger(__name__)

VALID_ACKS = frozenset({0, 1, -1})


TopicConfigLoader = Callable[[str], Awaitable[Mapping[str, str]]]
"""A topic's overrides as stored in ZooKeeper (/config/topics/T)."""

LogDirFailureHandler = Callable[[Path], Collection[TopicPartition]]
"""Takes a failed log dir offline; returns the partitions it held (none if already)."""


class CorruptionHook(Protocol):
    """What broker/corruption.py offers: take a corrupt replica out of service, and
    repair it once the controller has stopped it."""

    def found(
        self, partition: Partition, error: CorruptRecordError, source: str, *, counted: bool = ...
    ) -> None: ...
    def stopped(self, partition: Partition) -> None: ...
    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """Reports corrupt replicas to the controller until cancelled."""
        ...


class FetcherHook(Protocol):
    """What the ReplicaFetcherManager (broker/replica_fetcher.py) offers the
    ReplicaManager."""

    def add_partitions(self, partitions: Sequence[Partition]) -> None: ...
    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None: ...
    def shutdown(self) -> None: ...
    def max_lag(self) -> int: ...


def write_epoch_checkpoints(caches: Sequence[LeaderEpochCache]) -> None:
    """Write the leader-epoch checkpoints new leaderships left pending (worker thread).
    A failure is only logged: ``Log.flush`` writes a pending checkpoint again before it
    moves the recovery point, and reports a failing disk from there."""
    for cache in caches:
        try:
            cache.write_pending()
        except OSError as exc:
            log.warning("cannot write %s yet: %r", cache.path, exc)


def to_log_config(
    topic: TopicConfig, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
) -> LogConfig:
    return LogConfig(
        segment_bytes=topic.segment_bytes,
        segment_ms=topic.segment_ms,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        retention_ms=topic.retention_ms,
        retention_bytes=topic.retention_bytes,
        max_message_bytes=topic.max_message_bytes,
        file_delete_delay_ms=topic.file_delete_delay_ms,
        producer_id_expiration_ms=producer_id_expiration_ms,
    )


LeadershipListener = Callable[[Sequence[Partition], Sequence[TopicPartition]], None]
"""Called with the partitions this broker became leader of and those it stopped leading."""


class ReplicaManager:
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
        corruption: Callable[[ReplicaManager], CorruptionHook] | None = None,
    ) -> None:
        """Cluster mode passes ``isr_store`` (ISR changes are written to ZooKeeper) and
        ``topic_config_loader`` (/config/topics/T); standalone, both stay None.
        ``on_log_dir_failure`` takes a log dir that failed an I/O offline and returns
        the partitions that went with it. ``corruption`` builds, for this manager, what
        takes corrupt replicas out of service and repairs them (broker/corruption.py)."""
        self.config = config
        self.metrics = metrics or BrokerMetrics()
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.topic_overrides = topic_overrides or (lambda topic: {})
        self.topic_config_loader = topic_config_loader
        self._stored_overrides: dict[str, dict[str, str]] = {}
        self.controller_epoch = -1
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_waiters: Purgatory[TopicPartition] = Purgatory("fetch")
        self.produce_waiters = DelayedProducePurgatory(self.get_partition)
        self.fetcher = fetcher
        # The replication throttle (broker/replication_quota.py) lives with the reads it
        # limits; ``replication_quotas`` below reaches it.
        self.fetch_reader = FetchReader(
            broker_id=self.broker_id,
            partitions=self.partitions,
            partition_or_error=self.partition_or_error,
            fetch_waiters=self.fetch_waiters,
            replication_quotas=replication_quotas or ReplicationQuotas.unlimited(),
            on_corrupt_read=self._corrupt_read,
            on_follower_fetch=self._record_follower_fetch,
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
        self._state_change_lock = trio.Lock()
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
        """The replication throttle: its rates are set by broker/broker_configs.py, the
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
            return self.config.topic_config(overrides)
        except ConfigError as exc:
            log.warning("ignoring the config overrides of topic %s: %s", topic, exc)
            return self.config.topic_config()

    async def _load_topic_overrides(self, topics: Iterable[str]) -> None:
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

    async def update_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A dynamic change of ``topic``'s /config/topics/T (broker/topic_configs.py):
        its live partitions and logs take the new overrides at once."""
        self._stored_overrides[topic] = dict(overrides)
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

    # -- controller requests ---------------------------------------------------------------

    def _check_controller_epoch(self, controller_epoch: int, what: str) -> None:
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"{what} from controller epoch {controller_epoch}; "
                f"the latest known is {self.controller_epoch}"
            )
        self.controller_epoch = controller_epoch

    async def become_leader_or_follower(
        self, controller_epoch: int, states: Mapping[TopicPartition, PartitionState]
    ) -> dict[TopicPartition, int]:
        """Apply a LeaderAndIsr request; per-partition error codes (raises if stale)."""
        async with self._state_change_lock:
            self._check_controller_epoch(controller_epoch, "LeaderAndIsr")
            await self._load_topic_overrides(tp.topic for tp in states if tp not in self.partitions)
            errors: dict[TopicPartition, int] = {}
            accepted: list[tuple[TopicPartition, PartitionState]] = []
            leaders: list[tuple[Partition, PartitionState]] = []
            followers: list[tuple[Partition, PartitionState]] = []
            for tp, state in states.items():
                current = self.partitions.get(tp)
                offline = self.log_manager.offline_log_dirs
                if current is not None and (
                    current.log.dir.parent in offline or current.corruption is not None
                ):
                    # Before the epoch check, as Kafka: the controller resends the same
                    # state to learn exactly this (its log dir failed, or this replica
                    # is corrupt: broker/corruption.py).
                    errors[tp] = KafkaStorageError.code
                    continue
                if current is not None and state.leader_epoch <= current.leader_epoch:
                    log.warning(
                        "ignoring LeaderAndIsr for %s: leader epoch %d is not newer than %d",
                        tp,
                        state.leader_epoch,
                        current.leader_epoch,
                    )
                    errors[tp] = StaleControllerEpochError.code
                    continue
                if self.broker_id not in state.replicas:
                    errors[tp] = UnknownTopicOrPartitionError.code
                    continue
                try:  # the name becomes a directory name: never trust it
                    validate_topic_name(tp.topic)
                except InvalidTopicError as exc:
                    log.warning("refusing LeaderAndIsr for %r: %s", tp, exc)
                    errors[tp] = exc.code
                    continue
                if tp.partition < 0:
                    errors[tp] = UnknownTopicOrPartitionError.code
                    continue
                accepted.append((tp, state))
                errors[tp] = NONE
            errors |= await self._create_partitions(
                [tp for tp, _ in accepted if tp not in self.partitions]
            )
            for tp, state in accepted:
                partition = self.partitions.get(tp)
                if partition is not None and partition.corruption is not None:
                    errors[tp] = KafkaStorageError.code  # lost data when loaded
                elif partition is not None and errors[tp] == NONE:
                    (leaders if state.leader == self.broker_id else followers).append(
                        (partition, state)
                    )
            if leaders and self.fetcher is not None:
                self.fetcher.remove_partitions(p.tp for p, _ in leaders)
            for partition, state in leaders:
                partition.make_leader(state)
                self._wake(partition.tp)
                log.info("now leading %s at epoch %d", partition.tp, state.leader_epoch)
            changed = [p for p, state in followers if p.make_follower(state)]
            for partition in changed:
                self._wake(partition.tp)  # parked fetches answer NOT_LEADER_OR_FOLLOWER
            if changed and self.fetcher is not None:
                self.fetcher.remove_partitions(p.tp for p in changed)
                self.fetcher.add_partitions(changed)
            self._leadership_changed(
                [p for p, _ in leaders], [p.tp for p, _ in followers if not p.is_leader]
            )
            if leaders:
                # After the whole state change, off the event loop: ~1-10 ms of file
                # writes per partition there stalled every request (a controlled
                # shutdown moves a third of the leaderships in one request).
                caches = [p.log.leader_epoch_cache for p, _ in leaders]
                await trio.to_thread.run_sync(write_epoch_checkpoints, caches)
            return errors

    async def _create_partitions(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Partitions (and, where missing, logs) for ``tps``; the error code of each one
        that failed. All logs are made in one worker-thread call, which fsyncs each log
        dir once: one LeaderAndIsr can bring hundreds of new partitions."""
        if not tps:
            return {}
        configs = {tp: self.topic_config(tp.topic) for tp in tps}
        expiration = self.config.producer_id_expiration_ms
        log_configs = {
            tp: to_log_config(config, producer_id_expiration_ms=expiration)
            for tp, config in configs.items()
        }
        try:
            async with self.log_manager_lock:
                logs, failures = await trio.to_thread.run_sync(
                    self.log_manager.get_or_create_logs, log_configs
                )
        except (OSError, MinibrokerError) as exc:
            failures, logs = {tp: exc for tp in tps}, {}
        errors: dict[TopicPartition, int] = {}
        for tp, error in failures.items():
            log.warning("cannot create the log of %s: %s", tp, error)
            errors[tp] = error.code if isinstance(error, KafkaError) else KafkaStorageError.code
        for tp, log_ in logs.items():
            log_.config = log_configs[tp]  # a log loaded at start-up has the broker defaults
            self.partitions[tp] = Partition(
                tp,
                local_broker_id=self.broker_id,
                log=log_,
                config=configs[tp],
                clock=self.clock,
                initial_high_watermark=self.hw_checkpoint.initial(tp),
            )
            self._check_recovery_cuts(self.partitions[tp])
        return errors

    def _check_recovery_cuts(self, partition: Partition) -> None:
        """A log that loading cut below the checkpointed high watermark lost committed
        records: the replica must not lead or count in the ISR until it has them back
        (broker/corruption.py takes it through the corrupt-replica route)."""
        cuts = partition.log.recovery_cuts
        if not cuts or self.corruption is None:
            return
        first = min(cuts, key=lambda cut: cut.offset)
        if first.offset < self.hw_checkpoint.initial(partition.tp):
            self.corruption.found(partition, first, "recovery", counted=True)

    async def stop_replicas(
        self, controller_epoch: int, stops: Sequence[tuple[TopicPartition, bool]]
    ) -> dict[TopicPartition, int]:
        """Apply StopReplica: (partition, delete?) pairs; per-partition error codes."""
        async with self._state_change_lock:
            self._check_controller_epoch(controller_epoch, "StopReplica")
            if self.fetcher is not None:
                self.fetcher.remove_partitions(tp for tp, _ in stops)
            errors: dict[TopicPartition, int] = {}
            for tp, delete in stops:
                partition = self.partitions.get(tp)
                if partition is not None:
                    # Stop serving it: clients must go to the new leader.
                    partition.leader_id = -1
                    self._wake(tp)
                    if not delete and partition.corruption is not None and self.corruption:
                        self.corruption.stopped(partition)  # out of service: repair now
                if delete:
                    self.partitions.pop(tp, None)
                    try:
                        async with self.log_manager_lock:
                            await trio.to_thread.run_sync(self._delete_log, tp)
                    except OSError as exc:
                        errors[tp] = KafkaStorageError.code
                        log.error("cannot delete the log of %s: %s", tp, exc)
                        continue
                errors[tp] = NONE
            self._leadership_changed([], [tp for tp, _ in stops])
            return errors

    def _leadership_changed(self, leaders: list[Partition], resigned: list[TopicPartition]) -> None:
        if leaders or resigned:
            for listener in self.leadership_listeners:
                listener(leaders, resigned)

    def _delete_log(self, tp: TopicPartition) -> None:
        """Rename to -delete and remove the files (blocking: runs in a thread)."""
        if self.log_manager.delete_log(tp) is not None:
            self.log_manager.remove_deleted_logs()

    def update_metadata(self, body: Mapping[str, Any]) -> list[TopicPartition]:
        """Apply UpdateMetadata to the cache (raises STALE_CONTROLLER_EPOCH if old)."""
        self._check_controller_epoch(body["controller_epoch"], "UpdateMetadata")
        return self.metadata_cache.update(body)

    # -- produce -----------------------------------------------------------------------------

    def append_records(
        self, required_acks: int, entries: Sequence[tuple[TopicPartition, bytes]]
    ) -> list[tuple[TopicPartition, AppendResult | KafkaError]]:
        """Append each entry to its partition's leader log; one result per entry."""
        if required_acks not in VALID_ACKS:
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {required_acks}")
            return [(tp, error) for tp, _ in entries]
        results: list[tuple[TopicPartition, AppendResult | KafkaError]] = []
        for tp, records in entries:
            try:
                partition = self.partition_or_error(tp)
                result = partition.append_records_to_leader(records, required_acks)
            except KafkaError as exc:
                results.append((tp, exc))
                continue
            except OSError as exc:
                log.error("append to %s failed: %s", tp, exc)
                results.append((tp, KafkaStorageError(str(exc))))
                self.log_dir_failed(self.partitions[tp].log.dir.parent)
                continue
            self.fetch_waiters.notify(tp)
            if result.high_watermark_moved:
                self.produce_waiters.notify(tp)
            info = result.info
            if not info.duplicate:  # a deduplicated retry wrote nothing
                self.metrics.record_append(
                    tp.topic, info.last_offset - info.first_offset + 1, len(records)
                )
            results.append((tp, result))
        return results

    # -- fetch -------------------------------------------------------------------------------

    def fetch_messages(self, fetch: FetchRequest) -> list[PartitionRead] | None:
        """Kafka's fetchMessages, first half: the answer now, or None if the fetch must
        wait (``wait_for_fetch``); broker/fetch_reader.py."""
        return self.fetch_reader.fetch_messages(fetch)

    async def wait_for_fetch(self, fetch: FetchRequest) -> list[PartitionRead]:
        """The delayed fetch, answered once satisfied or at ``max_wait_ms``."""
        return await self.fetch_reader.wait_for_fetch(fetch)

    def read(
        self, replica_id: int, max_bytes: int, partitions: Sequence[FetchPartition]
    ) -> list[PartitionRead]:
        """Read every requested partition, sharing ``max_bytes`` between them."""
        return self.fetch_reader.read(replica_id, max_bytes, partitions)

    def _corrupt_read(self, partition: Partition, error: CorruptRecordError) -> None:
        if self.corruption is not None:
            self.corruption.found(partition, error, "read")

    def _record_follower_fetch(
        self, partition: Partition, replica_id: int, fetch_offset: int, result: ReadResult
    ) -> None:
        """A follower fetched at ``fetch_offset``: its LEO; maybe the HW and the ISR move."""
        record_follower_fetch(
            partition, replica_id, fetch_offset, result.log_end_offset, self.clock()
        )
        if partition.maybe_increment_high_watermark():
            self._wake(partition.tp)  # consumers can read more, acks=all may be done
        self.isr_manager.maybe_expand(partition, replica_id)

    def _on_isr_changed(self, partition: Partition) -> None:
        """A shrink may let the HW move; any change may end acks=all waits (min ISR)."""
        partition.maybe_increment_high_watermark()
        self._wake(partition.tp)

    # -- acks=all ----------------------------------------------------------------------------

    async def wait_for_acks(
        self,
        results: Sequence[tuple[TopicPartition, AppendResult | KafkaError]],
        timeout_ms: int,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Kafka's delayed produce (broker/delayed_produce.py): wait until the ISR has
        every appended batch; per partition None (acknowledged) or the error to answer."""
        pending = [
            PendingAck(tp, result.info.last_offset, result.leader_epoch)
            for tp, result in results
            if isinstance(result, AppendResult) and result.info.num_batches
        ]
        return await await_replication(pending, waiters=self.produce_waiters, timeout_ms=timeout_ms)

    # -- lifecycle ---------------------------------------------------------------------------

    def high_watermarks(self) -> dict[Path, dict[TopicPartition, int]]:
        """Each log dir's partitions and their HWs (broker/hw_checkpoint.py)."""
        return self.hw_checkpoint.by_log_dir(self.partitions)

    async def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every log dir (fsync in a thread)."""
        await self.hw_checkpoint.write(self.partitions)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Periodic work: the HW checkpoint; ISR expiry and propagation (broker/isr.py)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.isr_manager.run)
            task_status.started()
            interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
            while True:
                await trio.sleep(interval)
                try:
                    await self.checkpoint_high_watermarks()
                except OSError as exc:
                    log.error("cannot write replication-offset-checkpoint: %s", exc)

    def _wake(self, tp: TopicPartition) -> None:
        self.fetch_waiters.notify(tp)
        self.produce_waiters.notify(tp)

    def shutdown(self) -> None:
        """Stop fetching; wake every parked request so it answers now (stopping)."""
        if self.fetcher is not None:
            self.fetcher.shutdown()
        self.fetch_waiters.notify_all()
        self.produce_waiters.notify_all()
