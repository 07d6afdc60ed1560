"""The replication throttle on the two fetch paths, without network: the leader's
ReplicaManager answering follower fetches, and a follower's ReplicaFetcher building its
Fetch against a scripted leader. The quotas run on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.quotas.replication_quota import ReplicationQuota, ReplicationQuotas
from minibroker.broker.replication.fetch_reader import FetchParams, FetchPartition
from minibroker.broker.replication.fetch_state import FetchState
from minibroker.broker.replication.hosted_replicas import to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition
from minibroker.broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.protocol.api import ApiKey
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from tests.support.broker import broker_config, replica_manager

LEADER, IN_SYNC, COPYING = 1, 2, 3
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
RATE = 1000


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def full_quota(clock: FakeClock) -> ReplicationQuota:
    quota = ReplicationQuota(RATE, clock=clock)
    quota.record(100 * RATE)  # far over the rate for the whole window
    assert quota.is_exceeded()
    return quota


def batch(*values: bytes, base_offset: int = 0) -> bytes:
    return encode_batch([Record(v, timestamp=1) for v in values], base_offset=base_offset)


# -- leader side ------------------------------------------------------------------------


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    """Leader of t-0 and t-1 (replicas 1,2,3; ISR 1,2), each holding two records; the
    topic throttles partition 0 on this leader."""
    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=LEADER, leader_epoch=0, isr=(LEADER, IN_SYNC), zk_version=0,
        replicas=(LEADER, IN_SYNC, COPYING), is_new=True,
    )  # fmt: skip
    with replica_manager(broker_config(tmp_path, broker_id=LEADER)) as manager:
        await manager.leadership.become_leader_or_follower(1, {T0: state, T1: state})
        manager.append_records(1, [(T0, batch(b"a", b"b")), (T1, batch(b"c", b"d"))])
        await manager.replicas.update_topic_overrides(
            "t", {"leader.replication.throttled.replicas": f"0:{LEADER},1:{COPYING}"}
        )
        yield manager


def reads_of(manager: ReplicaManager, replica: int) -> dict[TopicPartition, Any]:
    asked = [FetchPartition(tp, 0, 1 << 20) for tp in (T0, T1)]
    return {read.tp: read for read in manager.read(replica, 1 << 20, asked)}


async def test_a_leader_over_its_quota_sends_no_records_of_a_throttled_copy(
    leader: ReplicaManager,
) -> None:
    clock = FakeClock()
    leader.replicas.replication_quotas.leader = full_quota(clock)
    reads = reads_of(leader, COPYING)
    held, free = reads[T0], reads[T1]  # 1:COPYING names another broker: not throttled here
    assert held.error is None and held.result is not None and held.size == 0
    assert held.result.high_watermark == 0 and held.result.log_end_offset == 2
    assert free.size > 0


async def test_a_leader_never_holds_back_an_in_sync_follower(leader: ReplicaManager) -> None:
    leader.replicas.replication_quotas.leader = full_quota(FakeClock())
    reads = reads_of(leader, IN_SYNC)
    assert reads[T0].size > 0 and reads[T1].size > 0


async def test_a_leader_sends_a_throttled_copy_no_more_than_the_quota_allows(
    leader: ReplicaManager,
) -> None:
    quota = ReplicationQuota(RATE, clock=FakeClock())
    quota.record(quota.allowance() - 10)  # 10 bytes left: less than one batch
    leader.replicas.replication_quotas.leader = quota
    asked = [FetchPartition(tp, 0, 1 << 20) for tp in (T1, T0)]  # T0 not first with data
    reads = {read.tp: read for read in leader.read(COPYING, 1 << 20, asked)}
    assert reads[T1].size > 0 and reads[T0].size == 0


async def test_a_leader_under_its_quota_sends_and_counts_only_throttled_bytes(
    leader: ReplicaManager,
) -> None:
    quota = ReplicationQuota(RATE, clock=FakeClock())
    leader.replicas.replication_quotas = ReplicationQuotas(quota, ReplicationQuota())
    fetch = FetchParams(COPYING, 1 << 20, 1, 0, [FetchPartition(tp, 0, 1 << 20) for tp in (T0, T1)])
    reads = leader.fetch_messages(fetch)
    assert reads is not None and all(read.size > 0 for read in reads)
    assert quota.recorded_total == next(read.size for read in reads if read.tp == T0)
    leader.fetch_messages(FetchParams(-1, 1 << 20, 1, 0, fetch.partitions))  # a consumer
    assert quota.recorded_total == next(read.size for read in reads if read.tp == T0)


# -- follower side ----------------------------------------------------------------------


class ScriptedLeader:
    """Answers each Fetch with one record per asked partition and a high watermark of
    ``leader_hw``; remembers what each request asked for."""

    def __init__(self, leader_hw: int) -> None:
        self.leader_hw = leader_hw
        self.asked: list[list[int]] = []
        self.max_wait_ms: list[int] = []
        self.max_bytes: list[dict[int, int]] = []

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert api_key == ApiKey.FETCH
        self.max_wait_ms.append(body["max_wait_ms"])
        [topic] = body["topics"]
        asked = topic["partitions"]
        self.asked.append([p["partition"] for p in asked])
        self.max_bytes.append({p["partition"]: p["partition_max_bytes"] for p in asked})
        answers = [
            {
                "partition_index": p["partition"],
                "error_code": 0,
                "high_watermark": self.leader_hw,
                "log_start_offset": 0,
                "records": batch(b"x" * 100, base_offset=p["fetch_offset"]),
            }
            for p in topic["partitions"]
        ]
        return {"topics": [{"topic": "t", "partitions": answers}]}


def follower(tmp_path: Path, tp: TopicPartition, throttled: str) -> Partition:
    config = BrokerConfig.from_properties(None, {"broker.id": str(COPYING)})
    topic = config.topic_config({"follower.replication.throttled.replicas": throttled})
    partition = Partition(
        tp,
        local_broker_id=COPYING,
        log=Log(tmp_path / f"{tp.topic}-{tp.partition}", to_log_config(topic)),
        config=topic,
        clock=lambda: 0,
    )
    partition.make_follower(
        LeaderAndIsrPartition(
            controller_epoch=1, leader=LEADER, leader_epoch=0, isr=(LEADER,), zk_version=0,
            replicas=(LEADER, COPYING),
        )
    )  # fmt: skip
    return partition


def fetcher_of(tmp_path: Path, quota: ReplicationQuota) -> ReplicaFetcher:
    config = BrokerConfig.from_properties(None, {"broker.id": str(COPYING)})
    manager = ReplicaFetcherManager(config, address_of=lambda b: None, quota=quota)
    fetcher = ReplicaFetcher(manager, LEADER, 0)
    throttled = f"0:{COPYING},1:{LEADER}"  # 1:LEADER is the leader side's business
    for tp in (T0, T1):
        fetcher.states[tp] = FetchState(follower(tmp_path, tp, throttled), 0, truncating=False)
    return fetcher


async def test_a_follower_over_its_quota_leaves_out_only_its_throttled_partitions(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    fetcher = fetcher_of(tmp_path, full_quota(clock))
    leader = ScriptedLeader(leader_hw=100)
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.asked == [[1]]
    # The request answers early enough for partition 0 to rejoin when the quota frees.
    assert leader.max_wait_ms[0] <= 1000
    clock.now += 10  # the window has rolled: partition 0 flows again
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.asked[1] == [0, 1]


async def test_a_follower_asks_no_more_for_a_throttled_copy_than_its_quota_allows(
    tmp_path: Path,
) -> None:
    quota = ReplicationQuota(RATE, clock=FakeClock())
    quota.record(quota.allowance() - 300)
    fetcher = fetcher_of(tmp_path, quota)
    leader = ScriptedLeader(leader_hw=100)
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.max_bytes == [{0: 300, 1: fetcher.manager.config.replica_fetch_max_bytes}]


async def test_a_follower_counts_only_bytes_of_its_throttled_partitions(tmp_path: Path) -> None:
    quota = ReplicationQuota(RATE, clock=FakeClock())
    fetcher = fetcher_of(tmp_path, quota)
    leader = ScriptedLeader(leader_hw=100)
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.asked == [[0, 1]]
    assert quota.recorded_total == fetcher.states[T0].partition.log.size


async def test_a_caught_up_follower_is_not_throttled(tmp_path: Path) -> None:
    clock = FakeClock()
    quota = ReplicationQuota(RATE, clock=clock)
    fetcher = fetcher_of(tmp_path, quota)
    leader = ScriptedLeader(leader_hw=1)  # one record each: caught up after one fetch
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert fetcher.states[T0].caught_up
    quota.record(100 * RATE)
    assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.asked[1] == [0, 1]


async def test_a_follower_with_every_partition_held_waits_for_the_quota(tmp_path: Path) -> None:
    clock = FakeClock()
    quota = full_quota(clock)
    fetcher = fetcher_of(tmp_path, quota)
    del fetcher.states[T1]
    leader = ScriptedLeader(leader_hw=100)
    assert not await fetcher._fetch(leader)  # type: ignore[arg-type]
    assert leader.asked == []
