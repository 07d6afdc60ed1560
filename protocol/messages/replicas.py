"""Moving replicas and leadership: ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments (between brokers), AlterReplicaLogDirs, DescribeLogDirs
(between the disks of one broker).

AlterPartitionReassignments' per-topic ``responses`` is ``topics`` in the bodies
handlers read, and DescribeLogDirs' ``is_future_key`` is ``is_future``.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Array,
    Message,
    f,
    struct,
    versions,
)

ELECTION_PREFERRED: Final = 0
"""``election_type``: move leadership to the first replica in AR if it is in the ISR."""
ELECTION_UNCLEAN: Final = 1
"""``election_type``: elect any live replica when no ISR replica is alive."""


ALTER_REPLICA_LOG_DIRS: Final = Message(
    34,
    "AlterReplicaLogDirs",
    doc="""Move replicas of this broker to another of its log dirs (KIP-113).

    Request: ``dirs[]`` of {path (absolute, one of the broker's log.dirs), topics[] of
    {name, partitions: [int]}}.
    Response: ``results[]`` of {topic_name, partitions[] of {partition_index,
    error_code (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE ...)}}.
    """,
    valid=versions("1-2"),
    flexible=versions("2+"),
    request=struct(
        f(
            "dirs",
            [
                f("path", STRING, required=True),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f("partitions", Array(INT32), required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        )
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "results",
            [
                f("topic_name", STRING, required=True),
                f(
                    "partitions",
                    [f("partition_index", INT32, required=True), f("error_code", INT16)],
                    required=True,
                ),
            ],
        ),
    ),
    history={1: "unchanged (throttling after the response)", 2: "flexible"},
)

DESCRIBE_LOG_DIRS: Final = Message(
    35,
    "DescribeLogDirs",
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
    valid=versions("1-4"),
    flexible=versions("2+"),
    request=struct(
        f(
            "topics",
            [f("topic", STRING, required=True), f("partitions", Array(INT32), required=True)],
            null="0+",
        )
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "3+"),
        f(
            "results",
            [
                f("error_code", INT16),
                f("log_dir", STRING, required=True),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f(
                            "partitions",
                            [
                                f("partition_index", INT32, required=True),
                                f("partition_size", INT64),
                                f("offset_lag", INT64),
                                f("is_future_key", BOOL, key="is_future"),
                                f("dirty_ratio", FLOAT64, "", default=-1.0),
                            ],
                            required=True,
                        ),
                    ],
                ),
                f("total_bytes", INT64, "4+", default=-1),
                f("usable_bytes", INT64, "4+", default=-1),
            ],
        ),
    ),
    history={
        1: "unchanged (throttling after the response)",
        2: "flexible",
        3: "top-level error_code",
        4: "total_bytes, usable_bytes",
    },
)

ELECT_LEADERS: Final = Message(
    43,
    "ElectLeaders",
    doc="""Run a preferred (or unclean) leader election.

    Request: ``election_type`` (0 preferred, 1 unclean), ``topic_partitions`` (nil = all
    partitions, else [{topic, partitions: [int]}]), ``timeout_ms``.
    Response: ``error_code``, ``replica_election_results[]`` of {topic,
    partition_result[] of {partition_id, error_code (ELECTION_NOT_NEEDED when the
    preferred replica already leads), error_message}}.
    """,
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f("election_type", INT8, "1+"),
        f(
            "topic_partitions",
            [f("topic", STRING, required=True), f("partitions", Array(INT32), required=True)],
            null="0+",
        ),
        f("timeout_ms", INT32, default=60000),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "1+"),
        f(
            "replica_election_results",
            [
                f("topic", STRING, required=True),
                f(
                    "partition_result",
                    [
                        f("partition_id", INT32, required=True),
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history={
        0: "preferred elections only",
        1: "election_type; top-level error_code",
        2: "flexible",
    },
)

ALTER_PARTITION_REASSIGNMENTS: Final = Message(
    45,
    "AlterPartitionReassignments",
    doc="""Start (or cancel) moving partitions' replicas between brokers (KIP-455).

    Request: ``timeout_ms``, ``topics[]`` of {name, partitions[] of {partition_index,
    replicas (the target replica list; nil cancels an ongoing reassignment)}}.
    Response: ``error_code``, ``error_message``, ``topics[]`` of {name, partitions[] of
    {partition_index, error_code, error_message}}.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f("timeout_ms", INT32, default=60000),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("replicas", Array(INT32), null="0+", required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "responses",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                    ],
                    required=True,
                ),
            ],
            key="topics",
        ),
    ),
    history={0: "initial version (flexible)"},
)

LIST_PARTITION_REASSIGNMENTS: Final = Message(
    46,
    "ListPartitionReassignments",
    doc="""List ongoing reassignments.

    Request: ``timeout_ms``, ``topics`` (nil = all, else [{name, partition_indexes}]).
    Response: ``error_code``, ``error_message``, ``topics[]`` of {name, partitions[] of
    {partition_index, replicas (current AR), adding_replicas, removing_replicas}}.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f("timeout_ms", INT32, default=60000),
        f(
            "topics",
            [f("name", STRING, required=True), f("partition_indexes", Array(INT32), required=True)],
            null="0+",
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("replicas", Array(INT32), required=True),
                        f("adding_replicas", Array(INT32)),
                        f("removing_replicas", Array(INT32)),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history={0: "initial version (flexible)"},
)
