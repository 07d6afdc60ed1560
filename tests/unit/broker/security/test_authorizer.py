"""AclAuthorizer decides as Kafka's AclAuthorizer does, for any principal and host."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from minibroker.broker.security.authorizer import (
    AclAuthorizer,
    AuthorizerCollector,
    parse_super_users,
)
from minibroker.protocol.acls import (
    AccessControlEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from tests.support.prometheus import promtool_problems

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB = "User:alice", "User:bob"


def entry(
    principal: str, operation: Operation, permission: Permission = ALLOW, host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer_with(
    *acls: tuple[ResourcePattern, AccessControlEntry], **settings: object
) -> AclAuthorizer:
    authorizer = AclAuthorizer(**settings)  # type: ignore[arg-type]
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, e in acls:
        grouped.setdefault(pattern, set()).add(e)
    authorizer.replace_all(grouped)
    return authorizer


def test_prefixed_acl_covers_names_starting_with_it_and_nothing_else() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "orders-", PREFIXED), entry(ALICE, Operation.READ))
    )
    assert auth.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "orders-eu")
    assert auth.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "orders-")
    assert not auth.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "orders")
    assert not auth.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "xorders-eu")


def test_literal_acl_covers_exactly_its_name_and_literal_star_covers_all() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "orders", LITERAL), entry(ALICE, Operation.READ)),
        (ResourcePattern(TOPIC, "*", LITERAL), entry(BOB, Operation.READ)),
    )
    assert auth.authorize(ALICE, "h", Operation.READ, TOPIC, "orders")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "orders-eu")
    assert auth.authorize(BOB, "h", Operation.READ, TOPIC, "anything")


def test_prefixed_star_is_a_prefix_not_a_wildcard() -> None:
    auth = authorizer_with((ResourcePattern(TOPIC, "*", PREFIXED), entry(ALICE, Operation.READ)))
    assert auth.authorize(ALICE, "h", Operation.READ, TOPIC, "*x")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "orders")


def test_wildcard_principal_and_host_match_everyone_and_everywhere() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "t", LITERAL), entry("User:*", Operation.WRITE, host="10.0.0.7")),
        (ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.READ, host="*")),
    )
    assert auth.authorize(BOB, "10.0.0.7", Operation.WRITE, TOPIC, "t")
    assert not auth.authorize(BOB, "10.0.0.8", Operation.WRITE, TOPIC, "t")
    assert auth.authorize(ALICE, "192.168.1.1", Operation.READ, TOPIC, "t")
    assert not auth.authorize(BOB, "192.168.1.1", Operation.READ, TOPIC, "t")


def test_deny_wins_over_allow_whichever_pattern_carries_it() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "*", LITERAL), entry(ALICE, Operation.ALL)),
        (ResourcePattern(TOPIC, "secret-", PREFIXED), entry(ALICE, Operation.READ, DENY)),
    )
    assert auth.authorize(ALICE, "h", Operation.READ, TOPIC, "public")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "secret-plans")
    assert auth.authorize(ALICE, "h", Operation.WRITE, TOPIC, "secret-plans")


def test_deny_all_refuses_every_operation_and_deny_for_one_host_only_that_host() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "t", LITERAL), entry("User:*", Operation.ALL)),
        (ResourcePattern(TOPIC, "t", LITERAL), entry(BOB, Operation.ALL, DENY, host="10.0.0.9")),
    )
    for op in (Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.DELETE):
        assert not auth.authorize(BOB, "10.0.0.9", op, TOPIC, "t")
        assert auth.authorize(BOB, "10.0.0.1", op, TOPIC, "t")


@pytest.mark.parametrize(
    "granted", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER]
)
def test_describe_is_implied_by_read_write_delete_and_alter(granted: Operation) -> None:
    auth = authorizer_with((ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, granted)))
    assert auth.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "t")


def test_describe_configs_is_implied_by_alter_configs_but_not_the_reverse() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "a", LITERAL), entry(ALICE, Operation.ALTER_CONFIGS)),
        (ResourcePattern(TOPIC, "d", LITERAL), entry(ALICE, Operation.DESCRIBE_CONFIGS)),
    )
    assert auth.authorize(ALICE, "h", Operation.DESCRIBE_CONFIGS, TOPIC, "a")
    assert not auth.authorize(ALICE, "h", Operation.ALTER_CONFIGS, TOPIC, "d")


def test_implication_does_not_run_the_other_way_or_sideways() -> None:
    auth = authorizer_with((ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.DESCRIBE)))
    for op in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER):
        assert not auth.authorize(ALICE, "h", op, TOPIC, "t")
    read_only = authorizer_with(
        (ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.READ))
    )
    assert not read_only.authorize(ALICE, "h", Operation.WRITE, TOPIC, "t")


def test_deny_describe_is_not_undone_by_an_allow_read() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.READ)),
        (ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.DESCRIBE, DENY)),
    )
    assert not auth.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "t")
    assert auth.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


def test_super_users_may_do_anything_even_where_denied() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "*", LITERAL), entry("User:*", Operation.ALL, DENY)),
        super_users=parse_super_users(" User:admin ; User:broker;"),
    )
    assert auth.super_users == {"User:admin", "User:broker"}
    assert auth.authorize("User:broker", "h", Operation.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    assert auth.authorize("User:admin", "h", Operation.READ, TOPIC, "t")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


def test_a_resource_without_acls_is_refused_unless_allow_everyone_if_no_acl_found() -> None:
    acl = (ResourcePattern(TOPIC, "guarded", LITERAL), entry(ALICE, Operation.READ))
    strict = authorizer_with(acl)
    open_ = authorizer_with(acl, allow_everyone_if_no_acl_found=True)
    assert not strict.authorize(BOB, "h", Operation.READ, TOPIC, "unguarded")
    assert open_.authorize(BOB, "h", Operation.READ, TOPIC, "unguarded")
    # A resource that has ACLs is decided by them, whatever the setting says.
    assert not open_.authorize(BOB, "h", Operation.READ, TOPIC, "guarded")
    assert open_.authorize(ALICE, "h", Operation.READ, TOPIC, "guarded")


def test_acls_of_another_resource_type_do_not_apply() -> None:
    auth = authorizer_with((ResourcePattern(GROUP, "g", LITERAL), entry(ALICE, Operation.READ)))
    assert auth.authorize(ALICE, "h", Operation.READ, GROUP, "g")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "g")


def test_a_change_replaces_the_cached_decision() -> None:
    pattern = ResourcePattern(TOPIC, "t", LITERAL)
    auth = authorizer_with((pattern, entry(ALICE, Operation.READ)))
    assert auth.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    auth.set_acls(pattern, [entry(ALICE, Operation.READ, DENY)])
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    auth.set_acls(pattern, [])
    assert list(auth.bindings()) == []


def test_authorize_any_finds_a_writable_topic_unless_a_deny_covers_it() -> None:
    auth = authorizer_with(
        (ResourcePattern(TOPIC, "logs-", PREFIXED), entry(ALICE, Operation.WRITE))
    )
    assert auth.authorize_any(ALICE, "h", Operation.WRITE, TOPIC)
    assert not auth.authorize_any(BOB, "h", Operation.WRITE, TOPIC)
    auth.set_acls(ResourcePattern(TOPIC, "logs", PREFIXED), [entry(ALICE, Operation.WRITE, DENY)])
    assert not auth.authorize_any(ALICE, "h", Operation.WRITE, TOPIC)
    auth.set_acls(ResourcePattern(TOPIC, "logs", PREFIXED), [])
    auth.set_acls(ResourcePattern(TOPIC, "logs-eu", LITERAL), [entry(ALICE, Operation.WRITE, DENY)])
    assert auth.authorize_any(ALICE, "h", Operation.WRITE, TOPIC)


def test_denials_are_counted() -> None:
    auth = authorizer_with((ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.READ)))
    auth.authorize(BOB, "h", Operation.READ, TOPIC, "t")
    auth.authorize(BOB, "h", Operation.READ, TOPIC, "t")
    auth.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    assert auth.denied == {(TOPIC, Operation.READ): 2}


def test_refusals_and_the_acl_count_are_prometheus_metrics() -> None:
    auth = authorizer_with((ResourcePattern(TOPIC, "t", LITERAL), entry(ALICE, Operation.READ)))
    auth.authorize(BOB, "h", Operation.WRITE, TOPIC, "t")
    registry = CollectorRegistry()
    registry.register(AuthorizerCollector(auth))
    text = generate_latest(registry).decode()
    assert (
        'kafka_server_authorizer_metrics_authorization_denied_total{operation="Write",'
        'resource_type="Topic"} 1.0' in text
    )
    assert "kafka_server_authorizer_metrics_acl_entries 1.0" in text
    assert promtool_problems(text.encode()) == []
