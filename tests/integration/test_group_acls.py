"""Group ACLs against the real coordinator: finding, joining, committing, fetching,
describing, listing and deleting a group each ask what Kafka asks, per logged-in user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
    TopicAuthorizationFailedError,
)
from minibroker.zk.client import ZkClient
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(120)

PASSWORDS = {"admin": "a", "alice": "b", "bob": "c"}
GROUP_DENIED = GroupAuthorizationFailedError.code
TOPIC_DENIED = TopicAuthorizationFailedError.code
NOT_READY = {
    CoordinatorLoadInProgressError.code,
    CoordinatorNotAvailableError.code,
    NotCoordinatorError.code,
}
LITERAL, ALLOW, READ, TOPIC, GROUP = 3, 3, 3, 2, 3  # Kafka's ACL enum codes


def login(user: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", user, PASSWORDS[user])


async def ask(port: int, user: str, key: ApiKey, body: dict[str, Any]) -> Any:
    async with Connection("127.0.0.1", port, security=login(user)) as connection:
        return await connection.request(key, body)


def allow_read(resource_type: int, name: str, user: str) -> dict[str, Any]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": LITERAL,
        "principal": f"User:{user}",
        "host": "*",
        "operation": READ,
        "permission_type": ALLOW,
    }


async def test_group_apis_answer_each_user_what_its_acls_give(
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
    async with secured_node(tmp_path, zk_connect, properties) as broker:
        port = broker.port
        async with Admin(f"127.0.0.1:{port}", config=login("admin")) as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
            await admin.create_topic("secret", partitions=1, replication_factor=1)
        creations = [
            allow_read(GROUP, "g", "alice"),
            allow_read(TOPIC, "t", "alice"),
            allow_read(TOPIC, "t", "bob"),
        ]
        created = await ask(port, "admin", ApiKey.CREATE_ACLS, {"creations": creations})
        assert [r["error_code"] for r in created["results"]] == [0, 0, 0]

        find = {"key": "g", "key_type": 0}
        with trio.fail_after(30):  # the first FindCoordinator creates __consumer_offsets
            while (found := await ask(port, "alice", ApiKey.FIND_COORDINATOR, find))[
                "error_code"
            ] in NOT_READY:
                await trio.sleep(0.2)
        assert found["error_code"] == 0, found  # Read on the group implies Describe
        refused = await ask(port, "bob", ApiKey.FIND_COORDINATOR, find)
        assert refused["error_code"] == GROUP_DENIED, refused
        join = {
            "group_id": "g",
            "session_timeout_ms": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
            "require_known_member_id": False,
        }
        refused = await ask(port, "bob", ApiKey.JOIN_GROUP, join)
        assert refused["error_code"] == GROUP_DENIED, refused

        commit = {
            "group_id": "g",
            "generation_id": -1,
            "member_id": "",
            "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "committed_offset": offset}]}
                for name, offset in (("t", 5), ("secret", 7))
            ],
        }
        with trio.fail_after(30):  # the coordinator may still be loading its partition
            while True:
                answer = await ask(port, "alice", ApiKey.OFFSET_COMMIT, commit)
                codes = {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]}
                if codes["t"] not in NOT_READY:
                    break
                await trio.sleep(0.2)
        assert codes == {"t": 0, "secret": TOPIC_DENIED}, answer
        fetched = await ask(port, "alice", ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None})
        committed = [(t["name"], t["partitions"][0]["committed_offset"]) for t in fetched["topics"]]
        assert committed == [("t", 5)], fetched

        described = await ask(port, "bob", ApiKey.DESCRIBE_GROUPS, {"groups": ["g"]})
        assert described["groups"][0]["error_code"] == GROUP_DENIED, described
        assert (await ask(port, "bob", ApiKey.LIST_GROUPS, {}))["groups"] == []
        listed = await ask(port, "alice", ApiKey.LIST_GROUPS, {})
        assert [g["group_id"] for g in listed["groups"]] == ["g"], listed
        deleted = await ask(port, "bob", ApiKey.DELETE_GROUPS, {"groups_names": ["g"]})
        assert deleted["results"][0]["error_code"] == GROUP_DENIED, deleted
