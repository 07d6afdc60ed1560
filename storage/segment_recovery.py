"""Checking a segment's files, recovering them after a crash, and cutting them back.

How this works. ``sanity_check()`` is the cheap test for a segment written before the
recovery point or after a clean shutdown: both index files exist and pass their checks,
the last offset-index entry points at a batch holding that offset, and the headers from
there on end exactly at the end of the file. It derives the segment's state on the
way; when it raises, the caller runs ``recover()``.

``recover()`` re-reads the log from position 0, validating every batch (header, length,
CRC-32C, contiguous offsets in range), truncates the file at the first batch that fails
(a torn write, flipped bits, zeros from a preallocated tail) and rebuilds both indexes
from what remains, by the same sparse rule appends follow. It says why it cut
(``recovery_problem``) and how far the cut headers claimed to reach
(``recovery_lost_until``), and reports leader epochs it finds to an ``EpochSink``.

``truncate_to()`` removes whole batches from an offset on (a follower's truncation).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import Protocol

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import validate_batch
from minibroker.storage.corruption import last_offset_claimed
from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.segment_files import HEADER_SCAN, MAX_RELATIVE_OFFSET, SegmentFiles
from minibroker.storage.time_index import NO_TIMESTAMP


class EpochSink(Protocol):
    """What recovery reports leader epochs to (the LeaderEpochCache)."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int) -> None: ...


class SegmentRecovery(SegmentFiles):
    """Sanity check, recovery and truncation of a segment's files."""

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when an index is missing or fails its checks, or its
        last offset entry does not point at a batch holding that offset."""
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
        self.txn_index.truncate_to(next_offset)  # markers past the recovered end are gone
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
        self.txn_index.truncate_to(offset)
        truncated = self.size - first_removed.position
        os.ftruncate(self._fd, first_removed.position)
        self.size = first_removed.position
        self._load_tail_state()
        return truncated
