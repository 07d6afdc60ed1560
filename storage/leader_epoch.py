"""The leader-epoch cache of one partition: which leader epoch began at which offset.

Backed by ``leader-epoch-checkpoint`` in the partition dir (checkpoint format, entries
"epoch startOffset", ascending in both). Invariants: epochs strictly increase and start
offsets strictly increase from entry to entry, so the cache describes the log as a
sequence of epoch ranges; the range of an epoch ends where the next one starts (the
last one at the log end offset).

Every change is written to the file (tmp + rename) before the method returns, without
fsync - except ``assign(..., defer_write=True)`` (a new leadership): then only memory
changes and ``write_pending()`` writes the file later, in a worker thread, once for a
whole LeaderAndIsr, because even unsynced writes of ~100 partitions on the broker's
event loop stall every request for hundreds of ms. ``flush()`` writes any pending
change and makes the file durable; the Log calls it before moving its recovery point,
so every epoch starting below the recovery point is on disk, and epochs of batches
after it are re-derived from those batches by recovery (so a crash before the deferred
write loses nothing). On load the Log also truncates the cache to the recovered log end.

Followers use ``end_offset_for`` (answering OffsetForLeaderEpoch on the leader) to find
where their log diverges (KIP-101, with KIP-279's rule: answer for the largest epoch
not above the requested one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from minibroker.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    fsync_dir,
    fsync_file,
    read_checkpoint,
    write_checkpoint,
)
from minibroker.storage.errors import CorruptCheckpointError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset entries of one partition. Not thread-safe: the owning Log
    serialises calls."""

    def __init__(self, directory: Path, log_end_offset: Callable[[], int]) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._log_end_offset = log_end_offset
        self._unsynced = False
        self._pending = False  # memory is ahead of the file (a deferred assign)
        # File writes may come from the event loop and a worker thread (write_pending,
        # flush): one at a time, since they share the tmp file.
        self._write_lock = threading.Lock()
        self._entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        rows = read_checkpoint(self.path, 2)
        entries: list[EpochEntry] = []
        for number, (epoch, offset) in enumerate(rows or (), start=3):
            try:
                entry = EpochEntry(int(epoch), int(offset))
            except ValueError:
                raise CorruptCheckpointError(f"{self.path}:{number}: not integers") from None
            if entries and (entry.epoch <= entries[-1].epoch or entry.start_offset < 0):
                raise CorruptCheckpointError(f"{self.path}:{number}: epochs out of order")
            entries.append(entry)
        return entries

    def _flush(self) -> None:
        with self._write_lock:
            self._pending = False
            write_checkpoint(self.path, self._entries, sync=False)
            self._unsynced = True

    def write_pending(self) -> None:
        """Write the file if a deferred assign left it behind memory. May run in a
        worker thread: it writes a snapshot (the event loop replaces ``_entries``, never
        mutates the list in place)."""
        with self._write_lock:
            if not self._pending:
                return
            self._pending = False
            try:
                write_checkpoint(self.path, self._entries, sync=False)
            except BaseException:
                self._pending = True  # flush() tries again before the recovery point moves
                raise
            self._unsynced = True

    def flush(self) -> None:
        """Write any pending change, then fsync the checkpoint file (and its directory)
        if it changed since the last flush. May run in a worker thread (Log.flush)."""
        self.write_pending()
        if self._unsynced:
            # Cleared first: a change made meanwhile by another thread sets it again.
            self._unsynced = False
            fsync_file(self.path)
            fsync_dir(self.path.parent)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, defer_write: bool = False) -> None:
        """Record that ``epoch`` starts at ``start_offset``.

        Called for every appended batch with its partitionLeaderEpoch, so the common
        case (same epoch as the latest, later offset) must be a no-op. A new entry
        replaces every entry it contradicts: those with an epoch >= ``epoch`` or a
        start offset >= ``start_offset``. ``defer_write``: leave the file to
        ``write_pending()`` / ``flush()``.
        """
        if epoch < 0:
            return
        if self._entries:
            latest = self._entries[-1]
            if latest.epoch == epoch and start_offset >= latest.start_offset:
                return
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._entries = [*kept, EpochEntry(epoch, start_offset)]  # published whole
        if defer_write:
            self._pending = True
        else:
            self._flush()

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, with KIP-279 semantics.

        - requested is the latest epoch: (it, the log end offset);
        - otherwise the largest known epoch <= requested, with the start offset of the
          first epoch above requested as its end;
        - requested is below every known epoch: (requested, first start offset);
        - requested is above every known epoch, unknown, or the cache is empty:
          (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, self._log_end_offset()
        later = [e for e in self._entries if e.epoch > requested_epoch]
        if not later:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        earlier = [e for e in self._entries if e.epoch <= requested_epoch]
        if not earlier:
            return requested_epoch, later[0].start_offset
        return earlier[-1].epoch, later[0].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated)."""
        if end_offset < 0 or not any(e.start_offset >= end_offset for e in self._entries):
            return
        self._entries = [e for e in self._entries if e.start_offset < end_offset]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs that ended before it and
        move the start of the epoch containing it up to it."""
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        before = [e for e in self._entries if e.start_offset <= start_offset]
        after = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(before[-1].epoch, start_offset), *after]
        self._flush()

    def clear(self) -> None:
        """Forget everything (the log was emptied and restarted at a new offset)."""
        self._entries = []
        self._flush()
