"""A leader's checks of what is inside produced batches, and LogAppendTime stamping:
Kafka's LogValidator. ``Log.append_as_leader`` runs them (``validate_records``) before
its batch walk; nothing else validates produce data.

The batch walk (``storage/log_append.py``, Kafka's analyzeAndValidateRecords) refuses
bad batches before writing anything: magic, length and CRC-32C of every batch
(CORRUPT_MESSAGE, including trailing bytes that are not a batch),
``lastOffsetDelta == recordCount - 1``, a batch over ``max.message.bytes``
(MESSAGE_TOO_LARGE), an entry larger than a segment (RECORD_LIST_TOO_LARGE); and as
leader it patches ``baseOffset`` and ``partitionLeaderEpoch`` in place. What the leader
checks here, before that walk:

- produce data holds at least one batch: an empty ``records`` value is INVALID_RECORD
  (Kafka's ProduceRequest.validateRecords);
- record counts, for every batch and every codec: the records are walked by their
  length varints - not decoded - and must number exactly ``recordCount``, end exactly
  at the batch end, and the last one must carry offsetDelta ``recordCount - 1`` (the
  header's ``lastOffsetDelta``); INVALID_RECORD otherwise. The walk is bounded by the
  batch's bytes, never by the count it declares, so a batch claiming 2**31 records
  costs what its bytes cost. A compressed batch is decompressed first, at most
  ``MAX_DECOMPRESSED_BATCH_BYTES``: a batch that would inflate beyond is refused
  (CORRUPT_MESSAGE) before the memory is spent.
- compacted topics (``cleanup.policy`` with ``compact``): every record needs a key, as
  the cleaner keeps the latest record per key; a keyless one is INVALID_RECORD (Kafka's
  "Compacted topic cannot accept message without key").
- LogAppendTime topics: each batch's CRC is checked first (so a corrupt batch is never
  "repaired" by the CRC recomputation), then its timestamps are set to the append time.
- ``compression.type`` other than ``producer``: a batch in another codec is checked (CRC,
  and decompressed), then re-encoded in the topic's codec with the same records,
  timestamps and producer fields, as Kafka's LogValidator does. Batches already in the
  topic's codec, and every batch of a ``producer`` topic, are stored as sent.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

from minibroker.protocol.compression import CODEC_NAMES, Compression, decompress
from minibroker.protocol.errors import CorruptMessageError, InvalidRecordError
from minibroker.protocol.records import (
    Buffer,
    Record,
    accel,
    decode_batch,
    encode_batch,
    iter_headers,
    set_log_append_time,
    validate_batch,
)
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    header_struct,
)
from minibroker.protocol.records.walk import count_records, walk_records


class LeaderChecks(NamedTuple):
    """What a leader's append asks of a topic's config, worked out once per config
    rather than on every produce (``of``)."""

    compact: bool  # records need keys
    codec: Compression | None  # what batches are stored in; None: as the producer sent
    log_append_time: bool

    @classmethod
    def of(cls, cleanup_policy: str, compression_type: str, log_append_time: bool) -> LeaderChecks:
        return cls("compact" in cleanup_policy, stored_codec(compression_type), log_append_time)


def validate_records(records: Buffer, checks: LeaderChecks, append_time_ms: int) -> bytearray:
    """The checks of the module doc, in Kafka's order; returns the batches to append in
    a writable buffer (re-encoded in the topic's codec, stamped with ``append_time_ms``
    when the topic keeps LogAppendTime). Raises the KafkaError for the partition."""
    check_record_counts(records)
    if checks.compact:
        check_keys(records)
    if checks.codec is not None:
        records = recompress(records, checks.codec)
    buf = bytearray(records)
    if checks.log_append_time:
        stamp_log_append_time(buf, append_time_ms)
    return buf


MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024
"""Largest records section a compressed batch may inflate to. Honest batches are far
smaller (max.message.bytes defaults to 1 MiB compressed); a gzip bomb of that size
would otherwise expand to a gigabyte in the broker's memory."""

_COUNT_FIELDS = header_struct("batch_length", "attributes", "record_count")


def check_record_counts(records: Buffer) -> None:
    """Raise InvalidRecordError if ``records`` holds no batch, or a batch's records do
    not number ``recordCount`` with offset deltas 0, 1, ... (see the module doc).
    Torn or malformed batches are left to the Log, which names the problem."""
    if not records:  # also a null ``records`` off the wire
        raise InvalidRecordError("produce data holds no record batch")
    total = len(records)
    speedups = accel.speedups
    if speedups is not None and total >= BATCH_HEADER_SIZE:
        # One uncompressed batch filling ``records`` (a send-and-wait produce): the
        # compiled count, with no Python call around it.
        batch_length, attributes, count = _COUNT_FIELDS.unpack_from(records, 0)
        if (
            batch_length + LOG_OVERHEAD == total
            and not attributes & COMPRESSION_MASK
            and speedups.count_records(records, BATCH_HEADER_SIZE, total) == count
            and count >= 0
        ):
            return
    pos = 0
    unpack = _COUNT_FIELDS.unpack_from
    while total - pos >= BATCH_HEADER_SIZE:
        batch_length, attributes, count = unpack(records, pos)
        size = batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or pos + size > total:
            return  # malformed or torn: Log.append names the problem
        codec = attributes & COMPRESSION_MASK
        if codec == Compression.NONE:
            found = count_records(records, pos + BATCH_HEADER_SIZE, pos + size, pos)
        elif codec == Compression.GZIP:
            section = _inflate(records, pos, size)
            found = count_records(section, 0, len(section), pos)
        elif codec in _OTHER_CODECS:
            section = _decompress(Compression(codec), records, pos, size)
            found = count_records(section, 0, len(section), pos)
        else:
            return  # an unknown codec: Log.append refuses it
        if found != count:
            raise InvalidRecordError(f"batch at {pos} declares {count} records but holds {found}")
        pos += size


def check_keys(records: Buffer) -> None:
    """Raise InvalidRecordError if a record of ``records`` has no key (a compacted
    topic), naming each keyless record of the first batch holding one by its index in
    that batch, as Kafka's LogValidator does. Run after ``check_record_counts``: the
    batches are whole and counted."""
    view = memoryview(records)
    pos = 0
    for pos, header in iter_headers(view):
        if header.is_control or not header.record_count:
            continue
        size = header.size
        codec = header.compression
        if codec == Compression.NONE:
            section = bytes(view[pos + BATCH_HEADER_SIZE : pos + size])
        elif codec == Compression.GZIP:
            section = _inflate(view, pos, size)
        else:
            section = _decompress(codec, view, pos, size)
        try:
            spans = walk_records(section, header.record_count)
        except (ValueError, IndexError, CorruptMessageError):
            raise InvalidRecordError(f"batch at {pos}: its records run past its end") from None
        keyless = [index for index, span in enumerate(spans) if span[2] is None]
        if keyless:
            why = "a compacted topic cannot accept a record without a key"
            raise InvalidRecordError(
                f"batch at {pos}: {why}", record_errors=[(index, why) for index in keyless]
            )


def _inflate(buf: Buffer, pos: int, size: int) -> bytes:
    """The gzip records section of the batch at ``pos``, at most the bound inflated."""
    inflater = zlib.decompressobj(wbits=47)  # 47: gzip or zlib framing, as decode does
    compressed = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + size]
    try:
        section = inflater.decompress(compressed, MAX_DECOMPRESSED_BATCH_BYTES)
    except zlib.error as exc:
        raise CorruptMessageError(f"batch at {pos}: bad gzip data ({exc})") from exc
    if inflater.unconsumed_tail:
        raise CorruptMessageError(
            f"batch at {pos} inflates beyond {MAX_DECOMPRESSED_BATCH_BYTES} bytes"
        )
    if not inflater.eof:
        raise CorruptMessageError(f"batch at {pos}: its gzip data ends early")
    return section


_OTHER_CODECS = frozenset({Compression.SNAPPY, Compression.LZ4, Compression.ZSTD})


def _decompress(codec: Compression, buf: Buffer, pos: int, size: int) -> bytes:
    """The records section of a snappy, lz4 or zstd batch. Unlike gzip these are
    decompressed whole before the bound is checked (the library has no bounded
    streaming call), so the bound limits what is kept, not the transient peak."""
    compressed = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + size])
    try:
        section = decompress(codec, compressed)
    except CorruptMessageError as exc:
        raise CorruptMessageError(f"batch at {pos}: {exc}") from exc
    if len(section) > MAX_DECOMPRESSED_BATCH_BYTES:
        raise CorruptMessageError(
            f"batch at {pos} inflates beyond {MAX_DECOMPRESSED_BATCH_BYTES} bytes"
        )
    return section


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
