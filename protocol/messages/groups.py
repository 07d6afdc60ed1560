"""The group coordinator's membership APIs: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups (the offsets APIs are
in offsets.py).

Where Kafka changed a message's *shape* between versions, the body handlers read
carries both shapes, so a body normalised from any Kafka version (protocol/kafka/
reshape.py) has one form:

- FindCoordinator: ``key`` / ``key_type`` (v0-3) or ``coordinator_keys`` (v4); the
  answer carries both the top-level v0-3 fields (for the first key) and
  ``coordinators[]``. Each coordinator also names ``kafka_host`` / ``kafka_port`` (the
  coordinator's Kafka listener, None without one; msgpack bodies only): the Kafka
  listener answers those.
- JoinGroup: ``rebalance_timeout_ms`` -1 means "the session timeout" (Kafka v0 has no
  rebalance timeout); ``require_known_member_id`` (not a Kafka field: Kafka derives it
  from the version, v4+) asks for the MEMBER_ID_REQUIRED round trip. msgpack clients
  always get it.
- LeaveGroup: ``member_id`` (v0-2, one member) or ``members[]`` (v3+, batch; static
  members leave by ``group_instance_id``).

Member protocol metadata and assignments are opaque ``bytes`` (Kafka's
ConsumerProtocol bytes when the client is a consumer).
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    NO_AUTHORIZED_OPERATIONS,
    STRING,
    Array,
    Message,
    f,
    struct,
    versions,
)

KEY_TYPE_GROUP: Final = 0
"""FindCoordinator's ``key_type`` for a consumer group."""
KEY_TYPE_TRANSACTION: Final = 1
"""FindCoordinator's ``key_type`` for a transactional id (the transaction coordinator)."""


FIND_COORDINATOR: Final = Message(
    10,
    "FindCoordinator",
    doc="""Which broker coordinates a group: the leader of its ``__consumer_offsets``
    partition (the topic is created on the first call).

    Request: ``key`` (v0-3) or ``coordinator_keys[]`` (v4), ``key_type`` (0 group).
    Response: ``coordinators[]`` of {key, node_id, host, port, error_code,
    error_message, kafka_host, kafka_port}, and the first one's fields at the top.
    """,
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
                f("key", STRING, required=True),
                f("node_id", INT32, required=True, default=-1),
                f("host", STRING, required=True),
                f("port", INT32, required=True, default=-1),
                f("error_code", INT16),
                f("error_message", STRING, null="4+"),
                f("kafka_host", STRING, "", body_null=True),
                f("kafka_port", INT32, "", body_null=True),
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
    doc="""Join (or rejoin) a group; answered when the rebalance completes.

    Request: ``group_id``, ``session_timeout_ms``, ``rebalance_timeout_ms``,
    ``member_id`` ("" the first time), ``group_instance_id`` (static membership),
    ``protocol_type`` ("consumer"), ``protocols[]`` of {name, metadata}.
    Response: ``error_code``, ``generation_id``, ``protocol_type``, ``protocol_name``,
    ``leader``, ``member_id``, ``members[]`` (to the leader only) of {member_id,
    group_instance_id, metadata}.
    """,
    valid=versions("0-7"),
    flexible=versions("6+"),
    request=struct(
        f("group_id", STRING, required=True),
        f("session_timeout_ms", INT32, required=True),
        f("rebalance_timeout_ms", INT32, "1+", default=-1),
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", null="5+"),
        f("protocol_type", STRING, required=True),
        f(
            "protocols",
            [f("name", STRING, required=True), f("metadata", BYTES, required=True)],
            required=True,
        ),
        f("require_known_member_id", BOOL, "", default=True),
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
                f("member_id", STRING, required=True),
                f("group_instance_id", STRING, "5+", null="5+"),
                f("metadata", BYTES, required=True),
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

HEARTBEAT: Final = Message(
    12,
    "Heartbeat",
    doc="""A member is alive; REBALANCE_IN_PROGRESS tells it to rejoin.

    Request: ``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``.
    Response: ``error_code``.
    """,
    valid=versions("0-4"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING, required=True),
        f("generation_id", INT32, required=True),
        f("member_id", STRING, required=True),
        f("group_instance_id", STRING, "3+", null="3+"),
    ),
    response=struct(f("throttle_time_ms", INT32, "1+"), f("error_code", INT16)),
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
    doc="""Members leave a group at once (no session timeout to wait for).

    Request: ``group_id``, ``member_id`` (v0-2) or ``members[]`` of {member_id,
    group_instance_id}.
    Response: ``error_code``, ``members[]`` of {member_id, group_instance_id,
    error_code}.
    """,
    valid=versions("0-4"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING, required=True),
        f("member_id", STRING, "0-2"),
        f("members", [f("member_id", STRING), f("group_instance_id", STRING, null="3+")], "3+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f(
            "members",
            [
                f("member_id", STRING, required=True),
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

SYNC_GROUP: Final = Message(
    14,
    "SyncGroup",
    doc="""Finish a rebalance: the leader sends every member's assignment, every member
    receives its own.

    Request: ``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``,
    ``protocol_type`` / ``protocol_name`` (checked when given), ``assignments[]`` of
    {member_id, assignment} (the leader's only).
    Response: ``error_code``, ``protocol_type``, ``protocol_name``, ``assignment``.
    """,
    valid=versions("0-5"),
    flexible=versions("4+"),
    request=struct(
        f("group_id", STRING, required=True),
        f("generation_id", INT32, required=True),
        f("member_id", STRING, required=True),
        f("group_instance_id", STRING, "3+", null="3+"),
        f("protocol_type", STRING, "5+", null="5+"),
        f("protocol_name", STRING, "5+", null="5+"),
        f(
            "assignments",
            [f("member_id", STRING, required=True), f("assignment", BYTES, required=True)],
        ),
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

DESCRIBE_GROUPS: Final = Message(
    15,
    "DescribeGroups",
    doc="""State, protocol and members of groups (this broker must coordinate them).

    Request: ``groups[]`` (group ids), ``include_authorized_operations``.
    Response: ``groups[]`` of {error_code, group_id, group_state, protocol_type,
    protocol_data, members[] of {member_id, group_instance_id, client_id, client_host,
    member_metadata, member_assignment}, authorized_operations}.
    """,
    valid=versions("0-5"),
    flexible=versions("5+"),
    request=struct(
        f("groups", Array(STRING), required=True), f("include_authorized_operations", BOOL, "3+")
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f(
            "groups",
            [
                f("error_code", INT16),
                f("group_id", STRING, required=True),
                f("group_state", STRING, required=True),
                f("protocol_type", STRING, required=True),
                f("protocol_data", STRING, required=True),
                f(
                    "members",
                    [
                        f("member_id", STRING, required=True),
                        f("group_instance_id", STRING, "4+", null="4+"),
                        f("client_id", STRING, required=True),
                        f("client_host", STRING, required=True),
                        f("member_metadata", BYTES, required=True),
                        f("member_assignment", BYTES, required=True),
                    ],
                    required=True,
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
    doc="""The groups this broker coordinates.

    Request: ``states_filter[]`` (empty: every state).
    Response: ``error_code``, ``groups[]`` of {group_id, protocol_type, group_state}.
    """,
    valid=versions("0-4"),
    flexible=versions("3+"),
    request=struct(f("states_filter", Array(STRING), "4+")),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16),
        f(
            "groups",
            [
                f("group_id", STRING, required=True),
                f("protocol_type", STRING, required=True),
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
    doc="""Delete empty groups and their committed offsets (tombstones in the log).

    Request: ``groups_names[]``.
    Response: ``results[]`` of {group_id, error_code} (NON_EMPTY_GROUP while members
    remain, GROUP_ID_NOT_FOUND for an unknown group).
    """,
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(f("groups_names", Array(STRING), required=True)),
    response=struct(
        f("throttle_time_ms", INT32),
        f("results", [f("group_id", STRING, required=True), f("error_code", INT16)]),
    ),
    history={
        0: "group ids -> an error code per group (only empty groups are deleted)",
        1: "unchanged (throttled after the response is sent)",
        2: "flexible",
    },
)
