"""Where every byte of a RecordBatch v2 header lies: the one declaration of the format
that the codec, the log, recovery, the cleaner, the produce validator, analytics and the
client read (magic 2, KIP-98, byte for byte as Kafka writes it).

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
        61        records (compressed as a whole when the batch uses a codec)

Each record inside is described in ``types.py`` and walked by ``walk.py``.

Readers that need only some fields ask ``header_struct`` for a ``struct.Struct`` that
unpacks exactly those, in header order, skipping the rest; it is built once, at import,
so a hot loop pays one ``unpack_from`` as it would with a hand-written format string.
Minibroker stores and serves magic 2 only: older message sets (magic 0 and 1) are
refused as corrupt, so they have no layout here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple


class HeaderField(NamedTuple):
    """One field of the batch header: its name (``BatchHeader``'s), where it starts and
    its ``struct`` code (big-endian)."""

    name: str
    offset: int
    code: str


HEADER_FIELDS = (
    HeaderField("base_offset", 0, "q"),
    HeaderField("batch_length", 8, "i"),
    HeaderField("partition_leader_epoch", 12, "i"),
    HeaderField("magic", 16, "b"),
    HeaderField("crc", 17, "I"),
    HeaderField("attributes", 21, "h"),
    HeaderField("last_offset_delta", 23, "i"),
    HeaderField("base_timestamp", 27, "q"),
    HeaderField("max_timestamp", 35, "q"),
    HeaderField("producer_id", 43, "q"),
    HeaderField("producer_epoch", 51, "h"),
    HeaderField("base_sequence", 53, "i"),
    HeaderField("record_count", 57, "i"),
)
_BY_NAME = {field.name: field for field in HEADER_FIELDS}

MAGIC = 2
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes of a batch not counted by batchLength."""
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
"""The smallest batchLength: a header and no records."""

# Field positions, for the readers and patchers that touch one field in place.
PARTITION_LEADER_EPOCH_AT = _BY_NAME["partition_leader_epoch"].offset
CRC_AT = _BY_NAME["crc"].offset
ATTRIBUTES_AT = _BY_NAME["attributes"].offset
LAST_OFFSET_DELTA_AT = _BY_NAME["last_offset_delta"].offset
MAX_TIMESTAMP_AT = _BY_NAME["max_timestamp"].offset
CRC_START = ATTRIBUTES_AT
"""The first byte the CRC covers; it runs to the end of the batch. baseOffset,
batchLength and partitionLeaderEpoch lie before it, so the leader patches them without
recomputing it."""

# Indexes of the fields in a tuple unpacked by ``HEADER`` (a ``BatchHeader``'s order).
F_BASE, F_LENGTH, F_EPOCH, F_MAGIC, F_CRC, F_ATTRIBUTES, F_DELTA = 0, 1, 2, 3, 4, 5, 6
F_BASE_TS, F_MAX_TS, F_PID, F_PEPOCH, F_SEQ, F_COUNT = 7, 8, 9, 10, 11, 12

# The attribute bits.
COMPRESSION_MASK = 0x07
"""Attributes bits 0-2: the codec (protocol.compression.Compression)."""
TIMESTAMP_TYPE_BIT = 0x08
"""Attributes bit 3: set when the batch's timestamps are LogAppendTime."""
TRANSACTIONAL_BIT = 0x10
"""Attributes bit 4: the batch belongs to a transaction."""
CONTROL_BIT = 0x20
"""Attributes bit 5: the batch holds a transaction marker, not data."""

# Values a header carries when the field does not apply.
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


def header_struct(*names: str) -> struct.Struct:
    """A ``struct.Struct`` unpacking the named header fields (in header order) from a
    batch's first byte, skipping the bytes between them."""
    fmt = [">"]
    at = 0
    for name in names:
        field = _BY_NAME[name]
        if field.offset < at:
            raise ValueError(f"{name} is not after the field before it")
        if field.offset > at:
            fmt.append(f"{field.offset - at}x")
        fmt.append(field.code)
        at = field.offset + struct.calcsize(">" + field.code)
    return struct.Struct("".join(fmt))


HEADER = header_struct(*(field.name for field in HEADER_FIELDS))
"""The whole 61-byte header; fields in ``BatchHeader`` order (``F_*`` index them)."""
HEAD = header_struct("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc")
"""The header up to the CRC: what lies outside the bytes the CRC covers."""
CRC_COVERED = struct.Struct(
    ">" + "".join(field.code for field in HEADER_FIELDS if field.offset >= CRC_START)
)
"""attributes .. recordCount: the header's part the CRC covers (the records follow)."""
CRC = struct.Struct(">I")
ATTRIBUTES = struct.Struct(">h")
INT64 = struct.Struct(">q")
INT32 = struct.Struct(">i")
