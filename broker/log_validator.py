"""Produce-side checks the Log does not make, and LogAppendTime stamping.

``storage.Log.append`` already refuses bad batches before writing anything: magic,
length and CRC-32C of every batch (CORRUPT_MESSAGE, including trailing bytes that are
not a batch), a batch over ``max.message.bytes`` (MESSAGE_TOO_LARGE), an entry larger
than a segment (RECORD_LIST_TOO_LARGE); and as leader it patches ``baseOffset`` and
``partitionLeaderEpoch`` in place. What the leader adds here, before that append:

- record counts: for an uncompressed batch the records are walked by their length
  varints - not decoded - and must number ``recordCount`` and end exactly at the batch
  end (CORRUPT_MESSAGE otherwise). A gzip batch would have to be decompressed, so its
  count is trusted to the CRC, as is that of a batch with a huge count
  (``RECORD_COUNT_CHECK_MAX``).
- LogAppendTime topics: each batch's CRC is checked first (so a corrupt batch is never
  "repaired" by the CRC recomputation), then its timestamps are set to the append time.
- ``compression.type`` other than ``producer``: a batch in another codec is checked (CRC,
  and decompressed), then re-encoded in the topic's codec with the same records,
  timestamps and producer fields, as Kafka's LogValidator does. Batches already in the
  topic's codec, and every batch of a ``producer`` topic, are stored as sent.
"""

from __future__ import annotations

import struct

from minibroker.protocol.compression import CODEC_NAMES, Compression
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    Buffer,
    Record,
    decode_batch,
    encode_batch,
    iter_headers,
    read_varint,
    set_log_append_time,
    validate_batch,
)

RECORD_COUNT_CHECK_MAX = 1 << 16
"""Above this many records a batch's count is trusted to its CRC: walking more varints
in Python would cost more than the append itself."""


# batchLength (at 8), attributes (at 21) and recordCount (at 57) of a batch header.
_COUNT_FIELDS = struct.Struct(">8xi9xh34xi")
_COMPRESSION_MASK = 0x07


def check_record_counts(records: Buffer) -> None:
    """Raise CorruptMessageError if an uncompressed batch's records do not fill it
    exactly ``recordCount`` times. Torn or malformed batches are left to the Log."""
    total = len(records)
    pos = 0
    unpack = _COUNT_FIELDS.unpack_from
    while total - pos >= BATCH_HEADER_SIZE:
        batch_length, attributes, count = unpack(records, pos)
        size = batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or pos + size > total:
            return  # malformed or torn: Log.append names the problem
        if not attributes & _COMPRESSION_MASK and count <= RECORD_COUNT_CHECK_MAX:
            _check_batch(records, pos, size, count)
        pos += size


def _check_batch(buf: Buffer, pos: int, size: int, count: int) -> None:
    # The hot loop of produce validation: one- and two-byte varints (records up to
    # 8 KiB) are decoded inline; longer ones go through read_varint.
    cursor = pos + BATCH_HEADER_SIZE
    end = pos + size
    try:
        for _ in range(count):
            first = buf[cursor]
            if first < 0x80:
                raw = first
                cursor += 1
            else:
                second = buf[cursor + 1]
                if second < 0x80:
                    raw = (first & 0x7F) | (second << 7)
                    cursor += 2
                else:
                    raw, cursor = _raw_length(buf, cursor)
            if raw & 1 or raw == 0:  # zigzag: odd = negative
                raise CorruptMessageError(f"batch at {pos} has a record of length <= 0")
            cursor += raw >> 1
            if cursor > end:
                break
    except IndexError:
        raise CorruptMessageError(f"batch at {pos}: its records run past its end") from None
    if cursor != end:
        raise CorruptMessageError(
            f"batch at {pos}: {count} records do not fill its {size} bytes exactly"
        )


def _raw_length(buf: Buffer, cursor: int) -> tuple[int, int]:
    """A long varint, still zigzag-encoded (so the caller's parity test applies)."""
    value, after = read_varint(buf, cursor)
    return (value << 1) ^ (value >> 63), after


def stamp_log_append_time(buf: bytearray, timestamp_ms: int) -> None:
    """Check every batch's CRC, then give each the append time (recomputing its CRC)."""
    pos = 0
    while pos < len(buf):
        header = validate_batch(buf, pos)
        set_log_append_time(buf, pos, timestamp_ms)
        pos += header.size


def stored_codec(compression_type: str) -> Compression | None:
    """The codec a topic's ``compression.type`` stores batches in; None for ``producer``."""
    if compression_type == "producer":
        return None
    return Compression.NONE if compression_type == "uncompressed" else CODEC_NAMES[compression_type]


def recompress(records: Buffer, codec: Compression) -> Buffer:
    """``records`` with every batch not in ``codec`` re-encoded in it (the others, and a
    buffer whose batches all match, are returned untouched). Transactional and control
    batches are stored as sent. A torn or malformed buffer is left to the Log."""
    positions = list(iter_headers(records))
    if all(h.compression is codec or h.is_transactional or h.is_control for _, h in positions):
        return records
    pieces: list[Buffer] = []
    end = 0
    for pos, header in positions:
        end = pos + header.size
        if header.compression is codec or header.is_transactional or header.is_control:
            pieces.append(records[pos:end])
            continue
        _, decoded = decode_batch(records, pos)  # checks the CRC and decompresses
        pieces.append(
            encode_batch(
                [Record(r.value, r.key, r.headers, r.timestamp) for r in decoded],
                base_offset=header.base_offset,
                compression=codec,
                timestamp_type=header.timestamp_type,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                partition_leader_epoch=header.partition_leader_epoch,
            )
        )
    pieces.append(records[end:])  # trailing bytes: the Log refuses them
    return b"".join(pieces)
