"""One cleaning of one log: the part that runs in a cleaner worker (a process).

How this works (Kafka's Cleaner.doClean). A ``CleanJob`` names the log's segments
from its start up to the first uncleanable offset (the active segment and anything
younger than ``min.compaction.lag.ms`` never are), by path, and the first dirty offset
(where the last cleaning stopped).

1. Map pass: the batches of the dirty section, from the first dirty offset, go into
   an ``OffsetMap`` (key -> last offset). Control batches and keyless records are not
   mapped. When the map is full, mapping stops after the current batch: the cleaning
   covers up to there (``end_offset``) and the next one continues.
2. Copy pass: every segment below ``end_offset`` is rewritten, a group of consecutive
   segments (at most ``segment.bytes`` together, offsets fitting one index) into one new
   segment named after the group's first base offset, written as ``.cleaned`` files (log
   and both indexes), fsynced. A record is kept when its offset is the latest of its key
   (records past the map's range always are) and it is not a tombstone past the delete
   horizon. A batch whose records all stay is copied as it is; one that loses some is
   rebuilt around the kept records' bytes with its baseOffset, lastOffsetDelta and
   producer fields; one that loses all goes, unless it is the last batch of a producer
   (kept empty, so the producer's sequence and epoch survive, as Kafka does). Control
   batches are kept while tombstones are and then go the same way. Records of aborted
   transactions (``aborted``: from the log's ``.txnindex``) are neither mapped nor kept,
   as Kafka's cleaner does; the cleanable section never reaches past the last stable
   offset. Unlike Kafka, offsets stay contiguous: each run of removed batches becomes
   one empty batch (no records, no producer) over their offsets, so recovery and reads
   keep checking that every batch follows the one before (what catches a corrupt
   baseOffset), and the new segment ends exactly where its old ones did (so a crash
   recovery can tell which old segments a ``.swap`` replaces).
3. Tombstones (and control batches) of a segment are kept while the segment's
   modification time is after the delete horizon: the modification time of the last
   segment of the already-clean section minus ``delete.retention.ms`` (Kafka's rule
   before KIP-534). A cleaned segment keeps the modification time of the last segment
   it replaces. So a tombstone survives at least ``delete.retention.ms`` of log
   activity after it was first cleaned.

The worker never touches the live Log: it reads the old segment files through its own
descriptors (opened by path; a segment deleted before that makes the job fail, and it
is retried) and leaves ``.cleaned`` files; the owner swaps them in
(``storage.segment_swap``). Reads are throttled to ``io_bytes_per_second``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    F_ATTRIBUTES,
    F_BASE,
    F_COUNT,
    F_DELTA,
    F_EPOCH,
    F_MAX_TS,
    F_PID,
    HEADER,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
)
from minibroker.protocol.records.walk import kept_records, map_keys
from minibroker.storage.cleaner.offset_map import OffsetMap
from minibroker.storage.cleaner.records import (
    empty_batch,
    gap_batch,
    rebuild_batch,
    records_section,
)
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_files import MAX_RELATIVE_OFFSET
from minibroker.storage.segment_swap import CLEANED_SUFFIX

READ_CHUNK_BYTES = 4 << 20
"""One pread of a segment being cleaned: large enough that syscalls do not show."""
WRITE_BUFFER_BYTES = 1 << 20
"""Kept batches are written to the new segment in appends of about this size."""


class CleanerAborted(Exception):
    """The job was stopped (its owner went away or asked it to)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    base_offset: int
    path: str
    size: int
    mtime_ms: int


@dataclass(frozen=True, slots=True)
class CleanJob:
    directory: str
    segments: tuple[SegmentFile, ...]
    """From the log start to the last segment below ``first_uncleanable``."""
    first_dirty: int
    first_uncleanable: int
    delete_retention_ms: int
    producer_last_offsets: dict[int, int]
    """Producer id -> last offset of its last batch (kept at least empty)."""
    segment_bytes: int
    index_interval_bytes: int
    max_index_bytes: int
    map_bytes: int
    aborted: tuple[tuple[int, int, int], ...] = ()
    """(producer id, first offset, marker offset) of the aborted transactions with
    records in the cleanable section: their records are removed, never mapped."""
    io_bytes_per_second: float = 0.0
    """0: unthrottled."""
    parent_pid: int = 0
    """A worker process gives up when its parent (the broker) is gone (0: no check)."""


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    old_bases: tuple[int, ...]
    """Base offsets of the segments the new one replaces (the first is its own)."""
    size: int


@dataclass(slots=True)
class CleanResult:
    end_offset: int = 0
    """Offsets below this are clean now: the next first dirty offset."""
    groups: list[CleanedGroup] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    map_keys: int = 0
    map_collisions: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of the worker for this job (what the job costs on an idle core)."""


def exit_with_parent(parent_pid: int, interval_s: float = 1.0) -> None:
    """Runs once in each worker process: exit as soon as the process that started it (the
    broker) is gone, even killed with SIGKILL. An idle worker waits on its task queue,
    whose pipe the worker itself holds open, so it would otherwise wait forever."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class Throttle:
    """Sleeps so that reads average at most ``bytes_per_second`` (0: never)."""

    def __init__(self, bytes_per_second: float, parent_pid: int) -> None:
        self.rate = bytes_per_second
        self.parent_pid = parent_pid
        self.started = time.monotonic()
        self.done = 0

    def account(self, size: int) -> None:
        if self.parent_pid and os.getppid() != self.parent_pid:
            raise CleanerAborted("the broker that started this cleaner is gone")
        self.done += size
        if self.rate > 0:
            ahead = self.done / self.rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


def _batches(
    fd: int, size: int, throttle: Throttle
) -> Iterator[tuple[bytes, int, tuple[int, ...], bool]]:
    """(chunk, position in chunk, header fields, is the file's last batch) of every
    whole batch of the file, read a chunk at a time."""
    unpack = HEADER.unpack_from
    position = 0
    while position < size:
        chunk = os.pread(fd, min(READ_CHUNK_BYTES, size - position), position)
        throttle.account(len(chunk))
        at = 0
        while len(chunk) - at >= BATCH_HEADER_SIZE:
            fields = unpack(chunk, at)
            batch_size = fields[1] + LOG_OVERHEAD
            if at + batch_size > len(chunk):
                if at == 0:  # one batch larger than a chunk: read it whole
                    chunk = os.pread(fd, batch_size, position)
                    throttle.account(len(chunk))
                    continue
                break
            yield chunk, at, fields, position + at + batch_size >= size
            at += batch_size
        if at == 0:
            return  # a torn tail (recovery cuts those): nothing more to read
        position += at


def _open(path: str) -> int:
    return os.open(path, os.O_RDONLY)


def _aborted(job: CleanJob, fields: tuple[int, ...]) -> bool:
    """Is the batch a record batch of an aborted transaction?"""
    if not fields[F_ATTRIBUTES] & TRANSACTIONAL_BIT or fields[F_ATTRIBUTES] & CONTROL_BIT:
        return False
    pid, base = fields[F_PID], fields[F_BASE]
    return any(p == pid and first <= base <= last for p, first, last in job.aborted)


def build_offset_map(job: CleanJob, offset_map: OffsetMap, throttle: Throttle) -> int:
    """Map the dirty section; returns the end offset the map covers."""
    end_offset = job.first_dirty
    for seg in job.segments:
        if seg.base_offset >= job.first_uncleanable:
            break
        following = _next_base(job, seg)
        if following is not None and following <= job.first_dirty:
            continue  # wholly clean
        fd = _open(seg.path)
        try:
            for chunk, at, fields, _ in _batches(fd, seg.size, throttle):
                base, last = fields[F_BASE], fields[F_BASE] + fields[F_DELTA]
                if last < job.first_dirty:
                    continue
                if base >= job.first_uncleanable:
                    return end_offset
                if (
                    not fields[F_ATTRIBUTES] & CONTROL_BIT
                    and fields[F_COUNT]
                    and not (job.aborted and _aborted(job, fields))
                ):
                    section, start, end = records_section(chunk, at, fields)
                    keys: list[bytes] = []
                    offsets: list[int] = []
                    map_keys(section, start, end, base, keys, offsets)
                    offset_map.put_all(keys, offsets)
                end_offset = last + 1
                if offset_map.is_full:
                    return end_offset
        finally:
            os.close(fd)
    return max(end_offset, job.first_uncleanable)


def _next_base(job: CleanJob, seg: SegmentFile) -> int | None:
    index = job.segments.index(seg)
    return job.segments[index + 1].base_offset if index + 1 < len(job.segments) else None


def group_segments(job: CleanJob, end_offset: int) -> list[list[SegmentFile]]:
    """The segments below ``end_offset`` in groups that each become one segment."""
    groups: list[list[SegmentFile]] = []
    todo = [s for s in job.segments if s.base_offset < end_offset]
    for i, seg in enumerate(todo):
        group = groups[-1] if groups else None
        following = todo[i + 1].base_offset if i + 1 < len(todo) else end_offset
        if (
            group is not None
            and sum(s.size for s in group) + seg.size <= job.segment_bytes
            and following - 1 - group[0].base_offset <= MAX_RELATIVE_OFFSET
        ):
            group.append(seg)
        else:
            groups.append([seg])
    return groups


def clean_log(job: CleanJob, offset_map: OffsetMap | None = None) -> CleanResult:
    """Run one cleaning (see the module doc): ``.cleaned`` files are left for the swap."""
    started, cpu_started = time.monotonic(), time.process_time()
    result = CleanResult()
    throttle = Throttle(job.io_bytes_per_second, job.parent_pid)
    omap = offset_map if offset_map is not None else OffsetMap(job.map_bytes)
    result.end_offset = build_offset_map(job, omap, throttle)
    result.map_keys, result.map_collisions = len(omap), omap.collisions
    clean = [s for s in job.segments if s.base_offset < job.first_dirty]
    horizon = clean[-1].mtime_ms - job.delete_retention_ms if clean else -(2**62)
    for group in group_segments(job, result.end_offset):
        cleaned = _clean_group(job, group, omap, horizon, throttle, result)
        if cleaned is not None:
            result.groups.append(cleaned)
    result.seconds = time.monotonic() - started
    result.cpu_seconds = time.process_time() - cpu_started
    return result


def _clean_group(
    job: CleanJob,
    group: list[SegmentFile],
    omap: OffsetMap,
    horizon: int,
    throttle: Throttle,
    result: CleanResult,
) -> CleanedGroup | None:
    directory = Path(job.directory)
    base = group[0].base_offset
    segment = LogSegment(
        directory,
        base,
        index_interval_bytes=job.index_interval_bytes,
        max_index_size=job.max_index_bytes,
        created_ms=group[-1].mtime_ms,
        create=True,
        file_suffix=CLEANED_SUFFIX,
    )
    try:
        writer = _Writer(segment, base)
        fds = [_open(seg.path) for seg in group]
        try:
            for seg, fd in zip(group, fds, strict=True):
                result.bytes_read += seg.size
                keep_deletes = seg.mtime_ms > horizon
                for chunk, at, fields, _ in _batches(fd, seg.size, throttle):
                    out = _filter_batch(job, chunk, at, fields, omap, keep_deletes)
                    result.records_read += fields[F_COUNT]
                    result.records_removed += fields[F_COUNT] - _count(out)
                    if out:
                        writer.add(out, fields)
                    else:
                        writer.skip(fields)
        finally:
            for fd in fds:
                os.close(fd)
        writer.finish()
        if segment.size == 0:
            segment.delete()
            return None
        segment.on_become_inactive()
        segment.flush()
        size = segment.size
        segment.close()
        mtime = group[-1].mtime_ms / 1000
        os.utime(segment.log_path, (mtime, mtime))
        result.bytes_written += size
        return CleanedGroup(tuple(s.base_offset for s in group), size)
    except BaseException:
        segment.delete()
        raise


def _count(out: bytes | memoryview | None) -> int:
    if not out:
        return 0
    count: int = HEADER.unpack_from(out, 0)[F_COUNT]
    return count


def _filter_batch(
    job: CleanJob,
    chunk: bytes,
    at: int,
    fields: tuple[int, ...],
    omap: OffsetMap,
    keep_deletes: bool,
) -> bytes | memoryview | None:
    """What of the batch at ``at`` stays (None: nothing, the batch goes)."""
    size = fields[1] + LOG_OVERHEAD
    base = fields[F_BASE]
    count = fields[F_COUNT]
    if fields[F_ATTRIBUTES] & CONTROL_BIT:
        if keep_deletes:
            return memoryview(chunk)[at : at + size]
    elif job.aborted and _aborted(job, fields):
        pass  # an aborted transaction's records: removed whatever their keys
    elif count:
        section, start, end = records_section(chunk, at, fields)
        kept, found = kept_records(section, start, end, base, omap.lookup, keep_deletes)
        if len(kept) == found:
            return memoryview(chunk)[at : at + size]
        if kept:
            return rebuild_batch(fields, section, kept)
    last = base + fields[F_DELTA]
    if fields[F_PID] >= 0 and job.producer_last_offsets.get(fields[F_PID]) == last:
        return (
            empty_batch(fields)
            if count or fields[F_ATTRIBUTES] & CONTROL_BIT
            else memoryview(chunk)[at : at + size]
        )
    return None


class _Writer:
    """Buffers kept batches and appends them to the new segment in large writes,
    filling every gap in offsets (removed batches) with one empty batch."""

    def __init__(self, segment: LogSegment, base_offset: int) -> None:
        self.segment = segment
        self.parts: list[bytes | memoryview] = []
        self.size = 0
        self.next_offset = base_offset
        """The offset the next batch written must start at."""
        self.end_offset = base_offset
        """One past the last offset read (kept or removed)."""
        self.max_timestamp = -1
        self.offset_of_max = -1
        self.gap_epoch: int | None = None
        self.gap_timestamp = -1

    def skip(self, fields: tuple[int, ...]) -> None:
        """A removed batch: its offsets go into the next gap batch."""
        if self.gap_epoch is None:
            self.gap_epoch = fields[F_EPOCH]
        self.gap_timestamp = max(self.gap_timestamp, fields[F_MAX_TS])
        self.end_offset = fields[F_BASE] + fields[F_DELTA] + 1

    def _fill(self, up_to: int) -> None:
        if up_to > self.next_offset:
            epoch = -1 if self.gap_epoch is None else self.gap_epoch
            gap = gap_batch(self.next_offset, up_to - 1, epoch, self.gap_timestamp)
            self._put(gap, up_to - 1, self.gap_timestamp)
        self.gap_epoch, self.gap_timestamp = None, -1

    def add(self, batch: bytes | memoryview, fields: tuple[int, ...]) -> None:
        self._fill(fields[F_BASE])
        last = fields[F_BASE] + fields[F_DELTA]
        self._put(batch, last, HEADER.unpack_from(batch, 0)[F_MAX_TS])
        self.end_offset = last + 1

    def _put(self, batch: bytes | memoryview, last: int, max_ts: int) -> None:
        self.parts.append(batch)
        self.size += len(batch)
        self.next_offset = last + 1
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_ts, last
        if self.size >= WRITE_BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.segment.append(
                self.next_offset - 1, self.max_timestamp, self.offset_of_max, b"".join(self.parts)
            )
            self.parts, self.size = [], 0

    def finish(self) -> None:
        self._fill(self.end_offset)
        self.flush()
