"""Which log the cleaner takes next, the job it gets, and what a cleaning leaves behind.

How this works (Kafka's LogCleanerManager). A log with ``cleanup.policy`` containing
``compact`` has a *first dirty offset*, where its last cleaning ended (from
``cleaner-offset-checkpoint``, one per log dir, Kafka's text format; the log start
when there is none or it lies outside the log), and a *first uncleanable offset*: the
smallest of the active segment's base offset, the base offset of the first dirty
segment with a record younger than ``min.compaction.lag.ms``, and the high watermark
when the owner gives one. Its dirty ratio is the bytes of the segments between the two
over those plus the clean segments before.

``choose`` takes, among logs not being cleaned, the one with the highest ratio above
its ``min.cleanable.dirty.ratio``, or one whose first dirty segment began more than
``max.compaction.lag.ms`` ago (those go first). ``job_for`` describes it for a worker
(storage/cleaner/clean.py); ``finish`` swaps the cleaned groups in, in order
(storage/segment_swap.py), and moves the checkpoint.

Threads: every method runs on the thread that owns the Logs (the broker's event
loop), except ``write_checkpoints``, which only reads a dict copy and writes files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.checkpoint import OffsetCheckpointFile
from minibroker.storage.cleaner.clean import CleanJob, CleanResult, SegmentFile
from minibroker.storage.errors import CorruptCheckpointError
from minibroker.storage.log import Log
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_swap import delete_cleaned_files

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* keys."""

    threads: int = 1
    dedupe_buffer_bytes: int = 128 * 1024 * 1024
    io_bytes_per_second: float = 0.0
    backoff_ms: int = 15_000


@dataclass(frozen=True, slots=True)
class DirtyStats:
    """Where a compacted log stands: what ``choose`` ranks by."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    must_clean: bool
    """A dirty segment is older than max.compaction.lag.ms."""

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass(slots=True)
class PendingClean:
    """A job handed to a worker and what is needed to swap its result in."""

    tp: TopicPartition
    log: Log
    job: CleanJob
    segments: dict[int, LogSegment]
    truncations: int


@dataclass(slots=True)
class CleanerStats:
    max_dirty_percent: float = 0.0
    last_run_end: float | None = None
    """time.monotonic() when the last cleaning finished (None: none yet)."""
    recopy_percent: float = 0.0
    cleanings: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    aborted: int = 0
    last_results: dict[TopicPartition, CleanResult] = field(default_factory=dict)


def segment_mtime_ms(segment: LogSegment) -> int:
    return int(segment.log_path.stat().st_mtime * 1000)


class CleanerManager:
    def __init__(
        self,
        log_dirs: list[Path],
        config: CleanerConfig,
        *,
        clock: Callable[[], int],
        high_watermark: Callable[[TopicPartition], int | None] = lambda _tp: None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.high_watermark = high_watermark
        self.in_progress: set[TopicPartition] = set()
        self.stats = CleanerStats()
        self.checkpoints: dict[TopicPartition, int] = {}
        self._seen: dict[TopicPartition, Log] = {}
        """The Log each checkpoint entry is about: a partition deleted and created again
        (a new Log) starts clean from its log start, not at the old checkpoint."""
        self.dirty: dict[TopicPartition, DirtyStats] = {}
        """The last ``choose`` pass's view of every compacted log (for metrics, CLI)."""
        for log_dir in log_dirs:
            try:
                self.checkpoints.update(OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT).read())
            except (CorruptCheckpointError, OSError) as exc:
                log.warning("%s: %s; cleaning those logs from their start", log_dir, exc)

    # --- choosing --------------------------------------------------------------------

    def dirty_stats(self, tp: TopicPartition, log_: Log, now_ms: int) -> DirtyStats:
        segments = log_.segments
        start, end = log_.log_start_offset, log_.log_end_offset
        first_dirty = self.checkpoints.get(tp, start)
        if not start <= first_dirty <= end:
            first_dirty = start
        uncleanable = segments[-1].base_offset
        hw = self.high_watermark(tp)
        # Never past the last stable offset: an open transaction's records are neither
        # committed nor aborted yet, so none may be compacted away.
        if hw is not None:
            uncleanable = min(uncleanable, log_.last_stable_offset(hw))
        else:
            unstable = log_.producer_state.first_unstable_offset()
            if unstable is not None:
                uncleanable = min(uncleanable, unstable)
        lag = log_.config.min_compaction_lag_ms
        must_clean = False
        max_lag = log_.config.max_compaction_lag_ms
        clean_bytes = cleanable = 0
        for i, segment in enumerate(segments[:-1]):
            following = segments[i + 1].base_offset
            if following <= first_dirty:
                clean_bytes += segment.size
                continue
            if segment.base_offset >= uncleanable:
                break
            if lag > 0 and segment.largest_timestamp > now_ms - lag:
                uncleanable = max(segment.base_offset, first_dirty)
                break
            first_ts = segment.rolling_based_timestamp()
            if first_ts is not None and 0 <= first_ts < now_ms - max_lag:
                must_clean = True
            cleanable += segment.size
        uncleanable = max(uncleanable, first_dirty)
        return DirtyStats(first_dirty, uncleanable, clean_bytes, cleanable, must_clean)

    def choose(self, logs: Mapping[TopicPartition, Log]) -> PendingClean | None:
        """The log to clean next (marked in progress) and its job, or None."""
        now = self.clock()
        best: tuple[tuple[bool, float], TopicPartition, Log, DirtyStats] | None = None
        self.dirty = {}
        for tp, log_ in logs.items():
            if not log_.config.compact:
                continue
            if self._seen.setdefault(tp, log_) is not log_:
                self.checkpoints.pop(tp, None)
                self._seen[tp] = log_
            stats = self.dirty_stats(tp, log_, now)
            self.dirty[tp] = stats
            if tp in self.in_progress or stats.cleanable_bytes == 0:
                continue
            ratio = stats.dirty_ratio
            if not stats.must_clean and ratio <= log_.config.min_cleanable_dirty_ratio:
                continue
            rank = (stats.must_clean, ratio)
            if best is None or rank > best[0]:
                best = (rank, tp, log_, stats)
        ratios = [s.dirty_ratio for s in self.dirty.values()]
        self.stats.max_dirty_percent = 100 * max(ratios, default=0.0)
        if best is None:
            return None
        _, tp, log_, stats = best
        self.in_progress.add(tp)
        return self.job_for(tp, log_, stats)

    def job_for(self, tp: TopicPartition, log_: Log, stats: DirtyStats) -> PendingClean:
        segments = [s for s in log_.segments[:-1] if s.base_offset < stats.first_uncleanable]
        config = log_.config
        job = CleanJob(
            directory=str(log_.dir),
            segments=tuple(
                SegmentFile(s.base_offset, str(s.log_path), s.size, segment_mtime_ms(s))
                for s in segments
            ),
            first_dirty=stats.first_dirty,
            first_uncleanable=stats.first_uncleanable,
            delete_retention_ms=config.delete_retention_ms,
            producer_last_offsets={
                pid: entry.last_offset for pid, entry in log_.producer_state.producers.items()
            },
            aborted=tuple(
                (a.producer_id, a.first_offset, a.last_offset)
                for a in log_.collect_aborted(log_.log_start_offset, stats.first_uncleanable)
            ),
            segment_bytes=config.segment_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            map_bytes=self.config.dedupe_buffer_bytes // max(self.config.threads, 1),
            io_bytes_per_second=self.config.io_bytes_per_second / max(self.config.threads, 1),
        )
        return PendingClean(
            tp, log_, job, {s.base_offset: s for s in segments}, log_.truncation_count
        )

    # --- finishing -------------------------------------------------------------------

    def finish(
        self,
        pending: PendingClean,
        result: CleanResult | None,
        on_step: Callable[[str], None] = lambda _step: None,
    ) -> bool:
        """Swap the cleaned groups in and move the checkpoint; False when the log
        changed under the job (its cleaned files are dropped: the next pass retries)."""
        self.in_progress.discard(pending.tp)
        if result is None:
            self.stats.aborted += 1
            return False
        log_ = pending.log
        swapped = True
        for group in result.groups:
            old = [pending.segments[base] for base in group.old_bases]
            new_base = group.old_bases[0]
            if swapped:
                swapped = (
                    log_.replace_segments(old, new_base, pending.truncations, on_step) is not None
                )
            if not swapped:
                delete_cleaned_files(log_.dir, new_base)
        if not swapped:
            self.stats.aborted += 1
            return False
        self.checkpoints[pending.tp] = result.end_offset
        stats = self.stats
        stats.cleanings += 1
        stats.bytes_read += result.bytes_read
        stats.bytes_written += result.bytes_written
        stats.recopy_percent = (
            100 * result.bytes_written / result.bytes_read if result.bytes_read else 0.0
        )
        stats.last_run_end = time.monotonic()
        stats.last_results[pending.tp] = result
        log.info(
            "%s: cleaned %d bytes into %d (%d of %d records removed) in %.2fs; clean up to %d",
            pending.tp,
            result.bytes_read,
            result.bytes_written,
            result.records_removed,
            result.records_read,
            result.seconds,
            result.end_offset,
        )
        return True

    # --- checkpoints -----------------------------------------------------------------

    def checkpoint_snapshot(
        self, logs: Mapping[TopicPartition, Log]
    ) -> dict[Path, dict[TopicPartition, int]]:
        """Per log dir, the checkpoint entries of its compacted logs (on the loop)."""
        out: dict[Path, dict[TopicPartition, int]] = {}
        for tp, log_ in logs.items():
            offset = self.checkpoints.get(tp)
            if offset is not None and log_.config.compact:
                out.setdefault(log_.dir.parent, {})[tp] = offset
        return out

    @staticmethod
    def write_checkpoints(snapshot: Mapping[Path, Mapping[TopicPartition, int]]) -> None:
        """Write ``cleaner-offset-checkpoint`` files (blocking: a worker thread)."""
        for log_dir, offsets in snapshot.items():
            OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT).write(offsets)
