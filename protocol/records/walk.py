"""Walking the records of a batch's records section without decoding them into objects:
the record layout (``types.py``) read field by field, for the code that needs only
some of it - the produce validator (counts, keys) and the log cleaner (keys, offsets,
timestamps, tombstones).

How this works. Records are walked by their length varints, so a section is never
trusted past its bytes; only the fields a caller needs are read, values and headers are
skipped by their lengths. This is a hot path (every produce and every cleaned byte
passes here): varints of one and two bytes (every length, delta and key length of
records under 8 KiB) are decoded inline, longer ones go through ``varint.raw_varint``;
each inline block computes the raw varint ``n`` and then unzigzags it. The compiled
codec (``accel``) counts records behind ``count_records`` when it is built; the
decoders that build records (``decode.py``, analytics' columns) walk the same layout.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.protocol.errors import CorruptMessageError, InvalidRecordError
from minibroker.protocol.records import accel
from minibroker.protocol.records.types import Buffer
from minibroker.protocol.records.varint import raw_varint, read_varint

Span = tuple[int, int, bytes | None, int, int, bool]
"""(start, end, key, offset delta, timestamp delta, value is null) of one record."""


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


def count_records(buf: Buffer, start: int, end: int, where: int) -> int:
    """How many records fill ``buf[start:end]`` exactly; raises InvalidRecordError
    when they do not fill it exactly, or when the last one's offsetDelta is not its
    index (what the header's lastOffsetDelta must match). ``where`` names the batch.

    The hot loop of produce validation walks record lengths only: one- and two-byte
    varints (records up to 8 KiB) are decoded inline, longer ones by read_varint.
    Only the last record's offsetDelta is decoded: checking every record's would cost
    several times the walk (Kafka checks none for uncompressed batches). The compiled
    codec (``accel``) does the same walk when built and leaves to this code any batch
    that fails it, so the error is named here."""
    if (
        accel.speedups is not None
        and (counted := accel.speedups.count_records(buf, start, end)) >= 0
    ):
        return int(counted)
    cursor = start
    found = 0
    last = -1  # where the last record's fields start
    try:
        while cursor < end:
            first = buf[cursor]
            if first < 0x80:
                raw = first
                body = cursor + 1
            else:
                second = buf[cursor + 1]
                if second < 0x80:
                    raw = (first & 0x7F) | (second << 7)
                    body = cursor + 2
                else:
                    raw, body = raw_varint(buf, cursor)
            if raw & 1 or raw == 0:  # zigzag: odd = negative
                raise InvalidRecordError(f"batch at {where} has a record of length <= 0")
            cursor = body + (raw >> 1)
            last = body
            found += 1
        if cursor == end and found:
            # attributes (one byte), timestampDelta, then offsetDelta
            _, at = read_varint(buf, last + 1)
            delta, _ = read_varint(buf, at)
            if delta != found - 1:
                raise InvalidRecordError(
                    f"batch at {where}: its last record has offset delta {delta}, not {found - 1}"
                )
    except (IndexError, CorruptMessageError):
        raise InvalidRecordError(f"batch at {where}: its records run past its end") from None
    if cursor != end:
        raise InvalidRecordError(
            f"batch at {where}: {found} records do not fill its records section exactly"
        )
    return found
