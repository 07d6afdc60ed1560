"""Encoding records into a batch: the general ``encode_batch`` and the producer's
``encode_values`` fast path. The record layout is in ``types.py``; the header written
in front of the records is ``batch.py``'s ``assemble_batch``.
"""

from __future__ import annotations

from collections.abc import Sequence

from minibroker.protocol.compression import Compression
from minibroker.protocol.records import accel
from minibroker.protocol.records.batch import assemble_batch
from minibroker.protocol.records.layout import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
)
from minibroker.protocol.records.types import Record, TimestampType
from minibroker.protocol.records.varint import (
    CACHED_VARINTS,
    MINUS_ONE,
    VARINT_CACHE_SIZE,
    varint,
)

# attributes 0, timestampDelta 0, offsetDelta d, keyLength -1: what precedes the value
# length in record d of an ``encode_values`` batch, one bytes object per delta.
_VALUE_RECORD_HEADS: list[bytes] = [b"\x00\x00" + v + MINUS_ONE for v in CACHED_VARINTS]
# Largest value whose record length still has a cached varint: the head and the value
# length varint take at most 9 bytes, the header count 1 (length <= value + 10).
_CACHED_VALUE_MAX = VARINT_CACHE_SIZE - 16


def _encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    parts = [b"\x00", varint(timestamp_delta), varint(offset_delta)]
    key = record.key
    if key is None:
        parts.append(MINUS_ONE)
    else:
        parts += (varint(len(key)), key)
    value = record.value
    if value is None:
        parts.append(MINUS_ONE)
    else:
        parts += (varint(len(value)), value)
    parts.append(varint(len(record.headers)))
    for name, header_value in record.headers:
        encoded_name = name.encode()
        parts += (varint(len(encoded_name)), encoded_name)
        if header_value is None:
            parts.append(MINUS_ONE)
        else:
            parts += (varint(len(header_value)), header_value)
    body = b"".join(parts)
    return varint(len(body)) + body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    now_ms: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode ``records`` as one batch. Records without a timestamp get ``now_ms``.

    The compiled codec (``accel``) writes the records section when built; it leaves to
    ``_encode_record`` any input that is not plainly bytes, str and int64 values."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    default_ts = NO_TIMESTAMP if now_ms is None else now_ms
    timestamps = [default_ts if r.timestamp is None else r.timestamp for r in records]
    base_timestamp = timestamps[0]
    speedups = accel.speedups
    section = None
    if speedups is not None:
        section = speedups.encode_records(records, timestamps, base_timestamp, Record)
    if section is None:  # no compiled codec, or an input it leaves to Python
        section = b"".join(
            _encode_record(record, delta, ts - base_timestamp)
            for delta, (record, ts) in enumerate(zip(records, timestamps, strict=True))
        )
    return assemble_batch(
        section,
        count=len(records),
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max(timestamps),
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        transactional=transactional,
        control=control,
    )


def encode_values(
    values: Sequence[bytes],
    *,
    timestamp: int,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """Fast path: one batch of values with null keys, no headers and one timestamp.

    Every record then has the same fixed prefix and suffix; only the offset delta and
    the value length vary. The compiled codec (``accel``) writes the records section in
    one pass when built; otherwise ``_encode_values_python`` does.
    """
    if not values:
        raise ValueError("a record batch holds at least one record")
    speedups = accel.speedups
    section = None if speedups is None else speedups.encode_values(values)
    if section is None:  # no compiled codec, or a value that is not a bytes object
        section = _encode_values_python(values)
    return assemble_batch(
        section,
        count=len(values),
        base_offset=base_offset,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        compression=compression,
        timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        transactional=transactional,
    )


def _encode_values_python(values: Sequence[bytes]) -> bytes:
    """``encode_values``' records section in pure Python: the reference the compiled
    codec matches. This is the producer's hot loop: for batches of up to 16,384 records
    of values under 16 KiB every varint and record head is a cache lookup."""
    parts: list[bytes] = []
    append = parts.append
    # length | attributes 0, timestampDelta 0 | offsetDelta | keyLength -1 | valueLength |
    # value | 0 headers
    if len(values) <= VARINT_CACHE_SIZE and max(map(len, values)) <= _CACHED_VALUE_MAX:
        heads, lengths = _VALUE_RECORD_HEADS, CACHED_VARINTS
        for delta, value in enumerate(values):
            n = len(value)
            head = heads[delta] + lengths[n]
            append(lengths[len(head) + n + 1])
            append(head)
            append(value)
            append(b"\x00")
    else:
        for delta, value in enumerate(values):
            middle = varint(delta) + MINUS_ONE + varint(len(value))
            append(varint(len(middle) + len(value) + 3))
            append(b"\x00\x00" + middle)
            append(value)
            append(b"\x00")
    return b"".join(parts)
