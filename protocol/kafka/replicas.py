"""Kafka messages of replica placement: DescribeLogDirs, AlterReplicaLogDirs,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments (see
protocol/kafka/schema.py for the declaration form, protocol/schemas/replicas.py for the
bodies the handlers read)."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    BOOL,
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

_TOPIC_PARTITION_LIST = [f("topic", STRING), f("partitions", Array(INT32))]

DESCRIBE_LOG_DIRS: Final = Message(
    35,
    "DescribeLogDirs",
    valid=versions("1-4"),
    flexible=versions("2+"),
    request=struct(f("topics", _TOPIC_PARTITION_LIST, null="0+")),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "3+"),
        f(
            "results",
            [
                f("error_code", INT16),
                f("log_dir", STRING),
                f(
                    "topics",
                    [
                        f("name", STRING),
                        f(
                            "partitions",
                            [
                                f("partition_index", INT32),
                                f("partition_size", INT64),
                                f("offset_lag", INT64),
                                f("is_future_key", BOOL, key="is_future"),
                            ],
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

ALTER_REPLICA_LOG_DIRS: Final = Message(
    34,
    "AlterReplicaLogDirs",
    valid=versions("1-2"),
    flexible=versions("2+"),
    request=struct(
        f(
            "dirs",
            [
                f("path", STRING),
                f("topics", [f("name", STRING), f("partitions", Array(INT32))]),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "results",
            [
                f("topic_name", STRING),
                f("partitions", [f("partition_index", INT32), f("error_code", INT16)]),
            ],
        ),
    ),
    history={1: "unchanged (throttling after the response)", 2: "flexible"},
)

ELECT_LEADERS: Final = Message(
    43,
    "ElectLeaders",
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f("election_type", INT8, "1+"),
        f("topic_partitions", _TOPIC_PARTITION_LIST, null="0+"),
        f("timeout_ms", INT32, default=60_000),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "1+"),
        f(
            "replica_election_results",
            [
                f("topic", STRING),
                f(
                    "partition_result",
                    [
                        f("partition_id", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                    ],
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
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f("timeout_ms", INT32, default=60_000),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [f("partition_index", INT32), f("replicas", Array(INT32), null="0+")],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f(
            "responses",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                    ],
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
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f("timeout_ms", INT32, default=60_000),
        f(
            "topics",
            [f("name", STRING), f("partition_indexes", Array(INT32))],
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
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("replicas", Array(INT32)),
                        f("adding_replicas", Array(INT32)),
                        f("removing_replicas", Array(INT32)),
                    ],
                ),
            ],
        ),
    ),
    history={0: "initial version (flexible)"},
)
