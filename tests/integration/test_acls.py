"""ACLs on real brokers over a real ZooKeeper.

Until clients authenticate, every connection's principal is ``User:ANONYMOUS``; these
tests tell the parties apart by host instead. The brokers (and the test's admin
connections) connect from 127.0.0.1, which holds All on the cluster, every topic and
every group; the client under test connects from 127.0.0.2, another loopback address,
and may only do what each test grants ``User:ANONYMOUS`` on that host.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import kafka.admin as kafka_admin
import pytest
import trio
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError as KafkaTopicAuthorizationFailedError

from minibroker.broker.broker import Broker
from minibroker.broker.security.acl_sync import CHANGE_EXPIRATION_MS, AclSync
from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.node.node import Node
from minibroker.protocol.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    creation_body,
    filter_body,
)
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from minibroker.protocol.session import ANONYMOUS
from minibroker.zk.acls import EXTENDED_CHANGES_PATH, change_names, update_acls
from minibroker.zk.client import ZkClient
from tests.support.broker import (
    WireClient,
    batch,
    broker_config,
    fetch_body,
    fetched,
    produce_body,
    produced,
    values_of,
)
from tests.support.cli import run_cli
from tests.support.forged import leader_and_isr, stop_replica

pytestmark = pytest.mark.timeout(120)

ADMIN_HOST = "127.0.0.1"
CLIENT_HOST = "127.0.0.2"
TOPIC_AUTH = TopicAuthorizationFailedError.code
CLUSTER_AUTH = ClusterAuthorizationFailedError.code
POLL_S = 0.02  # brokers in other tasks apply ZooKeeper notifications: nothing to wait on
WAIT_S = 30.0

AUTHORIZER = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer"}

BROKER_GRANTS = [
    ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
    ResourcePattern(ResourceType.TOPIC, "*"),
    ResourcePattern(ResourceType.GROUP, "*"),
]
"""What the brokers and the admin (ANONYMOUS from 127.0.0.1) may do: everything."""


def grant(
    resource_type: ResourceType,
    name: str,
    operation: Operation,
    *,
    host: str = CLIENT_HOST,
    permission: Permission = Permission.ALLOW,
    pattern_type: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(ANONYMOUS, host, operation, permission),
    )


async def seed_broker_acls(zk: ZkClient, grants: list[ResourcePattern] = BROKER_GRANTS) -> None:
    """ACLs the brokers need before they start (as an operator writes them with
    kafka-acls --authorizer-properties zookeeper.connect=...)."""
    entry = AccessControlEntry(ANONYMOUS, ADMIN_HOST, Operation.ALL, Permission.ALLOW)
    for pattern in grants:
        await update_acls(zk, pattern, lambda before: before | {entry})


class Cluster:
    def __init__(
        self, nursery: trio.Nursery, root: Path, zk_connect: str, properties: dict[str, Any]
    ) -> None:
        self.nursery = nursery
        self.root = root
        self.zk_connect = zk_connect
        self.properties = properties
        self.brokers: dict[int, Broker] = {}

    async def start(self, broker_id: int) -> None:
        config = broker_config(
            self.root / f"broker-{broker_id}",
            broker_id=broker_id,
            zookeeper_connect=self.zk_connect,
            zookeeper_session_timeout_ms=4000,
            **AUTHORIZER,
            **self.properties,
        )
        self.brokers[broker_id] = await self.nursery.start(Node(config).run)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    async def admin(self, api_key: ApiKey, body: dict[str, Any], broker_id: int = 1) -> Any:
        async with await WireClient.connect(self.brokers[broker_id].port) as client:
            return await client.request(api_key, body)

    async def client(self, api_key: ApiKey, body: dict[str, Any], broker_id: int = 1) -> Any:
        """The request from the client under test (another host)."""
        stream = await trio.open_tcp_stream(
            "127.0.0.1", self.brokers[broker_id].port, local_address=CLIENT_HOST
        )
        async with WireClient(stream) as client:
            return await client.request(api_key, body)

    async def create_acls(self, *bindings: AclBinding, broker_id: int = 1) -> None:
        body = {"creations": [creation_body(b) for b in bindings]}
        response = await self.admin(ApiKey.CREATE_ACLS, body, broker_id)
        assert [r["error_code"] for r in response["results"]] == [0] * len(bindings), response

    async def delete_acls(self, *bindings: AclBinding, broker_id: int = 1) -> None:
        filters = [
            filter_body(
                AclBindingFilter(
                    b.pattern.resource_type,
                    b.pattern.name,
                    b.pattern.pattern_type,
                    b.entry.principal,
                    b.entry.host,
                    b.entry.operation,
                    b.entry.permission,
                )
            )
            for b in bindings
        ]
        response = await self.admin(ApiKey.DELETE_ACLS, {"filters": filters}, broker_id)
        assert all(r["error_code"] == 0 for r in response["filter_results"]), response

    async def create_topic(self, name: str, partitions: int = 1, rf: int = 1) -> None:
        body = {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf}],
            "timeout_ms": 20_000,
        }
        response = await self.admin(ApiKey.CREATE_TOPICS, body)
        assert response["topics"][0]["error_code"] == 0, response


@asynccontextmanager
async def acl_cluster(
    root: Path,
    zk_connect: str,
    zk_client: ZkClient,
    size: int,
    grants: list[ResourcePattern] = BROKER_GRANTS,
    **properties: Any,
) -> AsyncIterator[Cluster]:
    """``size`` brokers with the authorizer on; ANONYMOUS from 127.0.0.1 holds All on
    ``grants`` (by default the cluster, every topic and every group)."""
    await seed_broker_acls(zk_client, grants)
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery, root, zk_connect, properties)
        for broker_id in range(1, size + 1):
            await cluster.start(broker_id)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()


async def wait_until_async(condition: Callable[[], Any], what: str) -> None:
    with trio.move_on_after(WAIT_S):
        while not await condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"timed out waiting for {what}")


# -- the matrix ---------------------------------------------------------------------------------


def _partition_error(response: dict[str, Any]) -> int:
    code: int = response["topics"][0]["partitions"][0]["error_code"]
    return code


def _topic_error(response: dict[str, Any]) -> int:
    code: int = response["topics"][0]["error_code"]
    return code


def _top_error(response: dict[str, Any]) -> int:
    code: int = response.get("error_code", 0)
    return code


def _resource_error(key: str) -> Callable[[dict[str, Any]], int]:
    def error(response: dict[str, Any]) -> int:
        code: int = response[key][0]["error_code"]
        return code

    return error


def _configs(resource_type: int, name: str, *, alter: bool = False) -> dict[str, Any]:
    resource: dict[str, Any] = {"resource_type": resource_type, "resource_name": name}
    if alter:
        resource["configs"] = []
        return {"resources": [resource]}
    return {"resources": [resource]}


TOPIC = "ledger"
CLUSTER_KEY = (ResourceType.CLUSTER, CLUSTER_NAME)

MATRIX: list[tuple[str, ApiKey, dict[str, Any], tuple[ResourceType, str], Operation, Any, int]] = [
    # (case, API, body, resource, operation granted, where the error is, refusal code)
    ("produce", ApiKey.PRODUCE, produce_body(TOPIC, 0, batch(b"x")),
     (ResourceType.TOPIC, TOPIC), Operation.WRITE, _partition_error, TOPIC_AUTH),
    ("fetch", ApiKey.FETCH, fetch_body(TOPIC, {0: 0}),
     (ResourceType.TOPIC, TOPIC), Operation.READ, _partition_error, TOPIC_AUTH),
    ("list offsets", ApiKey.LIST_OFFSETS,
     {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
     (ResourceType.TOPIC, TOPIC), Operation.DESCRIBE, _partition_error, TOPIC_AUTH),
    ("offset for leader epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH,
     {"topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
     (ResourceType.TOPIC, TOPIC), Operation.DESCRIBE, _partition_error, TOPIC_AUTH),
    ("metadata", ApiKey.METADATA,
     {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False},
     (ResourceType.TOPIC, TOPIC), Operation.DESCRIBE, _topic_error, TOPIC_AUTH),
    ("create topics", ApiKey.CREATE_TOPICS,
     {"topics": [{"name": "fresh", "num_partitions": 1, "replication_factor": 1}],
      "timeout_ms": 20_000},
     (ResourceType.TOPIC, "fresh"), Operation.CREATE, _topic_error, TOPIC_AUTH),
    ("delete topics", ApiKey.DELETE_TOPICS, {"topic_names": ["fresh"], "timeout_ms": 20_000},
     (ResourceType.TOPIC, "fresh"), Operation.DELETE, _topic_error, TOPIC_AUTH),
    ("describe topic configs", ApiKey.DESCRIBE_CONFIGS, _configs(2, TOPIC),
     (ResourceType.TOPIC, TOPIC), Operation.DESCRIBE_CONFIGS, _resource_error("results"),
     TOPIC_AUTH),
    ("describe broker configs", ApiKey.DESCRIBE_CONFIGS, _configs(4, "1"),
     CLUSTER_KEY, Operation.DESCRIBE_CONFIGS, _resource_error("results"), CLUSTER_AUTH),
    ("alter topic configs", ApiKey.ALTER_CONFIGS, _configs(2, TOPIC, alter=True),
     (ResourceType.TOPIC, TOPIC), Operation.ALTER_CONFIGS, _resource_error("responses"),
     TOPIC_AUTH),
    ("describe log dirs", ApiKey.DESCRIBE_LOG_DIRS, {"topics": None},
     CLUSTER_KEY, Operation.DESCRIBE, _top_error, CLUSTER_AUTH),
    ("elect leaders", ApiKey.ELECT_LEADERS,
     {"topic_partitions": [{"topic": TOPIC, "partitions": [0]}]},
     CLUSTER_KEY, Operation.ALTER, _top_error, CLUSTER_AUTH),
    ("alter reassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"topics": []},
     CLUSTER_KEY, Operation.ALTER, _top_error, CLUSTER_AUTH),
    ("alter replica log dirs", ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": []},
     CLUSTER_KEY, Operation.ALTER, _top_error, CLUSTER_AUTH),
    ("list reassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, {"topics": None},
     CLUSTER_KEY, Operation.DESCRIBE, _top_error, CLUSTER_AUTH),
    ("describe cluster", ApiKey.DESCRIBE_CLUSTER, {},
     CLUSTER_KEY, Operation.DESCRIBE, _top_error, CLUSTER_AUTH),
    ("init producer id", ApiKey.INIT_PRODUCER_ID, {"transactional_id": None},
     CLUSTER_KEY, Operation.IDEMPOTENT_WRITE, _top_error, CLUSTER_AUTH),
    ("describe acls", ApiKey.DESCRIBE_ACLS,
     {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
      "permission_type": 1},
     CLUSTER_KEY, Operation.DESCRIBE, _top_error, CLUSTER_AUTH),
    ("create acls", ApiKey.CREATE_ACLS, {"creations": []},
     CLUSTER_KEY, Operation.ALTER, _top_error, CLUSTER_AUTH),
]  # fmt: skip


async def test_every_api_refuses_without_its_acl_and_serves_with_it(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=1) as cluster:
        await cluster.create_topic(TOPIC)
        outcomes = []
        for case, api_key, body, (resource_type, name), operation, error_of, refusal in MATRIX:
            refused = error_of(await cluster.client(api_key, body))
            granted = grant(resource_type, name, operation)
            await cluster.create_acls(granted)
            served = error_of(await cluster.client(api_key, body))
            await cluster.delete_acls(granted)
            outcomes.append((case, refused, served != refusal))
        assert outcomes == [(case, m[-1], True) for case, *m in MATRIX]


async def test_metadata_hides_what_the_principal_may_not_describe_and_needs_create_to_auto_create(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=1) as cluster:
        for name in ("visible", "hidden", "other"):
            await cluster.create_topic(name)
        await cluster.create_acls(grant(ResourceType.TOPIC, "visible", Operation.READ))

        every = await cluster.client(ApiKey.METADATA, {"topics": None})
        assert [t["name"] for t in every["topics"]] == ["visible"]
        named = await cluster.client(
            ApiKey.METADATA,
            {
                "topics": [{"name": "hidden"}, {"name": "visible"}],
                "allow_auto_topic_creation": False,
            },
        )
        errors = {t["name"]: t["error_code"] for t in named["topics"]}
        assert errors == {"hidden": TOPIC_AUTH, "visible": 0}
        admin_view = await cluster.admin(ApiKey.METADATA, {"topics": None})
        assert sorted(t["name"] for t in admin_view["topics"]) == ["hidden", "other", "visible"]

        # Describe alone does not create a topic; Create on it does.
        ask = {"topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True}
        await cluster.create_acls(grant(ResourceType.TOPIC, "auto-", Operation.DESCRIBE,
                                        pattern_type=PatternType.PREFIXED))  # fmt: skip
        assert _topic_error(await cluster.client(ApiKey.METADATA, ask)) == TOPIC_AUTH
        assert await zk_client.exists("/brokers/topics/auto-made") is None
        await cluster.create_acls(grant(ResourceType.TOPIC, "auto-made", Operation.CREATE))

        async def created() -> bool:
            answer = await cluster.client(ApiKey.METADATA, ask)
            return bool(_topic_error(answer) == 0 and answer["topics"][0]["partitions"])

        await wait_until_async(created, "the auto-created topic")


def update_metadata(controller_id: int, controller_epoch: int, broker_epoch: int) -> dict[str, Any]:
    """The topic being deleted (leader -2) and no broker alive."""
    forged = leader_and_isr(
        TOPIC, controller_id, controller_epoch, broker_epoch, leader=2, replicas=[1, 2]
    )
    state = forged["partition_states"][0]
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "partition_states": [{**state, "leader": -2, "isr": [], "replicas": []}],
        "live_brokers": [],
    }


async def test_forged_controller_requests_from_a_non_broker_are_refused_and_change_nothing(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=1) as cluster:
        await cluster.create_topic(TOPIC)
        records = [b"record-%d" % i for i in range(50)]
        answer = await cluster.admin(ApiKey.PRODUCE, produce_body(TOPIC, 0, batch(*records)))
        assert produced(answer)["error_code"] == 0
        # The forger knows everything the fence checks: the real controller id and
        # epoch and this broker's epoch. It may even read and write the topic, and
        # (below) holds ClusterAction: only the broker's identity key is missing.
        controller_id = json.loads((await zk_client.get("/controller"))[0])["brokerid"]
        epoch = int((await zk_client.get("/controller_epoch"))[0])
        stat = await zk_client.exists("/brokers/ids/1")
        assert stat is not None
        broker_epoch = stat.czxid
        await cluster.create_acls(grant(ResourceType.TOPIC, TOPIC, Operation.ALL))
        forged = [
            (ApiKey.STOP_REPLICA, stop_replica(TOPIC, controller_id, epoch, broker_epoch)),
            (
                ApiKey.LEADER_AND_ISR,
                leader_and_isr(
                    TOPIC, controller_id, epoch, broker_epoch, leader=2, replicas=[1, 2]
                ),
            ),
            (ApiKey.UPDATE_METADATA, update_metadata(controller_id, epoch, broker_epoch)),
            # A follower's fetch: an ACL (ClusterAction) is not enough, only a broker's
            # proven connection (broker/security/controller_fence.py).
            (ApiKey.FETCH, {**fetch_body(TOPIC, {0: 0}), "replica_id": 2}),
        ]
        await cluster.create_acls(grant(*CLUSTER_KEY, Operation.CLUSTER_ACTION))
        answers = [(await cluster.client(key, body))["error_code"] for key, body in forged]
        assert answers == [CLUSTER_AUTH] * len(forged)

        read = fetched(await cluster.client(ApiKey.FETCH, fetch_body(TOPIC, {0: 0})))
        assert read["error_code"] == 0
        assert [value for _, value in values_of(read)] == records
        assert (tmp_path / "broker-1" / f"{TOPIC}-0").is_dir()
        metadata = await cluster.admin(ApiKey.METADATA, {"topics": [{"name": TOPIC}]})
        assert metadata["topics"][0]["partitions"][0]["leader_id"] == 1


async def test_acl_changes_reach_every_broker_without_a_restart(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=3) as cluster:
        await cluster.create_topic(TOPIC, partitions=3, rf=3)
        ask = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}

        async def everywhere(expected: int) -> bool:
            codes = [
                _topic_error(await cluster.client(ApiKey.METADATA, ask, broker_id))
                for broker_id in cluster.brokers
            ]
            return codes == [expected] * len(cluster.brokers)

        assert await everywhere(TOPIC_AUTH)
        # Through one broker's CreateAcls: the others follow its change notification.
        describe = grant(ResourceType.TOPIC, TOPIC, Operation.DESCRIBE)
        await cluster.create_acls(describe, broker_id=2)
        await wait_until_async(lambda: everywhere(0), "the allow on every broker")
        # Straight into ZooKeeper, as Kafka's tools can: a deny wins over the allow.
        deny = AccessControlEntry(ANONYMOUS, CLIENT_HOST, Operation.ALL, Permission.DENY)
        prefix = ResourcePattern(ResourceType.TOPIC, TOPIC[:3], PatternType.PREFIXED)
        await update_acls(zk_client, prefix, lambda before: before | {deny})
        await wait_until_async(lambda: everywhere(TOPIC_AUTH), "the deny on every broker")
        await update_acls(zk_client, prefix, lambda before: before - {deny})
        await wait_until_async(lambda: everywhere(0), "the deny gone from every broker")
        await cluster.delete_acls(describe, broker_id=3)
        await wait_until_async(lambda: everywhere(TOPIC_AUTH), "the allow gone everywhere")


async def test_a_broker_whose_session_expired_reloads_every_acl(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, zk_session_killer: Any
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=1) as cluster:
        await cluster.create_topic(TOPIC)
        ask = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
        broker = cluster.brokers[1]
        assert broker.membership is not None
        session = broker.membership.zk.zk
        await zk_session_killer(session)
        # Written while the broker may be between sessions: its notification can be
        # missed, the reload on the new session must not be.
        entry = AccessControlEntry(ANONYMOUS, CLIENT_HOST, Operation.DESCRIBE, Permission.ALLOW)
        await update_acls(
            zk_client, ResourcePattern(ResourceType.TOPIC, TOPIC), lambda b: b | {entry}
        )

        async def allowed() -> bool:
            return _topic_error(await cluster.client(ApiKey.METADATA, ask)) == 0

        await wait_until_async(allowed, "the ACL after the new session")


# -- the command line ---------------------------------------------------------------------------


async def test_acl_cli_adds_lists_and_removes_with_kafka_acls_options(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(tmp_path, zk_connect, zk_client, size=1) as cluster:
        bootstrap = cluster.bootstrap
        added = await run_cli(
            "acl", "add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
            "--operation", "Read", "--operation", "describe", "--topic", "orders-",
            "--resource-pattern-type", "prefixed", bootstrap=bootstrap,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        denied = await run_cli(
            "acl", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9",
            "--operation", "Write", "--group", "billing", bootstrap=bootstrap,
        )  # fmt: skip
        assert denied.returncode == 0, denied.stderr

        listed = await run_cli("acl", "list", "--format", "json", bootstrap=bootstrap)
        assert listed.returncode == 0, listed.stderr
        mine = [b for b in json.loads(listed.stdout) if b["principal"] != ANONYMOUS]
        assert mine == [
            {"resource_type": "Group", "resource_name": "billing", "pattern_type": "LITERAL",
             "principal": "User:bob", "host": "10.0.0.9", "operation": "Write",
             "permission_type": "Deny"},
            {"resource_type": "Topic", "resource_name": "orders-", "pattern_type": "PREFIXED",
             "principal": "User:alice", "host": "*", "operation": "Read",
             "permission_type": "Allow"},
            {"resource_type": "Topic", "resource_name": "orders-", "pattern_type": "PREFIXED",
             "principal": "User:alice", "host": "*", "operation": "Describe",
             "permission_type": "Allow"},
            {"resource_type": "Topic", "resource_name": "orders-", "pattern_type": "PREFIXED",
             "principal": "User:bob", "host": "*", "operation": "Read",
             "permission_type": "Allow"},
            {"resource_type": "Topic", "resource_name": "orders-", "pattern_type": "PREFIXED",
             "principal": "User:bob", "host": "*", "operation": "Describe",
             "permission_type": "Allow"},
        ]  # fmt: skip
        # Stored as Kafka stores them.
        data, _ = await zk_client.get("/kafka-acl-extended/prefixed/Topic/orders-")
        assert {a["principal"] for a in json.loads(data)["acls"]} == {"User:alice", "User:bob"}

        # match: every ACL that applies to the topic orders-eu.
        matching = await run_cli(
            "acl", "list", "--topic", "orders-eu", "--resource-pattern-type", "match",
            "--format", "json", bootstrap=bootstrap,
        )  # fmt: skip
        names = {(b["resource_name"], b["pattern_type"]) for b in json.loads(matching.stdout)}
        assert names == {("orders-", "PREFIXED"), ("*", "LITERAL")}

        removed = await run_cli(
            "acl", "remove", "--allow-principal", "User:bob", "--operation", "Read",
            "--topic", "orders-", "--resource-pattern-type", "prefixed", "--force",
            bootstrap=bootstrap,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.count("Removed ACL") == 1
        text = await run_cli("acl", "list", "--topic", "orders-", "--resource-pattern-type",
                             "prefixed", bootstrap=bootstrap)  # fmt: skip
        assert "patternType=PREFIXED" in text.stdout
        assert "principal=User:bob, host=*, operation=READ" not in text.stdout
        assert "principal=User:bob, host=*, operation=DESCRIBE" in text.stdout

        usage = await run_cli("acl", "add", "--topic", "t", bootstrap=bootstrap)
        assert usage.returncode == 2
        assert "principal" in usage.stderr


async def test_kafka_python_admin_manages_acls_over_the_kafka_listener(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with acl_cluster(
        tmp_path, zk_connect, zk_client, size=1, kafka_listeners="127.0.0.1:0"
    ) as cluster:
        address = cluster.brokers[1].kafka_address
        assert address is not None
        carol = kafka_admin.ACLFilter(
            "User:carol",
            None,
            kafka_admin.ACLOperation.ANY,
            kafka_admin.ACLPermissionType.ANY,
            kafka_admin.ResourcePatternFilter(
                kafka_admin.ResourceType.ANY, None, kafka_admin.ACLResourcePatternType.ANY
            ),
        )

        def create_then_describe() -> list[Any]:
            admin = kafka_admin.KafkaAdminClient(bootstrap_servers=f"{address[0]}:{address[1]}")
            try:
                acl = kafka_admin.ACL(
                    "User:carol",
                    "*",
                    kafka_admin.ACLOperation.READ,
                    kafka_admin.ACLPermissionType.ALLOW,
                    kafka_admin.ResourcePattern(
                        kafka_admin.ResourceType.TOPIC,
                        "audit-",
                        kafka_admin.ACLResourcePatternType.PREFIXED,
                    ),
                )
                created = admin.create_acls([acl])
                assert created["failed"] == [], created
                found, error = admin.describe_acls(carol)
                assert error.errno == 0, error
                return list(found)
            finally:
                admin.close()

        found = await trio.to_thread.run_sync(create_then_describe)
        assert [(a.resource_pattern.resource_name, a.operation.name) for a in found] == [
            ("audit-", "READ")
        ]
        # Stored where Kafka stores it; the msgpack listener sees the same ACL.
        data, _ = await zk_client.get("/kafka-acl-extended/prefixed/Topic/audit-")
        assert json.loads(data)["acls"] == [
            {"principal": "User:carol", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ]

        def delete() -> Any:
            admin = kafka_admin.KafkaAdminClient(bootstrap_servers=f"{address[0]}:{address[1]}")
            try:
                return admin.delete_acls([carol])
            finally:
                admin.close()

        deleted = await trio.to_thread.run_sync(delete)
        assert [len(acls) for _, acls, _ in deleted] == [1]
        mine = {"resource_type_filter": 1, "pattern_type_filter": 1, "principal_filter":
                "User:carol", "operation": 1, "permission_type": 1}  # fmt: skip
        assert (await cluster.admin(ApiKey.DESCRIBE_ACLS, mine))["resources"] == []


async def test_acl_sync_applies_each_notification_once_and_purges_expired_ones(
    zk_client: ZkClient,
) -> None:
    authorizer = AclAuthorizer()
    now_ms = [time.time_ns() // 1_000_000]
    sync = AclSync(authorizer, zk_client, clock_ms=lambda: now_ms[0])
    await sync.load()
    pattern = ResourcePattern(ResourceType.GROUP, "billing-", PatternType.PREFIXED)
    entry = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)
    await update_acls(zk_client, pattern, lambda before: before | {entry})
    await sync.apply_changes(EXTENDED_CHANGES_PATH)
    assert authorizer.acls(pattern) == {entry}
    assert len(await change_names(zk_client, EXTENDED_CHANGES_PATH, watch=False)) == 1

    now_ms[0] += CHANGE_EXPIRATION_MS + 60_000
    await sync.apply_changes(EXTENDED_CHANGES_PATH)
    assert await change_names(zk_client, EXTENDED_CHANGES_PATH, watch=False) == []
    assert authorizer.acls(pattern) == {entry}


async def test_kafka_python_producer_gets_topic_authorization_failed_where_it_may_not_write(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    # Here 127.0.0.1 (kafka-python, the broker itself) holds All on the cluster only;
    # topics are granted one by one.
    cluster_only = [ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)]
    async with acl_cluster(
        tmp_path, zk_connect, zk_client, 1, cluster_only, kafka_listeners="127.0.0.1:0"
    ) as cluster:
        for name in ("open", "closed"):
            await cluster.create_topic(name)
        await cluster.create_acls(
            grant(ResourceType.TOPIC, "open", Operation.WRITE, host=ADMIN_HOST),
            grant(ResourceType.TOPIC, "closed", Operation.READ, host="10.9.9.9"),
        )
        address = cluster.brokers[1].kafka_address
        assert address is not None

        def produce() -> tuple[int, str]:
            producer = KafkaProducer(
                bootstrap_servers=f"{address[0]}:{address[1]}", acks=1, max_block_ms=10_000
            )
            try:
                offset = producer.send("open", b"allowed").get(timeout=30).offset
                with pytest.raises(KafkaTopicAuthorizationFailedError) as refused:
                    producer.send("closed", b"refused").get(timeout=30)
                return offset, type(refused.value).__name__
            finally:
                producer.close(timeout=5)

        offset, error = await trio.to_thread.run_sync(produce)
        assert (offset, error) == (0, "TopicAuthorizationFailedError")
        read = fetched(await cluster.admin(ApiKey.FETCH, fetch_body("closed", {0: 0})))
        assert read["error_code"] == TOPIC_AUTH  # the admin host may not read it either
