"""Idempotent-producer state of one partition: per producer id, its epoch and last batches.

How this works. Every batch with a producer id (>= 0) carries the producer's epoch and
the sequence number of its first record; its records take the following sequences,
wrapping from 2**31 - 1 to 0. For each producer the partition keeps the epoch and the
metadata of its last ``BATCHES_KEPT`` batches (first/last sequence, first/last offset,
max timestamp). A leader checks each appended batch against it (``ProducerAppend``):

- a batch whose epoch and sequence range equal one of those kept is a *duplicate* (a
  retry of a batch already written): the append answers its original offsets and
  writes nothing;
- an epoch older than the producer's -> INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- the same epoch must continue right after the last sequence; a batch that ends at or
  before it was written already but is no longer among those kept (a snapshot keeps only
  the last batch): DUPLICATE_SEQUENCE_NUMBER, which clients take as success with an
  unknown offset; anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (a gap: an earlier batch
  is missing);
- a producer the partition has no state for (never seen, or expired after
  ``producer.id.expiration.ms`` without a batch) may start at sequence 0; any other
  sequence is UNKNOWN_PRODUCER_ID, so the client resets its sequences.

A follower and recovery apply the same batches without checks (the leader did them),
so the state follows the log and deduplication holds after a failover.

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
      coordinator_epoch      int32   -1 (no transactions here)
      current_txn_first_offset int64 -1

Only the last batch of each producer is in a snapshot (as in Kafka); batches after the
snapshot offset are replayed from the log on load, which refills the others. A snapshot
is written on segment roll and clean shutdown (``.tmp``, fsync, rename, fsync of the
dir); one that fails its CRC or does not parse is deleted on load and the next older one
(or, if none, the whole log) is used instead. Snapshots above the log end (after a
truncation) are deleted.

Concurrency: not thread-safe; the Log that owns it calls it from one thread at a time.
"""

from __future__ import annotations

import logging
import re
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from minibroker.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from minibroker.storage.checkpoint import write_atomically

log = logging.getLogger(__name__)

BATCHES_KEPT = 5
"""Batches remembered per producer: the client keeps at most 5 in flight per partition,
so any retry it can send is one of these."""
MAX_SEQUENCE = 2**31 - 1
"""Sequences are int32 and wrap from here to 0."""
NO_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Kafka's producer.id.expiration.ms: a day without a batch forgets a producer."""
REPLAY_CHUNK_BYTES = 1 << 20  # how much of a segment one read brings in while replaying

_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


def next_sequence(sequence: int, increment: int) -> int:
    """``sequence`` + ``increment`` in the int32 space that wraps to 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def _at_or_before(sequence: int, reference: int) -> bool:
    """Is ``sequence`` at or before ``reference``, sequences wrapping at 2**31? A
    producer's pending sequences lie within a small window, far below half the space."""
    return (reference - sequence) % (MAX_SEQUENCE + 1) < 2**30


class BatchMetadata(NamedTuple):
    """What the partition remembers of one producer batch (a NamedTuple: one is made
    per appended batch on the leader's hot path)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


class ProducerStateEntry:
    """One producer's epoch and its last batches, oldest first."""

    __slots__ = ("batches", "epoch", "last_timestamp", "producer_id")

    def __init__(
        self,
        producer_id: int,
        epoch: int = NO_EPOCH,
        batches: Iterable[BatchMetadata] = (),
        last_timestamp: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=BATCHES_KEPT)
        self.last_timestamp = last_timestamp

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(
        self, epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        """The kept batch with this epoch and sequence range, if any."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()  # sequences restart with a new epoch
        self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(id={self.producer_id}, epoch={self.epoch},"
            f" last_sequence={self.last_sequence}, last_offset={self.last_offset})"
        )


def _check(
    current_epoch: int,
    last: int,
    epoch: int,
    first_sequence: int,
    last_sequence: int,
    where: str,
) -> None:
    """Raise the error Kafka answers when a batch does not follow the producer's
    ``current_epoch`` (NO_EPOCH: no state) and ``last`` sequence."""
    if current_epoch == NO_EPOCH:
        if first_sequence != 0:
            raise UnknownProducerIdError(
                f"{where}: no state for this producer, sequence {first_sequence} is not 0"
            )
        return
    if epoch < current_epoch:
        raise InvalidProducerEpochError(f"{where}: epoch {epoch} is older than {current_epoch}")
    if epoch > current_epoch:
        if first_sequence != 0:
            raise OutOfOrderSequenceNumberError(
                f"{where}: new epoch {epoch} must start at sequence 0, not {first_sequence}"
            )
        return
    if last != NO_SEQUENCE and first_sequence != (last + 1) % (MAX_SEQUENCE + 1):
        if _at_or_before(last_sequence, last) and _at_or_before(first_sequence, last_sequence):
            raise DuplicateSequenceNumberError(
                f"{where}: sequences {first_sequence}-{last_sequence} were written already"
            )
        raise OutOfOrderSequenceNumberError(
            f"{where}: sequence {first_sequence} does not follow {last}"
        )


class ProducerAppend:
    """The producer batches of one append, checked (leader) before anything is written.

    ``add`` each batch in log order; it returns the original metadata of a duplicate, or
    raises the partition error. ``commit`` after the write makes the batches part of the
    state; an append that fails in between is simply dropped.
    """

    __slots__ = ("_manager", "_pending", "_pending_last", "_validate")

    def __init__(self, manager: ProducerStateManager, *, validate: bool) -> None:
        self._manager = manager
        self._validate = validate
        self._pending: list[tuple[int, int, BatchMetadata]] = []  # (id, epoch, batch)
        self._pending_last: dict[int, tuple[int, int]] = {}  # id -> (epoch, last sequence)

    def add(self, header: BatchHeader, first_offset: int) -> BatchMetadata | None:
        producer_id = header.producer_id
        epoch = header.producer_epoch
        first_sequence = header.base_sequence
        delta = header.last_offset_delta
        last_sequence = (first_sequence + delta) % (MAX_SEQUENCE + 1)
        if self._validate:
            earlier = self._pending_last.get(producer_id)
            if earlier is not None:  # a second batch of the producer in this append
                _check(*earlier, epoch, first_sequence, last_sequence, self._manager.name)
            else:
                current = self._manager.producers.get(producer_id)
                if current is None:
                    _check(
                        NO_EPOCH,
                        NO_SEQUENCE,
                        epoch,
                        first_sequence,
                        last_sequence,
                        self._manager.name,
                    )
                elif (
                    epoch == current.epoch
                    and current.batches
                    and (
                        first_sequence
                        == (current.batches[-1].last_sequence + 1) % (MAX_SEQUENCE + 1)
                    )
                ):
                    pass  # the next batch in sequence, the usual case: nothing to look up
                else:
                    duplicate = current.find_duplicate(epoch, first_sequence, last_sequence)
                    if duplicate is not None:
                        return duplicate
                    _check(
                        current.epoch,
                        current.last_sequence,
                        epoch,
                        first_sequence,
                        last_sequence,
                        self._manager.name,
                    )
        batch = tuple.__new__(
            BatchMetadata,
            (
                first_sequence,
                last_sequence,
                first_offset,
                first_offset + delta,
                header.max_timestamp,
            ),
        )
        self._pending.append((producer_id, epoch, batch))
        self._pending_last[producer_id] = (epoch, last_sequence)
        return None

    def commit(self, end_offset: int) -> None:
        """The batches are in the log, which now ends at ``end_offset``."""
        producers = self._manager.producers
        for producer_id, epoch, batch in self._pending:
            entry = producers.get(producer_id)
            if entry is None:
                entry = producers[producer_id] = ProducerStateEntry(producer_id)
            entry.add_batch(epoch, batch)
        self._manager.map_end_offset = end_offset


class ProducerStateManager:
    """The producer state of one partition dir, with its snapshot files."""

    def __init__(
        self,
        directory: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = directory
        self.name = directory.name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state reflects every producer batch below this
        self._snapshots: set[int] | None = None  # offsets of the snapshot files (lazy)

    def append(self, *, validate: bool) -> ProducerAppend:
        return ProducerAppend(self, validate=validate)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def replay(self, headers: Iterable[BatchHeader], end_offset: int) -> None:
        """Apply batches from the log (as a follower does: no checks)."""
        pending = self.append(validate=False)
        for header in headers:
            if header.producer_id >= 0:
                pending.add(header, header.base_offset)
        pending.commit(end_offset)

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers with no batch for ``producer_id_expiration_ms``; how many."""
        limit = self.producer_id_expiration_ms
        expired = [
            pid for pid, entry in self.producers.items() if now_ms - entry.last_timestamp >= limit
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self, offset: int) -> None:
        self.producers.clear()
        self.map_end_offset = offset

    # --- snapshots ---------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending. Listed from the directory
        once, then kept up to date by this object (the only writer of the files), so a
        truncation or retention pass costs no directory listing."""
        if self._snapshots is None:
            found = set()
            for path in self.dir.iterdir():
                match = _SNAPSHOT_FILE.match(path.name)
                if match is not None:
                    found.add(int(match[1]))
            self._snapshots = found
        return sorted(self._snapshots)

    def take_snapshot(self, offset: int | None = None) -> Path:
        """Write the state as of ``offset`` (default: where it ends) durably."""
        at = self.map_end_offset if offset is None else offset
        path = self.snapshot_path(at)
        write_atomically(path, encode_snapshot(self.producers.values()))
        if self._snapshots is not None:
            self._snapshots.add(at)
        return path

    def _delete_snapshot(self, offset: int) -> None:
        self.snapshot_path(offset).unlink(missing_ok=True)
        if self._snapshots is not None:
            self._snapshots.discard(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        """Snapshots below the log start describe data that is gone."""
        for at in self.snapshot_offsets():
            if at < offset:
                self._delete_snapshot(at)

    def delete_snapshots_after(self, offset: int) -> None:
        for at in self.snapshot_offsets():
            if at > offset:
                self._delete_snapshot(at)

    def truncate(
        self,
        *,
        log_start_offset: int,
        log_end_offset: int,
        headers_from: Callable[[int], Iterator[BatchHeader]],
    ) -> None:
        """The log was truncated to ``log_end_offset``: drop what lies above it. When no
        producer's last batch was cut, only the snapshots above the end go; otherwise
        the state is rebuilt (``load``)."""
        if all(entry.last_offset < log_end_offset for entry in self.producers.values()):
            self.delete_snapshots_after(log_end_offset)
            self.map_end_offset = min(self.map_end_offset, log_end_offset)
            return
        self.load(
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            headers_from=headers_from,
        )

    def load(
        self,
        *,
        log_start_offset: int,
        log_end_offset: int,
        headers_from: Callable[[int], Iterator[BatchHeader]],
    ) -> None:
        """Rebuild the state for a log spanning [start, end): the newest valid snapshot
        at or below the end, then the batches after it (or the whole log)."""
        self.delete_snapshots_after(log_end_offset)
        self.producers.clear()
        replay_from = log_start_offset
        for at in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(at)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: ignoring snapshot %s: %s", self.name, path.name, exc)
                self._delete_snapshot(at)
                continue
            if at < log_start_offset:
                break  # older than the log: the log itself is the better source
            self.producers = {entry.producer_id: entry for entry in entries}
            replay_from = at
            break
        self.map_end_offset = replay_from
        self.replay(headers_from(replay_from), log_end_offset)


class CorruptSnapshotError(Exception):
    """A snapshot file that is truncated, of another version, or fails its CRC."""


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot bytes of ``entries`` (producers without a batch are left out)."""
    rows = sorted((e for e in entries if e.batches), key=lambda e: e.producer_id)
    body = bytearray(_COUNT.pack(len(rows)))
    for entry in rows:
        last = entry.batches[-1]
        body += _ENTRY.pack(
            entry.producer_id,
            entry.epoch,
            last.last_sequence,
            last.last_offset,
            last.offset_delta,
            last.max_timestamp,
            -1,
            -1,
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
        pid, epoch, last_seq, last_offset, delta, timestamp, _, _ = _ENTRY.unpack_from(
            body, _COUNT.size + i * _ENTRY.size
        )
        batch = BatchMetadata(
            next_sequence(last_seq, -delta), last_seq, last_offset - delta, last_offset, timestamp
        )
        entries.append(ProducerStateEntry(pid, epoch, (batch,), timestamp))
    return entries


def iter_segment_headers(
    read_at: Callable[[int, int], bytes], start: int, end: int
) -> Iterator[BatchHeader]:
    """Headers of the whole batches in a segment file's bytes [start, end), read in
    chunks (the bytes were validated on append or recovery)."""
    position = start
    while end - position >= BATCH_HEADER_SIZE:
        chunk = read_at(position, min(REPLAY_CHUNK_BYTES, end - position))
        at = 0
        while len(chunk) - at >= BATCH_HEADER_SIZE:
            header = read_header(chunk, at)
            size = header.batch_length + LOG_OVERHEAD
            if position + at + size > end:
                return
            yield header
            at += size
        if at == 0:
            return  # the file ended early: nothing more to read
        position += at
