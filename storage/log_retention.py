"""Retention: which whole segments of a log may go, oldest first.

How this works. ``delete_old_segments`` (run through the Log by the LogManager's
retention loop) walks the segments from the oldest and removes a prefix, never the
active segment, in three passes: segments whose newest record (or, without timestamps,
whose file) is older than ``retention.ms``; then, while the log is over
``retention.bytes``, the oldest segments whose removal keeps it at or above that size;
then segments wholly below the log start offset (moved by DeleteRecords, or by a
follower following its leader, with ``Log.maybe_increment_log_start_offset``). The
first two apply only with ``cleanup.policy`` delete: a compacted log's records are
removed by the cleaner. No pass removes a segment holding part of an open transaction:
its first offset must stay readable until it ends (a hanging transaction otherwise
loses the records its abort refers to).

After a removal the Log moves its log start offset up to the first remaining segment,
and drops the leader epochs and producer-state snapshots below it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from minibroker.storage.log_config import LogConfig
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_list import SegmentList


class LogRetention:
    """Deletes the segments of ``segments`` that retention (``config()``, the log's
    current config) and the log start offset no longer keep."""

    def __init__(self, segments: SegmentList, config: Callable[[], LogConfig]) -> None:
        self._segments = segments
        self._config = config

    def delete_old_segments(
        self, *, log_start_offset: int, first_unstable_offset: int | None, now_ms: int
    ) -> int:
        """Apply retention.ms, retention.bytes (with cleanup.policy delete) and
        ``log_start_offset``; delete whole segments from the oldest, never the active
        one nor one from ``first_unstable_offset`` on. Returns how many went."""
        config = self._config()
        retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
        if not config.delete:
            retention_ms = retention_bytes = -1  # compact only: the cleaner removes records
        segments = self._segments.segments
        # How many of the oldest segments may go: each pass extends the prefix.
        deletable = 0

        def extend(predicate: Callable[[LogSegment, LogSegment], bool]) -> None:
            nonlocal deletable
            while deletable + 1 < len(segments):
                following = segments[deletable + 1]
                if (
                    first_unstable_offset is not None
                    and following.base_offset > first_unstable_offset
                ):
                    return
                if not predicate(segments[deletable], following):
                    return
                deletable += 1

        if retention_ms >= 0:
            extend(lambda segment, _next: now_ms - _segment_time(segment) > retention_ms)
        if retention_bytes >= 0:
            excess = sum(s.size for s in segments[deletable:]) - retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            extend(over_size)
        extend(lambda _segment, following: following.base_offset <= log_start_offset)
        if deletable:
            self._segments.remove_oldest(deletable)
        return deletable


def _segment_time(segment: LogSegment) -> int:
    """What retention.ms counts from: the newest record, or the file's age without one."""
    largest = segment.largest_timestamp
    if largest >= 0:
        return largest
    return int(os.stat(segment.log_path).st_mtime * 1000)
