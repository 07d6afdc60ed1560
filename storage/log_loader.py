"""Opening the segments of a partition dir: clean-up, sanity checks and recovery.

How this works. A cleaned segment whose swap a crash interrupted is swapped in or
discarded first (``storage.segment_swap``). Leftovers of a crash are removed next:
``.tmp`` files (half-written checkpoints), ``.deleted`` segment files (deletion was
already decided) and index files whose ``.log`` is gone. Every ``.log`` then becomes
a LogSegment, oldest first.

Which segments are revalidated (``LogSegment.recover``: every batch's length, CRC and
offsets, truncation at the first bad one, indexes rebuilt):

- after an unclean stop, every segment holding offsets >= the recovery point (the
  point below which everything was fsynced), i.e. the one containing it and all later;
- any other segment whose indexes fail the sanity check (a corrupt index is rebuilt,
  never trusted).

When an unflushed segment had to be truncated, every later segment is deleted: data
after a torn or corrupt batch is not part of the log. Recovered segments are not
fsynced (as in Kafka): the caller keeps the recovery point it had, so a second crash
before the next flush revalidates them again. Leader epochs found
in recovered batches are reported to ``epochs`` (the cache may be older than the data).

Every truncation and every deleted later segment is logged at WARNING (file, offsets,
bytes lost, why) and counted in ``stats`` (storage/corruption.py): data a broker drops
on start-up is never dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from minibroker.storage.corruption import CorruptionStats
from minibroker.storage.errors import CorruptIndexError, CorruptRecordError
from minibroker.storage.names import DELETED_SUFFIX, LOG_SUFFIX, TMP_SUFFIX, parse_segment_file
from minibroker.storage.segment import LogSegment
from minibroker.storage.segment_recovery import EpochSink
from minibroker.storage.segment_swap import complete_swaps

log = logging.getLogger(__name__)


def remove_leftovers(directory: Path) -> list[int]:
    """Delete crash leftovers; return the base offsets of the ``.log`` files, sorted."""
    bases: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if path.name.endswith((TMP_SUFFIX, DELETED_SUFFIX)):
            path.unlink(missing_ok=True)
            continue
        parsed = parse_segment_file(path.name)
        if parsed is None:
            continue
        if parsed[1] == LOG_SUFFIX:
            bases.add(parsed[0])
        else:
            indexes.append((parsed[0], path))
    for base, path in indexes:
        if base not in bases:
            path.unlink(missing_ok=True)
    return sorted(bases)


def load_segments(
    directory: Path,
    open_segment: Callable[[int], LogSegment],
    *,
    recovery_point: int,
    had_clean_shutdown: bool,
    max_index_size: int,
    epochs: EpochSink,
    stats: CorruptionStats | None = None,
    cuts: list[CorruptRecordError] | None = None,
    recovered_bases: list[int] | None = None,
    open_swap: Callable[[int], LogSegment] | None = None,
) -> list[LogSegment]:
    """The segments of ``directory``, checked or recovered (see the module doc). Each
    truncation is also appended to ``cuts``: where it was, from which offset on; the
    base offset of each segment revalidated to ``recovered_bases``.
    ``open_swap(base)`` opens the ``.swap`` files a cleaning interrupted by a crash
    left (storage/segment_swap.py completes that swap first)."""
    if open_swap is not None:
        complete_swaps(directory, open_swap, max_index_size)
    segments = [open_segment(base) for base in remove_leftovers(directory)]
    i = 0
    while i < len(segments):
        segment = segments[i]
        i += 1
        next_base = segments[i].base_offset if i < len(segments) else None
        unflushed = next_base is None or next_base > recovery_point
        if had_clean_shutdown or not unflushed:
            try:
                segment.sanity_check()
                continue
            except CorruptIndexError:
                pass  # rebuilt below
        truncated = segment.recover(max_index_size, epochs)
        if recovered_bases is not None:
            recovered_bases.append(segment.base_offset)
        if truncated:
            report_truncation(segment, truncated, stats)
            if cuts is not None:
                cuts.append(
                    CorruptRecordError(
                        f"{segment.log_path}: recovery truncated it at position "
                        f"{segment.size} ({segment.recovery_problem})",
                        path=str(segment.log_path),
                        position=segment.size,
                        offset=segment.next_offset,
                        lost_from=segment.next_offset,
                    )
                )
        if truncated and unflushed:
            for later in segments[i:]:
                log.warning(
                    "%s: deleted in recovery with its %d bytes (offsets from %d on are lost):"
                    " it follows a truncated segment",
                    later.log_path,
                    later.size,
                    later.base_offset,
                )
                if stats is not None:
                    stats.record_lost_bytes(later.size)
                later.delete()
            del segments[i:]
        if i < len(segments):
            segment.on_become_inactive()
    # What recovery revalidated is not fsynced here (Kafka's LogLoader does not either):
    # the log keeps the checkpointed recovery point (storage/log.py), so a second crash
    # revalidates it again, and the next flush moves the point. Four fsyncs per
    # recovered segment made most of a kill -9 restart with 1,000 written partitions.
    return segments


def report_truncation(
    segment: LogSegment, truncated: int, stats: CorruptionStats | None, *, why: str = "recovery"
) -> None:
    """Log (and with ``stats`` count) what ``segment.recover()`` just cut off."""
    first_lost = segment.next_offset
    lost_until = segment.recovery_lost_until
    span = f"offsets {first_lost}..{lost_until}" if lost_until >= first_lost else "the tail"
    log.warning(
        "%s: %s truncated %d bytes at position %d: %s lost (%s)",
        segment.log_path,
        why,
        truncated,
        segment.size,
        span,
        segment.recovery_problem or "invalid batch",
    )
    if stats is not None:
        stats.record("recovery", truncated_bytes=truncated)
