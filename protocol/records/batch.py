"""The RecordBatch v2 header: reading, validating, patching in place and writing. Where
each byte lies is declared in ``layout.py``.

Because baseOffset and partitionLeaderEpoch lie outside the CRC, a broker can assign
offsets and stamp epochs by patching those bytes in place; it never needs to decode or
re-encode records to append or to serve them (``read_header``, ``validate_batch``,
``patch_*``). Setting LogAppendTime changes fields inside the CRC, so that one patch
recomputes it. ``assemble_batch`` writes a header in front of an encoded records
section; the records themselves are ``encode.py``'s and ``decode.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from minibroker.protocol.compression import Compression, compress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import accel
from minibroker.protocol.records.layout import (
    ATTRIBUTES,
    ATTRIBUTES_AT,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC,
    CRC_AT,
    CRC_COVERED,
    CRC_START,
    HEAD,
    HEADER,
    INT32,
    INT64,
    LOG_OVERHEAD,
    MAGIC,
    MAX_TIMESTAMP_AT,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_AT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)
from minibroker.protocol.records.types import Buffer, TimestampType


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
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


# --- reading and validating ----------------------------------------------------------


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the batch header at ``pos`` without checking the CRC.

    Raises CorruptMessageError when fewer than 61 bytes remain, the magic is not 2 or the
    batch length cannot hold a header. It does not check that the whole batch is present:
    compare ``pos + header.size`` with the buffer's length.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptMessageError(f"batch header at {pos} is cut short")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptMessageError(f"batch at {pos} has magic {header.magic}, expected 2")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptMessageError(f"batch at {pos} has length {header.batch_length}")
    return header


def validate_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Check the batch at ``pos`` is whole, well-formed and matches its CRC-32C.

    A batch may hold fewer records than its offset range (0 <= recordCount <=
    lastOffsetDelta + 1): the log cleaner keeps a batch's baseOffset and
    lastOffsetDelta when it removes records, and keeps an empty batch (no records)
    where a producer's last sequence must survive, as Kafka does. Producers always
    send full batches; the leader's append checks that.

    On the append and recovery paths, once per batch: the header is unpacked once and
    checked field by field before the BatchHeader is built. The compiled codec, when
    built, checks a small batch in one call (a one-record produce's); anything it does
    not pass, the code below judges and names.
    """
    if accel.speedups is not None and (fields := accel.speedups.batch_header(buf, pos)):
        return _new_header(BatchHeader, fields)
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptMessageError(f"batch header at {pos} is cut short")
    fields = HEADER.unpack_from(buf, pos)
    # fields: 1 batchLength, 3 magic, 4 crc, 5 attributes, 6 lastOffsetDelta, 12 count
    batch_length = fields[1]
    end = pos + batch_length + LOG_OVERHEAD
    if fields[3] != MAGIC or batch_length < MIN_BATCH_LENGTH:
        read_header(buf, pos)  # raises with the precise reason
    if end > len(buf):
        raise CorruptMessageError(f"batch at {pos} is cut short ({len(buf) - pos} bytes)")
    count = fields[12]
    if count < 0 or count > fields[6] + 1 or fields[6] < 0:
        raise CorruptMessageError(
            f"batch at {pos} has {count} records but lastOffsetDelta {fields[6]}"
        )
    if fields[5] & COMPRESSION_MASK > Compression.ZSTD:
        raise CorruptMessageError(f"batch at {pos} uses an unsupported compression codec")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    actual = crc32c(view[pos + CRC_START : end])
    if actual != fields[4]:
        raise CorruptMessageError(
            f"batch at {pos} has CRC {fields[4]:#010x}, computed {actual:#010x}"
        )
    return _new_header(BatchHeader, fields)


_new_header = tuple.__new__
"""``BatchHeader._make`` minus its length check (the fields come from the 13-field
header struct): a batch validated per produce saves the call."""


def iter_headers(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in ``buf[pos:end]``; no CRC check.

    Stops silently before a torn last batch: a caller that must account for every byte
    compares the end of the last batch yielded with ``end``. A malformed header raises.
    """
    stop = len(buf) if end is None else end
    unpack = HEADER.unpack_from
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


def holds_no_record(buf: Buffer) -> bool:
    """Whether the whole batches in ``buf`` carry no record and no control marker: the
    empty batches compaction leaves (a producer's last, or one over removed offsets)."""
    return all(not h.record_count and not h.is_control for _, h in iter_headers(buf))


# --- patches (in place) --------------------------------------------------------------


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set baseOffset of the batch at ``pos``. It is outside the CRC."""
    INT64.pack_into(buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Set partitionLeaderEpoch of the batch at ``pos``. It is outside the CRC."""
    INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_AT, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime with ``timestamp_ms`` and fix its CRC.

    As in Kafka, maxTimestamp carries the append time and every record of the batch
    reads back with it; the records themselves are not touched.
    """
    header = read_header(buf, pos)
    ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_AT, header.attributes | TIMESTAMP_TYPE_BIT)
    INT64.pack_into(buf, pos + MAX_TIMESTAMP_AT, timestamp_ms)
    with memoryview(buf) as view:
        crc = crc32c(view[pos + CRC_START : pos + header.size])
    CRC.pack_into(buf, pos + CRC_AT, crc)


# --- writing -------------------------------------------------------------------------


def assemble_batch(
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
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """The batch: a header describing ``records_section`` (``count`` encoded records,
    compressed here with ``compression``), its CRC computed, then the section."""
    if compression is not Compression.NONE:
        records_section = compress(compression, records_section)
    attributes = (
        int(compression)
        | (TIMESTAMP_TYPE_BIT if timestamp_type is TimestampType.LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_BIT if transactional else 0)
        | (CONTROL_BIT if control else 0)
    )
    # The two halves are packed apart, so the CRC is known before the first is: no
    # header buffer patched in place (this runs for every batch a producer sends).
    covered = CRC_COVERED.pack(
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(records_section, crc32c(covered))
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records_section)
    head = HEAD.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, crc)
    return b"".join((head, covered, records_section))
