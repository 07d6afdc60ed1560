"""The leader's follower bookkeeping, the ISR rules and acks=all completion."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
import trio
import trio.testing

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.delayed_produce import (
    DelayedProducePurgatory,
    PendingAck,
    await_replication,
    check_acknowledged,
)
from minibroker.broker.replication.hosted_replicas import to_log_config
from minibroker.broker.replication.isr import (
    IsrManager,
    can_join_isr,
    out_of_sync_replicas,
    record_follower_fetch,
)
from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition
from minibroker.protocol.errors import (
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.topic_partition import TopicPartition as ZkTopicPartition
from minibroker.storage.log import Log
from minibroker.zk.values import LeaderAndIsr, WriteResult

ME, F1, F2 = 1, 2, 3
LAG_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make_leader(
    tmp_path: Path,
    clock: Clock,
    isr: tuple[int, ...] = (ME, F1, F2),
    min_insync: str = "1",
    index: int = 0,
) -> Partition:
    properties = {"min.insync.replicas": min_insync}
    config = BrokerConfig.from_properties(None, properties).topic_config()
    partition = Partition(
        TopicPartition("t", index),
        local_broker_id=ME,
        log=Log(tmp_path / f"t-{index}", to_log_config(config)),
        config=config,
        clock=clock,
    )
    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=ME, leader_epoch=0, isr=isr, zk_version=0, replicas=(ME, F1, F2)
    )
    partition.make_leader(state)
    return partition


def append(partition: Partition, *values: bytes) -> int:
    batch = encode_batch([Record(v, timestamp=1) for v in values])
    return partition.append_records_to_leader(batch, required_acks=-1).info.last_offset


def fetch(partition: Partition, replica: int, offset: int) -> None:
    record_follower_fetch(partition, replica, offset, partition.log_end_offset, partition.clock())
    partition.maybe_increment_high_watermark()


def test_hw_waits_for_the_slowest_in_sync_follower(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock)
    append(partition, b"a", b"b")
    fetch(partition, F1, 2)
    assert partition.high_watermark == 0
    fetch(partition, F2, 1)
    assert partition.high_watermark == 1
    fetch(partition, F2, 2)
    assert partition.high_watermark == 2


def test_follower_one_fetch_behind_a_busy_leader_still_counts_as_caught_up(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock)
    append(partition, b"a")
    fetch(partition, F1, 1)  # caught up with LEO 1 at t0
    start = clock.now
    for _ in range(5):
        clock.now += LAG_MS // 2
        append(partition, b"more")  # the leader always moved on before the next fetch
        fetch(partition, F1, partition.log_end_offset - 1)
    caught_up = partition.remote_replicas[F1].last_caught_up_time_ms
    assert caught_up > start  # judged against the LEO at its previous fetch
    assert F1 not in out_of_sync_replicas(partition, clock.now, LAG_MS)


def test_follower_silent_for_the_lag_time_is_out_of_sync(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock)
    append(partition, b"a")
    fetch(partition, F1, 1)
    fetch(partition, F2, 1)
    clock.now += LAG_MS + 1
    fetch(partition, F1, 1)
    assert out_of_sync_replicas(partition, clock.now, LAG_MS) == {F2}


def test_follower_joins_the_isr_once_its_leo_reaches_the_hw(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1))
    append(partition, b"a", b"b")
    fetch(partition, F1, 2)
    assert partition.high_watermark == 2
    fetch(partition, F2, 1)
    assert not can_join_isr(partition, F2)
    fetch(partition, F2, 2)
    assert can_join_isr(partition, F2)


async def test_standalone_isr_manager_applies_shrink_and_expand_in_memory(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1, F2))
    changes: list[bool] = []
    manager = IsrManager(
        partitions=lambda: [partition],
        store=None,
        on_isr_changed=lambda p, expanded: changes.append(expanded),
        clock=clock,
        replica_lag_time_max_ms=LAG_MS,
    )
    append(partition, b"a")
    fetch(partition, F1, 1)
    clock.now += LAG_MS + 1
    fetch(partition, F1, 1)
    manager.maybe_shrink_all()
    assert partition.isr == {ME, F1} and changes == [False]
    fetch(partition, F2, 1)
    manager.maybe_expand(partition, F2)
    assert partition.isr == {ME, F1, F2} and changes == [False, True]
    assert (manager.shrinks, manager.expands) == (1, 1)


def test_acks_all_completes_only_when_the_hw_passes_the_batch(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1), min_insync="2")
    last = append(partition, b"a", b"b")
    pending = PendingAck(partition.tp, last, 0)
    assert check_acknowledged(partition, pending) == (False, None)
    fetch(partition, F1, 2)
    assert check_acknowledged(partition, pending) == (True, None)


def test_acks_all_fails_after_append_when_the_isr_shrank_below_min_insync(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1), min_insync="2")
    last = append(partition, b"a")
    partition.isr = frozenset({ME})
    partition.maybe_increment_high_watermark()
    done, error = check_acknowledged(partition, PendingAck(partition.tp, last, 0))
    assert done and isinstance(error, NotEnoughReplicasAfterAppendError)


def test_acks_all_fails_when_leadership_moves_away(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock)
    last = append(partition, b"a")
    partition.leader_id = F1
    done, error = check_acknowledged(partition, PendingAck(partition.tp, last, 0))
    assert done and isinstance(error, NotLeaderOrFollowerError)


async def test_delayed_produce_completes_in_offset_order_as_the_hw_moves(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1))
    waiters = DelayedProducePurgatory(lambda tp: partition)
    lasts = [append(partition, b"v%d" % i) for i in range(3)]
    outcomes: list[tuple[int, object]] = []

    async def wait(last: int) -> None:
        pending = [PendingAck(partition.tp, last, 0)]
        result = await await_replication(pending, waiters=waiters, timeout_ms=60_000)
        outcomes.append((last, result[partition.tp]))

    async with trio.open_nursery() as nursery:
        for last in reversed(lasts):  # registration order does not matter
            nursery.start_soon(wait, last)
        await trio.testing.wait_all_tasks_blocked()
        assert waiters.watched == 3
        fetch(partition, F1, 2)  # HW 2: offsets 0 and 1 are in
        waiters.notify(partition.tp)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(outcomes) == [(0, None), (1, None)] and waiters.watched == 1
        fetch(partition, F1, 3)
        waiters.notify(partition.tp)
    assert sorted(outcomes) == [(0, None), (1, None), (2, None)]
    assert waiters.watched == 0

    last = append(partition, b"late")
    timed_out = await await_replication(
        [PendingAck(partition.tp, last, 0)], waiters=waiters, timeout_ms=10
    )
    assert isinstance(timed_out[partition.tp], RequestTimedOutError)
    assert waiters.watched == 0


async def test_delayed_produce_answers_every_waiter_when_leadership_moves(tmp_path: Path) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1))
    waiters = DelayedProducePurgatory(lambda tp: partition)
    parked = [waiters.add(PendingAck(partition.tp, append(partition, b"x"), 0)) for _ in range(3)]
    partition.leader_id = F1
    waiters.notify(partition.tp)
    assert all(isinstance(w.error, NotLeaderOrFollowerError) for w in parked)


def isr_manager(partition: Partition, store: FakeStore, clock: Clock) -> IsrManager:
    """The ISR manager of a broker leading ``partition`` alone, writing to ``store``."""
    return IsrManager(
        partitions=lambda: [partition],
        store=store,
        on_isr_changed=lambda p, expanded: None,
        clock=clock,
        replica_lag_time_max_ms=LAG_MS,
    )


class FakeStore:
    """The partition state znode of one partition, with its version."""

    def __init__(self, state: LeaderAndIsr) -> None:
        self.state = state
        self.notifications: list[list[ZkTopicPartition]] = []

    async def update_partition_states(
        self, states: Mapping[ZkTopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        result = WriteResult()
        for tp, new in states.items():
            if new.zk_version != self.state.zk_version:
                result.conflicts.add(tp)
                continue
            self.state = dataclasses.replace(new, zk_version=new.zk_version + 1)
            result.written[tp] = self.state
        return result

    async def read_partition_states(
        self, partitions: Iterable[ZkTopicPartition]
    ) -> dict[ZkTopicPartition, LeaderAndIsr]:
        return {tp: self.state for tp in partitions}

    async def create_isr_change_notification(self, partitions: Iterable[ZkTopicPartition]) -> str:
        self.notifications.append(list(partitions))
        return f"isr_change_{len(self.notifications):010d}"


async def test_isr_change_is_written_conditionally_then_applied_and_reported(
    tmp_path: Path,
) -> None:
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1, F2))
    store = FakeStore(LeaderAndIsr(ME, 0, (ME, F1, F2), 1, zk_version=0))
    manager = isr_manager(partition, store, clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        fetch(partition, F1, 0)
        clock.now += LAG_MS + 1
        fetch(partition, F1, 0)
        manager.maybe_shrink_all()
        await trio.testing.wait_all_tasks_blocked()
        assert store.state.isr == (ME, F1) and store.state.zk_version == 1
        assert partition.isr == {ME, F1} and partition.zk_version == 1
        await manager.maybe_propagate(force=True)
        assert store.notifications == [[ZkTopicPartition("t", 0)]]

        # Someone else (the controller) moved the znode on: the write loses, the leader
        # re-reads and adopts the stored ISR and version, and decides again later.
        store.state = dataclasses.replace(store.state, isr=(ME,), zk_version=7)
        fetch(partition, F2, 0)
        manager.maybe_expand(partition, F2)
        await trio.testing.wait_all_tasks_blocked()
        assert partition.isr == {ME} and partition.zk_version == 7
        manager.maybe_expand(partition, F2)
        await trio.testing.wait_all_tasks_blocked()
        assert store.state.isr == (ME, F2) and partition.isr == {ME, F2}
        nursery.cancel_scope.cancel()


class LosingStore(FakeStore):
    """Loses the connection with the next write in flight, after ZooKeeper applied it
    (``applied``) or before it got there: the leader cannot tell which."""

    def __init__(self, state: LeaderAndIsr, *, applied: bool) -> None:
        super().__init__(state)
        self.applied = applied
        self.lose_next = True

    async def update_partition_states(
        self, states: Mapping[ZkTopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        if not self.lose_next:
            return await super().update_partition_states(states)
        self.lose_next = False
        if self.applied:
            await super().update_partition_states(states)
        raise ConnectionError("connection lost with the write in flight")


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
async def test_an_isr_expansion_lost_in_flight_makes_the_hw_wait_for_the_new_member(
    tmp_path: Path, applied: bool
) -> None:
    # ZooKeeper may now list F2 as in sync, so the controller may elect it: the leader
    # must not acknowledge what F2 lacks, whichever way the write went.
    clock = Clock()
    partition = make_leader(tmp_path, clock, isr=(ME, F1))
    store = LosingStore(LeaderAndIsr(ME, 0, (ME, F1), 1, zk_version=0), applied=applied)
    manager = isr_manager(partition, store, clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        fetch(partition, F2, 0)  # caught up with the HW (0): it may join
        manager.maybe_expand(partition, F2)
        await trio.testing.wait_all_tasks_blocked()
        assert (F2 in store.state.isr) is applied

        last = append(partition, b"a", b"b")
        fetch(partition, F1, last + 1)  # F1 has both records; F2 has neither

        assert partition.isr == {ME, F1, F2}
        assert partition.high_watermark == 0  # nothing acknowledged that F2 lacks
        fetch(partition, F2, last + 1)
        assert partition.high_watermark == last + 1

        # The next ISR write settles it: F2 falls behind and is shrunk out, written
        # against the stored version (re-read after a lost race) either way.
        clock.now += LAG_MS + 1
        fetch(partition, F1, last + 1)
        for _ in range(2):  # a lost race re-reads first, then writes
            manager.maybe_shrink_all()
            await trio.testing.wait_all_tasks_blocked()
        assert store.state.isr == (ME, F1) and partition.isr == {ME, F1}
        assert partition.zk_version == store.state.zk_version
        nursery.cancel_scope.cancel()


class CountingStore:
    """Partition state znodes of many partitions; records every batch written."""

    def __init__(self, states: Mapping[ZkTopicPartition, LeaderAndIsr]) -> None:
        self.states = dict(states)
        self.batches: list[list[ZkTopicPartition]] = []
        self.release = trio.Event()

    async def update_partition_states(
        self, states: Mapping[ZkTopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        self.batches.append(sorted(states))
        await self.release.wait()
        result = WriteResult()
        for tp, new in states.items():
            self.states[tp] = dataclasses.replace(new, zk_version=new.zk_version + 1)
            result.written[tp] = self.states[tp]
        return result

    async def read_partition_states(
        self, partitions: Iterable[ZkTopicPartition]
    ) -> dict[ZkTopicPartition, LeaderAndIsr]:
        return {tp: self.states[tp] for tp in partitions}

    async def create_isr_change_notification(self, partitions: Iterable[ZkTopicPartition]) -> str:
        return "isr_change_0000000000"


async def test_isr_changes_of_many_partitions_go_to_zookeeper_in_one_batch(
    tmp_path: Path,
) -> None:
    # A broker back from an outage rejoins the ISR of every partition it follows: one
    # write per partition, each waiting its turn, made that take seconds.
    clock = Clock()
    partitions = [make_leader(tmp_path, clock, isr=(ME, F1), index=i) for i in range(5)]
    store = CountingStore(
        {ZkTopicPartition("t", i): LeaderAndIsr(ME, 0, (ME, F1), 1, 0) for i in range(5)}
    )
    manager = IsrManager(
        partitions=lambda: partitions,
        store=store,
        on_isr_changed=lambda p, expanded: None,
        clock=clock,
        replica_lag_time_max_ms=LAG_MS,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        for partition in partitions[:2]:
            fetch(partition, F2, 0)
            manager.maybe_expand(partition, F2)
        await trio.testing.wait_all_tasks_blocked()
        for partition in partitions[2:]:  # queued while the first batch is in flight
            fetch(partition, F2, 0)
            manager.maybe_expand(partition, F2)
        assert all(p.isr == {ME, F1} for p in partitions)  # nothing applied unwritten
        store.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert store.batches == [
            [ZkTopicPartition("t", 0), ZkTopicPartition("t", 1)],
            [ZkTopicPartition("t", i) for i in range(2, 5)],
        ]
        assert all(p.isr == {ME, F1, F2} for p in partitions)
        assert all(store.states[ZkTopicPartition("t", i)].isr == (ME, F1, F2) for i in range(5))
        nursery.cancel_scope.cancel()
