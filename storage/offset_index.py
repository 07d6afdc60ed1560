"""The sparse offset index of one segment (``<base offset>.index``).

Entry (8 bytes, big-endian): relative offset (int32, offset - segment base offset),
position (int32, byte position of a batch in the segment's ``.log``).

Invariants: relative offsets and positions both strictly increase; an entry (o, p)
means that the batch starting at p contains offset o (Kafka's rule writes the LAST
offset of a batch with that batch's START position), so every batch holding an offset
> o starts after p. Position 0 never appears: the first batch of a segment never gets
an entry (see LogSegment.append), which also makes an all-zero file invalid.

Lookup for offset t returns the entry with the largest offset <= t (or the segment
start); the segment then scans at most index.interval.bytes of batch headers forward.
The mmap/trim/crash rules are those of ``storage.index_file``.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.index_file import IndexFile

_REL_OFFSET = struct.Struct(">i")
_POSITION = struct.Struct(">i")
_POSITION_FIELD = 4  # byte offset of the position within an entry


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    ENTRY_SIZE: ClassVar[int] = 8
    ENTRY: ClassVar[struct.Struct] = struct.Struct(">ii")

    def entry(self, slot: int) -> OffsetPosition:
        rel, position = self.raw_entry(slot)
        return OffsetPosition(self.base_offset + rel, position)

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when there is none."""
        return self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); both must exceed the last entry's."""
        entries = self.entries
        if entries >= self.max_entries:
            raise CorruptIndexError(f"{self.path}: index is full ({entries} entries)")
        rel = offset - self.base_offset
        if entries:
            last_rel, last_position = self.raw_entry(entries - 1)
            if rel <= last_rel or position <= last_position:
                raise CorruptIndexError(
                    f"{self.path}: entry ({offset}, {position}) does not follow "
                    f"{self.entry(entries - 1)}"
                )
        self._write(entries, rel, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        slot = self._floor_slot(target_offset - self.base_offset, _REL_OFFSET, 0)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def lookup_by_position(self, target_position: int) -> OffsetPosition:
        """The entry with the largest position <= target, or (base offset, 0)."""
        slot = self._floor_slot(target_position, _POSITION, _POSITION_FIELD)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= ``offset``."""
        slot = self._floor_slot(offset - self.base_offset, _REL_OFFSET, 0)
        if slot >= 0 and self.entry(slot).offset == offset:
            slot -= 1
        self.truncate_entries(slot + 1)

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError unless the entries obey the invariants and every
        position lies inside a log of ``log_size`` bytes."""
        self._check_length()
        if not self.entries:
            return
        rels, positions = self.columns()
        if rels[0] < 0 or positions[0] <= 0 or positions[-1] >= log_size:
            raise CorruptIndexError(f"{self.path}: entries outside the segment")
        if not (self._strictly_increasing(rels) and self._strictly_increasing(positions)):
            raise CorruptIndexError(f"{self.path}: entries are not strictly increasing")
