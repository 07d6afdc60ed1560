"""Kafka messages of cluster and topic administration: ApiVersions, Metadata,
CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs, DescribeCluster (see
protocol/kafka/schema.py for the declaration form, protocol/schemas/cluster.py for the
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
    UUID,
    Array,
    Message,
    f,
    struct,
    versions,
)

_NO_OPERATIONS: Final = -(2**31)
"""Authorized-operations sentinel: not requested."""

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
