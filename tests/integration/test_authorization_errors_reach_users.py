"""A user refused by ACLs is told so, by name, in the Python client and the CLI - never
"cannot reach any broker", a timeout or a traceback.

Recipe: a cluster-mode broker with SASL and ACLs; ``bob`` may read topic ``t`` but has
no ACL on any group, ``eve`` has no ACL at all. bob consuming in a group, eve reading
or writing ``t``: each fails fast with GROUP_AUTHORIZATION_FAILED /
TOPIC_AUTHORIZATION_FAILED, through ``Consumer`` / ``Producer`` and through
``minibroker consume`` / ``produce`` (one line on stderr, exit code 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from minibroker.zk.client import ZkClient
from tests.support.cli import run_cli
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(180)

PASSWORDS = {"admin": "a", "bob": "b", "eve": "e"}
FAST_S = 20.0
"""A refusal must come well before any client timeout (30 s)."""


def login(user: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", user, PASSWORDS[user])


def properties_file(directory: Path, user: str) -> Path:
    path = directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username={user}\nsasl.password={PASSWORDS[user]}\n"
    )
    return path


async def test_acl_refusals_reach_the_client_and_the_cli_as_what_they_are(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await add_user(zk_client, BROKER_USER, BROKER_PASSWORD)
    for user, password in PASSWORDS.items():
        await add_user(zk_client, user, password)
    properties = {
        **sasl_properties(),
        "authorizer.class.name": "acl",
        "super.users": f"User:{BROKER_USER};User:admin",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    async with secured_node(tmp_path / "broker", zk_connect, properties) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        async with Admin(bootstrap, config=login("admin")) as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
        read_t = {
            "resource_type": 2,
            "resource_name": "t",
            "resource_pattern_type": 3,
            "principal": "User:bob",
            "host": "*",
            "operation": 3,
            "permission_type": 3,
        }
        async with Connection("127.0.0.1", broker.port, security=login("admin")) as conn:
            created = await conn.request(ApiKey.CREATE_ACLS, {"creations": [read_t]})
        assert created["results"][0]["error_code"] == 0

        with trio.fail_after(FAST_S), pytest.raises(GroupAuthorizationFailedError):
            async with Consumer(bootstrap, group_id="g", config=login("bob")) as consumer:
                consumer.subscribe(["t"])
                await consumer.poll(timeout_ms=10_000)
        with trio.fail_after(FAST_S), pytest.raises(TopicAuthorizationFailedError):
            async with Consumer(bootstrap, config=login("eve")) as consumer:
                consumer.assign([("t", 0)])
                await consumer.poll(timeout_ms=10_000)
        with trio.fail_after(FAST_S), pytest.raises(TopicAuthorizationFailedError):
            async with Producer(bootstrap, config=login("eve")) as producer:
                await producer.send("t", b"x")

        bob = properties_file(tmp_path, "bob")
        eve = properties_file(tmp_path, "eve")
        cases = [
            (
                ("consume", "t", "--group", "g", "--command-config", str(bob)),
                "GROUP_AUTHORIZATION_FAILED",
            ),
            (
                ("consume", "t", "--timeout-ms", "10000", "--command-config", str(eve)),
                "TOPIC_AUTHORIZATION_FAILED",
            ),
            (("produce", "t", "--command-config", str(eve)), "TOPIC_AUTHORIZATION_FAILED"),
        ]
        for argv, error in cases:
            done = await run_cli(*argv, bootstrap=bootstrap, stdin="x\n")
            assert done.returncode == 1, (argv, done.stdout, done.stderr)
            assert error in done.stderr, (argv, done.stderr)
            assert "Traceback" not in done.stderr and "cannot reach" not in done.stderr
