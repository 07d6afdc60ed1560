"""One log segment: ``<base>.log`` with its ``<base>.index`` and ``<base>.timeindex``.

The ``.log`` file is a plain concatenation of RecordBatch v2 batches (see
``protocol.records`` for the bytes), every offset in it >= the segment's base offset and
< base + 2**31 (index entries store offsets relative to the base as int32).

Writes are one ``os.write`` per append on an O_APPEND descriptor, however many batches
the append carries. Reads use ``os.pread``, the one copy of segment data a read makes:
the bytes it returns stay valid whatever later happens to the file (truncation,
deletion), which an mmap view of the log would not guarantee (SIGBUS).

Sparse indexing (Kafka's rule): while appending, before each batch, if MORE than
``index_interval_bytes`` were appended since the last index entry, the batch gets an
offset-index entry (its LAST offset -> its START position) and the time index gets
(max timestamp so far, offset of that max) if the max grew. The first batch of a
segment therefore never has an entry.

Offsets inside a segment are contiguous: its first batch starts at the base offset and
each batch starts right after the previous one (the Log starts a new segment at any gap
a follower copies). baseOffset lies outside the CRC, so this is what catches a corrupt
one. The log cleaner keeps that: a batch that loses records keeps its offset range,
and a run of removed batches becomes one empty batch (no records) over their offsets.

After a crash: ``recover()`` re-reads the log from position 0, validating every batch
(header, length, CRC-32C, contiguous offsets in range), truncates the file at the
first batch that fails (a torn write, flipped bits, zeros from a preallocated tail) and
rebuilds both indexes from what remains. ``sanity_check()`` is the cheaper test for a
segment written before the recovery point or after a clean shutdown; when it fails the
caller runs ``recover()``.

Concurrency: a segment is used by one thread at a time; the owning Log serialises.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    decode_batch,
    validate_batch,
)
from minibroker.storage.corruption import last_offset_claimed
from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    segment_path,
)
from minibroker.storage.offset_index import OffsetIndex
from minibroker.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

# baseOffset, batchLength, lastOffsetDelta, maxTimestamp: all a segment needs of a header.
_SCAN = struct.Struct(">qi11xi8xq")
_LENGTH = struct.Struct(">i")  # batchLength, at byte 8
_BASE_OFFSET = struct.Struct(">q")
SCAN_CHUNK_BYTES = 16 * 1024
"""Header scans read this much per pread: one syscall covers a whole index interval of
small batches."""
MAX_RELATIVE_OFFSET = 2**31 - 1


class BatchPosition(NamedTuple):
    """Where one batch lies in a segment file."""

    base_offset: int
    last_offset: int
    position: int
    size: int


class SegmentRead(NamedTuple):
    """What a segment read found: the batch holding the fetch offset, the bytes of the
    whole batches served from it, and the offset after the last one served."""

    first_batch: BatchPosition
    records: memoryview
    next_offset: int


_EMPTY = memoryview(b"")


class EpochSink(Protocol):
    """What recovery reports leader epochs to (the LeaderEpochCache)."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int) -> None: ...


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        create: bool,
        writable: bool = True,
        file_suffix: str = "",
    ) -> None:
        """``file_suffix`` follows each file name (the cleaner writes a segment as
        ``.cleaned`` files, see ``change_file_suffixes``)."""
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        if create:
            # A file left by a crash in the middle of an earlier roll is stale.
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                segment_path(directory, base_offset, suffix + file_suffix).unlink(missing_ok=True)
        # O_APPEND: every write lands at the end, also right after a truncation, and
        # os.write is cheaper than pwrite for the small appends that dominate.
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND if writable else os.O_RDONLY
        self._fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size
        index_path = segment_path(directory, base_offset, INDEX_SUFFIX + file_suffix)
        time_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix)
        # A missing index is created empty and must be rebuilt (sanity_check says so).
        self.index_missing = not create and not (index_path.exists() and time_path.exists())
        self.offset_index = OffsetIndex(index_path, base_offset, max_index_size, writable=writable)
        self.time_index = TimeIndex(time_path, base_offset, max_index_size, writable=writable)
        self._bytes_since_last_index_entry = 0
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._next_offset = base_offset
        self._first_batch_timestamp: int | None = None
        self.recovery_problem: str | None = None
        """Why the last ``recover()`` truncated (None: it did not)."""
        self.recovery_lost_until = -1
        """The last offset the headers cut by the last ``recover()`` claimed (-1: none)."""
        # An existing segment is not usable until sanity_check() or recover() has run:
        # both derive the state above, and neither trusts the other's inputs.

    # --- state derived from the file -------------------------------------------------

    def _load_tail_state(self) -> int:
        """Derive next offset, max timestamp and bytes since the last index entry by
        scanning from the last offset-index entry to the end of the file. Returns
        where the last whole batch ends (the file size unless the tail is torn)."""
        last = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        start = 0
        if self.offset_index.entries:
            start = self.offset_index.entry(self.offset_index.entries - 1).position
        self._next_offset = self.base_offset
        end = start
        for batch, max_timestamp in self._scan(start, self.size):
            self._next_offset = batch.last_offset + 1
            end = batch.position + batch.size
            if max_timestamp > self._max_timestamp:
                self._max_timestamp = max_timestamp
                self._offset_of_max_timestamp = batch.last_offset
        self._bytes_since_last_index_entry = self.size - start
        self._first_batch_timestamp = None
        return end

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (the base offset when empty)."""
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        """Largest batch max timestamp; NO_TIMESTAMP (-1) when none is known."""
        return max(self._max_timestamp, self.time_index.last_entry.timestamp)

    @property
    def max_timestamp_and_offset(self) -> TimestampOffset:
        return TimestampOffset(self._max_timestamp, self._offset_of_max_timestamp)

    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch (what segment.ms counts from), None if empty."""
        if self._first_batch_timestamp is not None:
            return self._first_batch_timestamp
        if self.size >= BATCH_HEADER_SIZE:
            header = os.pread(self._fd, _SCAN.size, 0)
            if len(header) == _SCAN.size:
                self._first_batch_timestamp = _SCAN.unpack(header)[3]
        return self._first_batch_timestamp

    # --- scanning --------------------------------------------------------------------

    def _scan(self, start: int, end: int) -> Iterator[tuple[BatchPosition, int]]:
        """(BatchPosition, max timestamp) of each whole batch in [start, end); trusts
        the bytes (they were validated on append or by recovery)."""
        unpack = _SCAN.unpack_from
        header_size = _SCAN.size
        position = start
        while position + LOG_OVERHEAD <= end:
            chunk = os.pread(self._fd, min(SCAN_CHUNK_BYTES, end - position), position)
            at = 0
            limit = len(chunk) - header_size
            if limit < 0:
                return
            while at <= limit:
                base, length, last_delta, max_ts = unpack(chunk, at)
                size = length + LOG_OVERHEAD
                if size < BATCH_HEADER_SIZE or position + at + size > end:
                    return
                yield BatchPosition(base, base + last_delta, position + at, size), max_ts
                at += size
            position += at

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset`` (so the batch containing
        it, when it exists), searching from the index; None if there is none."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        for batch, _ in self._scan(position, self.size):
            if batch.last_offset >= offset:
                return batch
        return None

    def _whole_batch_end(self, start: int, want_end: int) -> tuple[int, int]:
        """(position, offset) of the last batch boundary in [start, want_end]: where
        the last whole batch ends, and the offset the next batch starts with."""
        position = max(start, self.offset_index.lookup_by_position(want_end).position)
        end, next_offset = position, -1
        for batch, _ in self._scan(position, want_end):
            end, next_offset = batch.position + batch.size, batch.last_offset + 1
        if next_offset < 0:  # no whole batch after the index entry: name the one there
            next_offset = _BASE_OFFSET.unpack(self.read_at(position, 8))[0]
        return end, next_offset

    # --- append and read -------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Write validated batches (offsets already assigned) at the end of the segment
        and add the index entries Kafka's rule calls for (see the module doc)."""
        if largest_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(
                f"offset {largest_offset} does not fit segment {self.base_offset}'s index"
            )
        view = records if type(records) is memoryview else memoryview(records)
        total = view.nbytes
        if not total:
            return
        start = self.size
        try:
            written = os.write(self._fd, view)
            while written < total:  # regular files write short only when nearly full
                written += os.write(self._fd, view[written:])
        except OSError:
            # O_APPEND would put the next batch after these partial bytes: cut them.
            os.ftruncate(self._fd, start)
            raise
        if start == 0:
            self._first_batch_timestamp = _SCAN.unpack_from(view, 0)[3]
        since = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        if _LENGTH.unpack_from(view, 8)[0] + LOG_OVERHEAD == total:
            # One batch (the common case): the caller's figures are that batch's.
            if largest_timestamp > self._max_timestamp:
                self._max_timestamp = largest_timestamp
                self._offset_of_max_timestamp = offset_of_max_timestamp
            if since > interval:
                self.offset_index.append(largest_offset, start)
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                since = 0
            self._bytes_since_last_index_entry = since + total
        else:
            self._index_batches(view, start)
        self.size = start + total
        self._next_offset = largest_offset + 1

    def _index_batches(self, view: memoryview, start: int) -> None:
        unpack = _SCAN.unpack_from
        interval = self.index_interval_bytes
        total = view.nbytes
        at = 0
        while at < total:
            base, length, last_delta, max_ts = unpack(view, at)
            last = base + last_delta
            if max_ts > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = max_ts, last
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(last, start + at)
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            size = length + LOG_OVERHEAD
            self._bytes_since_last_index_entry += size
            at += size

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> SegmentRead | None:
        """Whole batches from the one containing ``start_offset``: at most ``max_bytes``
        (but at least that first batch when ``min_one_batch``), and none holding an
        offset >= ``max_offset`` (e.g. the high watermark). None when no batch in this
        segment holds an offset >= start_offset."""
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        empty = SegmentRead(first, _EMPTY, start_offset)
        limit, limit_offset = self.size, self._next_offset
        if max_offset is not None and max_offset < limit_offset:
            boundary = self.translate_offset(max_offset, first.position)
            if boundary is not None:
                limit, limit_offset = boundary.position, boundary.base_offset
        if first.position >= limit:
            return empty
        want = first.position + (max(max_bytes, first.size) if min_one_batch else max_bytes)
        if want >= limit:
            end, next_offset = limit, limit_offset
        elif want == first.position + first.size:
            end, next_offset = want, first.last_offset + 1
        else:
            end, next_offset = self._whole_batch_end(first.position, want)
        if end <= first.position:
            return empty
        data = memoryview(os.pread(self._fd, end - first.position, first.position))
        return SegmentRead(first, data, next_offset)

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampOffset | None:
        """(timestamp, offset) of the first record at or after ``starting_offset`` whose
        timestamp is >= ``timestamp``; None if this segment has none. Decodes the one
        batch that holds it (ListOffsets is not a hot path)."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for batch, max_ts in self._scan(position, self.size):
            if max_ts < timestamp or batch.last_offset < starting_offset:
                continue
            _, records = decode_batch(self.read_at(batch.position, batch.size), verify_crc=False)
            for record in records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampOffset(record.timestamp, record.offset)
        return None

    # --- recovery and truncation -----------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when an index is missing or fails its checks, or its
        last offset entry does not point at a batch holding that offset."""
        if self.index_missing:
            raise CorruptIndexError(f"{self.log_path}: index files missing")
        self.offset_index.sanity_check(self.size)
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            raw = self.read_at(last.position, _SCAN.size)
            if len(raw) < _SCAN.size:
                raise CorruptIndexError(f"{self.log_path}: index points past the log")
            base, _, last_delta, _ = _SCAN.unpack(raw)
            if not base <= last.offset <= base + last_delta:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry {last} is wrong")
        # Scans from the last entry, now known to be a batch start. Bytes after the last
        # whole batch would sit between old and new batches once appends resume.
        if self._load_tail_state() != self.size:
            raise CorruptIndexError(f"{self.log_path}: the log ends inside a batch")
        self.time_index.sanity_check(max(self._next_offset - 1, self.base_offset))

    def recover(self, max_index_size: int, epochs: EpochSink | None = None) -> int:
        """Validate every batch, truncate at the first bad one, rebuild the indexes.
        Reports each batch's leader epoch that is newer than ``epochs`` knows. Returns
        the number of bytes truncated."""
        self.offset_index.reset(max_index_size)
        self.time_index.reset(max_index_size)
        self.index_missing = False
        self._bytes_since_last_index_entry = 0
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._first_batch_timestamp = None
        valid = 0
        next_offset = self.base_offset
        self.recovery_problem, self.recovery_lost_until = None, -1
        if self.size:
            with (
                mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) as mm,
                memoryview(mm) as view,
            ):
                with contextlib.suppress(OSError, AttributeError):
                    mm.madvise(mmap.MADV_SEQUENTIAL)
                valid, next_offset = self._revalidate(view, epochs)
                with view[valid:] as cut:
                    self.recovery_lost_until = last_offset_claimed(cut)
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
        self._next_offset = next_offset
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        return truncated

    def _revalidate(self, view: memoryview, epochs: EpochSink | None) -> tuple[int, int]:
        """Walk ``view`` validating batches and indexing them; (valid bytes, next offset)."""
        position = 0
        total = view.nbytes
        next_offset = self.base_offset
        interval = self.index_interval_bytes
        latest_epoch = epochs.latest_epoch if epochs is not None else 0
        while position < total:
            try:
                header = validate_batch(view, position)
            except CorruptMessageError as exc:
                self.recovery_problem = str(exc)  # names the batch by its file position
                break
            last = header.base_offset + header.last_offset_delta
            if header.base_offset != next_offset or last - self.base_offset > MAX_RELATIVE_OFFSET:
                # baseOffset is outside the CRC: contiguity is its only check
                self.recovery_problem = (
                    f"batch at {position} has offsets {header.base_offset}..{last}, "
                    f"expected to start at {next_offset}"
                )
                break
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, last
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(last, position)
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
            if epochs is not None and header.partition_leader_epoch > latest_epoch:
                latest_epoch = header.partition_leader_epoch
                epochs.assign(latest_epoch, header.base_offset)
            next_offset = last + 1
            position += header.size
        return position, next_offset

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch holding
        ``offset`` goes whole); returns the bytes removed."""
        first_removed = self.translate_offset(offset)
        if first_removed is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        truncated = self.size - first_removed.position
        os.ftruncate(self._fd, first_removed.position)
        self.size = first_removed.position
        self._load_tail_state()
        return truncated

    # --- lifecycle -------------------------------------------------------------------

    def resize_indexes(self, max_index_size: int) -> None:
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)

    def on_become_inactive(self) -> None:
        """The segment was rolled: record its final max timestamp, trim the indexes."""
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def dup_fds(self) -> list[int]:
        """Private descriptors of the three files (see Log.flush); raises OSError when
        the segment was closed meanwhile."""
        fds: list[int] = []
        try:
            for fd_owner in (self, self.offset_index, self.time_index):
                fds.append(os.dup(fd_owner._fd))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def close(self) -> None:
        if self._fd >= 0 and self.time_index.writable:
            self.on_become_inactive()
        self._close_files()

    def abandon(self) -> None:
        """Close the descriptors as a crash would: no final entry, no trimming."""
        if self._fd >= 0:
            self.offset_index.abandon()
            self.time_index.abandon()
            os.close(self._fd)
            self._fd = -1

    def _close_files(self) -> None:
        if self._fd < 0:
            return
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = -1

    def files(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path]

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the three files from ``<name><old>`` to ``<name><new>``, indexes
        first and the ``.log`` last (crash recovery keys on the ``.log`` name). Open
        descriptors and mmaps follow the files."""
        for index in (self.offset_index, self.time_index):
            name = index.path.name.removesuffix(old) if old else index.path.name
            index.rename(index.path.with_name(name + new))
        name = self.log_path.name.removesuffix(old) if old else self.log_path.name
        target = self.log_path.with_name(name + new)
        os.rename(self.log_path, target)
        self.log_path = target

    def rename_to_deleted(self) -> list[Path]:
        """Close and rename the files with ``.deleted`` (removed later); new paths."""
        self.close()
        renamed = []
        for path in self.files():
            target = path.with_name(path.name + DELETED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, target)
                renamed.append(target)
        return renamed

    def delete(self) -> None:
        self._close_files()
        for path in self.files():
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self._next_offset})"
