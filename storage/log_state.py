"""What every part of a partition's Log works on: the segment list and the offsets it
spans, the leader-epoch cache and the producer state, and how a segment is opened,
added and removed.

``Log`` (storage/log.py: loading, append, roll, read, flush) is assembled from this
base and one class per way the segment list shrinks or changes: retention
(storage/log_retention.py), truncation (storage/log_truncation.py) and the swap of
cleaned segments (storage/segment_swap.py).

Invariants every part keeps: ``_segments`` is never empty and is ordered by base
offset, ``_bases`` holds the same base offsets (for bisect), and the two are rebound
together where another thread may look (``Log.flush`` snapshots the list). Each
truncation bumps ``_truncations``, so a flush or a cleaning that started before it can
tell that offsets it saw may have changed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.leader_epoch import LeaderEpochCache
from minibroker.storage.log_config import Clock, LogConfig
from minibroker.storage.names import parse_partition_dir
from minibroker.storage.producer_entries import CompletedTxn
from minibroker.storage.producer_state import (
    ProducerStateManager,
    ReplayedBatch,
    iter_segment_headers,
)
from minibroker.storage.segment import LogSegment


class LogOffsetMetadata(NamedTuple):
    """An offset with where its batch lies (what delayed fetches measure bytes with)."""

    offset: int
    segment_base_offset: int
    position: int


class LogState:
    """The state of one partition's log in ``directory`` (created if missing); the
    segments are opened by ``Log``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        log_start_offset: int,
        recovery_point: int,
        clock: Clock,
    ) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        parsed = parse_partition_dir(directory.name)
        self.topic_partition: TopicPartition | None = parsed.tp if parsed else None
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, list[Path]]] = []
        self._truncations = 0  # lets a flush in another thread notice a truncation
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            self.new_dir = False
        else:
            self.new_dir = True
            """The partition dir was made here, empty: loading has nothing to scan, check
            or clear in it (a broker creating thousands of partitions skips four
            directory listings and three unlinks per partition)."""
        self.leader_epoch_cache = LeaderEpochCache(directory, lambda: self.log_end_offset)
        self.producer_state = ProducerStateManager(
            directory,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            empty_dir=self.new_dir,
        )
        self.unreplicated_txns: list[CompletedTxn] = []
        """Transactions whose marker the high watermark has not passed yet, in marker
        order (storage/log_transactions.py)."""

    # --- offsets ---------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    @property
    def truncation_count(self) -> int:
        """How many truncations this log has seen: a copier (the log-dir mover) compares
        it between steps to learn that offsets it already copied may have changed."""
        return self._truncations

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self._segments)

    def _segment_index_for(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _batch_headers_from(self, offset: int) -> Iterator[ReplayedBatch]:
        """Headers of every batch from the one holding ``offset`` to the log end (with
        their markers)."""
        index = self._segment_index_for(offset)
        for segment in self._segments[index:]:
            start = 0
            if segment.base_offset < offset:
                found = segment.translate_offset(offset)
                if found is None:
                    continue
                start = found.position
            for header, marker in iter_segment_headers(segment.read_at, start, segment.size):
                if header.base_offset >= offset:
                    yield header, marker

    # --- the segment list ------------------------------------------------------------

    def _new_segment(self, base_offset: int, *, create: bool, file_suffix: str = "") -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self.clock(),
            create=create,
            file_suffix=file_suffix,
            clear_stale=not (self.new_dir and not self._segments),
        )

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _remove_segment(self, index: int) -> None:
        segment = self._segments.pop(index)
        self._bases.pop(index)
        self._dispose(segment)

    def _dispose(self, segment: LogSegment) -> None:
        """Delete the files of a segment no longer in the list, now or after
        file.delete.delay.ms (renamed ``.deleted`` meanwhile)."""
        if self.config.file_delete_delay_ms == 0:
            segment.delete()
            return
        due = self.clock() + self.config.file_delete_delay_ms
        self._pending_deletes.append((due, segment.rename_to_deleted()))

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files whose file.delete.delay.ms has passed."""
        now = self.clock() if now_ms is None else now_ms
        due = [paths for when, paths in self._pending_deletes if when <= now]
        self._pending_deletes = [(w, p) for w, p in self._pending_deletes if w > now]
        for paths in due:
            for path in paths:
                path.unlink(missing_ok=True)
        return len(due)
