"""ACL znodes in Kafka's layout and JSON, and their change notifications."""

from __future__ import annotations

import json

import pytest

from minibroker.protocol.acls import (
    AccessControlEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from minibroker.zk.acls import (
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    acl_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
)
from minibroker.zk.values import ZkDataError

ALICE_READ = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)
BOB_DENY = AccessControlEntry("User:bob", "10.0.0.1", Operation.CLUSTER_ACTION, Permission.DENY)


def test_paths_are_kafkas() -> None:
    assert acl_path(ResourcePattern(ResourceType.TOPIC, "t")) == "/kafka-acl/Topic/t"
    assert (
        acl_path(ResourcePattern(ResourceType.GROUP, "g-", PatternType.PREFIXED))
        == "/kafka-acl-extended/prefixed/Group/g-"
    )


def test_entries_are_kafkas_json_and_read_back() -> None:
    data = encode_acls([BOB_DENY, ALICE_READ])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
            {
                "principal": "User:bob",
                "permissionType": "Deny",
                "operation": "ClusterAction",
                "host": "10.0.0.1",
            },
        ],
    }
    assert decode_acls(data, "/p") == {ALICE_READ, BOB_DENY}


@pytest.mark.parametrize("data", [b"{", b'{"acls": [{"principal": "User:a"}]}', b"[]"])
def test_a_znode_that_is_not_kafkas_json_is_refused(data: bytes) -> None:
    with pytest.raises(ZkDataError):
        decode_acls(data, "/kafka-acl/Topic/t")


def test_change_notifications_name_the_pattern_as_kafka_writes_them() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "orders")
    assert encode_change(literal) == (LITERAL_CHANGES_PATH, b"Topic:orders")
    prefixed = ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
    parent, data = encode_change(prefixed)
    assert parent == EXTENDED_CHANGES_PATH
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "team-",
        "patternType": "PREFIXED",
    }
    for pattern in (literal, prefixed):
        assert decode_change(*encode_change(pattern)) == pattern
    with pytest.raises(ZkDataError):
        decode_change(EXTENDED_CHANGES_PATH, b'{"patternType": "MATCH"}')
