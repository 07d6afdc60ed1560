"""ReplicaManager: every partition replica this broker holds, and the requests on them.

Kafka's division of labour, kept here: KafkaApis decodes a request and calls the
ReplicaManager; the ReplicaManager finds the Partition, checks the controller's epoch
and the leader epoch, and the Partition does the work on its Log.

- ``leadership``: ``become_leader_or_follower`` (LeaderAndIsr), ``stop_replicas``
  (StopReplica) and ``update_metadata``, the controller's requests, checked against its
  epoch and the leader epochs (broker/replication/leadership_changes.py). Followers are
  handed to the replica fetcher, which truncates their log.
- ``append_records`` (Produce): acks validation, then per partition
  ``append_records_to_leader``; wakes parked fetches of partitions that grew.
- ``fetch_messages`` / ``wait_for_fetch`` (Fetch): delegated to the FetchReader
  (broker/replication/fetch_reader.py); a follower's fetch comes back to the hosted
  replicas to move its LEO, the HW and the ISR.
- Two purgatories keyed by partition, the hosted replicas': ``fetch_waiters`` (woken
  on append and HW move) and ``produce_waiters`` (HW, ISR or leadership changes:
  acks=all, offset-ordered - broker/replication/delayed_produce.py).

State changes from the controller are serialised by one Trio lock (Kafka's
replicaStateChangeLock); data-path calls are synchronous and never wait on it.

The manager owns two collaborators: ``replicas``, the ``HostedReplicas``
(broker/replication/hosted_replicas.py: the partitions, the purgatories, the hooks,
topic configs, what a follower's fetch or an ISR change moves), and ``leadership``, the
``LeadershipChanges`` handed those replicas (the controller's requests); it is itself
produce, fetch, acks=all and periodic work. Whoever needs only the hosted replicas (log
dirs, the cleaner, configs, metrics, corruption repair) is handed ``replicas``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import trio

from minibroker.broker.replication.delayed_produce import (
    PendingAck,
    await_replication,
    check_acknowledged,
)
from minibroker.broker.replication.fetch_reader import (
    EarlierRead,
    FetchParams,
    FetchPartition,
    PartitionRead,
)
from minibroker.broker.replication.hosted_replicas import (
    HostedReplicas,
)
from minibroker.broker.replication.leadership_changes import LeadershipChanges
from minibroker.broker.replication.partition import AppendResult
from minibroker.protocol.errors import InvalidRequiredAcksError, KafkaError, KafkaStorageError
from minibroker.protocol.messages.bodies import Records
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

VALID_ACKS = frozenset({0, 1, -1})


class ReplicaManager:
    """Every partition replica this broker holds (see the module doc); ``run`` it in a
    nursery for the periodic work."""

    def __init__(self, replicas: HostedReplicas) -> None:
        self.replicas = replicas
        """The partitions and what serves them (broker/replication/hosted_replicas.py)."""
        self.leadership = LeadershipChanges(self.replicas)
        """Applies the controller's requests to these replicas."""

    # -- produce -----------------------------------------------------------------------------

    def append_records(
        self,
        required_acks: int,
        entries: Sequence[tuple[TopicPartition, Records]],
        *,
        coordinator: bool = False,
    ) -> list[tuple[TopicPartition, AppendResult | KafkaError]]:
        """Append each entry to its partition's leader log; one result per entry.
        ``coordinator``: a coordinator's own writes (transaction markers, which producers
        may not send, and a transaction's offsets, which carry no sequence)."""
        if required_acks not in VALID_ACKS:
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {required_acks}")
            return [(tp, error) for tp, _ in entries]
        replicas = self.replicas
        results: list[tuple[TopicPartition, AppendResult | KafkaError]] = []
        for tp, records in entries:
            try:
                partition = replicas.partition_or_error(tp)
                result = partition.append_records_to_leader(
                    records, required_acks, coordinator=coordinator
                )
            except KafkaError as exc:
                results.append((tp, exc))
                continue
            except OSError as exc:
                log.error("append to %s failed: %s", tp, exc)
                results.append((tp, KafkaStorageError(str(exc))))
                replicas.log_dir_failed(replicas.partitions[tp].log.dir.parent)
                continue
            replicas.fetch_waiters.notify(tp)
            if result.high_watermark_moved:
                replicas.produce_waiters.notify(tp)
            info = result.info
            if not info.duplicate:  # a deduplicated retry wrote nothing
                replicas.metrics.record_append(
                    tp.topic, info.last_offset - info.first_offset + 1, len(records)
                )
            results.append((tp, result))
        return results

    # -- fetch -------------------------------------------------------------------------------

    def fetch_messages(self, fetch: FetchParams) -> list[PartitionRead] | EarlierRead:
        """Kafka's fetchMessages, first half: the answer now, or what was found if the
        fetch must wait (``wait_for_fetch``); broker/replication/fetch_reader.py."""
        return self.replicas.fetch_reader.fetch_messages(fetch)

    async def fetch_messages_in_turns(
        self, fetch: FetchParams, per_turn: int
    ) -> list[PartitionRead] | EarlierRead:
        """``fetch_messages`` reading ``per_turn`` partitions per event-loop turn."""
        return await self.replicas.fetch_reader.fetch_messages_in_turns(fetch, per_turn)

    async def wait_for_fetch(
        self, fetch: FetchParams, earlier: EarlierRead | None = None
    ) -> list[PartitionRead]:
        """The delayed fetch, answered once satisfied or at ``max_wait_ms``."""
        return await self.replicas.fetch_reader.wait_for_fetch(fetch, earlier)

    def read(
        self, replica_id: int, max_bytes: int, partitions: Sequence[FetchPartition]
    ) -> list[PartitionRead]:
        """Read every requested partition, sharing ``max_bytes`` between them."""
        return self.replicas.fetch_reader.read(replica_id, max_bytes, partitions)

    # -- acks=all ----------------------------------------------------------------------------

    async def wait_for_acks(
        self,
        results: Sequence[tuple[TopicPartition, AppendResult | KafkaError]],
        timeout_ms: int,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Kafka's delayed produce (broker/replication/delayed_produce.py): wait until the ISR has
        every appended batch; per partition None (acknowledged) or the error to answer."""
        pending = [
            PendingAck(tp, result.info.last_offset, result.leader_epoch)
            for tp, result in results
            if isinstance(result, AppendResult) and result.info.num_batches
        ]
        return await await_replication(
            pending, waiters=self.replicas.produce_waiters, timeout_ms=timeout_ms
        )

    def acknowledged_now(
        self, results: Sequence[tuple[TopicPartition, AppendResult | KafkaError]]
    ) -> dict[TopicPartition, KafkaError | None] | None:
        """``wait_for_acks``' outcomes when every appended batch is acknowledged already
        (a partition whose only in-sync replica is its leader): the answer needs no
        task; None when some must wait."""
        outcomes: dict[TopicPartition, KafkaError | None] = {}
        for tp, result in results:
            if isinstance(result, AppendResult) and result.info.num_batches:
                pending = PendingAck(tp, result.info.last_offset, result.leader_epoch)
                done, error = check_acknowledged(self.replicas.get_partition(tp), pending)
                if not done:
                    return None
                outcomes[tp] = error
        return outcomes

    # -- lifecycle ---------------------------------------------------------------------------

    def high_watermarks(self) -> dict[Path, dict[TopicPartition, int]]:
        """Each log dir's partitions and their HWs (broker/replication/hw_checkpoint.py)."""
        replicas = self.replicas
        return replicas.hw_checkpoint.by_log_dir(replicas.partitions)

    async def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every log dir (fsync in a thread)."""
        replicas = self.replicas
        await replicas.hw_checkpoint.write(replicas.partitions)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Periodic work: the HW checkpoint; ISR expiry and propagation (broker/replication/isr.py);
        new leaderships' epoch checkpoints (broker/replication/epoch_checkpoints.py)."""
        replicas = self.replicas
        async with trio.open_nursery() as nursery:
            await nursery.start(replicas.isr_manager.run)
            await nursery.start(replicas.epoch_checkpoints.run)
            await nursery.start(replicas.partition_metadata.run)
            task_status.started()
            interval = replicas.config.replica_high_watermark_checkpoint_interval_ms / 1000
            while True:
                await trio.sleep(interval)
                try:
                    await self.checkpoint_high_watermarks()
                except OSError as exc:
                    log.error("cannot write replication-offset-checkpoint: %s", exc)

    def shutdown(self) -> None:
        """Stop fetching; wake every parked request so it answers now (stopping)."""
        replicas = self.replicas
        if replicas.fetcher is not None:
            replicas.fetcher.shutdown()
        replicas.fetch_waiters.notify_all()
        replicas.produce_waiters.notify_all()
