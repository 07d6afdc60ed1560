"""A slice's batches folded per producer id and epoch: the partials view's
``producer_summary`` rows (``analytics.schema.PRODUCER_SUMMARY``), on the executors.

How this works: ``ProducerSummaries.add`` takes a chunk's batch headers (with each
batch's uncompressed size and, for a control batch, its marker) in file order and folds
them per (producer id, producer epoch): counts and sums, first and last offset, and the
sequence numbers of the idempotent data batches (a batch's base sequence should be
where the one before it ended: ``(base sequence + record count) mod 2^31``, as Kafka
wraps it); a batch that does not start there is a gap. Chunks, and later in Spark the
slices of one partition (``analytics.producers``), combine by the same rule: a gap
where one ends at a sequence the next does not start at.

Transactions: a transactional data batch opens (or continues) its producer's
transaction in the partition; a control batch's marker (commit or abort) ends it. The
summary keeps the counts and the last offsets of each kind, so a partition whose last
transactional batch comes after its last marker has an open transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass
from itertools import compress
from operator import add, ne

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from minibroker.analytics.scan import CONTROL_TYPE_NAMES
from minibroker.analytics.schema import PARTIALS
from minibroker.protocol.records import LOG_OVERHEAD, BatchHeader, ControlRecordType
from minibroker.protocol.records.layout import TRANSACTIONAL_BIT

SEQUENCE_MODULUS = 1 << 31
"""Sequence numbers are int32 and wrap to 0 after Integer.MAX_VALUE (Kafka's
DefaultRecordBatch.incrementSequence)."""
PRODUCER_ARROW = to_arrow_schema(PARTIALS, timezone="UTC").field("producer_summary").type
_COMMIT = CONTROL_TYPE_NAMES[ControlRecordType.COMMIT]
_ABORT = CONTROL_TYPE_NAMES[ControlRecordType.ABORT]


@dataclass(slots=True)
class ProducerFigures:
    """One producer epoch's batches in a run of a slice: ``PRODUCER_SUMMARY``'s fields
    after the producer id and epoch, in its order."""

    batches: int
    records: int
    bytes: int
    uncompressed_bytes: int
    first_offset: int
    last_offset: int
    first_sequence: int | None
    next_sequence: int | None
    sequence_gaps: int
    transactional_batches: int
    commits: int
    aborts: int
    last_transactional_offset: int | None
    last_marker_offset: int | None

    def then(self, later: ProducerFigures) -> ProducerFigures:
        """These figures and ``later``'s (the same producer epoch's next batches)."""
        seam = self.next_sequence is not None and later.first_sequence not in (
            None,
            self.next_sequence,
        )
        return ProducerFigures(
            self.batches + later.batches,
            self.records + later.records,
            self.bytes + later.bytes,
            self.uncompressed_bytes + later.uncompressed_bytes,
            min(self.first_offset, later.first_offset),
            max(self.last_offset, later.last_offset),
            self.first_sequence if self.first_sequence is not None else later.first_sequence,
            later.next_sequence if later.next_sequence is not None else self.next_sequence,
            self.sequence_gaps + later.sequence_gaps + seam,
            self.transactional_batches + later.transactional_batches,
            self.commits + later.commits,
            self.aborts + later.aborts,
            _larger(self.last_transactional_offset, later.last_transactional_offset),
            _larger(self.last_marker_offset, later.last_marker_offset),
        )


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def header_columns(headers: Sequence[BatchHeader]) -> dict[str, tuple[int, ...]]:
    """Batch headers as one tuple per field, by field name (transposed in C)."""
    return dict(zip(BatchHeader._fields, zip(*headers, strict=True), strict=True))


def fold(
    producer_id: int,
    column: dict[str, tuple[int, ...]],
    sizes: Sequence[int],
    controls: Sequence[str | None],
) -> ProducerFigures:
    """The figures of one producer epoch's batches (``column``, in file order), each
    with its uncompressed size in ``sizes`` and its marker in ``controls``."""
    counts = column["record_count"]
    bases = column["base_offset"]
    lasts = list(map(add, bases, column["last_offset_delta"]))
    batches = len(counts)
    is_data = [control is None for control in controls]
    is_marker = [not data for data in is_data]
    transactional = [bool(a & TRANSACTIONAL_BIT) for a in compress(column["attributes"], is_data)]
    first_sequence = next_sequence = None
    gaps = 0
    if producer_id >= 0 and any(is_data):
        sequences = list(compress(column["base_sequence"], is_data))
        ends = [
            (sequence + count) % SEQUENCE_MODULUS
            for sequence, count in zip(sequences, compress(counts, is_data), strict=True)
        ]
        first_sequence, next_sequence = sequences[0], ends[-1]
        gaps = sum(map(ne, ends, sequences[1:]))
    return ProducerFigures(
        batches,
        sum(counts),
        sum(column["batch_length"]) + LOG_OVERHEAD * batches,
        sum(sizes),
        min(bases),
        max(lasts),
        first_sequence,
        next_sequence,
        gaps,
        sum(transactional),
        controls.count(_COMMIT),
        controls.count(_ABORT),
        max(compress(compress(lasts, is_data), transactional), default=None),
        max(compress(bases, is_marker), default=None),
    )


class ProducerSummaries:
    """A slice's batches folded per (producer id, producer epoch)."""

    def __init__(self) -> None:
        self.figures: dict[tuple[int, int], ProducerFigures] = {}

    def add(
        self,
        headers: Sequence[BatchHeader],
        sizes: Sequence[int],
        controls: Sequence[str | None],
    ) -> None:
        """Fold a chunk's batches in: ``sizes`` uncompressed, ``controls`` their markers."""
        if not headers:
            return
        column = header_columns(headers)
        ids = set(column["producer_id"])
        epochs = set(column["producer_epoch"])
        if len(ids) == 1 and len(epochs) == 1:  # the common case: one producer a chunk
            self._add((ids.pop(), epochs.pop()), column, sizes, controls)
            return
        split: dict[tuple[int, int], list[int]] = {}
        for i, header in enumerate(headers):
            split.setdefault((header.producer_id, header.producer_epoch), []).append(i)
        for key, indexes in split.items():
            some = header_columns([headers[i] for i in indexes])
            self._add(key, some, [sizes[i] for i in indexes], [controls[i] for i in indexes])

    def _add(
        self,
        key: tuple[int, int],
        column: dict[str, tuple[int, ...]],
        sizes: Sequence[int],
        controls: Sequence[str | None],
    ) -> None:
        figures = fold(key[0], column, sizes, controls)
        held = self.figures.get(key)
        self.figures[key] = figures if held is None else held.then(figures)

    def to_struct(self) -> pa.StructArray:
        """One ``producer_summary`` struct per (producer id, epoch)."""
        keys = list(self.figures)
        fields = list(PRODUCER_ARROW)
        columns = [[pid for pid, _ in keys], [epoch for _, epoch in keys]]
        rows = [astuple(figures) for figures in self.figures.values()]
        columns += [list(values) for values in zip(*rows, strict=True)]
        return pa.StructArray.from_arrays(
            [pa.array(values, f.type) for values, f in zip(columns, fields, strict=True)],
            fields=fields,
        )
