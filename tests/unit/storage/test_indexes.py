"""OffsetIndex and TimeIndex: mmap-ed preallocated files, binary search, trimming and
the sanity check that keeps a crash-damaged index from being trusted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.storage.errors import CorruptIndexError
from minibroker.storage.offset_index import OffsetIndex, OffsetPosition
from minibroker.storage.time_index import TimeIndex, TimestampOffset

BASE = 100


def filled_offset_index(path: Path, count: int = 50) -> OffsetIndex:
    index = OffsetIndex(path, BASE, 4096)
    for i in range(count):
        index.append(BASE + 10 * i + 9, 1000 * (i + 1))
    return index


def test_new_index_is_preallocated_to_whole_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", BASE, 4100)
    assert (tmp_path / "a.index").stat().st_size == 4096
    assert index.max_entries == 512 and index.entries == 0
    index.close()


def test_entries_are_eight_big_endian_bytes(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", BASE, 4096)
    index.append(BASE + 0x0102, 0x0A0B0C)
    index.close()
    assert (tmp_path / "a.index").read_bytes() == bytes.fromhex("00000102 000a0b0c")


def test_lookup_returns_the_largest_entry_at_or_below_the_target(tmp_path: Path) -> None:
    index = filled_offset_index(tmp_path / "a.index")
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)  # before the first entry
    assert index.lookup(BASE + 9) == OffsetPosition(BASE + 9, 1000)
    assert index.lookup(BASE + 18) == OffsetPosition(BASE + 9, 1000)
    assert index.lookup(BASE + 19) == OffsetPosition(BASE + 19, 2000)
    assert index.lookup(10**9) == OffsetPosition(BASE + 499, 50_000)
    assert index.lookup_by_position(2999) == OffsetPosition(BASE + 19, 2000)
    index.close()


def test_lookup_agrees_with_a_linear_scan_everywhere(tmp_path: Path) -> None:
    index = filled_offset_index(tmp_path / "a.index")
    entries = [index.entry(i) for i in range(index.entries)]
    for target in range(BASE - 2, BASE + 520):
        below = [e for e in entries if e.offset <= target]
        assert index.lookup(target) == (below[-1] if below else OffsetPosition(BASE, 0))
    index.close()


def test_append_refuses_offsets_or_positions_that_do_not_grow(tmp_path: Path) -> None:
    index = filled_offset_index(tmp_path / "a.index", 2)
    with pytest.raises(CorruptIndexError):
        index.append(BASE + 19, 5000)
    with pytest.raises(CorruptIndexError):
        index.append(BASE + 30, 2000)
    index.close()


def test_close_trims_and_reopen_restores_the_entries(tmp_path: Path) -> None:
    filled_offset_index(tmp_path / "a.index", 7).close()
    assert (tmp_path / "a.index").stat().st_size == 7 * 8
    index = OffsetIndex(tmp_path / "a.index", BASE, 4096)
    index.sanity_check(log_size=10**6)
    assert index.entries == 7 and index.last_offset == BASE + 69
    index.resize(4096)
    assert not index.is_full and index.entries == 7
    index.close()


def test_truncate_to_removes_entries_at_or_after_the_offset(tmp_path: Path) -> None:
    index = filled_offset_index(tmp_path / "a.index", 5)
    index.truncate_to(BASE + 29)  # entry for 29 goes, 19 stays
    assert index.entries == 2 and index.last_offset == BASE + 19
    index.truncate_to(BASE + 20)
    assert index.entries == 2
    index.truncate_to(BASE)
    assert index.entries == 0 and index.lookup(BASE + 50) == OffsetPosition(BASE, 0)
    index.close()


def test_full_index_reports_full_and_refuses_more(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", BASE, 16)
    index.append(BASE + 1, 10)
    index.append(BASE + 2, 20)
    assert index.is_full
    with pytest.raises(CorruptIndexError):
        index.append(BASE + 3, 30)
    index.close()


def test_untrimmed_index_left_by_a_crash_fails_the_sanity_check(tmp_path: Path) -> None:
    index = filled_offset_index(tmp_path / "a.index", 3)
    index.flush()  # "crash": the file keeps its preallocated zero tail
    reopened = OffsetIndex(tmp_path / "a.index", BASE, 4096)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check(log_size=10**6)
    reopened.close()
    index.close()


def test_rebuilding_an_untrimmed_index_keeps_its_preallocation_a_hole(tmp_path: Path) -> None:
    # After a crash the reopened file counts every slot of its 10 MiB as an entry;
    # zeroing them by writes allocated all of it (20 MB per empty partition).
    path = tmp_path / "a.index"
    OffsetIndex(path, BASE, 10 * 1024 * 1024).abandon()  # what a crash leaves
    reopened = OffsetIndex(path, BASE, 10 * 1024 * 1024)
    assert reopened.entries == reopened.max_entries  # untrusted until checked
    reopened.reset(10 * 1024 * 1024)  # what recovery does before rebuilding
    reopened.append(BASE + 5, 4096)
    reopened.abandon()
    assert path.stat().st_size == 10 * 1024 * 1024
    assert path.stat().st_blocks * 512 <= 8192  # the one page written, not 10 MiB
    again = OffsetIndex(path, BASE, 10 * 1024 * 1024)
    again.truncate_to(BASE)  # the removed tail reads as zeros: no stale entry returns
    again.abandon()
    assert path.read_bytes() == bytes(10 * 1024 * 1024)


def test_an_index_holds_a_descriptor_only_while_mapped(tmp_path: Path) -> None:
    # Thousands of empty partitions: one descriptor each (the .log), not five.
    fds = len(os.listdir("/proc/self/fd"))
    indexes = [OffsetIndex(tmp_path / f"{i}.index", BASE, 4096) for i in range(20)]
    assert len(os.listdir("/proc/self/fd")) == fds
    indexes[0].append(BASE + 1, 100)  # mapped on first use; the mapping keeps one
    assert len(os.listdir("/proc/self/fd")) == fds + 1
    assert indexes[0].lookup(BASE + 1) == OffsetPosition(BASE + 1, 100)
    for index in indexes:
        index.close()
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.mark.parametrize(
    "raw",
    [
        bytes(8),  # all zeros: position 0 never appears in a real index
        bytes.fromhex("00000005 00000100 00000004 00000200"),  # offsets go back
        bytes.fromhex("00000005 00000100 00000006 00000100"),  # positions repeat
        bytes.fromhex("00000005 00009999"),  # position beyond the log
        bytes.fromhex("00000005 000001"),  # a torn entry
    ],
)
def test_sanity_check_rejects_malformed_offset_indexes(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "a.index").write_bytes(raw)
    index = OffsetIndex(tmp_path / "a.index", BASE, 4096)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=0x1000)
    index.close()


def test_time_index_appends_only_growing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", BASE, 4096)
    index.maybe_append(500, BASE + 3)
    index.maybe_append(500, BASE + 7)  # same timestamp: ignored
    index.maybe_append(400, BASE + 9)  # older timestamp: ignored
    index.maybe_append(900, BASE + 12)
    assert [index.entry(i) for i in range(index.entries)] == [
        TimestampOffset(500, BASE + 3),
        TimestampOffset(900, BASE + 12),
    ]
    assert index.lookup(499) == TimestampOffset(-1, BASE)
    assert index.lookup(899) == TimestampOffset(500, BASE + 3)
    assert index.lookup(10**12) == TimestampOffset(900, BASE + 12)
    index.close()
    assert (tmp_path / "a.timeindex").read_bytes()[:12] == bytes.fromhex(
        "00000000000001f4 00000003"
    )


def test_time_index_keeps_one_slot_for_the_final_entry_of_a_roll(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", BASE, 24)
    index.maybe_append(1, BASE)
    assert index.is_full  # 2 slots, one reserved
    with pytest.raises(CorruptIndexError):
        index.maybe_append(2, BASE + 1)
    index.maybe_append(2, BASE + 1, skip_full_check=True)
    assert index.entries == 2
    index.trim()
    index.maybe_append(3, BASE + 2, skip_full_check=True)  # a trimmed file grows by one
    assert index.entries == 3 and index.entry(2) == TimestampOffset(3, BASE + 2)
    index.close()


def test_time_index_truncate_and_sanity(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "a.timeindex", BASE, 4096)
    for i in range(10):
        index.maybe_append(1000 + i, BASE + 2 * i)
    index.truncate_to(BASE + 9)
    assert index.last_entry == TimestampOffset(1004, BASE + 8)
    index.sanity_check(last_offset=BASE + 8)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(last_offset=BASE + 7)
    index.flush()
    crashed = TimeIndex(tmp_path / "a.timeindex", BASE, 4096)
    with pytest.raises(CorruptIndexError):
        crashed.sanity_check(last_offset=BASE + 100)
    crashed.close()
    index.close()
