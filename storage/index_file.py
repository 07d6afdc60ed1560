"""What the offset index and the time index share: a preallocated, mmap-ed array of
fixed-size big-endian entries, searched by binary search on the mapping.

How this works. A writable index is created at its maximum size (segment.index.bytes
rounded down to whole entries) and mapped once, so appending an entry is one
``pack_into`` on the mapping. How many entries are valid lives only in memory: on disk
it is recoverable because the file is trimmed to exactly ``entries * ENTRY_SIZE`` when
its segment is rolled or closed. Reopening an existing file counts every whole entry in
it as valid, which is why the owner must run ``sanity_check`` after opening: an
untrimmed file left by a crash carries trailing zero entries that break the strict
ordering the check demands, and the segment then rebuilds the index from its log. An
index is never trusted without that check.

Pages of the sparse file are allocated (``posix_fallocate``) before the first entry
written into each: a full disk is then an OSError on that append, never a SIGBUS from
writing to a mapping the filesystem cannot back.

Entries removed by ``truncate_entries`` are zeroed so that stale but well-ordered
entries can never reappear in an untrimmed file after a crash.

Concurrency: one thread at a time (the owning Log serialises calls). No buffer over the
mapping is ever handed out, so the mapping can always be resized or closed.
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
from pathlib import Path
from typing import ClassVar

from minibroker.storage.errors import CorruptIndexError

PAGE_BYTES = mmap.PAGESIZE
"""The unit in which the sparse index file is allocated before it is written."""


class IndexFile:
    """Base of OffsetIndex and TimeIndex. Subclasses set ENTRY_SIZE and the structs."""

    ENTRY_SIZE: ClassVar[int]
    ENTRY: ClassVar[struct.Struct]

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, *, writable: bool = True
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self._mm: mmap.mmap | None = None
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        existed = path.exists()
        self.max_entries = 0
        self._fd = os.open(path, flags, 0o644)
        try:
            if not existed:
                os.ftruncate(self._fd, self._round(max_index_size))
                self.entries = 0
            length = os.fstat(self._fd).st_size
            if existed:
                self.entries = length // self.ENTRY_SIZE
            self._length = length
            self._map(length)
        except BaseException:
            os.close(self._fd)
            raise

    # --- mapping management ----------------------------------------------------------

    def _round(self, size: int) -> int:
        return max(size, 0) // self.ENTRY_SIZE * self.ENTRY_SIZE

    def _map(self, length: int) -> None:
        self.max_entries = length // self.ENTRY_SIZE  # an attribute: read on every append
        if length == 0:  # mmap cannot map an empty file; zero entries need no mapping
            self._mm = None
            return
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        self._mm = mmap.mmap(self._fd, length, access=access)

    def _unmap(self) -> None:
        if self._mm is not None:
            # No msync: unmapping keeps dirty pages in the page cache. Durability is
            # flush()'s job, called when the recovery point moves.
            self._mm.close()
            self._mm = None

    def resize(self, new_size: int) -> None:
        """Set the file (and mapping) to ``new_size`` rounded down to whole entries,
        never below the valid entries. Used to trim on roll/close and to grow an index
        that becomes active again."""
        length = max(self._round(new_size), self.entries * self.ENTRY_SIZE)
        if length == self._length:
            return
        self._unmap()
        os.ftruncate(self._fd, length)
        self._length = length
        self._map(length)

    def trim(self) -> None:
        """Shrink the file to exactly the valid entries (on roll and close)."""
        if self.writable:
            self.resize(self.entries * self.ENTRY_SIZE)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    def flush(self) -> None:
        """Make the entries durable. fsync of the file also writes back pages dirtied
        through the mapping (Linux keeps one page cache for both)."""
        if self._fd >= 0 and self.writable:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self.trim()
        self._unmap()
        os.close(self._fd)
        self._fd = -1

    def abandon(self) -> None:
        """Close without trimming (what a crash leaves)."""
        if self._fd >= 0:
            self._unmap()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: Path) -> None:
        os.rename(self.path, new_path)
        self.path = new_path

    # --- entries ---------------------------------------------------------------------

    def _write(self, slot: int, *fields: int) -> None:
        assert self._mm is not None
        position = slot * self.ENTRY_SIZE
        if not position % PAGE_BYTES:
            # The file is sparse: the first write into a page allocates it, and a
            # write to a mapping the filesystem cannot back is SIGBUS - the whole
            # process killed. Allocating the page first turns a full disk into an
            # OSError (ENOSPC) here, which the log handles as a failed log dir.
            os.posix_fallocate(self._fd, position, PAGE_BYTES)
        self.ENTRY.pack_into(self._mm, position, *fields)
        self.entries = slot + 1

    def raw_entry(self, slot: int) -> tuple[int, ...]:
        """The stored fields of entry ``slot`` (relative offsets not yet made absolute)."""
        assert self._mm is not None
        return self.ENTRY.unpack_from(self._mm, slot * self.ENTRY_SIZE)

    def _floor_slot(self, key: int, field: struct.Struct, field_offset: int) -> int:
        """Largest slot whose ``field`` (at ``field_offset`` within the entry) is <= key,
        or -1. Fields are non-decreasing by invariant, so this is a binary search."""
        mm = self._mm
        if mm is None or self.entries == 0:
            return -1
        unpack = field.unpack_from
        size = self.ENTRY_SIZE
        if unpack(mm, field_offset)[0] > key:
            return -1
        lo, hi = 0, self.entries - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size + field_offset)[0] <= key:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def truncate_entries(self, count: int) -> None:
        """Keep only the first ``count`` entries; zero the rest (see module doc)."""
        count = max(0, min(count, self.entries))
        if count < self.entries and self._mm is not None:
            start, end = count * self.ENTRY_SIZE, self.entries * self.ENTRY_SIZE
            self._mm[start:end] = bytes(end - start)
        self.entries = count

    def reset(self, max_index_size: int) -> None:
        """Drop every entry and grow back to ``max_index_size`` (before a rebuild).
        The file is cut to nothing and regrown sparse, not zeroed through the mapping:
        an untrimmed index left by a crash counts its whole preallocated size as
        entries, and zeroing it would write (and allocate) every page of it."""
        self.entries = 0
        self._unmap()
        os.ftruncate(self._fd, 0)
        self._length = 0
        self._map(0)
        self.resize(max_index_size)

    @staticmethod
    def _strictly_increasing(column: tuple[int, ...]) -> bool:
        # map(sub) over two slices runs in C: ~10 ms for the 262,144 entries of a
        # 1 GiB segment, cheap enough to check every index on every open.
        return len(column) < 2 or min(map(operator.sub, column[1:], column[:-1])) > 0

    @staticmethod
    def _non_decreasing(column: tuple[int, ...]) -> bool:
        return len(column) < 2 or min(map(operator.sub, column[1:], column[:-1])) >= 0

    def _check_length(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: size {self._length} is not a multiple of {self.ENTRY_SIZE}"
            )

    def columns(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The two fields of every valid entry as two tuples (one C-level unpack)."""
        if self._mm is None or not self.entries:
            return (), ()
        fields = self.ENTRY.format.lstrip(">")
        flat = struct.unpack_from(">" + fields * self.entries, self._mm)
        return flat[0::2], flat[1::2]
