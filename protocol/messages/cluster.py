"""Cluster and topic administration: ApiVersions, Metadata, DescribeCluster,
CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs.

DeleteTopics' per-topic ``responses`` is ``topics`` in the bodies handlers read, as
everywhere else. Strings Kafka marks nullable default to None.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    NO_AUTHORIZED_OPERATIONS,
    STRING,
    UUID,
    Array,
    Message,
    f,
    struct,
    versions,
)

RESOURCE_TOPIC: Final = 2
"""``resource_type`` of a topic (Kafka's ConfigResource.Type)."""
RESOURCE_BROKER: Final = 4
"""``resource_type`` of a broker; ``resource_name`` is its id, "" for cluster defaults."""


METADATA: Final = Message(
    3,
    "Metadata",
    doc="""Brokers, controller and partition leadership, from the broker's metadata cache.

    Request: ``topics`` (nil = all topics, else [{name, topic_id}]: v10+ may name a
    topic by its id alone, name nil), ``allow_auto_topic_creation``
    (Kafka v4+, default true as there: a broker with auto.create.topics.enable creates
    the unknown topics named; consumers and admin tools send false).
    Response: ``brokers[]`` of {node_id, host, port, rack, kafka_host, kafka_port (the
    broker's Kafka-protocol listener, only in msgpack bodies; nil or absent if none;
    the Kafka listener advertises it as host/port)}, ``cluster_id``,
    ``controller_id`` (-1 unknown), ``topics[]`` of {error_code, name, topic_id (v10+,
    all zero if none), is_internal,
    partitions[] of {error_code, partition_index, leader_id (-1 none), leader_epoch,
    replica_nodes, isr_nodes, offline_replicas}}.
    """,
    valid=versions("0-12"),
    flexible=versions("9+"),
    request=struct(
        f(
            "topics",
            [f("topic_id", UUID, "10+"), f("name", STRING, null="10+", required=True)],
            null="1+",
        ),
        f("allow_auto_topic_creation", BOOL, "4+", default=True),
        f("include_cluster_authorized_operations", BOOL, "8-10"),
        f("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "brokers",
            [
                f("node_id", INT32, required=True),
                f("host", STRING, required=True),
                f("port", INT32, required=True),
                f("rack", STRING, "1+", null="1+"),
                f("kafka_host", STRING, "", body_null=True),
                f("kafka_port", INT32, "", body_null=True),
            ],
        ),
        f("cluster_id", STRING, "2+", null="2+"),
        f("controller_id", INT32, "1+", default=-1),
        f(
            "topics",
            [
                f("error_code", INT16),
                f("name", STRING, null="12+", required=True),
                f("topic_id", UUID, "10+"),
                f("is_internal", BOOL, "1+"),
                f(
                    "partitions",
                    [
                        f("error_code", INT16),
                        f("partition_index", INT32, required=True),
                        f("leader_id", INT32, required=True),
                        f("leader_epoch", INT32, "7+", default=-1),
                        f("replica_nodes", Array(INT32), required=True),
                        f("isr_nodes", Array(INT32), required=True),
                        f("offline_replicas", Array(INT32), "5+"),
                    ],
                ),
                f("topic_authorized_operations", INT32, "8+", default=NO_AUTHORIZED_OPERATIONS),
            ],
        ),
        f("cluster_authorized_operations", INT32, "8-10", default=NO_AUTHORIZED_OPERATIONS),
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
        10: "topic ids (KIP-516); a requested topic may be named by id, name null",
        11: "no cluster authorized operations (DescribeCluster has them)",
        12: "a topic's name may be null in the answer (unknown id)",
    },
)

API_VERSIONS: Final = Message(
    18,
    "ApiVersions",
    doc="""Which API keys and versions the broker supports.

    Request: ``client_software_name``, ``client_software_version`` (informational).
    Response: ``error_code``, ``api_keys[]`` of {api_key, min_version, max_version}.
    """,
    valid=versions("0-3"),
    flexible=versions("3+"),
    request=struct(
        f("client_software_name", STRING, "3+"), f("client_software_version", STRING, "3+")
    ),
    response=struct(
        f("error_code", INT16),
        f(
            "api_keys",
            [
                f("api_key", INT16, required=True),
                f("min_version", INT16, required=True),
                f("max_version", INT16, required=True),
            ],
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

CREATE_TOPICS: Final = Message(
    19,
    "CreateTopics",
    doc="""Create topics (any broker forwards the decision to ZooKeeper).

    Request: ``topics[]`` of {name, num_partitions and replication_factor (-1 = broker
    default; both -1 when ``assignments`` is given), assignments[] of {partition_index,
    broker_ids}, configs[] of {name, value}}, ``timeout_ms``, ``validate_only``.
    Response: ``topics[]`` of {name, error_code, error_message, num_partitions,
    replication_factor}.
    """,
    valid=versions("2-7"),
    flexible=versions("5+"),
    request=struct(
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f("num_partitions", INT32, default=-1),
                f("replication_factor", INT16, default=-1),
                f(
                    "assignments",
                    [
                        f("partition_index", INT32, required=True),
                        f("broker_ids", Array(INT32), required=True),
                    ],
                ),
                f(
                    "configs",
                    [
                        f("name", STRING, required=True),
                        f("value", STRING, null="0+", required=True),
                    ],
                ),
            ],
            required=True,
        ),
        f("timeout_ms", INT32, default=60000),
        f("validate_only", BOOL, "1+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
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
    doc="""Mark topics for deletion (the controller deletes them in the background).

    Request: ``topic_names[]`` (v1-5), ``topics[]`` of {name (nil: by id), topic_id}
    (v6+, KIP-516), ``timeout_ms``; a msgpack body may carry both.
    Response: ``topics[]`` of {name (nil for an unknown id), topic_id, error_code,
    error_message}.
    """,
    valid=versions("1-6"),
    flexible=versions("4+"),
    request=struct(
        f("topic_names", Array(STRING), "0-5", required=True),
        f(
            "topics",
            [f("name", STRING, null="6+", required=True), f("topic_id", UUID, required=True)],
            "6+",
        ),
        f("timeout_ms", INT32, default=60000),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f(
            "responses",
            [
                f("name", STRING, null="6+", required=True),
                f("topic_id", UUID, "6+"),
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
        6: "topics named by name or id (KIP-516)",
    },
)

DESCRIBE_CONFIGS: Final = Message(
    32,
    "DescribeConfigs",
    doc="""Read topic or broker configuration.

    Request: ``resources[]`` of {resource_type (2 topic, 4 broker), resource_name,
    configuration_keys (nil = all)}, ``include_synonyms``, ``include_documentation``.
    Response: ``results[]`` of {error_code, error_message, resource_type, resource_name,
    configs[] of {name, value, read_only, config_source (Kafka's: 1 topic, 4 static
    broker, 5 default ...), is_sensitive, documentation}}.
    """,
    valid=versions("1-4"),
    flexible=versions("4+"),
    request=struct(
        f(
            "resources",
            [
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f("configuration_keys", Array(STRING), null="0+"),
            ],
            required=True,
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
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f(
                    "configs",
                    [
                        f("name", STRING, required=True),
                        f("value", STRING, null="0+", required=True),
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
    doc="""Replace the dynamic configuration of topics or brokers (whole set per resource,
    as Kafka's non-incremental AlterConfigs; used for topic overrides and replication
    throttles).

    Request: ``resources[]`` of {resource_type, resource_name, configs[] of {name,
    value}}, ``validate_only``.
    Response: ``responses[]`` of {error_code, error_message, resource_type,
    resource_name}.
    """,
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f(
            "resources",
            [
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
                f(
                    "configs",
                    [
                        f("name", STRING, required=True),
                        f("value", STRING, null="0+", required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
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
                f("resource_type", INT8, required=True),
                f("resource_name", STRING, required=True),
            ],
        ),
    ),
    history={1: "unchanged (throttling after the response)", 2: "flexible"},
)

DESCRIBE_CLUSTER: Final = Message(
    60,
    "DescribeCluster",
    doc="""The cluster id, the active controller and the live brokers.

    Request: nothing (``include_cluster_authorized_operations`` is accepted, unused).
    Response: ``error_code``, ``error_message``, ``cluster_id``, ``controller_id``,
    ``brokers[]`` of {broker_id, host, port, rack, kafka_host, kafka_port (as in Metadata)}.
    """,
    valid=versions("0-1"),
    flexible=versions("0+"),
    request=struct(
        f("include_cluster_authorized_operations", BOOL), f("endpoint_type", INT8, "1+", default=1)
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
                f("broker_id", INT32, required=True),
                f("host", STRING, required=True),
                f("port", INT32, required=True),
                f("rack", STRING, null="0+"),
                f("kafka_host", STRING, "", body_null=True),
                f("kafka_port", INT32, "", body_null=True),
            ],
        ),
        f("cluster_authorized_operations", INT32, default=NO_AUTHORIZED_OPERATIONS),
    ),
    history={0: "initial version (flexible)", 1: "endpoint_type"},
)
