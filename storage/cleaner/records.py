"""Batches as the cleaner rewrites them, without decoding their records into objects.

The records are walked by ``protocol/records/walk.py`` (``map_keys`` for the map pass,
``kept_records`` for the copy pass), which reads only the fields that decide a record's
fate: its bounds, key, offset delta, timestamp delta and whether its value is null (a
tombstone). A batch the cleaner changes is rebuilt from
slices of the original records section: each record's bytes hold deltas relative to
the batch's baseOffset and baseTimestamp, which are kept, so they are copied as they
are. ``rebuild_batch`` writes the new header (same base offset, lastOffsetDelta,
producer fields, attributes and leader epoch; new record count, max timestamp, length
and CRC), as Kafka's cleaner does; ``empty_batch`` keeps only the header.
"""

from __future__ import annotations

from minibroker.protocol.compression import Compression, compress, decompress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC,
    CRC_AT,
    CRC_START,
    F_ATTRIBUTES,
    F_BASE_TS,
    F_COUNT,
    F_CRC,
    F_LENGTH,
    F_MAX_TS,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_BIT,
)
from minibroker.protocol.records.walk import Kept


def records_section(buf: bytes, pos: int, fields: tuple[int, ...]) -> tuple[bytes, int, int]:
    """Where the records of the batch at ``pos`` lie: (buffer, start, end). For an
    uncompressed batch that is ``buf`` itself (no copy); else the decompressed section."""
    end = pos + fields[F_LENGTH] + LOG_OVERHEAD
    codec = fields[F_ATTRIBUTES] & COMPRESSION_MASK
    if codec == Compression.NONE:
        return buf, pos + BATCH_HEADER_SIZE, end
    section = decompress(Compression(codec), buf[pos + BATCH_HEADER_SIZE : end])
    return section, 0, len(section)


def _finish(fields: list[int], section: bytes) -> bytes:
    codec = fields[F_ATTRIBUTES] & COMPRESSION_MASK
    if codec != Compression.NONE:
        section = compress(Compression(codec), section)
    fields[F_LENGTH] = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(section)
    fields[F_CRC] = 0
    header = bytearray(HEADER.pack(*fields))
    crc = crc32c(section, crc32c(memoryview(header)[CRC_START:]))
    CRC.pack_into(header, CRC_AT, crc)
    return bytes(header) + section


def rebuild_batch(fields: tuple[int, ...], section: bytes, kept: list[Kept]) -> bytes:
    """The batch holding only the ``kept`` records of ``section`` (see the module doc)."""
    new = list(fields)
    new[F_COUNT] = len(kept)
    if not fields[F_ATTRIBUTES] & TIMESTAMP_TYPE_BIT:
        new[F_MAX_TS] = fields[F_BASE_TS] + max(k[2] for k in kept)
    return _finish(new, b"".join([section[k[0] : k[1]] for k in kept]))


def gap_batch(first: int, last: int, leader_epoch: int, timestamp: int) -> bytes:
    """An empty batch over offsets ``first``..``last`` whose batches were all removed:
    no records and no producer, so offsets in a cleaned segment stay contiguous."""
    fields = [first, 0, leader_epoch, MAGIC, 0, 0, last - first, timestamp, timestamp]
    fields += [NO_PRODUCER_ID, -1, -1, 0]  # no producer, epoch, sequence; no records
    return _finish(fields, b"")


def empty_batch(fields: tuple[int, ...]) -> bytes:
    """The header alone, no records: what keeps a producer's last sequence (or the end
    offset of a cleaned group) when every record of the batch is removed."""
    new = list(fields)
    new[F_COUNT] = 0
    new[F_ATTRIBUTES] &= ~COMPRESSION_MASK  # no records section to compress (as Kafka)
    return _finish(new, b"")
