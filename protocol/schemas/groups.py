"""Schemas of the group coordinator's APIs: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups, OffsetDelete.

Field names are Kafka's message JSON names in snake_case, so the Kafka listener's
codec maps each Kafka version onto these by name. Each msgpack API has one version
carrying the fields of the highest Kafka version served on the Kafka listener
(FindCoordinator v4, JoinGroup v7, SyncGroup v5, Heartbeat v4, LeaveGroup v4,
OffsetCommit v8, OffsetFetch v8, DescribeGroups v5, ListGroups v4, DeleteGroups v2,
OffsetDelete v0), plus, where Kafka changed a message's *shape* between versions, the
older shape as optional fields, so a body normalised from any Kafka version validates:

- FindCoordinator: ``key`` / ``key_type`` (v0-3) or ``coordinator_keys`` (v4); the
  answer carries both the top-level v0-3 fields (for the first key) and
  ``coordinators[]``. Each coordinator also names ``kafka_host`` / ``kafka_port`` (the
  coordinator's Kafka listener, nil without one): the Kafka listener answers those.
- JoinGroup: ``rebalance_timeout_ms`` -1 means "the session timeout" (Kafka v0 has no
  rebalance timeout); ``require_known_member_id`` (not a Kafka field: Kafka derives it
  from the version, v4+) asks for the MEMBER_ID_REQUIRED round trip. msgpack clients
  always get it.
- LeaveGroup: ``member_id`` (v0-2, one member) or ``members[]`` (v3+, batch; static
  members leave by ``group_instance_id``).
- OffsetCommit: ``retention_time_ms`` (v2-4; -1: the broker's retention).
- OffsetFetch: ``group_id`` / ``topics`` (v1-7, one group) or ``groups[]`` (v8); the
  answer carries ``groups[]`` and, for a one-group request, the v1-7 top-level
  ``topics`` / ``error_code``. ``topics`` nil asks for every committed partition.

Member protocol metadata and assignments are opaque ``bytes`` (Kafka's
ConsumerProtocol bytes when the client is a consumer).
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Nullable,
    struct,
)

INITIAL = "initial version"

_THROTTLE = Field("throttle_time_ms", INT32, 0)
_ERROR = Field("error_code", INT16, 0)
_ERROR_MESSAGE = Field("error_message", Nullable(STRING), None)
_INSTANCE_ID = Field("group_instance_id", Nullable(STRING), None)

KEY_TYPE_GROUP = 0
"""FindCoordinator's ``key_type`` for a consumer group (1 is a transactional id)."""

FIND_COORDINATOR = Api(
    name="FindCoordinator",
    doc="""Which broker coordinates a group: the leader of its ``__consumer_offsets``
    partition (the topic is created on the first call).

    Request: ``key`` (v0-3) or ``coordinator_keys[]`` (v4), ``key_type`` (0 group).
    Response: ``coordinators[]`` of {key, node_id, host, port, error_code,
    error_message, kafka_host, kafka_port}, and the first one's fields at the top.
    """,
    request=struct(
        Field("key", STRING, ""),
        Field("key_type", INT8, KEY_TYPE_GROUP),
        Field("coordinator_keys", Array(STRING), []),
    ),
    response=struct(
        _THROTTLE,
        _ERROR,
        _ERROR_MESSAGE,
        Field("node_id", INT32, -1),
        Field("host", STRING, ""),
        Field("port", INT32, -1),
        Field(
            "coordinators",
            Array(
                struct(
                    Field("key", STRING),
                    Field("node_id", INT32),
                    Field("host", STRING),
                    Field("port", INT32),
                    _ERROR,
                    _ERROR_MESSAGE,
                    Field("kafka_host", Nullable(STRING), None),
                    Field("kafka_port", Nullable(INT32), None),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

_PROTOCOL = struct(Field("name", STRING), Field("metadata", BYTES))
_JOIN_MEMBER = struct(Field("member_id", STRING), _INSTANCE_ID, Field("metadata", BYTES))

JOIN_GROUP = Api(
    name="JoinGroup",
    doc="""Join (or rejoin) a group; answered when the rebalance completes.

    Request: ``group_id``, ``session_timeout_ms``, ``rebalance_timeout_ms``,
    ``member_id`` ("" the first time), ``group_instance_id`` (static membership),
    ``protocol_type`` ("consumer"), ``protocols[]`` of {name, metadata}.
    Response: ``error_code``, ``generation_id``, ``protocol_type``, ``protocol_name``,
    ``leader``, ``member_id``, ``members[]`` (to the leader only) of {member_id,
    group_instance_id, metadata}.
    """,
    request=struct(
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, -1),
        Field("member_id", STRING, ""),
        _INSTANCE_ID,
        Field("protocol_type", STRING),
        Field("protocols", Array(_PROTOCOL)),
        Field("require_known_member_id", BOOL, True),
    ),
    response=struct(
        _THROTTLE,
        _ERROR,
        Field("generation_id", INT32, -1),
        Field("protocol_type", Nullable(STRING), None),
        Field("protocol_name", Nullable(STRING), None),
        Field("leader", STRING, ""),
        Field("member_id", STRING, ""),
        Field("members", Array(_JOIN_MEMBER), []),
    ),
    history=(INITIAL,),
)

SYNC_GROUP = Api(
    name="SyncGroup",
    doc="""Finish a rebalance: the leader sends every member's assignment, every member
    receives its own.

    Request: ``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``,
    ``protocol_type`` / ``protocol_name`` (checked when given), ``assignments[]`` of
    {member_id, assignment} (the leader's only).
    Response: ``error_code``, ``protocol_type``, ``protocol_name``, ``assignment``.
    """,
    request=struct(
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        _INSTANCE_ID,
        Field("protocol_type", Nullable(STRING), None),
        Field("protocol_name", Nullable(STRING), None),
        Field(
            "assignments",
            Array(struct(Field("member_id", STRING), Field("assignment", BYTES))),
            [],
        ),
    ),
    response=struct(
        _THROTTLE,
        _ERROR,
        Field("protocol_type", Nullable(STRING), None),
        Field("protocol_name", Nullable(STRING), None),
        Field("assignment", BYTES, b""),
    ),
    history=(INITIAL,),
)

HEARTBEAT = Api(
    name="Heartbeat",
    doc="""A member is alive; REBALANCE_IN_PROGRESS tells it to rejoin.

    Request: ``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``.
    Response: ``error_code``.
    """,
    request=struct(
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        _INSTANCE_ID,
    ),
    response=struct(_THROTTLE, _ERROR),
    history=(INITIAL,),
)

_LEAVING = struct(Field("member_id", STRING, ""), _INSTANCE_ID)

LEAVE_GROUP = Api(
    name="LeaveGroup",
    doc="""Members leave a group at once (no session timeout to wait for).

    Request: ``group_id``, ``member_id`` (v0-2) or ``members[]`` of {member_id,
    group_instance_id}.
    Response: ``error_code``, ``members[]`` of {member_id, group_instance_id,
    error_code}.
    """,
    request=struct(
        Field("group_id", STRING),
        Field("member_id", STRING, ""),
        Field("members", Array(_LEAVING), []),
    ),
    response=struct(
        _THROTTLE,
        _ERROR,
        Field(
            "members",
            Array(struct(Field("member_id", STRING), _INSTANCE_ID, _ERROR)),
            [],
        ),
    ),
    history=(INITIAL,),
)

_COMMIT_PARTITION = struct(
    Field("partition_index", INT32),
    Field("committed_offset", INT64),
    Field("committed_leader_epoch", INT32, -1),
    Field("committed_metadata", Nullable(STRING), None),
)
_PARTITION_ERROR = struct(Field("partition_index", INT32), _ERROR)

OFFSET_COMMIT = Api(
    name="OffsetCommit",
    doc="""Store a group's consumed positions (written to ``__consumer_offsets``).

    Request: ``group_id``, ``generation_id`` (-1 with ``member_id`` "": a commit from
    outside the group protocol), ``member_id``, ``group_instance_id``,
    ``retention_time_ms`` (-1: the broker's), ``topics[]`` of {name, partitions[] of
    {partition_index, committed_offset, committed_leader_epoch, committed_metadata}}.
    Response: ``topics[]`` of {name, partitions[] of {partition_index, error_code}}.
    """,
    request=struct(
        Field("group_id", STRING),
        Field("generation_id", INT32, -1),
        Field("member_id", STRING, ""),
        _INSTANCE_ID,
        Field("retention_time_ms", INT64, -1),
        Field(
            "topics",
            Array(struct(Field("name", STRING), Field("partitions", Array(_COMMIT_PARTITION)))),
        ),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "topics",
            Array(struct(Field("name", STRING), Field("partitions", Array(_PARTITION_ERROR)))),
            [],
        ),
    ),
    history=(INITIAL,),
)

_FETCH_TOPIC = struct(Field("name", STRING), Field("partition_indexes", Array(INT32)))
_FETCHED_PARTITION = struct(
    Field("partition_index", INT32),
    Field("committed_offset", INT64),
    Field("committed_leader_epoch", INT32, -1),
    Field("metadata", Nullable(STRING), None),
    _ERROR,
)
_FETCHED_TOPIC = struct(Field("name", STRING), Field("partitions", Array(_FETCHED_PARTITION)))

OFFSET_FETCH = Api(
    name="OffsetFetch",
    doc="""Read committed offsets; -1 where a partition has none.

    Request: ``groups[]`` of {group_id, topics[] (nil: all) of {name,
    partition_indexes}}, or one group as ``group_id`` / ``topics``; ``require_stable``.
    Response: ``groups[]`` of {group_id, topics[] of {name, partitions[] of
    {partition_index, committed_offset, committed_leader_epoch, metadata, error_code}},
    error_code}; for a one-group request also ``topics`` and ``error_code`` at the top.
    """,
    request=struct(
        Field("group_id", Nullable(STRING), None),
        Field("topics", Nullable(Array(_FETCH_TOPIC)), None),
        Field(
            "groups",
            Nullable(
                Array(
                    struct(
                        Field("group_id", STRING),
                        Field("topics", Nullable(Array(_FETCH_TOPIC)), None),
                    )
                )
            ),
            None,
        ),
        Field("require_stable", BOOL, False),
    ),
    response=struct(
        _THROTTLE,
        _ERROR,
        Field("topics", Array(_FETCHED_TOPIC), []),
        Field(
            "groups",
            Array(
                struct(
                    Field("group_id", STRING),
                    Field("topics", Array(_FETCHED_TOPIC)),
                    _ERROR,
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

DESCRIBE_GROUPS = Api(
    name="DescribeGroups",
    doc="""State, protocol and members of groups (this broker must coordinate them).

    Request: ``groups[]`` (group ids), ``include_authorized_operations``.
    Response: ``groups[]`` of {error_code, group_id, group_state, protocol_type,
    protocol_data, members[] of {member_id, group_instance_id, client_id, client_host,
    member_metadata, member_assignment}, authorized_operations}.
    """,
    request=struct(
        Field("groups", Array(STRING)),
        Field("include_authorized_operations", BOOL, False),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "groups",
            Array(
                struct(
                    _ERROR,
                    Field("group_id", STRING),
                    Field("group_state", STRING),
                    Field("protocol_type", STRING),
                    Field("protocol_data", STRING),
                    Field(
                        "members",
                        Array(
                            struct(
                                Field("member_id", STRING),
                                _INSTANCE_ID,
                                Field("client_id", STRING),
                                Field("client_host", STRING),
                                Field("member_metadata", BYTES),
                                Field("member_assignment", BYTES),
                            )
                        ),
                    ),
                    Field("authorized_operations", INT32, -2147483648),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

LIST_GROUPS = Api(
    name="ListGroups",
    doc="""The groups this broker coordinates.

    Request: ``states_filter[]`` (empty: every state).
    Response: ``error_code``, ``groups[]`` of {group_id, protocol_type, group_state}.
    """,
    request=struct(Field("states_filter", Array(STRING), [])),
    response=struct(
        _THROTTLE,
        _ERROR,
        Field(
            "groups",
            Array(
                struct(
                    Field("group_id", STRING),
                    Field("protocol_type", STRING),
                    Field("group_state", STRING, ""),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

DELETE_GROUPS = Api(
    name="DeleteGroups",
    doc="""Delete empty groups and their committed offsets (tombstones in the log).

    Request: ``groups_names[]``.
    Response: ``results[]`` of {group_id, error_code} (NON_EMPTY_GROUP while members
    remain, GROUP_ID_NOT_FOUND for an unknown group).
    """,
    request=struct(Field("groups_names", Array(STRING))),
    response=struct(
        _THROTTLE,
        Field("results", Array(struct(Field("group_id", STRING), _ERROR)), []),
    ),
    history=(INITIAL,),
)

OFFSET_DELETE = Api(
    name="OffsetDelete",
    doc="""Delete a group's committed offsets of some partitions (tombstones in the log).

    Request: ``group_id``, ``topics[]`` of {name, partitions[] of {partition_index}}.
    Response: ``error_code``, ``topics[]`` of {name, partitions[] of {partition_index,
    error_code}} (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes the topic).
    """,
    request=struct(
        Field("group_id", STRING),
        Field(
            "topics",
            Array(
                struct(
                    Field("name", STRING),
                    Field("partitions", Array(struct(Field("partition_index", INT32)))),
                )
            ),
        ),
    ),
    response=struct(
        _ERROR,
        _THROTTLE,
        Field(
            "topics",
            Array(struct(Field("name", STRING), Field("partitions", Array(_PARTITION_ERROR)))),
            [],
        ),
    ),
    history=(INITIAL,),
)
