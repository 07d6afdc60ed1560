"""The ``partials`` view of a slice: the report job's figures pre-aggregated on the executor.

How this works: the slice is decoded exactly as for the ``scan`` view
(``analytics.columns.scan_chunks``), minus the per-record checksums unless its record
rows are kept. Its corruption rows pass through as they are; its record rows pass
through only when the partition is replicated (found in two or more log dirs: the
divergence report compares those replicas offset by offset). Every record is also
folded, with ``pyarrow.compute`` in C, into one ``group`` row per (key, minute) of the
slice: records, value bytes, first/last offset and timestamp. Every batch is folded
into one ``batch_summary`` row per (compression codec, leader epoch, minute of its max
timestamp) of the slice: batches, records and bytes (on disk and uncompressed) with
their smallest and largest, first and last offset; and into one ``producer_summary``
row per (producer id, producer epoch) (``analytics.producer_summaries``).

Each report sums, takes the min or max of, or counts the distinct keys of these rows
(``analytics.report``), which gives exactly the figures it would compute from the
records and batches themselves: so Spark's JVM reads a few rows per slice and per
minute instead of one row per record and one per batch, and the per-record and
per-batch work runs in the Python workers, in parallel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import add

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from minibroker.analytics.columns import (
    ARROW_BATCH_ROWS,
    COMPRESSION_MASK,
    COMPRESSION_NAMES,
    constant_column,
    null_struct,
    scan_chunks,
    slice_columns,
)
from minibroker.analytics.isolation import AbortedTransactions
from minibroker.analytics.layout import SegmentSlice
from minibroker.analytics.producer_summaries import (
    PRODUCER_ARROW,
    ProducerSummaries,
    header_columns,
)
from minibroker.analytics.scan import ALL_TIME, TimeRange
from minibroker.analytics.schema import (
    KIND_BATCH_SUMMARY,
    KIND_GROUP,
    KIND_PRODUCER_SUMMARY,
    MINUTE_MS,
    PARTIALS,
)
from minibroker.protocol.records import LOG_OVERHEAD, BatchHeader

MERGE_GROUP_ROWS = 1 << 18
"""Group rows a slice's scan holds before folding them together: bounds a task's memory
by its slice's distinct (key, minute) pairs, however long the slice."""

PARTIALS_ARROW = to_arrow_schema(PARTIALS, timezone="UTC")
_TYPES = {field.name: field.type for field in PARTIALS_ARROW}
_GROUP_TYPE = _TYPES["group"]
_SUMMARY_TYPE = _TYPES["batch_summary"]
_PRODUCER_TYPE = PRODUCER_ARROW
_GROUP_KEYS = ["key", "minute"]
_SUMS = [("records", "sum"), ("value_bytes", "sum")]
_GROUP_FIELDS = ["records", "value_bytes", "first_offset", "last_offset", "first_timestamp",
                 "last_timestamp"]  # fmt: skip
_EXTREMES = [
    ("first_offset", "min"),
    ("last_offset", "max"),
    ("first_timestamp", "min"),
    ("last_timestamp", "max"),
]


def replicated_partitions(pieces: Sequence[SegmentSlice]) -> frozenset[tuple[str, int]]:
    """(topic, partition) of every partition that has segments in two or more log dirs."""
    seen: dict[tuple[str, int], set[str]] = {}
    for piece in pieces:
        seen.setdefault((piece.topic, piece.partition), set()).add(piece.log_dir)
    return frozenset(key for key, dirs in seen.items() if len(dirs) > 1)


def _minute(timestamps: pa.Array) -> pa.Array:
    """Start of each timestamp's minute, computed as Spark computes
    ``floor(timestamp / MINUTE_MS) * MINUTE_MS`` (a double division, then floor)."""
    minutes = pc.floor(pc.divide(pc.cast(timestamps, pa.float64()), float(MINUTE_MS)))
    return pc.multiply(pc.cast(minutes, pa.int64()), MINUTE_MS)


def _aggregate(table: pa.Table, first_pass: bool) -> pa.Table:
    """Groups of ``table`` by key and minute: from records (``first_pass``: every row
    counts one) or from groups (sums of sums, min of mins, max of maxes)."""
    if first_pass:
        aggregations = [
            ("offset", "count"),
            ("value_bytes", "sum"),
            ("offset", "min"),
            ("offset", "max"),
            ("timestamp", "min"),
            ("timestamp", "max"),
        ]
    else:
        aggregations = [*_SUMS, *_EXTREMES]
    grouped = table.group_by(_GROUP_KEYS, use_threads=False).aggregate(aggregations)
    return pa.table(
        [grouped.column(f"{column}_{how}") for column, how in aggregations]
        + [grouped.column(key) for key in _GROUP_KEYS],
        names=[*_GROUP_FIELDS, *_GROUP_KEYS],
    )


def _record_groups(
    keys: list[bytes | None], timestamps: list[int], offsets: list[int], value_sizes: list[int]
) -> pa.Table:
    """The groups of one chunk of records, given as column lists."""
    timestamp = pa.array(timestamps, type=pa.int64())
    table = pa.table(
        {
            "key": pa.array(keys, type=pa.binary()),
            "minute": _minute(timestamp),
            "offset": pa.array(offsets, type=pa.int64()),
            "timestamp": timestamp,
            # A null value (size -1) adds no bytes, as in the report's greatest(size, 0).
            "value_bytes": pc.max_element_wise(pa.array(value_sizes, type=pa.int64()), 0),
        }
    )
    return _aggregate(table, first_pass=True)


_FOLDS: tuple[Callable[[int, int], int], ...] = (add, add, min, max, add, max, min, max, add)
"""How two batch summaries' figures combine, field by field (``BATCH_SUMMARY``'s order
after the codec and the minute)."""


class BatchSummaries:
    """A slice's batches folded per (compression codec, leader epoch, minute of the
    batch's max timestamp): what the batch, leader-epoch, traffic and partition reports
    read of them (``analytics.schema.BATCH_SUMMARY``).

    ``add`` takes a chunk's batch headers at once and folds each column with one
    builtin (sum, min, max) over it: no Python step per batch beyond the header the
    decoder already built, unless the chunk mixes codecs, epochs or minutes."""

    def __init__(self) -> None:
        self.figures: dict[tuple[int, int, int], list[int]] = {}
        """(codec, epoch, minute) -> the fields of ``BATCH_SUMMARY`` after the minute."""

    def add(self, headers: Sequence[BatchHeader], sizes: Sequence[int]) -> None:
        """Fold ``headers`` in, with each batch's uncompressed size in ``sizes``."""
        if not headers:
            return
        column = header_columns(headers)
        minutes = minute_of(column["max_timestamp"])
        epochs = set(column["partition_leader_epoch"])
        codecs = {attributes & COMPRESSION_MASK for attributes in set(column["attributes"])}
        if len(epochs) == 1 and len(codecs) == 1 and len(set(minutes)) == 1:
            self._fold((codecs.pop(), epochs.pop(), minutes[0]), column, sizes)
            return
        split: dict[tuple[int, int, int], list[int]] = {}
        for i, (header, minute) in enumerate(zip(headers, minutes, strict=True)):
            key = (header.attributes & COMPRESSION_MASK, header.partition_leader_epoch, minute)
            split.setdefault(key, []).append(i)
        for key, indexes in split.items():
            some = [headers[i] for i in indexes]
            self._fold(key, header_columns(some), [sizes[i] for i in indexes])

    def _fold(
        self, key: tuple[int, int, int], column: dict[str, tuple[int, ...]], sizes: Sequence[int]
    ) -> None:
        counts = column["record_count"]
        lengths = column["batch_length"]
        bases = column["base_offset"]
        batches = len(counts)
        figures = [
            batches,
            sum(counts),
            min(counts),
            max(counts),
            sum(lengths) + LOG_OVERHEAD * batches,
            max(lengths) + LOG_OVERHEAD,
            min(bases),
            max(map(add, bases, column["last_offset_delta"])),
            sum(sizes),
        ]
        held = self.figures.get(key)
        if held is not None:
            figures = [fold(a, b) for fold, a, b in zip(_FOLDS, held, figures, strict=True)]
        self.figures[key] = figures

    def to_arrow(self, piece: SegmentSlice) -> pa.RecordBatch:
        """One row of the partials view per (codec, epoch, minute), at the slice's start."""
        keys = list(self.figures)
        fields = list(zip(*self.figures.values(), strict=True))
        summary = pa.StructArray.from_arrays(
            [
                pa.array([COMPRESSION_NAMES[codec] for codec, _, _ in keys], pa.string()),
                pa.array([minute for _, _, minute in keys], pa.int64()),
                *(
                    pa.array(values, f.type)
                    for values, f in zip(fields, list(_SUMMARY_TYPE)[2:], strict=True)
                ),
            ],
            fields=list(_SUMMARY_TYPE),
        )
        epochs = pa.array([epoch for _, epoch, _ in keys], _TYPES["leader_epoch"])
        return summary_rows(KIND_BATCH_SUMMARY, piece, epochs, batch_summary=summary)


def minute_of(timestamps: Sequence[int]) -> list[int]:
    """``_minute`` of plain ints (a chunk's batch max timestamps)."""
    minutes: list[int] = _minute(pa.array(timestamps, pa.int64())).to_pylist()
    return minutes


def summary_rows(
    kind: str,
    piece: SegmentSlice,
    epochs: pa.Array,
    group: pa.StructArray | None = None,
    batch_summary: pa.StructArray | None = None,
    producer_summary: pa.StructArray | None = None,
) -> pa.RecordBatch:
    """Rows of the partials view that sum up part of a slice (``group``,
    ``batch_summary`` or ``producer_summary`` filled), placed at the slice's start."""
    rows = len(epochs)
    columns = [
        *slice_columns(kind, piece, _TYPES, rows),
        constant_column(piece.start, _TYPES["position"], rows),
        pa.nulls(rows, _TYPES["batch_base_offset"]),
        epochs,
        null_struct(_TYPES["record"], rows),
        null_struct(_TYPES["batch"], rows),
        null_struct(_TYPES["corruption"], rows),
        null_struct(_GROUP_TYPE, rows) if group is None else group,
        null_struct(_SUMMARY_TYPE, rows) if batch_summary is None else batch_summary,
        null_struct(_PRODUCER_TYPE, rows) if producer_summary is None else producer_summary,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=PARTIALS_ARROW)


def _group_rows(piece: SegmentSlice, groups: pa.Table) -> pa.RecordBatch:
    """``groups`` as rows of the partials view, placed at the slice's start."""
    group = pa.StructArray.from_arrays(
        [groups.column(field.name).combine_chunks().cast(field.type) for field in _GROUP_TYPE],
        fields=list(_GROUP_TYPE),
    )
    return summary_rows(
        KIND_GROUP, piece, pa.nulls(groups.num_rows, _TYPES["leader_epoch"]), group=group
    )


def partial_batches(
    piece: SegmentSlice,
    time_range: TimeRange = ALL_TIME,
    keep_records: bool = False,
    aborted: AbortedTransactions | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``partials`` view of ``piece`` (``analytics.schema.PARTIALS``) as Arrow
    batches: its corruption rows (and record rows if ``keep_records``), in file order,
    then its batch summary and group rows."""
    groups: list[pa.Table] = []
    held = 0  # rows in groups
    fold_at = MERGE_GROUP_ROWS
    summaries = BatchSummaries()
    producers = ProducerSummaries()
    # Rows passed through (corruption, kept records) are sent on in batches of
    # ARROW_BATCH_ROWS or more, as each batch costs Spark a fixed price.
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    # Checksums are only read by the divergence check, from the record rows.
    chunks = scan_chunks(
        piece, time_range, record_rows=keep_records, batch_rows=False, aborted=aborted
    )
    for rows in chunks:
        records = rows.records
        if records.offset:
            chunk = _record_groups(
                records.key, records.timestamp, records.offset, records.value_size
            )
            groups.append(chunk)
            held += chunk.num_rows
            if held > fold_at:
                # A long slice of many keys: fold what is held so far into one table,
                # and fold again only once as many rows again are held.
                groups = [_aggregate(pa.concat_tables(groups), first_pass=False)]
                held = groups[0].num_rows
                fold_at = max(MERGE_GROUP_ROWS, 2 * held)
        summaries.add(rows.batch_headers, rows.batch_sizes)
        producers.add(rows.batch_headers, rows.batch_sizes, rows.batch_controls)
        if rows.order:
            kept = rows.to_arrow(piece)
            rows_kept = kept.num_rows
            no_group = null_struct(_GROUP_TYPE, rows_kept)
            no_summary = null_struct(_SUMMARY_TYPE, rows_kept)
            no_producer = null_struct(_PRODUCER_TYPE, rows_kept)
            pending.append(
                pa.RecordBatch.from_arrays(
                    [*kept.columns, no_group, no_summary, no_producer], schema=PARTIALS_ARROW
                )
            )
            pending_rows += rows_kept
        if pending_rows >= ARROW_BATCH_ROWS:
            yield pa.concat_batches(pending)
            pending, pending_rows = [], 0
    if pending:
        yield pa.concat_batches(pending)
    # The slice's summing-up rows go as one Arrow batch.
    tail = [summaries.to_arrow(piece)] if summaries.figures else []
    if producers.figures:
        no_epochs = pa.nulls(len(producers.figures), _TYPES["leader_epoch"])
        tail.append(
            summary_rows(
                KIND_PRODUCER_SUMMARY, piece, no_epochs, producer_summary=producers.to_struct()
            )
        )
    if groups:
        merged = groups[0] if len(groups) == 1 else pa.concat_tables(groups)
        tail.append(_group_rows(piece, _aggregate(merged, first_pass=False)))
    if tail:
        yield pa.concat_batches(tail)
