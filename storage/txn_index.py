"""The aborted-transaction index of one segment: Kafka's ``<base>.txnindex``.

Each entry is 34 bytes, big-endian, one per transaction whose ABORT marker lies in the
segment, in marker order::

    version            int16   0
    producer_id        int64
    first_offset       int64   the transaction's first offset in this partition
    last_offset        int64   the offset of its ABORT marker
    last_stable_offset int64   the partition's LSO when the marker was written

A read_committed Fetch from offset F that returns records below U lists the aborted
transactions with last_offset >= F and first_offset < U, so the consumer drops their
records (docs/architecture.md, "Transactions"). The file is created on the segment's
first abort (most segments have none), appended on every abort, fsynced with the
segment; a truncated tail entry (a crash mid-write) is ignored on load, and entries at
or above a truncation point are cut with the log (``truncate_to``). Recovery re-adds
the entries of the batches it replays (``add`` ignores ones already present).

Concurrency: the Log that owns it calls it from one thread at a time.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        for at in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
            version, *fields = ENTRY.unpack_from(data, at)
            if version != 0:
                break
            self.entries.append(AbortedTxn(*fields))
        self._dirty = False

    def add(self, entry: AbortedTxn) -> None:
        """Append ``entry`` unless an entry of its producer and first offset is there."""
        for existing in reversed(self.entries):
            if existing.last_offset < entry.first_offset:
                break
            if existing[:2] == entry[:2]:
                return
        self.entries.append(entry)
        with open(self.path, "ab") as f:
            f.write(ENTRY.pack(0, *entry))
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.entries = kept
        if kept:
            self.path.write_bytes(b"".join(ENTRY.pack(0, *e) for e in kept))
        else:
            self.path.unlink(missing_ok=True)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def rename(self, target: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.path, target)
        self.path = target

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound)."""
        return [
            e
            for e in self.entries
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound
        ]


def decode_txn_index(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes (dump-log)."""
    return [
        AbortedTxn(*ENTRY.unpack_from(data, at)[1:])
        for at in range(0, len(data) - ENTRY.size + 1, ENTRY.size)
    ]
