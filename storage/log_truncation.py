"""Truncation: cutting a log's segments back, from their end or entirely.

How this works. Three callers remove offsets a log holds:

- ``truncate_to``: a follower cutting its log to where it agrees with the leader
  (OffsetForLeaderEpoch), or a replica dropping what it wrote above a high watermark.
  Whole batches go: a batch holding the target goes with it, so the new log end may be
  below the target;
- ``repair_corruption``: after a read or the scrubber found a corrupt batch, the
  segments from there on are revalidated and the log is cut at the first bad batch
  (broker/logdirs/corruption.py re-fetches the rest from the leader);
- ``restart_at``: everything goes and the log restarts empty at an offset (a follower
  whose leader's log starts beyond its end, or a load below the checkpointed log
  start).

Each one bumps the segment list's truncation count. What a cut means for the rest of
the log (the recovery point and the log start pulled down to the new end, the leader
epochs beyond it dropped, the producer state rebuilt, the transactions forgotten) is
the Log's (storage/log.py), which owns this part.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from minibroker.storage.log_config import LogConfig
from minibroker.storage.log_loader import report_truncation
from minibroker.storage.segment_list import SegmentList

# Under the Log's name: a cut made while serving reads alongside the Log's other events.
log = logging.getLogger("minibroker.storage.log")


class LogTruncation:
    """Removes offsets from the end of ``segments``, or all of them; ``config()`` is
    the log's current config (for the index size a cut segment gets)."""

    def __init__(self, segments: SegmentList, config: Callable[[], LogConfig]) -> None:
        self._segments = segments
        self._config = config

    def truncate_to(self, target_offset: int) -> None:
        """Remove every batch holding an offset >= ``target_offset`` (a batch holding it
        goes whole); the first segment starts at or below the target."""
        segments = self._segments
        segments.truncations += 1
        while len(segments.segments) > 1 and segments.bases[-1] > target_offset:
            segments.remove_last()
        active = segments.segments[-1]
        active.resize_indexes(self._config().segment_index_bytes)
        active.truncate_to(target_offset)

    def repair_corruption(self, offset: int) -> int:
        """Revalidate the segments from the one holding ``offset`` (where corruption
        was found) on; truncate at the first bad batch, deleting every later segment.
        Logs each cut at WARNING; returns the bytes removed (0: every batch checked
        out)."""
        segments = self._segments
        index_bytes = self._config().segment_index_bytes
        for i in range(segments.index_for(offset), len(segments.segments)):
            segment = segments.segments[i]
            truncated = segment.recover(index_bytes)
            if i + 1 < len(segments.segments):
                segment.on_become_inactive()
            if not truncated:
                continue
            report_truncation(segment, truncated, None, why="corruption repair")
            removed = truncated
            while len(segments.segments) > i + 1:
                later = segments.segments[-1]
                log.warning(
                    "%s: deleted with its %d bytes (offsets from %d): it follows a corrupt batch",
                    later.log_path,
                    later.size,
                    later.base_offset,
                )
                removed += later.size
                segments.remove_last()
            segments.truncations += 1
            segment.resize_indexes(index_bytes)
            return removed
        return 0

    def restart_at(self, new_offset: int) -> None:
        """Delete every segment; the log restarts empty at ``new_offset``."""
        self._segments.truncations += 1
        self._segments.restart_at(new_offset)
