"""One record batch's records section decoded into column lists (analytics/columns.py
turns the lists into Arrow columns).

``decode_records`` is the tight loop of the columnar scan: it reads each record's
varints straight from the decompressed section and appends the record's fields to one
list per column of ``RecordColumns`` (the records view keeps values and headers; the
scan view their sizes and checksums), keeping only records inside the time range. A
section that does not parse raises ``CorruptMessageError`` after the caller's mark, so
the caller rolls the batch back whole (``RecordColumns.rollback``).
"""

from __future__ import annotations

import struct
from typing import Any

from minibroker.analytics.scan import TimeRange, headers_checksum
from minibroker.protocol.compression import Compression, decompress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Header,
    read_varint,
    validate_batch,
)
from minibroker.protocol.records.varint import raw_varint

_MIN_TIMESTAMP = -(1 << 63)
_MAX_TIMESTAMP = 1 << 63  # one past the largest int64: every timestamp is below it
_CHECKSUM_PREFIX = struct.Struct(">iqi")  # leader epoch, timestamp, key length
_CHECKSUM_PREFIX_NULL_KEY = struct.Struct(">iqii")  # ... key length -1, value length
_LENGTH = struct.Struct(">i")


class RecordColumns:
    """One column list per field a record contributes, for either view."""

    def __init__(self, values: bool, checksums: bool = True) -> None:
        self.values = values  # records view: values and headers; scan view: sizes, checksums
        self.checksums = checksums  # scan view: False leaves header counts and checksums out
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.value_size: list[int] = []
        self.header_count: list[int] = []
        self.checksum: list[int] = []
        self.header_end: list[int] = [0]  # list offsets into header_name / header_value
        self.header_name: list[str] = []
        self.header_value: list[bytes | None] = []

    def _lists(self) -> list[list[Any]]:
        return [
            self.offset,
            self.timestamp,
            self.key,
            self.value,
            self.value_size,
            self.header_count,
            self.checksum,
            self.header_end,
            self.header_name,
            self.header_value,
        ]

    def mark(self) -> list[int]:
        return [len(column) for column in self._lists()]

    def rollback(self, mark: list[int]) -> None:
        """Drop what was appended since ``mark``: a batch's records are all or nothing."""
        for column, length in zip(self._lists(), mark, strict=True):
            del column[length:]


def time_bounds(time_range: TimeRange) -> tuple[int, int]:
    low = _MIN_TIMESTAMP if time_range.start is None else time_range.start
    high = _MAX_TIMESTAMP if time_range.end is None else time_range.end
    return low, high


def records_section(view: memoryview, pos: int) -> tuple[BatchHeader, bytes]:
    """The CRC-checked header of the batch at ``pos`` and its records, decompressed."""
    header = validate_batch(view, pos)
    section = bytes(view[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression is not Compression.NONE:
        try:
            section = decompress(header.compression, section)
        except CorruptMessageError as exc:
            raise CorruptMessageError(f"batch at {pos}: {exc}") from exc
    return header, section


def decode_records(
    section: bytes, header: BatchHeader, low: int, high: int, out: RecordColumns
) -> int:
    """Append the records of ``section`` with ``low <= timestamp < high`` to ``out``;
    return how many. Raises CorruptMessageError as ``protocol.records.decode_batch``
    does, for the same bytes, after appending part of the batch (``RecordColumns.rollback``).

    The hot loop: varints of one and two bytes (every delta, count and length of a
    record under 8 KiB) are decoded inline, longer ones by ``raw_varint``; each inline
    block computes the raw varint ``n`` and then unzigzags it.
    """
    values = out.values
    checksums = out.checksums
    add_offset = out.offset.append
    add_timestamp = out.timestamp.append
    add_key = out.key.append
    add_value = out.value.append
    add_value_size = out.value_size.append
    add_header_count = out.header_count.append
    add_checksum = out.checksum.append
    add_header_end = out.header_end.append
    header_names = out.header_name
    header_values = out.header_value
    pack_prefix = _CHECKSUM_PREFIX.pack
    pack_null_key = _CHECKSUM_PREFIX_NULL_KEY.pack
    pack_length = _LENGTH.pack
    epoch = header.partition_leader_epoch
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append = header.timestamp_type != 0
    max_timestamp = header.max_timestamp
    size = len(section)
    pos = 0
    kept = 0
    headers: tuple[Header, ...]
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
                n, pos = raw_varint(section, pos)
            end = pos + ((n >> 1) ^ -(n & 1))
            # attributes (unused in v2), then timestampDelta
            n = section[pos + 1]
            if n < 0x80:
                pos += 2
            else:
                n, pos = raw_varint(section, pos + 1)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            # offsetDelta
            n = section[pos]
            if n < 0x80:
                pos += 1
            elif section[pos + 1] < 0x80:
                n = (n & 0x7F) | (section[pos + 1] << 7)
                pos += 2
            else:
                n, pos = raw_varint(section, pos)
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
                    n, pos = raw_varint(section, pos)
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
                n, pos = raw_varint(section, pos)
            if n == 1:
                value = None
            else:
                n = (n >> 1) ^ -(n & 1)
                value = section[pos : pos + n]
                pos += n
            # headers
            if section[pos] == 0:
                pos += 1
                headers = ()
            else:
                header_count, pos = read_varint(section, pos)
                headers, pos = _decode_headers(section, pos, header_count)
            if pos != end:
                raise CorruptMessageError("record length does not match its fields")
            timestamp = max_timestamp if log_append else base_timestamp + timestamp_delta
            if not low <= timestamp < high:
                continue
            kept += 1
            add_offset(base_offset + offset_delta)
            add_timestamp(timestamp)
            add_key(key)
            if values:
                add_value(value)
                if headers:
                    for name, header_value in headers:
                        header_names.append(name)
                        header_values.append(header_value)
                add_header_end(len(header_names))
                continue
            # scan view: the value's size and the record's checksum
            # (scan.record_checksum, computed with as few calls as the bytes allow)
            value_size = -1 if value is None else len(value)
            add_value_size(value_size)
            if not checksums:
                continue
            add_header_count(len(headers))
            # One CRC call over the bytes laid end to end: a call costs more than the copy.
            if key is None:
                prefix = pack_null_key(epoch, timestamp, -1, value_size)
            else:
                prefix = pack_prefix(epoch, timestamp, len(key)) + key + pack_length(value_size)
            crc = crc32c(prefix + value if value else prefix)
            if headers:
                crc = headers_checksum(headers, crc)
            add_checksum(crc)
    except IndexError:
        raise CorruptMessageError("record data ends early") from None
    if pos != size:
        raise CorruptMessageError("bytes left over after the last record of the batch")
    return kept


def _decode_headers(section: bytes, pos: int, count: int) -> tuple[tuple[Header, ...], int]:
    """A record's headers, read and checked as ``protocol.records`` reads them."""
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
