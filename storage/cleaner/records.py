"""Records of one batch as the cleaner needs them, without decoding them into objects.

How this works. ``walk_records`` reads only the fields that decide a record's fate:
its bounds, key, offset delta, timestamp delta and whether its value is null (a
tombstone); values and headers are skipped by their lengths. Varints of one and two
bytes (every length, delta and key length of records under 8 KiB) are decoded inline;
longer ones go through ``raw_varint``. A batch the cleaner changes is rebuilt from
slices of the original records section: each record's bytes hold deltas relative to
the batch's baseOffset and baseTimestamp, which are kept, so they are copied as they
are. ``rebuild_batch`` writes the new header (same base offset, lastOffsetDelta,
producer fields, attributes and leader epoch; new record count, max timestamp, length
and CRC), as Kafka's cleaner does; ``empty_batch`` keeps only the header.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from minibroker.protocol.compression import Compression, compress, decompress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD
from minibroker.protocol.records.batch import CONTROL_BIT as CONTROL_BIT
from minibroker.protocol.records.batch import TRANSACTIONAL_BIT as TRANSACTIONAL_BIT
from minibroker.protocol.records.varint import raw_varint

HEADER = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte batch header (protocol/records/batch.py gives the fields)."""
_CRC_START = 21
_CRC_OFFSET = 17
_U32 = struct.Struct(">I")
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08

# Fields of HEADER by index.
F_BASE, F_LENGTH, F_EPOCH, F_MAGIC, F_CRC, F_ATTRIBUTES, F_DELTA = 0, 1, 2, 3, 4, 5, 6
F_BASE_TS, F_MAX_TS, F_PID, F_PEPOCH, F_SEQ, F_COUNT = 7, 8, 9, 10, 11, 12

Span = tuple[int, int, bytes | None, int, int, bool]
"""(start, end, key, offset delta, timestamp delta, value is null) of one record."""


def records_section(buf: bytes, pos: int, fields: tuple[int, ...]) -> tuple[bytes, int, int]:
    """Where the records of the batch at ``pos`` lie: (buffer, start, end). For an
    uncompressed batch that is ``buf`` itself (no copy); else the decompressed section."""
    end = pos + fields[F_LENGTH] + LOG_OVERHEAD
    codec = fields[F_ATTRIBUTES] & _COMPRESSION_MASK
    if codec == Compression.NONE:
        return buf, pos + BATCH_HEADER_SIZE, end
    section = decompress(Compression(codec), buf[pos + BATCH_HEADER_SIZE : end])
    return section, 0, len(section)


def walk_records(section: bytes, count: int, start: int = 0, end: int | None = None) -> list[Span]:
    """The Span of each of the ``count`` records in ``section[start:end]``."""
    spans: list[Span] = []
    append = spans.append
    pos = start
    for _ in range(count):
        first = pos
        n = section[pos]  # length
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        record_end = pos + ((n >> 1) ^ -(n & 1))
        n = section[pos + 1]  # attributes (one byte), then timestampDelta
        if n < 0x80:
            pos += 2
        else:
            n, pos = raw_varint(section, pos + 1)
        timestamp_delta = (n >> 1) ^ -(n & 1)
        n = section[pos]  # offsetDelta
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        offset_delta = (n >> 1) ^ -(n & 1)
        n = section[pos]  # keyLength
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        key: bytes | None = None
        if n != 1:  # zigzag 1 is -1: a null key
            key_end = pos + (n >> 1)
            key = section[pos:key_end]
            pos = key_end
        null_value = section[pos] == 1  # valueLength -1 is the single byte 1
        append((first, record_end, key, offset_delta, timestamp_delta, null_value))
        pos = record_end
    limit = len(section) if end is None else end
    if pos != limit:
        raise ValueError(f"{count} records end at {pos}, the section at {limit}")
    return spans


def map_keys(
    section: bytes,
    start: int,
    end: int,
    base_offset: int,
    keys: list[bytes],
    offsets: list[int],
) -> None:
    """Append the key and offset of each keyed record in ``section[start:end]`` (the
    map pass: ``walk_records`` without the tuples, the fields it does not need skipped).
    Records are walked by their lengths; only one- and two-byte varints are inline."""
    add_key, add_offset = keys.append, offsets.append
    pos = start
    while pos < end:
        n = section[pos]  # length
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        record_end = pos + (n >> 1)
        if section[pos + 1] < 0x80:  # attributes, then timestampDelta (skipped)
            pos += 2
        else:
            pos = raw_varint(section, pos + 1)[1]
        n = section[pos]  # offsetDelta
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        offset = base_offset + ((n >> 1) ^ -(n & 1))
        n = section[pos]  # keyLength
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        if n != 1:
            add_key(section[pos : pos + (n >> 1)])
            add_offset(offset)
        pos = record_end


Kept = tuple[int, int, int]
"""(start, end, timestamp delta) of a record the cleaner keeps."""


def kept_records(
    section: bytes,
    start: int,
    end: int,
    base_offset: int,
    latest: Callable[[bytes, int], int],
    keep_deletes: bool,
) -> tuple[list[Kept], int]:
    """The records of ``section[start:end]`` to keep, and how many there were: keyed,
    at or past their key's latest offset (``latest(key, -1)``), and not tombstones
    unless ``keep_deletes`` (the copy pass's hot loop, inlined like ``map_keys``)."""
    kept: list[Kept] = []
    keep = kept.append
    pos = start
    count = 0
    while pos < end:
        first = pos
        count += 1
        n = section[pos]  # length
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        record_end = pos + (n >> 1)
        n = section[pos + 1]  # attributes, then timestampDelta
        if n < 0x80:
            pos += 2
        else:
            n, pos = raw_varint(section, pos + 1)
        timestamp_delta = (n >> 1) ^ -(n & 1)
        n = section[pos]  # offsetDelta
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        offset = base_offset + ((n >> 1) ^ -(n & 1))
        n = section[pos]  # keyLength
        if n < 0x80:
            pos += 1
        elif section[pos + 1] < 0x80:
            n = (n & 0x7F) | (section[pos + 1] << 7)
            pos += 2
        else:
            n, pos = raw_varint(section, pos)
        if n != 1:  # a keyless record is never kept (Kafka counts it invalid)
            key_end = pos + (n >> 1)
            if offset >= latest(section[pos:key_end], -1) and (
                keep_deletes or section[key_end] != 1  # valueLength -1: a tombstone
            ):
                keep((first, record_end, timestamp_delta))
        pos = record_end
    return kept, count


def _finish(fields: list[int], section: bytes) -> bytes:
    codec = fields[F_ATTRIBUTES] & _COMPRESSION_MASK
    if codec != Compression.NONE:
        section = compress(Compression(codec), section)
    fields[F_LENGTH] = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(section)
    fields[F_CRC] = 0
    header = bytearray(HEADER.pack(*fields))
    crc = crc32c(section, crc32c(memoryview(header)[_CRC_START:]))
    _U32.pack_into(header, _CRC_OFFSET, crc)
    return bytes(header) + section


def rebuild_batch(fields: tuple[int, ...], section: bytes, kept: list[Kept]) -> bytes:
    """The batch holding only the ``kept`` records of ``section`` (see the module doc)."""
    new = list(fields)
    new[F_COUNT] = len(kept)
    if not fields[F_ATTRIBUTES] & _TIMESTAMP_TYPE_BIT:
        new[F_MAX_TS] = fields[F_BASE_TS] + max(k[2] for k in kept)
    return _finish(new, b"".join([section[k[0] : k[1]] for k in kept]))


def gap_batch(first: int, last: int, leader_epoch: int, timestamp: int) -> bytes:
    """An empty batch over offsets ``first``..``last`` whose batches were all removed:
    no records and no producer, so offsets in a cleaned segment stay contiguous."""
    fields = [first, 0, leader_epoch, 2, 0, 0, last - first, timestamp, timestamp, -1, -1, -1, 0]
    return _finish(fields, b"")


def empty_batch(fields: tuple[int, ...]) -> bytes:
    """The header alone, no records: what keeps a producer's last sequence (or the end
    offset of a cleaned group) when every record of the batch is removed."""
    new = list(fields)
    new[F_COUNT] = 0
    new[F_ATTRIBUTES] &= ~_COMPRESSION_MASK  # no records section to compress (as Kafka)
    return _finish(new, b"")
