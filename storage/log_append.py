"""The batches of one append, walked before any byte is written: Kafka's
analyzeAndValidateRecords and offset assignment, for ``Log.append``.

Each batch is validated (header walk + CRC-32C, size against ``max.message.bytes``).
On the leader its baseOffset is patched in place to the next free offsets; as follower
its offsets are kept but must not go back and must be contiguous within the append.
Producers' batches (on the leader) must hold every offset of their range:
``recordCount == lastOffsetDelta + 1``.
``partitionLeaderEpoch`` is stamped when a leader epoch is given, and each epoch newer
than the latest known is collected with its start offset. Batches with a producer id
go through ``storage.producer_state``: on the leader a retried batch already in the log
ends the walk with its original offsets (nothing is written then).

What is written where (segments, rolls), and the epoch and producer-state updates
that follow a write, stay with the Log.
"""

from __future__ import annotations

from typing import NamedTuple

from minibroker.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    MessageTooLargeError,
)
from minibroker.protocol.records import (
    LOG_OVERHEAD,
    patch_base_offset,
    patch_partition_leader_epoch,
    read_marker,
    validate_batch,
)
from minibroker.storage.producer_append import ProducerAppend
from minibroker.storage.producer_state import ProducerStateManager
from minibroker.storage.time_index import NO_TIMESTAMP


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_batches: int
    valid_bytes: int
    duplicate: bool = False  # a producer's retry of batches already in the log: not written


class AppendedBatches(NamedTuple):
    """What a walk over the batches of one append found (``num_batches`` 0: none)."""

    first_offset: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_batches: int
    epochs: list[tuple[int, int]]
    """(leader epoch, start offset) of each epoch newer than the latest known."""
    producers: ProducerAppend | None
    """The producer-state changes to commit once the batches are written."""


def validate_and_assign(
    view: memoryview,
    *,
    next_offset: int,
    assign_offsets: bool,
    leader_epoch: int | None,
    latest_epoch: int,
    max_message_bytes: int,
    producer_state: ProducerStateManager,
    coordinator: bool = False,
) -> AppendedBatches | LogAppendInfo:
    """Validate every batch in ``view`` and assign (or check) its offsets, patching
    ``view`` in place; ``next_offset`` is the log end. Returns a duplicate's
    LogAppendInfo when the leader finds a producer's retry, else what the batches hold.
    Raises CorruptMessageError or MessageTooLargeError for a bad batch. Control batches
    (transaction markers) are appended by a leader only for a coordinator
    (``coordinator``: WriteTxnMarkers, a transaction's offsets), never from a producer
    (INVALID_RECORD); a coordinator's transactional batches carry no sequence."""
    total = view.nbytes
    first_offset = -1
    max_timestamp, offset_of_max = NO_TIMESTAMP, -1
    epochs: list[tuple[int, int]] = []
    producers = None
    position = 0
    count = 0
    while position < total:
        header = validate_batch(view, position)
        size = header.batch_length + LOG_OVERHEAD
        if size > max_message_bytes:
            raise MessageTooLargeError(f"batch of {size} bytes exceeds {max_message_bytes}")
        if assign_offsets:
            if header.record_count != header.last_offset_delta + 1:
                raise CorruptMessageError(
                    f"batch at {position} has {header.record_count} records but "
                    f"lastOffsetDelta {header.last_offset_delta}"
                )
            base = next_offset
            patch_base_offset(view, position, base)
        else:
            base = header.base_offset
            if base < next_offset or (count and base != next_offset):
                raise CorruptMessageError(f"batch offset {base} does not follow {next_offset - 1}")
        if not count:
            first_offset = base
        if header.is_control:
            if assign_offsets and not coordinator:
                raise InvalidRecordError("control batches are written by the broker only")
            marker = read_marker(view, position)
            if marker is not None and header.producer_id >= 0:
                if producers is None:
                    producers = producer_state.append(
                        validate=assign_offsets, coordinator=coordinator
                    )
                producers.add_marker(header, base, marker)
        elif header.producer_id >= 0:
            if producers is None:
                producers = producer_state.append(validate=assign_offsets, coordinator=coordinator)
            duplicate = producers.add(header, base)
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    NO_TIMESTAMP,
                    -1,
                    1,
                    0,
                    True,
                )
        epoch = header.partition_leader_epoch
        if leader_epoch is not None:
            patch_partition_leader_epoch(view, position, leader_epoch)
            epoch = leader_epoch
        if epoch > latest_epoch:
            latest_epoch = epoch
            epochs.append((epoch, base))
        next_offset = base + header.last_offset_delta + 1
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, next_offset - 1
        position += size
        count += 1
    # tuple.__new__: the NamedTuple's generated __new__ is a Python call per append.
    return tuple.__new__(
        AppendedBatches,
        (first_offset, next_offset, max_timestamp, offset_of_max, count, epochs, producers),
    )
