"""Partition: one topic partition as this broker sees it - role, epochs, ISR, HW, log.

State, all changed only on the Trio thread (so no locks):

- ``leader_id`` / ``leader_epoch`` / ``controller_epoch`` / ``zk_version``: the last
  LeaderAndIsr state applied. ``leader_epoch`` only grows: the ReplicaManager refuses
  a state whose epoch is not newer.
- ``assigned_replicas`` (AR) and, on the leader, ``isr``. A follower keeps no ISR: the
  leader owns it (Kafka's makeFollower empties it).
- ``remote_replicas``: the leader's view of each follower (LEO, last caught-up time),
  fed by followers' fetches (broker/replication/isr.py's record_follower_fetch).
- ``high_watermark``: on the leader, min LEO over the ISR (the local replica included),
  moving only forward; consumers read below it. With a single replica it equals the
  LEO after every append. On a follower it is min(leader HW, own LEO).

Appends on the leader go through ``Log.append_as_leader`` with the topic's checks
(storage/log_validator.py: record counts, keys, codec, LogAppendTime), which validates
every batch before writing anything and patches offsets and the leader epoch in place.
Then the HW moves and the ReplicaManager wakes parked fetches and delayed produces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

from minibroker.broker.config.broker_config import TopicConfig
from minibroker.protocol.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from minibroker.protocol.records import Buffer
from minibroker.protocol.records.batch import holds_no_record
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    Log,
)
from minibroker.storage.log_append import LogAppendInfo
from minibroker.storage.log_config import Clock
from minibroker.storage.log_validator import LeaderChecks
from minibroker.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

NO_EPOCH = -1


class LeaderAndIsrPartition(NamedTuple):
    """One partition's entry of a LeaderAndIsr request. A tuple: a LeaderAndIsr of
    10,000 partitions builds 10,000, and a frozen dataclass's field-by-field
    ``__init__`` cost that a second on a busy broker."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass(slots=True)
class RemoteReplica:
    """The leader's record of one follower (Kafka's non-local Replica)."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    log_start_offset: int = -1  # as its last fetch said (DeleteRecords' low watermark)

    def reset(self, leader_log_end_offset: int, now_ms: int, in_sync: bool) -> None:
        """A new leadership starts: forget what the previous leader knew."""
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = now_ms if in_sync else 0


class AppendResult(NamedTuple):
    """What one leader append did. A tuple: built once per produce, where a frozen
    dataclass's field-by-field ``__init__`` costs a small request a microsecond."""

    info: LogAppendInfo
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    high_watermark_moved: bool
    leader_epoch: int = NO_EPOCH  # the epoch stamped into the batches (acks=all checks it)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a fetch of one partition found; ``records`` may be a view of segment data."""

    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    """-1 for a follower's read (it has no use for it)."""
    aborted: list[AbortedTxn] | None = None
    """A read_committed read: the aborted transactions its records overlap."""


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        *,
        local_broker_id: int,
        log: Log,
        config: TopicConfig,
        clock: Clock,
        initial_high_watermark: int = 0,
    ) -> None:
        self.tp = tp
        self.local_broker_id = local_broker_id
        self.log = log
        self.config = config
        # The topic's checks for a leader's append, worked out at the first append and
        # again when the (frozen) config is replaced.
        self._append_checks: tuple[TopicConfig, LeaderChecks] | None = None
        self.clock = clock
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        self.controller_epoch = -1
        self.zk_version = -1
        self.assigned_replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.remote_replicas: dict[int, RemoteReplica] = {}
        self.high_watermark = min(max(initial_high_watermark, 0), log.log_end_offset)
        # Set when this replica's log was found corrupt: it serves nothing until
        # repaired (broker/logdirs/corruption.py).
        self.corruption: CorruptRecordError | None = None
        self.topic_id: bytes | None = None
        """The topic's id (KIP-516) once a LeaderAndIsr named it; its partition.metadata
        is queued for writing then."""

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return f"<Partition {self.tp} {role} epoch={self.leader_epoch} hw={self.high_watermark}>"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # -- role changes (LeaderAndIsr) -----------------------------------------------------

    def _apply_common(self, state: LeaderAndIsrPartition) -> None:
        self.controller_epoch = state.controller_epoch
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.assigned_replicas = state.replicas
        self.remote_replicas = {
            r: self.remote_replicas.get(r) or RemoteReplica(r)
            for r in state.replicas
            if r != self.local_broker_id
        }

    def make_leader(self, state: LeaderAndIsrPartition) -> bool:
        """Become (or stay) leader with ``state``; True if leadership is new here."""
        self._apply_common(state)
        self.isr = frozenset(state.isr)
        is_new_leader = not self.is_leader
        self.leader_id = self.local_broker_id
        # Batches appended from now on carry this epoch; it starts at the current LEO.
        # Memory only: the caller writes the checkpoints of a whole LeaderAndIsr in a
        # worker thread (write_pending); Log.flush writes it first if still pending.
        self.log.leader_epoch_cache.assign(
            state.leader_epoch, self.log.log_end_offset, defer_write=True
        )
        now = self.clock()
        leo = self.log.log_end_offset
        for replica in self.remote_replicas.values():
            if is_new_leader:
                replica.reset(leo, now, replica.broker_id in self.isr)
        self.maybe_increment_high_watermark()
        return is_new_leader

    def make_follower(self, state: LeaderAndIsrPartition) -> bool:
        """Follow ``state.leader``; True if the leader changed (fetching must restart)."""
        self._apply_common(state)
        self.isr = frozenset()
        changed = self.leader_id != state.leader
        self.leader_id = state.leader
        return changed

    # -- high watermark --------------------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR, never moving back; True if it moved.

        The local LEO always counts; a follower counts once it is in the ISR (follower
        fetches feed ``remote_replicas``). A single-replica leader thus has HW = LEO.
        """
        if self.leader_id != self.local_broker_id:  # not self.is_leader (once per produce)
            return False
        candidate = self.log.log_end_offset
        for replica_id in self.isr:
            replica = self.remote_replicas.get(replica_id)
            if replica is not None:
                candidate = min(candidate, replica.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            if self.log.unreplicated_txns:
                self.log.forget_replicated(candidate)
            return True
        return False

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower side: HW = min(leader HW, own LEO)."""
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if self.log.unreplicated_txns:
            self.log.forget_replicated(self.high_watermark)

    # -- data path -------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fence a request that names a leader epoch other than ours (-1: no check)."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: request epoch {current_leader_epoch} < {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.tp}: request epoch {current_leader_epoch} > {self.leader_epoch}"
            )

    def append_records_to_leader(
        self, records: Buffer, required_acks: int, *, coordinator: bool = False
    ) -> AppendResult:
        """Validate, assign offsets and append; raises the KafkaError for the partition.
        ``coordinator``: a coordinator of this broker writes them (transaction markers,
        a transaction's offsets): control batches allowed, no sequences."""
        if self.leader_id != self.local_broker_id:  # not self.is_leader
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        config = self.config
        if required_acks == -1 and len(self.isr) < config.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.tp}: ISR {sorted(self.isr)} is smaller than min.insync.replicas "
                f"{config.min_insync_replicas}"
            )
        checks = self._append_checks
        if checks is None or checks[0] is not config:  # first append, or a new config
            made = LeaderChecks.of(
                config.cleanup_policy, config.compression_type, config.log_append_time
            )
            checks = self._append_checks = (config, made)
        append_time = self.clock() if config.log_append_time else -1
        info = self.log.append_as_leader(
            records,
            checks[1],
            append_time_ms=append_time,
            leader_epoch=self.leader_epoch,
            coordinator=coordinator,
        )
        if info.duplicate:
            # A producer's retry of batches already here: answer where they are; acks=all
            # waits for them under the epoch they were written in.
            epoch = self.epoch_for_offset(info.last_offset)
            return AppendResult(info, -1, self.log.log_start_offset, False, epoch)
        moved = self.maybe_increment_high_watermark()
        # tuple.__new__: no generated __new__ or length check, once per produce.
        return tuple.__new__(
            AppendResult, (info, append_time, self.log.log_start_offset, moved, self.leader_epoch)
        )

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        from_follower: bool,
        current_leader_epoch: int = NO_EPOCH,
        min_one_message: bool = True,
        leader_only: bool = True,
        read_committed: bool = False,
    ) -> ReadResult:
        """Read from ``fetch_offset``: up to the HW for consumers (the last stable
        offset with ``read_committed``, with the aborted transactions the records
        overlap), the LEO for followers. ``leader_only`` False (a consumer's Fetch v11+,
        KIP-392) lets a follower replica serve it too, up to its own high watermark.

        Raises NOT_LEADER_OR_FOLLOWER on a non-leader, FENCED/UNKNOWN_LEADER_EPOCH on an
        epoch mismatch, OFFSET_OUT_OF_RANGE outside [log start, LEO].
        """
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader and (leader_only or self.leader_id < 0):
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        hw = self.high_watermark
        start = self.log.log_start_offset
        leo = self.log.log_end_offset
        if fetch_offset < start or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"{self.tp}: fetch offset {fetch_offset} outside [{start}, {leo}]"
            )
        if from_follower:
            upper = leo
            lso = -1
        else:
            lso = self.log.last_stable_offset(hw)
            upper = lso if read_committed else hw
        if fetch_offset >= upper:
            records: bytes | memoryview = b""
        else:
            data = self.log.read(fetch_offset, max_bytes, upper, min_one_batch=min_one_message)
            records = data.records
            while not from_follower and records and data.next_offset < upper:
                # A cleaned segment whose records all went holds only an empty batch over
                # their offsets. Kafka's read finds no batch there and answers from the
                # next segment, and so does this one for a consumer (librdkafka takes a
                # response of empty batches alone for a message too large to fetch); a
                # follower copies the empty batches like any other.
                if not holds_no_record(records):
                    break
                data = self.log.read(
                    data.next_offset, max_bytes, upper, min_one_batch=min_one_message
                )
                records = data.records
        aborted = None
        if read_committed and records:
            aborted = self.log.collect_aborted(fetch_offset, upper)
        return ReadResult(records, hw, start, leo, lso, aborted)

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset(self.high_watermark)

    def end_offset_for_leader_epoch(
        self, requested_epoch: int, *, current_leader_epoch: int = NO_EPOCH
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= requested, its end)."""
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        return self.log.leader_epoch_cache.end_offset_for(requested_epoch)

    def offset_for_timestamp(
        self,
        timestamp: int,
        *,
        from_replica: bool,
        current_leader_epoch: int = NO_EPOCH,
        read_committed: bool = False,
    ) -> tuple[int, int, int]:
        """ListOffsets: (timestamp, offset, leader epoch) or (-1, -1, -1) if none; a
        read_committed consumer's latest offset is the last stable offset."""
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        if from_replica:
            upper = self.log.log_end_offset
        elif read_committed:
            upper = self.last_stable_offset
        else:
            upper = self.high_watermark
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = self.log.log_start_offset
            return -1, offset, self.epoch_for_offset(offset)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1  # no tiered storage: as Kafka with remote storage off
        if timestamp == LATEST_TIMESTAMP:
            return -1, upper, self.epoch_for_offset(upper)
        found = self.log.offset_for_timestamp(timestamp)
        if found is None or found[1] >= upper:
            return -1, -1, -1
        ts, offset = found
        return ts, offset, self.epoch_for_offset(offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch whose range holds ``offset`` (-1 if the cache has none)."""
        epoch = NO_EPOCH
        for entry in self.log.leader_epoch_cache.entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch
