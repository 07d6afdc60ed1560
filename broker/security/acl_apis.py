"""DescribeAcls, CreateAcls, DeleteAcls: the ACL admin APIs of every broker.

Any broker serves them. DescribeAcls answers from this broker's authorizer (the same
index it decides with, kept equal to ZooKeeper by broker/security/acl_sync.py). CreateAcls and
DeleteAcls change each resource pattern's znode with a conditional write and a change
notification (zk/acls.py), then apply the result to this broker's authorizer at once, so
the client that asked sees its change on this broker when the answer arrives; every
other broker applies it when the notification reaches it. A standalone broker (no
ZooKeeper) keeps its ACLs in memory only.

Who may call them is broker/security/authorization.py's business (Describe / Alter on the
cluster); a broker without an authorizer answers SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.protocol.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    binding_body,
    binding_from_creation,
    entry_body,
    entry_order,
    filter_from_body,
)
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    KafkaError,
    MinibrokerError,
    SecurityDisabledError,
)
from minibroker.protocol.messages import bodies
from minibroker.zk.acls import update_acls
from minibroker.zk.client import ZkClient

log = logging.getLogger(__name__)


class AclApis:
    def __init__(self, authorizer: AclAuthorizer | None, zk: ZkClient | None) -> None:
        """``authorizer`` None: ACLs are off here (SECURITY_DISABLED); ``zk`` None:
        standalone, ACLs in memory only."""
        self.authorizer = authorizer
        self.zk = zk

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.DESCRIBE_ACLS, self.handle_describe_acls)
        dispatcher.register(bodies.CREATE_ACLS, self.handle_create_acls)
        dispatcher.register(bodies.DELETE_ACLS, self.handle_delete_acls)

    def _enabled(self) -> AclAuthorizer:
        if self.authorizer is None:
            raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
        return self.authorizer

    # -- describe ----------------------------------------------------------------------------

    def handle_describe_acls(
        self, header: RequestHeader, request: bodies.DescribeAclsRequest
    ) -> bodies.DescribeAclsResponse:
        authorizer = self._enabled()
        selector = filter_from_body(request)
        grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in authorizer.bindings(selector):
            grouped.setdefault(binding.pattern, []).append(binding.entry)
        resources: list[bodies.DescribeAclsResponseResource] = [
            {
                "resource_type": pattern.resource_type.code,
                "resource_name": pattern.name,
                "pattern_type": pattern.pattern_type.code,
                "acls": [entry_body(e) for e in sorted(entries, key=entry_order)],
            }
            for pattern, entries in sorted(grouped.items(), key=lambda item: str(item[0]))
        ]
        return {"error_code": NONE, "error_message": None, "resources": resources}

    # -- create ------------------------------------------------------------------------------

    def handle_create_acls(
        self, header: RequestHeader, request: bodies.CreateAclsRequest
    ) -> Deferred[bodies.CreateAclsResponse]:
        authorizer = self._enabled()
        results: list[bodies.CreateAclsResponseResult] = []
        wanted: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]] = {}
        for index, creation in enumerate(request["creations"]):
            try:
                binding = binding_from_creation(creation)
            except KafkaError as exc:
                results.append(refused_creation(exc))
                continue
            results.append({"error_code": NONE, "error_message": None})
            wanted.setdefault(binding.pattern, []).append((index, binding.entry))

        async def create() -> bodies.CreateAclsResponse:
            for pattern, indexed in wanted.items():
                entries = frozenset(e for _, e in indexed)
                try:
                    await self._change(authorizer, pattern, entries.union)
                except MinibrokerError as exc:
                    log.warning("cannot store ACLs of %s: %s", pattern, exc)
                    for index, _ in indexed:
                        results[index] = refused_creation(KafkaError(f"cannot store: {exc}"))
            return {"throttle_time_ms": 0, "results": results}

        return Deferred(create)

    # -- delete ------------------------------------------------------------------------------

    def handle_delete_acls(
        self, header: RequestHeader, request: bodies.DeleteAclsRequest
    ) -> Deferred[bodies.DeleteAclsResponse]:
        authorizer = self._enabled()
        selectors: list[AclBindingFilter | KafkaError] = []
        for raw in request["filters"]:
            try:
                selectors.append(filter_from_body(raw))
            except KafkaError as exc:
                selectors.append(exc)

        async def delete() -> bodies.DeleteAclsResponse:
            answers: list[bodies.DeleteAclsResponseFilterResult] = []
            for selector in selectors:
                if isinstance(selector, KafkaError):
                    answers.append(refused_filter(selector))
                    continue
                try:
                    removed = await self._delete_matching(authorizer, selector)
                except MinibrokerError as exc:
                    error = KafkaError(f"cannot delete: {exc}")
                    answers.append(refused_filter(error))
                    continue
                answers.append(
                    {
                        "error_code": NONE,
                        "error_message": None,
                        "matching_acls": [
                            binding_body(b) | {"error_code": NONE, "error_message": None}
                            for b in removed
                        ],
                    }
                )
            return {"throttle_time_ms": 0, "filter_results": answers}

        return Deferred(delete)

    async def _delete_matching(
        self, authorizer: AclAuthorizer, selector: AclBindingFilter
    ) -> list[AclBinding]:
        patterns = {b.pattern for b in authorizer.bindings(selector)}
        removed: list[AclBinding] = []
        for pattern in sorted(patterns, key=str):
            before, after = await self._change(
                authorizer,
                pattern,
                lambda entries: frozenset(e for e in entries if not selector.matches_entry(e)),
            )
            removed += [AclBinding(pattern, e) for e in sorted(before - after, key=entry_order)]
        return removed

    async def _change(
        self,
        authorizer: AclAuthorizer,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        if self.zk is None:
            before = authorizer.acls(pattern)
            after = change(before)
        else:
            before, after = await update_acls(self.zk, pattern, change)
        authorizer.set_acls(pattern, after)
        return before, after


def refused_creation(error: KafkaError) -> bodies.CreateAclsResponseResult:
    """A CreateAcls result refused with ``error``."""
    return {"error_code": error.code, "error_message": error.message}


def refused_filter(error: KafkaError) -> bodies.DeleteAclsResponseFilterResult:
    """A DeleteAcls filter result refused with ``error``: nothing deleted."""
    return {"error_code": error.code, "error_message": error.message, "matching_acls": []}
