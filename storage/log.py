"""The log of one partition: an ordered run of segments in one directory.

How this works. Offsets grow through the segments: each segment's base offset is the
first offset it may hold, and the last segment (the active one) takes every append.
``log_start_offset`` is the first offset a reader may ask for (it can lie inside the
first segment after retention by offset or ``truncate_fully_and_start_at``);
``log_end_offset`` (LEO) is the offset the next record will get.

Append (leader): every batch is validated (header walk + CRC-32C, sizes), its
baseOffset patched in place to the next offsets (and partitionLeaderEpoch when given),
all in ``storage.log_append``; then the whole buffer goes to the active segment in one
write. Records are never decoded. Append as follower: offsets are kept; they must not
go back and must be contiguous within one append; a gap before the first batch starts a
new segment, so offsets inside every segment stay contiguous (which recovery relies on).
A compacted log keeps them contiguous too (storage/cleaner fills what it removes with
empty batches).

Idempotent producers (``storage.producer_state``): batches with a producer id update
the partition's producer state. On the leader each is checked first: a retried batch
already in the log answers its original offsets (``duplicate``) and nothing is written;
a sequence gap or a stale epoch raises. A follower applies them without checks.
Loading and truncation rebuild the state from the newest snapshot at or below the log
end plus the batches after it; a roll and ``close`` write a snapshot.

Roll: a new active segment starts when the append would push the active one past
``segment_bytes``, when ``segment_ms`` passed since its first batch, when one of its
indexes is full, or when the offsets would not fit its 32-bit relative index.

Durability: the recovery point is the offset below which everything is fsynced;
``flush`` moves it. Loading (``storage.log_loader``) revalidates what lies beyond it
after an unclean stop. The leader-epoch cache is kept consistent with the data: epochs
beyond the log end and before the log start are removed on load and on truncation.

Parts. A Log owns named collaborators, each handed only what it works on (as Kafka's
UnifiedLog owns LocalLog, LeaderEpochFileCache, ProducerStateManager):

- ``segment_list`` (``storage.segment_list``): the segments, opened, added, removed;
- ``retention`` (``storage.log_retention``): which oldest segments retention lets go;
- ``truncation`` (``storage.log_truncation``): the cuts of the segments' end, the
  corruption repair, the restart at an offset;
- ``swap`` (``storage.segment_swap``): cleaned segments swapped in for their old ones;
- ``transactions`` (``storage.log_transactions``): the aborted-transaction index and
  the last stable offset;
- ``leader_epoch_cache`` and ``producer_state``.

The Log keeps the offsets (log start, recovery point) and applies what a part's change
means for the others (a cut pulls the offsets down, drops leader epochs, rebuilds the
producer state). This module is loading, append, roll, read, flush, and that.

Concurrency: not thread-safe. The broker calls a Log from one thread at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.errors import OffsetOutOfRangeError, RecordListTooLargeError
from minibroker.protocol.records import Buffer
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.corruption import CorruptionStats, check_batches
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.leader_epoch import LeaderEpochCache
from minibroker.storage.log_append import LogAppendInfo, validate_and_assign
from minibroker.storage.log_config import Clock, LogConfig, system_clock
from minibroker.storage.log_loader import load_segments
from minibroker.storage.log_retention import LogRetention
from minibroker.storage.log_transactions import LogTransactions
from minibroker.storage.log_truncation import LogTruncation
from minibroker.storage.log_validator import LeaderChecks, validate_records
from minibroker.storage.names import parse_partition_dir
from minibroker.storage.producer_entries import CompletedTxn
from minibroker.storage.producer_state import ProducerStateManager
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_files import MAX_RELATIVE_OFFSET
from minibroker.storage.segment_list import SegmentList
from minibroker.storage.segment_swap import SWAP_SUFFIX, SegmentSwap
from minibroker.storage.time_index import NO_TIMESTAMP, TimestampOffset
from minibroker.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
"""ListOffsets' "earliest" sentinel: answers the log start offset."""
LATEST_TIMESTAMP = -1
"""ListOffsets' "latest" sentinel: answers the log end offset."""
MAX_TIMESTAMP = -3
"""ListOffsets' "max timestamp" sentinel (v7+, KIP-734): answers the first record with
the largest timestamp in the log."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets v8+ (KIP-405): the first offset on local disk, here the log start."""
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+ (KIP-1005): the last offset in remote storage; none here (-1)."""


class LogOffsetMetadata(NamedTuple):
    """An offset with where its batch lies (what delayed fetches measure bytes with)."""

    offset: int
    segment_base_offset: int
    position: int


class FetchDataInfo(NamedTuple):
    """The result of a read: whole batches from the one containing the fetch offset,
    and ``next_offset``, the offset after the last batch returned (the fetch offset
    when nothing was returned): where a sequential reader continues."""

    offset_metadata: LogOffsetMetadata
    records: memoryview
    next_offset: int


class FlushStats:
    """How many log flushes did fsync something and how long they took (Kafka's
    LogFlushRateAndTimeMs). One per LogManager; flushes may run in several threads."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        with self._lock:
            self.count += 1
            self.seconds += seconds


class Log:
    """One partition's log in ``directory`` (created if missing; see the module doc).
    ``log_start_offset`` and ``recovery_point`` come from the log dir's checkpoints;
    ``had_clean_shutdown`` skips the recovery of what lies beyond the recovery point."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        clock: Clock = system_clock,
        flush_stats: FlushStats | None = None,
        corruption_stats: CorruptionStats | None = None,
    ) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        parsed = parse_partition_dir(directory.name)
        self.topic_partition: TopicPartition | None = parsed.tp if parsed else None
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            self.new_dir = False
        else:
            self.new_dir = True
            """The partition dir was made here, empty: loading has nothing to scan, check
            or clear in it (a broker creating thousands of partitions skips four
            directory listings and three unlinks per partition)."""
        current_config = self._current_config
        self.segment_list = SegmentList(directory, current_config, clock, new_dir=self.new_dir)
        self.leader_epoch_cache = LeaderEpochCache(directory, lambda: self.log_end_offset)
        self.producer_state = ProducerStateManager(
            directory,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            empty_dir=self.new_dir,
        )
        self.retention = LogRetention(self.segment_list, current_config)
        self.truncation = LogTruncation(self.segment_list, current_config)
        self.swap = SegmentSwap(self.segment_list, current_config)
        self.replace_segments = self.swap.replace_segments
        """The cleaner's swap of a cleaned segment in for its old ones."""
        self.transactions = LogTransactions(self.segment_list, self.producer_state)
        self.flush_stats = flush_stats or FlushStats()
        self.corruption_stats = corruption_stats or CorruptionStats()
        self.recovery_cuts: list[CorruptRecordError] = []
        """What loading had to truncate (storage.log_loader): data this replica lost."""
        self.recovered_segments: list[int] = []
        """Base offsets of the segments loading revalidated (start-up progress)."""
        self._load(had_clean_shutdown)

    def _current_config(self) -> LogConfig:
        """What the parts read the config through: a topic's config changes under a
        live log (``config`` is reassigned)."""
        return self.config

    # --- loading ---------------------------------------------------------------------

    def _load(self, had_clean_shutdown: bool) -> None:
        segment_list = self.segment_list
        segments = [] if self.new_dir else self._load_segments(had_clean_shutdown)
        for segment in segments:
            segment_list.add(segment)
        if not segment_list.segments:
            segment_list.add(segment_list.open(self.log_start_offset, create=True))
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        if self.log_end_offset < self.log_start_offset:
            # Data below the checkpointed log start is deletable anyway.
            self.truncate_fully_and_start_at(self.log_start_offset)
        self.log_start_offset = max(self.log_start_offset, segment_list.segments[0].base_offset)
        # After a clean shutdown all of it is durable; after a crash, what recovery
        # revalidated is not fsynced (storage/log_loader.py): the point stays where the
        # checkpoint had it, as Kafka's LogLoader leaves it, until a flush moves it.
        self.recovery_point = (
            self.log_end_offset
            if had_clean_shutdown
            else min(self.recovery_point, self.log_end_offset)
        )
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._load_producer_state()

    def _load_segments(self, had_clean_shutdown: bool) -> list[LogSegment]:
        """The segments found in the dir, checked or recovered (storage/log_loader.py)."""
        return load_segments(
            self.dir,
            lambda base: self.segment_list.open(base, create=False),
            recovery_point=self.recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            max_index_size=self.config.segment_index_bytes,
            epochs=self.leader_epoch_cache,
            stats=self.corruption_stats,
            cuts=self.recovery_cuts,
            recovered_bases=self.recovered_segments,
            open_swap=lambda base: self.segment_list.open(
                base, create=False, file_suffix=SWAP_SUFFIX
            ),
        )

    def _load_producer_state(self) -> None:
        if self.recovered_segments:
            # Recovered segments may have lost index entries written after the last
            # fsync: replay them, not a snapshot taken past them.
            self.producer_state.snapshots.delete_after(min(self.recovered_segments))
        completed = self.producer_state.load(
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            headers_from=self.segment_list.headers_from,
        )
        self.transactions.ended(completed, replicated=True)

    # --- offsets ---------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segment_list.segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self.segment_list.segments)

    @property
    def log_end_offset(self) -> int:
        return self.segment_list.segments[-1].next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.segment_list.segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    @property
    def truncation_count(self) -> int:
        """How many truncations this log has seen: a copier (the log-dir mover) compares
        it between steps to learn that offsets it already copied may have changed."""
        return self.segment_list.truncations

    @property
    def size(self) -> int:
        return self.segment_list.size

    # --- append ----------------------------------------------------------------------

    def append_as_leader(
        self,
        records: Buffer,
        checks: LeaderChecks,
        *,
        append_time_ms: int,
        leader_epoch: int,
        coordinator: bool = False,
    ) -> LogAppendInfo:
        """A leader's append of produced batches: what is inside them validated
        (``storage/log_validator.py``: record counts, keys, the topic's codec,
        LogAppendTime), then ``append`` with offsets assigned and ``leader_epoch``
        stamped. ``coordinator``: a coordinator of this broker writes them (control
        batches allowed, no sequences)."""
        buf = validate_records(records, checks, append_time_ms)
        return self.append(
            buf, assign_offsets=True, leader_epoch=leader_epoch, coordinator=coordinator
        )

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        coordinator: bool = False,
    ) -> LogAppendInfo:
        """Validate and append whole batches; returns their first and last offsets.

        With ``assign_offsets`` (the leader) each batch's baseOffset is patched in place
        to the next free offsets, and ``leader_epoch`` (when given) is stamped into
        every batch (read-only ``records`` are copied once for that). Raises
        CorruptMessageError for a bad batch or trailing bytes, MessageTooLargeError for
        a batch over ``max_message_bytes``, RecordListTooLargeError for more than a
        segment.
        """
        view = records if type(records) is memoryview else memoryview(records)
        if view.readonly and (assign_offsets or leader_epoch is not None):
            view = memoryview(bytearray(view))  # patching needs writable bytes: one copy
        total = view.nbytes
        segment = self.segment_list.segments[-1]
        found = validate_and_assign(
            view,
            next_offset=segment.next_offset,
            assign_offsets=assign_offsets,
            leader_epoch=leader_epoch,
            latest_epoch=self.leader_epoch_cache.latest_epoch,
            max_message_bytes=self.config.max_message_bytes,
            producer_state=self.producer_state,
            coordinator=coordinator,
        )
        if isinstance(found, LogAppendInfo):
            return found  # a producer's retry: its original offsets, nothing written
        first_offset, next_offset, max_timestamp, offset_of_max, count, epochs, producers = found
        if not count:
            return LogAppendInfo(next_offset, next_offset - 1, NO_TIMESTAMP, -1, 0, 0)
        if total > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{total} bytes of batches exceed segment.bytes {self.config.segment_bytes}"
            )
        if self._should_roll(segment, total, max_timestamp, first_offset, next_offset - 1):
            segment = self.roll(first_offset)
        segment.append(next_offset - 1, max_timestamp, offset_of_max, view)
        for epoch, start in epochs:
            self.leader_epoch_cache.assign(epoch, start)
        if producers is not None:
            completed = producers.commit(next_offset)
            if completed:
                self.transactions.ended(completed, replicated=False)
        # tuple.__new__ skips the generated __new__ (and _make's length check): a
        # Python call per append, measurable at 100k appends/s.
        return tuple.__new__(
            LogAppendInfo,
            (first_offset, next_offset - 1, max_timestamp, offset_of_max, count, total, False),
        )

    def append_as_follower(self, records: bytearray | memoryview | bytes) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs."""
        return self.append(records, assign_offsets=False)

    def _should_roll(
        self,
        segment: LogSegment,
        size: int,
        max_timestamp: int,
        first_offset: int,
        last_offset: int,
    ) -> bool:
        if first_offset != segment.next_offset:
            return True  # a follower gap: offsets inside a segment are contiguous
        segment_size = segment.size
        if segment_size == 0:
            return False
        config = self.config
        if (
            segment_size > config.segment_bytes - size
            or segment.offset_index.entries >= segment.offset_index.max_entries
            or segment.time_index.is_full
            or last_offset - segment.base_offset > MAX_RELATIVE_OFFSET
        ):
            return True
        first_ts = segment.rolling_based_timestamp()
        if first_ts is not None and first_ts >= 0:
            return max_timestamp - first_ts > config.segment_ms
        return self.clock() - segment.created_ms > config.segment_ms

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, LEO) and return it."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        segment_list = self.segment_list
        active = segment_list.segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # Re-based in place: a flush may be reading the list from another thread.
            return segment_list.replace_empty_active(new_base)
        active.on_become_inactive()
        segment = segment_list.open(new_base, create=True)
        segment_list.add(segment)
        # The state as of the new segment's base: recovery then replays from here.
        self.producer_state.take_snapshot(new_base)
        return segment

    # --- read ------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Whole batches starting with the one that contains ``offset``.

        At most ``max_bytes`` (but at least one batch when ``min_one_batch``, however
        large), never a batch holding an offset >= ``max_offset`` (e.g. the high
        watermark), and never across a segment boundary. The bytes are one pread of the
        segment file. Raises OffsetOutOfRangeError outside [log start, log end].

        Every batch read is checked (header, CRC-32C, contiguous offsets) before it is
        returned: the batches before a corrupt one are returned alone, and a read that
        would start with a corrupt batch raises CorruptRecordError (counted, and
        logged by whoever repairs the log).
        """
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {end}]"
            )
        limit_offset = end if max_offset is None else min(max_offset, end)
        index = self.segment_list.index_for(offset)
        if offset >= limit_offset:
            return self._empty_read(offset, index)
        for segment in self.segment_list.segments[index:]:
            if segment.base_offset >= limit_offset:
                break
            found = segment.read(offset, max_bytes, limit_offset, min_one_batch=min_one_batch)
            if found is None:
                continue  # every batch in this segment is below offset: try the next
            metadata = LogOffsetMetadata(offset, segment.base_offset, found.first_batch.position)
            position = found.first_batch.position
            checked = check_batches(found.records, file_position=position)
            if checked.problem is None:
                return FetchDataInfo(metadata, found.records, found.next_offset)
            if checked.valid_bytes:
                good = found.records[: checked.valid_bytes]
                return FetchDataInfo(metadata, good, checked.next_offset)
            self.corruption_stats.record("read", where=(str(segment.log_path), position))
            raise CorruptRecordError(
                f"{segment.log_path}: {checked.problem} (reading offset {offset})",
                path=str(segment.log_path),
                position=position,
                offset=offset,
            )
        return self._empty_read(offset, index)

    def _empty_read(self, offset: int, index: int) -> FetchDataInfo:
        segment = self.segment_list.segments[index]
        found = segment.translate_offset(offset) if offset < segment.next_offset else None
        position = found.position if found is not None else segment.size
        return FetchDataInfo(
            LogOffsetMetadata(offset, segment.base_offset, position), memoryview(b""), offset
        )

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets: the first record with a timestamp >= ``timestamp`` as
        (timestamp, offset); EARLIEST_TIMESTAMP / LATEST_TIMESTAMP answer the log start
        / end with NO_TIMESTAMP; MAX_TIMESTAMP the first record with the largest
        timestamp; None when no record is that recent (or the log is empty)."""
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(NO_TIMESTAMP, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(NO_TIMESTAMP, self.log_end_offset)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for segment in self.segment_list.segments:
            if segment.largest_timestamp < timestamp or segment.size == 0:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def _max_timestamp_offset(self) -> TimestampOffset | None:
        """The first record holding the log's largest timestamp: the first segment with
        the largest ``largest_timestamp``, searched for a record at least that recent."""
        newest: LogSegment | None = None
        for segment in self.segment_list.segments:
            if segment.size and (
                newest is None or segment.largest_timestamp > newest.largest_timestamp
            ):
                newest = segment
        if newest is None:
            return None
        return newest.find_offset_by_timestamp(newest.largest_timestamp, self.log_start_offset)

    # --- what shrinks or changes the segments ---------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention (storage/log_retention.py): whole segments retention.ms,
        retention.bytes and the log start offset no longer keep go, oldest first; the
        log start moves up to the first one left. Expired producers go too. Returns how
        many segments went."""
        now = self.clock() if now_ms is None else now_ms
        deleted = self.retention.delete_old_segments(
            log_start_offset=self.log_start_offset,
            first_unstable_offset=self.producer_state.first_unstable_offset(),
            now_ms=now,
        )
        if deleted:
            first_base = self.segment_list.segments[0].base_offset
            self.log_start_offset = max(self.log_start_offset, first_base)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            self.producer_state.snapshots.delete_before(first_base)
        self.producer_state.remove_expired(now)
        return deleted

    def maybe_increment_log_start_offset(self, new_start: int) -> None:
        """Move the log start forward (DeleteRecords, or a follower following its
        leader); whole segments below it go at the next ``delete_old_segments``."""
        if new_start > self.log_end_offset:
            raise OffsetOutOfRangeError(f"log start {new_start} beyond the log end")
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files whose file.delete.delay.ms has passed."""
        return self.segment_list.delete_expired_files(now_ms)

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch holding an offset >= ``target_offset`` (a batch holding it
        goes whole, so the new LEO can be below the target; storage/log_truncation.py).
        False if nothing to do."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to negative offset {target_offset}")
        if target_offset >= self.log_end_offset:
            return False
        if self.segment_list.segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        self.truncation.truncate_to(target_offset)
        self._pull_back_to_log_end()
        completed = self.producer_state.truncate(  # batches above the new end leave the state
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            headers_from=self.segment_list.headers_from,
        )
        self.transactions.truncated_to(self.log_end_offset)
        self.transactions.ended(completed, replicated=True)
        return True

    def repair_corruption(self, offset: int) -> int:
        """Cut the log at the first bad batch from the segment holding ``offset`` on
        (storage/log_truncation.py); returns the bytes removed (0: every batch checked
        out). The caller re-fetches what was removed from another replica."""
        removed = self.truncation.repair_corruption(offset)
        if removed:
            self._pull_back_to_log_end()
        return removed

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything; the log restarts empty at ``new_offset``."""
        self.truncation.restart_at(new_offset)
        self.log_start_offset = new_offset
        self.recovery_point = new_offset
        self.leader_epoch_cache.clear()
        self.producer_state.snapshots.delete_after(-1)
        self.producer_state.clear(new_offset)
        self.transactions.clear()

    def _pull_back_to_log_end(self) -> None:
        """After a cut: no recovery point, log start or leader epoch beyond the end."""
        end = self.log_end_offset
        self.recovery_point = min(self.recovery_point, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.leader_epoch_cache.truncate_from_end(end)

    # --- transactions ----------------------------------------------------------------

    @property
    def unreplicated_txns(self) -> list[CompletedTxn]:
        """Ended transactions whose marker the high watermark has not passed yet."""
        return self.transactions.unreplicated

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO given the partition's high watermark (storage/log_transactions.py)."""
        return self.transactions.last_stable_offset(high_watermark)

    def forget_replicated(self, high_watermark: int) -> None:
        """The high watermark moved: markers below it count as replicated."""
        self.transactions.forget_replicated(high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound)."""
        return self.transactions.collect_aborted(fetch_offset, upper_bound)

    # --- durability and lifecycle ----------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset``) (default:
        the log end) and move the recovery point up to ``offset``.

        The one method that may run in a worker thread while the event loop appends,
        rolls, deletes or truncates: it fsyncs private duplicates of the descriptors of
        a snapshot of the segments (a segment closed meanwhile is skipped: it is being
        deleted), and it does not move the recovery point if the log was truncated
        while it ran (the flushed bytes may not be the log's any more).
        """
        segment_list = self.segment_list
        # Read before the target: a truncation after this point, even one that lands
        # before the target is read, then keeps the recovery point where it is.
        truncations = segment_list.truncations
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        recovery_point = self.recovery_point
        if target <= recovery_point:
            # Nothing to move: every epoch starting below the recovery point was made
            # durable when it got there (an idle partition's checkpoint needs no fsync;
            # two per partition made stopping thousands of them take seconds). One a
            # new leadership left pending is still written, as Kafka has it.
            self.leader_epoch_cache.write_pending()
            return
        self.leader_epoch_cache.flush()  # epochs below the recovery point must be durable
        segments = list(segment_list.segments)  # one step under the GIL
        fds: list[int] = []
        try:
            for i, segment in enumerate(segments):
                following = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if (following is None or following > recovery_point) and (
                    segment.base_offset < target
                ):
                    with contextlib.suppress(OSError):
                        fds += segment.dup_fds()
            started = time.perf_counter()
            for fd in fds:
                os.fsync(fd)
            if fds:
                self.flush_stats.record(time.perf_counter() - started)
        finally:
            for fd in fds:
                os.close(fd)
        if segment_list.truncations == truncations:
            self.recovery_point = max(self.recovery_point, target)

    def close(self) -> None:
        end = self.log_end_offset
        state = self.producer_state
        # As Kafka: no second snapshot at an offset that has one. Nor one of an empty
        # log without producers: there is nothing for it to spare replaying, and its
        # two fsyncs per partition made a clean stop of thousands of idle partitions
        # take tens of seconds.
        try:
            if end not in state.snapshots.offsets() and (
                state.producers or end > self.log_start_offset
            ):
                state.take_snapshot(end)
        except OSError as exc:  # an offline dir: recovery rebuilds the state from the log
            log.warning("%s: cannot write a producer state snapshot: %r", self.dir.name, exc)
        for segment in self.segment_list.segments:
            segment.close()

    def abandon(self) -> None:
        """Close the files without the final index writes a close makes: what a crash
        leaves on disk (untrimmed indexes), for crash tests."""
        for segment in self.segment_list.segments:
            segment.abandon()

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self.log_start_offset}, end={self.log_end_offset},"
            f" segments={len(self.segment_list.segments)})"
        )
