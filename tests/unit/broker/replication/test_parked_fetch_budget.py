"""Parked (delayed) fetches share one byte budget: past it, a long poll still waits but
reads only what is left of the budget (at least one batch), and the budget frees as
each fetch is answered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from minibroker.broker.replication import fetch_reader
from minibroker.broker.replication.fetch_reader import FetchParams, FetchPartition
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from tests.support.broker import broker_config, replica_manager

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("t", 0)
BATCH_VALUE = 10_000
BATCHES = 10
BUDGET = 25_000


@pytest.fixture
async def leader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ReplicaManager]:
    monkeypatch.setattr(fetch_reader, "PARKED_FETCH_MAX_BYTES", BUDGET)
    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=1, leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,),
        is_new=True,
    )  # fmt: skip
    with replica_manager(broker_config(tmp_path, broker_id=1)) as manager:
        await manager.leadership.become_leader_or_follower(1, {TP: state})
        for i in range(BATCHES):
            batch = encode_batch([Record(b"v" * BATCH_VALUE, timestamp=1)], base_offset=i)
            manager.append_records(1, [(TP, batch)])
        yield manager


def long_poll(max_bytes: int) -> FetchParams:
    """A consumer's fetch that waits for more than the log holds."""
    return FetchParams(
        replica_id=-1,
        max_bytes=max_bytes,
        min_bytes=10 * BATCHES * BATCH_VALUE,
        max_wait_ms=100,
        partitions=[FetchPartition(TP, 0, max_bytes)],
    )


async def test_parked_fetches_past_the_budget_read_what_is_left_and_free_it(
    leader: ReplicaManager,
) -> None:
    sizes: list[int] = []

    async def fetch(max_bytes: int) -> None:
        [read] = await leader.wait_for_fetch(long_poll(max_bytes))
        assert read.error is None
        sizes.append(read.size)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch, 1 << 20)
        await trio.testing.wait_all_tasks_blocked()
        assert leader.replicas.fetch_reader.parked_bytes == BUDGET  # the first took it all
        nursery.start_soon(fetch, 1 << 20)
        await trio.testing.wait_all_tasks_blocked()
        assert leader.replicas.fetch_reader.parked_bytes == BUDGET
    assert leader.replicas.fetch_reader.parked_bytes == 0
    one_batch = min(sizes)
    assert BATCH_VALUE < one_batch < 2 * BATCH_VALUE  # past the budget: one batch only
    assert 2 * BATCH_VALUE < max(sizes) <= BUDGET  # within the budget: what it reserved


async def test_a_fetch_within_the_budget_reads_all_it_asked_for(leader: ReplicaManager) -> None:
    [read] = await leader.wait_for_fetch(long_poll(BUDGET // 2))
    assert BATCH_VALUE < read.size <= BUDGET // 2
    assert leader.replicas.fetch_reader.parked_bytes == 0
