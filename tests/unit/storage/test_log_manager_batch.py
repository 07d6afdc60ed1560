"""LogManager.get_or_create_logs: one LeaderAndIsr's new logs created as a batch, each
log dir fsynced once, every log registered only after its dir entry is durable."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage import log_manager as log_manager_module
from minibroker.storage.errors import LogDirError
from minibroker.storage.log_manager import LogManager
from tests.unit.storage.batches import SMALL

TPS = [TopicPartition("orders", p) for p in range(6)]


def manager(dirs: list[Path]) -> LogManager:
    return LogManager(dirs, SMALL, clock=lambda: 1_000)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = log_manager_module.fsync_dir

    def record(directory: Path) -> None:
        calls.append(directory)
        real(directory)

    monkeypatch.setattr(log_manager_module, "fsync_dir", record)
    return calls


def test_a_batch_is_placed_like_one_by_one_and_fsyncs_each_log_dir_once(
    dirs: list[Path], tmp_path: Path, fsynced: list[Path]
) -> None:
    logs = manager(dirs)
    existing = logs.get_or_create_log(TPS[0])
    fsynced.clear()
    created, failures = logs.get_or_create_logs(dict.fromkeys(TPS))
    assert failures == {}
    assert created[TPS[0]] is existing
    assert sorted(fsynced) == dirs  # once per dir, not once per log
    assert all(logs.get_log(tp) is created[tp] for tp in TPS)
    one_by_one = manager([tmp_path / "o1", tmp_path / "o2"])
    expected = [one_by_one.get_or_create_log(tp).dir.parent.name for tp in TPS]
    assert [created[tp].dir.parent.name for tp in TPS] == [f"d{d[1]}" for d in expected]
    one_by_one.close()
    logs.close()


def test_logs_are_registered_only_after_their_log_dir_was_fsynced(
    dirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = manager(dirs)
    registered_at_fsync: list[bool] = []

    def fsync_dir(directory: Path) -> None:
        in_dir = [tp for tp in TPS if (directory / str(tp)).exists()]
        assert in_dir  # the partition dirs exist before their log dir is fsynced...
        registered_at_fsync.append(any(logs.get_log(tp) for tp in in_dir))  # ...unused
        if directory == dirs[1]:
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(log_manager_module, "fsync_dir", fsync_dir)
    created, failures = logs.get_or_create_logs(dict.fromkeys(TPS))
    assert registered_at_fsync == [False, False]
    assert {log.dir.parent for log in created.values()} == {dirs[0]}
    assert set(failures) == {tp for tp in TPS if tp not in created}
    assert failures and all(isinstance(e, OSError) for e in failures.values())
    assert all(logs.get_log(tp) is None for tp in failures)  # not durable: not used
    logs.close()


def test_a_log_that_cannot_be_created_is_reported_and_the_others_are_created(
    dirs: list[Path],
) -> None:
    logs = manager(dirs)
    logs.set_preferred_log_dir(TPS[0], dirs[1])
    logs.mark_log_dir_offline(dirs[1])
    created, failures = logs.get_or_create_logs(dict.fromkeys(TPS))
    assert set(failures) == {TPS[0]} and isinstance(failures[TPS[0]], LogDirError)
    assert set(created) == set(TPS[1:])
    assert {log.dir.parent for log in created.values()} == {dirs[0]}
    logs.close()
