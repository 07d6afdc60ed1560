"""AclAuthorizer: may this principal, from this host, do this operation on this resource?

Kafka's model (kafka.security.authorizer.AclAuthorizer), decided in memory:

1. a principal listed in ``super.users`` may do everything;
2. the ACLs that apply to a resource are those of its type whose pattern covers its
   name: LITERAL with the same name or ``*``, PREFIXED with a prefix of the name;
3. none at all (for any principal) -> ``allow.everyone.if.no.acl.found`` decides;
4. a Deny entry matching the principal (or ``User:*``), the host (or ``*``) and the
   operation (or All) refuses - deny wins over any allow;
5. else an Allow entry matching the same way permits; Describe is also permitted by an
   Allow of Read, Write, Delete or Alter, DescribeConfigs by one of AlterConfigs.

The ACLs live in ZooKeeper (zk/acls.py); ``AclSync`` (broker/security/acl_sync.py) loads them
all at start-up and on every new session, and replaces one resource pattern's entries
(``set_acls``) when a change notification names it. Decisions are cached per
(principal, host, operation, resource) until the next change, so a Produce or Fetch
costs one dict lookup per topic once warm.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.protocol.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

CACHE_MAX_ENTRIES: Final = 100_000
"""Cached decisions before the cache starts over: many principals x topics x hosts
would otherwise grow it without bound (a miss costs a few microseconds)."""

IMPLIED_BY: Final[Mapping[Operation, frozenset[Operation]]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}
"""Allow entries of these operations also permit the key's operation (Kafka's rule)."""


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


@dataclass(frozen=True, slots=True)
class Decision:
    """What ``authorize`` answered and why, for logs and tests."""

    allowed: bool
    reason: str


class AclAuthorizer:
    """The in-memory ACL index and decision cache of one broker."""

    def __init__(
        self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # resource type -> name -> entries; one map per pattern type.
        self._literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {
            t: {} for t in ResourceType
        }
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {
            t: {} for t in ResourceType
        }
        self._cache: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        self.denied: dict[tuple[ResourceType, Operation], int] = {}
        """Refusals so far by resource type and operation (the authorizer's metric)."""

    # -- the index ---------------------------------------------------------------------------

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace every entry of ``pattern`` (none: the pattern has no ACLs any more)."""
        table = self._table(pattern.pattern_type)[pattern.resource_type]
        frozen = frozenset(entries)
        if frozen:
            table[pattern.name] = frozen
        else:
            table.pop(pattern.name, None)
        self._cache.clear()

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Forget every ACL and load ``acls`` (start-up, a new ZooKeeper session)."""
        for tables in (self._literal, self._prefixed):
            for table in tables.values():
                table.clear()
        for pattern, entries in acls.items():
            self.set_acls(pattern, entries)
        self._cache.clear()

    def acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._table(pattern.pattern_type)[pattern.resource_type].get(
            pattern.name, frozenset()
        )

    def bindings(self, selector: AclBindingFilter | None = None) -> Iterator[AclBinding]:
        """Every stored binding ``selector`` matches (all without one)."""
        for pattern_type, tables in (
            (PatternType.LITERAL, self._literal),
            (PatternType.PREFIXED, self._prefixed),
        ):
            for resource_type, table in tables.items():
                for name, entries in table.items():
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    if selector is not None and not selector.matches_pattern(pattern):
                        continue
                    for entry in entries:
                        if selector is None or selector.matches_entry(entry):
                            yield AclBinding(pattern, entry)

    def count(self) -> int:
        """How many entries are stored, over every pattern."""
        tables = (*self._literal.values(), *self._prefixed.values())
        return sum(len(entries) for table in tables for entries in table.values())

    def _table(
        self, pattern_type: PatternType
    ) -> dict[ResourceType, dict[str, frozenset[AccessControlEntry]]]:
        if pattern_type is PatternType.LITERAL:
            return self._literal
        if pattern_type is PatternType.PREFIXED:
            return self._prefixed
        raise ValueError(f"{pattern_type.name} is a filter pattern type, not a stored one")

    # -- decisions ---------------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` at ``host`` may do ``operation`` on the resource."""
        key = (principal, host, operation, resource_type, name)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed = self.decide(principal, host, operation, resource_type, name).allowed
            if len(self._cache) >= CACHE_MAX_ENTRIES:
                self._cache.clear()
            self._cache[key] = allowed
        if not allowed:
            counted = (resource_type, operation)
            self.denied[counted] = self.denied.get(counted, 0) + 1
        return allowed

    def decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> Decision:
        """``authorize`` uncached, with its reason."""
        if principal in self.super_users:
            return Decision(True, "super user")
        entries = list(self._entries_for(resource_type, name))
        if not entries:
            return Decision(self.allow_everyone_if_no_acl_found, "no ACL for the resource")
        matching = [e for e in entries if _applies_to(e, principal, host)]
        for entry in matching:
            if entry.permission is Permission.DENY and entry.operation in (
                operation,
                Operation.ALL,
            ):
                return Decision(False, f"denied by {entry}")
        granting = IMPLIED_BY.get(operation, frozenset({operation}))
        for entry in matching:
            if entry.permission is Permission.ALLOW and (
                entry.operation in granting or entry.operation is Operation.ALL
            ):
                return Decision(True, f"allowed by {entry}")
        return Decision(False, "no ACL allows it")

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of ``resource_type`` may take ``operation`` from the
        principal (Kafka's authorizeByResourceType, for InitProducerId): an Allow on some
        pattern that no Deny covering that whole pattern cancels."""
        if principal in self.super_users:
            return True
        wanted = (operation, Operation.ALL)
        denies: list[ResourcePattern] = []
        allows: list[ResourcePattern] = []
        for binding in self.bindings(AclBindingFilter(resource_type=resource_type)):
            entry = binding.entry
            if entry.operation not in wanted or not _applies_to(entry, principal, host):
                continue
            (denies if entry.permission is Permission.DENY else allows).append(binding.pattern)
        return any(not any(_covers_pattern(d, a) for d in denies) for a in allows)

    def _entries_for(self, resource_type: ResourceType, name: str) -> Iterator[AccessControlEntry]:
        literal = self._literal[resource_type]
        yield from literal.get(name, ())
        if name != WILDCARD:
            yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed[resource_type]
        if prefixed:
            for end in range(1, len(name) + 1):
                yield from prefixed.get(name[:end], ())


def _applies_to(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL) and (
        entry.host == host or entry.host == WILDCARD
    )


def _covers_pattern(deny: ResourcePattern, allow: ResourcePattern) -> bool:
    """Whether every resource ``allow`` covers is covered by ``deny`` too."""
    if deny.pattern_type is PatternType.LITERAL:
        return deny.name == WILDCARD or (
            allow.pattern_type is PatternType.LITERAL and allow.name == deny.name
        )
    return allow.name.startswith(deny.name) and not (
        allow.pattern_type is PatternType.LITERAL and allow.name == WILDCARD
    )


class AuthorizerCollector(Collector):
    """The authorizer's Prometheus metrics, named after Kafka's ``authorizer-metrics``
    group: refusals by resource type and operation, and the number of ACLs."""

    def __init__(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer

    def collect(self) -> Iterator[Metric]:
        denied = CounterMetricFamily(
            "kafka_server_authorizer_metrics_authorization_denied",
            "Authorization checks refused, by resource type and operation.",
            labels=["resource_type", "operation"],
        )
        for (resource_type, operation), count in sorted(
            self.authorizer.denied.items(), key=lambda item: (item[0][0].title, item[0][1].title)
        ):
            denied.add_metric([resource_type.title, operation.title], count)
        yield denied
        yield GaugeMetricFamily(
            "kafka_server_authorizer_metrics_acl_entries",
            "ACL entries this broker's authorizer holds.",
            value=self.authorizer.count(),
        )
