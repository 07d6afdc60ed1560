"""The replica fetcher against a scripted leader: OFFSET_OUT_OF_RANGE, and how soon it
asks again a leader that has yet to lead."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.hosted_replicas import to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition
from minibroker.broker.replication.replica_fetcher import (
    ReplicaFetcher,
    ReplicaFetcherManager,
    fetcher_index,
)
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import UnknownTopicOrPartitionError
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log

ME, LEADER = 2, 1


class ScriptedLeader:
    """Answers ListOffsets with a fixed log start and end, like a leader would."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end
        self.asked: list[int] = []

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert api_key == ApiKey.LIST_OFFSETS and body["replica_id"] == ME
        timestamp = body["topics"][0]["partitions"][0]["timestamp"]
        self.asked.append(timestamp)
        offset = self.start if timestamp == -2 else self.end
        answer = {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": offset}
        return {"topics": [{"name": "t", "partitions": [answer]}]}


def follower_with(tmp_path: Path, records: int, partition: int = 0) -> Partition:
    """A follower of LEADER at epoch 1 holding ``records`` records of epoch 0."""
    config = BrokerConfig.from_properties(None, {"broker.id": str(ME)})
    topic = config.topic_config()
    tp = TopicPartition("t", partition)
    log = Log(tmp_path / str(tp), to_log_config(topic))
    for i in range(records):
        data = bytearray(encode_batch([Record(b"v%d" % i, timestamp=1)]))
        log.append(data, leader_epoch=0)
    follower = Partition(tp, local_broker_id=ME, log=log, config=topic, clock=lambda: 0)
    follower.make_follower(
        LeaderAndIsrPartition(
            controller_epoch=1,
            leader=LEADER,
            leader_epoch=1,
            isr=(1, 2),
            zk_version=0,
            replicas=(1, 2),
        )
    )
    return follower


def fetcher() -> ReplicaFetcher:
    config = BrokerConfig.from_properties(None, {"broker.id": str(ME)})
    return ReplicaFetcher(ReplicaFetcherManager(config, address_of=lambda b: None), LEADER, 0)


async def test_follower_above_the_leaders_end_truncates_to_it(tmp_path: Path) -> None:
    # After an unclean election the new leader's log can end below ours.
    partition = follower_with(tmp_path, records=5)
    leader = ScriptedLeader(start=0, end=3)
    await fetcher().truncation.handle_offset_out_of_range(leader, partition)  # type: ignore[arg-type]
    assert partition.log_end_offset == 3 and partition.log_start_offset == 0
    assert leader.asked == [-1]


async def test_follower_below_the_leaders_log_start_restarts_there(tmp_path: Path) -> None:
    partition = follower_with(tmp_path, records=2)
    leader = ScriptedLeader(start=10, end=20)
    await fetcher().truncation.handle_offset_out_of_range(leader, partition)  # type: ignore[arg-type]
    assert partition.log_start_offset == partition.log_end_offset == 10
    assert partition.high_watermark == 10
    assert leader.asked == [-1, -2]


def test_a_leaders_partitions_spread_over_its_fetchers_stably() -> None:
    tps = [TopicPartition("orders", p) for p in range(8)]
    assert [fetcher_index(tp, 1) for tp in tps] == [0] * 8
    spread = {fetcher_index(tp, 3) for tp in tps}
    assert spread == {0, 1, 2}
    assert [fetcher_index(tp, 3) for tp in tps] == [fetcher_index(tp, 3) for tp in tps]


class RecordingLeader:
    """Answers OffsetForLeaderEpoch (our epochs end where our logs do) and Fetch (no
    data), refusing, as a broker does, a request naming more than ``cap`` partitions."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.requests: list[tuple[int, list[TopicPartition]]] = []

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        tps = [
            TopicPartition(t["topic"], p["partition"])
            for t in body["topics"]
            for p in t["partitions"]
        ]
        assert len(tps) <= self.cap, f"{len(tps)} partitions in one request"
        self.requests.append((api_key, tps))
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            answer = {"error_code": 0, "leader_epoch": 1, "end_offset": 0}
        else:
            assert api_key == ApiKey.FETCH
            answer = {"error_code": 0, "high_watermark": 0, "log_start_offset": 0, "records": b""}
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        answer | {"partition": p["partition"], "partition_index": p["partition"]}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }


async def test_a_fetcher_over_the_partition_cap_truncates_in_one_batch_and_fetches_in_turns(
    tmp_path: Path,
) -> None:
    # A leader of more than request.max.partitions partitions refused every Fetch of a
    # follower of all of them, which then fell out of every ISR; and one truncation
    # request per partition after a leadership change stalled fetching for as long.
    config = BrokerConfig.from_properties(
        None, {"broker.id": str(ME), "request.max.partitions": "4"}
    )
    fetcher = ReplicaFetcher(ReplicaFetcherManager(config, address_of=lambda b: None), LEADER, 0)
    for index in range(10):
        partition = follower_with(tmp_path, records=0, partition=index)
        partition.log.leader_epoch_cache.assign(1, 0)
        fetcher.add(partition)
    leader = RecordingLeader(cap=4)
    await fetcher.truncation.truncate(leader)  # type: ignore[arg-type]
    epochs = [tps for key, tps in leader.requests if key == ApiKey.OFFSET_FOR_LEADER_EPOCH]
    assert [len(tps) for tps in epochs] == [4, 4, 2]  # every partition, capped per request
    assert not any(state.truncating for state in fetcher.states.values())
    for _ in range(3):
        assert await fetcher._fetch(leader)  # type: ignore[arg-type]
    fetched = [tps for key, tps in leader.requests if key == ApiKey.FETCH]
    assert [len(tps) for tps in fetched] == [4, 4, 4]
    assert {tp for tps in fetched for tp in tps} == set(fetcher.states)  # everyone's turn


class LeaderCatchingUp:
    """A leader that answers Fetch UNKNOWN_TOPIC_OR_PARTITION ``behind`` times (it has
    yet to apply the LeaderAndIsr that makes it leader), then serves; it notes when
    each Fetch arrived."""

    def __init__(self, behind: int) -> None:
        self.behind = behind
        self.fetched_at: list[float] = []
        self.served = trio.Event()

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert api_key == ApiKey.FETCH and body["replica_id"] == ME
        await trio.lowlevel.checkpoint()
        self.fetched_at.append(trio.current_time())
        code = UnknownTopicOrPartitionError.code if len(self.fetched_at) <= self.behind else 0
        if code == 0:
            self.served.set()
            await trio.sleep_forever()  # a long poll: the test is over
        answer = {"partition_index": 0, "error_code": code, "high_watermark": 0,
                  "log_start_offset": 0, "records": b""}  # fmt: skip
        return {"topics": [{"topic": "t", "partitions": [answer]}]}


async def _fetch_from(leader: LeaderCatchingUp, partition: Partition) -> None:
    follower = fetcher()

    async def connection() -> LeaderCatchingUp:
        return leader

    follower._connection = connection  # type: ignore[method-assign, assignment]
    follower.add(partition)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower.run)
        await leader.served.wait()
        nursery.cancel_scope.cancel()


async def test_a_new_topics_follower_asks_again_at_once_when_the_leader_is_not_leading_yet(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The controller tells all replicas of a new topic at once; a follower that hears
    # first finds its leader without the partition. Its next fetch must come within
    # milliseconds (an acks=all send waits for it), not replica.fetch.backoff.ms later.
    leader = LeaderCatchingUp(behind=1)

    await _fetch_from(leader, follower_with(tmp_path, records=0))

    first, second = leader.fetched_at
    assert second - first <= 0.05


async def test_a_leader_that_stays_behind_is_asked_ever_less_often_up_to_the_backoff(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    leader = LeaderCatchingUp(behind=8)

    await _fetch_from(leader, follower_with(tmp_path, records=0))

    gaps = [round(b - a, 3) for a, b in itertools.pairwise(leader.fetched_at)]
    assert gaps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]  # replica.fetch.backoff.ms 1000


class ParkingLeader:
    """A leader whose every Fetch parks (a long poll with nothing to answer); it notes
    each request's partitions and wait, and whether the connection was closed."""

    def __init__(self, log: list[ParkingLeader]) -> None:
        self.fetches: list[tuple[list[int], int]] = []
        self.closed = False
        self.asked = trio.Event()
        log.append(self)

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        partitions = [p["partition"] for t in body["topics"] for p in t["partitions"]]
        self.fetches.append((partitions, body["max_wait_ms"]))
        self.asked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.closed = True


def follower_of(tmp_path: Path, partition: int) -> Partition:
    (tmp_path / f"p{partition}").mkdir()
    made = follower_with(tmp_path / f"p{partition}", records=0)
    made.tp = TopicPartition("t", partition)
    return made


async def test_a_partition_added_during_a_long_poll_is_fetched_at_once_on_a_fresh_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The leader answers a connection's requests in order: a new fetch sent behind the
    # parked one would wait replica.fetch.wait.max.ms for it.
    leaders: list[ParkingLeader] = []
    follower = fetcher()

    async def connection() -> ParkingLeader:
        if follower._conn is None:
            follower._conn = ParkingLeader(leaders)  # type: ignore[assignment]
        return follower._conn  # type: ignore[return-value]

    follower._connection = connection  # type: ignore[method-assign, assignment]
    follower.add(follower_of(tmp_path, 0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower.run)
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
        follower.add(follower_of(tmp_path, 1))  # LeaderAndIsr: one more from this leader
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()

    first, second = leaders
    assert first.closed and first.fetches == [([0], 500)]
    assert second.fetches == [([0, 1], 500)] and trio.current_time() == started


async def test_a_paused_partition_bounds_the_long_poll_of_the_others(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    leaders: list[ParkingLeader] = []
    follower = fetcher()
    fetching, paused = follower_of(tmp_path, 0), follower_of(tmp_path, 1)
    follower.add(fetching)
    follower.add(paused)
    for state in follower.states.values():
        state.truncating = False
    follower._pause(follower.states[paused.tp], UnknownTopicOrPartitionError.code)
    leader = ParkingLeader(leaders)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower._fetch, leader)
        await leader.asked.wait()
        nursery.cancel_scope.cancel()

    assert leader.fetches == [([0], 50)]  # back in 50 ms for the paused one, not 500


class RefusingLeader:
    """Answers every partition of a Fetch UNKNOWN_TOPIC_OR_PARTITION (a leader that has
    yet to create them)."""

    async def request(self, api_key: int, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert api_key == ApiKey.FETCH
        refused = {"error_code": UnknownTopicOrPartitionError.code, "high_watermark": 0,
                   "log_start_offset": 0, "records": b""}  # fmt: skip
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        refused | {"partition_index": p["partition"]} for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }


async def test_partitions_a_fetch_answer_refuses_are_logged_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # 10,000 new partitions made each follower log a line per partition per fetch
    # (22,000 lines while they were created), and spend the CPU on it.
    follower = fetcher()
    for index in range(12):
        follower.add(follower_of(tmp_path, index))
    await follower.truncation.truncate(RecordingLeader(cap=100))  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="minibroker.broker.replication"):
        assert await follower._fetch(RefusingLeader())  # type: ignore[arg-type]
    lines = [
        r.getMessage() for r in caplog.records if "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()
    ]
    assert lines == [
        f"fetch from {LEADER}: UNKNOWN_TOPIC_OR_PARTITION for 12 partitions"
        " (t-0, t-1, t-2, t-3, t-4 and 7 more)"
    ]
    assert not any(state.ready(trio.current_time()) for state in follower.states.values())
