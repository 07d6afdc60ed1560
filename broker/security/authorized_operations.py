"""KIP-430's ``authorized_operations`` fields: which operations the asking principal may
perform on each topic, group or the cluster an answer lists, when the request asks.

The handlers fill them in as a broker without an authorizer answers (every operation
the resource type supports: nothing is checked there); with an authorizer, the
authorization rules (broker/security/authorization_broker_rules.py,
broker/security/authorization_group_rules.py) fill them in again for the principal, through the
same functions, so the handlers stay free of authorization code.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.protocol.acls import ALL_AUTHORIZED, CLUSTER_NAME, ResourceType
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.form import NO_AUTHORIZED_OPERATIONS

Authorized = Callable[[ResourceType, str], int]
"""(resource type, name) -> the bitfield of operations allowed on it."""


def everything(resource_type: ResourceType, name: str) -> int:
    """Without an authorizer every supported operation is allowed."""
    return ALL_AUTHORIZED[resource_type]


def metadata_operations(
    answer: bodies.MetadataResponse, request: bodies.MetadataRequest, authorized: Authorized
) -> bodies.MetadataResponse:
    """``answer`` with the operations the request asked for (a copy: cached answers are
    shared); unchanged when it asked for none."""
    topics = request["include_topic_authorized_operations"]
    cluster = request["include_cluster_authorized_operations"]
    if not topics and not cluster:
        return answer
    copy = dict(answer)
    if topics:
        copy["topics"] = [
            {**t, "topic_authorized_operations": authorized(ResourceType.TOPIC, t["name"] or "")}
            for t in answer["topics"]
        ]
    if cluster:
        copy["cluster_authorized_operations"] = authorized(ResourceType.CLUSTER, CLUSTER_NAME)
    return copy  # type: ignore[return-value]


def cluster_operations(asked: bool, authorized: Authorized) -> int:
    """DescribeCluster's ``cluster_authorized_operations``."""
    if not asked:
        return NO_AUTHORIZED_OPERATIONS
    return authorized(ResourceType.CLUSTER, CLUSTER_NAME)


def group_operations(asked: bool, group_id: str, authorized: Authorized) -> int:
    """A DescribeGroups entry's ``authorized_operations``."""
    if not asked:
        return NO_AUTHORIZED_OPERATIONS
    return authorized(ResourceType.GROUP, group_id)
