"""RecordBatch v2, byte for byte as Kafka writes it (magic 2, KIP-98).

A batch is a 61-byte big-endian header followed by its records::

    offset  size  field
         0     8  baseOffset              first offset of the batch (assigned by the leader)
         8     4  batchLength             bytes after this field (so batch size = 12 + it)
        12     4  partitionLeaderEpoch    stamped by the leader; outside the CRC
        16     1  magic                   always 2 here
        17     4  crc                     CRC-32C of bytes 21 .. end of batch (unsigned)
        21     2  attributes              bits 0-2 compression, 3 timestamp type,
                                          4 transactional, 5 control
        23     4  lastOffsetDelta         offset of the last record minus baseOffset
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordCount
        61        records (gzip-compressed as a whole when compression is gzip)

Each record is ``length`` (varint) then: attributes (int8, unused), timestampDelta
(varlong), offsetDelta (varint), keyLength (varint, -1 for null) + key, valueLength
(varint, -1 for null) + value, header count (varint), and per header keyLength + UTF-8
key, valueLength (-1 for null) + value. Every varint is zigzag-encoded.

Because baseOffset and partitionLeaderEpoch lie outside the CRC, a broker can assign
offsets and stamp epochs by patching those bytes in place; it never needs to decode or
re-encode records to append or to serve them (``read_header``, ``validate_batch``,
``patch_*``). Setting LogAppendTime changes fields inside the CRC, so that one patch
recomputes it.

This module is sans-IO: bytes in, values out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from enum import IntEnum
from typing import Any, NamedTuple, TypeAlias

from minibroker.protocol.compression import Compression as Compression  # re-exported
from minibroker.protocol.compression import compress, decompress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError

Buffer: TypeAlias = bytes | bytearray | memoryview

MAGIC = 2
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes of a batch not counted by batchLength."""
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21  # attributes: first byte the CRC covers
_CRC_OFFSET = 17
_ATTRIBUTES = struct.Struct(">h")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_LENGTH_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_MAX_TIMESTAMP_OFFSET = 35
_PARTITION_LEADER_EPOCH_OFFSET = 12

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte batch header, decoded. ``size`` is the whole batch in bytes."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


Header: TypeAlias = tuple[str, bytes | None]


class Record(NamedTuple):
    """A record to encode. ``timestamp`` None means "now" (the batch's ``now_ms``).

    NamedTuples rather than dataclasses for both record types: they are made once per
    record on the client's hot paths, and a tuple costs a fraction of a frozen dataclass.
    """

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


class DecodedRecord(NamedTuple):
    """A record read back from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class ConsumerRecord(NamedTuple):
    """A record as a consumer hands it to an application: where it came from, then
    the record, then its batch's timestamp type (client.consumer re-exports it)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: TimestampType


# --- varints -------------------------------------------------------------------------

_VARINT_CACHE_SIZE = 1 << 14  # covers lengths and deltas of small records: no loop at all


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINTS: list[bytes] = [_zigzag_varint(i) for i in range(_VARINT_CACHE_SIZE)]
_MINUS_ONE = _zigzag_varint(-1)
# attributes 0, timestampDelta 0, offsetDelta d, keyLength -1: what precedes the value
# length in record d of an ``encode_values`` batch, one bytes object per delta.
_VALUE_RECORD_HEADS: list[bytes] = [b"\x00\x00" + v + _MINUS_ONE for v in _VARINTS]
# Largest value whose record length still has a cached varint: the head and the value
# length varint take at most 9 bytes, the header count 1 (length <= value + 10).
_CACHED_VALUE_MAX = _VARINT_CACHE_SIZE - 16


def varint(value: int) -> bytes:
    """Zigzag varint encoding of a signed 64-bit integer."""
    if 0 <= value < _VARINT_CACHE_SIZE:
        return _VARINTS[value]
    return _zigzag_varint(value)


def _raw_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """The unsigned (still zigzagged) varint at ``pos``; returns (raw value, next pos)."""
    shift = 0
    n = 0
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise CorruptMessageError("record data ends inside a varint") from None
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise CorruptMessageError("varint longer than 10 bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, position after it)."""
    n, pos = _raw_varint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


# --- headers -------------------------------------------------------------------------


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the batch header at ``pos`` without checking the CRC.

    Raises CorruptMessageError when fewer than 61 bytes remain, the magic is not 2 or the
    batch length cannot hold a header. It does not check that the whole batch is present:
    compare ``pos + header.size`` with the buffer's length.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptMessageError(f"batch header at {pos} is cut short")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptMessageError(f"batch at {pos} has magic {header.magic}, expected 2")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptMessageError(f"batch at {pos} has length {header.batch_length}")
    return header


def validate_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Check the batch at ``pos`` is whole, well-formed and matches its CRC-32C.

    On the append and recovery paths, once per batch: the header is unpacked once and
    checked field by field before the BatchHeader is built.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptMessageError(f"batch header at {pos} is cut short")
    fields = _HEADER.unpack_from(buf, pos)
    # fields: 1 batchLength, 3 magic, 4 crc, 5 attributes, 6 lastOffsetDelta, 12 count
    batch_length = fields[1]
    end = pos + batch_length + LOG_OVERHEAD
    if fields[3] != MAGIC or batch_length < MIN_BATCH_LENGTH:
        read_header(buf, pos)  # raises with the precise reason
    if end > len(buf):
        raise CorruptMessageError(f"batch at {pos} is cut short ({len(buf) - pos} bytes)")
    count = fields[12]
    if count < 1 or fields[6] != count - 1:
        raise CorruptMessageError(
            f"batch at {pos} has {count} records but lastOffsetDelta {fields[6]}"
        )
    if fields[5] & _COMPRESSION_MASK > Compression.ZSTD:
        raise CorruptMessageError(f"batch at {pos} uses an unsupported compression codec")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    actual = crc32c(view[pos + _CRC_START : end])
    if actual != fields[4]:
        raise CorruptMessageError(
            f"batch at {pos} has CRC {fields[4]:#010x}, computed {actual:#010x}"
        )
    return BatchHeader._make(fields)


def iter_headers(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in ``buf[pos:end]``; no CRC check.

    Stops silently before a torn last batch: a caller that must account for every byte
    compares the end of the last batch yielded with ``end``. A malformed header raises.
    """
    stop = len(buf) if end is None else end
    unpack = _HEADER.unpack_from
    make = BatchHeader._make
    while stop - pos >= BATCH_HEADER_SIZE:
        header = make(unpack(buf, pos))
        if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH:
            read_header(buf, pos)  # raises with the precise reason
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > stop:
            return
        yield pos, header
        pos += size


# --- patches (in place) --------------------------------------------------------------


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set baseOffset of the batch at ``pos``. It is outside the CRC."""
    _I64.pack_into(buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Set partitionLeaderEpoch of the batch at ``pos``. It is outside the CRC."""
    _I32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime with ``timestamp_ms`` and fix its CRC.

    As in Kafka, maxTimestamp carries the append time and every record of the batch
    reads back with it; the records themselves are not touched.
    """
    header = read_header(buf, pos)
    _ATTRIBUTES.pack_into(buf, pos + _CRC_START, header.attributes | _TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp_ms)
    with memoryview(buf) as view:
        crc = crc32c(view[pos + _CRC_START : pos + header.size])
    _U32.pack_into(buf, pos + _CRC_OFFSET, crc)


# --- encoding ------------------------------------------------------------------------


def _encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    parts = [b"\x00", varint(timestamp_delta), varint(offset_delta)]
    key = record.key
    if key is None:
        parts.append(_MINUS_ONE)
    else:
        parts += (varint(len(key)), key)
    value = record.value
    if value is None:
        parts.append(_MINUS_ONE)
    else:
        parts += (varint(len(value)), value)
    parts.append(varint(len(record.headers)))
    for name, header_value in record.headers:
        encoded_name = name.encode()
        parts += (varint(len(encoded_name)), encoded_name)
        if header_value is None:
            parts.append(_MINUS_ONE)
        else:
            parts += (varint(len(header_value)), header_value)
    body = b"".join(parts)
    return varint(len(body)) + body


def _assemble(
    records_section: bytes,
    *,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: Compression,
    timestamp_type: TimestampType,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
) -> bytes:
    records_section = compress(compression, records_section)
    attributes = int(compression) | (
        _TIMESTAMP_TYPE_BIT if timestamp_type is TimestampType.LOG_APPEND_TIME else 0
    )
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records_section)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            count - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c(records_section, crc32c(memoryview(header)[_CRC_START:]))
    _U32.pack_into(header, _CRC_OFFSET, crc)
    return bytes(header) + records_section


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
) -> bytes:
    """Encode ``records`` as one batch. Records without a timestamp get ``now_ms``."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    default_ts = NO_TIMESTAMP if now_ms is None else now_ms
    timestamps = [default_ts if r.timestamp is None else r.timestamp for r in records]
    base_timestamp = timestamps[0]
    section = b"".join(
        _encode_record(record, delta, ts - base_timestamp)
        for delta, (record, ts) in enumerate(zip(records, timestamps, strict=True))
    )
    return _assemble(
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
) -> bytes:
    """Fast path: one batch of values with null keys, no headers and one timestamp.

    Every record then has the same fixed prefix and suffix; only the offset delta and
    the value length vary. This is the producer's hot loop: for batches of up to 16,384
    records of values under 16 KiB every varint and record head is a cache lookup.
    """
    if not values:
        raise ValueError("a record batch holds at least one record")
    parts: list[bytes] = []
    append = parts.append
    # length | attributes 0, timestampDelta 0 | offsetDelta | keyLength -1 | valueLength |
    # value | 0 headers
    if len(values) <= _VARINT_CACHE_SIZE and max(map(len, values)) <= _CACHED_VALUE_MAX:
        heads, lengths = _VALUE_RECORD_HEADS, _VARINTS
        for delta, value in enumerate(values):
            n = len(value)
            head = heads[delta] + lengths[n]
            append(lengths[len(head) + n + 1])
            append(head)
            append(value)
            append(b"\x00")
    else:
        for delta, value in enumerate(values):
            middle = varint(delta) + _MINUS_ONE + varint(len(value))
            append(varint(len(middle) + len(value) + 3))
            append(b"\x00\x00" + middle)
            append(value)
            append(b"\x00")
    return _assemble(
        b"".join(parts),
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
    )


# --- decoding ------------------------------------------------------------------------


def _decode_section(
    section: bytes, header: BatchHeader, topic: str | None = None, partition: int = -1
) -> list[Any]:
    """Decode ``record_count`` records from an uncompressed records section: each a
    DecodedRecord, or with a ``topic`` a ConsumerRecord of that topic-partition (built
    directly, not from a DecodedRecord).

    This is the consumer's hot loop, so varints of one and two bytes (every delta, count
    and length of records under 8 KiB) are decoded inline; longer ones go through
    ``_raw_varint``. Each inline block computes the raw varint ``n`` and then unzigzags.
    """
    records: list[Any] = []
    timestamp_type = header.timestamp_type
    append = records.append
    new_record = tuple.__new__  # skips NamedTuple.__new__'s argument handling
    size = len(section)
    pos = 0
    log_append = bool(header.attributes & _TIMESTAMP_TYPE_BIT)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    max_timestamp = header.max_timestamp
    try:
        for _ in range(header.record_count):
            # length
            n = section[pos]
            if n < 0x80:
                pos += 1
            elif section[pos + 1] < 0x80:
                n = (n & 0x7F) | (section[pos + 1] << 7)
                pos += 2
            else:
                n, pos = _raw_varint(section, pos)
            # A length that is wrong in any way (negative, past the batch) shows up as
            # the fields not ending at ``end`` or as an IndexError: no check here.
            end = pos + ((n >> 1) ^ -(n & 1))
            # attributes (unused in v2), then timestampDelta
            n = section[pos + 1]
            if n < 0x80:
                pos += 2
            else:
                n, pos = _raw_varint(section, pos + 1)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            # offsetDelta
            n = section[pos]
            if n < 0x80:
                pos += 1
            elif section[pos + 1] < 0x80:
                n = (n & 0x7F) | (section[pos + 1] << 7)
                pos += 2
            else:
                n, pos = _raw_varint(section, pos)
            offset_delta = (n >> 1) ^ -(n & 1)
            # key (most often null: zigzag -1 is the single byte 1)
            n = section[pos]
            if n == 1:
                key = None
                pos += 1
            else:
                if n < 0x80:
                    pos += 1
                elif section[pos + 1] < 0x80:
                    n = (n & 0x7F) | (section[pos + 1] << 7)
                    pos += 2
                else:
                    n, pos = _raw_varint(section, pos)
                n = (n >> 1) ^ -(n & 1)
                key = section[pos : pos + n]
                pos += n
            # value
            n = section[pos]
            if n < 0x80:
                pos += 1
            elif section[pos + 1] < 0x80:
                n = (n & 0x7F) | (section[pos + 1] << 7)
                pos += 2
            else:
                n, pos = _raw_varint(section, pos)
            if n == 1:
                value = None
            else:
                n = (n >> 1) ^ -(n & 1)
                value = section[pos : pos + n]
                pos += n
            # headers
            headers: tuple[Header, ...] = ()
            if section[pos] == 0:
                pos += 1
            else:
                header_count, pos = read_varint(section, pos)
                headers, pos = _decode_headers(section, pos, header_count)
            if pos != end:
                raise CorruptMessageError("record length does not match its fields")
            offset = base_offset + offset_delta
            timestamp = max_timestamp if log_append else base_timestamp + timestamp_delta
            if topic is None:
                append(new_record(DecodedRecord, (offset, timestamp, key, value, headers)))
            else:
                row = (topic, partition, offset, timestamp, key, value, headers, timestamp_type)
                append(new_record(ConsumerRecord, row))
    except IndexError:
        raise CorruptMessageError("record data ends early") from None
    if pos != size:
        raise CorruptMessageError("bytes left over after the last record of the batch")
    return records


def _decode_headers(section: bytes, pos: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0:
        raise CorruptMessageError("negative header count")
    headers: list[Header] = []
    for _ in range(count):
        name_length, pos = read_varint(section, pos)
        if name_length < 0:
            raise CorruptMessageError("record header with a null key")
        name = section[pos : pos + name_length].decode(errors="replace")
        pos += name_length
        value_length, pos = read_varint(section, pos)
        value = None if value_length < 0 else section[pos : pos + value_length]
        pos += max(value_length, 0)
        headers.append((name, value))
    if pos > len(section):
        raise CorruptMessageError("record header runs past the end of the batch")
    return tuple(headers), pos


def decode_batch(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[DecodedRecord]]:
    """Decode the batch at ``pos`` and all its records (decompressing if needed)."""
    header, section = _records_section(buf, pos, verify_crc)
    return header, _decode_section(section, header)


def decode_consumer_records(
    buf: Buffer, pos: int, topic: str, partition: int, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[ConsumerRecord]]:
    """``decode_batch`` for a consumer: the records as ConsumerRecords of ``topic``
    and ``partition``."""
    header, section = _records_section(buf, pos, verify_crc)
    return header, _decode_section(section, header, topic, partition)


def _records_section(buf: Buffer, pos: int, verify_crc: bool) -> tuple[BatchHeader, bytes]:
    """The batch header at ``pos`` and its records section, decompressed."""
    if verify_crc:
        header = validate_batch(buf, pos)
    else:
        header = read_header(buf, pos)
        if pos + header.size > len(buf):
            raise CorruptMessageError(f"batch at {pos} is cut short")
    section = bytes(buf[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression is not Compression.NONE:
        try:
            section = decompress(header.compression, section)
        except CorruptMessageError as exc:
            raise CorruptMessageError(f"batch at {pos}: {exc}") from exc
    return header, section


def decode_records(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedRecord]:
    """Every record of every whole batch in ``buf`` (a torn trailing batch is skipped)."""
    for pos, _ in iter_headers(buf):
        yield from decode_batch(buf, pos, verify_crc=verify_crc)[1]
