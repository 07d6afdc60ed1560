"""Recovering a segment after a crash: its batches revalidated, its indexes rebuilt.

How this works. ``LogSegment.recover()`` maps the ``.log`` and hands the bytes here:
``revalidate`` walks them from position 0, validating every batch (header, length,
CRC-32C, contiguous offsets in range), stops at the first batch that fails (a torn
write, flipped bits, zeros from a preallocated tail), and appends to the (reset) offset
and time indexes the entries the sparse rule appends follow would have made. It says
where the valid bytes end, the offsets and timestamps they hold, and why it stopped;
leader epochs it finds newer than ``epochs`` knows are reported to that ``EpochSink``.
The segment then truncates its file there and takes the state as its own.

``LogSegment.sanity_check()`` (storage/segment.py) decides whether a segment needs this.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import validate_batch
from minibroker.storage.offset_index import OffsetIndex
from minibroker.storage.segment_files import MAX_RELATIVE_OFFSET
from minibroker.storage.time_index import NO_TIMESTAMP, TimeIndex


class EpochSink(Protocol):
    """What recovery reports leader epochs to (the LeaderEpochCache)."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int) -> None: ...


class Revalidated(NamedTuple):
    """What ``revalidate`` found: the valid prefix and the state derived from it."""

    valid_bytes: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    bytes_since_last_index_entry: int
    problem: str | None
    """Why the walk stopped before the end (None: every batch was valid)."""


def revalidate(
    view: memoryview,
    base_offset: int,
    *,
    index_interval_bytes: int,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    epochs: EpochSink | None,
) -> Revalidated:
    """Walk the segment bytes ``view`` validating batches and indexing them (into the
    empty ``offset_index`` and ``time_index``) until the first invalid one."""
    position = 0
    total = view.nbytes
    next_offset = base_offset
    max_timestamp, offset_of_max = NO_TIMESTAMP, base_offset
    since_entry = 0
    problem = None
    latest_epoch = epochs.latest_epoch if epochs is not None else 0
    while position < total:
        try:
            header = validate_batch(view, position)
        except CorruptMessageError as exc:
            problem = str(exc)  # names the batch by its file position
            break
        last = header.base_offset + header.last_offset_delta
        if header.base_offset != next_offset or last - base_offset > MAX_RELATIVE_OFFSET:
            # baseOffset is outside the CRC: contiguity is its only check
            problem = (
                f"batch at {position} has offsets {header.base_offset}..{last}, "
                f"expected to start at {next_offset}"
            )
            break
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, last
        if since_entry > index_interval_bytes:
            offset_index.append(last, position)
            time_index.maybe_append(max_timestamp, offset_of_max)
            since_entry = 0
        since_entry += header.size
        if epochs is not None and header.partition_leader_epoch > latest_epoch:
            latest_epoch = header.partition_leader_epoch
            epochs.assign(latest_epoch, header.base_offset)
        next_offset = last + 1
        position += header.size
    return Revalidated(position, next_offset, max_timestamp, offset_of_max, since_entry, problem)
