"""The pieces authorization rules are built from: the asking session and the shapes of a
rule (broker/security/authorization.py explains the scheme).

A rule is ``(asker, request body) -> (the body the handler gets, what completes its
answer)``. ``on_cluster`` and ``on_group`` refuse a request as a whole; ``split_items``,
``per_topic`` and ``per_group`` let the allowed items through and answer the refused
ones with their error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.protocol.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
    operations_bitfield,
)
from minibroker.protocol.api import Body, RequestHeader
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

Completion: TypeAlias = Callable[[Body], Body]
"""Adds the refused items to the handler's answer."""


class AuthorizationContext:
    """What rules may read beyond the request: the authorizer and the broker's view."""

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


class Asker:
    """The session of one request, asking the authorizer about itself."""

    __slots__ = ("authorizer", "context", "host", "principal")

    def __init__(self, context: AuthorizationContext, header: RequestHeader):
        self.context = context
        self.authorizer = context.authorizer
        self.principal = header.session.principal
        self.host = header.session.client_host

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def authorized(self, resource_type: ResourceType, name: str) -> int:
        """The bitfield of the supported operations this session may perform on the
        resource (KIP-430's ``authorized_operations``)."""
        return operations_bitfield(
            op for op in SUPPORTED_OPERATIONS[resource_type] if self.may(op, resource_type, name)
        )

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


def refused_topic(name: str, error: KafkaError) -> Body:
    return {"name": name, "error_code": error.code, "error_message": error.message}


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


def then(first: Completion | None, second: Completion) -> Completion:
    """Both completions, ``first`` (if any) before ``second``."""
    if first is None:
        return second
    return lambda answer: second(first(answer))
