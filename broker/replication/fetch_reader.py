"""The Fetch path: reading the requested partitions for a consumer or a follower.

Kafka's fetchMessages and readFromLocalLog, split out of the ReplicaManager, which
owns one FetchReader and delegates ``fetch_messages``, ``wait_for_fetch`` and ``read``
to it. Per partition a read is bounded by the response's ``max_bytes`` (the first
partition with data may exceed it by one batch so a consumer always progresses); a
fetch short of ``min_bytes`` parks in the ``fetch_waiters`` purgatory until appends or
HW moves satisfy it or ``max_wait_ms`` passes. Followers' reads of throttled copies
take from the leader's replication quota (broker/quotas/replication_quota.py).

The reader holds no state of its own: it is given the manager's partitions, their
lookup, the purgatory and what to do when a read meets a corrupt replica or a follower
fetches.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import trio

from minibroker.broker.quotas.replication_quota import (
    FetchBudget,
    ReplicationQuotas,
    is_listed,
    is_throttled_copy,
)
from minibroker.broker.replication.partition import NO_EPOCH, Partition, ReadResult
from minibroker.broker.replication.purgatory import Purgatory
from minibroker.broker.replication.replica_selector import RackAwareReplicaSelector
from minibroker.protocol.errors import KafkaError, KafkaStorageError, OffsetOutOfRangeError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import CorruptRecordError

THROTTLE_RETRY_MIN_S = 0.005
PARKED_FETCH_MAX_BYTES = 64 * 1024 * 1024
"""What the parked (delayed) fetches of a broker may read in all: each reserves its
``max_bytes`` while it waits, and once the reservations reach this a newly parked fetch
reads at most what is left (at least one batch, as any fetch). Without it a client could
park many long polls of a large ``max_bytes`` per connection whose reads, all due at the
same deadline, held the memory and the event loop together."""
"""Shortest pause before a parked, throttled follower fetch reads again (no spinning)."""


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition of a Fetch request."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    log_start_offset: int = -1
    """A follower's own log start (Fetch v5+; the leader's DeleteRecords waits for it)."""


@dataclass(frozen=True, slots=True)
class FetchParams:
    """A Fetch request's parameters (replica_id -1: a consumer, else a follower)."""

    replica_id: int
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    partitions: Sequence[FetchPartition]
    client_rack: str | None = None
    """A consumer's rack (Fetch v11+, KIP-392): not None, it may read from followers and
    be pointed at a replica in its rack ("" when it names none)."""
    read_committed: bool = False
    """isolation_level 1: read below the last stable offset only (KIP-98)."""


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """One partition of a Fetch answer: a result or the error that replaced it."""

    tp: TopicPartition
    result: ReadResult | None
    error: KafkaError | None
    # With OFFSET_OUT_OF_RANGE the leader still tells where its log starts and ends,
    # so a consumer can reset without another round trip.
    high_watermark: int = -1
    log_start_offset: int = -1
    preferred_read_replica: int = -1
    """The replica the consumer should fetch from instead (no records then), or -1."""

    @property
    def size(self) -> int:
        return 0 if self.result is None else len(self.result.records)


class EarlierRead(NamedTuple):
    """An unsatisfied fetch's first read and the fetch purgatory's notification count
    when it was made: while no notify came since, it is still what a read would find.
    ``reads`` is None when that read found record data: a parked fetch holds none (a
    client can park many fetches of max_bytes each, and the caller keeps this object
    for as long as the fetch waits)."""

    reads: list[PartitionRead] | None
    notifications: int

    @classmethod
    def of(cls, reads: list[PartitionRead], notifications: int) -> EarlierRead:
        return cls(None if any(read.size for read in reads) else reads, notifications)


def fetch_satisfied(reads: Sequence[PartitionRead], fetch: FetchParams) -> bool:
    """A fetch is answered once it has min_bytes, or as soon as any partition fails."""
    total = 0
    for read in reads:
        if read.error is not None or read.preferred_read_replica >= 0:
            return True
        total += read.size
    return total >= fetch.min_bytes


class FetchReader:
    """Answers Fetch requests from the partitions this broker holds."""

    def __init__(
        self,
        *,
        broker_id: int,
        partitions: Mapping[TopicPartition, Partition],
        partition_or_error: Callable[[TopicPartition], Partition],
        fetch_waiters: Purgatory[TopicPartition],
        replication_quotas: ReplicationQuotas,
        on_corrupt_read: Callable[[Partition, CorruptRecordError], None],
        on_follower_fetch: Callable[[Partition, int, FetchPartition, ReadResult], None],
        replica_selector: RackAwareReplicaSelector | None = None,
    ) -> None:
        """``partitions`` is the manager's live mapping; ``partition_or_error`` raises
        the error to answer for a partition that cannot be read. ``on_follower_fetch``
        takes (partition, follower id, fetch offset, result) after a follower's read.
        ``replica_selector`` (``replica.selector.class``) points consumers that name a
        rack at a follower in it."""
        self.broker_id = broker_id
        self.partitions = partitions
        self.partition_or_error = partition_or_error
        self.fetch_waiters = fetch_waiters
        self.replication_quotas = replication_quotas
        self._on_corrupt_read = on_corrupt_read
        self._on_follower_fetch = on_follower_fetch
        self.replica_selector = replica_selector
        self.parked_bytes = 0
        """The ``max_bytes`` reserved by the fetches parked now."""

    def fetch_messages(self, fetch: FetchParams) -> list[PartitionRead] | EarlierRead:
        """Kafka's fetchMessages, first half: the answer now, or, if the fetch must wait
        (it asked to wait, found fewer than ``min_bytes`` and no partition failed), what
        it found, for ``wait_for_fetch``."""
        notifications = self.fetch_waiters.notifications
        reads = self._read(fetch)
        if fetch.max_wait_ms <= 0 or not fetch.partitions or fetch_satisfied(reads, fetch):
            return self._record_throttled(fetch.replica_id, reads)
        return EarlierRead.of(reads, notifications)

    async def fetch_messages_in_turns(
        self, fetch: FetchParams, per_turn: int
    ) -> list[PartitionRead] | EarlierRead:
        """``fetch_messages`` for a fetch of many partitions: read ``per_turn`` at a
        time, the event loop serving others between; the byte budget and the one
        oversized first batch (KIP-74) carry over from turn to turn."""
        notifications = self.fetch_waiters.notifications
        reads: list[PartitionRead] = []
        used = 0  # a running total: summing every read each turn was quadratic
        for start in range(0, len(fetch.partitions), per_turn):
            if start:
                await trio.lowlevel.checkpoint()
            turn = self.read(
                fetch.replica_id,
                max(0, fetch.max_bytes - used),
                fetch.partitions[start : start + per_turn],
                fetch.client_rack,
                first_with_data=not used,
                read_committed=fetch.read_committed,
            )
            used += sum(r.size for r in turn)
            reads += turn
        if fetch.max_wait_ms <= 0 or not fetch.partitions or fetch_satisfied(reads, fetch):
            return self._record_throttled(fetch.replica_id, reads)
        return EarlierRead.of(reads, notifications)

    async def wait_for_fetch(
        self, fetch: FetchParams, earlier: EarlierRead | None = None
    ) -> list[PartitionRead]:
        """The delayed fetch: parked on its partitions, re-read on every append or HW
        move there, answered once satisfied or at ``max_wait_ms``. It reads at most the
        share of ``PARKED_FETCH_MAX_BYTES`` it could reserve. ``earlier``: what
        ``fetch_messages`` found, used instead of a first read if nothing changed since."""
        reserved = max(0, min(fetch.max_bytes, PARKED_FETCH_MAX_BYTES - self.parked_bytes))
        if reserved < fetch.max_bytes:
            fetch = dataclasses.replace(fetch, max_bytes=reserved)
        self.parked_bytes += reserved
        try:
            return await self._parked(fetch, earlier)
        finally:
            self.parked_bytes -= reserved

    async def _parked(self, fetch: FetchParams, earlier: EarlierRead | None) -> list[PartitionRead]:
        deadline = trio.current_time() + fetch.max_wait_ms / 1000
        keys = [p.tp for p in fetch.partitions]
        while True:
            with self.fetch_waiters.watch(keys) as waiter:
                reads: list[PartitionRead] | None
                if (
                    earlier is not None
                    and earlier.reads is not None
                    and earlier.notifications == self.fetch_waiters.notifications
                ):
                    reads = earlier.reads  # a follower's idle partitions: no second read
                else:
                    reads = self._read(fetch)
                earlier = None
                if fetch_satisfied(reads, fetch):
                    return self._record_throttled(fetch.replica_id, reads)
                # Parked, it holds no record data: the wake re-reads. (A client can park
                # many fetches of max_bytes each; their reads would all stay in memory.)
                # A read without any is kept: unless something wakes the fetch, none of
                # its partitions changed, and reading a follower's thousands of idle
                # partitions again at the deadline doubled what an idle broker spent.
                if any(read.size for read in reads):
                    reads = None
                wake = min(deadline, self._throttle_retry_at(fetch.replica_id))
                if not await waiter.wait_until(wake) and wake >= deadline:
                    if reads is None:
                        reads = self._read(fetch)
                    return self._record_throttled(fetch.replica_id, reads)

    def _read(self, fetch: FetchParams) -> list[PartitionRead]:
        return self.read(
            fetch.replica_id,
            fetch.max_bytes,
            fetch.partitions,
            fetch.client_rack,
            read_committed=fetch.read_committed,
        )

    def read(
        self,
        replica_id: int,
        max_bytes: int,
        partitions: Sequence[FetchPartition],
        client_rack: str | None = None,
        *,
        first_with_data: bool = True,
        read_committed: bool = False,
    ) -> list[PartitionRead]:
        """Read every requested partition, sharing ``max_bytes`` between them;
        ``first_with_data``: the first partition with data may exceed them (KIP-74).
        ``client_rack`` not None: a consumer that may read from followers (KIP-392).
        ``read_committed``: a consumer reading below the last stable offsets."""
        from_follower = replica_id >= 0
        leader_only = client_rack is None
        selector = None if leader_only else self.replica_selector
        remaining = max_bytes
        reads: list[PartitionRead] = []
        budget: FetchBudget | None = None  # made on first need: most fetches never do
        for request in partitions:
            try:
                partition = self.partition_or_error(request.tp)
                max_bytes = min(request.max_bytes, remaining)
                held = False
                if from_follower and self._leader_throttles(partition, replica_id):
                    # A throttled copy gets at most the quota's allowance; with none, no
                    # records now but its HW and offsets as usual.
                    budget = budget or FetchBudget(self.replication_quotas.leader)
                    max_bytes = budget.take(max_bytes)
                    held = max_bytes == 0
                if selector is not None and client_rack and partition.is_leader:
                    preferred = selector.preferred_read_replica(
                        partition, client_rack, request.fetch_offset
                    )
                    if preferred is not None:
                        reads.append(self._redirected(partition, request, preferred))
                        continue
                result = partition.read(
                    request.fetch_offset,
                    max_bytes,
                    from_follower=from_follower,
                    current_leader_epoch=request.current_leader_epoch,
                    min_one_message=first_with_data and not held,
                    leader_only=leader_only,
                    read_committed=read_committed,
                )
            except CorruptRecordError as exc:
                self._on_corrupt_read(self.partitions[request.tp], exc)
                reads.append(PartitionRead(request.tp, None, KafkaStorageError(str(exc))))
                continue
            except OffsetOutOfRangeError as exc:
                p = self.partitions[request.tp]
                reads.append(
                    PartitionRead(request.tp, None, exc, p.high_watermark, p.log_start_offset)
                )
                continue
            except KafkaError as exc:
                reads.append(PartitionRead(request.tp, None, exc))
                continue
            size = len(result.records)
            if size:
                first_with_data = False
                remaining = max(0, remaining - size)
            reads.append(PartitionRead(request.tp, result, None))
            if from_follower:
                self._on_follower_fetch(partition, replica_id, request, result)
        return reads

    @staticmethod
    def _redirected(partition: Partition, request: FetchPartition, preferred: int) -> PartitionRead:
        """The answer pointing a consumer at ``preferred``: no records, the leader's
        offsets (as Kafka: the read is skipped), checked against the leader epoch."""
        partition.check_leader_epoch(request.current_leader_epoch)
        empty = ReadResult(
            b"", partition.high_watermark, partition.log_start_offset, partition.log_end_offset
        )
        return PartitionRead(request.tp, empty, None, preferred_read_replica=preferred)

    def _leader_throttles(self, partition: Partition, replica_id: int) -> bool:
        """Is ``partition``'s copy to follower ``replica_id`` throttled here? (Listed for
        this leader and the follower not in the ISR: in-sync followers never are.)"""
        return is_throttled_copy(
            partition.config.leader_replication_throttled_replicas,
            self.broker_id,
            partition.tp.partition,
            replica_id in partition.isr,
        )

    def _throttle_retry_at(self, replica_id: int) -> float:
        """When a parked follower fetch should read again because the leader quota
        frees up (a throttled copy would otherwise idle until max_wait_ms)."""
        quota = self.replication_quotas.leader
        if replica_id < 0 or not quota.is_exceeded():
            return math.inf
        return trio.current_time() + max(quota.throttle_time_s(), THROTTLE_RETRY_MIN_S)

    def _record_throttled(self, replica_id: int, reads: list[PartitionRead]) -> list[PartitionRead]:
        """Count the bytes a follower's answer carries for partitions throttled on this
        leader (in-sync followers' too, as Kafka), then return ``reads`` unchanged."""
        if replica_id < 0:
            return reads
        for read in reads:
            partition = self.partitions.get(read.tp)
            if not read.size or partition is None:
                continue
            listed = partition.config.leader_replication_throttled_replicas
            if is_listed(listed, self.broker_id, read.tp.partition):
                self.replication_quotas.leader.record(read.size)
        return reads
