"""The per-API authorization table: every API has a rule; rules narrow and complete."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.requests.dispatcher import Deferred
from minibroker.broker.requests.request_handler import CloseConnection
from minibroker.broker.security.authorization import RULES, RequestAuthorization, rules_missing
from minibroker.broker.security.authorization_rules import AuthorizationContext
from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.protocol.acls import (
    AccessControlEntry,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from minibroker.protocol.api import SCHEMAS, ApiKey, RequestHeader
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from minibroker.protocol.session import Session

ALICE = "User:alice"


def test_every_api_the_broker_declares_has_a_rule() -> None:
    assert rules_missing(SCHEMAS) == []


def authorization(*acls: tuple[ResourcePattern, Operation]) -> RequestAuthorization:
    authorizer = AclAuthorizer()
    for pattern, operation in acls:
        entry = AccessControlEntry(ALICE, "*", operation, Permission.ALLOW)
        authorizer.set_acls(pattern, {*authorizer.acls(pattern), entry})
    return RequestAuthorization(AuthorizationContext(authorizer, MetadataCache(0)))


def header(api_key: int) -> RequestHeader:
    return RequestHeader(api_key, 0, 1, "c", Session(ALICE, "10.0.0.1", "PLAINTEXT"))


def test_produce_handler_sees_only_writable_topics_and_the_rest_are_refused() -> None:
    auth = authorization((ResourcePattern(ResourceType.TOPIC, "ok"), Operation.WRITE))
    body = {
        "acks": 1,
        "topics": [
            {"name": "ok", "partitions": [{"index": 0, "records": b""}]},
            {
                "name": "no",
                "partitions": [{"index": 0, "records": b""}, {"index": 1, "records": b""}],
            },
        ],
    }
    seen: list[Any] = []

    def handler(h: RequestHeader, b: dict[str, Any]) -> dict[str, Any]:
        seen.append([t["name"] for t in b["topics"]])
        return {"topics": [{"name": "ok", "partitions": [{"index": 0, "error_code": 0}]}]}

    answer = auth.run(header(ApiKey.PRODUCE), body, handler)
    assert seen == [["ok"]]
    assert isinstance(answer, dict)
    refused = next(t for t in answer["topics"] if t["name"] == "no")
    assert [p["error_code"] for p in refused["partitions"]] == [
        TopicAuthorizationFailedError.code
    ] * 2


async def test_a_deferred_answer_is_completed_when_it_arrives() -> None:
    auth = authorization()
    body = {"acks": -1, "topics": [{"name": "no", "partitions": [{"index": 3, "records": b""}]}]}

    async def wait() -> dict[str, Any]:
        return {"topics": []}

    answer = auth.run(header(ApiKey.PRODUCE), body, lambda h, b: Deferred(wait))
    assert isinstance(answer, Deferred)
    completed = await answer.wait()
    assert completed is not None
    assert completed["topics"][0]["partitions"][0]["index"] == 3


@pytest.mark.parametrize(
    ("api_key", "body"),
    [
        (ApiKey.STOP_REPLICA, {}),
        (ApiKey.LEADER_AND_ISR, {}),
        (ApiKey.UPDATE_METADATA, {}),
        (ApiKey.CONTROLLED_SHUTDOWN, {}),
        (ApiKey.FETCH, {"replica_id": 2, "topics": []}),
        (ApiKey.ELECT_LEADERS, {}),
        (ApiKey.CREATE_ACLS, {}),
    ],
)
def test_cluster_requests_are_refused_before_the_handler_runs(api_key: int, body: Any) -> None:
    auth = authorization((ResourcePattern(ResourceType.TOPIC, "*"), Operation.ALL))
    ran: list[int] = []
    with pytest.raises(ClusterAuthorizationFailedError):
        auth.run(header(api_key), body, lambda h, b: ran.append(1))  # type: ignore[func-returns-value]
    assert ran == []


def test_group_requests_need_the_group() -> None:
    auth = authorization((ResourcePattern(ResourceType.GROUP, "mine"), Operation.READ))
    ok = auth.run(header(11), {"group_id": "mine"}, lambda h, b: {"error_code": 0})
    assert ok == {"error_code": 0}
    with pytest.raises(GroupAuthorizationFailedError):
        auth.run(header(11), {"group_id": "theirs"}, lambda h, b: {"error_code": 0})


def test_metadata_for_all_topics_leaves_out_the_undescribable() -> None:
    auth = authorization((ResourcePattern(ResourceType.TOPIC, "seen"), Operation.READ))
    answer = auth.run(
        header(ApiKey.METADATA),
        {"topics": None, "allow_auto_topic_creation": False},
        lambda h, b: {"topics": [{"name": "seen"}, {"name": "hidden"}]},
    )
    assert isinstance(answer, dict)
    assert [t["name"] for t in answer["topics"]] == ["seen"]


def test_the_table_names_kafkas_operations_for_configs() -> None:
    auth = authorization((ResourcePattern(ResourceType.TOPIC, "t"), Operation.ALTER_CONFIGS))
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "t"},
            {"resource_type": 4, "resource_name": "1"},
        ]
    }
    answer = auth.run(header(ApiKey.DESCRIBE_CONFIGS), body, lambda h, b: {"results": []})
    assert isinstance(answer, dict)
    assert [r["error_code"] for r in answer["results"]] == [ClusterAuthorizationFailedError.code]
    assert ApiKey.DESCRIBE_CONFIGS in RULES


def test_offset_commit_needs_read_on_the_group_and_on_each_topic() -> None:
    auth = authorization(
        (ResourcePattern(ResourceType.GROUP, "g"), Operation.READ),
        (ResourcePattern(ResourceType.TOPIC, "mine"), Operation.READ),
    )
    body = {
        "group_id": "g",
        "topics": [
            {"name": "mine", "partitions": [{"partition_index": 0}]},
            {"name": "theirs", "partitions": [{"partition_index": 1}]},
        ],
    }
    answer = auth.run(
        header(8), body, lambda h, b: {"topics": [{"name": t["name"]} for t in b["topics"]]}
    )
    assert isinstance(answer, dict)
    assert answer["topics"] == [
        {"name": "mine"},
        {
            "name": "theirs",
            "partitions": [
                {"partition_index": 1, "error_code": TopicAuthorizationFailedError.code}
            ],
        },
    ]
    with pytest.raises(GroupAuthorizationFailedError):
        auth.run(header(8), {**body, "group_id": "other"}, lambda h, b: {})


def test_offset_fetch_of_every_topic_leaves_out_the_undescribable() -> None:
    auth = authorization(
        (ResourcePattern(ResourceType.GROUP, "g"), Operation.DESCRIBE),
        (ResourcePattern(ResourceType.TOPIC, "mine"), Operation.READ),
    )
    answer = auth.run(
        header(9),
        {"group_id": "g", "topics": None},
        lambda h, b: {"topics": [{"name": "mine"}, {"name": "theirs"}]},
    )
    assert answer == {"topics": [{"name": "mine"}]}


def test_describe_groups_answers_each_refused_group_in_the_answer_shape() -> None:
    auth = authorization((ResourcePattern(ResourceType.GROUP, "g"), Operation.DESCRIBE))
    answer = auth.run(
        header(15),
        {"groups": ["g", "h"]},
        lambda h, b: {"groups": [{"group_id": g, "error_code": 0} for g in b["groups"]]},
    )
    assert isinstance(answer, dict)
    refused = answer["groups"][1]
    assert refused["group_id"] == "h"
    assert refused["error_code"] == GroupAuthorizationFailedError.code
    assert refused["members"] == []


def test_list_groups_shows_only_describable_groups_without_describe_on_the_cluster() -> None:
    auth = authorization((ResourcePattern(ResourceType.GROUP, "g"), Operation.DESCRIBE))
    answer = auth.run(
        header(16), {}, lambda h, b: {"groups": [{"group_id": "g"}, {"group_id": "h"}]}
    )
    assert answer == {"groups": [{"group_id": "g"}]}


def test_find_coordinator_of_a_group_needs_describe_on_it() -> None:
    auth = authorization((ResourcePattern(ResourceType.GROUP, "g"), Operation.READ))
    assert auth.run(header(10), {"key": "g", "key_type": 0}, lambda h, b: {"ok": 1}) == {"ok": 1}
    with pytest.raises(GroupAuthorizationFailedError):
        auth.run(header(10), {"key": "h", "key_type": 0}, lambda h, b: {"ok": 1})


@pytest.mark.parametrize(("auto_create", "refused"), [(True, True), (False, False)])
def test_a_missing_topic_needs_create_only_where_it_would_be_auto_created(
    auto_create: bool, refused: bool
) -> None:
    authorizer = AclAuthorizer()
    entry = AccessControlEntry(ALICE, "*", Operation.DESCRIBE, Permission.ALLOW)
    authorizer.set_acls(ResourcePattern(ResourceType.TOPIC, "new"), [entry])
    auth = RequestAuthorization(
        AuthorizationContext(authorizer, MetadataCache(0), auto_create_topics=auto_create)
    )
    seen: list[list[str]] = []

    def handler(h: RequestHeader, b: dict[str, Any]) -> dict[str, Any]:
        seen.append([t["name"] for t in b["topics"]])
        return {"topics": []}

    body = {"topics": [{"name": "new"}], "allow_auto_topic_creation": True}
    answer = auth.run(header(ApiKey.METADATA), body, handler)
    assert isinstance(answer, dict)
    assert seen == [[] if refused else ["new"]]
    assert bool(answer["topics"]) is refused


def test_an_acks_0_produce_to_a_refused_topic_closes_the_connection() -> None:
    auth = authorization()
    body = {"acks": 0, "topics": [{"name": "no", "partitions": [{"index": 0, "records": b""}]}]}
    ran: list[int] = []
    with pytest.raises(CloseConnection):
        auth.run(header(ApiKey.PRODUCE), body, lambda h, b: ran.append(1))  # type: ignore[func-returns-value]
    assert ran == []


def test_an_api_missing_from_the_table_is_for_brokers_only() -> None:
    auth = authorization((ResourcePattern(ResourceType.TOPIC, "*"), Operation.ALL))
    with pytest.raises(ClusterAuthorizationFailedError):
        auth.run(header(9999), {}, lambda h, b: {"error_code": 0})
    broker = authorization(
        (ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"), Operation.CLUSTER_ACTION)
    )
    assert broker.run(header(9999), {}, lambda h, b: {"error_code": 0}) == {"error_code": 0}
