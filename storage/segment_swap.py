"""Swapping cleaned segments into a log, and finishing an interrupted swap on load.

How this works (Kafka's Log.replaceSegments). The worker leaves a group's new segment
as ``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``), complete and
fsynced. The owner of the Log then, on the thread that owns the Log:

1. checks the old segments are still the log's (no truncation, retention or move
   since the job started); if not, the ``.cleaned`` files are deleted;
2. renames the new files ``.cleaned`` -> ``.swap`` (indexes first, ``.log`` last):
   from here on the swap is decided;
3. renames the old segments' files to ``.deleted`` (they are removed after
   ``file.delete.delay.ms``; descriptors already open on them keep working);
4. renames ``.swap`` -> final names and puts the new segment in the log's segment list
   in place of the old ones, in one assignment (a reader sees the old list or the new).

These steps are ``SegmentSwap.replace_segments``; the Log owns a ``SegmentSwap``
handed its segment list (``Log.replace_segments`` is how the cleaner asks).

A crash (kill -9) at any point leaves one of these, and loading (``complete_swaps``,
before anything else) resolves it as Kafka does:

- ``.cleaned`` files: the swap was not decided; they are deleted and the old segments
  stay (step 1 or 2 not reached);
- a ``<base>.log.swap``: the swap was decided. The swap segment is recovered (its
  batches validated, indexes rebuilt); every other segment file whose base offset
  lies in [base, the swap's next offset) is an old segment it replaces and is
  deleted; then ``.swap`` is renamed away. The cleaner keeps the last batch of every
  group (empty if need be), so the new segment ends exactly where its old ones did.
- ``.deleted`` files are removed by the usual leftover clean-up.

So the log always reads back as the old segments or the new one, never a mix, and a
key's latest record is in whichever it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.log_config import LogConfig
from minibroker.storage.names import parse_segment_file
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_list import SegmentList

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SWAP_STEPS = ("cleaned", "swap", "deleted", "renamed")
"""Where ``replace_segments`` reports progress (the crash tests stop between them)."""


def delete_cleaned_files(directory: Path, base_offset: int) -> None:
    """Remove the ``.cleaned`` files of a group that will not be swapped in."""
    for path in directory.glob(f"{base_offset:020d}.*{CLEANED_SUFFIX}"):
        path.unlink(missing_ok=True)


def complete_swaps(
    directory: Path, open_swap: Callable[[int], LogSegment], max_index_size: int
) -> int:
    """Resolve what an interrupted cleaning left in ``directory`` (see the module doc);
    ``open_swap(base)`` opens ``<base>.*.swap`` files as a segment. Returns the number
    of swaps completed."""
    swaps: list[int] = []
    for path in list(directory.iterdir()):
        name = path.name
        if name.endswith(CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
        elif name.endswith(".log" + SWAP_SUFFIX):
            parsed = parse_segment_file(name.removesuffix(SWAP_SUFFIX))
            if parsed is not None:
                swaps.append(parsed[0])
    for path in list(directory.iterdir()):  # index .swap files without their log
        if path.name.endswith(SWAP_SUFFIX):
            parsed = parse_segment_file(path.name.removesuffix(SWAP_SUFFIX))
            if parsed is None or parsed[0] not in swaps:
                path.unlink(missing_ok=True)
    for base in sorted(swaps):
        segment = open_swap(base)
        try:
            segment.recover(max_index_size)
            end = segment.next_offset
            for path in list(directory.iterdir()):
                parsed = parse_segment_file(path.name)
                if parsed is not None and base <= parsed[0] < end:
                    log.info("%s: replaced by the cleaned segment %s", path, segment.log_path)
                    path.unlink()
            segment.change_file_suffixes(SWAP_SUFFIX, "")
        finally:
            segment.close()
        log.warning(
            "%s: completed the swap of a cleaned segment (offsets %d..%d) a crash interrupted",
            directory.name,
            base,
            end - 1,
        )
    return len(swaps)


class SegmentSwap:
    """Puts a cleaned segment in place of the segments of ``segments`` it was cleaned
    from; ``config()`` is the log's current config (the index size a segment recovered
    here gets)."""

    def __init__(self, segments: SegmentList, config: Callable[[], LogConfig]) -> None:
        self._segments = segments
        self._config = config

    def replace_segments(
        self,
        old: list[LogSegment],
        base_offset: int,
        truncations: int,
        on_step: Callable[[str], None] = lambda _step: None,
    ) -> LogSegment | None:
        """Swap the cleaned segment ``<base_offset>.*.cleaned`` in for the consecutive
        segments ``old`` (the steps, and what a crash between them leaves, are in the
        module doc). None, and the cleaned files deleted, when ``old`` are not all
        still in the log or the log was truncated since ``truncations``.
        ``on_step`` is called after each step (tests stop there)."""
        segments = self._segments
        current = segments.segments
        start = next((i for i, s in enumerate(current) if s is old[0]), -1)
        if (
            start < 0
            or segments.truncations != truncations
            or current[start : start + len(old)] != old
            or start + len(old) >= len(current)  # never the active segment
        ):
            delete_cleaned_files(segments.dir, base_offset)
            return None
        new = segments.open(base_offset, create=False, file_suffix=CLEANED_SUFFIX)
        try:
            new.sanity_check()
        except CorruptIndexError:
            new.recover(self._config().segment_index_bytes)
        on_step("cleaned")
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        on_step("swap")
        for segment in old:
            segments.dispose(segment)
        on_step("deleted")
        new.change_file_suffixes(SWAP_SUFFIX, "")
        on_step("renamed")
        segments.replace(start, len(old), new)
        return new
