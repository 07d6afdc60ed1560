"""``minibroker dump-log``: Kafka-like listings of .log, .index, .timeindex and .snapshot files,
index verification, and one-line errors for files it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.command.main import main
from minibroker.protocol.offsets_topic import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from minibroker.protocol.records import Record, encode_batch
from tests.unit.storage.batches import batch, open_log


@pytest.fixture
def segment_dir(tmp_path: Path) -> Path:
    log = open_log(tmp_path / "t-0")
    log.append(
        bytearray(encode_batch([Record(b"hello", key=b"k1", timestamp=1_000)])), leader_epoch=3
    )
    log.append(batch([b"a" * 300, b"b" * 300], timestamp=2_000))
    for i in range(6):
        log.append(batch([b"%d" % i], timestamp=3_000 + i))
    log.close()
    return tmp_path / "t-0"


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["dump-log", *args])
    return code, capsys.readouterr().out.splitlines()


def test_log_listing_shows_kafkas_batch_fields(
    segment_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = dump(capsys, str(segment_dir / "00000000000000000000.log"))
    assert code == 0
    assert lines[0] == f"Dumping {segment_dir / '00000000000000000000.log'}"
    assert lines[1] == "Log starting offset: 0"
    first = lines[2]
    for field in (
        "baseOffset: 0 lastOffset: 0 count: 1 ",
        "partitionLeaderEpoch: 3 ",
        "position: 0 CreateTime: 1000 ",
        "magic: 2 compresscodec: none crc: ",
        "isvalid: true",
    ):
        assert field in first
    assert "baseOffset: 1 lastOffset: 2 count: 2" in lines[3]
    assert len(lines) == 2 + 8


def test_print_data_log_adds_one_line_per_record(
    segment_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines = dump(capsys, "--print-data-log", str(segment_dir / "00000000000000000000.log"))
    assert lines[3] == (
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 "
        "headerKeys: [] key: k1 payload: hello"
    )
    assert lines[5].startswith("| offset: 1 CreateTime: 2000 keySize: -1 valueSize: 300 ")


def test_corrupt_batch_and_torn_tail_are_reported(
    segment_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = segment_dir / "00000000000000000000.log"
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0xFF  # inside the second batch's records
    path.write_bytes(raw + b"\x00" * 10)
    code, lines = dump(capsys, str(path))
    assert code == 1
    assert "isvalid: false" in lines[3] and "isvalid: true" in lines[2]
    assert lines[-1] == "Found 10 invalid bytes at the end of 00000000000000000000.log"


def test_index_files_list_entries_that_match_the_log(
    segment_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = dump(
        capsys,
        str(segment_dir / "00000000000000000000.index"),
        str(segment_dir / "00000000000000000000.timeindex"),
    )
    assert code == 0
    assert any(line.startswith("offset: ") and " position: " in line for line in lines)
    assert any(line.startswith("timestamp: ") for line in lines)
    assert not any("Mismatches" in line for line in lines)
    code, lines = dump(
        capsys, "--verify-index-only", str(segment_dir / "00000000000000000000.index")
    )
    assert (code, lines) == (0, [f"Dumping {segment_dir / '00000000000000000000.index'}"])


def test_verify_index_only_reports_entries_that_disagree_with_the_log(
    segment_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = segment_dir / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    assert raw, "the fixture must produce index entries"
    raw[3] += 1  # first entry now names the wrong offset
    index.write_bytes(raw)
    code, lines = dump(capsys, "--verify-index-only", str(index))
    assert code == 1
    assert lines[1] == f"Mismatches in :{index}"
    assert lines[2].startswith("  Index offset: ")


def test_unreadable_files_give_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dump-log", str(tmp_path / "notes.txt")]) == 1
    assert main(["dump-log", str(tmp_path / "00000000000000000000.log")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("minibroker dump-log: error: ") and "not a segment file" in err[0]
    assert "no such file" in err[1]


def test_indexes_of_a_live_segment_stop_at_the_preallocated_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        # Nothing indexed yet: a new segment's indexes are made when first needed.
        assert not (tmp_path / "t-0" / "00000000000000000000.timeindex").exists()
        for i in range(20):
            log.append(batch([b"v" * 100], timestamp=1_000 + i))
        code, lines = dump(
            capsys,
            str(tmp_path / "t-0" / "00000000000000000000.index"),
            str(tmp_path / "t-0" / "00000000000000000000.timeindex"),
        )
        assert code == 0
        assert not [line for line in lines if line.endswith(("position: 0", "offset: 0"))]
        assert len(lines) == 2 + 2 * 9  # nine entries in each index
    finally:
        log.close()


def test_a_producer_state_snapshot_lists_each_producers_last_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = open_log(tmp_path / "t-0")
    records = [Record(b"x", timestamp=7_000)] * 3
    log.append(
        bytearray(encode_batch(records, producer_id=42, producer_epoch=2, base_sequence=0)),
        leader_epoch=0,
    )
    log.close()  # a clean close writes the snapshot at the log end
    snapshot = tmp_path / "t-0" / "00000000000000000003.snapshot"
    code, lines = dump(capsys, str(snapshot))
    assert code == 0
    assert lines[1] == (
        "producerId: 42 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: None "
        "lastTimestamp: 7000 firstSequence: 0 lastSequence: 2 lastOffset: 2 offsetDelta: 2 "
        "timestamp: 7000"
    )
    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    code, lines = dump(capsys, str(snapshot))
    assert code == 1 and lines[1].startswith("invalid snapshot")


def test_records_of_the_offsets_topic_are_printed_decoded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_key = encode_offset_commit_key(OffsetCommitKey("g", "orders", 2))
    group_key = encode_group_metadata_key(GroupMetadataKey("g"))
    records = [
        Record(encode_offset_commit_value(OffsetCommitValue(41, "meta", 5)), key=commit_key),
        Record(
            encode_group_metadata_value(GroupMetadataValue("consumer", 3, "range", "m", 7, ())),
            key=group_key,
        ),
        Record(None, key=commit_key),
    ]
    log = open_log(tmp_path / "__consumer_offsets-7")
    log.append(bytearray(encode_batch(records, now_ms=1_000)))
    log.close()
    _, lines = dump(
        capsys,
        "--print-data-log",
        str(tmp_path / "__consumer_offsets-7" / "00000000000000000000.log"),
    )
    data = [line for line in lines if line.startswith("| offset:")]
    assert "offset_commit::group=g topic=orders partition=2 offset=41" in data[0]
    assert "metadata='meta' commit_timestamp=5" in data[0]
    assert "group_metadata::group=g protocol_type=consumer generation=3 protocol=range" in data[1]
    assert data[2].endswith("offset_commit::group=g topic=orders partition=2 <DELETE>")
    assert not [line for line in data if "payload:" in line]
