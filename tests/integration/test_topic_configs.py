"""Topic configs end to end: three broker processes over a real ZooKeeper, the CLI and
the Admin client. Overrides land in /config/topics/T with a /config/changes
notification, live partitions apply them at once (min.insync.replicas=3 refuses an
acks=all write once a replica is down), DescribeConfigs merges overrides with broker
defaults, bad keys are one CLI line with exit code 1, and Metadata carries /cluster/id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.broker.admin.topic_configs import TopicConfigs
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.replication.hosted_replicas import HostedReplicas, to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.client.admin import Admin
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import InvalidConfigError, NotEnoughReplicasError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.topic_partition import TopicPartition as LocalPartition
from minibroker.storage.log_manager import LogManager
from minibroker.zk.client import ZkClient
from minibroker.zk.cluster_id import CLUSTER_ID_PATH, decode_cluster_id
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import CONFIG_CHANGES_PATH
from tests.support.broker import batch, broker_config
from tests.support.cli import run_cli
from tests.support.cluster import ProcessCluster

pytestmark = pytest.mark.timeout(180)

TOPIC = "configured"


async def isr(data: KafkaZkClient) -> tuple[int, set[int]]:
    tp = TopicPartition(TOPIC, 0)
    state = (await data.read_partition_states([tp]))[tp]
    return state.leader, set(state.isr)


async def produce_all(cluster: ProcessCluster, leader: int, value: bytes) -> int:
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": TOPIC, "partitions": [{"index": 0, "records": batch(value)}]}],
    }
    response = await cluster.request(leader, ApiKey.PRODUCE, body, timeout=15)
    code: int = response["topics"][0]["partitions"][0]["error_code"]
    return code


async def test_altered_min_insync_replicas_applies_live_and_describe_merges_defaults(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    data = KafkaZkClient(zk_client)
    cluster = ProcessCluster(tmp_path, zk_connect, size=3)
    try:
        await cluster.start_all()
        bootstrap = f"127.0.0.1:{cluster.brokers[1].port}"
        created = await run_cli(
            *("topic", "create", TOPIC, "-p", "1", "-r", "3", "--config", "retention.ms=3600000"),
            bootstrap=bootstrap,
        )
        assert created.returncode == 0, created.stderr
        assert await data.get_topic_config(TOPIC) == {"retention.ms": "3600000"}

        async def full() -> bool:
            return len((await isr(data))[1]) == 3

        await cluster.wait_until(full, "a full ISR")
        leader, replicas = await isr(data)

        async def leader_accepts() -> bool:
            return await produce_all(cluster, leader, b"before") == 0

        await cluster.wait_until(leader_accepts, "the leader to take acks=all writes")

        async with Admin(bootstrap) as admin:
            await admin.alter_topic_config(TOPIC, {"min.insync.replicas": "3"})
            entries = {e.name: e for e in await admin.describe_topic_config(TOPIC)}
            with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas"):
                await admin.alter_topic_config(TOPIC, {"min.insync.replicas": "zero"})
        assert await data.get_topic_config(TOPIC) == {
            "min.insync.replicas": "3",
            "retention.ms": "3600000",
        }
        assert (
            entries["min.insync.replicas"].value,
            entries["min.insync.replicas"].is_override,
        ) == ("3", True)
        assert (entries["retention.ms"].value, entries["retention.ms"].is_override) == (
            "3600000",
            True,
        )
        assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
            "1073741824",
            5,
        )
        assert entries["unclean.leader.election.enable"].value == "false"
        notes = await zk_client.get_children(CONFIG_CHANGES_PATH)
        bodies = [json.loads((await zk_client.get(f"{CONFIG_CHANGES_PATH}/{n}"))[0]) for n in notes]
        assert {"version": 2, "entity_path": f"topics/{TOPIC}"} in bodies

        assert await produce_all(cluster, leader, b"three-in-sync") == 0
        follower = next(b for b in replicas if b != leader)
        cluster.kill(follower)

        async def shrunk() -> bool:
            return follower not in (await isr(data))[1]

        await cluster.wait_until(shrunk, "the killed follower to leave the ISR", timeout=40)
        bootstrap = f"127.0.0.1:{cluster.brokers[leader].port}"  # the follower may have been it
        assert await produce_all(cluster, leader, b"two-in-sync") == NotEnoughReplicasError.code

        described = await run_cli("topic", "describe", TOPIC, bootstrap=bootstrap)
        assert described.returncode == 0, described.stderr
        assert "min.insync.replicas=3" in described.stdout
        assert "retention.ms=3600000" in described.stdout

        bad = await run_cli(
            "topic", "alter-config", TOPIC, "--set", "retention.msx=5", bootstrap=bootstrap
        )
        assert bad.returncode == 1
        assert len(bad.stderr.strip().splitlines()) == 1 and "retention.msx" in bad.stderr
        assert await data.get_topic_config(TOPIC) == {
            "min.insync.replicas": "3",
            "retention.ms": "3600000",
        }

        info = await run_cli("cluster", "info", "--format", "json", bootstrap=bootstrap)
        assert info.returncode == 0, info.stderr
        cluster_id = decode_cluster_id((await zk_client.get(CLUSTER_ID_PATH))[0])
        assert json.loads(info.stdout)["cluster_id"] == cluster_id
    finally:
        cluster.close()


async def test_unknown_topics_are_unknown_and_a_bad_create_config_creates_nothing(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=1)
    try:
        await cluster.start_all()
        bootstrap = f"127.0.0.1:{cluster.brokers[1].port}"
        bad = await run_cli(
            "topic", "create", "bad", "--config", "retention.ms=soon", bootstrap=bootstrap
        )
        assert bad.returncode == 1
        assert len(bad.stderr.strip().splitlines()) == 1 and "retention.ms" in bad.stderr
        assert "INVALID_CONFIG" in bad.stderr
        assert await KafkaZkClient(zk_client).get_topics() == set()
        body: dict[str, Any] = {
            "resources": [{"resource_type": 2, "resource_name": "nope", "configuration_keys": None}]
        }
        described = await cluster.request(1, ApiKey.DESCRIBE_CONFIGS, body)
        assert described["results"][0]["error_code"] == 3
        body = {"resources": [{"resource_type": 2, "resource_name": "nope", "configs": []}]}
        altered = await cluster.request(1, ApiKey.ALTER_CONFIGS, body)
        assert altered["responses"][0]["error_code"] == 3
    finally:
        cluster.close()


async def test_the_change_listener_resyncs_hosted_topics_then_follows_notifications(
    tmp_path: Path, zk_client: ZkClient
) -> None:
    config = broker_config(tmp_path)
    log_manager = LogManager(config.log_dirs, to_log_config(config.topic_config()))
    manager = ReplicaManager(
        HostedReplicas(config, log_manager, MetadataCache(1), clock=lambda: 10**13)
    )
    data = KafkaZkClient(zk_client)
    await data.create_top_level_paths()
    try:
        state = LeaderAndIsrPartition(
            controller_epoch=1, leader=1, leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,)
        )
        await manager.leadership.become_leader_or_follower(1, {LocalPartition("t", 0): state})
        partition = manager.replicas.partitions[LocalPartition("t", 0)]
        # Written while "disconnected": no notification, the start-up resync finds it.
        await data.set_topic_config("t", {"retention.ms": "5000"}, notify=False)
        listener = TopicConfigs(config, manager.replicas, MetadataCache(1), zk=data)
        async with trio.open_nursery() as nursery:
            events = zk_client.subscribe()
            await nursery.start(listener.run_change_listener, data, events)
            assert partition.log.config.retention_ms == 5000

            await data.set_topic_config("t", {"min.insync.replicas": "2"})
            with trio.fail_after(10):
                while partition.config.min_insync_replicas != 2:
                    await trio.sleep(0.02)
            assert partition.log.config.retention_ms == config.topic_config().retention_ms
            # The clock is far ahead: the notification is expired and purged.
            with trio.fail_after(10):
                while await zk_client.get_children(CONFIG_CHANGES_PATH):
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
    finally:
        log_manager.close()
