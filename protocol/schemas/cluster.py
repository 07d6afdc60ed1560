"""Schemas of cluster and topic administration: ApiVersions, Metadata, DescribeCluster,
CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs.

Field names are Kafka's message JSON names in snake_case; DeleteTopics' per-topic
``responses`` is called ``topics`` as everywhere else here. Strings Kafka marks
nullable are ``Nullable(STRING)`` defaulting to nil.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    Api,
    Array,
    Field,
    Nullable,
    struct,
)

INITIAL = "initial version"

_THROTTLE = Field("throttle_time_ms", INT32, 0)
_ERROR_MESSAGE = Field("error_message", Nullable(STRING), None)

API_VERSIONS = Api(
    name="ApiVersions",
    doc="""Which API keys and versions the broker supports.

    Request: ``client_software_name``, ``client_software_version`` (informational).
    Response: ``error_code``, ``api_keys[]`` of {api_key, min_version, max_version}.
    """,
    request=struct(
        Field("client_software_name", STRING, ""),
        Field("client_software_version", STRING, ""),
    ),
    response=struct(
        Field("error_code", INT16, 0),
        Field(
            "api_keys",
            Array(
                struct(
                    Field("api_key", INT16),
                    Field("min_version", INT16),
                    Field("max_version", INT16),
                )
            ),
            [],
        ),
        _THROTTLE,
    ),
    history=(INITIAL,),
)

METADATA = Api(
    name="Metadata",
    doc="""Brokers, controller and partition leadership, from the broker's metadata cache.

    Request: ``topics`` (nil = all topics, else [{name}]), ``allow_auto_topic_creation``
    (Kafka v4+, default true as there: a broker with auto.create.topics.enable creates
    the unknown topics named; consumers and admin tools send false).
    Response: ``brokers[]`` of {node_id, host, port, rack}, ``cluster_id``,
    ``controller_id`` (-1 unknown), ``topics[]`` of {error_code, name, is_internal,
    partitions[] of {error_code, partition_index, leader_id (-1 none), leader_epoch,
    replica_nodes, isr_nodes, offline_replicas}}.
    """,
    request=struct(
        Field("topics", Nullable(Array(struct(Field("name", STRING)))), None),
        Field("allow_auto_topic_creation", BOOL, True),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "brokers",
            Array(
                struct(
                    Field("node_id", INT32),
                    Field("host", STRING),
                    Field("port", INT32),
                    Field("rack", Nullable(STRING), None),
                )
            ),
            [],
        ),
        Field("cluster_id", Nullable(STRING), None),
        Field("controller_id", INT32, -1),
        Field(
            "topics",
            Array(
                struct(
                    Field("error_code", INT16, 0),
                    Field("name", STRING),
                    Field("is_internal", BOOL, False),
                    Field(
                        "partitions",
                        Array(
                            struct(
                                Field("error_code", INT16, 0),
                                Field("partition_index", INT32),
                                Field("leader_id", INT32),
                                Field("leader_epoch", INT32, -1),
                                Field("replica_nodes", Array(INT32)),
                                Field("isr_nodes", Array(INT32)),
                                Field("offline_replicas", Array(INT32), []),
                            )
                        ),
                        [],
                    ),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

DESCRIBE_CLUSTER = Api(
    name="DescribeCluster",
    doc="""The cluster id, the active controller and the live brokers.

    Request: nothing (``include_cluster_authorized_operations`` is accepted, unused).
    Response: ``error_code``, ``error_message``, ``cluster_id``, ``controller_id``,
    ``brokers[]`` of {broker_id, host, port, rack}.
    """,
    request=struct(Field("include_cluster_authorized_operations", BOOL, False)),
    response=struct(
        _THROTTLE,
        Field("error_code", INT16, 0),
        _ERROR_MESSAGE,
        Field("cluster_id", STRING, ""),
        Field("controller_id", INT32, -1),
        Field(
            "brokers",
            Array(
                struct(
                    Field("broker_id", INT32),
                    Field("host", STRING),
                    Field("port", INT32),
                    Field("rack", Nullable(STRING), None),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

_CONFIG = struct(Field("name", STRING), Field("value", Nullable(STRING)))

CREATE_TOPICS = Api(
    name="CreateTopics",
    doc="""Create topics (any broker forwards the decision to ZooKeeper).

    Request: ``topics[]`` of {name, num_partitions and replication_factor (-1 = broker
    default; both -1 when ``assignments`` is given), assignments[] of {partition_index,
    broker_ids}, configs[] of {name, value}}, ``timeout_ms``, ``validate_only``.
    Response: ``topics[]`` of {name, error_code, error_message, num_partitions,
    replication_factor}.
    """,
    request=struct(
        Field(
            "topics",
            Array(
                struct(
                    Field("name", STRING),
                    Field("num_partitions", INT32, -1),
                    Field("replication_factor", INT16, -1),
                    Field(
                        "assignments",
                        Array(
                            struct(
                                Field("partition_index", INT32),
                                Field("broker_ids", Array(INT32)),
                            )
                        ),
                        [],
                    ),
                    Field("configs", Array(_CONFIG), []),
                )
            ),
        ),
        Field("timeout_ms", INT32, 60_000),
        Field("validate_only", BOOL, False),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "topics",
            Array(
                struct(
                    Field("name", STRING),
                    Field("error_code", INT16, 0),
                    _ERROR_MESSAGE,
                    Field("num_partitions", INT32, -1),
                    Field("replication_factor", INT16, -1),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

DELETE_TOPICS = Api(
    name="DeleteTopics",
    doc="""Mark topics for deletion (the controller deletes them in the background).

    Request: ``topic_names[]``, ``timeout_ms``.
    Response: ``topics[]`` of {name, error_code, error_message}.
    """,
    request=struct(Field("topic_names", Array(STRING)), Field("timeout_ms", INT32, 60_000)),
    response=struct(
        _THROTTLE,
        Field(
            "topics",
            Array(struct(Field("name", STRING), Field("error_code", INT16, 0), _ERROR_MESSAGE)),
            [],
        ),
    ),
    history=(INITIAL,),
)

RESOURCE_TOPIC = 2
"""``resource_type`` of a topic (Kafka's ConfigResource.Type)."""
RESOURCE_BROKER = 4
"""``resource_type`` of a broker; ``resource_name`` is its id, "" for cluster defaults."""

DESCRIBE_CONFIGS = Api(
    name="DescribeConfigs",
    doc="""Read topic or broker configuration.

    Request: ``resources[]`` of {resource_type (2 topic, 4 broker), resource_name,
    configuration_keys (nil = all)}, ``include_synonyms``, ``include_documentation``.
    Response: ``results[]`` of {error_code, error_message, resource_type, resource_name,
    configs[] of {name, value, read_only, config_source (Kafka's: 1 topic, 4 static
    broker, 5 default ...), is_sensitive, documentation}}.
    """,
    request=struct(
        Field(
            "resources",
            Array(
                struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("configuration_keys", Nullable(Array(STRING)), None),
                )
            ),
        ),
        Field("include_synonyms", BOOL, False),
        Field("include_documentation", BOOL, False),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "results",
            Array(
                struct(
                    Field("error_code", INT16, 0),
                    _ERROR_MESSAGE,
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field(
                        "configs",
                        Array(
                            struct(
                                Field("name", STRING),
                                Field("value", Nullable(STRING)),
                                Field("read_only", BOOL, False),
                                Field("config_source", INT8, -1),
                                Field("is_sensitive", BOOL, False),
                                Field("documentation", Nullable(STRING), None),
                            )
                        ),
                        [],
                    ),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)

ALTER_CONFIGS = Api(
    name="AlterConfigs",
    doc="""Replace the dynamic configuration of topics or brokers (whole set per resource,
    as Kafka's non-incremental AlterConfigs; used for topic overrides and replication
    throttles).

    Request: ``resources[]`` of {resource_type, resource_name, configs[] of {name,
    value}}, ``validate_only``.
    Response: ``responses[]`` of {error_code, error_message, resource_type,
    resource_name}.
    """,
    request=struct(
        Field(
            "resources",
            Array(
                struct(
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                    Field("configs", Array(_CONFIG)),
                )
            ),
        ),
        Field("validate_only", BOOL, False),
    ),
    response=struct(
        _THROTTLE,
        Field(
            "responses",
            Array(
                struct(
                    Field("error_code", INT16, 0),
                    _ERROR_MESSAGE,
                    Field("resource_type", INT8),
                    Field("resource_name", STRING),
                )
            ),
            [],
        ),
    ),
    history=(INITIAL,),
)
