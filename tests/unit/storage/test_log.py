"""Log: offset assignment, validation, reads, rolls, retention, truncation, time lookups,
and a hypothesis model of append/read/truncate/reopen."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.protocol.errors import (
    CorruptMessageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from minibroker.protocol.records import iter_headers, read_header
from minibroker.storage.leader_epoch import EpochEntry
from minibroker.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log
from minibroker.storage.time_index import TimestampOffset
from tests.unit.storage.batches import SMALL, batch, open_log, read_all, values_of


def values(n: int, start: int = 0, size: int = 30) -> list[bytes]:
    return [b"%0*d" % (size, start + i) for i in range(n)]


def test_append_assigns_offsets_in_place_and_stamps_the_leader_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = batch(values(3), base_offset=777)
    info = log.append(first, leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 2, 1)
    header = read_header(first)
    assert (header.base_offset, header.partition_leader_epoch) == (0, 4)  # patched in place
    info = log.append(batch(values(2, 3)) + batch(values(1, 5)), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.num_batches) == (3, 5, 2)
    assert log.log_end_offset == 6
    assert read_all(log) == list(enumerate(values(6)))
    assert log.leader_epoch_cache.entries == [EpochEntry(4, 0), EpochEntry(5, 3)]
    log.close()


def test_read_only_records_are_copied_once_to_assign_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(values(2)))
    frozen = bytes(batch(values(1, 2), base_offset=99))
    assert log.append(frozen, leader_epoch=1).first_offset == 2
    assert read_header(frozen).base_offset == 99  # the caller's bytes are untouched
    assert read_all(log) == list(enumerate(values(3)))
    log.close()


def test_bad_batches_are_refused_and_leave_the_log_unchanged(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(values(2)))
    corrupt = batch(values(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        log.append(batch(values(1)) + corrupt)
    with pytest.raises(CorruptMessageError):
        log.append(batch(values(1)) + b"\x00\x01")  # trailing bytes
    log.config = dataclasses.replace(SMALL, max_message_bytes=1000)
    with pytest.raises(MessageTooLargeError):
        log.append(batch([b"x" * 1000]), leader_epoch=1)
    log.config = SMALL
    with pytest.raises(RecordListTooLargeError):
        log.append(batch([b"x" * 3000]) + batch([b"y" * 3000]))
    assert log.log_end_offset == 2 and log.size == len(batch(values(2)))
    assert log.leader_epoch_cache.entries == []
    log.close()


def test_follower_append_keeps_offsets_and_starts_a_segment_at_a_gap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(batch(values(2), base_offset=0, epoch=3))
    log.append_as_follower(bytes(batch(values(2), base_offset=10, epoch=4)))
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.log_end_offset == 12
    with pytest.raises(CorruptMessageError):
        log.append_as_follower(batch(values(1), base_offset=11))
    with pytest.raises(CorruptMessageError):  # a gap inside one append
        log.append_as_follower(batch(values(1), base_offset=12) + batch(values(1), base_offset=14))
    assert log.leader_epoch_cache.entries == [EpochEntry(3, 0), EpochEntry(4, 10)]
    log.close()


def test_segments_roll_before_exceeding_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(100):
        log.append(batch(values(3, 3 * i)))
    sizes = [s.size for s in log.segments]
    assert len(sizes) == 5 and all(size <= SMALL.segment_bytes for size in sizes)
    assert [s.base_offset for s in log.segments[1:]] == [s.next_offset for s in log.segments[:-1]]
    inactive = log.segments[0]
    assert inactive.offset_index.path.stat().st_size == inactive.offset_index.entries * 8
    assert read_all(log) == list(enumerate(values(300)))
    log.close()


def test_segment_rolls_when_segment_ms_passed_since_its_first_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", dataclasses.replace(SMALL, segment_ms=1000))
    log.append(batch(values(1), timestamp=10_000))
    log.append(batch(values(1), timestamp=11_000))  # exactly segment_ms: no roll yet
    log.append(batch(values(1), timestamp=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_segment_rolls_when_its_index_is_full(tmp_path: Path) -> None:
    config = dataclasses.replace(
        SMALL, index_interval_bytes=0, segment_index_bytes=24, segment_bytes=1 << 20
    )
    log = open_log(tmp_path / "t-0", config)
    for i in range(10):
        log.append(batch(values(1, i)))
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert len(log.segments) > 2
    assert read_all(log) == list(enumerate(values(10)))
    log.close()


def test_read_respects_max_offset_and_raises_outside_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(40):
        log.append(batch(values(2, 2 * i)))
    high_watermark = 31  # mid-batch: the batch 30..31 is not yet readable
    offset = 0
    seen = []
    while True:
        data = log.read(offset, 500, max_offset=high_watermark).records
        if not data:
            break
        seen += values_of(data)
        offset = seen[-1][0] + 1
    assert [o for o, _ in seen] == list(range(30))
    assert log.read(80, 100).records.nbytes == 0  # at the log end: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(81, 100)
    log.close()


def test_time_based_retention_deletes_old_segments_but_never_the_active_one(
    tmp_path: Path,
) -> None:
    config = dataclasses.replace(SMALL, retention_ms=10_000)
    log = open_log(tmp_path / "t-0", config)
    for i in range(120):
        log.append(batch(values(3, 3 * i), timestamp=1_000 + 100 * i), leader_epoch=i // 20)
    segments = log.segments
    cutoff = segments[2].largest_timestamp + 10_000 + 1  # first three segments expire
    assert log.delete_old_segments(now_ms=cutoff) == 3
    assert log.log_start_offset == segments[3].base_offset
    assert read_all(log) == [
        (o, v) for o, v in enumerate(values(360)) if o >= segments[3].base_offset
    ]
    assert log.leader_epoch_cache.entries[0].start_offset >= log.log_start_offset
    assert log.delete_old_segments(now_ms=10**12) == len(segments) - 4
    assert len(log.segments) == 1 and log.log_end_offset == 360
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    log.close()


def test_size_based_retention_keeps_the_newest_segments_under_the_limit(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, retention_bytes=10_000)
    log = open_log(tmp_path / "t-0", config)
    for i in range(100):
        log.append(batch(values(3, 3 * i)))
    log.delete_old_segments()
    assert log.size >= 10_000 - SMALL.segment_bytes and log.size - log.segments[0].size < 10_000
    log.close()


def test_one_retention_pass_applies_time_then_size_then_the_log_start(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, retention_ms=10_000, retention_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    for i in range(240):
        log.append(batch(values(3, 3 * i), timestamp=1_000 + 100 * i))
    segments = log.segments
    assert len(segments) > 8
    # Time lets the first two go, size the next two, the log start the two after.
    log.config = dataclasses.replace(config, retention_bytes=sum(s.size for s in segments[4:]))
    log.maybe_increment_log_start_offset(segments[6].base_offset + 1)
    now = segments[1].largest_timestamp + 10_000 + 1
    assert log.delete_old_segments(now_ms=now) == 6
    assert [s.base_offset for s in log.segments] == [s.base_offset for s in segments[6:]]
    assert log.log_start_offset == segments[6].base_offset + 1
    log.close()


def test_deleted_segments_wait_for_file_delete_delay(tmp_path: Path) -> None:
    now = [1_000]
    config = dataclasses.replace(SMALL, retention_bytes=0, file_delete_delay_ms=500)
    log = Log(tmp_path / "t-0", config, clock=lambda: now[0])
    for i in range(80):
        log.append(batch(values(3, 3 * i)))
    deleted = log.delete_old_segments()
    assert deleted == len(log.segments) + deleted - 1 > 0
    parked = sorted(p.name for p in (tmp_path / "t-0").glob("*.deleted"))
    assert len(parked) == 3 * deleted
    now[0] += 499
    assert log.delete_expired_files() == 0
    now[0] += 1
    assert log.delete_expired_files() == deleted
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    log.close()


def test_truncate_to_across_segments_then_append_continues(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(100):
        log.append(batch(values(3, 3 * i)), leader_epoch=i // 25)
    assert log.truncate_to(100)  # mid-batch 99..101: the batch goes whole
    assert log.log_end_offset == 99
    assert all(s.base_offset <= 99 for s in log.segments)
    assert log.leader_epoch_cache.entries == [EpochEntry(0, 0), EpochEntry(1, 75)]
    assert not log.truncate_to(500)
    log.append(batch(values(3, 99)), leader_epoch=7)
    assert read_all(log) == list(enumerate(values(102)))
    log.close()


def test_truncate_fully_and_start_at_restarts_an_empty_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(30):
        log.append(batch(values(3, 3 * i)), leader_epoch=1)
    log.truncate_fully_and_start_at(1234)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (1234, 1234, 1)
    assert log.leader_epoch_cache.entries == []
    log.append(batch(values(1)))
    assert read_all(log) == [(1234, values(1)[0])]
    log.close()


def test_offset_for_timestamp_searches_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(50):
        log.append(batch(values(2, 2 * i), timestamps=[1000 + 10 * i, 1005 + 10 * i]))
    assert log.offset_for_timestamp(0) == TimestampOffset(1000, 0)
    assert log.offset_for_timestamp(1001) == TimestampOffset(1005, 1)
    assert log.offset_for_timestamp(1006) == TimestampOffset(1010, 2)
    assert log.offset_for_timestamp(1333) == TimestampOffset(1335, 67)
    assert log.offset_for_timestamp(1495) == TimestampOffset(1495, 99)
    assert log.offset_for_timestamp(1496) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == TimestampOffset(-1, 0)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == TimestampOffset(-1, 100)
    log.close()


# --- model equivalence -------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(st.integers(1, 4), min_size=1, max_size=3),
            st.integers(0, 120),
        ),
        st.tuples(st.just("read"), st.integers(0, 400), st.integers(1, 3000)),
        st.tuples(st.just("truncate"), st.integers(0, 400)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("roll")),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_log_behaves_like_a_list_of_batches(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    directory = tmp_path_factory.mktemp("model") / "t-0"
    log = open_log(directory)
    model: list[list[tuple[int, bytes | None]]] = []  # batches of (offset, value)
    counter = 0
    try:
        for op in ops:
            end = model[-1][-1][0] + 1 if model else 0
            if op[0] == "append":
                _, shape, size = op
                data = bytearray()
                for count in shape:
                    vals = [b"%d" % (counter + i) + b"." * size for i in range(count)]
                    counter += count
                    data += batch(vals)
                    model.append([(end + i, v) for i, v in enumerate(vals)])
                    end += count
                log.append(data)
            elif op[0] == "read":
                _, offset, max_bytes = op
                if offset > end:
                    with pytest.raises(OffsetOutOfRangeError):
                        log.read(offset, max_bytes)
                    continue
                served = log.read(offset, max_bytes).records
                containing = [b for b in model if b[-1][0] >= offset]
                if not containing:
                    assert len(served) == 0
                    continue
                got = values_of(served)
                assert got == [r for b in containing for r in b][: len(got)]
                assert got[0][0] == containing[0][0][0]  # starts with the batch holding offset
                sizes = [h.size for _, h in iter_headers(served)]
                assert sum(sizes) == len(served)  # whole batches only
                assert len(served) <= max(max_bytes, sizes[0])
            elif op[0] == "truncate":
                log.truncate_to(op[1])
                model = [b for b in model if b[-1][0] < op[1]]
            elif op[0] == "reopen":
                log.close()
                log = open_log(directory, had_clean_shutdown=op[1])
            else:
                log.roll()
            assert log.log_end_offset == (model[-1][-1][0] + 1 if model else log.log_end_offset)
        assert read_all(log) == [r for b in model for r in b]
    finally:
        log.close()
