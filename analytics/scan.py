"""Scanning one segment slice: batches, their records, and every corrupt or torn region.

How this works: ``walk_slice`` maps the ``.log`` file and walks it batch by batch from
``slice.start`` to ``slice.end``, yielding each whole batch and a ``Corruption`` per bad
region; ``scan_slice`` decodes the batches with the project's own RecordBatch v2 codec
(``protocol.records``), CRC-32C checked, into a ``ScannedBatch`` each. Neither raises
for bad bytes:

- CRC mismatch, bad gzip data, inconsistent counts: the batch's length field is
  still plausible, so that one batch is reported and skipped and the scan goes on
  (unlike broker recovery, which truncates there: an analyst wants to see what is
  still readable after the damage).
- A header that cannot be parsed (bad magic, impossible length): nothing after it can
  be trusted to be a boundary; the rest of the slice is reported as one region.
- A torn tail (a batch or header cut short by a crash mid-write): reported, scan ends.

``record_rows`` / ``scan_rows`` turn that stream into one tuple per row of the views
(column order: ``analytics.schema``): the reference that ``analytics.columns``, which
the data source uses, is tested against row for row. This module does not import Spark.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from minibroker.analytics.isolation import AbortedTransactions
from minibroker.analytics.layout import SegmentSlice
from minibroker.protocol.compression import Compression, decompress
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    ControlRecordType,
    DecodedRecord,
    Header,
    TimestampType,
    control_record_type,
    decode_batch,
    read_header,
    validate_batch,
)

TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
"""Kafka's own names for the two timestamp types (as kafka-dump-log prints them)."""
CONTROL_TYPE_NAMES = {ControlRecordType.COMMIT: "commit", ControlRecordType.ABORT: "abort"}
UNKNOWN_CONTROL_TYPE = "unknown"  # a control record whose key names no known marker


def control_type_name(key: bytes | None) -> str:
    """What a control batch marks, from its (first) record's key."""
    kind = control_record_type(key)
    return UNKNOWN_CONTROL_TYPE if kind is None else CONTROL_TYPE_NAMES[kind]


_EPOCH_AND_TIMESTAMP = struct.Struct(">iq")
_LENGTH = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class TimeRange:
    """Keep records with ``start <= timestamp < end``; None means unbounded."""

    start: int | None = None
    end: int | None = None

    def excludes_batch(self, header: BatchHeader) -> bool:
        """True when no record of the batch can be in range (records are never later
        than maxTimestamp; their earliest is unknown without decoding)."""
        return self.start is not None and header.max_timestamp < self.start

    def contains(self, timestamp: int) -> bool:
        return (self.start is None or timestamp >= self.start) and (
            self.end is None or timestamp < self.end
        )


ALL_TIME = TimeRange()


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch whose CRC matched; ``records`` are those inside the time range;
    ``uncompressed_size`` what the whole batch would take uncompressed."""

    position: int
    header: BatchHeader
    records: list[DecodedRecord]
    uncompressed_size: int


@dataclass(frozen=True, slots=True)
class Corruption:
    """``length`` unreadable bytes at ``position`` of the segment, and why; ``header``
    when the batch header itself still parsed (its offsets tell which records are lost)."""

    position: int
    length: int
    reason: str
    header: BatchHeader | None = None


class BatchAt(NamedTuple):
    """A whole batch whose header parsed, at ``position`` of ``view`` (the mapped
    segment, valid only until the walk moves on); its CRC is not checked yet."""

    view: memoryview
    position: int
    header: BatchHeader


def walk_slice(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[BatchAt | Corruption]:
    """Every whole batch and every corrupt region of ``piece``, in file order: what
    both decoders (records as objects here, as columns in ``analytics.columns``) build on.

    Batches the time range excludes, and those of ``aborted`` transactions (read
    committed, ``analytics.isolation``), are CRC-checked here and, when sound, skipped. A
    file that cannot be opened or mapped (deleted by retention since planning, no
    permission) is one Corruption covering the slice: one bad file never fails the job.
    """
    try:
        f = open(piece.segment, "rb")  # noqa: SIM115 - closed below, after the mapping
    except OSError as exc:
        yield Corruption(piece.start, piece.end - piece.start, f"cannot open: {exc.strerror}")
        return
    with f:
        size = min(piece.end, f.seek(0, 2))
        if size <= piece.start:
            return
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            yield Corruption(piece.start, size - piece.start, f"cannot map: {exc.strerror}")
            return
        with mapped:
            view = memoryview(mapped)[:size]
            try:
                yield from _walk_view(view, piece.start, size, time_range, aborted)
            finally:
                view.release()


def _walk_view(
    view: memoryview,
    pos: int,
    end: int,
    time_range: TimeRange,
    aborted: AbortedTransactions | None,
) -> Iterator[BatchAt | Corruption]:
    while pos < end:
        left = end - pos
        if left < BATCH_HEADER_SIZE:
            yield Corruption(pos, left, f"torn batch header: {left} bytes left of 61")
            return
        try:
            header = read_header(view, pos)
        except CorruptMessageError as exc:
            yield Corruption(pos, left, f"unreadable batch header ({exc.message})")
            return
        if header.size > left:
            reason = f"torn batch: {header.size} bytes long, {left} left"
            yield Corruption(pos, left, reason, header)
            return
        if time_range.excludes_batch(header) or (aborted and aborted.drops(header)):
            try:
                validate_batch(view, pos)  # still CRC-checked: damage is reported
            except CorruptMessageError as exc:
                yield Corruption(pos, header.size, exc.message, header)
        else:
            yield BatchAt(view, pos, header)
        pos += header.size


def scan_slice(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[ScannedBatch | Corruption]:
    """Every batch (records decoded as objects) and every corrupt region of ``piece``,
    in file order (``walk_slice``)."""
    for item in walk_slice(piece, time_range, aborted):
        if isinstance(item, Corruption):
            yield item
            continue
        view, pos, header = item
        try:
            header, records = decode_batch(view, pos)
        except CorruptMessageError as exc:
            yield Corruption(pos, header.size, exc.message, header)
            continue
        if time_range is not ALL_TIME:
            records = [r for r in records if time_range.contains(r.timestamp)]
            if not records:
                continue
        yield ScannedBatch(pos, header, records, _uncompressed_size(view, pos, header))


def _uncompressed_size(view: memoryview, pos: int, header: BatchHeader) -> int:
    """The batch's header plus its records section decompressed (a batch that decoded
    has a section that decompresses)."""
    if header.compression is Compression.NONE:
        return header.size
    section = bytes(view[pos + BATCH_HEADER_SIZE : pos + header.size])
    return BATCH_HEADER_SIZE + len(decompress(header.compression, section))


def record_checksum(leader_epoch: int, record: DecodedRecord) -> int:
    """CRC-32C of what makes a record "the same" on two replicas: the leader epoch it
    was written in, its timestamp, key, value and headers (lengths included, -1 for
    null, so ``b""`` and None differ)."""
    crc = crc32c(_EPOCH_AND_TIMESTAMP.pack(leader_epoch, record.timestamp))
    for part in (record.key, record.value):
        crc = crc32c(_LENGTH.pack(-1 if part is None else len(part)), crc)
        if part:
            crc = crc32c(part, crc)
    return headers_checksum(record.headers, crc)


def headers_checksum(headers: tuple[Header, ...], crc: int) -> int:
    """``record_checksum``'s last part: the CRC-32C ``crc`` continued over ``headers``."""
    for name, value in headers:
        encoded = name.encode("utf-8")
        crc = crc32c(_LENGTH.pack(len(encoded)) + encoded, crc)
        crc = crc32c(_LENGTH.pack(-1 if value is None else len(value)), crc)
        if value:
            crc = crc32c(value, crc)
    return crc


def record_rows(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Rows of the ``records`` view (``analytics.schema.RECORDS``): one per record."""
    for item in scan_slice(piece, time_range, aborted):
        if isinstance(item, Corruption):
            continue
        header = item.header
        ts_type = TIMESTAMP_TYPE_NAMES[header.timestamp_type]
        epoch = header.partition_leader_epoch
        for r in item.records:
            yield (
                piece.topic,
                piece.partition,
                r.offset,
                r.timestamp,
                ts_type,
                r.key,
                r.value,
                [(name, value) for name, value in r.headers],
                epoch,
                header.base_offset,
                piece.segment,
                piece.log_dir,
                piece.broker_id,
            )


def scan_rows(piece: SegmentSlice, time_range: TimeRange = ALL_TIME) -> Iterator[tuple[Any, ...]]:
    """Rows of the ``scan`` view (``analytics.schema.SCAN``): a slim row per record
    (sizes and a checksum instead of the value), one per batch, one per corruption."""
    common = (piece.log_dir, piece.broker_id, piece.topic, piece.partition, piece.segment)
    for item in scan_slice(piece, time_range):
        if isinstance(item, Corruption):
            damaged = item.header
            yield (
                "corruption",
                *common,
                item.position,
                None if damaged is None else damaged.base_offset,
                None if damaged is None else damaged.partition_leader_epoch,
                None,
                None,
                (item.length, item.reason),
            )
            continue
        header = item.header
        epoch = header.partition_leader_epoch
        base = header.base_offset
        for r in item.records:
            record = (
                r.offset,
                r.timestamp,
                r.key,
                -1 if r.value is None else len(r.value),
                len(r.headers),
                record_checksum(epoch, r),
            )
            yield ("record", *common, item.position, base, epoch, record, None, None)
        batch = (
            header.last_offset,
            header.record_count,
            len(item.records),
            header.size,
            header.compression.name.lower(),
            TIMESTAMP_TYPE_NAMES[header.timestamp_type],
            header.max_timestamp,
            header.producer_id,
            header.is_transactional,
            header.is_control,
            header.producer_epoch,
            header.base_sequence,
            item.uncompressed_size,
            control_type_name(item.records[0].key) if header.is_control else None,
        )
        yield ("batch", *common, item.position, base, epoch, None, batch, None)
