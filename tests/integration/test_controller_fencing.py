"""Only the controller ZooKeeper names commands brokers (broker/security/controller_fence.py).

Recipe of the attack, on three real broker processes: anyone who can reach a broker
port sends it StopReplica(delete) and LeaderAndIsr with a forged controller epoch of
2**31-1, or with the real controller's id and epoch but no broker epoch. Every broker
must refuse them (its connection never proved to be the controller) and change
nothing: every record stays readable, leadership stays where it was, and the real
controller is still obeyed afterwards (a topic created then gets a leader).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import ClusterAuthorizationFailedError
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.support.cluster import ProcessCluster
from tests.support.forged import leader_and_isr, stop_replica

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "precious"
RECORDS = 200
MAX_EPOCH = 2**31 - 1


async def read_everything(bootstrap: str) -> list[bytes | None]:
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])
        values: list[bytes | None] = []
        with trio.move_on_after(30):
            while len(values) < RECORDS:
                values += [r.value for r in await consumer.poll(timeout_ms=500)]
        return values


async def test_forged_controller_requests_change_nothing_and_the_controller_still_rules(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "3"})
        bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers.values())
        async with Producer(bootstrap, acks="all") as producer:
            for i in range(RECORDS):
                producer.send_nowait(TOPIC, b"record-%d" % i)
            await producer.flush()
        before = await cluster.metadata(TOPIC)
        data = KafkaZkClient(zk_client)
        controller_id = await data.get_controller_id()
        epoch_and_version = await data.get_controller_epoch()
        assert controller_id is not None and epoch_and_version is not None
        epoch = epoch_and_version[0]
        other = next(b for b in (1, 2, 3) if b != before["partitions"][0]["leader_id"])

        answers: list[tuple[str, int]] = []
        for broker_id in cluster.brokers:
            forged = {
                "stop, max epoch": (ApiKey.STOP_REPLICA, stop_replica(TOPIC, 2, MAX_EPOCH, -1)),
                "lead, max epoch": (
                    ApiKey.LEADER_AND_ISR,
                    leader_and_isr(TOPIC, 2, MAX_EPOCH, -1, leader=other, replicas=[1, 2, 3]),
                ),
                "stop, real epoch": (
                    ApiKey.STOP_REPLICA,
                    stop_replica(TOPIC, controller_id, epoch, -1),
                ),
                "lead, real epoch": (
                    ApiKey.LEADER_AND_ISR,
                    leader_and_isr(
                        TOPIC, controller_id, epoch, -1, leader=other, replicas=[1, 2, 3]
                    ),
                ),
            }
            for name, (api_key, body) in forged.items():
                response = await cluster.request(broker_id, api_key, body)
                answers.append((name, response["error_code"]))

        refused = ClusterAuthorizationFailedError.code  # not the controller's connection
        assert answers == 3 * [
            ("stop, max epoch", refused),
            ("lead, max epoch", refused),
            ("stop, real epoch", refused),
            ("lead, real epoch", refused),
        ]
        after = await cluster.metadata(TOPIC)
        assert after["partitions"] == before["partitions"]
        assert await read_everything(bootstrap) == [b"record-%d" % i for i in range(RECORDS)]
        for broker in cluster.brokers.values():
            assert (broker.log_dirs[0] / f"{TOPIC}-0").is_dir()

        await cluster.create_topic("afterwards", 1, 3)
        created = await cluster.metadata("afterwards")
        assert created["partitions"][0]["leader_id"] in (1, 2, 3)
        assert await data.get_controller_epoch() == epoch_and_version
    finally:
        cluster.close()
