"""A broker restarted after kill -9 registers at once (broker/cluster_member.py).

The dead process's ZooKeeper session keeps /brokers/ids/<id> until it expires. With
Kafka's 18 s session timeout, a restarted broker used to wait those 18 s; now it closes
the session its log dir names as its previous process's and registers within seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from minibroker.zk.client import ZkClient
from minibroker.zk.model import broker_path
from tests.support.cluster import ProcessCluster

pytestmark = [pytest.mark.timeout(120)]

SESSION_TIMEOUT_MS = 18_000  # Kafka's default: what the restart no longer waits for
REGISTERED_WITHIN_S = 3.0


async def registration_owner(zk: ZkClient, broker_id: int) -> int | None:
    stat = await zk.exists(broker_path(broker_id))
    return None if stat is None else stat.ephemeral_owner


async def test_a_broker_restarted_after_kill_9_registers_without_waiting_for_its_old_session(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        size=2,
        properties={"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS},
    )
    try:
        await cluster.start_all()
        old_owner = await registration_owner(zk_client, 2)
        assert old_owner is not None

        cluster.kill(2)
        assert await registration_owner(zk_client, 2) == old_owner  # outlives the process
        started = time.monotonic()
        await cluster.start(2)
        with trio.fail_after(REGISTERED_WITHIN_S):
            while (owner := await registration_owner(zk_client, 2)) in (None, old_owner):
                await trio.sleep(0.05)
        elapsed = time.monotonic() - started

        assert owner != old_owner
        assert elapsed < REGISTERED_WITHIN_S
        assert "closing it" in cluster.output(2)
        # The controller saw the new registration: the broker answers for a new topic.
        await cluster.create_topic("after-restart", 1, 2)
        metadata = await cluster.metadata("after-restart")
        assert metadata["partitions"][0]["leader_id"] in (1, 2)
    finally:
        cluster.close()
