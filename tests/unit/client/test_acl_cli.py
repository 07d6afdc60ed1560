"""``minibroker acl``'s options become the bindings and filters kafka-acls would make."""

from __future__ import annotations

import argparse

import pytest

from minibroker.client.cli.acl import (
    Resource,
    add_bindings,
    remove_filters,
    resource_operations,
)
from minibroker.command.main import build_parser
from minibroker.protocol.acls import (
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from minibroker.protocol.errors import UsageError

Plan = list[tuple[Resource, list[Operation]]]


def planned(*argv: str) -> tuple[argparse.Namespace, Plan]:
    args = build_parser().parse_args(["acl", *argv])
    resources = [(ResourceType.TOPIC, t) for t in args.topic]
    resources += [(ResourceType.GROUP, g) for g in args.group]
    operations = [Operation[op.upper()] for op in args.operation]
    return args, resource_operations(args, resources, operations)


def test_add_makes_one_binding_per_principal_host_and_operation_with_star_hosts() -> None:
    args, plan = planned(
        "add", "--allow-principal", "User:a", "--allow-principal", "User:b",
        "--operation", "read", "--operation", "write", "--topic", "t",
    )  # fmt: skip
    bindings = add_bindings(args, plan, PatternType.LITERAL)
    assert sorted((b.entry.principal, b.entry.host, b.entry.operation.name) for b in bindings) == [
        ("User:a", "*", "READ"),
        ("User:a", "*", "WRITE"),
        ("User:b", "*", "READ"),
        ("User:b", "*", "WRITE"),
    ]


def test_consumer_gives_read_and_describe_on_topics_and_read_on_groups() -> None:
    args, plan = planned(
        "add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g"
    )
    bindings = add_bindings(args, plan, PatternType.PREFIXED)
    got = sorted(
        (b.pattern.resource_type.name, b.pattern.name, b.entry.operation.name) for b in bindings
    )
    assert got == [("GROUP", "g", "READ"), ("TOPIC", "t", "DESCRIBE"), ("TOPIC", "t", "READ")]
    assert {b.pattern.pattern_type for b in bindings} == {PatternType.PREFIXED}


def test_idempotent_producer_also_gets_idempotent_write_on_the_cluster() -> None:
    args, plan = planned(
        "add", "--allow-principal", "User:p", "--producer", "--idempotent", "--topic", "t"
    )
    bindings = add_bindings(args, plan, PatternType.LITERAL)
    got = sorted((b.pattern.resource_type.name, b.entry.operation.name) for b in bindings)
    assert got == [
        ("CLUSTER", "IDEMPOTENT_WRITE"),
        ("TOPIC", "CREATE"),
        ("TOPIC", "DESCRIBE"),
        ("TOPIC", "WRITE"),
    ]


def test_consumer_without_a_group_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--group"):
        planned("add", "--allow-principal", "User:c", "--consumer", "--topic", "t")


def test_remove_without_principals_removes_every_acl_of_the_resource() -> None:
    args, plan = planned("remove", "--topic", "t")
    assert remove_filters(args, plan, PatternType.LITERAL) == [
        AclBindingFilter(ResourceType.TOPIC, "t", PatternType.LITERAL)
    ]
    args, plan = planned(
        "remove", "--deny-principal", "User:x", "--operation", "write", "--topic", "t"
    )
    assert remove_filters(args, plan, PatternType.LITERAL) == [
        AclBindingFilter(
            ResourceType.TOPIC, "t", PatternType.LITERAL, "User:x", "*", Operation.WRITE,
            Permission.DENY,
        )
    ]  # fmt: skip
