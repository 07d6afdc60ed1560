"""LeaderEpochCache: assignment rules, KIP-279 end offsets, truncation, persistence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.storage.errors import CorruptCheckpointError
from minibroker.storage.leader_epoch import UNDEFINED_EPOCH, EpochEntry, LeaderEpochCache
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from tests.unit.storage.batches import batch


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path, lambda: 100)
    for epoch, start in [(1, 0), (3, 20), (4, 50)]:
        cache.assign(epoch, start)
    return cache


def test_assign_is_written_through_in_kafkas_format(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 20\n4 50\n"
    assert LeaderEpochCache(tmp_path, lambda: 0).entries == cache.entries
    assert cache.latest_epoch == 4


def test_assigning_the_latest_epoch_again_changes_nothing(cache: LeaderEpochCache) -> None:
    cache.assign(4, 70)
    assert cache.entries[-1] == EpochEntry(4, 50)


def test_assign_replaces_conflicting_entries(cache: LeaderEpochCache) -> None:
    cache.assign(5, 30)  # a new leader whose log diverged at 30
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 20), EpochEntry(5, 30)]
    cache.assign(2, 10)  # an older epoch: everything from epoch 2 on is replaced
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]


@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (4, (4, 100)),  # latest epoch: ends at the log end
        (3, (3, 50)),  # ends where the next epoch starts
        (2, (1, 20)),  # KIP-279: largest epoch <= 2 is 1, which ends at 20
        (0, (0, 0)),  # below every epoch: the first start offset
        (5, (UNDEFINED_EPOCH, -1)),  # above every epoch
        (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, -1)),
    ],
)
def test_end_offset_for_follows_kip_279(
    cache: LeaderEpochCache, requested: int, answer: tuple[int, int]
) -> None:
    assert cache.end_offset_for(requested) == answer


def test_empty_cache_knows_no_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path, lambda: 7)
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.end_offset_for(0) == (UNDEFINED_EPOCH, -1)


def test_truncate_from_end_drops_epochs_starting_at_or_after(cache: LeaderEpochCache) -> None:
    cache.truncate_from_end(50)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 20)]
    cache.truncate_from_end(21)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 20)]


def test_truncate_from_start_moves_the_first_epoch_up(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.truncate_from_start(30)
    assert cache.entries == [EpochEntry(3, 30), EpochEntry(4, 50)]
    cache.truncate_from_start(50)
    assert cache.entries == [EpochEntry(4, 50)]
    assert LeaderEpochCache(tmp_path, lambda: 0).entries == [EpochEntry(4, 50)]


def test_clear_empties_the_file(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.clear()
    assert LeaderEpochCache(tmp_path, lambda: 0).entries == []


def test_out_of_order_checkpoint_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n3 10\n2 20\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache(tmp_path, lambda: 0)


def test_changes_reach_the_file_at_once_but_the_disk_only_on_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    cache = LeaderEpochCache(tmp_path, lambda: 0)
    cache.assign(1, 0)
    cache.assign(2, 5)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 5\n"
    assert synced == []  # no disk wait per epoch change on the broker's event loop
    cache.flush()
    assert len(synced) == 2  # the file, then its directory
    cache.flush()
    assert len(synced) == 2  # nothing changed since


def test_log_flush_makes_the_epoch_checkpoint_durable_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed: list[str] = []
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(os.readlink(f"/proc/self/fd/{fd}")))
    log = Log(tmp_path / "t-0", LogConfig(), clock=lambda: 0)
    log.append(batch([b"x"]), leader_epoch=3)
    log.flush()
    assert flushed[0].endswith("leader-epoch-checkpoint")
    assert any(name.endswith(".log") for name in flushed)
    log.close()


def test_deferred_assign_changes_memory_and_leaves_the_file_to_write_pending(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.assign(6, 70, defer_write=True)
    assert cache.latest_epoch == 6
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 20\n4 50\n"
    cache.write_pending()
    assert LeaderEpochCache(tmp_path, lambda: 0).entries == cache.entries


def test_flush_writes_a_deferred_epoch_before_syncing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    cache = LeaderEpochCache(tmp_path, lambda: 0)
    cache.assign(2, 5, defer_write=True)
    cache.flush()  # the Log does this before moving its recovery point
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 5\n"
    assert len(synced) == 2
