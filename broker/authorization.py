"""Which operation on which resource each API needs: one table, applied by the dispatcher.

How this works. ``RULES`` maps an API key to a rule. The dispatcher (broker/
dispatcher.py) hands every request to ``RequestAuthorization.run`` instead of calling
the handler itself; the rule of its API key asks the ``AclAuthorizer`` about the
request's session (``header.session``: principal and client host) and then either

- refuses the request as a whole by raising the error (the dispatcher answers it as any
  handler's error, and the handler never runs, so nothing changes): CLUSTER_... for
  cluster operations, GROUP_... for a group; or
- passes the handler a copy of the body without the topics (groups, config resources)
  the principal may not touch, and adds those back to the handler's answer with
  TOPIC_AUTHORIZATION_FAILED (GROUP_..., CLUSTER_...) where Kafka answers per item; or
- passes the request unchanged.

So handlers contain no authorization code at all, and a handler added later needs one
line here (the test of this table fails for an API key that has none; until it has
one, only principals with ClusterAction may call it). The operations
are Kafka's (KafkaApis): Produce WRITE on each topic, Fetch READ (a follower's Fetch
CLUSTER_ACTION), Metadata DESCRIBE - topics the principal may not describe are left out
of an all-topics answer and refused when named; auto-creation needs CREATE -, the
controller's requests CLUSTER_ACTION, the admin APIs ALTER / DESCRIBE on the cluster or
the named operation on the named topic, group APIs READ / DESCRIBE / DELETE on the
group.

Without ``authorizer.class.name`` no ``RequestAuthorization`` is installed and the
dispatcher calls handlers directly: authorization costs nothing when it is off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from minibroker.broker.authorizer import AclAuthorizer
from minibroker.broker.dispatcher import Deferred, Handler, HandlerResult
from minibroker.broker.metadata_cache import MetadataCache
from minibroker.broker.server import CloseConnection
from minibroker.protocol.acls import CLUSTER_NAME, Operation, ResourceType
from minibroker.protocol.api import ApiKey, Body, RequestHeader
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from minibroker.protocol.schemas.cluster import RESOURCE_TOPIC

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

Completion: TypeAlias = Callable[[Body], Body]
"""Adds the refused items to the handler's answer."""


class Asker:
    """The session of one request, asking the authorizer about itself."""

    __slots__ = ("authorizer", "context", "host", "principal")

    def __init__(self, context: RequestAuthorization, header: RequestHeader):
        self.context = context
        self.authorizer = context.authorizer
        self.principal = header.session.principal
        self.host = header.session.client_host

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def may_on_cluster(self, operation: Operation) -> bool:
        return self.may(operation, CLUSTER, CLUSTER_NAME)

    def require_cluster(self, operation: Operation) -> None:
        if not self.may_on_cluster(operation):
            raise ClusterAuthorizationFailedError(
                f"{self.principal} may not {operation.title} the cluster"
            )

    def require_group(self, operation: Operation, group: str | None) -> None:
        if group is not None and not self.may(operation, GROUP, group):
            raise GroupAuthorizationFailedError(
                f"{self.principal} may not {operation.title} group {group}"
            )


Rule: TypeAlias = Callable[[Asker, Body], "tuple[Body, Completion | None]"]
"""(asker, request body) -> (the body the handler gets, what completes its answer);
raises the KafkaError refusing the request as a whole."""


class RequestAuthorization:
    """Runs a request's handler under its API key's rule (the module docstring)."""

    def __init__(
        self,
        authorizer: AclAuthorizer,
        metadata_cache: MetadataCache,
        *,
        auto_create_topics: bool = True,
    ) -> None:
        """``auto_create_topics``: the broker's auto.create.topics.enable (Metadata asks
        for CREATE on a missing topic only when it would be created)."""
        self.authorizer = authorizer
        self.metadata_cache = metadata_cache
        self.auto_create_topics = auto_create_topics

    def run(self, header: RequestHeader, body: Body, handler: Handler) -> HandlerResult:
        rule = RULES.get(header.api_key, UNLISTED)
        allowed, complete = rule(Asker(self, header), body)
        result = handler(header, allowed)
        if complete is None:
            return result
        if isinstance(result, Deferred):
            waiting = result

            async def completed() -> Body | None:
                answer = await waiting.wait()
                return None if answer is None else complete(answer)

            return Deferred(completed)
        return None if result is None else complete(result)


# -- building blocks ---------------------------------------------------------------------------


def no_check(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    return body, None


def on_cluster(operation: Operation) -> Rule:
    """The whole request needs ``operation`` on the cluster."""

    def rule(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
        asker.require_cluster(operation)
        return body, None

    return rule


def on_group(operation: Operation, key: str = "group_id") -> Rule:
    """The whole request needs ``operation`` on the group named by ``body[key]``."""

    def rule(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
        asker.require_group(operation, body[key])
        return body, None

    return rule


def split_items(
    body: Body,
    key: str,
    allowed: Callable[[Any], bool],
    refuse: Callable[[Any], Body],
    *,
    answer_key: str | None = None,
) -> tuple[Body, Completion | None]:
    """Keep the items of ``body[key]`` that are ``allowed``; the others are answered
    ``refuse(item)`` in the answer's ``answer_key`` list (default: ``key``)."""
    verdicts = [allowed(item) for item in body[key]]
    return narrow(body, key, verdicts, refuse, answer_key=answer_key)


def narrow(
    body: Body,
    key: str,
    verdicts: list[bool],
    refuse: Callable[[Any], Body],
    *,
    answer_key: str | None = None,
) -> tuple[Body, Completion | None]:
    """``split_items`` with each item's verdict already known."""
    if all(verdicts):  # the usual case: the request goes through untouched
        return body, None
    items = body[key]
    kept = [item for item, ok in zip(items, verdicts, strict=True) if ok]
    refused = [refuse(item) for item, ok in zip(items, verdicts, strict=True) if not ok]
    out = answer_key or key

    def complete(answer: Body) -> Body:
        return {**answer, out: [*answer.get(out, []), *refused]}

    return {**body, key: kept}, complete


def per_topic(
    operation: Operation,
    *,
    name: str = "name",
    partition_in: str = "partition_index",
    partition_out: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Rule:
    """Each topic of ``body["topics"]`` needs ``operation``; refused topics get
    TOPIC_AUTHORIZATION_FAILED on each of their partitions."""
    error = TopicAuthorizationFailedError()
    out = partition_out or partition_in
    fields = {"error_code": error.code, **(extra or {})}

    def refuse(topic: Body) -> Body:
        return {
            name: topic[name],
            "partitions": [{out: p[partition_in], **fields} for p in topic["partitions"]],
        }

    def rule(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
        may = asker.may
        verdicts = [may(operation, TOPIC, topic[name]) for topic in body["topics"]]
        return narrow(body, "topics", verdicts, refuse)

    return rule


def _refused_topic(name: str, error: KafkaError) -> Body:
    return {"name": name, "error_code": error.code, "error_message": error.message}


# -- the rules of APIs that need more than a building block -------------------------------------


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
        lambda topic: _refused_topic(topic["name"], error),
    )


def delete_topics(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
    error = TopicAuthorizationFailedError()
    return split_items(
        body,
        "topic_names",
        lambda name: asker.may(Operation.DELETE, TOPIC, name),
        lambda name: _refused_topic(name, error),
        answer_key="topics",
    )


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


# -- groups ------------------------------------------------------------------------------------

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


def per_group(
    operation: Operation, key: str, answer_key: str, extra: Mapping[str, Any] | None = None
) -> Rule:
    """Each group named in ``body[key]`` needs ``operation``; refused ones are answered
    GROUP_AUTHORIZATION_FAILED (with ``extra``'s empty fields) in ``answer_key``."""
    error = GroupAuthorizationFailedError()

    def rule(asker: Asker, body: Body) -> tuple[Body, Completion | None]:
        return split_items(
            body,
            key,
            lambda group: asker.may(operation, GROUP, group),
            lambda group: {"group_id": group, "error_code": error.code, **(extra or {})},
            answer_key=answer_key,
        )

    return rule


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


# -- the table ---------------------------------------------------------------------------------

RULES: Final[dict[int, Rule]] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: per_topic(Operation.DESCRIBE),
    ApiKey.METADATA: metadata,
    ApiKey.LEADER_AND_ISR: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.STOP_REPLICA: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.UPDATE_METADATA: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.CONTROLLED_SHUTDOWN: on_cluster(Operation.CLUSTER_ACTION),
    ApiKey.API_VERSIONS: no_check,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.DESCRIBE_ACLS: on_cluster(Operation.DESCRIBE),
    ApiKey.CREATE_ACLS: on_cluster(Operation.ALTER),
    ApiKey.DELETE_ACLS: on_cluster(Operation.ALTER),
    ApiKey.DESCRIBE_CONFIGS: configs(Operation.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: configs(Operation.ALTER_CONFIGS, "responses"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: on_cluster(Operation.ALTER),
    ApiKey.DESCRIBE_LOG_DIRS: on_cluster(Operation.DESCRIBE),
    ApiKey.ELECT_LEADERS: on_cluster(Operation.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: on_cluster(Operation.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: on_cluster(Operation.DESCRIBE),
    ApiKey.DESCRIBE_CLUSTER: on_cluster(Operation.DESCRIBE),
    # SASL: authentication comes before any authorization.
    17: no_check,  # SaslHandshake
    36: no_check,  # SaslAuthenticate
    # Group coordinator APIs, by Kafka's key numbers and field names.
    8: offset_commit,  # OffsetCommit
    9: offset_fetch,  # OffsetFetch
    10: find_coordinator,  # FindCoordinator
    11: on_group(Operation.READ),  # JoinGroup
    12: on_group(Operation.READ),  # Heartbeat
    13: on_group(Operation.READ),  # LeaveGroup
    14: on_group(Operation.READ),  # SyncGroup
    15: per_group(Operation.DESCRIBE, "groups", "groups", DESCRIBE_GROUPS_EMPTY),  # DescribeGroups
    16: list_groups,  # ListGroups
    42: per_group(Operation.DELETE, "groups_names", "results"),  # DeleteGroups
    47: offset_delete,  # OffsetDelete
}
"""API key -> rule. Keys by number where another package declares the API."""

UNLISTED: Final = on_cluster(Operation.CLUSTER_ACTION)
"""The rule of an API missing from the table: brokers and super users only (closed by
default; the table's unit test names the missing key)."""


def rules_missing(api_keys: Iterable[int]) -> list[int]:
    """The API keys among ``api_keys`` that have no rule (the table's test uses it)."""
    return sorted(int(k) for k in api_keys if int(k) not in RULES)
