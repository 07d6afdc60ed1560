"""The controller's requests to the replicas: LeaderAndIsr, StopReplica, UpdateMetadata.

How this works. Each request first checks the controller epoch: an older one than
already seen is refused as a whole (STALE_CONTROLLER_EPOCH), a newer one is
remembered. State changes are serialised by one Trio lock (Kafka's
replicaStateChangeLock); the data path never waits on it.

``become_leader_or_follower`` (LeaderAndIsr) answers per partition: a replica in an
offline log dir or being repaired answers KAFKA_STORAGE_ERROR before any other check
(the controller resends the state to learn exactly this); a leader epoch not newer
than the one applied is refused (STALE_CONTROLLER_EPOCH, as Kafka 2.x answers), and so
is a state that does not list this broker, a bad topic name or a negative partition
(UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION). Logs missing for the accepted
partitions are created in one worker-thread call (in the least loaded log dir,
LogManager's rule); a log that loading cut below its checkpointed high watermark goes
the corrupt-replica route (broker/logdirs/corruption.py). Then each partition becomes leader
(its fetcher stops) or follower (handed to the replica fetcher, which truncates its
log), the requests parked on it wake, and the leadership listeners learn what this
broker now leads and what it stopped leading. New leaders' leader-epoch checkpoints
are written after the answer, off the event loop (broker/replication/epoch_checkpoints.py).

``stop_replicas`` (StopReplica) stops serving the partitions (and repairs a corrupt one
now out of service), deleting their logs when asked. ``update_metadata`` hands
UpdateMetadata to the metadata cache.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import trio

from minibroker.broker.cluster.assignment import validate_topic_name
from minibroker.broker.replication.hosted_replicas import HostedReplicas, to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition
from minibroker.broker.replication.summaries import some_of
from minibroker.protocol.errors import (
    NONE,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    MinibrokerError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition

# One logger for the whole ReplicaManager, whichever of its parts reports.
log = logging.getLogger("minibroker.broker.replication.replica_manager")


class LeadershipChanges:
    """Applies the controller's LeaderAndIsr, StopReplica and UpdateMetadata to the
    replicas this broker hosts (the ReplicaManager's ``leadership``)."""

    def __init__(self, replicas: HostedReplicas) -> None:
        self._replicas = replicas
        self.controller_epoch = -1
        """The newest controller epoch seen: requests from an older one are refused."""
        self._state_change_lock = trio.Lock()

    def _check_controller_epoch(self, controller_epoch: int, what: str) -> None:
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"{what} from controller epoch {controller_epoch}; "
                f"the latest known is {self.controller_epoch}"
            )
        self.controller_epoch = controller_epoch

    async def become_leader_or_follower(
        self,
        controller_epoch: int,
        states: Mapping[TopicPartition, LeaderAndIsrPartition],
        topic_ids: Mapping[str, bytes] | None = None,
    ) -> dict[TopicPartition, int]:
        """Apply a LeaderAndIsr request; per-partition error codes (raises if stale).
        ``topic_ids``: the ids (KIP-516) the request names, for partition.metadata."""
        replicas = self._replicas
        async with self._state_change_lock:
            self._check_controller_epoch(controller_epoch, "LeaderAndIsr")
            await replicas.load_topic_overrides(
                tp.topic for tp in states if tp not in replicas.partitions
            )
            errors: dict[TopicPartition, int] = {}
            accepted: list[tuple[TopicPartition, LeaderAndIsrPartition]] = []
            leaders: list[tuple[Partition, LeaderAndIsrPartition]] = []
            followers: list[tuple[Partition, LeaderAndIsrPartition]] = []
            stale: list[tuple[TopicPartition, int, int]] = []
            for tp, state in states.items():
                current = replicas.partitions.get(tp)
                offline = replicas.log_manager.offline_log_dirs
                if current is not None and (
                    current.log.dir.parent in offline or current.corruption is not None
                ):
                    # Before the epoch check, as Kafka: the controller resends the same
                    # state to learn exactly this (its log dir failed, or this replica
                    # is corrupt: broker/logdirs/corruption.py).
                    errors[tp] = KafkaStorageError.code
                    continue
                if current is not None and state.leader_epoch <= current.leader_epoch:
                    stale.append((tp, state.leader_epoch, current.leader_epoch))
                    errors[tp] = StaleControllerEpochError.code
                    continue
                if replicas.broker_id not in state.replicas:
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
            if stale:
                log.warning(
                    "ignoring LeaderAndIsr for %d partitions: leader epoch not newer than the"
                    " one applied (%s)",
                    len(stale),
                    some_of((f"{tp} {new} <= {have}" for tp, new, have in stale), len(stale)),
                )
            errors |= await self._create_partitions(
                [tp for tp, _ in accepted if tp not in replicas.partitions]
            )
            for tp, state in accepted:
                partition = replicas.partitions.get(tp)
                if partition is not None and partition.corruption is not None:
                    errors[tp] = KafkaStorageError.code  # lost data when loaded
                elif partition is not None and errors[tp] == NONE:
                    (leaders if state.leader == replicas.broker_id else followers).append(
                        (partition, state)
                    )
            if leaders and replicas.fetcher is not None:
                replicas.fetcher.remove_partitions(p.tp for p, _ in leaders)
            for partition, state in leaders:
                partition.make_leader(state)
                replicas.wake(partition.tp)
            changed = [p for p, state in followers if p.make_follower(state)]
            for partition in changed:
                replicas.wake(partition.tp)  # parked fetches answer NOT_LEADER_OR_FOLLOWER
            # One line per request, not per partition: a LeaderAndIsr may carry 10,000.
            if leaders:
                log.info(
                    "now leading %d partitions (%s)",
                    len(leaders),
                    some_of(
                        (f"{p.tp} at epoch {s.leader_epoch}" for p, s in leaders), len(leaders)
                    ),
                )
            if changed:
                log.info(
                    "now following %d partitions (%s)",
                    len(changed),
                    some_of(
                        (f"{p.tp}: leader {p.leader_id}, epoch {p.leader_epoch}" for p in changed),
                        len(changed),
                    ),
                )
            if changed and replicas.fetcher is not None:
                replicas.fetcher.remove_partitions(p.tp for p in changed)
                replicas.fetcher.add_partitions(changed)
            self._leadership_changed(
                [p for p, _ in leaders], [p.tp for p, _ in followers if not p.is_leader]
            )
            # Off the event loop and after the answer (broker/replication/epoch_checkpoints.py).
            replicas.epoch_checkpoints.write_soon(p.log.leader_epoch_cache for p, _ in leaders)
            if topic_ids:
                self._note_topic_ids([p for p, _ in (*leaders, *followers)], topic_ids)
            return errors

    def _note_topic_ids(self, partitions: Sequence[Partition], ids: Mapping[str, bytes]) -> None:
        """Partitions learning their topic's id get their partition.metadata queued."""
        replicas = self._replicas
        fresh = []
        for partition in partitions:
            topic_id = ids.get(partition.tp.topic)
            if topic_id is not None and partition.topic_id != topic_id:
                partition.topic_id = topic_id
                fresh.append((partition.log.dir, topic_id))
        replicas.partition_metadata.write_soon(fresh)

    async def _create_partitions(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Partitions (and, where missing, logs) for ``tps``; the error code of each one
        that failed. All logs are made in one worker-thread call, which fsyncs each log
        dir once: one LeaderAndIsr can bring hundreds of new partitions."""
        replicas = self._replicas
        if not tps:
            return {}
        configs = {tp: replicas.topic_config(tp.topic) for tp in tps}
        expiration = replicas.config.producer_id_expiration_ms
        log_configs = {
            tp: to_log_config(config, producer_id_expiration_ms=expiration)
            for tp, config in configs.items()
        }
        try:
            async with replicas.log_manager_lock:
                logs, failures = await trio.to_thread.run_sync(
                    replicas.log_manager.get_or_create_logs, log_configs
                )
        except (OSError, MinibrokerError) as exc:
            failures, logs = {tp: exc for tp in tps}, {}
        errors: dict[TopicPartition, int] = {}
        for tp, error in failures.items():
            log.warning("cannot create the log of %s: %s", tp, error)
            errors[tp] = error.code if isinstance(error, KafkaError) else KafkaStorageError.code
        for tp, log_ in logs.items():
            log_.config = log_configs[tp]  # a log loaded at start-up has the broker defaults
            replicas.partitions[tp] = Partition(
                tp,
                local_broker_id=replicas.broker_id,
                log=log_,
                config=configs[tp],
                clock=replicas.clock,
                initial_high_watermark=replicas.hw_checkpoint.initial(tp),
            )
            self._check_recovery_cuts(replicas.partitions[tp])
        return errors

    def _check_recovery_cuts(self, partition: Partition) -> None:
        """A log that loading cut below the checkpointed high watermark lost committed
        records: the replica must not lead or count in the ISR until it has them back
        (broker/logdirs/corruption.py takes it through the corrupt-replica route)."""
        replicas = self._replicas
        cuts = partition.log.recovery_cuts
        if not cuts or replicas.corruption is None:
            return
        first = min(cuts, key=lambda cut: cut.offset)
        if first.offset < replicas.hw_checkpoint.initial(partition.tp):
            replicas.corruption.found(partition, first, "recovery", counted=True)

    async def stop_replicas(
        self, controller_epoch: int, stops: Sequence[tuple[TopicPartition, bool]]
    ) -> dict[TopicPartition, int]:
        """Apply StopReplica: (partition, delete?) pairs; per-partition error codes."""
        replicas = self._replicas
        async with self._state_change_lock:
            self._check_controller_epoch(controller_epoch, "StopReplica")
            if replicas.fetcher is not None:
                replicas.fetcher.remove_partitions(tp for tp, _ in stops)
            errors: dict[TopicPartition, int] = {}
            for tp, delete in stops:
                partition = replicas.partitions.get(tp)
                if partition is not None:
                    # Stop serving it: clients must go to the new leader.
                    partition.leader_id = -1
                    replicas.wake(tp)
                    if not delete and partition.corruption is not None and replicas.corruption:
                        replicas.corruption.stopped(partition)  # out of service: repair now
                if delete:
                    replicas.partitions.pop(tp, None)
                    try:
                        async with replicas.log_manager_lock:
                            await trio.to_thread.run_sync(self._delete_log, tp)
                    except OSError as exc:
                        errors[tp] = KafkaStorageError.code
                        log.error("cannot delete the log of %s: %s", tp, exc)
                        continue
                errors[tp] = NONE
            self._leadership_changed([], [tp for tp, _ in stops])
            return errors

    def _leadership_changed(self, leaders: list[Partition], resigned: list[TopicPartition]) -> None:
        replicas = self._replicas
        if leaders or resigned:
            for listener in replicas.leadership_listeners:
                listener(leaders, resigned)

    def _delete_log(self, tp: TopicPartition) -> None:
        """Rename to -delete and remove the files (blocking: runs in a thread)."""
        replicas = self._replicas
        if replicas.log_manager.delete_log(tp) is not None:
            replicas.log_manager.remove_deleted_logs()

    def update_metadata(self, request: bodies.UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply UpdateMetadata to the cache (raises STALE_CONTROLLER_EPOCH if old)."""
        replicas = self._replicas
        self._check_controller_epoch(request["controller_epoch"], "UpdateMetadata")
        return replicas.metadata_cache.update(request)
