"""Producer state of a partition: the idempotence rules, expiry and Kafka's snapshot files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from minibroker.protocol.crc32c import crc32c_crcmod
from minibroker.protocol.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from minibroker.protocol.records import BatchHeader, Record, encode_batch, read_header
from minibroker.storage.producer_entries import MAX_SEQUENCE, BatchMetadata, ProducerStateEntry
from minibroker.storage.producer_snapshot import decode_snapshot, encode_snapshot
from minibroker.storage.producer_state import ProducerStateManager

PID = 1000


def header(
    sequence: int, count: int = 1, *, epoch: int = 0, pid: int = PID, timestamp: int = 5_000
) -> BatchHeader:
    records = [Record(b"v", timestamp=timestamp)] * count
    return read_header(
        encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
    )


def append(
    manager: ProducerStateManager, h: BatchHeader, offset: int, *, validate: bool = True
) -> BatchMetadata | None:
    pending = manager.append(validate=validate)
    duplicate = pending.add(h, offset)
    if duplicate is None:
        pending.commit(offset + h.last_offset_delta + 1)
    return duplicate


def test_a_repeated_batch_among_the_last_five_is_a_duplicate_with_its_offsets_older_ones_too(
    tmp_path: Path,
) -> None:
    manager = ProducerStateManager(tmp_path)
    for i in range(7):
        assert append(manager, header(i * 2, 2), 100 + i * 2) is None
    # The batches of sequences 4..13 are kept (the last five); 0..3 are forgotten.
    found = append(manager, header(4, 2), 999)
    assert found == BatchMetadata(4, 5, 104, 105, 5_000)
    assert append(manager, header(12, 2), 999) == BatchMetadata(12, 13, 112, 113, 5_000)
    with pytest.raises(DuplicateSequenceNumberError):
        append(manager, header(2, 2), 999)  # written, but older than the five kept
    assert manager.last_entry(PID) is not None
    assert manager.last_entry(PID).last_sequence == 13  # type: ignore[union-attr]


def test_a_sequence_gap_is_out_of_order_and_changes_nothing(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, 3), 0)
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(manager, header(4), 3)
    assert append(manager, header(3), 3) is None
    assert manager.last_entry(PID).last_offset == 3  # type: ignore[union-attr]


def test_an_epoch_older_than_the_producers_is_invalid(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        append(manager, header(1, epoch=2), 1)


def test_a_new_epoch_starts_at_sequence_zero_and_forgets_the_old_batches(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, 5, epoch=0), 0)
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(manager, header(5, epoch=1), 5)
    assert append(manager, header(0, epoch=1), 5) is None
    entry = manager.last_entry(PID)
    assert entry is not None and (entry.epoch, len(entry.batches)) == (1, 1)
    with pytest.raises(InvalidProducerEpochError):
        append(manager, header(5, epoch=0), 6)  # the old epoch's next batch is fenced


def test_an_unknown_producer_starts_at_zero_or_is_told_it_is_unknown(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    with pytest.raises(UnknownProducerIdError):
        append(manager, header(7), 0)
    assert append(manager, header(0), 0) is None


def test_idle_producers_expire_and_then_are_unknown(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    append(manager, header(0, timestamp=10_000), 0)
    append(manager, header(0, pid=7, timestamp=10_500), 1)
    assert manager.remove_expired(10_999) == 0
    assert manager.remove_expired(11_000) == 1
    assert set(manager.producers) == {7}
    with pytest.raises(UnknownProducerIdError):
        append(manager, header(1), 2)


def test_sequences_wrap_from_max_int32_to_zero(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    # A follower learns the producer at the top of the sequence space.
    append(manager, header(MAX_SEQUENCE - 1, 4), 0, validate=False)
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_sequence == 1  # MAX - 1, MAX, 0, 1
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(manager, header(3), 4)
    with pytest.raises(DuplicateSequenceNumberError):
        append(manager, header(MAX_SEQUENCE), 4)  # before 1 once wrapped: written
    assert append(manager, header(2), 4) is None
    assert append(manager, header(MAX_SEQUENCE - 1, 4), 99) == BatchMetadata(
        MAX_SEQUENCE - 1, 1, 0, 3, 5_000
    )


def test_followers_apply_batches_without_checks(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, epoch=5), 0, validate=False)
    append(manager, header(9, epoch=5), 1, validate=False)  # a gap the leader accepted
    entry = manager.last_entry(PID)
    assert entry is not None and (entry.last_sequence, entry.last_offset) == (9, 1)


def test_batches_of_one_append_are_checked_against_each_other(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    pending = manager.append(validate=True)
    assert pending.add(header(0, 2), 0) is None
    with pytest.raises(OutOfOrderSequenceNumberError):
        pending.add(header(5), 2)
    assert manager.producers == {}  # nothing committed


# --- snapshots -----------------------------------------------------------------------


def kafka_snapshot(rows: list[tuple[int, int, int, int, int, int]]) -> bytes:
    """Kafka's snapshot v1, written here independently of the module under test."""
    body = struct.pack(">i", len(rows))
    for pid, epoch, last_seq, last_offset, delta, ts in rows:
        body += struct.pack(">q", pid) + struct.pack(">h", epoch) + struct.pack(">i", last_seq)
        body += struct.pack(">q", last_offset) + struct.pack(">i", delta)
        body += struct.pack(">q", ts) + struct.pack(">i", -1) + struct.pack(">q", -1)
    return struct.pack(">h", 1) + struct.pack(">I", crc32c_crcmod(body)) + body


def test_snapshot_bytes_are_kafkas_format_and_read_back(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, 3, pid=42, epoch=2, timestamp=7_000), 10)
    append(manager, header(3, 2, pid=42, epoch=2, timestamp=8_000), 13)
    append(manager, header(0, 1, pid=7, epoch=0, timestamp=9_000), 15)
    path = manager.take_snapshot()
    assert path.name == "00000000000000000016.snapshot"
    expected = kafka_snapshot([(7, 0, 0, 15, 0, 9_000), (42, 2, 4, 14, 1, 8_000)])
    assert path.read_bytes() == expected
    entries = {e.producer_id: e for e in decode_snapshot(expected)}
    assert list(entries[42].batches) == [BatchMetadata(3, 4, 13, 14, 8_000)]
    assert entries[42].epoch == 2 and entries[7].last_timestamp == 9_000


def test_an_empty_state_snapshots_as_zero_entries() -> None:
    assert encode_snapshot([]) == kafka_snapshot([])
    assert encode_snapshot([ProducerStateEntry(5)]) == kafka_snapshot([])


def test_recovery_uses_the_latest_snapshot_plus_the_batches_after_it(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, 2), 0)
    manager.take_snapshot()  # at 2
    tail = [header(2, 3), header(0, pid=9)]
    offsets = {2: tail[0], 5: tail[1]}
    asked: list[int] = []

    def headers_from(offset: int) -> list[BatchHeader]:
        asked.append(offset)
        return [(h._replace(base_offset=o), None) for o, h in offsets.items() if o >= offset]

    recovered = ProducerStateManager(tmp_path)
    recovered.load(log_start_offset=0, log_end_offset=6, headers_from=headers_from)  # type: ignore[arg-type]
    assert asked == [2]
    entry = recovered.last_entry(PID)
    assert entry is not None
    assert [(b.first_sequence, b.last_offset) for b in entry.batches] == [(0, 1), (2, 4)]
    assert recovered.last_entry(9) is not None and recovered.map_end_offset == 6
    # The replayed tail dedupes like the live state did.
    assert append(recovered, header(2, 3), 99) == BatchMetadata(2, 4, 2, 4, 5_000)


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0), 0)
    manager.take_snapshot()  # at 1
    append(manager, header(1), 1)
    newest = manager.take_snapshot()  # at 2
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF
    newest.write_bytes(bytes(data))
    recovered = ProducerStateManager(tmp_path)
    recovered.load(
        log_start_offset=0,
        log_end_offset=2,
        headers_from=lambda o: iter([(header(1)._replace(base_offset=1), None)] if o <= 1 else []),
    )
    assert not newest.exists()
    assert recovered.last_entry(PID).last_sequence == 1  # type: ignore[union-attr]


def test_without_a_valid_snapshot_the_whole_log_is_replayed(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000003.snapshot").write_bytes(b"\x00\x01\x00")
    recovered = ProducerStateManager(tmp_path)
    asked: list[int] = []

    def headers_from(offset: int) -> list[BatchHeader]:
        asked.append(offset)
        return [
            (header(0)._replace(base_offset=0), None),
            (header(1)._replace(base_offset=1), None),
        ]

    recovered.load(log_start_offset=0, log_end_offset=2, headers_from=headers_from)  # type: ignore[arg-type]
    assert asked == [0]
    assert recovered.last_entry(PID).last_sequence == 1  # type: ignore[union-attr]
    assert recovered.snapshots.offsets() == []


def test_snapshots_beyond_the_log_end_are_dropped_on_load(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    append(manager, header(0, 4), 0)
    manager.take_snapshot()  # at 4
    recovered = ProducerStateManager(tmp_path)
    recovered.load(
        log_start_offset=0,
        log_end_offset=2,
        headers_from=lambda o: iter([]),
    )
    assert recovered.snapshots.offsets() == [] and recovered.producers == {}
