"""The log-dir mover on real Log files, with Trio's virtual clock for the throttle."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
import trio.testing

from minibroker.broker.logdirs.log_dir_mover import LogDirMover, TokenBucket
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from minibroker.storage.log_manager import LogManager
from tests.unit.storage.batches import SMALL, batch, values_of

TP = TopicPartition("moves", 0)


@dataclass
class FakePartition:
    log: Log


@dataclass
class FakeReplicas:
    log_manager: LogManager
    partitions: dict[TopicPartition, FakePartition] = field(default_factory=dict)
    log_manager_lock: trio.Lock = field(default_factory=trio.Lock)


def hosted(tmp_path: Path) -> FakeReplicas:
    manager = LogManager([tmp_path / "d0", tmp_path / "d1"], SMALL)
    log = manager.get_or_create_log(TP, preferred_dir=tmp_path / "d0")
    return FakeReplicas(manager, {TP: FakePartition(log)})


def everything(log: Log) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        out += values_of(data.records)
        offset = data.next_offset
    return out


def append(log: Log, first: int, count: int, epoch: int = 0) -> None:
    log.append(batch([b"v%d" % i for i in range(first, first + count)]), leader_epoch=epoch)


async def test_token_bucket_holds_its_rate_within_two_percent_over_ten_virtual_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rate = 1_000_000
    bucket = TokenBucket(rate)
    started = trio.current_time()
    sent = 0
    while trio.current_time() - started < 10:
        await bucket.pay(64 * 1024)
        sent += 64 * 1024
    elapsed = trio.current_time() - started
    assert abs(sent / elapsed - rate) / rate < 0.02


async def test_a_throttled_move_of_a_whole_log_takes_size_over_rate(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    replicas = hosted(tmp_path)
    for i in range(200):
        append(replicas.partitions[TP].log, i * 10, 10)
    size = replicas.partitions[TP].log.size
    rate = size / 10  # ten virtual seconds
    mover = LogDirMover(replicas, rate_bytes_per_s=rate)
    replicas.log_manager.get_or_create_log(TP, is_future=True, preferred_dir=tmp_path / "d1")
    started = trio.current_time()
    assert await mover.move(TP)
    elapsed = trio.current_time() - started
    assert mover.bytes_copied == size
    assert 10 * 0.8 <= elapsed <= 10 * 1.2


async def test_records_appended_during_the_move_are_in_the_new_log_exactly_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    replicas = hosted(tmp_path)
    log = replicas.partitions[TP].log
    for i in range(50):
        append(log, i * 10, 10)
    mover = LogDirMover(replicas, rate_bytes_per_s=20_000)
    replicas.log_manager.get_or_create_log(TP, is_future=True, preferred_dir=tmp_path / "d1")

    async def producer() -> None:
        for i in range(50):
            append(replicas.partitions[TP].log, 500 + i * 5, 5)
            await trio.sleep(0.05)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        await trio.sleep(0.2)
        assert await mover.move(TP)
        await trio.sleep(5)  # the producer finishes on the new log
    new = replicas.partitions[TP].log
    assert new.dir.parent == tmp_path / "d1"
    assert [v for _, v in everything(new)] == [b"v%d" % i for i in range(750)]
    assert [o for o, _ in everything(new)] == list(range(750))
    assert not any(p.name.startswith("moves-0") for p in (tmp_path / "d0").iterdir())
    assert replicas.log_manager.get_log(TP, is_future=True) is None


async def test_a_truncated_current_log_cuts_the_future_log_back_at_the_common_epoch(
    tmp_path: Path,
) -> None:
    replicas = hosted(tmp_path)
    log = replicas.partitions[TP].log
    append(log, 0, 10, epoch=1)
    append(log, 10, 10, epoch=2)
    mover = LogDirMover(replicas, rate_bytes_per_s=1e12)
    future = replicas.log_manager.get_or_create_log(
        TP, is_future=True, preferred_dir=tmp_path / "d1"
    )
    while mover.copy_step(TP, log, future, 1 << 20):
        pass
    assert future.log_end_offset == 20
    log.truncate_to(10)  # a follower dropping what its new leader never had
    append(log, 10, 3, epoch=3)
    while mover.copy_step(TP, log, future, 1 << 20):
        pass
    assert everything(future) == everything(log)
    assert [e.epoch for e in future.leader_epoch_cache.entries] == [1, 3]


async def test_retention_on_the_current_log_moves_the_future_log_start(tmp_path: Path) -> None:
    replicas = hosted(tmp_path)
    log = replicas.partitions[TP].log
    append(log, 0, 5)
    mover = LogDirMover(replicas, rate_bytes_per_s=1e12)
    future = replicas.log_manager.get_or_create_log(
        TP, is_future=True, preferred_dir=tmp_path / "d1"
    )
    mover.copy_step(TP, log, future, 1 << 20)
    for i in range(100):
        append(log, 5 + i * 10, 10)
    log.maybe_increment_log_start_offset(900)
    log.delete_old_segments()
    while mover.copy_step(TP, log, future, 1 << 20):
        pass
    assert future.log_start_offset <= log.log_start_offset
    assert everything(future)[-1] == everything(log)[-1]
    assert future.log_end_offset == log.log_end_offset


async def test_a_future_log_without_a_current_log_is_discarded_at_start(tmp_path: Path) -> None:
    replicas = hosted(tmp_path)
    other = TopicPartition("gone", 0)
    replicas.log_manager.get_or_create_log(other, is_future=True)
    mover = LogDirMover(replicas, rate_bytes_per_s=1e12)
    await mover.discard_orphans()
    assert replicas.log_manager.get_log(other, is_future=True) is None
    leftovers = [p for d in replicas.log_manager.log_dirs for p in d.iterdir()]
    assert not any(p.name.startswith("gone-0") for p in leftovers)


async def test_a_cancelled_move_stops_and_deletes_its_future_dir(tmp_path: Path) -> None:
    replicas = hosted(tmp_path)
    append(replicas.partitions[TP].log, 0, 100)
    mover = LogDirMover(replicas, rate_bytes_per_s=1_000)
    await mover.start(TP, tmp_path / "d1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mover.run)
        while mover.moving is None:
            await trio.sleep(0.01)
        await mover.cancel(TP)
        while mover.moving is not None:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert mover.completed == 0
    assert replicas.partitions[TP].log.dir.parent == tmp_path / "d0"
    assert not any(p.name.endswith("-future") for p in (tmp_path / "d1").iterdir())


@pytest.mark.parametrize("rate", [0, -5])
def test_a_token_bucket_needs_a_positive_rate(rate: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate)
