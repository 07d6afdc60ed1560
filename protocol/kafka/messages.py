"""The Kafka messages this broker speaks, one declaration per API (see schema.py).

Field names are Kafka's, in snake_case; ``key=`` gives the name the broker's handlers
use where it differs (protocol/schemas/ call every per-topic collection ``topics`` and
every per-partition one ``partitions``). Versions below a message's ``valid`` range are
not decoded; protocol/kafka/codec.py says which versions are advertised.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Array,
    Message,
    f,
    struct,
    versions,
)

_NO_OPERATIONS: Final = -(2**31)
"""Authorized-operations sentinel: not requested."""

_LEADER_AND_EPOCH = struct(
    f("leader_id", INT32, default=-1),
    f("leader_epoch", INT32, default=-1),
)

API_VERSIONS: Final = Message(
    18,
    "ApiVersions",
    valid=versions("0-3"),
    flexible=versions("3+"),
    request=struct(
        f("client_software_name", STRING, "3+"),
        f("client_software_version", STRING, "3+"),
    ),
    response=struct(
        f("error_code", INT16),
        f(
            "api_keys",
            [f("api_key", INT16), f("min_version", INT16), f("max_version", INT16)],
        ),
        f("throttle_time_ms", INT32, "1+"),
        f(
            "supported_features",
            [f("name", STRING), f("min_version", INT16), f("max_version", INT16)],
            "3+",
            tag=0,
        ),
        f("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
        f(
            "finalized_features",
            [f("name", STRING), f("max_version_level", INT16), f("min_version_level", INT16)],
            "3+",
            tag=2,
        ),
        f("zk_migration_ready", BOOL, "3+", tag=3),
    ),
    history={
        1: "throttle_time_ms",
        2: "unchanged (throttling after the response)",
        3: "flexible; client software name and version; feature tags",
    },
)

METADATA: Final = Message(
    3,
    "Metadata",
    valid=versions("0-9"),
    flexible=versions("9+"),
    request=struct(
        f("topics", [f("topic_id", UUID, "10+"), f("name", STRING)], null="1+"),
        f("allow_auto_topic_creation", BOOL, "4+", default=True),
        f("include_cluster_authorized_operations", BOOL, "8-10"),
        f("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "brokers",
            [
                f("node_id", INT32),
                f("host", STRING),
                f("port", INT32),
                f("rack", STRING, "1+", null="1+"),
            ],
        ),
        f("cluster_id", STRING, "2+", null="2+"),
        f("controller_id", INT32, "1+", default=-1),
        f(
            "topics",
            [
                f("error_code", INT16),
                f("name", STRING),
                f("topic_id", UUID, "10+"),
                f("is_internal", BOOL, "1+"),
                f(
                    "partitions",
                    [
                        f("error_code", INT16),
                        f("partition_index", INT32),
                        f("leader_id", INT32),
                        f("leader_epoch", INT32, "7+", default=-1),
                        f("replica_nodes", Array(INT32)),
                        f("isr_nodes", Array(INT32)),
                        f("offline_replicas", Array(INT32), "5+"),
                    ],
                ),
                f("topic_authorized_operations", INT32, "8+", default=_NO_OPERATIONS),
            ],
        ),
        f("cluster_authorized_operations", INT32, "8-10", default=_NO_OPERATIONS),
    ),
    history={
        1: "null topics = all (v0: empty = all); rack, controller, is_internal",
        2: "cluster_id",
        3: "throttle_time_ms",
        4: "allow_auto_topic_creation",
        5: "offline_replicas",
        6: "unchanged",
        7: "leader_epoch",
        8: "authorized operations",
        9: "flexible",
    },
)

PRODUCE: Final = Message(
    0,
    "Produce",
    valid=versions("0-9"),
    flexible=versions("9+"),
    request=struct(
        f("transactional_id", STRING, "3+", null="3+"),
        f("acks", INT16),
        f("timeout_ms", INT32),
        f(
            "topic_data",
            [
                f("name", STRING),
                f(
                    "partition_data",
                    [f("index", INT32), f("records", RECORDS, null="0+")],
                    key="partitions",
                ),
            ],
            key="topics",
        ),
    ),
    response=struct(
        f(
            "responses",
            [
                f("name", STRING),
                f(
                    "partition_responses",
                    [
                        f("index", INT32),
                        f("error_code", INT16),
                        f("base_offset", INT64),
                        f("log_append_time_ms", INT64, "2+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f(
                            "record_errors",
                            [
                                f("batch_index", INT32),
                                f("batch_index_error_message", STRING, null="8+"),
                            ],
                            "8+",
                        ),
                        f("error_message", STRING, "8+", null="8+"),
                        f("current_leader", _LEADER_AND_EPOCH, "10+", tag=0),
                    ],
                    key="partitions",
                ),
            ],
            key="topics",
        ),
        f("throttle_time_ms", INT32, "1+"),
    ),
    history={
        1: "throttle_time_ms",
        2: "log_append_time_ms",
        3: "transactional_id; RecordBatch v2 only",
        4: "KAFKA_STORAGE_ERROR may be returned",
        5: "log_start_offset",
        6: "unchanged",
        7: "ZStandard compression allowed",
        8: "record_errors, error_message",
        9: "flexible",
    },
)

FETCH: Final = Message(
    1,
    "Fetch",
    valid=versions("4-12"),
    flexible=versions("12+"),
    request=struct(
        f("cluster_id", STRING, "12+", null="12+", tag=0),
        f("replica_id", INT32, default=-1),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        f("isolation_level", INT8, "4+"),
        f("session_id", INT32, "7+"),
        f("session_epoch", INT32, "7+", default=-1),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "9+", default=-1),
                        f("fetch_offset", INT64),
                        f("last_fetched_epoch", INT32, "12+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f("partition_max_bytes", INT32),
                    ],
                ),
            ],
        ),
        f("forgotten_topics_data", [f("topic", STRING), f("partitions", Array(INT32))], "7+"),
        f("rack_id", STRING, "11+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "7+"),
        f("session_id", INT32, "7+"),
        f(
            "responses",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("high_watermark", INT64),
                        f("last_stable_offset", INT64, "4+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f(
                            "diverging_epoch",
                            struct(
                                f("epoch", INT32, default=-1), f("end_offset", INT64, default=-1)
                            ),
                            "12+",
                            tag=0,
                        ),
                        f("current_leader", _LEADER_AND_EPOCH, "12+", tag=1),
                        f(
                            "snapshot_id",
                            struct(
                                f("end_offset", INT64, default=-1), f("epoch", INT32, default=-1)
                            ),
                            "12+",
                            tag=2,
                        ),
                        f(
                            "aborted_transactions",
                            [f("producer_id", INT64), f("first_offset", INT64)],
                            "4+",
                            null="4+",
                        ),
                        f("preferred_read_replica", INT32, "11+", default=-1),
                        f("records", RECORDS, null="0+"),
                    ],
                ),
            ],
            key="topics",
        ),
    ),
    history={
        4: "isolation_level, last_stable_offset, aborted_transactions",
        5: "log_start_offset",
        6: "KAFKA_STORAGE_ERROR may be returned",
        7: "fetch sessions (KIP-227)",
        8: "unchanged",
        9: "current_leader_epoch (fencing, KIP-320)",
        10: "ZStandard compression allowed",
        11: "rack_id, preferred_read_replica (KIP-392)",
        12: "flexible; last_fetched_epoch; diverging_epoch, current_leader",
    },
)

LIST_OFFSETS: Final = Message(
    2,
    "ListOffsets",
    valid=versions("1-6"),
    flexible=versions("6+"),
    request=struct(
        f("replica_id", INT32),
        f("isolation_level", INT8, "2+"),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("current_leader_epoch", INT32, "4+", default=-1),
                        f("timestamp", INT64),
                    ],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("timestamp", INT64, default=-1),
                        f("offset", INT64, default=-1),
                        f("leader_epoch", INT32, "4+", default=-1),
                    ],
                ),
            ],
        ),
    ),
    history={
        1: "one offset per partition (timestamp, offset)",
        2: "isolation_level, throttle_time_ms",
        3: "unchanged",
        4: "current_leader_epoch, leader_epoch",
        5: "unchanged",
        6: "flexible",
    },
)

OFFSET_FOR_LEADER_EPOCH: Final = Message(
    23,
    "OffsetForLeaderEpoch",
    valid=versions("2-4"),
    flexible=versions("4+"),
    request=struct(
        f("replica_id", INT32, "3+", default=-2),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "2+", default=-1),
                        f("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("error_code", INT16),
                        f("partition", INT32),
                        f("leader_epoch", INT32, "1+", default=-1),
                        f("end_offset", INT64, default=-1),
                    ],
                ),
            ],
        ),
    ),
    history={
        2: "current_leader_epoch, throttle_time_ms",
        3: "replica_id",
        4: "flexible",
    },
)

_CONFIG_ENTRY = [f("name", STRING), f("value", STRING, null="0+")]

CREATE_TOPICS: Final = Message(
    19,
    "CreateTopics",
    valid=versions("2-7"),
    flexible=versions("5+"),
    request=struct(
        f(
            "topics",
            [
                f("name", STRING),
                f("num_partitions", INT32),
                f("replication_factor", INT16),
                f("assignments", [f("partition_index", INT32), f("broker_ids", Array(INT32))]),
                f("configs", _CONFIG_ENTRY),
            ],
        ),
        f("timeout_ms", INT32, default=60_000),
        f("validate_only", BOOL, "1+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("name", STRING),
                f("topic_id", UUID, "7+"),
                f("error_code", INT16),
                f("error_message", STRING, "1+", null="0+"),
                f("topic_config_error_code", INT16, "5+", tag=0),
                f("num_partitions", INT32, "5+", default=-1),
                f("replication_factor", INT16, "5+", default=-1),
                f(
                    "configs",
                    [
                        f("name", STRING),
                        f("value", STRING, null="5+"),
                        f("read_only", BOOL),
                        f("config_source", INT8, default=-1),
                        f("is_sensitive", BOOL),
                    ],
                    "5+",
                    null="5+",
                ),
            ],
        ),
    ),
    history={
        2: "throttle_time_ms, error_message, validate_only",
        3: "unchanged",
        4: "replication_factor / num_partitions -1 = broker default",
        5: "flexible; the created topic's configs",
        6: "unchanged",
        7: "topic_id",
    },
)

DELETE_TOPICS: Final = Message(
    20,
    "DeleteTopics",
    valid=versions("1-5"),
    flexible=versions("4+"),
    request=struct(f("topic_names", Array(STRING)), f("timeout_ms", INT32)),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f(
            "responses",
            [
                f("name", STRING),
                f("error_code", INT16),
                f("error_message", STRING, "5+", null="5+"),
            ],
            key="topics",
        ),
    ),
    history={
        1: "throttle_time_ms",
        2: "unchanged",
        3: "unchanged",
        4: "flexible",
        5: "error_message",
    },
)

DESCRIBE_CONFIGS: Final = Message(
    32,
    "DescribeConfigs",
    valid=versions("1-4"),
    flexible=versions("4+"),
    request=struct(
        f(
            "resources",
            [
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("configuration_keys", Array(STRING), null="0+"),
            ],
        ),
        f("include_synonyms", BOOL, "1+"),
        f("include_documentation", BOOL, "3+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "results",
            [
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f("resource_type", INT8),
                f("resource_name", STRING),
                f(
                    "configs",
                    [
                        f("name", STRING),
                        f("value", STRING, null="0+"),
                        f("read_only", BOOL),
                        f("config_source", INT8, "1+", default=-1),
                        f("is_sensitive", BOOL),
                        f(
                            "synonyms",
                            [f("name", STRING), f("value", STRING, null="0+"), f("source", INT8)],
                            "1+",
                        ),
                        f("config_type", INT8, "3+"),
                        f("documentation", STRING, "3+", null="0+"),
                    ],
                ),
            ],
        ),
    ),
    history={
        1: "include_synonyms; config_source replaces is_default",
        2: "unchanged",
        3: "include_documentation, config_type",
        4: "flexible",
    },
)

ALTER_CONFIGS: Final = Message(
    33,
    "AlterConfigs",
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f(
            "resources",
            [
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("configs", _CONFIG_ENTRY),
            ],
        ),
        f("validate_only", BOOL),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "responses",
            [
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
                f("resource_type", INT8),
                f("resource_name", STRING),
            ],
        ),
    ),
    history={1: "unchanged (throttling after the response)", 2: "flexible"},
)

DESCRIBE_CLUSTER: Final = Message(
    60,
    "DescribeCluster",
    valid=versions("0-1"),
    flexible=versions("0+"),
    request=struct(
        f("include_cluster_authorized_operations", BOOL),
        f("endpoint_type", INT8, "1+", default=1),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("endpoint_type", INT8, "1+", default=1),
        f("cluster_id", STRING),
        f("controller_id", INT32, default=-1),
        f(
            "brokers",
            [
                f("broker_id", INT32),
                f("host", STRING),
                f("port", INT32),
                f("rack", STRING, null="0+"),
            ],
        ),
        f("cluster_authorized_operations", INT32, default=_NO_OPERATIONS),
    ),
    history={0: "initial version (flexible)", 1: "endpoint_type"},
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

MESSAGES: Final[dict[int, Message]] = {
    m.api_key: m
    for m in (
        API_VERSIONS,
        METADATA,
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        OFFSET_FOR_LEADER_EPOCH,
        CREATE_TOPICS,
        DELETE_TOPICS,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        DESCRIBE_CLUSTER,
        DESCRIBE_LOG_DIRS,
        ALTER_REPLICA_LOG_DIRS,
        ELECT_LEADERS,
        ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS,
    )
}
"""Every declared message by API key."""
