"""Planning slices of segment files and scanning them, without Spark."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from minibroker.analytics.layout import (
    balanced_groups,
    parse_partition_dir,
    plan_slices,
    read_broker_id,
)
from minibroker.analytics.scan import (
    Corruption,
    ScannedBatch,
    TimeRange,
    record_checksum,
    scan_rows,
    scan_slice,
)
from minibroker.protocol.records import Compression, DecodedRecord, Record
from tests.support.spark import PartitionLog, make_records

pytestmark = pytest.mark.timeout(30)

T0 = 1_700_000_000_000


def _scan_all(log_dir: Path, **kwargs: object) -> list[ScannedBatch | Corruption]:
    out: list[ScannedBatch | Corruption] = []
    for piece in plan_slices([str(log_dir)], **kwargs):  # type: ignore[arg-type]
        out.extend(scan_slice(piece))
    return out


def _offsets(items: list[ScannedBatch | Corruption]) -> list[int]:
    return [r.offset for i in items if isinstance(i, ScannedBatch) for r in i.records]


def test_partition_dirs_parse_topic_and_partition_and_skip_future_and_delete() -> None:
    assert parse_partition_dir("orders-3") == ("orders", 3)
    assert parse_partition_dir("my-topic.v2-10") == ("my-topic.v2", 10)
    assert parse_partition_dir("orders-3.0f3c9a4e2b5d4c1a-future") is None
    assert parse_partition_dir("orders-3.0f3c9a4e2b5d4c1a-delete") is None
    assert parse_partition_dir("orders") is None
    assert parse_partition_dir("cleaner-offset-checkpoint") is None


def test_plan_ignores_index_files_checkpoints_and_moving_or_deleted_replicas(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "orders", 0)
    log.append(make_records(2))
    (log.dir / "00000000000000000000.index").write_bytes(b"\0" * 8)
    (log.dir / "00000000000000000000.timeindex").write_bytes(b"\0" * 12)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    for suffix in ("future", "delete"):
        moving = PartitionLog(tmp_path, "orders", 1)
        moving.append(make_records(2))
        moving.dir.rename(tmp_path / f"orders-1.abcdef-{suffix}")

    pieces = plan_slices([str(tmp_path)])

    assert [(p.topic, p.partition, Path(p.segment).name) for p in pieces] == [
        ("orders", 0, "00000000000000000000.log")
    ]


def test_plan_filters_topics_and_reads_the_broker_id_from_meta_properties(
    tmp_path: Path,
) -> None:
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=7\n")
    for topic in ("a", "b"):
        PartitionLog(tmp_path, topic, 0).append(make_records(1))

    pieces = plan_slices([str(tmp_path)], frozenset({"b"}))

    assert [(p.topic, p.broker_id) for p in pieces] == [("b", 7)]
    assert read_broker_id(tmp_path / "b-0") is None


def test_plan_names_a_missing_log_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        plan_slices([str(tmp_path / "nope")])


def test_large_segments_are_split_at_batch_boundaries_and_lose_no_record(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    for _ in range(20):
        log.append(make_records(3))

    pieces = plan_slices([str(tmp_path)], split_bytes=500)

    assert len(pieces) > 3
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    items = [i for p in pieces for i in scan_slice(p)]
    assert not [i for i in items if isinstance(i, Corruption)]
    assert _offsets(items) == log.offsets()


def test_a_segment_just_over_the_split_size_is_cut_in_halves_not_left_a_sliver(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    for _ in range(21):
        log.append(make_records(3))
    size = log.segments[0].stat().st_size
    batch = size // 21

    pieces = plan_slices([str(tmp_path)], split_bytes=size - batch // 2)

    assert [(p.start, p.end) for p in pieces] == [(0, 11 * batch), (11 * batch, size)]


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_groups_cut_slices_at_batch_boundaries_into_near_equal_runs_in_plan_order(
    tmp_path: Path, parts: int
) -> None:
    for partition, batches in ((0, 20), (1, 7)):
        log = PartitionLog(tmp_path, "t", partition)
        for i in range(batches):
            log.append(make_records(3))
            if i == 12:
                log.roll()
    pieces = plan_slices([str(tmp_path)])
    batch = pieces[0].end // 13

    groups = balanced_groups(pieces, parts)

    assert len(groups) == parts
    sizes = [sum(p.end - p.start for p in group) for group in groups]
    assert max(sizes) - min(sizes) <= batch
    flat = [p for group in groups for p in group]
    assert [(p.segment, p.end) for p in flat if p.end == p.start] == []
    assert [(p.segment, p.start) for p in flat if p.start == 0] == [(p.segment, 0) for p in pieces]
    assert _offsets([i for p in flat for i in scan_slice(p)]) == _offsets(
        [i for p in pieces for i in scan_slice(p)]
    )


def test_a_corrupt_length_leaves_its_piece_whole_in_the_group_it_starts_in(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    for _ in range(10):
        log.append(make_records(3))
    segment = log.segments[0]
    data = bytearray(segment.read_bytes())
    data[8:12] = b"\x00\x00\x00\x01"  # the first batch's length: impossible
    segment.write_bytes(bytes(data))
    (piece,) = plan_slices([str(tmp_path)])

    assert balanced_groups([piece], 2) == [[piece]]


def test_scan_reads_gzip_null_keys_headers_and_several_segments(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(4, key_every=2), compression=Compression.GZIP)
    log.roll()
    log.append(make_records(3), leader_epoch=2)

    items = _scan_all(tmp_path)

    batches = [i for i in items if isinstance(i, ScannedBatch)]
    assert [b.header.compression for b in batches] == [Compression.GZIP, Compression.NONE]
    got = [(r.offset, r.key, r.value, r.headers) for b in batches for r in b.records]
    want = [(w.offset, w.record.key, w.record.value, w.record.headers) for w in log.written]
    assert got == want
    assert got[1][1] is None  # a null key stays null


def test_scan_reports_a_crc_mismatch_and_goes_on_with_the_next_batch(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(2))
    bad = log.append(make_records(2))
    log.append(make_records(2))
    log.corrupt_batch(log.segments[0], bad)

    items = _scan_all(tmp_path)

    (damage,) = [i for i in items if isinstance(i, Corruption)]
    assert damage.position == bad and "CRC" in damage.reason
    assert damage.header is not None and damage.header.base_offset == 2
    assert _offsets(items) == [0, 1, 4, 5]


def test_scan_reports_a_torn_last_batch_and_a_torn_header(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(2))
    torn = log.tear_tail(make_records(3))
    other = PartitionLog(tmp_path, "u", 0)
    other.append(make_records(1))
    with other.segments[0].open("ab") as f:
        f.write(b"\0" * 20)

    items = _scan_all(tmp_path)

    damages = [i for i in items if isinstance(i, Corruption)]
    assert [(d.position, d.reason.split(":")[0]) for d in damages] == [
        (torn, "torn batch"),
        (other.segments[0].stat().st_size - 20, "torn batch header"),
    ]
    assert _offsets(items) == [0, 1, 0]


def test_scan_reports_an_unparseable_header_once_for_the_rest_of_the_segment(
    tmp_path: Path,
) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(1))
    size = log.segments[0].stat().st_size
    with log.segments[0].open("ab") as f:
        f.write(b"\x01" * 200)

    items = _scan_all(tmp_path)

    damages = [i for i in items if isinstance(i, Corruption)]
    assert [(d.position, d.length) for d in damages] == [(size, 200)]
    assert "unreadable batch header" in damages[0].reason


def test_a_segment_deleted_after_planning_is_reported_not_raised(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(2))
    (piece,) = plan_slices([str(tmp_path)])
    log.segments[0].unlink()  # retention got there first

    (damage,) = scan_slice(piece)

    assert isinstance(damage, Corruption) and damage.reason.startswith("cannot open")
    assert damage.length == piece.end - piece.start


def test_time_range_keeps_records_in_the_half_open_interval(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append(make_records(5, start_ts=T0))  # T0, T0+1s, ... T0+4s
    log.append(make_records(2, start_ts=T0 - 100_000))  # entirely before the range
    (piece,) = plan_slices([str(tmp_path)])

    kept = list(scan_slice(piece, TimeRange(T0 + 1000, T0 + 3000)))

    assert _offsets(kept) == [1, 2]


def test_scan_rows_give_a_row_per_record_per_batch_and_per_corruption(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.append([Record(b"v", b"k"), Record(None)])
    log.tear_tail(make_records(1))
    (piece,) = plan_slices([str(tmp_path)])

    kinds = [row[0] for row in scan_rows(piece)]

    assert kinds == ["record", "record", "batch", "corruption"]


def test_record_checksum_covers_epoch_timestamp_key_value_and_headers() -> None:
    base = DecodedRecord(0, T0, b"k", b"v", (("h", b"1"),))
    variants = [
        DecodedRecord(0, T0 + 1, b"k", b"v", (("h", b"1"),)),
        DecodedRecord(0, T0, None, b"v", (("h", b"1"),)),
        DecodedRecord(0, T0, b"", b"v", (("h", b"1"),)),
        DecodedRecord(0, T0, b"k", None, (("h", b"1"),)),
        DecodedRecord(0, T0, b"k", b"v", (("h", None),)),
        DecodedRecord(0, T0, b"k", b"v", ()),
    ]
    sums = {record_checksum(0, base), record_checksum(1, base)}
    sums |= {record_checksum(0, v) for v in variants}
    assert len(sums) == 2 + len(variants)
    # the offset is not part of it: the same record at another offset sums the same
    assert record_checksum(0, DecodedRecord(9, T0, b"k", b"v", (("h", b"1"),))) in sums
