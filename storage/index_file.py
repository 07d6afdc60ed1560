"""What the offset index and the time index share: a preallocated, mmap-ed array of
fixed-size big-endian entries, searched by binary search on the mapping.

How this works. A writable index is created at its maximum size (segment.index.bytes
rounded down to whole entries) as a sparse file, so appending an entry is one
``pack_into`` on the mapping. How many entries are valid lives only in memory: on disk
it is recoverable because the file is trimmed to exactly ``entries * ENTRY_SIZE`` when
its segment is rolled or closed. Reopening an existing file counts every whole entry in
it as valid, which is why the owner must run ``sanity_check`` after opening: an
untrimmed file left by a crash carries trailing zero entries that break the strict
ordering the check demands, and the segment then rebuilds the index from its log. An
index is never trusted without that check.

Entries removed by ``truncate_entries`` are zeroed (as a hole: the file is cut and
grown back, so nothing is written) so that stale but well-ordered entries can never
reappear in an untrimmed file after a crash. The preallocated tail is a hole too: an
index takes disk only for the pages its entries were written to, before and after any
restart.

Pages of the sparse file are allocated (zeros written into the hole through the file)
before the first entry written into each: a full disk is then an OSError on that
append, never a SIGBUS from writing to a mapping the filesystem cannot back.

Descriptors: an index holds no descriptor of its own and is mapped on first use (the
first entry written or read), as Kafka's lazily loaded indexes are. Python's mmap keeps
a duplicate descriptor per mapping, so a broker with thousands of empty partitions
holds one descriptor per segment (its ``.log``), not five; size changes go through the
path, and ``open_for_fsync`` opens a private descriptor for a flush.

Creation: the index of a new segment is made on disk only when something needs the
file: its first entry, or its segment rolled or closed holding data. A partition that
never received data has no index files at all (its segment's empty ``.log`` says all
there is), so creating one costs a directory and two files, not four: file creation
is kernel work of 0.05-0.7 ms a file on this project's VMs, and 10,000 new partitions
on each of three brokers made it most of their creation time.

Concurrency: one thread at a time (the owning Log serialises calls), except
``open_for_fsync``, which a flushing worker thread may call. No buffer over the mapping
is ever handed out, so the mapping can always be resized or closed.
"""

from __future__ import annotations

import errno
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
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        *,
        writable: bool = True,
        create: bool = False,
    ) -> None:
        """Open the index at ``path``, creating it (preallocated) when missing;
        ``create``: the caller knows it is missing (a new segment), and the file is
        made only when something needs it (see "Creation" in the module doc)."""
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self.closed = False
        self._mm: mmap.mmap | None = None
        if create:
            self._on_disk = False
            self.entries = 0
            self._set_length(self._round(max_index_size))
            return
        self._on_disk = True
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        existed = path.exists()
        fd = os.open(path, flags, 0o644)
        try:
            if not existed:
                os.ftruncate(fd, self._round(max_index_size))
            length = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self.entries = length // self.ENTRY_SIZE if existed else 0
        self._set_length(length)

    def materialize(self) -> None:
        """Make the file (sparse, at the current length) if it was not made yet."""
        if self._on_disk:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self._length)
        finally:
            os.close(fd)
        self._on_disk = True

    # --- mapping management ----------------------------------------------------------

    def _round(self, size: int) -> int:
        return max(size, 0) // self.ENTRY_SIZE * self.ENTRY_SIZE

    def _set_length(self, length: int) -> None:
        self._length = length
        self.max_entries = length // self.ENTRY_SIZE  # an attribute: read on every append

    def _mapping(self) -> mmap.mmap:
        """The mapping of the whole file, made on first use. Only called with entries
        to read or a slot to write, so the file is never empty here."""
        mm = self._mm
        if mm is None:
            if self.closed:
                raise ValueError(f"{self.path}: index is closed")
            self.materialize()
            fd = os.open(self.path, os.O_RDWR if self.writable else os.O_RDONLY)
            try:
                access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
                mm = self._mm = mmap.mmap(fd, self._length, access=access)
            finally:
                os.close(fd)  # the mapping keeps a duplicate of its own
        return mm

    def _unmap(self) -> None:
        if self._mm is not None:
            # No msync: unmapping keeps dirty pages in the page cache. Durability is
            # flush()'s job, called when the recovery point moves.
            self._mm.close()
            self._mm = None

    def _cut_and_grow(self, cut: int, length: int) -> None:
        """Set the file to ``cut`` bytes, then to ``length``: what lies past ``cut``
        becomes a hole (zeros that take no disk)."""
        if not self._on_disk:
            self._set_length(length)
            return
        self._unmap()
        os.truncate(self.path, cut)
        if length != cut:
            os.truncate(self.path, length)
        self._set_length(length)

    def resize(self, new_size: int) -> None:
        """Set the file to ``new_size`` rounded down to whole entries, never below the
        valid entries. Used to trim on roll/close and to grow an index that becomes
        active again (the growth is a hole)."""
        length = max(self._round(new_size), self.entries * self.ENTRY_SIZE)
        if length != self._length:
            self._cut_and_grow(length, length)

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

    def open_for_fsync(self) -> int | None:
        """A private read-only descriptor of the file, for a flush in another thread
        (fsync through it also writes back the pages dirtied through the mapping:
        Linux keeps one page cache for both); None while there is no file (nothing to
        make durable). Raises OSError once the index is closed."""
        if self.closed:
            raise OSError(errno.EBADF, f"{self.path}: index is closed")
        if not self._on_disk:
            return None
        return os.open(self.path, os.O_RDONLY)

    def flush(self) -> None:
        """Make the entries durable."""
        if self.closed or not self.writable:
            return
        fd = self.open_for_fsync()
        if fd is None:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.closed:
            return
        self.trim()
        self._unmap()
        self.closed = True

    def abandon(self) -> None:
        """Close without trimming (what a crash leaves)."""
        self._unmap()
        self.closed = True

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: Path) -> None:
        if self._on_disk:
            os.rename(self.path, new_path)
        self.path = new_path

    # --- entries ---------------------------------------------------------------------

    def _write(self, slot: int, *fields: int) -> None:
        mm = self._mm
        if mm is None:
            mm = self._mapping()
        position = slot * self.ENTRY_SIZE
        if not position % PAGE_BYTES:
            # The file is sparse: the first write into a page allocates it, and a
            # write to a mapping the filesystem cannot back is SIGBUS - the whole
            # process killed. Allocating the page first turns a full disk into an
            # OSError (ENOSPC) here, which the log handles as a failed log dir.
            self._allocate(position, PAGE_BYTES)
        self.ENTRY.pack_into(mm, position, *fields)
        self.entries = slot + 1

    def _allocate(self, offset: int, length: int) -> None:
        """Back a range of the file past the last entry (a hole: zeros) by writing zeros
        into it, through the path (no descriptor is kept; this runs once per page of
        entries). The write reserves the blocks, or fails with ENOSPC, as
        posix_fallocate did, and leaves the page in the page cache, so the mapping's
        first store into it is a minor fault. After posix_fallocate that store had to
        convert an unwritten extent, many times slower than this way, which made most
        of a broker's first writes to 1,000 partitions and of its recovery after kill -9
        (docs/performance.md, "Figures behind the code")."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            if os.pwrite(fd, bytes(length), offset) != length:
                raise OSError(errno.ENOSPC, f"{self.path}: short write allocating a page")
        finally:
            os.close(fd)

    def raw_entry(self, slot: int) -> tuple[int, ...]:
        """The stored fields of entry ``slot`` (relative offsets not yet made absolute)."""
        return self.ENTRY.unpack_from(self._mm or self._mapping(), slot * self.ENTRY_SIZE)

    def _floor_slot(self, key: int, field: struct.Struct, field_offset: int) -> int:
        """Largest slot whose ``field`` (at ``field_offset`` within the entry) is <= key,
        or -1. Fields are non-decreasing by invariant, so this is a binary search."""
        if self.entries == 0:
            return -1
        mm = self._mm or self._mapping()
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
        """Keep only the first ``count`` entries; zero the rest (see module doc).

        The file is cut at the new end and grown back: the removed entries read as
        zeros from a hole, and no page is written. Zeroing them through the mapping
        instead wrote out the whole preallocation after a crash (the reopened untrimmed
        file counts every slot as an entry): 20 MB per empty partition."""
        count = max(0, min(count, self.entries))
        if count < self.entries and self.writable:
            self._cut_and_grow(count * self.ENTRY_SIZE, self._length)
        self.entries = count

    def reset(self, max_index_size: int) -> None:
        """Drop every entry and grow back to ``max_index_size`` (before a rebuild)."""
        self.truncate_entries(0)
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
        if not self.entries:
            return (), ()
        fields = self.ENTRY.format.lstrip(">")
        flat = struct.unpack_from(">" + fields * self.entries, self._mm or self._mapping())
        return flat[0::2], flat[1::2]
