"""Idempotent-producer state of one partition: per producer id, its epoch and last batches.

How this works. Every batch with a producer id (>= 0) carries the producer's epoch and
the sequence number of its first record; its records take the following sequences,
wrapping from 2**31 - 1 to 0. For each producer the partition keeps the epoch and the
metadata of its last ``BATCHES_KEPT`` batches (first/last sequence, first/last offset,
max timestamp). A leader checks each appended batch against it before the write
(``ProducerAppend``, storage/producer_append.py, which lists each check and the error it
answers): a retry of a batch already written is a *duplicate*, answered with its
original offsets and not written again.

A follower and recovery apply the same batches without checks (the leader did them),
so the state follows the log and deduplication holds after a failover.

Snapshots (``<20-digit offset>.snapshot``, storage/producer_snapshot.py gives the bytes)
hold the state as of an offset; batches after it are replayed from the log on load.

The manager owns two collaborators: ``state``, the entries themselves
(storage/producer_entries.py's ``PartitionProducers``, which the leader's checks in
storage/producer_append.py apply an append to), and ``snapshots``, the partition dir's
snapshot files (storage/producer_snapshot.py); it is itself what changes the state as
a whole (replay, expiry, truncation, loading). Readers get the state through
``producers``, ``last_entry``, ``first_unstable_offset``, ``last_marker_offset`` and
``map_end_offset``, all read-only.

Concurrency: not thread-safe; the Log that owns it calls it from one thread at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TypeAlias

from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Marker,
    read_header,
    read_marker,
)
from minibroker.storage.producer_append import ProducerAppend
from minibroker.storage.producer_entries import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    CompletedTxn,
    PartitionProducers,
    ProducerStateEntry,
)
from minibroker.storage.producer_snapshot import CorruptSnapshotError, ProducerSnapshots

log = logging.getLogger(__name__)

ReplayedBatch: TypeAlias = tuple[BatchHeader, Marker | None]
"""A batch's header as replay reads it, with its marker when it is a control batch."""

REPLAY_CHUNK_BYTES = 1 << 20  # how much of a segment one read brings in while replaying


class ProducerStateManager:
    """The producer state of one partition dir, with its snapshot files.
    ``empty_dir``: the dir was just made, so it holds no snapshot to list."""

    def __init__(
        self,
        directory: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        empty_dir: bool = False,
    ) -> None:
        self.dir = directory
        self.name = directory.name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.state = PartitionProducers(directory.name)
        self.snapshots = ProducerSnapshots(directory, empty_dir=empty_dir)

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Every producer the state holds, by id."""
        return self.state.producers

    @property
    def last_marker_offset(self) -> int:
        """The offset of the newest marker applied (-1: none since loading)."""
        return self.state.last_marker_offset

    @property
    def map_end_offset(self) -> int:
        """The state reflects every producer batch below this offset."""
        return self.state.map_end_offset

    def take_snapshot(self, offset: int | None = None) -> Path:
        """Write the state as of ``offset`` (default: where it ends) durably."""
        state = self.state
        at = state.map_end_offset if offset is None else offset
        return self.snapshots.write(at, state.producers.values())

    def append(self, *, validate: bool, coordinator: bool = False) -> ProducerAppend:
        return ProducerAppend(self.state, validate=validate, coordinator=coordinator)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.state.producers.get(producer_id)

    def replay(self, batches: Iterable[ReplayedBatch], end_offset: int) -> list[CompletedTxn]:
        """Apply batches from the log (as a follower does: no checks); returns the
        transactions their markers ended."""
        pending = self.append(validate=False)
        for header, marker in batches:
            if header.producer_id < 0:
                continue
            if marker is not None:
                pending.add_marker(header, header.base_offset, marker)
            elif not header.is_control:
                pending.add(header, header.base_offset)
        return pending.commit(end_offset)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        for first in self.state.ongoing.values():
            return first
        return None

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers with no batch for ``producer_id_expiration_ms`` and no open
        transaction; how many."""
        limit = self.producer_id_expiration_ms
        producers = self.state.producers
        expired = [
            pid
            for pid, entry in producers.items()
            if now_ms - entry.last_timestamp >= limit and entry.current_txn_first_offset < 0
        ]
        for pid in expired:
            del producers[pid]
        return len(expired)

    def clear(self, offset: int) -> None:
        state = self.state
        state.producers.clear()
        state.ongoing.clear()
        state.map_end_offset = offset

    def truncate(
        self,
        *,
        log_start_offset: int,
        log_end_offset: int,
        headers_from: Callable[[int], Iterator[ReplayedBatch]],
    ) -> list[CompletedTxn]:
        """The log was truncated to ``log_end_offset``: drop what lies above it. When no
        producer's last batch was cut, only the snapshots above the end go; otherwise
        the state is rebuilt (``load``; the transactions its replay ended are returned)."""
        state = self.state
        if state.last_marker_offset < log_end_offset and all(
            entry.last_offset < log_end_offset for entry in state.producers.values()
        ):
            self.snapshots.delete_after(log_end_offset)
            state.map_end_offset = min(state.map_end_offset, log_end_offset)
            return []
        return self.load(
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            headers_from=headers_from,
        )

    def load(
        self,
        *,
        log_start_offset: int,
        log_end_offset: int,
        headers_from: Callable[[int], Iterator[ReplayedBatch]],
    ) -> list[CompletedTxn]:
        """Rebuild the state for a log spanning [start, end): the newest valid snapshot
        at or below the end, then the batches after it (or the whole log); returns the
        transactions the replayed markers ended."""
        snapshots = self.snapshots
        state = self.state
        snapshots.delete_after(log_end_offset)
        state.producers.clear()
        state.ongoing.clear()
        state.last_marker_offset = -1
        replay_from = log_start_offset
        for at in reversed(snapshots.offsets()):
            try:
                entries = snapshots.read(at)
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: ignoring snapshot %s: %s", self.name, snapshots.path(at).name, exc)
                snapshots.delete(at)
                continue
            if at < log_start_offset:
                break  # older than the log: the log itself is the better source
            state.producers = {entry.producer_id: entry for entry in entries}
            open_txns = sorted(
                (e.current_txn_first_offset, e.producer_id)
                for e in entries
                if e.current_txn_first_offset >= 0
            )
            state.ongoing = {pid: first for first, pid in open_txns}
            state.last_marker_offset = at - 1  # a marker may lie anywhere below: assume so
            replay_from = at
            break
        state.map_end_offset = replay_from
        return self.replay(headers_from(replay_from), log_end_offset)


def iter_segment_headers(
    read_at: Callable[[int, int], bytes], start: int, end: int
) -> Iterator[ReplayedBatch]:
    """Headers of the whole batches in a segment file's bytes [start, end), each with
    its marker when it is a control batch, read in chunks (the bytes were validated on
    append or recovery)."""
    position = start
    while end - position >= BATCH_HEADER_SIZE:
        chunk = read_at(position, min(REPLAY_CHUNK_BYTES, end - position))
        at = 0
        while len(chunk) - at >= BATCH_HEADER_SIZE:
            header = read_header(chunk, at)
            size = header.batch_length + LOG_OVERHEAD
            if position + at + size > end:
                return
            marker = None
            if header.is_control and len(chunk) - at >= size:
                marker = read_marker(chunk, at)
            yield header, marker
            at += size
        if at == 0:
            return  # the file ended early: nothing more to read
        position += at
