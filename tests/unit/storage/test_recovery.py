"""Recovery: a log reopened after a crash serves exactly the whole, valid batches that
precede the first damage, and rebuilds whatever index it cannot trust.

A "crash" here is a copy of the partition directory taken while the log is open: the
indexes are still preallocated and untrimmed, as after a kill -9."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.protocol.records import iter_headers, validate_batch
from minibroker.storage.leader_epoch import EpochEntry
from minibroker.storage.log import Log
from minibroker.storage.segment import LogSegment
from tests.unit.storage.batches import batch, open_log, read_all

Records = list[tuple[int, bytes | None]]


def build(directory: Path, batches: int = 70) -> tuple[Log, list[Records]]:
    """A log of several segments; returns it and its records grouped by batch."""
    log = open_log(directory)
    groups: list[Records] = []
    for i in range(batches):
        values = [b"record-%04d-%s" % (i, b"x" * (i % 7) * 9) for _ in range(1 + i % 3)]
        info = log.append(batch(values, timestamp=5_000 + i), leader_epoch=i // 10)
        group: Records = [(info.first_offset + j, value) for j, value in enumerate(values)]
        groups.append(group)
    assert len(log.segments) >= 3 or batches < 70
    return log, groups


def crash_copy(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


def flat(groups: list[Records]) -> Records:
    return [r for g in groups for r in g]


def assert_serves_only_valid_whole_batches(log: Log) -> None:
    for segment in log.segments:
        data = segment.read_at(0, segment.size)
        positions = [p for p, _ in iter_headers(data)]
        for position in positions:
            validate_batch(data, position)
        assert sum(h.size for _, h in iter_headers(data)) == len(data)


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check what recovery keeps, not durability; fsync only costs time."""
    monkeypatch.setattr(os, "fsync", lambda _fd: None)
    monkeypatch.setattr(LogSegment, "flush", lambda _segment: None)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Records]]:
    origin = tmp_path_factory.mktemp("origin") / "t-0"
    log, groups = build(origin)
    image = crash_copy(origin, tmp_path_factory.mktemp("image") / "t-0")
    log.close()
    return image, groups


@pytest.mark.timeout(60)
def test_cutting_the_last_batch_at_every_byte_keeps_every_earlier_batch(
    crashed: tuple[Path, list[Records]], tmp_path: Path, no_fsync: None
) -> None:
    image, groups = crashed
    last_log = sorted(image.glob("*.log"))[-1]
    original = last_log.read_bytes()
    size = len(original)
    last_batch_size = list(iter_headers(last_log.read_bytes()))[-1][1].size
    for cut in range(size - last_batch_size, size):
        for zeros in (0, 37):  # a bare cut, and a cut followed by a preallocated tail
            work = crash_copy(image, tmp_path / "t-0")
            with open(work / last_log.name, "r+b") as f:
                f.truncate(cut)
                f.seek(0, os.SEEK_END)
                f.write(bytes(zeros))
            # A zero tail can rebuild the batch exactly when its cut-off bytes were zeros.
            restored = (original[:cut] + bytes(zeros))[: len(original)] == original
            expected = groups if restored else groups[:-1]
            log = open_log(work, recovery_point=0)
            try:
                assert read_all(log) == flat(expected), f"cut at {cut}"
                assert log.log_end_offset == expected[-1][-1][0] + 1
                assert_serves_only_valid_whole_batches(log)
            finally:
                log.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_flipped_bytes_never_crash_recovery_or_get_served(
    crashed: tuple[Path, list[Records]], tmp_path: Path, no_fsync: None, data: st.DataObject
) -> None:
    image, groups = crashed
    work = crash_copy(image, tmp_path / "t-0")
    logs = sorted(work.glob("*.log"))
    target = data.draw(st.sampled_from(logs))
    raw = bytearray(target.read_bytes())
    flips = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)), min_size=1, max_size=3
        )
    )
    for position, mask in flips:
        raw[position] ^= mask
    target.write_bytes(raw)
    first_flip = min(p for p, _ in flips)
    base = int(target.name.split(".")[0])
    # Batches wholly before the first damaged byte must all survive.
    intact = [
        g
        for g in groups
        if g[0][0] < base
        or any(
            p + h.size <= first_flip and h.base_offset == g[0][0]
            for p, h in iter_headers(image.joinpath(target.name).read_bytes())
        )
    ]
    log = open_log(work, recovery_point=0)
    try:
        served = read_all(log)
        assert served == flat(groups)[: len(served)]  # a prefix of what was written
        assert len(served) >= len(flat(intact))
        assert_serves_only_valid_whole_batches(log)
    finally:
        log.close()


def test_clean_reopen_trusts_checked_indexes_and_recovers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, groups = build(tmp_path / "t-0")
    log.close()
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(segment: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(segment.base_offset)
        return original(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    log = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    assert recovered == []
    assert read_all(log) == flat(groups)
    log.close()


def test_unclean_reopen_recovers_from_the_segment_holding_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, groups = build(tmp_path / "t-0")
    image = crash_copy(tmp_path / "t-0", tmp_path / "crash" / "t-0")
    bases = [s.base_offset for s in log.segments]
    log.close()
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(segment: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(segment.base_offset)
        return original(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    reopened = open_log(image, recovery_point=bases[1] + 1)
    assert recovered == bases[1:]
    assert read_all(reopened) == flat(groups)
    # not fsynced on the way (as Kafka): the checkpointed point stands until a flush
    assert reopened.recovery_point == bases[1] + 1
    reopened.flush()
    assert reopened.recovery_point == reopened.log_end_offset
    reopened.append(batch([b"after"]))
    reopened.close()


def test_corrupt_or_missing_indexes_are_rebuilt(tmp_path: Path) -> None:
    log, groups = build(tmp_path / "t-0")
    log.close()
    directory = tmp_path / "t-0"
    first_index = sorted(directory.glob("*.index"))[0]
    good = first_index.read_bytes()
    assert len(good) >= 16
    # Well-ordered entries that point at the wrong batches: only the log can tell.
    tampered = bytearray(good)
    tampered[-4:] = (int.from_bytes(good[-4:], "big") - 1).to_bytes(4, "big")
    first_index.write_bytes(tampered)
    sorted(directory.glob("*.timeindex"))[1].unlink()
    log = open_log(directory, had_clean_shutdown=True)
    assert read_all(log) == flat(groups)
    for g in groups:
        for offset, value in g:
            assert (offset, value) in read_all(log, start=offset)[:4]
    log.close()
    assert first_index.read_bytes() == good
    assert len(sorted(directory.glob("*.timeindex"))) == len(sorted(directory.glob("*.log")))


def test_leftover_files_of_a_crash_are_cleaned_up_on_load(tmp_path: Path) -> None:
    log, groups = build(tmp_path / "t-0", batches=5)
    log.close()
    directory = tmp_path / "t-0"
    (directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    (directory / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    (directory / "00000000000000009999.index").write_bytes(bytes(8))  # its log is gone
    log = open_log(directory, had_clean_shutdown=True)
    assert read_all(log) == flat(groups)
    log.close()
    names = sorted(p.name for p in directory.iterdir())
    assert not [n for n in names if n.endswith((".deleted", ".tmp")) or "9999" in n]


def test_lost_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "t-0")
    expected = log.leader_epoch_cache.entries
    image = crash_copy(tmp_path / "t-0", tmp_path / "crash" / "t-0")
    log.close()
    (image / "leader-epoch-checkpoint").unlink()
    reopened = open_log(image, recovery_point=0)
    assert reopened.leader_epoch_cache.entries == expected
    assert expected[:2] == [EpochEntry(0, 0), EpochEntry(1, expected[1].start_offset)]
    reopened.close()


def test_log_start_checkpoint_beyond_the_recovered_end_empties_the_log(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "t-0", batches=5)
    log.close()
    reopened = open_log(tmp_path / "t-0", log_start_offset=500, had_clean_shutdown=True)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 500)
    reopened.close()


def test_torn_tail_after_a_clean_shutdown_is_still_cut_before_appending(tmp_path: Path) -> None:
    log, groups = build(tmp_path / "t-0", batches=5)
    log.close()
    segment_file = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(segment_file, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07garbage")
    log = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    log.append(batch([b"next"]))
    assert read_all(log) == [*flat(groups), (groups[-1][-1][0] + 1, b"next")]
    assert_serves_only_valid_whole_batches(log)
    log.close()


def _spy_recover(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(segment: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(segment.base_offset)
        return original(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    return recovered


def test_an_empty_log_makes_no_index_files_and_reopens_without_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    open_log(directory).close()
    assert sorted(p.suffix for p in directory.glob("0*")) == [".log"]
    crashed = open_log(directory)
    crashed.segments[-1].abandon()  # a kill -9 leaves the same: no index files
    recovered = _spy_recover(monkeypatch)
    for clean in (True, False):
        log = open_log(directory, had_clean_shutdown=clean)
        # Clean: trusted as it is; unclean: revalidated past the recovery point, as
        # every segment is, and still nothing to index.
        assert recovered == ([] if clean else [0])
        assert sorted(p.suffix for p in directory.glob("0*")) == [".log"]
        log.close()
    log = open_log(directory)
    log.append(batch([b"first"]))
    assert read_all(log) == [(0, b"first")]
    log.close()


def test_a_segment_holding_less_than_an_index_interval_keeps_its_indexes_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append(batch([b"small"]))
    assert not list(directory.glob("*.index"))  # nothing indexed yet
    image = crash_copy(directory, tmp_path / "crash" / "t-0")
    log.close()
    assert len(list(directory.glob("*.index"))) == len(list(directory.glob("*.timeindex"))) == 1
    recovered = _spy_recover(monkeypatch)
    log = open_log(directory, had_clean_shutdown=True)
    assert recovered == []  # a clean close leaves indexes the reload trusts
    assert read_all(log) == [(0, b"small")]
    log.close()
    # A crash before any index file was made: the data is there, the indexes rebuilt.
    crashed = open_log(image, recovery_point=1)
    assert recovered == [0]
    assert read_all(crashed) == [(0, b"small")]
    crashed.close()
