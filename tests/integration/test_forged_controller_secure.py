"""No client can pose as the controller on a `dev up --secure` cluster either, even
logged in as a super user or with the brokers' own SASL password.

Recipe: a `dev up --secure` cluster (SASL_SSL on both listeners, ACLs on), a topic on
every broker holding acks=all records. The attacker of tests/support/attacker.py -
who knows every id, epoch and registered key ZooKeeper holds - logs in twice: as
``admin`` (a super user: every ACL check passes) and as ``broker`` (the principal the
brokers themselves use, with its ClusterAction ACL; its password read from the dev
secrets, as a leaked one would be), and tries every controller-only request on both
listeners of every broker. What stops it is the identity proof, which needs a broker's
key. Then nothing moved, nothing acknowledged is lost, and the cluster still works.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.client.admin import Admin
from minibroker.client.cli.dev_secure import ADMIN_USER, BROKER_USER, SECRETS_DIR
from minibroker.client.security import client_security
from minibroker.net.security import client_ssl_context
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

TOPIC = "guarded"
PARTITIONS = 2
RECORDS = 100


async def test_neither_a_super_user_nor_the_brokers_login_can_pose_as_the_controller(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path / "cluster", secure=True, kafka_listeners=True) as cluster:
        zk_connect = f"127.0.0.1:{cluster.state['zookeeper']['port']}"
        admin_login = cluster.client_properties
        async with Admin(cluster.bootstrap, config=admin_login) as admin:
            await admin.create_topic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        checker = DurabilityChecker()
        await produce(cluster.bootstrap, checker, TOPIC, RECORDS, PARTITIONS, admin_login)
        knowledge = await Knowledge.gather(zk_connect)
        victim = Victim(
            zk_connect, knowledge.brokers, TOPIC, PARTITIONS, client_security(admin_login)
        )
        states_before = await victim.states()
        views_before = await victim.metadata_views()

        secrets = cluster.data_dir / SECRETS_DIR
        kafka_tls = client_ssl_context(ca_location=admin_login["ssl.ca.location"])
        kafka_ports = {int(i): b["kafka_port"] for i, b in cluster.state["brokers"].items()}
        for user in (ADMIN_USER, BROKER_USER):
            password = (secrets / f"{user}.password").read_text().strip()
            login = {**admin_login, "sasl.username": user, "sasl.password": password}
            attacker = Attacker(
                knowledge,
                TOPIC,
                security=client_security(login),
                kafka_ssl=kafka_tls,
                kafka_login=(user, password),
            )
            attempts = await attacker.forge_everything(kafka_ports)
            assert {a.listener for a in attempts} == {"msgpack", "kafka"}
            assert_all_refused_with_fixed_messages(attempts, knowledge)

        assert await victim.states() == states_before
        assert await victim.metadata_views() == views_before
        report = checker.check(await victim.read_back())
        assert report.ok, report.summary()
        async with Admin(cluster.bootstrap, config=admin_login) as admin:
            await admin.create_topic("afterwards", 1, 3)
        after = DurabilityChecker()
        await produce(cluster.bootstrap, after, "afterwards", 20, 1, admin_login)
        assert after.check(
            await Victim(
                zk_connect, knowledge.brokers, "afterwards", 1, client_security(admin_login)
            ).read_back()
        ).ok
