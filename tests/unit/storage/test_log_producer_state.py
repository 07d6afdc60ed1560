"""Log + producer state: dedup on the leader, state on followers, reload on restart and
truncation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from minibroker.protocol.errors import OutOfOrderSequenceNumberError, UnknownProducerIdError
from minibroker.protocol.records import Record, encode_batch
from minibroker.storage.log import Log
from tests.unit.storage.batches import SMALL, open_log, read_all

PID = 77


def idempotent(
    sequence: int, values: list[bytes], *, epoch: int = 0, base_offset: int = 0
) -> bytes:
    records = [Record(v, timestamp=1_000) for v in values]
    return encode_batch(
        records,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=sequence,
        base_offset=base_offset,
    )


def fill(log: Log, batches: int, per_batch: int = 4) -> list[bytes]:
    """Append ``batches`` batches of one producer in sequence; returns the values."""
    written: list[bytes] = []
    for i in range(batches):
        values = [b"%05d-%040d" % (i, j) for j in range(per_batch)]
        log.append(idempotent(i * per_batch, values), leader_epoch=0)
        written += values
    return written


def test_a_retried_batch_answers_its_first_offsets_and_is_not_written_again(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0")
    first = log.append(idempotent(0, [b"a", b"b"]), leader_epoch=0)
    log.append(idempotent(2, [b"c"]), leader_epoch=0)
    again = log.append(idempotent(0, [b"a", b"b"]), leader_epoch=0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 1)
    assert not first.duplicate
    assert log.log_end_offset == 3
    assert [v for _, v in read_all(log)] == [b"a", b"b", b"c"]
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append(idempotent(9, [b"x"]), leader_epoch=0)
    assert log.log_end_offset == 3
    log.close()


def test_a_follower_learns_the_producers_so_it_dedups_after_becoming_leader(
    tmp_path: Path,
) -> None:
    follower = open_log(tmp_path / "t-0")
    follower.append_as_follower(idempotent(0, [b"a", b"b"], base_offset=0))
    follower.append_as_follower(idempotent(2, [b"c"], base_offset=2))
    # Now leading: the producer retries the batch whose answer it lost.
    again = follower.append(idempotent(2, [b"c"]), leader_epoch=1)
    assert again.duplicate and again.first_offset == 2
    assert follower.log_end_offset == 3
    follower.close()


def test_state_survives_a_clean_restart_and_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 30)  # several rolls of the 4 KiB segments: snapshots along the way
    assert len(log.segments) >= 2 and log.producer_state.snapshots.offsets()
    last = log.log_end_offset
    log.close()
    reopened = open_log(directory, had_clean_shutdown=True)
    assert reopened.append(idempotent(29 * 4, [b"x"] * 4), leader_epoch=0).duplicate
    reopened.abandon()  # no snapshot at the end this time: the tail is replayed
    crashed = open_log(directory)
    info = crashed.append(idempotent(29 * 4, [b"x"] * 4), leader_epoch=0)
    assert info.duplicate and info.last_offset == last - 1
    crashed.close()


def test_truncation_forgets_the_batches_it_removes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    fill(log, 30)
    log.truncate_to(40)  # batches of sequences 40.. are gone
    assert log.producer_state.last_entry(PID).last_sequence == 39  # type: ignore[union-attr]
    assert all(at <= 40 for at in log.producer_state.snapshots.offsets())
    # The producer resends what was cut: new data at the log end, not a duplicate.
    info = log.append(idempotent(40, [b"y"] * 4), leader_epoch=1)
    assert not info.duplicate and info.first_offset == 40
    log.close()


def test_retention_passes_forget_producers_idle_past_their_expiration(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, producer_id_expiration_ms=5_000)
    log = open_log(tmp_path / "t-0", config)
    log.append(idempotent(0, [b"a"]), leader_epoch=0)  # its batch's timestamp is 1_000
    log.delete_old_segments(now_ms=5_999)
    assert log.producer_state.last_entry(PID) is not None
    log.delete_old_segments(now_ms=6_000)
    assert log.producer_state.last_entry(PID) is None
    with pytest.raises(UnknownProducerIdError):
        log.append(idempotent(1, [b"b"]), leader_epoch=0)
    log.close()
