"""Segment slices decoded straight into Arrow columns: what the data source hands Spark.

How this works: ``walk_slice`` (``analytics.scan``) finds each whole batch; here its CRC
is checked, its records section decompressed, and one tight loop over the section's
varints appends each record's fields to plain Python lists, one list per column (no
object per record, no row tuples). Whatever is the same for a whole batch (its leader
epoch, base offset, position, the batch row's fields) is added with one ``extend`` per
batch, and whatever is the same for the whole slice (topic, partition, segment, log
dir, broker id) becomes a constant Arrow column at the end. Every ``ARROW_BATCH_ROWS``
rows the lists become one ``pyarrow.RecordBatch`` of ``analytics.schema``'s view, built
column by column in C: Spark's JVM receives columns and never sees a Python row.

The rows, their order and every value are exactly those of ``scan.record_rows`` /
``scan.scan_rows`` (the object-per-record path, kept as the reference the tests hold
this one to), including how corrupt batches are reported: a batch whose records do not
parse is one corruption row with the same reason, and none of its records is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from minibroker.analytics.isolation import AbortedTransactions
from minibroker.analytics.layout import SegmentSlice
from minibroker.analytics.record_section import (
    RecordColumns,
    decode_records,
    records_section,
    time_bounds,
)
from minibroker.analytics.scan import (
    ALL_TIME,
    TIMESTAMP_TYPE_NAMES,
    Corruption,
    TimeRange,
    control_type_name,
    walk_slice,
)
from minibroker.analytics.schema import (
    KIND_BATCH,
    KIND_CORRUPTION,
    KIND_RECORD,
    RECORDS,
    SCAN,
)
from minibroker.protocol.compression import Compression
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    TimestampType,
)
from minibroker.protocol.records.layout import CONTROL_BIT, TIMESTAMP_TYPE_BIT

ARROW_BATCH_ROWS = 8192
"""Rows per Arrow batch handed to Spark (a batch ends at a record batch's end, so it
may be a little longer): amortises per-batch cost; ~8 MiB of 1 KiB values at most."""

RECORDS_ARROW = to_arrow_schema(RECORDS, timezone="UTC")
SCAN_ARROW = to_arrow_schema(SCAN, timezone="UTC")
"""The Arrow schemas exactly as Spark derives them from the views (it checks equality)."""
_SCAN_TYPES = {field.name: field.type for field in SCAN_ARROW}
_BATCH_FIELDS = list(_SCAN_TYPES["batch"])
_PLACEHOLDERS: dict[pa.DataType, object] = {
    pa.int32(): 0,
    pa.int64(): 0,
    pa.string(): "",
    pa.binary(): b"",
    pa.bool_(): False,
}
"""What fills the fields of a null struct (the field types the scan view uses)."""

COMPRESSION_MASK = 0x07  # attributes bits 0-2
COMPRESSION_NAMES = {int(c): c.name.lower() for c in Compression}
_TIMESTAMP_TYPE_NAMES = {
    0: TIMESTAMP_TYPE_NAMES[TimestampType.CREATE_TIME],
    TIMESTAMP_TYPE_BIT: TIMESTAMP_TYPE_NAMES[TimestampType.LOG_APPEND_TIME],
}
"""Batch-row names straight from the attributes bits (no enum per batch)."""


def _struct(
    kind: pa.DataType, children: list[list[Any]], null_rows: list[bool] | None
) -> pa.StructArray:
    fields = list(kind)
    arrays = [pa.array(c, type=f.type) for c, f in zip(children, fields, strict=True)]
    mask = None if null_rows is None else pa.array(null_rows, type=pa.bool_())
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)


def constant_column(value: object, kind: pa.DataType, rows: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=kind), rows)


def slice_columns(
    kind: str, piece: SegmentSlice, types: Mapping[str, pa.DataType], rows: int
) -> list[pa.Array]:
    """The scan and partials views' first columns, the same on every row of a slice:
    row kind, log dir, broker, topic, partition, segment."""
    return [
        constant_column(kind, types["kind"], rows),
        constant_column(piece.log_dir, types["log_dir"], rows),
        constant_column(piece.broker_id, types["broker_id"], rows),
        constant_column(piece.topic, types["topic"], rows),
        constant_column(piece.partition, types["partition"], rows),
        constant_column(piece.segment, types["segment"], rows),
    ]


# --- the records view ----------------------------------------------------------------


def record_batches(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``records`` view of ``piece`` (``analytics.schema.RECORDS``) as Arrow batches."""
    low, high = time_bounds(time_range)
    out = RecordColumns(values=True)
    per_batch: dict[str, list[Any]] = {"timestamp_type": [], "epoch": [], "base": []}
    for item in walk_slice(piece, time_range, aborted):
        if isinstance(item, Corruption):
            continue
        mark = out.mark()
        try:
            header, section = records_section(item.view, item.position)
            kept = decode_records(section, header, low, high, out)
        except CorruptMessageError:
            out.rollback(mark)
            continue
        ts_type = TIMESTAMP_TYPE_NAMES[header.timestamp_type]
        per_batch["timestamp_type"].extend(repeat(ts_type, kept))
        per_batch["epoch"].extend(repeat(header.partition_leader_epoch, kept))
        per_batch["base"].extend(repeat(header.base_offset, kept))
        if len(out.offset) >= ARROW_BATCH_ROWS:
            yield _records_arrow(piece, out, per_batch)
            out = RecordColumns(values=True)
            per_batch = {name: [] for name in per_batch}
    if out.offset:
        yield _records_arrow(piece, out, per_batch)


def _records_arrow(
    piece: SegmentSlice, out: RecordColumns, per_batch: dict[str, list[Any]]
) -> pa.RecordBatch:
    rows = len(out.offset)
    types = {field.name: field.type for field in RECORDS_ARROW}
    header_type = types["headers"]
    header_entries = _struct(header_type.value_type, [out.header_name, out.header_value], None)
    headers = pa.ListArray.from_arrays(
        pa.array(out.header_end, type=pa.int32()), header_entries, type=header_type
    )
    columns = [
        constant_column(piece.topic, types["topic"], rows),
        constant_column(piece.partition, types["partition"], rows),
        pa.array(out.offset, type=types["offset"]),
        pa.array(out.timestamp, type=types["timestamp"]),
        pa.array(per_batch["timestamp_type"], type=types["timestamp_type"]),
        pa.array(out.key, type=types["key"]),
        pa.array(out.value, type=types["value"]),
        headers,
        pa.array(per_batch["epoch"], type=types["leader_epoch"]),
        pa.array(per_batch["base"], type=types["batch_base_offset"]),
        constant_column(piece.segment, types["segment"], rows),
        constant_column(piece.log_dir, types["log_dir"], rows),
        constant_column(piece.broker_id, types["broker_id"], rows),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORDS_ARROW)


# --- the scan view -------------------------------------------------------------------


class ScanRows:
    """The scan view's rows, kept as three blocks (records, batches, corruptions) and
    ``order``: each row's index in the blocks laid end to end, in file order.

    Each block has the struct of its own kind filled and the other two null (their
    fields are constant placeholders that nobody reads), all built by Arrow in C; one
    ``take`` then interleaves the blocks back into file order (a batch's records,
    then its batch row), as ``scan.scan_rows`` yields them.

    The partials view builds fewer rows: without ``record_rows`` the records are still
    decoded into ``records`` (offsets, timestamps, keys, value sizes) but get no row, no
    header count and no checksum; without ``batch_rows`` each decoded batch's header is
    kept in ``batch_headers`` (one append; it is summarised later) instead of a row,
    with its uncompressed size in ``batch_sizes`` and, for a control batch, its marker
    in ``batch_controls`` (None for a data batch)."""

    def __init__(self, record_rows: bool = True, batch_rows: bool = True) -> None:
        self.record_rows = record_rows
        self.batch_rows = batch_rows
        self.records = RecordColumns(values=False, checksums=record_rows)
        self.record_position: list[int] = []
        self.record_base_offset: list[int] = []
        self.record_epoch: list[int] = []
        self.batches: list[tuple[Any, ...]] = []  # position, base offset, epoch, batch fields
        self.batch_headers: list[BatchHeader] = []  # without batch_rows
        self.batch_sizes: list[int] = []  # without batch_rows: uncompressed sizes
        self.batch_controls: list[str | None] = []  # without batch_rows: markers
        self.corruptions: list[Corruption] = []
        self.order: list[tuple[int, int, int]] = []  # (block, first index, rows)

    @property
    def rows(self) -> int:
        """Rows held, counting each decoded record (a row of its own or not)."""
        return len(self.records.offset) + len(self.batches) + len(self.corruptions)

    def add_batch(self, position: int, header: BatchHeader, kept: int, section_size: int) -> None:
        """The rows of a decoded batch: ``kept`` records (already appended to
        ``records``), then the batch's own row; ``section_size`` is its records
        section's, decompressed."""
        if self.record_rows:
            self.order.append((0, len(self.record_position), kept))
            self.record_position.extend(repeat(position, kept))
            self.record_base_offset.extend(repeat(header.base_offset, kept))
            self.record_epoch.extend(repeat(header.partition_leader_epoch, kept))
        attributes = header.attributes
        # A control batch holds one record, the marker: just appended to ``records``.
        control = control_type_name(self.records.key[-kept]) if attributes & CONTROL_BIT else None
        if not self.batch_rows:
            self.batch_headers.append(header)
            self.batch_sizes.append(BATCH_HEADER_SIZE + section_size)
            self.batch_controls.append(control)
            return
        self.order.append((1, len(self.batches), 1))
        self.batches.append(
            (
                position,
                header.base_offset,
                header.partition_leader_epoch,
                header.base_offset + header.last_offset_delta,
                header.record_count,
                kept,
                header.batch_length + LOG_OVERHEAD,
                COMPRESSION_NAMES[attributes & COMPRESSION_MASK],
                _TIMESTAMP_TYPE_NAMES[attributes & TIMESTAMP_TYPE_BIT],
                header.max_timestamp,
                header.producer_id,
                header.is_transactional,
                control is not None,
                header.producer_epoch,
                header.base_sequence,
                BATCH_HEADER_SIZE + section_size,
                control,
            )
        )

    def _batch_columns(self) -> list[list[Any]]:
        """The batch rows as columns: position, base offset, epoch, then the fields."""
        return [[row[i] for row in self.batches] for i in range(3 + len(_BATCH_FIELDS))]

    def add_corruption(self, item: Corruption) -> None:
        self.order.append((2, len(self.corruptions), 1))
        self.corruptions.append(item)

    def to_arrow(self, piece: SegmentSlice) -> pa.RecordBatch:
        """The rows held, in file order."""
        with_records = self.record_rows
        records = self.records if with_records else RecordColumns(values=False)
        batch_columns = self._batch_columns()
        common = [self.record_position, self.record_base_offset, self.record_epoch]
        blocks = [
            self._block(
                piece,
                KIND_RECORD,
                common if with_records else [[], [], []],
                [
                    records.offset,
                    records.timestamp,
                    records.key,
                    records.value_size,
                    records.header_count,
                    records.checksum,
                ],
            ),
            self._block(piece, KIND_BATCH, batch_columns[:3], batch_columns[3:]),
            self._block(
                piece,
                KIND_CORRUPTION,
                [
                    [c.position for c in self.corruptions],
                    [None if c.header is None else c.header.base_offset for c in self.corruptions],
                    [
                        None if c.header is None else c.header.partition_leader_epoch
                        for c in self.corruptions
                    ],
                ],
                [[c.length for c in self.corruptions], [c.reason for c in self.corruptions]],
            ),
        ]
        starts = [0, blocks[0].num_rows, blocks[0].num_rows + blocks[1].num_rows]
        order: list[int] = []
        for block, first, rows in self.order:
            start = starts[block] + first
            order.extend(range(start, start + rows))
        return pa.concat_batches(blocks).take(pa.array(order, type=pa.int64()))

    @staticmethod
    def _block(
        piece: SegmentSlice, kind: str, common: list[list[Any]], fields: list[list[Any]]
    ) -> pa.RecordBatch:
        """Rows of one kind: ``common`` are position, batch base offset and leader epoch,
        ``fields`` those of the kind's struct."""
        rows = len(common[0])
        types = _SCAN_TYPES
        structs = {}
        for name, struct_kind in (
            ("record", KIND_RECORD),
            ("batch", KIND_BATCH),
            ("corruption", KIND_CORRUPTION),
        ):
            if struct_kind == kind:
                structs[name] = _struct(types[name], fields, None)
            else:
                structs[name] = null_struct(types[name], rows)
        columns = [
            *slice_columns(kind, piece, types, rows),
            pa.array(common[0], type=types["position"]),
            pa.array(common[1], type=types["batch_base_offset"]),
            pa.array(common[2], type=types["leader_epoch"]),
            structs["record"],
            structs["batch"],
            structs["corruption"],
        ]
        return pa.RecordBatch.from_arrays(columns, schema=SCAN_ARROW)


def null_struct(kind: pa.DataType, rows: int) -> pa.StructArray:
    """``rows`` nulls of struct type ``kind`` over placeholder (never read) fields."""
    placeholders = [constant_column(_PLACEHOLDERS[f.type], f.type, rows) for f in kind]
    return pa.StructArray.from_arrays(
        placeholders, fields=list(kind), mask=constant_column(True, pa.bool_(), rows)
    )


def scan_batches(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``scan`` view of ``piece`` (``analytics.schema.SCAN``) as Arrow batches."""
    for rows in scan_chunks(piece, time_range, aborted=aborted):
        yield rows.to_arrow(piece)


def scan_chunks(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    record_rows: bool = True,
    batch_rows: bool = True,
    aborted: AbortedTransactions | None = None,
) -> Iterator[ScanRows]:
    """The scan view's rows of ``piece`` as column lists, ``ARROW_BATCH_ROWS`` decoded
    records, batches and corruptions at a time (``ScanRows.to_arrow`` makes one Arrow
    batch of each); ``record_rows`` and ``batch_rows`` as in ``ScanRows``."""
    low, high = time_bounds(time_range)
    rows = ScanRows(record_rows, batch_rows)
    for item in walk_slice(piece, time_range, aborted):
        if isinstance(item, Corruption):
            rows.add_corruption(item)
            continue
        mark = rows.records.mark()
        try:
            header, section = records_section(item.view, item.position)
            kept = decode_records(section, header, low, high, rows.records)
        except CorruptMessageError as exc:
            rows.records.rollback(mark)
            rows.add_corruption(
                Corruption(item.position, item.header.size, exc.message, item.header)
            )
            continue
        if kept:  # none only when the time range dropped every record
            rows.add_batch(item.position, header, kept, len(section))
        if rows.rows >= ARROW_BATCH_ROWS:
            yield rows
            rows = ScanRows(record_rows, batch_rows)
    if rows.rows:
        yield rows


def view_batches(
    kind: str,
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    aborted: AbortedTransactions | None = None,
) -> Iterator[pa.RecordBatch]:
    """``kind``'s view ("records" or "scan", ``analytics.schema.VIEWS``) of ``piece``."""
    if kind == "scan":
        return scan_batches(piece, time_range, aborted)
    return record_batches(piece, time_range, aborted)
