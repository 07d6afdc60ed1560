"""A log dir that fails takes its replicas offline with KAFKA_STORAGE_ERROR; the broker
stays up, serves its other dir, and tells the controller through ZooKeeper, which takes
the replica offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from minibroker.client.admin import Admin
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaStorageError, ReplicaNotAvailableError
from minibroker.protocol.topic_partition import TopicPartition as ControllerTopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.integration.test_log_dir_moves import one_broker, wait_until
from tests.support.broker import WireClient, batch, produce_body, produced


@pytest.mark.timeout(120)
async def test_a_removed_log_dir_goes_offline_and_the_broker_serves_the_other_one(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with one_broker(tmp_path, zk_connect) as (broker, dirs):
        async with Admin(f"127.0.0.1:{broker.port}") as admin:
            placed = await admin.alter_replica_log_dirs(
                {("lost", 0, 1): str(dirs[0]), ("kept", 0, 1): str(dirs[1])}
            )
            assert all(isinstance(e, ReplicaNotAvailableError) for e in placed.values())
            await admin.create_topic("lost", 1, 1)
            await admin.create_topic("kept", 1, 1)
            async with await WireClient.connect(broker.port) as client:
                for topic in ("lost", "kept"):
                    answer = produced(
                        await client.request(ApiKey.PRODUCE, produce_body(topic, 0, batch(b"x")))
                    )
                    assert answer["error_code"] == 0

                shutil.rmtree(dirs[0])  # the disk is gone

                async def offline() -> bool:
                    described = {d.path: d for d in await admin.describe_log_dirs()}
                    return described[str(dirs[0])].error == KafkaStorageError.name

                await wait_until(offline, "the dir to be reported offline", 30)
                lost = await client.request(ApiKey.PRODUCE, produce_body("lost", 0, batch(b"y")))
                assert produced(lost)["error_code"] == KafkaStorageError.code
                kept = await client.request(ApiKey.PRODUCE, produce_body("kept", 0, batch(b"y")))
                assert produced(kept)["error_code"] == 0
                assert produced(kept)["base_offset"] == 1
            moved = await admin.alter_replica_log_dirs({("kept", 0, 1): str(dirs[0])})
            assert isinstance(moved[("kept", 0, 1)], KafkaStorageError)

        # The controller (this broker) read the log dir event notification, resent
        # LeaderAndIsr, got KAFKA_STORAGE_ERROR for "lost" and took that replica offline:
        # with no other replica, lost-0 has no leader now; kept-0 keeps broker 1.
        data = KafkaZkClient(zk_client)
        lost_tp, kept_tp = ControllerTopicPartition("lost", 0), ControllerTopicPartition("kept", 0)

        async def lost_went_offline() -> bool:
            return (await data.read_partition_states([lost_tp]))[lost_tp].leader == -1

        await wait_until(lost_went_offline, "the controller to take lost-0 offline", 30)
        assert (await data.read_partition_states([kept_tp]))[kept_tp].leader == 1
        assert await data.get_log_dir_event_notifications() == []  # consumed
