"""CreatePartitions while the controller dies: the request a surviving broker took is
answered once the next controller has brought the new partitions online, and they are
created exactly once.

Three broker processes, a topic of two partitions (RF 2). The controller's broker is
killed with SIGKILL, then a surviving broker is asked to grow the topic to four
partitions: it writes the assignment while ``/controller`` still names the dead broker
(until its session expires), so only the next controller, finding partitions without a
state znode on failover, can bring them online.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import InvalidPartitionsError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.support.cluster import ProcessCluster

TOPIC = "grown-in-failover"
REQUEST_TIMEOUT_MS = 40_000
"""The dead broker's session (4 s here) must expire before anyone else can lead."""


@pytest.mark.timeout(180)
async def test_create_partitions_during_a_controller_failover_completes_once(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    data = KafkaZkClient(zk_client)
    async with ProcessCluster(tmp_path, zk_connect, size=3) as cluster:
        await cluster.create_topic(TOPIC, 2, 2)
        controller = await data.get_controller_id()
        assert controller is not None
        survivor = next(b for b in cluster.live if b != controller)
        cluster.kill(controller)

        body = {
            "topics": [{"name": TOPIC, "count": 4, "assignments": None}],
            "timeout_ms": REQUEST_TIMEOUT_MS,
            "validate_only": False,
        }
        answer = await cluster.request(
            survivor, ApiKey.CREATE_PARTITIONS, body, timeout=REQUEST_TIMEOUT_MS / 1000 + 10
        )
        assert answer["results"] == [{"name": TOPIC, "error_code": 0, "error_message": None}]
        new_controller = await data.get_controller_id()
        assert new_controller not in (None, controller)

        assignment = await data.get_assignment(TOPIC)
        assert assignment is not None and sorted(assignment.partitions) == [0, 1, 2, 3]
        states = await data.read_partition_states(TopicPartition(TOPIC, p) for p in (2, 3))
        for tp, state in states.items():
            # made once: a second initialization would have bumped the epoch
            assert state.leader_epoch == 0, (tp, state)
            assert state.leader in assignment.partitions[tp.partition]
            assert state.leader != controller
        assert len(states) == 2
        metadata = await cluster.metadata(TOPIC)
        assert sorted(p["partition_index"] for p in metadata["partitions"]) == [0, 1, 2, 3]
        assert all(p["leader_id"] >= 0 for p in metadata["partitions"])

        again = await cluster.request(survivor, ApiKey.CREATE_PARTITIONS, body, timeout=30)
        (result,) = again["results"]
        assert result["error_code"] == InvalidPartitionsError.code
        assert result["error_message"] == "Topic already has 4 partitions."
        grown = await data.get_assignment(TOPIC)
        assert grown is not None and len(grown.partitions) == 4
