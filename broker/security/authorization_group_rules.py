"""The authorization rules of the group coordinator's APIs, by Kafka's field names:
READ, DESCRIBE or DELETE on the group, and on the topics of committed offsets."""

from __future__ import annotations

from typing import Final

from minibroker.broker.security.authorization_rules import (
    GROUP,
    TOPIC,
    Asker,
    Completion,
    per_group,
    per_topic,
    split_items,
    then,
)
from minibroker.broker.security.authorized_operations import group_operations
from minibroker.protocol.acls import Operation
from minibroker.protocol.api import Body
from minibroker.protocol.errors import TopicAuthorizationFailedError

FIND_COORDINATOR_KEY_GROUP: Final = 0


def find_coordinator(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body.get("key_type", FIND_COORDINATOR_KEY_GROUP) == FIND_COORDINATOR_KEY_GROUP:
        for key in [body.get("key", ""), *body.get("coordinator_keys", ())]:
            if key:
                asker.require_group(Operation.DESCRIBE, key)
    return body, None


def offset_commit(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    asker.require_group(Operation.READ, body["group_id"])
    return OFFSET_COMMIT_TOPICS(asker, body)


OFFSET_COMMIT_TOPICS: Final = per_topic(Operation.READ)


def offset_fetch(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """DESCRIBE on the group(s); of the topics, those the principal may not describe
    are refused (named) or left out (all topics), as Kafka does."""
    asker.require_group(Operation.DESCRIBE, body.get("group_id"))
    for group in body.get("groups") or ():
        asker.require_group(Operation.DESCRIBE, group["group_id"])
    if body.get("group_id") is None:
        return body, None
    may = asker.may
    if body.get("topics") is None:

        def hide(answer: Body) -> Body:
            topics = [
                t for t in answer.get("topics", ()) if may(Operation.DESCRIBE, TOPIC, t["name"])
            ]
            return {**answer, "topics": topics}

        return body, hide
    error = TopicAuthorizationFailedError()
    return split_items(
        body,
        "topics",
        lambda topic: may(Operation.DESCRIBE, TOPIC, topic["name"]),
        lambda topic: {
            "name": topic["name"],
            "partitions": [
                {"partition_index": p, "committed_offset": -1, "error_code": error.code}
                for p in topic["partition_indexes"]
            ],
        },
    )


def offset_delete(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    asker.require_group(Operation.DELETE, body["group_id"])
    return OFFSET_DELETE_TOPICS(asker, body)


OFFSET_DELETE_TOPICS: Final = per_topic(Operation.READ)


DESCRIBE_GROUPS_EMPTY: Final = {
    "group_state": "",
    "protocol_type": "",
    "protocol_data": "",
    "members": [],
}
"""The fields of a DescribeGroups answer for a group that is not described."""


def list_groups(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if asker.may_on_cluster(Operation.DESCRIBE):
        return body, None

    def hide(answer: Body) -> Body:
        groups = [
            g for g in answer["groups"] if asker.may(Operation.DESCRIBE, GROUP, g["group_id"])
        ]
        return {**answer, "groups": groups}

    return body, hide


def describe_groups(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """DESCRIBE on each group; the authorized operations asked for, the principal's."""
    allowed, complete = DESCRIBE_GROUPS(asker, body)
    if not body.get("include_authorized_operations"):
        return allowed, complete

    def operations(answer: Body) -> Body:
        groups = [
            {**g, "authorized_operations": group_operations(True, g["group_id"], asker.authorized)}
            if g["error_code"] == 0
            else g
            for g in answer["groups"]
        ]
        return {**answer, "groups": groups}

    return allowed, then(complete, operations)


DESCRIBE_GROUPS: Final = per_group(Operation.DESCRIBE, "groups", "groups", DESCRIBE_GROUPS_EMPTY)
