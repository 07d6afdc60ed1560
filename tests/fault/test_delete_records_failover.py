"""DeleteRecords survives its leader's kill -9: the follower elected next and the old
leader once restarted both start the log where DeleteRecords put it.

Three broker processes, one partition on all three (broker 1 its preferred leader),
small segments. Records below offset 20 are deleted through broker 1; the answer's low
watermark says every replica moved. Broker 1 is killed with SIGKILL: its
log-start-offset-checkpoint already holds the new start (written before the answer).
The next leader answers ListOffsets earliest with it; broker 1, restarted, rejoins the
ISR and, made leader again by a preferred election, answers it too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.client.admin import Admin
from minibroker.client.producer import Producer
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import ElectionNotNeededError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.checkpoint import OffsetCheckpointFile
from tests.support.cluster import ProcessCluster

TOPIC = "trimmed-in-failover"
START = 20


async def earliest_offset(cluster: ProcessCluster, broker_id: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -2}]}],
    }
    answer = await cluster.request(broker_id, ApiKey.LIST_OFFSETS, body)
    partition = answer["topics"][0]["partitions"][0]
    assert partition["error_code"] == 0, partition
    offset: int = partition["offset"]
    return offset


async def leader(cluster: ProcessCluster) -> tuple[int, list[int]]:
    (state,) = (await cluster.metadata(TOPIC))["partitions"]
    return state["leader_id"], sorted(state["isr_nodes"])


def bootstrap(cluster: ProcessCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.address(b)[1]}" for b in cluster.live)


@pytest.mark.timeout(180)
async def test_the_log_start_offset_survives_the_leaders_kill_and_restart(
    tmp_path: Path, zk_connect: str
) -> None:
    async with ProcessCluster(tmp_path, zk_connect, size=3) as cluster:
        await cluster.create_topic(
            TOPIC, 1, 3, {"segment.bytes": "1024"}, assignment={0: [1, 2, 3]}
        )
        async with Producer(bootstrap(cluster), acks="all", linger_ms=0) as producer:
            for i in range(50):
                await producer.send(TOPIC, b"%d:" % i + b"x" * 100)
        async with Admin(bootstrap(cluster)) as admin:
            assert await admin.delete_records({(TOPIC, 0): START}) == {(TOPIC, 0): START}
        checkpoint = OffsetCheckpointFile(
            tmp_path / "broker-1" / "logs" / "log-start-offset-checkpoint"
        )

        cluster.kill(1)
        assert checkpoint.read()[TopicPartition(TOPIC, 0)] == START

        async def new_leader() -> bool:
            return (await leader(cluster))[0] in (2, 3)

        await cluster.wait_until(new_leader, "a leader other than the killed broker 1")
        next_leader, _ = await leader(cluster)
        assert await earliest_offset(cluster, next_leader) == START

        await cluster.start(1)

        async def back_in_sync() -> bool:
            return (await leader(cluster))[1] == [1, 2, 3]

        await cluster.wait_until(back_in_sync, "broker 1 back in the ISR", timeout=60)
        async with Admin(bootstrap(cluster)) as admin:
            elected = (await admin.elect_leaders([(TOPIC, 0)]))[(TOPIC, 0)]
            # ELECTION_NOT_NEEDED: the controller's own preferred election got there first
            assert elected is None or isinstance(elected, ElectionNotNeededError)

        async def led_by_1() -> bool:
            return (await leader(cluster))[0] == 1

        await cluster.wait_until(led_by_1, "broker 1 leading again")
        assert await earliest_offset(cluster, 1) == START
