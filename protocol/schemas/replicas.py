"""Schemas that move replicas and leadership: ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments (between brokers), AlterReplicaLogDirs, DescribeLogDirs
(between the disks of one broker).

Field names are Kafka's message JSON names in snake_case; AlterPartitionReassignments'
per-topic ``responses`` is called ``topics``, and DescribeLogDirs' ``is_future_key``
is ``is_future``.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Nullable,
    per_topic,
    struct,
)

INITIAL = "initial version"

_THROTTLE = Field("throttle_time_ms", INT32, 0)
_ERROR_MESSAGE = Field("error_message", Nullable(STRING), None)

ELECTION_PREFERRED = 0
"""``election_type``: move leadership to the first replica in AR if it is in the ISR."""
ELECTION_UNCLEAN = 1
"""``election_type``: elect any live replica when no ISR replica is alive."""

ELECT_LEADERS = Api(
    name="ElectLeaders",
    doc="""Run a preferred (or unclean) leader election.

    Request: ``election_type`` (0 preferred, 1 unclean), ``topic_partitions`` (nil = all
    partitions, else [{topic, partitions: [int]}]), ``timeout_ms``.
    Response: ``error_code``, ``replica_election_results[]`` of {topic,
    partition_result[] of {partition_id, error_code (ELECTION_NOT_NEEDED when the
    preferred replica already leads), error_message}}.
    """,
    request=struct(
        Field("election_type", INT8, ELECTION_PREFERRED),
        Field(
            "topic_partitions",
            Nullable(Array(struct(Field("topic", STRING), Field("partitions", Array(INT32))))),
            None,
        ),
        Field("timeout_ms", INT32, 60_000),
    ),
    response=struct(
        _THROTTLE,
        Field("error_code", INT16, 0),
        per_topic(
            Field("partition_id", INT32),
            Field("error_code", INT16, 0),
            _ERROR_MESSAGE,
            field="replica_election_results",
            topic="topic",
            partitions="partition_result",
            default=[],
        ),
    ),
    history=(INITIAL,),
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    name="AlterPartitionReassignments",
    doc="""Start (or cancel) moving partitions' replicas between brokers (KIP-455).

    Request: ``timeout_ms``, ``topics[]`` of {name, partitions[] of {partition_index,
    replicas (the target replica list; nil cancels an ongoing reassignment)}}.
    Response: ``error_code``, ``error_message``, ``topics[]`` of {name, partitions[] of
    {partition_index, error_code, error_message}}.
    """,
    request=struct(
        Field("timeout_ms", INT32, 60_000),
        per_topic(Field("partition_index", INT32), Field("replicas", Nullable(Array(INT32)))),
    ),
    response=struct(
        _THROTTLE,
        Field("error_code", INT16, 0),
        _ERROR_MESSAGE,
        per_topic(
            Field("partition_index", INT32),
            Field("error_code", INT16, 0),
            _ERROR_MESSAGE,
            default=[],
        ),
    ),
    history=(INITIAL,),
)

LIST_PARTITION_REASSIGNMENTS = Api(
    name="ListPartitionReassignments",
    doc="""List ongoing reassignments.

    Request: ``timeout_ms``, ``topics`` (nil = all, else [{name, partition_indexes}]).
    Response: ``error_code``, ``error_message``, ``topics[]`` of {name, partitions[] of
    {partition_index, replicas (current AR), adding_replicas, removing_replicas}}.
    """,
    request=struct(
        Field("timeout_ms", INT32, 60_000),
        Field(
            "topics",
            Nullable(
                Array(struct(Field("name", STRING), Field("partition_indexes", Array(INT32))))
            ),
            None,
        ),
    ),
    response=struct(
        _THROTTLE,
        Field("error_code", INT16, 0),
        _ERROR_MESSAGE,
        per_topic(
            Field("partition_index", INT32),
            Field("replicas", Array(INT32)),
            Field("adding_replicas", Array(INT32), []),
            Field("removing_replicas", Array(INT32), []),
            default=[],
        ),
    ),
    history=(INITIAL,),
)

ALTER_REPLICA_LOG_DIRS = Api(
    name="AlterReplicaLogDirs",
    doc="""Move replicas of this broker to another of its log dirs (KIP-113).

    Request: ``dirs[]`` of {path (absolute, one of the broker's log.dirs), topics[] of
    {name, partitions: [int]}}.
    Response: ``results[]`` of {topic_name, partitions[] of {partition_index,
    error_code (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE ...)}}.
    """,
    request=struct(
        Field(
            "dirs",
            Array(
                struct(
                    Field("path", STRING),
                    Field(
                        "topics",
                        Array(struct(Field("name", STRING), Field("partitions", Array(INT32)))),
                    ),
                )
            ),
        ),
    ),
    response=struct(
        _THROTTLE,
        per_topic(
            Field("partition_index", INT32),
            Field("error_code", INT16, 0),
            field="results",
            topic="topic_name",
            default=[],
        ),
    ),
    history=(INITIAL,),
)

DESCRIBE_LOG_DIRS = Api(
    name="DescribeLogDirs",
    doc="""This broker's log dirs and the replicas in each.

    Request: ``topics`` (nil = all, else [{topic, partitions: [int]}]).
    Response: ``error_code``, ``results[]`` of {error_code (KAFKA_STORAGE_ERROR for an
    offline dir), log_dir, topics[] of {name, partitions[] of {partition_index,
    partition_size (bytes), offset_lag (how far behind the current log a -future log
    is, or the follower's lag; 0 when caught up), is_future, dirty_ratio (share of a
    compacted log the cleaner has not cleaned yet, 0..1; -1 for other logs; not in
    Kafka's schema)}}, total_bytes and
    usable_bytes of the file system (-1 unknown)}.
    """,
    request=struct(
        Field(
            "topics",
            Nullable(Array(struct(Field("topic", STRING), Field("partitions", Array(INT32))))),
            None,
        ),
    ),
    response=struct(
        _THROTTLE,
        Field("error_code", INT16, 0),
        Field(
            "results",
            Array(
                struct(
                    Field("error_code", INT16, 0),
                    Field("log_dir", STRING),
                    per_topic(
                        Field("partition_index", INT32),
                        Field("partition_size", INT64, 0),
                        Field("offset_lag", INT64, 0),
                        Field("is_future", BOOL, False),
                        Field("dirty_ratio", FLOAT64, -1.0),
                        default=[],
                    ),
                    Field("total_bytes", INT64, -1),
                    Field("usable_bytes", INT64, -1),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)
