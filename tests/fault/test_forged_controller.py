"""No client can pose as the controller, on a default `dev up` cluster.

Recipe: a `dev up` cluster (three brokers, each with its msgpack and Kafka listener),
a topic of three partitions on every broker (min.insync.replicas=2) holding records
produced with acks=all. The attacker (tests/support/attacker.py) reads everything
ZooKeeper tells - the controller's id and epoch, every broker's epoch (the czxid of
its registration) and public identity key - and sends every controller-only request
on every listener of every broker, with those values and with the next controller
epoch; it also poses as the controller with a key of its own, and as followers.

Then: every attempt was refused with a fixed message that names none of the epochs;
no partition's leader, leader epoch or ISR moved in ZooKeeper or in any broker's
Metadata answer, which still names the real brokers; the durability checker finds
every acknowledged record at its offset; and the real controller still rules (a topic
created afterwards gets a leader and takes writes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from tests.support.attacker import (
    Attacker,
    Knowledge,
    Victim,
    assert_all_refused_with_fixed_messages,
    produce,
)
from tests.support.cluster import LocalCluster
from tests.support.durability import DurabilityChecker

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "precious"
PARTITIONS = 3
RECORDS = 300


async def test_a_client_knowing_every_epoch_and_id_commands_no_broker(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", kafka_listeners=True) as cluster:
        zk_connect = f"127.0.0.1:{cluster.state['zookeeper']['port']}"
        async with Admin(cluster.bootstrap) as admin:
            await admin.create_topic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        checker = DurabilityChecker()
        await produce(cluster.bootstrap, checker, TOPIC, RECORDS, PARTITIONS)
        knowledge = await Knowledge.gather(zk_connect)
        victim = Victim(zk_connect, knowledge.brokers, TOPIC, PARTITIONS)
        states_before = await victim.states()
        views_before = await victim.metadata_views()

        kafka_ports = {int(i): b["kafka_port"] for i, b in cluster.state["brokers"].items()}
        attempts = await Attacker(knowledge, TOPIC).forge_everything(kafka_ports)

        assert_all_refused_with_fixed_messages(attempts, knowledge)
        assert await victim.states() == states_before
        assert await victim.metadata_views() == views_before
        assert (await Knowledge.gather(zk_connect)).controller_epoch == knowledge.controller_epoch
        report = checker.check(await victim.read_back())
        assert report.ok, report.summary()
        assert checker.acknowledged_count == RECORDS

        # The real controller still rules: a new topic gets leaders and takes writes.
        async with Admin(cluster.bootstrap) as admin:
            await admin.create_topic("afterwards", PARTITIONS, 3)
        after = DurabilityChecker()
        with trio.fail_after(60):
            await produce(cluster.bootstrap, after, "afterwards", 30, PARTITIONS)
        afterwards = Victim(zk_connect, knowledge.brokers, "afterwards", PARTITIONS)
        assert after.check(await afterwards.read_back()).ok
