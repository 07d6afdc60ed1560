"""Reading a batch's records in place: ``BatchView``, the consumer's zero-object path.

``decode.py`` builds one record object (and one bytes object per key and value) for
every record. A ``BatchView`` builds none until asked: it checks the batch (CRC-32C over
the whole batch, then the record structure, in one pass) and keeps only where each
value lies. ``values()`` returns memoryview slices of the fetched bytes (no copy);
``keys()``, ``offsets()``, ``timestamps()`` and ``headers(i)`` walk the records again
when asked for (the structure is known good by then); ``records()`` gives exactly the
ConsumerRecords ``decode_consumer_records`` would.

The structure scan is plain Python, written for the interpreter: it indexes the fetched
``bytes`` object at absolute positions (no copy of the records section), decodes only the
lengths it must follow, skips the other varints, and appends two ints per record (where
the value starts and ends). Anything irregular (a length that does not fit, a truncated
record, bytes left over) is handed to the decoder, which raises the same
CorruptMessageError ``poll`` would. With the compiled codec (``accel``) the same scan is
one C pass (``scan_values``), which hands what it refuses to the Python scan.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat

from minibroker.protocol.compression import Compression, decompress
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import accel
from minibroker.protocol.records.batch import (
    BatchHeader,
    iter_headers,
    read_header,
    validate_batch,
)
from minibroker.protocol.records.decode import _decode_section
from minibroker.protocol.records.layout import BATCH_HEADER_SIZE, TIMESTAMP_TYPE_BIT
from minibroker.protocol.records.types import (
    Buffer,
    ConsumerRecord,
    DecodedRecord,
    Header,
    TimestampType,
)
from minibroker.protocol.records.varint import raw_varint, read_varint


class _Irregular(Exception):
    """The scan met something it does not accept; the decoder says what is wrong."""


def _skip_headers(data: Buffer, pos: int) -> int:
    """The position after the header count and headers at ``pos``; _Irregular on a
    negative count, a null or negative name length, or a negative value length other
    than null's -1."""
    count, pos = read_varint(data, pos)
    if count < 0:
        raise _Irregular
    for _ in range(count):
        length, pos = read_varint(data, pos)
        if length < 0:
            raise _Irregular
        pos += length
        length, pos = read_varint(data, pos)
        if length < -1:
            raise _Irregular
        if length > 0:
            pos += length
    return pos


def _scan(data: Buffer, pos: int, end: int, count: int) -> tuple[list[int], list[int], bool]:
    """Check the structure of ``count`` records in ``data[pos:end]`` and return where
    each value starts and ends (end -1: a null value), and whether any value is null.

    Raises _Irregular for anything not plainly well formed. Positions only move forward
    (negative key and value lengths are refused), so with ``pos == end`` at the end every
    field lies inside the batch even though ``data`` may hold more bytes after it.
    """
    starts: list[int] = []
    ends: list[int] = []
    add_start = starts.append
    add_end = ends.append
    nulls = False
    try:
        for _ in range(count):
            # length
            n = data[pos]
            if n < 0x80:
                pos += 1
            else:
                m = data[pos + 1]
                if m < 0x80:
                    n = (n & 0x7F) | (m << 7)
                    pos += 2
                else:
                    n, pos = raw_varint(data, pos)
            # Twice where the record ends: the raw zigzag of a negative length is odd,
            # so it can never match, and no unzigzag is needed.
            record_end2 = (pos << 1) + n
            # attributes (one byte), then timestampDelta and offsetDelta: skipped
            if data[pos + 1] > 0x7F:
                pos += 2
                while data[pos] > 0x7F:
                    pos += 1
                pos += 1
            else:
                pos += 2
            if data[pos] > 0x7F:
                pos += 1
                while data[pos] > 0x7F:
                    pos += 1
            # pos: the offsetDelta's last byte. Then the key (most often null: zigzag -1
            # is the single byte 1)
            n = data[pos + 1]
            if n == 1:
                pos += 2
            else:
                pos += 1
                if n < 0x80:
                    pos += 1
                else:
                    m = data[pos + 1]
                    if m < 0x80:
                        n = (n & 0x7F) | (m << 7)
                        pos += 2
                    else:
                        n, pos = raw_varint(data, pos)
                if n & 1:
                    raise _Irregular
                pos += n >> 1
            # value (its length unzigzagged by a shift: an odd raw varint is negative)
            n = data[pos]
            if n < 0x80:
                pos += 1
                if n & 1:
                    if n != 1:
                        raise _Irregular
                    nulls = True
                    add_start(pos)
                    add_end(-1)
                else:
                    add_start(pos)
                    pos += n >> 1
                    add_end(pos)
            else:
                m = data[pos + 1]
                if m < 0x80 and not n & 1:
                    pos += 2
                    add_start(pos)
                    pos += ((n & 0x7F) >> 1) | (m << 6)
                else:
                    n, pos = raw_varint(data, pos)
                    if n & 1:
                        raise _Irregular
                    add_start(pos)
                    pos += n >> 1
                add_end(pos)
            # headers (most often none: a count of 0)
            if data[pos]:
                pos = _skip_headers(data, pos)
            else:
                pos += 1
            if pos << 1 != record_end2:
                raise _Irregular
    except (IndexError, CorruptMessageError):
        raise _Irregular from None
    if pos != end:
        raise _Irregular
    return starts, ends, nulls


class _Fields:
    """Every record's fields but its value, from a second walk over a batch whose
    structure the scan has accepted: offset deltas, timestamp deltas, key spans (end -1:
    null) and where each record's header count lies."""

    __slots__ = ("header_positions", "key_ends", "key_starts", "offset_deltas", "timestamp_deltas")

    def __init__(self, data: Buffer, pos: int, count: int) -> None:
        self.offset_deltas: list[int] = []
        self.timestamp_deltas: list[int] = []
        self.key_starts: list[int] = []
        self.key_ends: list[int] = []
        self.header_positions: list[int] = []
        for _ in range(count):
            length, pos = read_varint(data, pos)
            record_end = pos + length
            timestamp_delta, pos = read_varint(data, pos + 1)
            offset_delta, pos = read_varint(data, pos)
            key_length, pos = read_varint(data, pos)
            self.offset_deltas.append(offset_delta)
            self.timestamp_deltas.append(timestamp_delta)
            self.key_starts.append(pos)
            if key_length < 0:
                self.key_ends.append(-1)
            else:
                pos += key_length
                self.key_ends.append(pos)
            value_length, pos = read_varint(data, pos)
            self.header_positions.append(pos + max(value_length, 0))
            pos = record_end


class BatchView:
    """The records of one batch of ``topic``-``partition`` at or after ``min_offset``,
    read in place; see the module docstring. Build with ``batch_views``."""

    __slots__ = (
        "_data",
        "_decoded",
        "_fields",
        "_first",
        "_mv",
        "_nulls",
        "_start",
        "_stop",
        "_value_ends",
        "_value_starts",
        "header",
        "partition",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        header: BatchHeader,
        data: bytes | memoryview,
        start: int,
        stop: int,
        min_offset: int,
    ) -> None:
        """``data[start:stop]`` is the batch's (uncompressed) records section."""
        self.topic = topic
        self.partition = partition
        self.header = header
        self._data = data
        self._mv = memoryview(data)
        self._start = start
        self._stop = stop
        self._fields: _Fields | None = None
        self._decoded: list[DecodedRecord] | None = None
        count = max(header.record_count, 0)
        speedups = accel.speedups
        scanned: tuple[list[int], list[int], bool] | None = None
        if speedups is not None:
            scanned = speedups.scan_values(data, start, stop, count)
        try:
            if scanned is None:
                scanned = _scan(data, start, stop, count)
            self._value_starts, self._value_ends, self._nulls = scanned
        except _Irregular:
            # The decoder raises the precise CorruptMessageError; should it accept what
            # the scan refused, the view serves the decoded records' bytes instead.
            self._decoded = _decode_section(self._section(), header)
            self._value_starts = self._value_ends = []
            self._nulls = True
        self._first = 0  # records before min_offset (the fetch may start mid-batch)
        if header.base_offset < min_offset:
            self._first = sum(1 for offset in self._offsets() if offset < min_offset)

    def __len__(self) -> int:
        if self._decoded is not None:
            return len(self._decoded) - self._first
        return len(self._value_starts) - self._first

    def __repr__(self) -> str:
        return (
            f"<BatchView {self.topic}-{self.partition} offsets "
            f"{self.header.base_offset}..{self.header.last_offset} ({len(self)} records)>"
        )

    @property
    def next_offset(self) -> int:
        """The offset after the batch's last (the consumer's position after it)."""
        return self.header.next_offset

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    def offsets(self) -> list[int]:
        return self._offsets()[self._first :]

    def timestamps(self) -> list[int]:
        header = self.header
        if header.attributes & TIMESTAMP_TYPE_BIT:
            return [header.max_timestamp] * len(self)
        if self._decoded is not None:
            return [r.timestamp for r in self._decoded[self._first :]]
        base = header.base_timestamp
        return [base + delta for delta in self._walk().timestamp_deltas[self._first :]]

    def values(self) -> list[memoryview | None]:
        """Each record's value, a memoryview slice of the fetched batch (None: null)."""
        first = self._first
        if self._decoded is not None:
            values = [r.value for r in self._decoded[first:]]
            return [None if v is None else memoryview(v) for v in values]
        starts, ends = self._value_starts, self._value_ends
        if first:
            starts, ends = starts[first:], ends[first:]
        mv = self._mv
        if self._nulls:
            return [None if e < 0 else mv[s:e] for s, e in zip(starts, ends, strict=True)]
        return [mv[s:e] for s, e in zip(starts, ends, strict=True)]

    def keys(self) -> list[memoryview | None]:
        """Each record's key, a memoryview slice of the fetched batch (None: null)."""
        first = self._first
        if self._decoded is not None:
            keys = [r.key for r in self._decoded[first:]]
            return [None if k is None else memoryview(k) for k in keys]
        fields = self._walk()
        mv = self._mv
        return [
            None if e < 0 else mv[s:e]
            for s, e in zip(fields.key_starts[first:], fields.key_ends[first:], strict=True)
        ]

    def headers(self, index: int) -> tuple[Header, ...]:
        """The headers of record ``index`` (0: the view's first), decoded now."""
        if not 0 <= index < len(self):
            raise IndexError(f"record {index} of a view of {len(self)}")
        index += self._first
        if self._decoded is not None:
            return self._decoded[index].headers
        data = self._data
        count, pos = read_varint(data, self._walk().header_positions[index])
        headers: list[Header] = []
        for _ in range(count):  # lengths were checked by the scan
            length, pos = read_varint(data, pos)
            name = bytes(data[pos : pos + length]).decode(errors="replace")
            pos += length
            length, pos = read_varint(data, pos)
            headers.append((name, None if length < 0 else bytes(data[pos : pos + length])))
            pos += max(length, 0)
        return tuple(headers)

    def records(self) -> list[ConsumerRecord]:
        """The records as ConsumerRecords, as ``Consumer.poll`` returns them."""
        records: list[ConsumerRecord] = _decode_section(
            self._section(), self.header, self.topic, self.partition
        )
        return records[self._first :]

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return iter(self.records())

    def _section(self) -> memoryview:
        """The records section, not copied (the decoder copies only what it keeps)."""
        return self._mv[self._start : self._stop]

    def _walk(self) -> _Fields:
        if self._fields is None:
            count = len(self._value_starts)
            self._fields = _Fields(self._data, self._start, count)
        return self._fields

    def _offsets(self) -> list[int]:
        if self._decoded is not None:
            return [r.offset for r in self._decoded]
        base = self.header.base_offset
        return list(map(int.__add__, repeat(base), self._walk().offset_deltas))


def batch_views(
    buf: Buffer, topic: str, partition: int, min_offset: int, *, verify_crc: bool = True
) -> list[BatchView]:
    """A view of each whole batch in ``buf`` holding records at or after ``min_offset``.

    Each batch's CRC-32C is checked over the whole batch (``verify_crc``) and its
    records' structure scanned before its view is made; CorruptMessageError otherwise.
    Uncompressed batches are read in place: their values are slices of ``buf``.
    """
    # Indexing bytes is faster than indexing a memoryview; other buffers are read
    # through a memoryview so that the views stay slices of them.
    data: bytes | memoryview = buf if isinstance(buf, bytes) else memoryview(buf)
    views: list[BatchView] = []
    for pos, header in iter_headers(data):
        if header.next_offset <= min_offset:
            continue
        if verify_crc:
            validate_batch(data, pos)
        else:
            read_header(data, pos)
        start, stop = pos + BATCH_HEADER_SIZE, pos + header.size
        if header.compression is Compression.NONE:
            views.append(BatchView(topic, partition, header, data, start, stop, min_offset))
            continue
        try:
            section = decompress(header.compression, bytes(data[start:stop]))
        except CorruptMessageError as exc:
            raise CorruptMessageError(f"batch at {pos}: {exc}") from exc
        views.append(BatchView(topic, partition, header, section, 0, len(section), min_offset))
    return views
