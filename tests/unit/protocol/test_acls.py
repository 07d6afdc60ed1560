"""ACL filters select bindings as Kafka's AclBindingFilter does; bodies round-trip."""

from __future__ import annotations

import pytest

from minibroker.protocol.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    binding_from_body,
    binding_from_creation,
    binding_problem,
    creation_body,
    filter_body,
    filter_from_body,
    parse_operation,
)
from minibroker.protocol.errors import InvalidRequestError

TOPIC = ResourceType.TOPIC
ALICE_READ = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)


def test_match_selects_every_pattern_that_applies_to_the_name() -> None:
    selector = AclBindingFilter(TOPIC, "orders-eu", PatternType.MATCH)
    assert selector.matches_pattern(ResourcePattern(TOPIC, "orders-eu"))
    assert selector.matches_pattern(ResourcePattern(TOPIC, "*"))
    assert selector.matches_pattern(ResourcePattern(TOPIC, "orders-", PatternType.PREFIXED))
    assert not selector.matches_pattern(ResourcePattern(TOPIC, "orders"))
    assert not selector.matches_pattern(ResourcePattern(ResourceType.GROUP, "orders-eu"))


def test_any_selects_literal_and_prefixed_of_exactly_that_name() -> None:
    selector = AclBindingFilter(TOPIC, "orders-", PatternType.ANY)
    assert selector.matches_pattern(ResourcePattern(TOPIC, "orders-"))
    assert selector.matches_pattern(ResourcePattern(TOPIC, "orders-", PatternType.PREFIXED))
    assert not selector.matches_pattern(ResourcePattern(TOPIC, "*"))


def test_entry_filter_fields_left_open_match_anything() -> None:
    assert AclBindingFilter().matches_entry(ALICE_READ)
    assert AclBindingFilter(operation=Operation.READ).matches_entry(ALICE_READ)
    assert not AclBindingFilter(operation=Operation.WRITE).matches_entry(ALICE_READ)
    assert not AclBindingFilter(principal="User:bob").matches_entry(ALICE_READ)


def test_filter_and_creation_bodies_round_trip() -> None:
    selector = AclBindingFilter(TOPIC, "t", PatternType.PREFIXED, "User:a", "h", Operation.WRITE)
    assert filter_from_body(filter_body(selector)) == selector
    binding = AclBinding(ResourcePattern(TOPIC, "t", PatternType.PREFIXED), ALICE_READ)
    assert binding_from_creation(creation_body(binding)) == binding
    assert binding_from_body(creation_body(binding)) == binding


@pytest.mark.parametrize(
    ("pattern", "entry"),
    [
        (ResourcePattern(TOPIC, "t", PatternType.MATCH), ALICE_READ),
        (ResourcePattern(ResourceType.CLUSTER, "other"), ALICE_READ),
        (ResourcePattern(TOPIC, ""), ALICE_READ),
        (
            ResourcePattern(TOPIC, "t"),
            AccessControlEntry("alice", "*", Operation.READ, Permission.ALLOW),
        ),
        (
            ResourcePattern(TOPIC, "t"),
            AccessControlEntry("User:a", "*", Operation.ANY, Permission.ALLOW),
        ),
    ],
)
def test_bindings_that_cannot_be_stored_are_refused(
    pattern: ResourcePattern, entry: AccessControlEntry
) -> None:
    binding = AclBinding(pattern, entry)
    assert binding_problem(binding) is not None
    with pytest.raises(InvalidRequestError):
        binding_from_creation(creation_body(binding))


def test_operation_names_parse_in_kafka_spellings() -> None:
    assert parse_operation("ClusterAction") is Operation.CLUSTER_ACTION
    assert parse_operation("cluster_action") is Operation.CLUSTER_ACTION
    assert parse_operation("IDEMPOTENT-WRITE") is Operation.IDEMPOTENT_WRITE
    with pytest.raises(ValueError, match="unknown operation"):
        parse_operation("Fly")
