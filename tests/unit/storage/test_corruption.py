"""Corruption on disk is found, logged at WARNING, counted, never served, and the log
can be cut back to before it (for the broker to re-fetch the rest)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from minibroker.protocol.records import iter_headers
from minibroker.storage.corruption import CorruptionStats, check_batches, last_offset_claimed
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.log import Log
from tests.unit.storage.batches import batch, open_log, read_all, values_of

Records = list[tuple[int, bytes | None]]


def build(directory: Path, batches: int = 60) -> tuple[Log, Records]:
    """A log of several 4 KiB segments, 2 records a batch; its records."""
    log = open_log(directory)
    records: Records = []
    for i in range(batches):
        values = [b"record-%04d-%d" % (i, j) + b"x" * 40 for j in range(2)]
        info = log.append(batch(values))
        records += [(info.first_offset + j, v) for j, v in enumerate(values)]
    assert len(log.segments) >= 3
    return log, records


def flip_middle(path: Path) -> int:
    """Flip 16 bytes in the middle of the records of the batch at mid-file; returns
    the position of that batch."""
    data = path.read_bytes()
    positions = [p for p, _ in iter_headers(data)]
    target = positions[len(positions) // 2]
    with open(path, "r+b") as f:
        f.seek(target + 70)
        chunk = bytearray(f.read(16))
        f.seek(target + 70)
        f.write(bytes(b ^ 0xFF for b in chunk))
    return target


def first_offset_at(path: Path, position: int) -> int:
    return int.from_bytes(path.read_bytes()[position : position + 8], "big")


def test_recovery_after_a_crash_logs_file_offsets_and_bytes_lost_and_counts_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, records = build(tmp_path / "t-0")
    first = log.segments[0]
    log.abandon()  # a kill -9: no clean-shutdown marker, recovery point 0
    position = flip_middle(first.log_path)
    lost_from = first_offset_at(first.log_path, position)
    stats = CorruptionStats()
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path / "t-0", corruption_stats=stats)
    assert reopened.log_end_offset == lost_from
    assert read_all(reopened) == records[:lost_from]
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    truncation = next(line for line in lines if "recovery truncated" in line)
    assert str(first.log_path) in truncation
    assert f"at position {position}" in truncation
    assert f"offsets {lost_from}.." in truncation
    assert "CRC" in truncation
    assert sum("deleted in recovery" in line for line in lines) == len(log.segments) - 1
    assert stats.corrupt["recovery"] == 1
    lost = sum(s.size for s in log.segments) - position
    assert stats.truncated_bytes == lost


def test_a_tail_cut_after_a_clean_stop_is_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, records = build(tmp_path / "t-0")
    active = log.active_segment.log_path
    log.close()
    size = active.stat().st_size
    os.truncate(active, size - 50)
    stats = CorruptionStats()
    with caplog.at_level(logging.WARNING):
        reopened = Log(
            tmp_path / "t-0",
            log.config,
            recovery_point=log.log_end_offset,
            had_clean_shutdown=True,
            corruption_stats=stats,
        )
    assert reopened.log_end_offset == records[-1][0] - 1  # the last batch of 2 is gone
    warning = next(r.getMessage() for r in caplog.records if "recovery truncated" in r.getMessage())
    assert str(active) in warning and "cut short" in warning
    assert stats.corrupt["recovery"] == 1
    assert stats.truncated_bytes > 0


def test_a_read_serves_the_good_batches_before_a_corrupt_one_and_refuses_it(
    tmp_path: Path,
) -> None:
    log, records = build(tmp_path / "t-0")
    first = log.segments[0]
    position = flip_middle(first.log_path)  # after the log was opened: a clean stop
    bad = first_offset_at(first.log_path, position)
    read = log.read(0, 1 << 20)
    assert values_of(read.records) == records[:bad]
    assert read.next_offset == bad
    with pytest.raises(CorruptRecordError) as raised:
        log.read(bad, 1 << 20)
    assert (raised.value.path, raised.value.position) == (str(first.log_path), position)
    with pytest.raises(CorruptRecordError):
        log.read(bad + 1, 1 << 20)  # inside the corrupt batch
    assert log.corruption_stats.corrupt["read"] == 1  # the same batch counts once


def test_repair_cuts_the_log_before_the_corrupt_batch_and_drops_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, records = build(tmp_path / "t-0")
    first = log.segments[0]
    position = flip_middle(first.log_path)
    bad = first_offset_at(first.log_path, position)
    with caplog.at_level(logging.WARNING):
        removed = log.repair_corruption(bad)
    assert removed > 0
    assert log.log_end_offset == bad
    assert len(log.segments) == 1
    assert read_all(log) == records[:bad]
    warning = next(r.getMessage() for r in caplog.records if "repair truncated" in r.getMessage())
    assert f"{first.log_path}: corruption repair truncated" in warning
    assert f"at position {position}: offsets {bad}.." in warning
    # The rest comes back from the leader, offsets kept.
    rest = batch([v for _, v in records[bad : bad + 2] if v is not None], base_offset=bad)
    log.append_as_follower(rest)
    assert log.log_end_offset == bad + 2


def test_repair_of_a_clean_log_removes_nothing(tmp_path: Path) -> None:
    log, records = build(tmp_path / "t-0")
    assert log.repair_corruption(0) == 0
    assert read_all(log) == records


def test_check_batches_finds_a_base_offset_that_does_not_follow() -> None:
    one = batch([b"a", b"b"], base_offset=0)
    two = batch([b"c"], base_offset=5)  # should be 2: baseOffset is outside the CRC
    found = check_batches(bytes(one + two))
    assert (found.valid_bytes, found.next_offset) == (len(one), 2)
    assert found.problem is not None and "baseOffset 5, not 2" in found.problem


def test_last_offset_claimed_walks_the_headers_after_a_cut() -> None:
    data = bytes(batch([b"a"], base_offset=7) + batch([b"b", b"c"], base_offset=8))
    assert last_offset_claimed(data) == 9
    assert last_offset_claimed(b"\x00" * 100) == -1
