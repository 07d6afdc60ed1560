"""Producer-state snapshot files: their bytes, and the files of one partition dir.

Snapshots (Kafka's ``<20-digit offset>.snapshot``, version 1): the state as of that
offset (it covers every batch below it), all big-endian::

    version                  int16   1
    crc                      uint32  CRC-32C of every byte after this field
    entry count              int32
    per producer:
      producer_id            int64
      epoch                  int16
      last_sequence          int32
      last_offset            int64
      offset_delta           int32   last_offset - first offset of the last batch
      timestamp              int64   max timestamp of the last batch
      coordinator_epoch      int32   of the last marker seen (-1: none)
      current_txn_first_offset int64 first offset of its open transaction (-1: none)

A producer known only by a marker (its batches went with an epoch bump) is written
with last_sequence -1, last_offset -1. Only the last batch of each producer is in a
snapshot (as in Kafka); batches after the
snapshot offset are replayed from the log on load, which refills the others. A snapshot
is written on segment roll and clean shutdown (``.tmp``, fsync, rename, fsync of the
dir); one that fails its CRC or does not parse is deleted on load and the next older one
(or, if none, the whole log) is used instead. Snapshots above the log end (after a
truncation) are deleted.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path

from minibroker.protocol.crc32c import crc32c
from minibroker.storage.checkpoint import write_atomically
from minibroker.storage.producer_entries import (
    BatchMetadata,
    ProducerStateEntry,
    next_sequence,
)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerSnapshots:
    """The snapshot files of one partition dir, written and deleted only through here.
    ``empty_dir``: the dir was just made, so it holds none to list."""

    def __init__(self, directory: Path, *, empty_dir: bool = False) -> None:
        self.dir = directory
        # Offsets of the files present (listed on first need).
        self._offsets: set[int] | None = set() if empty_dir else None

    def path(self, offset: int) -> Path:
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending. Listed from the directory
        once, then kept up to date by this object (the only writer of the files), so a
        truncation or retention pass costs no directory listing."""
        if self._offsets is None:
            found = set()
            for path in self.dir.iterdir():
                match = _SNAPSHOT_FILE.match(path.name)
                if match is not None:
                    found.add(int(match[1]))
            self._offsets = found
        return sorted(self._offsets)

    def write(self, offset: int, entries: Iterable[ProducerStateEntry]) -> Path:
        """Write ``entries`` as the state as of ``offset``, durably."""
        path = self.path(offset)
        write_atomically(path, encode_snapshot(entries))
        if self._offsets is not None:
            self._offsets.add(offset)
        return path

    def read(self, offset: int) -> list[ProducerStateEntry]:
        """The entries of the snapshot at ``offset``; raises OSError or
        CorruptSnapshotError."""
        return decode_snapshot(self.path(offset).read_bytes())

    def delete(self, offset: int) -> None:
        self.path(offset).unlink(missing_ok=True)
        if self._offsets is not None:
            self._offsets.discard(offset)

    def delete_before(self, offset: int) -> None:
        """Snapshots below the log start describe data that is gone."""
        for at in self.offsets():
            if at < offset:
                self.delete(at)

    def delete_after(self, offset: int) -> None:
        for at in self.offsets():
            if at > offset:
                self.delete(at)


class CorruptSnapshotError(Exception):
    """A snapshot file that is truncated, of another version, or fails its CRC."""


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot bytes of ``entries`` (producers with neither a batch nor a marker
    are left out)."""
    rows = sorted(
        (e for e in entries if e.batches or e.coordinator_epoch >= 0),
        key=lambda e: e.producer_id,
    )
    body = bytearray(_COUNT.pack(len(rows)))
    for entry in rows:
        if entry.batches:
            last = entry.batches[-1]
            sequence, offset, delta, timestamp = (
                last.last_sequence,
                last.last_offset,
                last.offset_delta,
                last.max_timestamp,
            )
        else:
            sequence, offset, delta, timestamp = -1, -1, 0, entry.last_timestamp
        body += _ENTRY.pack(
            entry.producer_id,
            entry.epoch,
            sequence,
            offset,
            delta,
            timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Entries of a snapshot file; raises CorruptSnapshotError if it is not whole."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc = _HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version}, expected {SNAPSHOT_VERSION}")
    body = memoryview(data)[_HEAD.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("snapshot CRC does not match")
    (count,) = _COUNT.unpack_from(body)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot of {len(body)} bytes cannot hold {count} entries")
    entries = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first = (
            _ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size)
        )
        batches: tuple[BatchMetadata, ...] = ()
        if last_seq >= 0:
            batches = (
                BatchMetadata(
                    next_sequence(last_seq, -delta),
                    last_seq,
                    last_offset - delta,
                    last_offset,
                    timestamp,
                ),
            )
        entries.append(
            ProducerStateEntry(
                pid,
                epoch,
                batches,
                timestamp,
                coordinator_epoch=coordinator_epoch,
                current_txn_first_offset=txn_first,
            )
        )
    return entries
