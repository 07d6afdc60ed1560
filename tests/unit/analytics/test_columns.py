"""The column decoder (analytics.columns) against the object-per-record path
(analytics.scan.record_rows / scan_rows): the same rows, in the same order, for every
kind of batch and every kind of damage."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.types import ArrayType, DataType, StructType

from minibroker.analytics.columns import RECORDS_ARROW, SCAN_ARROW, view_batches
from minibroker.analytics.layout import plan_slices
from minibroker.analytics.scan import TimeRange, record_rows, scan_rows
from minibroker.analytics.schema import VIEWS
from minibroker.protocol.records import (
    Compression,
    ControlRecordType,
    Record,
    TimestampType,
    encode_batch,
    set_log_append_time,
)
from minibroker.protocol.records.batch import assemble_batch
from minibroker.protocol.records.layout import TRANSACTIONAL_BIT
from tests.support.spark import PartitionLog, Producer, make_records

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000_000


def _as_python(value: Any, kind: DataType) -> Any:
    """A row tuple of the object path as pyarrow's ``to_pylist`` gives the same row."""
    if value is None:
        return None
    if isinstance(kind, StructType):
        return {f.name: _as_python(v, f.dataType) for f, v in zip(kind.fields, value, strict=True)}
    if isinstance(kind, ArrayType):
        return [_as_python(v, kind.elementType) for v in value]
    return value


def _object_rows(log_dir: Path, kind: str, time_range: TimeRange, split: int) -> list[Any]:
    rows = scan_rows if kind == "scan" else record_rows
    return [
        _as_python(row, VIEWS[kind])
        for piece in plan_slices([str(log_dir)], split_bytes=split)
        for row in rows(piece, time_range)
    ]


def _column_rows(log_dir: Path, kind: str, time_range: TimeRange, split: int) -> list[Any]:
    out = []
    for piece in plan_slices([str(log_dir)], split_bytes=split):
        for batch in view_batches(kind, piece, time_range):
            assert batch.schema == (SCAN_ARROW if kind == "scan" else RECORDS_ARROW)
            out.extend(batch.to_pylist())
    return out


def _raw_append(log: PartitionLog, data: bytes, records: int) -> int:
    """Append encoded bytes as the next batch; returns its position."""
    segment = log.segments[-1]
    position = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(data)
    log.next_offset += records
    return position


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One partition holding every kind of batch the decoder must handle, and damage."""
    root = tmp_path_factory.mktemp("columns")
    (root / "meta.properties").write_text("version=0\nbroker.id=3\n")
    log = PartitionLog(root, "orders", 0)
    log.append(make_records(5, key_every=2))  # null keys, headers
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        log.append(make_records(4, key_every=3, start_ts=T0 + 5_000), compression=codec)
    nulls = [Record(None, None), Record(b"", b""), Record(None, b"k", (("h", None),))]
    log.append(nulls, leader_epoch=3)
    big = [Record(b"v" * 20_000, b"k" * 9_000, (("x" * 200, b"y" * 300),), T0 - 5)]
    log.append(big, leader_epoch=3)  # lengths of three-byte varints, a negative delta
    many_headers = [Record(b"v", None, tuple((f"h{i}", bytes([i])) for i in range(5)), T0)]
    log.append(many_headers)
    aborted = Producer(42, 1, 0)
    log.append(make_records(2), producer=aborted, attributes=TRANSACTIONAL_BIT)
    log.append_marker(ControlRecordType.ABORT, aborted)
    idempotent = Producer(7, 0, 0)
    log.append(make_records(3), producer=idempotent, compression=Compression.GZIP)
    log.append(make_records(2), producer=replace(idempotent, sequence=3))
    log.append(make_records(2), producer=replace(idempotent, sequence=9))  # a gap: 5..8
    log.append(make_records(1), producer=Producer(7, 1, 0))  # a new epoch starts over
    open_one = Producer(8, 2, 0)
    log.append(make_records(2), producer=open_one, attributes=TRANSACTIONAL_BIT)
    log.append_marker(ControlRecordType.COMMIT, open_one)
    log.append(
        make_records(1), producer=replace(open_one, sequence=2), attributes=TRANSACTIONAL_BIT
    )  # fmt: skip  (no marker yet: open)
    appended = bytearray(encode_batch(make_records(2), base_offset=log.next_offset))
    set_log_append_time(appended, 0, T0 + 99_000)
    _raw_append(log, bytes(appended), 2)
    garbage = assemble_batch(
        b"\x02\x00\x00\x00\x01\x01\x00\x00", count=1, base_offset=log.next_offset,
        base_timestamp=T0, max_timestamp=T0, compression=Compression.NONE,
        timestamp_type=TimestampType.CREATE_TIME, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, partition_leader_epoch=0,
    )  # fmt: skip
    _raw_append(log, garbage, 1)  # CRC right, records unparseable
    bad = log.append(make_records(3))
    log.corrupt_batch(log.segments[0], bad)
    log.roll()
    log.append(make_records(3, start_ts=T0 + 600_000), leader_epoch=4)
    log.tear_tail(make_records(2))
    other = PartitionLog(root, "events", 1)
    other.append(make_records(2))
    with other.segments[0].open("ab") as f:
        f.write(b"\x01" * 100)  # an unreadable header: the rest of the segment is lost
    return root


@pytest.mark.parametrize("kind", ["scan", "records"])
@pytest.mark.parametrize("split", [1 << 40, 300], ids=["whole", "split"])
def test_columns_give_the_object_paths_rows_in_order_for_every_batch_and_damage(
    log_dir: Path, kind: str, split: int
) -> None:
    want = _object_rows(log_dir, kind, TimeRange(), split)

    got = _column_rows(log_dir, kind, TimeRange(), split)

    assert got == want
    if kind == "scan":
        kinds = {row["kind"] for row in got}
        assert kinds == {"record", "batch", "corruption"}
        reasons = sorted(row["corruption"]["reason"].split(" ")[0] for row in got
                         if row["kind"] == "corruption")  # fmt: skip
        # the CRC mismatch, the unparseable records, the torn tail, the bad header
        assert reasons == ["batch", "record", "torn", "unreadable"]
        assert any(row["batch"]["is_control"] for row in got if row["kind"] == "batch")


@pytest.mark.parametrize("kind", ["scan", "records"])
def test_columns_apply_a_time_range_as_the_object_path_does(log_dir: Path, kind: str) -> None:
    time_range = TimeRange(T0 + 1_000, T0 + 7_000)
    want = _object_rows(log_dir, kind, time_range, 1 << 40)

    got = _column_rows(log_dir, kind, time_range, 1 << 40)

    assert got == want
    assert {row["timestamp"] if kind == "records" else row["record"]["timestamp"]
            for row in got if kind == "records" or row["kind"] == "record"} == {
        T0 + 1_000, T0 + 2_000, T0 + 3_000, T0 + 4_000, T0 + 5_000, T0 + 6_000
    }  # fmt: skip


def test_a_large_slice_comes_as_several_arrow_batches_of_the_views_schema(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    for _ in range(700):
        log.append(make_records(16))
    (piece,) = plan_slices([str(tmp_path)])

    batches = list(view_batches("scan", piece))

    assert len(batches) > 1
    table = pa.Table.from_batches(batches)
    assert table.num_rows == 700 * 17  # 16 record rows and one batch row per batch
    records = table.filter(pc.equal(table.column("kind"), "record"))
    assert records.column("record").combine_chunks().field("offset").to_pylist() == list(
        range(700 * 16)
    )
