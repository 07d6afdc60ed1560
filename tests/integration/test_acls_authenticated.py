"""ACLs with authenticated principals: SCRAM users on a SASL_PLAINTEXT listener of a real
cluster-mode broker whose own login (``User:broker``) is a super user.

Alice may write and read the ``pay-`` topics; Bob may do nothing. Both log in; only
their principals tell them apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from minibroker.client.admin import Admin
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from minibroker.zk.client import ZkClient
from tests.support.broker import batch, fetch_body, fetched, produce_body, produced, values_of
from tests.support.cli import run_cli
from tests.support.forged import stop_replica
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(120)

TOPIC = "pay-eu"
TOPIC_AUTH = TopicAuthorizationFailedError.code
CLUSTER_AUTH = ClusterAuthorizationFailedError.code
PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


def login(user: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", user, PASSWORDS[user])


async def request(port: int, user: str, api_key: ApiKey, body: dict[str, Any]) -> Any:
    async with Connection("127.0.0.1", port, security=login(user)) as conn:
        return await conn.request(api_key, body)


def properties() -> dict[str, str]:
    return {
        **sasl_properties(),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER};User:admin",
    }


async def test_users_get_what_their_acls_give_and_a_forged_stop_replica_is_refused(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    await add_user(zk_client, BROKER_USER, BROKER_PASSWORD)
    for user, password in PASSWORDS.items():
        await add_user(zk_client, user, password)
    async with secured_node(tmp_path, zk_connect, properties()) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        config = tmp_path / "admin.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.username=admin\nsasl.password=admin-pw\n"
        )
        for operation in ("Write", "Read"):
            added = await run_cli(
                "acl", "add", "--allow-principal", "User:alice", "--operation", operation,
                "--topic", "pay-", "--resource-pattern-type", "prefixed",
                "--command-config", str(config), bootstrap=bootstrap,
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
        async with Admin(bootstrap, config=login("admin")) as admin:
            await admin.create_topic(TOPIC, partitions=1, replication_factor=1)
            await admin.create_topic("payroll-secret", partitions=1, replication_factor=1)

        records = [b"payment-%d" % i for i in range(20)]
        written = await request(broker.port, "alice", ApiKey.PRODUCE,
                                produce_body(TOPIC, 0, batch(*records)))  # fmt: skip
        assert produced(written)["error_code"] == 0
        refused = await request(broker.port, "bob", ApiKey.PRODUCE,
                                produce_body(TOPIC, 0, batch(b"fraud")))  # fmt: skip
        assert produced(refused)["error_code"] == TOPIC_AUTH

        # Metadata shows each user only what it may describe.
        seen = {
            user: sorted(
                t["name"]
                for t in (await request(broker.port, user, ApiKey.METADATA, {"topics": None}))[
                    "topics"
                ]
            )
            for user in ("alice", "bob", "admin")
        }
        assert seen == {"alice": [TOPIC], "bob": [], "admin": [TOPIC, "payroll-secret"]}

        # Bob knows everything the controller fence checks, but is not the broker.
        controller_id = json.loads((await zk_client.get("/controller"))[0])["brokerid"]
        epoch = int((await zk_client.get("/controller_epoch"))[0])
        stat = await zk_client.exists("/brokers/ids/1")
        assert stat is not None
        stop = stop_replica(TOPIC, controller_id, epoch, stat.czxid)
        for user in ("bob", "alice"):
            answer = await request(broker.port, user, ApiKey.STOP_REPLICA, stop)
            assert answer["error_code"] == CLUSTER_AUTH
        read = fetched(await request(broker.port, "alice", ApiKey.FETCH, fetch_body(TOPIC, {0: 0})))
        assert [value for _, value in values_of(read)] == records
        assert (tmp_path / f"{TOPIC}-0").is_dir()

        # The refusals were counted.
        assert broker.parts.authorizer is not None
        assert sum(broker.parts.authorizer.denied.values()) >= 3
