"""Kafka messages of group membership: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups, DeleteGroups (see protocol/kafka/schema.py for
the declaration form; protocol/kafka/offsets.py has the committed-offset messages).

Field names are Kafka's, in snake_case, and so are the body keys the coordinator's
handlers read. Each message is declared as its versions really are on the wire; where
an older version has another shape than the newest (FindCoordinator before v4 names one
``key`` instead of ``coordinator_keys``, LeaveGroup before v3 one ``member_id`` instead
of ``members``), protocol/kafka/reshape.py turns it into the newest shape after
decoding and back before encoding, so handlers only ever see the newest one.

``protocol_type``, ``protocol_name`` and the per-member ``metadata`` / ``assignment``
bytes are the client's own (the consumer protocol's subscription and assignment): the
broker stores and relays them without reading them.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    STRING,
    Array,
    Message,
    f,
    struct,
    versions,
)

NO_AUTHORIZED_OPERATIONS: Final = -(2**31)
"""DescribeGroups' authorized-operations sentinel: not asked for."""

FIND_COORDINATOR: Final = Message(
    10,
    "FindCoordinator",
    valid=versions("0-4"),
    flexible=versions("3+"),
    request=struct(
        f("key", STRING, "0-3"),
        f("key_type", INT8, "1+"),
        f("coordinator_keys", Array(STRING), "4+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "0-3"),
        f("error_message", STRING, "1-3", null="1-3"),
        f("node_id", INT32, "0-3", default=-1),
        f("host", STRING, "0-3"),
        f("port", INT32, "0-3", default=-1),
        f(
            "coordinators",
            [
                f("key", STRING),
                f("node_id", INT32, default=-1),
                f("host", STRING),
                f("port", INT32, default=-1),
                f("error_code", INT16),
                f("error_message", STRING, null="4+"),
            ],
            "4+",
        ),
    ),
    history={
        0: "key (a group id) -> error_code, node_id, host, port",
        1: "key_type (0 group, 1 transaction); throttle_time_ms, error_message",
        2: "unchanged (throttled after the response is sent)",
        3: "flexible",
        4: "coordinator_keys and coordinators: several keys in one request (KIP-699)",
    },
)

JOIN_GROUP: Final = Message(
    11,
    "JoinGroup",
    valid=versions("0-7"),
    flexible=versions("6+"),
    request=struct(
        f("group_id", STRING),
        f("session_timeout_ms", INT32),
        f("rebalance_timeout_ms", INT32, "1+", default=-1),
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", null="5+"),
        f("protocol_type", STRING),
        f("protocols", [f("name", STRING), f("metadata", BYTES)]),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f("error_code", INT16),
        f("generation_id", INT32, default=-1),
        f("protocol_type", STRING, "7+", null="7+"),
        f("protocol_name", STRING, null="7+"),
        f("leader", STRING),
        f("member_id", STRING),
        f(
            "members",
            [
                f("member_id", STRING),
                f("group_instance_id", STRING, "5+", null="5+"),
                f("metadata", BYTES),
            ],
        ),
    ),
    history={
        1: "rebalance_timeout_ms (before it, the session timeout bounds a rebalance)",
        2: "throttle_time_ms",
        3: "unchanged (throttled after the response is sent)",
        4: "MEMBER_ID_REQUIRED: a new member rejoins with the id it is given (KIP-394)",
        5: "group_instance_id: static membership (KIP-345)",
        6: "flexible",
        7: "protocol_type in the response, protocol_name nullable (KIP-559)",
    },
)

SYNC_GROUP: Final = Message(
    14,
    "SyncGroup",
    valid=versions("0-5"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", null="3+"),
        f("protocol_type", STRING, "5+", null="5+"),
        f("protocol_name", STRING, "5+", null="5+"),
        f("assignments", [f("member_id", STRING), f("assignment", BYTES)]),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f("protocol_type", STRING, "5+", null="5+"),
        f("protocol_name", STRING, "5+", null="5+"),
        f("assignment", BYTES),
    ),
    history={
        0: "the leader's assignments -> each member's own assignment",
        1: "throttle_time_ms",
        2: "unchanged (throttled after the response is sent)",
        3: "group_instance_id (KIP-345)",
        4: "flexible",
        5: "protocol_type and protocol_name checked both ways (KIP-559)",
    },
)

HEARTBEAT: Final = Message(
    12,
    "Heartbeat",
    valid=versions("0-4"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", null="3+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
    ),
    history={
        1: "throttle_time_ms",
        2: "unchanged (throttled after the response is sent)",
        3: "group_instance_id (KIP-345)",
        4: "flexible",
    },
)

LEAVE_GROUP: Final = Message(
    13,
    "LeaveGroup",
    valid=versions("0-4"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING),
        f("member_id", STRING, "0-2"),
        f(
            "members",
            [f("member_id", STRING), f("group_instance_id", STRING, null="3+")],
            "3+",
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f(
            "members",
            [
                f("member_id", STRING),
                f("group_instance_id", STRING, null="3+"),
                f("error_code", INT16),
            ],
            "3+",
        ),
    ),
    history={
        0: "one member_id leaves -> error_code",
        1: "throttle_time_ms",
        2: "unchanged (throttled after the response is sent)",
        3: "members: several (static) members leave at once, each answered (KIP-345)",
        4: "flexible",
    },
)

DESCRIBE_GROUPS: Final = Message(
    15,
    "DescribeGroups",
    valid=versions("0-5"),
    flexible=versions("5+"),
    request=struct(
        f("groups", Array(STRING)),
        f("include_authorized_operations", BOOL, "3+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f(
            "groups",
            [
                f("error_code", INT16),
                f("group_id", STRING),
                f("group_state", STRING),
                f("protocol_type", STRING),
                f("protocol_data", STRING),
                f(
                    "members",
                    [
                        f("member_id", STRING),
                        f("group_instance_id", STRING, "4+", null="4+"),
                        f("client_id", STRING),
                        f("client_host", STRING),
                        f("member_metadata", BYTES),
                        f("member_assignment", BYTES),
                    ],
                ),
                f("authorized_operations", INT32, "3+", default=NO_AUTHORIZED_OPERATIONS),
            ],
        ),
    ),
    history={
        1: "throttle_time_ms",
        2: "unchanged (throttled after the response is sent)",
        3: "include_authorized_operations / authorized_operations (KIP-430)",
        4: "group_instance_id of each member (KIP-345)",
        5: "flexible",
    },
)

LIST_GROUPS: Final = Message(
    16,
    "ListGroups",
    valid=versions("0-4"),
    flexible=versions("3+"),
    request=struct(
        f("states_filter", Array(STRING), "4+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f(
            "groups",
            [
                f("group_id", STRING),
                f("protocol_type", STRING),
                f("group_state", STRING, "4+"),
            ],
        ),
    ),
    history={
        1: "throttle_time_ms",
        2: "unchanged (throttled after the response is sent)",
        3: "flexible",
        4: "states_filter and each group's state (KIP-518)",
    },
)

DELETE_GROUPS: Final = Message(
    42,
    "DeleteGroups",
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f("groups_names", Array(STRING)),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("results", [f("group_id", STRING), f("error_code", INT16)]),
    ),
    history={
        0: "group ids -> an error code per group (only empty groups are deleted)",
        1: "unchanged (throttled after the response is sent)",
        2: "flexible",
    },
)
