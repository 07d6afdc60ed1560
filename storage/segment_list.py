"""The segments of one partition's log: an ordered list, and how a segment is opened,
added and removed.

How this works. ``segments`` is ordered by base offset and never empty once the Log has
loaded; ``bases`` holds the same base offsets (for bisect). Where another thread may
look (``Log.flush`` copies the list) the two are rebound together in one step, so a
reader sees the old list or the new one. A removed segment's files go now, or after
``file.delete.delay.ms`` (renamed ``.deleted`` meanwhile: readers holding its
descriptor keep reading). ``truncations`` counts the cuts of the log's end
(storage/log_truncation.py): a flush, a cleaning or a copy that started before one can
tell that offsets it saw may have changed.

``Log`` (storage/log.py) owns one; so do, through it, the parts that shrink or change the
list: retention (storage/log_retention.py), truncation (storage/log_truncation.py) and
the swap of cleaned segments (storage/segment_swap.py), and the transactions' index
(storage/log_transactions.py) reads it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from pathlib import Path

from minibroker.storage.log_config import Clock, LogConfig
from minibroker.storage.producer_state import ReplayedBatch, iter_segment_headers
from minibroker.storage.segment import LogSegment


class SegmentList:
    """The segments of the log in ``directory``. ``config()`` is the log's current
    config (a topic's config changes under a live log); ``new_dir``: the Log just made
    the directory, so the first segment opened finds no stale file to clear."""

    def __init__(
        self, directory: Path, config: Callable[[], LogConfig], clock: Clock, *, new_dir: bool
    ) -> None:
        self.dir = directory
        self._config = config
        self._clock = clock
        self._new_dir = new_dir
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []
        self.truncations = 0
        self._pending_deletes: list[tuple[int, list[Path]]] = []

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (the log end offset)."""
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self.segments)

    def index_for(self, offset: int) -> int:
        """The index of the segment that holds ``offset`` (the first one below it)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    def headers_from(self, offset: int) -> Iterator[ReplayedBatch]:
        """Headers of every batch from the one holding ``offset`` to the log end (with
        their markers): what the producer state replays."""
        index = self.index_for(offset)
        for segment in self.segments[index:]:
            start = 0
            if segment.base_offset < offset:
                found = segment.translate_offset(offset)
                if found is None:
                    continue
                start = found.position
            for header, marker in iter_segment_headers(segment.read_at, start, segment.size):
                if header.base_offset >= offset:
                    yield header, marker

    # --- changes ---------------------------------------------------------------------

    def open(self, base_offset: int, *, create: bool, file_suffix: str = "") -> LogSegment:
        """The segment at ``base_offset`` in this dir, new (``create``) or as found."""
        config = self._config()
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            created_ms=self._clock(),
            create=create,
            file_suffix=file_suffix,
            clear_stale=not (self._new_dir and not self.segments),
        )

    def add(self, segment: LogSegment) -> None:
        """Append ``segment`` after the last one (its base offset is above theirs)."""
        self.segments.append(segment)
        self.bases.append(segment.base_offset)

    def replace_empty_active(self, base_offset: int) -> LogSegment:
        """Put a new empty segment at ``base_offset`` in place of the empty active one;
        the list is never empty, even for an instant."""
        old = self.segments[-1]
        segment = self.open(base_offset, create=True)
        self.segments[-1], self.bases[-1] = segment, base_offset
        old.delete()
        return segment

    def remove_last(self) -> None:
        """Remove the newest segment (never the only one) and dispose of its files."""
        segment = self.segments.pop()
        self.bases.pop()
        self.dispose(segment)

    def remove_oldest(self, count: int) -> None:
        """Remove the ``count`` oldest segments (never all) and dispose of their files."""
        old = self.segments[:count]
        self.segments, self.bases = self.segments[count:], self.bases[count:]
        for segment in old:
            self.dispose(segment)

    def replace(self, start: int, count: int, segment: LogSegment) -> None:
        """Put ``segment`` in place of the ``count`` segments from index ``start``
        (their files are the caller's), in one step."""
        segments = [*self.segments[:start], segment, *self.segments[start + count :]]
        self.segments, self.bases = segments, [s.base_offset for s in segments]

    def restart_at(self, base_offset: int) -> None:
        """Dispose of every segment; one new empty segment at ``base_offset`` remains."""
        for segment in self.segments:
            self.dispose(segment)  # their files move away before the new one is made
        segment = self.open(base_offset, create=True)
        self.segments, self.bases = [segment], [base_offset]

    def dispose(self, segment: LogSegment) -> None:
        """Delete the files of a segment no longer in the list, now or after
        file.delete.delay.ms (renamed ``.deleted`` meanwhile)."""
        delay = self._config().file_delete_delay_ms
        if delay == 0:
            segment.delete()
            return
        self._pending_deletes.append((self._clock() + delay, segment.rename_to_deleted()))

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files whose file.delete.delay.ms has passed."""
        now = self._clock() if now_ms is None else now_ms
        due = [paths for when, paths in self._pending_deletes if when <= now]
        self._pending_deletes = [(w, p) for w, p in self._pending_deletes if w > now]
        for paths in due:
            for path in paths:
                path.unlink(missing_ok=True)
        return len(due)
