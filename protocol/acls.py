"""Kafka's ACL vocabulary: resource patterns, access control entries, filters (sans-IO).

An ACL binding is a *resource pattern* (type, name, LITERAL or PREFIXED) plus an *entry*
(principal, host, operation, Allow or Deny). Every layer names them with these values:
the ZooKeeper store (zk/acls.py, Kafka's JSON), the authorizer (broker/security/authorizer.py),
the DescribeAcls / CreateAcls / DeleteAcls bodies (Kafka's numeric codes below) and the
``minibroker acl`` command.

A *filter* selects bindings for DescribeAcls and DeleteAcls, as Kafka's
AclBindingFilter does: a None field matches anything; the pattern type ANY matches
LITERAL and PREFIXED with exactly the filter's name, MATCH matches every pattern that
would apply to a resource of that name (the literal name, the literal ``*`` and every
prefix of it).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from minibroker.protocol.errors import InvalidRequestError
from minibroker.protocol.messages import bodies

CLUSTER_NAME: Final = "kafka-cluster"
"""The one Cluster resource's name."""

WILDCARD: Final = "*"
"""A LITERAL resource name, a principal name (``User:*``) or a host matching all."""

WILDCARD_PRINCIPAL: Final = "User:*"


class _Coded(enum.Enum):
    """An enum whose value is (Kafka's wire code, Kafka's name for it)."""

    _value_: tuple[int, str]

    @property
    def code(self) -> int:
        return self._value_[0]

    @property
    def title(self) -> str:
        return self._value_[1]


_E = TypeVar("_E", bound=_Coded)


class ResourceType(_Coded):
    """Kafka's resource types: value = (wire code, name in ZooKeeper paths)."""

    TOPIC = (2, "Topic")
    GROUP = (3, "Group")
    CLUSTER = (4, "Cluster")
    TRANSACTIONAL_ID = (5, "TransactionalId")


class PatternType(_Coded):
    """How a pattern's name matches resource names: value = (wire code, name)."""

    ANY = (1, "ANY")  # filters only
    MATCH = (2, "MATCH")  # filters only
    LITERAL = (3, "LITERAL")
    PREFIXED = (4, "PREFIXED")


class Operation(_Coded):
    """Kafka's ACL operations: value = (wire code, name in ZooKeeper JSON)."""

    ANY = (1, "Any")  # filters only
    ALL = (2, "All")
    READ = (3, "Read")
    WRITE = (4, "Write")
    CREATE = (5, "Create")
    DELETE = (6, "Delete")
    ALTER = (7, "Alter")
    DESCRIBE = (8, "Describe")
    CLUSTER_ACTION = (9, "ClusterAction")
    DESCRIBE_CONFIGS = (10, "DescribeConfigs")
    ALTER_CONFIGS = (11, "AlterConfigs")
    IDEMPOTENT_WRITE = (12, "IdempotentWrite")


class Permission(_Coded):
    ANY = (1, "Any")  # filters only
    DENY = (2, "Deny")
    ALLOW = (3, "Allow")


SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, tuple[Operation, ...]]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
}
"""The operations that mean something on each resource type (Kafka's
AclEntry.supportedOperations): what an ``authorized_operations`` field may list."""


def operations_bitfield(operations: Iterable[Operation]) -> int:
    """Kafka's ``authorized_operations`` int32: bit N set for the operation of code N
    (Metadata, DescribeCluster and DescribeGroups answer it, KIP-430)."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation.code
    return bits


ALL_AUTHORIZED: Final = {
    resource_type: operations_bitfield(operations)
    for resource_type, operations in SUPPORTED_OPERATIONS.items()
}
"""Per resource type, every supported operation: what a broker without an authorizer
answers when asked (everything is allowed there)."""


def _by_code(cls: type[_E]) -> dict[int, _E]:
    return {member.code: member for member in cls}


def _by_name(cls: type[_E]) -> dict[str, _E]:
    names = {member.title.lower(): member for member in cls}
    names |= {member.name.lower().replace("_", ""): member for member in cls}
    return names


RESOURCE_TYPES_BY_CODE: Final = _by_code(ResourceType)
PATTERN_TYPES_BY_CODE: Final = _by_code(PatternType)
OPERATIONS_BY_CODE: Final = _by_code(Operation)
PERMISSIONS_BY_CODE: Final = _by_code(Permission)

_OPERATIONS_BY_NAME: Final = _by_name(Operation)
_PERMISSIONS_BY_NAME: Final = _by_name(Permission)
_RESOURCE_TYPES_BY_NAME: Final = _by_name(ResourceType)
_PATTERN_TYPES_BY_NAME: Final = _by_name(PatternType)

RESOURCE_TYPE_ANY_CODE: Final = 1
"""The wire code of resource type ANY in a filter."""


def parse_operation(name: str) -> Operation:
    """``Read``, ``read``, ``READ``, ``ClusterAction``, ``cluster_action`` -> the operation."""
    return _parse(_OPERATIONS_BY_NAME, name, "operation")


def parse_permission(name: str) -> Permission:
    return _parse(_PERMISSIONS_BY_NAME, name, "permission type")


def parse_resource_type(name: str) -> ResourceType:
    return _parse(_RESOURCE_TYPES_BY_NAME, name, "resource type")


def parse_pattern_type(name: str) -> PatternType:
    return _parse(_PATTERN_TYPES_BY_NAME, name, "pattern type")


def _parse(table: dict[str, _E], name: str, what: str) -> _E:
    try:
        return table[name.lower().replace("_", "").replace("-", "")]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r}") from None


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """``ResourcePattern(TOPIC, "orders-", PREFIXED)``: what an ACL applies to."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.title}:{self.pattern_type.name}:{self.name}"

    def covers(self, name: str) -> bool:
        """Whether this pattern applies to the resource of this type called ``name``."""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings (DescribeAcls, DeleteAcls); a None field matches anything."""

    resource_type: ResourceType | None = None
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not None and pattern.resource_type is not self.resource_type:
            return False
        kind = self.pattern_type
        if kind is PatternType.MATCH:
            return self.name is None or pattern.covers(self.name)
        if kind is not PatternType.ANY and pattern.pattern_type is not kind:
            return False
        return self.name is None or pattern.name == self.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or entry.principal == self.principal)
            and (self.host is None or entry.host == self.host)
            and (self.operation is Operation.ANY or entry.operation is self.operation)
            and (self.permission is Permission.ANY or entry.permission is self.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def binding_problem(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be stored (Kafka's CreateAcls checks), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {pattern.pattern_type.name} is for filters only"
    if not pattern.name:
        return "the resource name must not be empty"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"the cluster resource is called {CLUSTER_NAME}"
    if entry.operation is Operation.ANY or entry.permission is Permission.ANY:
        return "ANY is for filters only"
    if ":" not in entry.principal or not entry.principal.split(":", 1)[1]:
        return f"principal {entry.principal!r} is not <type>:<name>"
    if not entry.host:
        return "the host must not be empty (use * for every host)"
    return None


# -- message bodies (protocol/messages/acls.py) <-> values --------------------------------------


def filter_from_body(
    body: bodies.DescribeAclsRequest | bodies.DeleteAclsRequestFilter,
) -> AclBindingFilter:
    """A DescribeAcls body (or a DeleteAcls filter) as a filter; INVALID_REQUEST for an
    unknown code."""
    type_code = body["resource_type_filter"]
    try:
        return AclBindingFilter(
            resource_type=None
            if type_code == RESOURCE_TYPE_ANY_CODE
            else RESOURCE_TYPES_BY_CODE[type_code],
            name=body["resource_name_filter"],
            pattern_type=PATTERN_TYPES_BY_CODE[body["pattern_type_filter"]],
            principal=body["principal_filter"],
            host=body["host_filter"],
            operation=OPERATIONS_BY_CODE[body["operation"]],
            permission=PERMISSIONS_BY_CODE[body["permission_type"]],
        )
    except KeyError as exc:
        raise InvalidRequestError(f"unknown ACL code {exc}") from None


def binding_from_creation(creation: bodies.CreateAclsRequestCreation) -> AclBinding:
    try:
        binding = AclBinding(
            ResourcePattern(
                RESOURCE_TYPES_BY_CODE[creation["resource_type"]],
                creation["resource_name"],
                PATTERN_TYPES_BY_CODE[creation["resource_pattern_type"]],
            ),
            AccessControlEntry(
                creation["principal"],
                creation["host"],
                OPERATIONS_BY_CODE[creation["operation"]],
                PERMISSIONS_BY_CODE[creation["permission_type"]],
            ),
        )
    except KeyError as exc:
        raise InvalidRequestError(f"unknown ACL code {exc}") from None
    problem = binding_problem(binding)
    if problem is not None:
        raise InvalidRequestError(problem)
    return binding


def entry_body(entry: AccessControlEntry) -> bodies.DescribeAclsResponseResourceAcl:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.code,
        "permission_type": entry.permission.code,
    }


def binding_body(binding: AclBinding) -> bodies.DeleteAclsResponseFilterResultMatchingAcl:
    """One DeleteAcls ``matching_acls`` item, without its error fields."""
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.code,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.code,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.code,
        "permission_type": entry.permission.code,
    }


def entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, entry.operation.code, entry.permission.code)


def filter_body(selector: AclBindingFilter) -> dict[str, Any]:
    """A DescribeAcls body (a DeleteAcls filter) selecting what ``selector`` does."""
    return {
        "resource_type_filter": RESOURCE_TYPE_ANY_CODE
        if selector.resource_type is None
        else selector.resource_type.code,
        "resource_name_filter": selector.name,
        "pattern_type_filter": selector.pattern_type.code,
        "principal_filter": selector.principal,
        "host_filter": selector.host,
        "operation": selector.operation.code,
        "permission_type": selector.permission.code,
    }


def creation_body(binding: AclBinding) -> bodies.CreateAclsRequestCreation:
    """One CreateAcls ``creations`` item."""
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.code,
        "resource_name": pattern.name,
        "resource_pattern_type": pattern.pattern_type.code,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.code,
        "permission_type": entry.permission.code,
    }


def binding_from_body(body: Mapping[str, Any]) -> AclBinding:
    """A DeleteAcls ``matching_acls`` item (or a creation-shaped map) as a binding."""
    return AclBinding(
        ResourcePattern(
            RESOURCE_TYPES_BY_CODE[body["resource_type"]],
            body["resource_name"],
            PATTERN_TYPES_BY_CODE[body.get("pattern_type", body.get("resource_pattern_type", 3))],
        ),
        AccessControlEntry(
            body["principal"],
            body["host"],
            OPERATIONS_BY_CODE[body["operation"]],
            PERMISSIONS_BY_CODE[body["permission_type"]],
        ),
    )
