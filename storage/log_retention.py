"""Retention: which whole segments of a log may go, oldest first.

How this works. ``delete_old_segments`` (run by the LogManager's retention loop) walks
the segments from the oldest and removes a prefix, never the active segment, in three
passes: segments whose newest record (or, without timestamps, whose file) is older
than ``retention.ms``; then, while the log is over ``retention.bytes``, the oldest
segments whose removal keeps it at or above that size; then segments wholly below the
log start offset (moved by DeleteRecords, or by a follower following its leader, with
``maybe_increment_log_start_offset``). The first two apply only with
``cleanup.policy`` delete: a compacted log's records are removed by the cleaner.

After a removal the log start offset moves up to the first remaining segment, and the
leader-epoch cache and the producer-state snapshots below it go too.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from minibroker.protocol.errors import OffsetOutOfRangeError
from minibroker.storage.log_state import LogState
from minibroker.storage.segment import LogSegment


class LogRetention(LogState):
    """Deletes the segments retention and the log start offset no longer keep."""

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms, retention.bytes (with cleanup.policy delete) and the log
        start offset; delete whole segments from the oldest, never the active one.
        Returns how many went."""
        now = self.clock() if now_ms is None else now_ms
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        if not self.config.delete:
            retention_ms = retention_bytes = -1  # compact only: the cleaner removes records
        deleted = 0
        if retention_ms >= 0:
            deleted += self._delete_prefix(
                lambda seg, _next: now - self._segment_time(seg) > retention_ms
            )
        if retention_bytes >= 0:
            excess = self.size - retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_prefix(over_size)
        deleted += self._delete_prefix(
            lambda _seg, following: following.base_offset <= self.log_start_offset
        )
        self.producer_state.remove_expired(now)
        return deleted

    @staticmethod
    def _segment_time(segment: LogSegment) -> int:
        largest = segment.largest_timestamp
        if largest >= 0:
            return largest
        return int(os.stat(segment.log_path).st_mtime * 1000)  # no timestamps: file age

    def _delete_prefix(self, predicate: Callable[[LogSegment, LogSegment], bool]) -> int:
        """Delete leading segments while ``predicate`` holds, never one holding part of
        an open transaction: its first offset must stay readable until it ends (a
        hanging transaction otherwise loses the records its abort refers to)."""
        count = 0
        unstable = self.producer_state.first_unstable_offset()
        while (
            len(self._segments) > 1
            and (unstable is None or self._segments[1].base_offset <= unstable)
            and predicate(self._segments[0], self._segments[1])
        ):
            self._remove_segment(0)
            count += 1
        if count:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            self.producer_state.delete_snapshots_before(self._segments[0].base_offset)
        return count

    def maybe_increment_log_start_offset(self, new_start: int) -> None:
        """Move the log start forward (DeleteRecords, or a follower following its
        leader); whole segments below it go at the next ``delete_old_segments``."""
        if new_start > self.log_end_offset:
            raise OffsetOutOfRangeError(f"log start {new_start} beyond the log end")
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
