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

Where the rest is: the state every part shares and the segment list
(``storage.log_state``), retention (``storage.log_retention``), truncation and
corruption repair (``storage.log_truncation``), the swap of cleaned segments
(``storage.segment_swap``). This module is loading, append, roll, read and flush.

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
from minibroker.storage.corruption import CorruptionStats, check_batches
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.log_append import LogAppendInfo, validate_and_assign
from minibroker.storage.log_config import Clock, LogConfig, system_clock
from minibroker.storage.log_loader import load_segments
from minibroker.storage.log_retention import LogRetention
from minibroker.storage.log_state import LogOffsetMetadata
from minibroker.storage.log_transactions import LogTransactions
from minibroker.storage.log_truncation import LogTruncation
from minibroker.storage.log_validator import LeaderChecks, validate_records
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_files import MAX_RELATIVE_OFFSET
from minibroker.storage.segment_swap import SWAP_SUFFIX, SegmentSwap
from minibroker.storage.time_index import NO_TIMESTAMP, TimestampOffset

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


class Log(LogRetention, LogTruncation, SegmentSwap, LogTransactions):
    """One partition's log in ``directory`` (see the module doc). ``log_start_offset``
    and ``recovery_point`` come from the log dir's checkpoints; ``had_clean_shutdown``
    skips the recovery of what lies beyond the recovery point."""

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
        super().__init__(
            directory,
            config,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            clock=clock,
        )
        self.flush_stats = flush_stats or FlushStats()
        self.corruption_stats = corruption_stats or CorruptionStats()
        self.recovery_cuts: list[CorruptRecordError] = []
        """What loading had to truncate (storage.log_loader): data this replica lost."""
        self.recovered_segments: list[int] = []
        """Base offsets of the segments loading revalidated (start-up progress)."""
        self._load(had_clean_shutdown)

    # --- loading ---------------------------------------------------------------------

    def _load(self, had_clean_shutdown: bool) -> None:
        segments = [] if self.new_dir else self._load_segments(had_clean_shutdown)
        for segment in segments:
            self._add_segment(segment)
        if not self._segments:
            self._add_segment(self._new_segment(self.log_start_offset, create=True))
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        if self.log_end_offset < self.log_start_offset:
            # Data below the checkpointed log start is deletable anyway.
            self.truncate_fully_and_start_at(self.log_start_offset)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
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
            lambda base: self._new_segment(base, create=False),
            recovery_point=self.recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            max_index_size=self.config.segment_index_bytes,
            epochs=self.leader_epoch_cache,
            stats=self.corruption_stats,
            cuts=self.recovery_cuts,
            recovered_bases=self.recovered_segments,
            open_swap=lambda base: self._new_segment(base, create=False, file_suffix=SWAP_SUFFIX),
        )

    def _load_producer_state(self) -> None:
        if self.recovered_segments:
            # Recovered segments may have lost index entries written after the last
            # fsync: replay them, not a snapshot taken past them.
            self.producer_state.delete_snapshots_after(min(self.recovered_segments))
        completed = self.producer_state.load(
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            headers_from=self._batch_headers_from,
        )
        self._transactions_ended(completed, replicated=True)

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
        segment = self._segments[-1]
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
                self._transactions_ended(completed, replicated=False)
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
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # Re-base the empty active segment; the list is never empty, even for an
            # instant (a flush may be reading it from another thread).
            segment = self._new_segment(new_base, create=True)
            self._segments[-1], self._bases[-1] = segment, new_base
            active.delete()
            return segment
        active.on_become_inactive()
        segment = self._new_segment(new_base, create=True)
        self._add_segment(segment)
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
        index = self._segment_index_for(offset)
        if offset >= limit_offset:
            return self._empty_read(offset, index)
        for segment in self._segments[index:]:
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
        segment = self._segments[index]
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
        for segment in self._segments:
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
        for segment in self._segments:
            if segment.size and (
                newest is None or segment.largest_timestamp > newest.largest_timestamp
            ):
                newest = segment
        if newest is None:
            return None
        return newest.find_offset_by_timestamp(newest.largest_timestamp, self.log_start_offset)

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
        truncations = self._truncations
        segments = list(self._segments)  # one step under the GIL
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
        if self._truncations == truncations:
            self.recovery_point = max(self.recovery_point, target)

    def close(self) -> None:
        end = self.log_end_offset
        state = self.producer_state
        # As Kafka: no second snapshot at an offset that has one. Nor one of an empty
        # log without producers: there is nothing for it to spare replaying, and its
        # two fsyncs per partition made a clean stop of thousands of idle partitions
        # take tens of seconds.
        try:
            if end not in state.snapshot_offsets() and (
                state.producers or end > self.log_start_offset
            ):
                state.take_snapshot(end)
        except OSError as exc:  # an offline dir: recovery rebuilds the state from the log
            log.warning("%s: cannot write a producer state snapshot: %r", self.dir.name, exc)
        for segment in self._segments:
            segment.close()

    def abandon(self) -> None:
        """Close the files without the final index writes a close makes: what a crash
        leaves on disk (untrimmed indexes), for crash tests."""
        for segment in self._segments:
            segment.abandon()

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self.log_start_offset}, end={self.log_end_offset},"
            f" segments={len(self._segments)})"
        )
