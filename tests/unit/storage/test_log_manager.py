"""LogManager: placement over log.dirs, loading, clean/unclean restarts, checkpoints,
-delete and -future directories, the per-dir lock."""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

import pytest

from minibroker.protocol.errors import LogDirNotFoundError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import LogDirError
from minibroker.storage.log_load_progress import LogLoadProgress
from minibroker.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from minibroker.storage.segment import LogSegment
from tests.unit.storage.batches import SMALL, batch, read_all

T0, T1, T2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("a-b.c", 2)


def manager(dirs: list[Path]) -> LogManager:
    return LogManager(dirs, SMALL, clock=lambda: 1_000)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


def test_new_partitions_go_to_the_dir_with_fewest_or_the_preferred_one(dirs: list[Path]) -> None:
    logs = manager(dirs)
    assert logs.get_or_create_log(T0).dir == dirs[0] / "orders-0"
    assert logs.get_or_create_log(T1).dir == dirs[1] / "orders-1"
    assert logs.get_or_create_log(T2, preferred_dir=dirs[1]).dir == dirs[1] / "a-b.c-2"
    assert logs.get_or_create_log(T2) is logs.get_log(T2)  # existing log is returned
    with pytest.raises(LogDirNotFoundError):
        logs.get_or_create_log(TopicPartition("x", 0), preferred_dir=dirs[0].parent / "nope")
    logs.close()


def test_clean_restart_reloads_every_log_without_recovery(
    dirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = manager(dirs)
    for tp in (T0, T1, T2):
        for i in range(30):
            logs.get_or_create_log(tp).append(batch([b"%s-%d" % (str(tp).encode(), i)]))
    before = {tp: read_all(log) for tp, log in logs.logs.items()}
    logs.close()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text().startswith("0\n")
    monkeypatch.setattr(LogSegment, "recover", lambda *a, **k: pytest.fail("recovered"))
    again = manager(dirs)
    assert {tp: read_all(log) for tp, log in again.logs.items()} == before
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # a crash is unclean
    again.close()


def test_unclean_restart_recovers_after_the_checkpointed_recovery_point(
    dirs: list[Path],
) -> None:
    logs = manager(dirs)
    log = logs.get_or_create_log(T0)
    for i in range(50):
        log.append(batch([b"v%d" % i]))
    log.flush()
    logs.checkpoint_recovery_points()
    last_segment = log.segments[-1].log_path
    log.append(batch([b"torn"]))
    logs.abandon()  # kill -9: no flush, no checkpoint, no clean-shutdown file
    assert last_segment.with_suffix(".index").stat().st_size == SMALL.segment_index_bytes
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    with open(last_segment, "r+b") as f:
        f.truncate(last_segment.stat().st_size - 3)
    again = manager(dirs)
    recovered = again.get_log(T0)
    assert recovered is not None
    assert read_all(recovered) == [(i, b"v%d" % i) for i in range(50)]
    again.close()


def test_corrupt_recovery_checkpoint_means_recovering_everything(dirs: list[Path]) -> None:
    logs = manager(dirs)
    logs.get_or_create_log(T0).append(batch([b"x"]))
    logs.close()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    (dirs[0] / CLEAN_SHUTDOWN_FILE).unlink()
    again = manager(dirs)
    log = again.get_log(T0)
    assert log is not None and read_all(log) == [(0, b"x")]
    again.close()


def test_checkpoints_list_every_log_of_their_dir(dirs: list[Path]) -> None:
    logs = manager(dirs)
    logs.get_or_create_log(T0).append(batch([b"a", b"b"]))
    logs.get_or_create_log(T1)
    log = logs.get_or_create_log(T2, preferred_dir=dirs[0])
    log.append(batch([b"c"]))
    log.maybe_increment_log_start_offset(1)
    logs.flush_logs()
    logs.checkpoint_recovery_points()
    logs.checkpoint_log_start_offsets()
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == (
        "0\n2\norders 0 2\na-b.c 2 1\n"
    )
    assert (dirs[0] / "log-start-offset-checkpoint").read_text() == (
        "0\n2\norders 0 0\na-b.c 2 1\n"
    )
    logs.write_replication_offsets(dirs[1], {T1: 0})
    assert logs.read_replication_offsets(dirs[1]) == {T1: 0}
    logs.close()


def test_deleted_logs_are_renamed_at_once_and_removed_later(dirs: list[Path]) -> None:
    logs = manager(dirs)
    logs.get_or_create_log(T0).append(batch([b"x"]))
    renamed = logs.delete_log(T0)
    assert renamed is not None and renamed.name.startswith("orders-0.")
    assert renamed.name.endswith("-delete") and len(renamed.name) == len("orders-0.") + 32 + 7
    assert logs.get_log(T0) is None and not (dirs[0] / "orders-0").exists()
    assert logs.remove_deleted_logs() == 1
    assert not renamed.exists()
    logs.close()


def test_delete_dirs_left_by_a_crash_are_removed_and_future_dirs_loaded(
    dirs: list[Path],
) -> None:
    logs = manager(dirs)
    logs.get_or_create_log(T0).append(batch([b"current"]))
    future = logs.get_or_create_log(T0, is_future=True)
    assert future.dir.parent == dirs[1] and future.dir.name.endswith("-future")
    future.append_as_follower(batch([b"current"]))
    logs.get_or_create_log(T1).append(batch([b"doomed"]))
    doomed = logs.delete_log(T1)
    logs.close()  # a restart before the background removal ran
    again = manager(dirs)
    assert again.pending_deletions == [doomed]
    assert set(again.future_logs) == {T0}
    again.remove_deleted_logs()
    moved = again.replace_current_with_future(T0)
    assert moved.dir == dirs[1] / "orders-0"
    assert read_all(moved) == [(0, b"current")]
    assert again.remove_deleted_logs() == 1
    assert not (dirs[0] / "orders-0").exists()
    again.close()


def test_a_log_dir_can_be_used_by_one_manager_at_a_time(dirs: list[Path]) -> None:
    logs = manager(dirs)
    with pytest.raises(LogDirError, match="in use"):
        manager(dirs[1:])
    logs.close()
    manager(dirs).close()


def test_same_partition_in_two_dirs_is_refused(dirs: list[Path]) -> None:
    for d in dirs:
        os.makedirs(d / "orders-0")
    with pytest.raises(LogDirError, match="found twice"):
        manager(dirs)


def test_flush_rolled_logs_moves_recovery_points_past_rolled_segments(
    dirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = manager(dirs)
    log = logs.get_or_create_log(T0)
    for i in range(200):
        log.append(batch([b"v%03d" % i]))
    assert len(log.segments) > 2 and log.recovery_point == 0
    logs.flush_rolled_logs()
    assert log.recovery_point == log.active_segment.base_offset
    assert logs.flush_stats.count == 1 and logs.flush_stats.seconds > 0
    logs.flush_rolled_logs()  # nothing rolled since: nothing to flush, nothing counted
    assert logs.flush_stats.count == 1
    logs.checkpoint_recovery_points()
    logs.abandon()
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(segment: LogSegment, *args: object, **kwargs: object) -> int:
        recovered.append(segment.base_offset)
        return original(segment, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", spy)
    again = manager(dirs)
    reloaded = again.get_log(T0)
    assert reloaded is not None
    assert recovered == [reloaded.active_segment.base_offset]  # only the active one
    assert read_all(reloaded) == [(i, b"v%03d" % i) for i in range(200)]
    again.close()


@pytest.mark.timeout(60)
def test_flushing_in_a_thread_races_safely_with_appends_rolls_and_truncation(
    dirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", lambda _fd: None)  # the race, not the disk
    logs = manager(dirs)
    log = logs.get_or_create_log(T0)
    stop = threading.Event()
    failures: list[BaseException] = []

    passes = [0]

    def flusher() -> None:
        while not stop.is_set():
            passes[0] += 1
            try:
                logs.flush_rolled_logs()
                logs.flush_logs()
                logs.checkpoint_recovery_points()
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)
                return

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        expected: list[tuple[int, bytes | None]] = []
        for round_ in range(200):
            for i in range(20):
                info = log.append(batch([b"r%d-%d" % (round_, i)]))
                expected.append((info.first_offset, b"r%d-%d" % (round_, i)))
            cut = expected[len(expected) // 2][0]
            log.truncate_to(cut)
            expected = [r for r in expected if r[0] < cut]
            if round_ % 10 == 9:
                log.truncate_fully_and_start_at(log.log_end_offset + 5)
                expected = []
            log.delete_old_segments()
            assert log.recovery_point <= log.log_end_offset
    finally:
        stop.set()
        thread.join()
    assert failures == []
    assert passes[0] > 10  # the flusher really ran alongside
    assert read_all(log) == expected
    logs.close()


def test_loading_says_how_many_logs_of_each_dir_are_loaded_and_recovered(
    dirs: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    logs = manager(dirs)
    for partition in range(6):
        logs.get_or_create_log(TopicPartition("t", partition)).append(batch([b"x"]))
    logs.abandon()  # a crash: every log is recovered
    with caplog.at_level(logging.INFO, logger="minibroker.storage.log_load_progress"):
        again = LogManager(dirs, SMALL, clock=lambda: 1_000, load_progress_interval_s=0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == (
        f"loading 3 logs in {dirs[0]} (no clean shutdown: recovering past each recovery point)"
    )
    # A line per log here (interval 0), never a "loaded 3/3 ... after" before the last.
    assert re.fullmatch(rf"loaded 1/3 logs in {dirs[0]} \(1 recovered\) after [\d.]+ s", lines[1])
    assert re.fullmatch(rf"loaded 3/3 logs in {dirs[0]} \(3 recovered\) in [\d.]+ s", lines[3])
    assert lines[4].startswith(f"loading 3 logs in {dirs[1]} (no clean")
    again.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="minibroker.storage.log_load_progress"):
        manager(dirs).close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == f"loading 3 logs in {dirs[0]} (clean shutdown: no recovery)"
    assert re.fullmatch(rf"loaded 3/3 logs in {dirs[0]} \(0 recovered\) in [\d.]+ s", lines[1])


def test_progress_lines_come_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    with caplog.at_level(logging.INFO, logger="minibroker.storage.log_load_progress"):
        progress = LogLoadProgress(
            Path("/d"), 100, clean=False, interval_s=1.0, monotonic=lambda: now[0]
        )
        for loaded in range(1, 101):
            now[0] = loaded * 0.1  # ten logs a second
            progress.log_loaded(recovered=loaded % 2 == 0)
        progress.finish()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[1:4] == [
        "loaded 10/100 logs in /d (5 recovered) after 1.0 s",
        "loaded 20/100 logs in /d (10 recovered) after 2.0 s",
        "loaded 30/100 logs in /d (15 recovered) after 3.0 s",
    ]
    assert len(lines) == 1 + 9 + 1  # the start, one a second, the end
    assert lines[-1] == "loaded 100/100 logs in /d (50 recovered) in 10.0 s"


def test_a_clean_close_writes_no_producer_snapshot_for_an_empty_log(dirs: list[Path]) -> None:
    # Two fsyncs per idle partition made stopping a broker of thousands take tens of
    # seconds; an empty log has nothing a snapshot would spare replaying.
    logs = manager(dirs)
    empty, written = logs.get_or_create_log(T0), logs.get_or_create_log(T1)
    written.append(batch([b"x"]))
    logs.close()
    assert not list(empty.dir.glob("*.snapshot"))
    assert [p.name for p in written.dir.glob("*.snapshot")] == ["00000000000000000001.snapshot"]
