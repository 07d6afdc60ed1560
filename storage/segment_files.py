"""The files of one log segment and the state derived from them.

A segment is ``<base>.log`` with its ``<base>.index`` and ``<base>.timeindex``
(``storage.offset_index``, ``storage.time_index``), and ``<base>.txnindex`` once a
transaction is aborted in it (``storage.txn_index``). ``SegmentFiles`` opens them, keeps
what is derived from them (size, next offset, max timestamp, bytes since the last index
entry), scans batch headers, and owns the files' life: flush, close, rename, delete.
``LogSegment`` (storage/segment.py: append, read, checks, recovery, truncation) is
built on this base.

The derived state of an existing segment is not valid until ``sanity_check`` or
``recover`` has run; a new segment (``create``) starts valid and empty.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.records.layout import BATCH_HEADER_SIZE, LOG_OVERHEAD, header_struct
from minibroker.storage.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_path,
)
from minibroker.storage.offset_index import OffsetIndex
from minibroker.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from minibroker.storage.txn_index import TransactionIndex

HEADER_SCAN = header_struct("base_offset", "batch_length", "last_offset_delta", "max_timestamp")
"""baseOffset, batchLength, lastOffsetDelta, maxTimestamp: all a segment needs of a
batch header."""
SCAN_CHUNK_BYTES = 16 * 1024
"""Header scans read this much per pread: one syscall covers a whole index interval of
small batches."""
MAX_RELATIVE_OFFSET = 2**31 - 1
"""The largest offset - base offset a segment holds: index entries store it as int32."""


class BatchPosition(NamedTuple):
    """Where one batch lies in a segment file."""

    base_offset: int
    last_offset: int
    position: int
    size: int


class SegmentFiles:
    """The files of the segment at ``base_offset`` in ``directory``: created empty with
    ``create``, else opened as they are; read-only unless ``writable``."""

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
