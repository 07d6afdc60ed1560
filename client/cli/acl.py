"""``minibroker acl add|list|remove``: ACLs with kafka-acls' options, through the brokers.

::

    minibroker acl add --allow-principal User:alice --operation Read --operation Describe \\
        --topic orders --resource-pattern-type prefixed
    minibroker acl list [--topic T] [--principal User:alice] --format json
    minibroker acl remove --allow-principal User:alice --operation Read --topic orders

As in kafka-acls: ``add`` stores one binding per (resource, principal, host, operation)
- hosts default to ``*``, operations to All; ``--producer`` stands for Write, Describe
and Create on the topics (plus IdempotentWrite on the cluster with ``--idempotent``),
``--consumer`` for Read and Describe on the topics and Read on the groups;
``--transactional-id ID`` names a transactional id (with ``--producer``: Write and
Describe on it); ``--cluster`` names the cluster resource (``kafka-cluster``). ``list`` without a
resource lists every ACL; with one, the pattern type defaults to literal (``match``
lists every ACL that applies to the named resource, ``any`` both literal and
prefixed). ``remove`` without principals removes every ACL of the resource (restricted
to ``--operation`` when given). Changing ACLs needs Alter on
the cluster, listing them Describe: log in with ``--command-config FILE`` (Kafka's
client properties) as a principal that has them.

``list --format json`` prints one list of bindings::

    [{"resource_type": "Topic", "resource_name": "orders", "pattern_type": "LITERAL",
      "principal": "User:alice", "host": "*", "operation": "Read",
      "permission_type": "Allow"}]
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from minibroker.client.acls import create_acls, delete_acls, describe_acls
from minibroker.client.admin import Admin
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    run_async,
)
from minibroker.net.security import ClientSecurity
from minibroker.protocol.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    binding_problem,
    parse_operation,
    parse_pattern_type,
)
from minibroker.protocol.errors import UsageError

HELP = "add, list or remove ACLs (kafka-acls options)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("add", "list", "remove"), help="what to do")
    for flag, metavar, doc in (
        ("--allow-principal", "TYPE:NAME", "principal allowed (User:alice)"),
        ("--deny-principal", "TYPE:NAME", "principal denied"),
        ("--allow-host", "HOST", "host the allow applies to (default *)"),
        ("--deny-host", "HOST", "host the deny applies to (default *)"),
        ("--operation", "OP", "read, write, create, delete, alter, describe, ..., all"),
        ("--topic", "NAME", "a topic"),
        ("--group", "NAME", "a consumer group"),
        ("--transactional-id", "ID", "a transactional id"),
    ):
        parser.add_argument(flag, metavar=metavar, action="append", default=[], help=doc)
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        choices=("literal", "prefixed", "match", "any"),
        default=None,
        help="how resource names match (default literal)",
    )
    parser.add_argument(
        "--producer",
        action="store_true",
        help="add/remove: write, describe and create on the topics",
    )
    parser.add_argument(
        "--consumer",
        action="store_true",
        help="add/remove: read and describe on the topics, read on the groups",
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: idempotent write too"
    )
    parser.add_argument("--principal", metavar="TYPE:NAME", help="list: only this principal")
    parser.add_argument("--force", action="store_true", help="accepted for kafka-acls; no prompt")
    add_bootstrap(parser)
    add_format(parser)


Resource = tuple[ResourceType, str]

PRODUCER_TOPIC_OPERATIONS = (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE)
CONSUMER_TOPIC_OPERATIONS = (Operation.READ, Operation.DESCRIBE)
PRODUCER_TRANSACTIONAL_ID_OPERATIONS = (Operation.WRITE, Operation.DESCRIBE)
"""kafka-acls' --producer and --consumer: what a producer / consumer needs on a topic
(a consumer also needs Read on its group, a transactional producer Write and Describe
on its transactional id)."""


def run(args: argparse.Namespace) -> int:
    pattern_type = parse_pattern_type(args.resource_pattern_type or "literal")
    resources: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    resources += [(ResourceType.GROUP, g) for g in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    try:
        operations = [parse_operation(op) for op in args.operation]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    planned = resource_operations(args, resources, operations)
    if args.action == "add":
        bindings = add_bindings(args, planned, pattern_type)
        return run_async(_add, args.bootstrap_server, command_security(args), bindings)
    if args.action == "list":
        selectors = list_filters(args, resources, pattern_type)
        return run_async(
            _list, args.bootstrap_server, command_security(args), selectors, args.format
        )
    selectors = remove_filters(args, planned, pattern_type)
    return run_async(_remove, args.bootstrap_server, command_security(args), selectors)


def resource_operations(
    args: argparse.Namespace, resources: list[Resource], operations: list[Operation]
) -> list[tuple[Resource, list[Operation]]]:
    """The operations each resource gets: ``--operation``s, or --producer's and
    --consumer's sets (as kafka-acls gives them)."""
    if not (args.producer or args.consumer):
        return [(resource, operations) for resource in resources]
    if args.consumer and not args.group:
        raise UsageError("--consumer needs --group")
    planned: dict[Resource, list[Operation]] = {}
    for kind, name in resources:
        wanted = planned.setdefault((kind, name), [])
        if kind is ResourceType.TOPIC:
            if args.producer:
                wanted += PRODUCER_TOPIC_OPERATIONS
            if args.consumer:
                wanted += [op for op in CONSUMER_TOPIC_OPERATIONS if op not in wanted]
        elif kind is ResourceType.GROUP and args.consumer:
            wanted.append(Operation.READ)
        elif kind is ResourceType.TRANSACTIONAL_ID and args.producer:
            wanted += PRODUCER_TRANSACTIONAL_ID_OPERATIONS
    if args.producer and args.idempotent:
        planned.setdefault((ResourceType.CLUSTER, CLUSTER_NAME), []).append(
            Operation.IDEMPOTENT_WRITE
        )
    return [(resource, ops) for resource, ops in planned.items() if ops]


def _entries(args: argparse.Namespace, operations: list[Operation]) -> list[AccessControlEntry]:
    entries = []
    for permission, principals, hosts in (
        (Permission.ALLOW, args.allow_principal, args.allow_host),
        (Permission.DENY, args.deny_principal, args.deny_host),
    ):
        for principal, host, operation in itertools.product(
            principals, hosts or [WILDCARD], operations or [Operation.ALL]
        ):
            entries.append(AccessControlEntry(principal, host, operation, permission))
    return entries


def add_bindings(
    args: argparse.Namespace,
    planned: list[tuple[Resource, list[Operation]]],
    pattern_type: PatternType,
) -> list[AclBinding]:
    if not planned:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("add takes --resource-pattern-type literal or prefixed")
    if not (args.allow_principal or args.deny_principal):
        raise UsageError("name a principal: --allow-principal or --deny-principal")
    bindings = [
        AclBinding(ResourcePattern(kind, name, pattern_type), entry)
        for (kind, name), operations in planned
        for entry in _entries(args, operations)
    ]
    for binding in bindings:
        problem = binding_problem(binding)
        if problem is not None:
            raise UsageError(problem)
    return bindings


def list_filters(
    args: argparse.Namespace,
    resources: list[Resource],
    pattern_type: PatternType,
) -> list[AclBindingFilter]:
    if not resources:
        return [AclBindingFilter(principal=args.principal)]
    return [
        AclBindingFilter(kind, name, pattern_type, principal=args.principal)
        for kind, name in resources
    ]


def remove_filters(
    args: argparse.Namespace,
    planned: list[tuple[Resource, list[Operation]]],
    pattern_type: PatternType,
) -> list[AclBindingFilter]:
    if not planned:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    selectors = []
    for (kind, name), operations in planned:
        entries = _entries(args, operations)
        if entries:
            selectors += [
                AclBindingFilter(
                    kind, name, pattern_type, e.principal, e.host, e.operation, e.permission
                )
                for e in entries
            ]
        else:
            selectors += [
                AclBindingFilter(kind, name, pattern_type, operation=operation)
                for operation in operations or [Operation.ANY]
            ]
    return selectors


async def _add(bootstrap: str, security: ClientSecurity | None, bindings: list[AclBinding]) -> int:
    async with Admin(bootstrap, config=security) as admin:
        await create_acls(admin.cluster, bindings)
    for binding in bindings:
        print(f"Added ACL {describe(binding)}")
    return 0


async def _list(
    bootstrap: str, security: ClientSecurity | None, selectors: list[AclBindingFilter], fmt: str
) -> int:
    found: list[AclBinding] = []
    async with Admin(bootstrap, config=security) as admin:
        for selector in selectors:
            found += [b for b in await describe_acls(admin.cluster, selector) if b not in found]
    if fmt == "json":
        print_json([binding_json(b) for b in found])
        return 0
    for pattern, group in itertools.groupby(found, key=lambda b: b.pattern):
        print(f"Current ACLs for resource `{pattern_text(pattern)}`:")
        for binding in group:
            print(f"\t{entry_text(binding.entry)}")
        print()
    return 0


async def _remove(
    bootstrap: str, security: ClientSecurity | None, selectors: list[AclBindingFilter]
) -> int:
    async with Admin(bootstrap, config=security) as admin:
        removed = await delete_acls(admin.cluster, selectors)
    for binding in removed:
        print(f"Removed ACL {describe(binding)}")
    return 0


def binding_json(binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.title,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.title,
        "permission_type": entry.permission.title,
    }


def pattern_text(pattern: ResourcePattern) -> str:
    return (
        f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name},"
        f" patternType={pattern.pattern_type.name})"
    )


def entry_text(entry: AccessControlEntry) -> str:
    return (
        f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name},"
        f" permissionType={entry.permission.name})"
    )


def describe(binding: AclBinding) -> str:
    return f"{entry_text(binding.entry)} on `{pattern_text(binding.pattern)}`"
