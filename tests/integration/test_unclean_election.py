"""ElectLeaders with election type UNCLEAN against a real ZooKeeper and real brokers:
the operator's way to bring back a partition whose whole ISR is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minibroker.client.admin import Admin
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import ElectionNotNeededError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.integration.test_controller import cluster, wait_until_async
from tests.support.cli import run_cli

pytestmark = pytest.mark.timeout(90)


async def test_unclean_election_gives_a_partition_whose_isr_died_the_other_live_replica(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:  # unclean.leader.election.enable false
        controller_id = c.controllers()[0]
        leader, follower = sorted(b for b in c.brokers if b != controller_id)
        assignment = [{"partition_index": 0, "broker_ids": [leader, follower]}]
        body = {
            "topics": [
                {"name": "u", "assignments": assignment},
                {"name": "fine", "num_partitions": 1, "replication_factor": 2},
            ],
            "timeout_ms": 10_000,
        }
        response = await c.request(ApiKey.CREATE_TOPICS, body)
        assert [t["error_code"] for t in response["topics"]] == [0, 0]
        data = KafkaZkClient(zk_client)
        tp = TopicPartition("u", 0)
        state = (await data.read_partition_states([tp]))[tp]
        # The leader shrank the ISR to itself (as after a lagging follower), then died.
        shrunk = state.new_leader(leader, [leader], state.controller_epoch)
        assert tp in (await data.update_partition_states({tp: shrunk})).written
        c.stop(leader)

        async def offline() -> bool:
            return (await data.read_partition_states([tp]))[tp].leader == -1

        await wait_until_async(offline, "the partition to go offline")
        before = (await data.read_partition_states([tp]))[tp]

        port = c.brokers[controller_id].port
        cli = await run_cli(
            *("elect-leaders", "--topic", "u", "--election-type", "UNCLEAN", "--format", "json"),
            bootstrap=f"127.0.0.1:{port}",
        )
        assert cli.returncode == 0, cli.stderr
        assert [(r["partition"], r["result"]) for r in json.loads(cli.stdout)] == [(0, "elected")]
        after = (await data.read_partition_states([tp]))[tp]
        assert (after.leader, after.isr) == (follower, (follower,))
        assert after.leader_epoch > before.leader_epoch

        async with Admin(f"127.0.0.1:{port}") as admin:
            [described] = await admin.describe_topics(["u"])
            assert described.partitions[0].leader == follower  # brokers were told
            results = await admin.elect_leaders([("u", 0), ("fine", 0)], election_type="unclean")
        assert set(results) == {("u", 0), ("fine", 0)}
        assert all(isinstance(e, ElectionNotNeededError) for e in results.values())
