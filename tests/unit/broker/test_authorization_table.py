"""The per-API authorization table: every API has a rule; rules narrow and complete."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.broker.authorization import RULES, RequestAuthorization, rules_missing
from minibroker.broker.authorizer import AclAuthorizer
from minibroker.broker.dispatcher import Deferred
from minibroker.broker.metadata_cache import MetadataCache
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
    return RequestAuthorization(authorizer, MetadataCache(0))


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
