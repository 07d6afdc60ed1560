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

After a crash, ``recover()`` rebuilds a segment from its ``.log`` alone (the walk that
revalidates the bytes and rebuilds the indexes is storage/segment_recovery.py); before
that ``sanity_check()`` decides whether it must. ``truncate_to()`` removes whole
batches from an offset on (a follower's truncation).

Files and derived state. A segment opens its ``.log`` and the indexes
(``storage.offset_index``, ``storage.time_index``; a ``<base>.txnindex`` once a
transaction is aborted in it, ``storage.txn_index``), keeps what is derived from them
(size, next offset, max timestamp, bytes since the last index entry), scans batch
headers, and owns the files' life: flush, close, rename, delete. The derived state of an
existing segment is not valid until ``sanity_check`` or ``recover`` has run; a new
segment (``create``) starts valid and empty. What a scan reads of a header and the
largest relative offset are storage/segment_files.py.

Concurrency: a segment is used by one thread at a time; the owning Log serialises.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.records import decode_batch
from minibroker.protocol.records.layout import BATCH_HEADER_SIZE, LOG_OVERHEAD, header_struct
from minibroker.storage.corruption import last_offset_claimed
from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_path,
)
from minibroker.storage.offset_index import OffsetIndex
from minibroker.storage.segment_files import (
    HEADER_SCAN,
    MAX_RELATIVE_OFFSET,
    SCAN_CHUNK_BYTES,
    BatchPosition,
)
from minibroker.storage.segment_recovery import EpochSink, Revalidated, revalidate
from minibroker.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from minibroker.storage.txn_index import TransactionIndex

_BASE_OFFSET = header_struct("base_offset")
_BATCH_LENGTH = header_struct("batch_length")


class SegmentRead(NamedTuple):
    """What a segment read found: the batch holding the fetch offset, the bytes of the
    whole batches served from it, and the offset after the last one served."""

    first_batch: BatchPosition
    records: memoryview
    next_offset: int


_EMPTY = memoryview(b"")


class LogSegment:
    """One segment of a partition's log (see the module doc): the segment at
    ``base_offset`` in ``directory``, created empty with ``create``, else opened as its
    files are; read-only unless ``writable``. The Log appends to its active segment and
    reads from any."""

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
        clear_stale: bool = True,
    ) -> None:
        """``file_suffix`` follows each file name (the cleaner writes a segment as
        ``.cleaned`` files, see ``change_file_suffixes``). ``clear_stale=False``: the
        caller knows no file of this segment exists (a dir it just made)."""
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX + file_suffix)
        if create and clear_stale:
            # A file left by a crash in the middle of an earlier roll is stale.
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                segment_path(directory, base_offset, suffix + file_suffix).unlink(missing_ok=True)
        # O_APPEND: every write lands at the end, also right after a truncation, and
        # os.write is cheaper than pwrite for the small appends that dominate.
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND if writable else os.O_RDONLY
        self._fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size
        index_path = segment_path(directory, base_offset, INDEX_SUFFIX + file_suffix)
        time_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix)
        # A missing index is created empty and must be rebuilt (sanity_check says so),
        # unless the segment is empty and has none: an empty segment's indexes are
        # only made when needed (storage/index_file.py, "Creation").
        lazy, self.index_missing = create, False
        if not create:
            has_index, has_time = index_path.exists(), time_path.exists()
            if not (has_index and has_time):
                lazy = writable and self.size == 0 and not has_index and not has_time
                self.index_missing = not lazy
        self.offset_index = OffsetIndex(
            index_path, base_offset, max_index_size, writable=writable, create=lazy
        )
        self.time_index = TimeIndex(
            time_path, base_offset, max_index_size, writable=writable, create=lazy
        )
        self._bytes_since_last_index_entry = 0
        self.txn_index = TransactionIndex(
            segment_path(directory, base_offset, TXN_INDEX_SUFFIX + file_suffix)
        )
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
            header = os.pread(self._fd, HEADER_SCAN.size, 0)
            if len(header) == HEADER_SCAN.size:
                self._first_batch_timestamp = HEADER_SCAN.unpack(header)[3]
        return self._first_batch_timestamp

    # --- scanning --------------------------------------------------------------------

    def _scan(self, start: int, end: int) -> Iterator[tuple[BatchPosition, int]]:
        """(BatchPosition, max timestamp) of each whole batch in [start, end); trusts
        the bytes (they were validated on append or by recovery)."""
        unpack = HEADER_SCAN.unpack_from
        header_size = HEADER_SCAN.size
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

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

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
            self._first_batch_timestamp = HEADER_SCAN.unpack_from(view, 0)[3]
        since = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        if _BATCH_LENGTH.unpack_from(view, 0)[0] + LOG_OVERHEAD == total:
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
        unpack = HEADER_SCAN.unpack_from
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

    def _whole_batch_end(self, start: int, want_end: int) -> tuple[int, int]:
        """(position, offset) of the last batch boundary in [start, want_end]: where
        the last whole batch ends, and the offset the next batch starts with."""
        position = max(start, self.offset_index.lookup_by_position(want_end).position)
        end, next_offset = position, -1
        for batch, _ in self._scan(position, want_end):
            end, next_offset = batch.position + batch.size, batch.last_offset + 1
        if next_offset < 0:  # no whole batch after the index entry: name the one there
            next_offset = _BASE_OFFSET.unpack(self.read_at(position, _BASE_OFFSET.size))[0]
        return end, next_offset

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

    # --- checks, recovery and truncation ---------------------------------------------

    def sanity_check(self) -> None:
        """The cheap test for a segment written before the recovery point or after a
        clean shutdown, deriving the segment's state on the way: raise
        CorruptIndexError (the caller then runs ``recover()``) when an index is missing
        or fails its checks, its last offset entry does not point at a batch holding
        that offset, or the headers from there on do not end exactly at the file's end."""
        if self.index_missing:
            raise CorruptIndexError(f"{self.log_path}: index files missing")
        self.offset_index.sanity_check(self.size)
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            raw = self.read_at(last.position, HEADER_SCAN.size)
            if len(raw) < HEADER_SCAN.size:
                raise CorruptIndexError(f"{self.log_path}: index points past the log")
            base, _, last_delta, _ = HEADER_SCAN.unpack(raw)
            if not base <= last.offset <= base + last_delta:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry {last} is wrong")
        # Scans from the last entry, now known to be a batch start. Bytes after the last
        # whole batch would sit between old and new batches once appends resume.
        if self._load_tail_state() != self.size:
            raise CorruptIndexError(f"{self.log_path}: the log ends inside a batch")
        self.time_index.sanity_check(max(self._next_offset - 1, self.base_offset))

    def recover(self, max_index_size: int, epochs: EpochSink | None = None) -> int:
        """Rebuild the segment from its ``.log`` alone (storage/segment_recovery.py):
        validate every batch, truncate at the first bad one, rebuild the indexes. Says
        why it cut (``recovery_problem``) and how far the cut headers claimed to reach
        (``recovery_lost_until``). Reports each batch's leader epoch that is newer than
        ``epochs`` knows. Returns the number of bytes truncated."""
        self.offset_index.reset(max_index_size)
        self.time_index.reset(max_index_size)
        self.index_missing = False
        self._first_batch_timestamp = None
        found = Revalidated(0, self.base_offset, NO_TIMESTAMP, self.base_offset, 0, None)
        self.recovery_problem, self.recovery_lost_until = None, -1
        if self.size:
            with (
                mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) as mm,
                memoryview(mm) as view,
            ):
                with contextlib.suppress(OSError, AttributeError):
                    mm.madvise(mmap.MADV_SEQUENTIAL)
                found = revalidate(
                    view,
                    self.base_offset,
                    index_interval_bytes=self.index_interval_bytes,
                    offset_index=self.offset_index,
                    time_index=self.time_index,
                    epochs=epochs,
                )
                with view[found.valid_bytes :] as cut:
                    self.recovery_lost_until = last_offset_claimed(cut)
        self.recovery_problem = found.problem
        self._max_timestamp = found.max_timestamp
        self._offset_of_max_timestamp = found.offset_of_max_timestamp
        self._bytes_since_last_index_entry = found.bytes_since_last_index_entry
        truncated = self.size - found.valid_bytes
        if truncated:
            os.ftruncate(self._fd, found.valid_bytes)
            self.size = found.valid_bytes
        self._next_offset = found.next_offset
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.txn_index.truncate_to(found.next_offset)  # markers past the recovered end are gone
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch holding
        ``offset`` goes whole: a follower's truncation); returns the bytes removed."""
        first_removed = self.translate_offset(offset)
        if first_removed is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
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
        """The segment was rolled: record its final max timestamp, trim the indexes
        (made on disk first if it holds data, so a reload finds them)."""
        if self.size:
            self.offset_index.materialize()
            self.time_index.materialize()
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def dup_fds(self) -> list[int]:
        """Private descriptors of the three files (see Log.flush); raises OSError when
        the segment was closed meanwhile."""
        fds = [os.dup(self._fd)]
        try:
            for index in (self.offset_index, self.time_index):
                fd = index.open_for_fsync()
                if fd is not None:
                    fds.append(fd)
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
        """The segment's files; the ``.txnindex`` only when it has entries."""
        files = [self.log_path, self.offset_index.path, self.time_index.path]
        if self.txn_index.entries:
            files.append(self.txn_index.path)
        return files

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the three files from ``<name><old>`` to ``<name><new>``, indexes
        first and the ``.log`` last (crash recovery keys on the ``.log`` name). Open
        descriptors and mmaps follow the files."""
        for index in (self.offset_index, self.time_index):
            name = index.path.name.removesuffix(old) if old else index.path.name
            index.rename(index.path.with_name(name + new))
        txn = self.txn_index
        name = txn.path.name.removesuffix(old) if old else txn.path.name
        txn.rename(txn.path.with_name(name + new))
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
