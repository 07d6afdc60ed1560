"""LogSegment: Kafka's sparse index rule, lookups at every offset, reads of whole
batches, time lookups and truncation."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.records import iter_headers, patch_base_offset
from minibroker.storage.segment import LogSegment
from tests.unit.storage.batches import batch, values_of

INTERVAL = 200
BASE = 1000


def new_segment(directory: Path, interval: int = INTERVAL) -> LogSegment:
    return LogSegment(
        directory,
        BASE,
        index_interval_bytes=interval,
        max_index_size=4096,
        created_ms=0,
        create=True,
    )


def fill(
    segment: LogSegment, shape: list[int], *, per_append: int = 1
) -> list[tuple[int, int, int, int]]:
    """Append batches with ``shape[i]`` records of 20 bytes each, ``per_append`` batches
    per append call; returns (base, last, position, size) of each batch."""
    layout = []
    offset = segment.next_offset
    pending = bytearray()
    pending_last = 0
    for i, count in enumerate(shape):
        data = batch([b"v%019d" % (offset + j) for j in range(count)], timestamp=10 * offset)
        patch_base_offset(data, 0, offset)
        layout.append((offset, offset + count - 1, segment.size + len(pending), len(data)))
        pending += data
        pending_last = offset + count - 1
        offset += count
        if (i + 1) % per_append == 0 or i == len(shape) - 1:
            segment.append(pending_last, 10 * (pending_last - count + 1), pending_last, pending)
            pending = bytearray()
    return layout


def expected_index(layout: list[tuple[int, int, int, int]], interval: int) -> list[tuple[int, int]]:
    """Kafka's rule, restated: an entry for a batch once MORE than ``interval`` bytes
    were appended since the last entry, mapping its last offset to its start."""
    entries = []
    since = 0
    for _, last, position, size in layout:
        if since > interval:
            entries.append((last, position))
            since = 0
        since += size
    return entries


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 12), min_size=1, max_size=40),
    per_append=st.integers(1, 4),
    interval=st.sampled_from([0, 1, 100, 200, 1000]),
)
def test_index_sparsity_follows_kafkas_rule(
    tmp_path_factory: object, shape: list[int], per_append: int, interval: int
) -> None:
    directory = tmp_path_factory.mktemp("seg")  # type: ignore[attr-defined]
    segment = new_segment(directory, interval)
    layout = fill(segment, shape, per_append=per_append)
    index = segment.offset_index
    assert [tuple(index.entry(i)) for i in range(index.entries)] == expected_index(layout, interval)
    segment.close()


def test_first_batch_of_a_segment_never_gets_an_entry(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, interval=0)
    fill(segment, [1, 1, 1])
    assert segment.offset_index.entries == 2
    assert segment.offset_index.entry(0).position > 0
    segment.close()


def test_translate_and_read_at_every_offset_including_mid_batch(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    layout = fill(segment, [3, 1, 7, 2, 5, 1, 1, 9, 4] * 4)
    for base, last, position, size in layout:
        for offset in range(base, last + 1):
            found = segment.translate_offset(offset)
            assert found is not None
            assert (found.base_offset, found.last_offset, found.position) == (base, last, position)
            read = segment.read(offset, max_bytes=1)
            assert read is not None
            assert len(read.records) == size  # min one batch: the batch containing offset
            assert values_of(read.records)[0][0] == base
            assert read.next_offset == last + 1
    assert segment.translate_offset(layout[-1][1] + 1) is None
    assert segment.read(layout[-1][1] + 1, 1000) is None
    segment.close()


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    layout = fill(segment, [2] * 30)
    for max_bytes in range(1, layout[-1][2] + layout[-1][3] + 50, 37):
        read = segment.read(BASE, max_bytes)
        assert read is not None
        data = read.records
        ends = [p + s - layout[0][2] for _, _, p, s in layout]
        fitting = [e for e in ends if e <= max_bytes]
        assert len(data) == (fitting[-1] if fitting else ends[0])
        batches = [h for _, h in iter_headers(data)]
        assert len(batches) * layout[0][3] == len(data)
        assert read.next_offset == batches[-1].next_offset
    segment.close()


def test_read_never_serves_a_batch_at_or_beyond_max_offset(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    layout = fill(segment, [4] * 10)
    for max_offset in (BASE + 20, BASE + 22):  # a batch start, and inside batch 20..23
        read = segment.read(BASE, 10**6, max_offset)
        assert read is not None
        assert len(read.records) == layout[5][2] and read.next_offset == BASE + 20
        at_limit = segment.read(BASE + 20, 10**6, max_offset)
        assert at_limit is not None and len(at_limit.records) == 0
    strict = segment.read(BASE, 10, min_one_batch=False)
    assert strict is not None and len(strict.records) == 0 and strict.next_offset == BASE
    segment.close()


def test_find_offset_by_timestamp_returns_the_first_record_at_or_after(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, interval=0)
    stamps = [[100, 105, 103], [110], [108, 120], [120, 130]]
    offset = BASE
    for group in stamps:
        data = batch([b"x"] * len(group), timestamps=group)
        patch_base_offset(data, 0, offset)
        offset += len(group)
        segment.append(offset - 1, max(group), offset - 1, data)
    assert segment.find_offset_by_timestamp(0, BASE) == (100, BASE)
    assert segment.find_offset_by_timestamp(104, BASE) == (105, BASE + 1)
    assert segment.find_offset_by_timestamp(106, BASE) == (110, BASE + 3)
    assert segment.find_offset_by_timestamp(109, BASE) == (110, BASE + 3)
    assert segment.find_offset_by_timestamp(111, BASE) == (120, BASE + 5)
    assert segment.find_offset_by_timestamp(121, BASE) == (130, BASE + 7)
    assert segment.find_offset_by_timestamp(131, BASE) is None
    assert segment.find_offset_by_timestamp(0, BASE + 2) == (103, BASE + 2)
    assert segment.largest_timestamp == 130
    segment.close()


def test_truncate_to_removes_the_batch_holding_the_offset_and_everything_after(
    tmp_path: Path,
) -> None:
    segment = new_segment(tmp_path, interval=0)
    layout = fill(segment, [3] * 10)
    removed = segment.truncate_to(BASE + 13)  # mid-batch: batch 12..14 goes whole
    assert removed == sum(s for _, _, _, s in layout[4:])
    assert segment.size == layout[4][2]
    assert segment.next_offset == BASE + 12
    assert segment.offset_index.last_offset < BASE + 12
    assert segment.time_index.last_entry.offset < BASE + 12
    more = fill(segment, [2])  # appending continues at the new end
    assert more[0][0] == BASE + 12 and more[0][2] == layout[4][2]
    segment.sanity_check()
    segment.close()


def test_close_trims_indexes_and_reopen_passes_the_sanity_check(tmp_path: Path) -> None:
    segment = new_segment(tmp_path, interval=0)
    fill(segment, [2] * 20)
    segment.close()
    assert (tmp_path / f"{BASE:020d}.index").stat().st_size == 19 * 8
    reopened = LogSegment(
        tmp_path, BASE, index_interval_bytes=0, max_index_size=4096, created_ms=0, create=False
    )
    reopened.sanity_check()
    assert reopened.next_offset == BASE + 40
    assert reopened.largest_timestamp == 10 * (BASE + 38)
    reopened.close()
