"""The sparse time index of one segment (``<base offset>.timeindex``).

Entry (12 bytes, big-endian): timestamp (int64, ms), relative offset (int32).

Entry (t, o) means: the largest timestamp of any batch up to and including the one
holding offset o is t. Timestamps strictly increase (an entry is only written when the
segment's max timestamp grew) and offsets never decrease. When a segment stops being
active its final (max timestamp, offset) is appended, so the last entry of a closed
segment is the segment's largest timestamp (retention reads it).

Lookup for timestamp T returns the entry with the largest timestamp <= T; no batch
before the one holding that entry's offset can hold a record stamped later than T, so
the segment starts its forward scan there. The mmap/trim/crash rules are those of
``storage.index_file``.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.index_file import IndexFile

_TIMESTAMP = struct.Struct(">q")
_REL_OFFSET = struct.Struct(">i")
_OFFSET_FIELD = 8  # byte offset of the relative offset within an entry
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    ENTRY_SIZE: ClassVar[int] = 12
    ENTRY: ClassVar[struct.Struct] = struct.Struct(">qi")

    def entry(self, slot: int) -> TimestampOffset:
        timestamp, rel = self.raw_entry(slot)
        return TimestampOffset(timestamp, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when there is none."""
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self.entries - 1)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if ``timestamp`` is larger than the last entry's.

        ``skip_full_check`` lets the final entry of a rolled or closed segment use the
        slot a full index keeps free, growing a trimmed file by one entry if needed.
        """
        entries = self.entries
        last_timestamp, last_rel = self.raw_entry(entries - 1) if entries else (NO_TIMESTAMP, 0)
        if timestamp <= last_timestamp:
            return
        if offset - self.base_offset < last_rel:
            raise CorruptIndexError(f"{self.path}: offset {offset} goes back from {last_rel}")
        if skip_full_check and self.entries >= self.max_entries:
            self.resize((self.entries + 1) * self.ENTRY_SIZE)  # a trimmed index: one more
        elif not skip_full_check and self.is_full:
            raise CorruptIndexError(f"{self.path}: time index is full")
        self._write(self.entries, timestamp, offset - self.base_offset)

    @property
    def is_full(self) -> bool:
        # One slot stays free for the final entry written when the segment rolls.
        return self.entries >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base)."""
        slot = self._floor_slot(target_timestamp, _TIMESTAMP, 0)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= ``offset``."""
        # Offsets never decrease, so "last slot with offset < target" is a floor search.
        slot = self._floor_slot(offset - 1 - self.base_offset, _REL_OFFSET, _OFFSET_FIELD)
        self.truncate_entries(slot + 1)

    def sanity_check(self, last_offset: int) -> None:
        """Raise CorruptIndexError unless timestamps strictly increase, offsets do not
        decrease and all lie in [base offset, ``last_offset``]."""
        self._check_length()
        if not self.entries:
            return
        timestamps, rels = self.columns()
        if rels[0] < 0 or self.base_offset + rels[-1] > last_offset:
            raise CorruptIndexError(f"{self.path}: entries outside the segment")
        if timestamps[0] < 0 or not self._strictly_increasing(timestamps):
            raise CorruptIndexError(f"{self.path}: timestamps are not strictly increasing")
        if not self._non_decreasing(rels):
            raise CorruptIndexError(f"{self.path}: offsets go backwards")
