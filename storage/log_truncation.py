"""Truncation: cutting a log back, from its end or entirely.

How this works. Three callers remove offsets a log holds:

- ``truncate_to``: a follower cutting its log to where it agrees with the leader
  (OffsetForLeaderEpoch), or a replica dropping what it wrote above a high watermark.
  Whole batches go: a batch holding the target goes with it, so the new log end may be
  below the target;
- ``repair_corruption``: after a read or the scrubber found a corrupt batch, the
  segments from there on are revalidated and the log is cut at the first bad batch
  (broker/logdirs/corruption.py re-fetches the rest from the leader);
- ``truncate_fully_and_start_at``: everything goes and the log restarts empty at an
  offset (a follower whose leader's log starts beyond its end, or a load below the
  checkpointed log start).

Every one bumps the truncation count, pulls the recovery point and the log start down
to the new log end when they were above it, and drops the leader epochs beyond it;
``truncate_to`` also rebuilds the producer state from the batches that stay.
"""

from __future__ import annotations

import logging

from minibroker.storage.log_loader import report_truncation
from minibroker.storage.log_transactions import LogTransactions

# Under the Log's name: a cut made while serving reads alongside the Log's other events.
log = logging.getLogger("minibroker.storage.log")


class LogTruncation(LogTransactions):
    """Removes offsets from the end of the log, or all of them."""

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every batch holding an offset >= ``target_offset`` (a batch holding it
        goes whole, so the new LEO can be below the target). False if nothing to do."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to negative offset {target_offset}")
        if target_offset >= self.log_end_offset:
            return False
        self._truncations += 1
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        while len(self._segments) > 1 and self._bases[-1] > target_offset:
            self._remove_segment(len(self._segments) - 1)
        active = self._segments[-1]
        active.resize_indexes(self.config.segment_index_bytes)
        active.truncate_to(target_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        completed = self.producer_state.truncate(  # batches above the new end leave the state
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            headers_from=self._batch_headers_from,
        )
        self._forget_unreplicated_from(self.log_end_offset)
        self._transactions_ended(completed, replicated=True)
        return True

    def repair_corruption(self, offset: int) -> int:
        """Revalidate the segments from the one holding ``offset`` (where corruption
        was found) on; truncate the log at the first bad batch, deleting every later
        segment. Logs each cut at WARNING; returns the bytes removed (0: every batch
        checked out). The caller re-fetches what was removed from another replica."""
        index = self._segment_index_for(offset)
        for i in range(index, len(self._segments)):
            segment = self._segments[i]
            truncated = segment.recover(self.config.segment_index_bytes)
            if i + 1 < len(self._segments):
                segment.on_become_inactive()
            if not truncated:
                continue
            report_truncation(segment, truncated, None, why="corruption repair")
            removed = truncated
            while len(self._segments) > i + 1:
                later = self._segments[-1]
                log.warning(
                    "%s: deleted with its %d bytes (offsets from %d): it follows a corrupt batch",
                    later.log_path,
                    later.size,
                    later.base_offset,
                )
                removed += later.size
                self._remove_segment(len(self._segments) - 1)
            self._truncations += 1
            segment.resize_indexes(self.config.segment_index_bytes)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return removed
        return 0

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything; the log restarts empty at ``new_offset``."""
        self._truncations += 1
        old = self._segments
        for segment in old:
            self._dispose(segment)  # their files move away before the new one is made
        segment = self._new_segment(new_offset, create=True)
        # Rebound in one step: a flush in another thread never sees an empty list.
        self._segments, self._bases = [segment], [new_offset]
        self.log_start_offset = new_offset
        self.recovery_point = new_offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.producer_state.clear(new_offset)
        self.unreplicated_txns = []
