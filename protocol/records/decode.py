"""Decoding a batch's records: ``decode_batch`` for the broker and tools,
``decode_consumer_records`` for the consumer, ``decode_records`` over a whole buffer.
The record layout is in ``types.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from minibroker.protocol.compression import Compression, decompress
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import accel
from minibroker.protocol.records.batch import (
    BatchHeader,
    iter_headers,
    read_header,
    validate_batch,
)
from minibroker.protocol.records.layout import BATCH_HEADER_SIZE, TIMESTAMP_TYPE_BIT
from minibroker.protocol.records.types import Buffer, ConsumerRecord, DecodedRecord, Header
from minibroker.protocol.records.varint import raw_varint, read_varint


def _decode_section(
    section: Buffer, header: BatchHeader, topic: str | None = None, partition: int = -1
) -> list[Any]:
    """Decode ``record_count`` records from an uncompressed records section: each a
    DecodedRecord, or with a ``topic`` a ConsumerRecord of that topic-partition (built
    directly, not from a DecodedRecord).

    The compiled codec (``accel``) does it when built; it hands anything not plainly
    well formed back to ``_decode_section_python``, which finds the precise error.
    """
    speedups = accel.speedups
    if speedups is not None:
        cls: type[tuple[Any, ...]]
        prefix: tuple[Any, ...]
        suffix: tuple[Any, ...]
        if topic is None:
            cls, prefix, suffix = DecodedRecord, (), ()
        else:
            cls, prefix, suffix = ConsumerRecord, (topic, partition), (header.timestamp_type,)
        records: list[Any] | None = speedups.decode_records(
            section,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp,
            bool(header.attributes & TIMESTAMP_TYPE_BIT),
            header.record_count,
            cls,
            prefix,
            suffix,
        )
        if records is not None:
            return records
    return _decode_section_python(bytes(section), header, topic, partition)


def _decode_section_python(
    section: bytes, header: BatchHeader, topic: str | None = None, partition: int = -1
) -> list[Any]:
    """``_decode_section`` in pure Python: the reference the compiled codec matches.

    This is the consumer's hot loop, so varints of one and two bytes (every count and
    length of records under 8 KiB, timestamp deltas under 8 s) and offset deltas of three
    (batches of up to 1M records) are decoded inline; longer ones go through
    ``raw_varint``. Each inline block computes the raw varint ``n`` and then unzigzags.
    """
    records: list[Any] = []
    timestamp_type = header.timestamp_type
    append = records.append
    new_record = tuple.__new__  # skips NamedTuple.__new__'s argument handling
    size = len(section)
    pos = 0
    log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
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
                n, pos = raw_varint(section, pos)
            # A length that is wrong in any way (negative, past the batch) shows up as
            # the fields not ending at ``end`` or as an IndexError: no check here.
            end = pos + ((n >> 1) ^ -(n & 1))
            # attributes (unused in v2), then timestampDelta (two bytes from 64 ms on)
            n = section[pos + 1]
            if n < 0x80:
                pos += 2
            elif section[pos + 2] < 0x80:
                n = (n & 0x7F) | (section[pos + 2] << 7)
                pos += 3
            else:
                n, pos = raw_varint(section, pos + 1)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            # offsetDelta (three bytes from the 8192nd record of a batch on)
            n = section[pos]
            if n < 0x80:
                pos += 1
            elif section[pos + 1] < 0x80:
                n = (n & 0x7F) | (section[pos + 1] << 7)
                pos += 2
            elif section[pos + 2] < 0x80:
                n = (n & 0x7F) | ((section[pos + 1] & 0x7F) << 7) | (section[pos + 2] << 14)
                pos += 3
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


def _records_section(buf: Buffer, pos: int, verify_crc: bool) -> tuple[BatchHeader, Buffer]:
    """The batch header at ``pos`` and its records section, decompressed: a view into
    ``buf`` when it is ``bytes`` and the batch is not compressed, so that the decoder
    copies only what it keeps (a mutable buffer is copied: a view would pin its size)."""
    if verify_crc:
        header = validate_batch(buf, pos)
    else:
        header = read_header(buf, pos)
        if pos + header.size > len(buf):
            raise CorruptMessageError(f"batch at {pos} is cut short")
    start, stop = pos + BATCH_HEADER_SIZE, pos + header.size
    if isinstance(buf, bytes):
        section: Buffer = memoryview(buf)[start:stop]
    else:
        section = bytes(buf[start:stop])
    if header.compression is not Compression.NONE:
        try:
            section = decompress(header.compression, bytes(section))
        except CorruptMessageError as exc:
            raise CorruptMessageError(f"batch at {pos}: {exc}") from exc
    return header, section


def decode_records(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedRecord]:
    """Every record of every whole batch in ``buf`` (a torn trailing batch is skipped)."""
    for pos, _ in iter_headers(buf):
        yield from decode_batch(buf, pos, verify_crc=verify_crc)[1]
