"""The authorization rules of the APIs the broker serves itself that need more than a
building block: produce, fetch, metadata, topic and config administration, idempotent
producers (the operations are Kafka's, see broker/security/authorization.py)."""

from __future__ import annotations

from typing import Final, cast

from minibroker.broker.requests.request_handler import CloseConnection
from minibroker.broker.security.authorization_rules import (
    TOPIC,
    Asker,
    Completion,
    Rule,
    per_topic,
    refused_topic,
    split_items,
    then,
)
from minibroker.broker.security.authorized_operations import cluster_operations, metadata_operations
from minibroker.protocol.acls import Operation
from minibroker.protocol.api import Body
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.cluster import RESOURCE_TOPIC


def produce(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    allowed, complete = PRODUCE_TOPICS(asker, body)
    if complete is not None and body["acks"] == 0:
        # No answer to carry the error: Kafka closes the connection (the producer's
        # only way to notice).
        raise CloseConnection("acks=0 produce to a topic the principal may not write")
    return allowed, complete


PRODUCE_TOPICS: Final = per_topic(
    Operation.WRITE,
    partition_in="index",
    extra={"base_offset": -1, "error_message": TopicAuthorizationFailedError.name},
)


def fetch(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if body["replica_id"] >= 0:  # a follower: replication is a cluster action
        asker.require_cluster(Operation.CLUSTER_ACTION)
        return body, None
    return FETCH_TOPICS(asker, body)


FETCH_TOPICS: Final = per_topic(
    Operation.READ, name="topic", partition_in="partition", partition_out="partition_index"
)


def offset_for_leader_epoch(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """Followers hold CLUSTER_ACTION; consumers need DESCRIBE on each topic (Kafka)."""
    if asker.may_on_cluster(Operation.CLUSTER_ACTION):
        return body, None
    return OFFSET_FOR_LEADER_EPOCH_TOPICS(asker, body)


OFFSET_FOR_LEADER_EPOCH_TOPICS: Final = per_topic(
    Operation.DESCRIBE, name="topic", partition_in="partition"
)


def metadata(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """``metadata_topics``, and the authorized operations asked for, the principal's."""
    allowed, complete = metadata_topics(asker, body)
    if not body.get("include_topic_authorized_operations") and not body.get(
        "include_cluster_authorized_operations"
    ):
        return allowed, complete
    request = cast(bodies.MetadataRequest, body)

    def operations(answer: Body) -> Body:
        typed = cast(bodies.MetadataResponse, answer)
        return dict(metadata_operations(typed, request, asker.authorized))

    return allowed, then(complete, operations)


def describe_cluster(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    asker.require_cluster(Operation.DESCRIBE)
    if not body.get("include_cluster_authorized_operations"):
        return body, None
    return body, lambda answer: {
        **answer,
        "cluster_authorized_operations": cluster_operations(True, asker.authorized),
    }


def metadata_topics(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """Every topic needs DESCRIBE; one that does not exist yet and would be
    auto-created also needs CREATE (on the cluster or the topic)."""
    error = TopicAuthorizationFailedError()
    requested = body["topics"]
    if requested is None:  # every topic: the undescribable ones are left out

        def hide(answer: Body) -> Body:
            topics = [
                t for t in answer["topics"] if asker.may(Operation.DESCRIBE, TOPIC, t["name"])
            ]
            return {**answer, "topics": topics}

        return body, hide

    cache = asker.context.metadata_cache
    auto_create = body["allow_auto_topic_creation"] and asker.context.auto_create_topics
    may_create_all: bool | None = None

    def allowed(topic: Body) -> bool:
        nonlocal may_create_all
        name = topic["name"]
        if name is None:  # named by id (v10+): an unknown id is answered UNKNOWN_TOPIC_ID
            name = cache.topic_named_by(topic["topic_id"])
            if name is None:
                return True
        if not asker.may(Operation.DESCRIBE, TOPIC, name):
            return False
        if not auto_create or cache.contains(name):
            return True
        if may_create_all is None:
            may_create_all = asker.may_on_cluster(Operation.CREATE)
        return may_create_all or asker.may(Operation.CREATE, TOPIC, name)

    return split_items(
        body,
        "topics",
        allowed,
        lambda topic: {
            "error_code": error.code,
            "name": topic["name"],
            "is_internal": False,
            "partitions": [],
        },
    )


def create_topics(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    if asker.may_on_cluster(Operation.CREATE):
        return body, None
    error = TopicAuthorizationFailedError()
    return split_items(
        body,
        "topics",
        lambda topic: asker.may(Operation.CREATE, TOPIC, topic["name"]),
        lambda topic: refused_topic(topic["name"], error),
    )


def create_partitions(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """Alter on each topic grown (Kafka's CreatePartitions)."""
    error = TopicAuthorizationFailedError()
    return split_items(
        body,
        "topics",
        lambda topic: asker.may(Operation.ALTER, TOPIC, topic["name"]),
        lambda topic: refused_topic(topic["name"], error),
        answer_key="results",
    )


def delete_topics(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """Delete on each topic, named by name (v1-5) or by name or id (v6+); an id no topic
    has goes to the handler, which answers UNKNOWN_TOPIC_ID."""
    error = TopicAuthorizationFailedError()
    cache = asker.context.metadata_cache

    def may_delete(topic: Body) -> bool:
        name = (
            topic["name"] if topic["name"] is not None else cache.topic_named_by(topic["topic_id"])
        )
        return name is None or asker.may(Operation.DELETE, TOPIC, name)

    body, by_name = split_items(
        body,
        "topic_names",
        lambda name: asker.may(Operation.DELETE, TOPIC, name),
        lambda name: refused_topic(name, error),
        answer_key="topics",
    )
    body, by_id = split_items(
        body,
        "topics",
        may_delete,
        lambda topic: {**refused_topic(topic["name"], error), "topic_id": topic["topic_id"]},
    )
    if by_name is None or by_id is None:
        return body, by_name or by_id
    first, second = by_name, by_id
    return body, lambda answer: second(first(answer))


def configs(operation: Operation, answer_key: str) -> Rule:
    """DescribeConfigs / AlterConfigs: ``operation`` on each topic, or on the cluster
    for broker resources."""

    def allowed(asker: Asker, resource: Body) -> bool:
        if resource["resource_type"] == RESOURCE_TOPIC:
            return asker.may(operation, TOPIC, resource["resource_name"])
        return asker.may_on_cluster(operation)

    def refuse(resource: Body) -> Body:
        is_topic = resource["resource_type"] == RESOURCE_TOPIC
        error = TopicAuthorizationFailedError() if is_topic else ClusterAuthorizationFailedError()
        return {
            "error_code": error.code,
            "error_message": error.message,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }

    def rule(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
        return split_items(
            body,
            "resources",
            lambda resource: allowed(asker, resource),
            refuse,
            answer_key=answer_key,
        )

    return rule


def init_producer_id(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    """An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some
    topic (Kafka since KIP-679)."""
    if not asker.may_on_cluster(Operation.IDEMPOTENT_WRITE) and not (
        asker.authorizer.authorize_any(asker.principal, asker.host, Operation.WRITE, TOPIC)
    ):
        raise ClusterAuthorizationFailedError(
            f"{asker.principal} may not write idempotently (no IdempotentWrite, no Write)"
        )
    return body, None
