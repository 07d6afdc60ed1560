"""Schemas of controller-to-broker requests: LeaderAndIsr, StopReplica, UpdateMetadata,
and ControlledShutdown (broker to controller).

Every controller request carries ``controller_id``, ``controller_epoch`` (a broker
obeys only the id and epoch of /controller and /controller_epoch, else
STALE_CONTROLLER_EPOCH) and ``broker_epoch`` (the recipient's registration as the
controller saw it: the czxid of its /brokers/ids znode; anything else, -1 included, is
STALE_BROKER_EPOCH, which fences requests meant for an earlier incarnation of a
restarted broker).

Simplified against Kafka: partition states are one flat list whose entries name their
``topic_name`` (Kafka's v0-1 "ungrouped" form), and brokers are ``{id, host, port,
rack}`` with one listener instead of Kafka's endpoint lists.
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    BOOL,
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

BROKER = struct(
    Field("id", INT32),
    Field("host", STRING),
    Field("port", INT32),
    Field("rack", Nullable(STRING), None),
    Field("kafka_host", Nullable(STRING), None),
    Field("kafka_port", INT32, -1),
    doc="A live broker: its id, the listener clients and replicas connect to, and its "
    "Kafka-protocol listener (kafka_host nil when it has none).",
)

_CONTROLLER_HEADER = (
    Field("controller_id", INT32),
    Field("controller_epoch", INT32),
    Field("broker_epoch", INT64, -1),
)

_TOPIC_PARTITION = (Field("topic_name", STRING), Field("partition_index", INT32))

_PARTITION_ERRORS = Field(
    "partition_errors",
    Array(struct(*_TOPIC_PARTITION, Field("error_code", INT16, 0))),
    [],
)

LEADER_AND_ISR = Api(
    name="LeaderAndIsr",
    doc="""The controller tells a broker which of its replicas lead and which follow.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``controller_epoch`` (that wrote this state), ``leader``,
    ``leader_epoch``, ``isr``, ``zk_version`` (of the partition state znode, for the
    leader's conditional ISR updates), ``replicas`` (AR), ``adding_replicas`` and
    ``removing_replicas`` (an ongoing reassignment's RAR - OAR and OAR - RAR),
    ``is_new`` (just created: no data to look for elsewhere)}; ``live_leaders[]``
    (brokers leading any of those partitions, so followers know whom to fetch from).
    Response: ``error_code`` (STALE_CONTROLLER_EPOCH rejects the whole request) and
    ``partition_errors[]`` of {topic_name, partition_index, error_code}.
    """,
    request=struct(
        *_CONTROLLER_HEADER,
        Field(
            "partition_states",
            Array(
                struct(
                    *_TOPIC_PARTITION,
                    Field("controller_epoch", INT32),
                    Field("leader", INT32),
                    Field("leader_epoch", INT32),
                    Field("isr", Array(INT32)),
                    Field("zk_version", INT32),
                    Field("replicas", Array(INT32)),
                    Field("adding_replicas", Array(INT32), []),
                    Field("removing_replicas", Array(INT32), []),
                    Field("is_new", BOOL, False),
                )
            ),
        ),
        Field("live_leaders", Array(BROKER), []),
    ),
    response=struct(Field("error_code", INT16, 0), _PARTITION_ERRORS),
    history=(INITIAL,),
)

STOP_REPLICA = Api(
    name="StopReplica",
    doc="""Stop serving replicas (stop fetching, drop leadership), optionally deleting them.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``leader_epoch`` (fencing; -1 = don't check, -2 = the topic
    is being deleted), ``delete_partition`` (also remove the log: rename to
    ``-delete``)}.
    Response: ``error_code`` and ``partition_errors[]``.
    """,
    request=struct(
        *_CONTROLLER_HEADER,
        Field(
            "partition_states",
            Array(
                struct(
                    *_TOPIC_PARTITION,
                    Field("leader_epoch", INT32, -1),
                    Field("delete_partition", BOOL, False),
                )
            ),
        ),
    ),
    response=struct(Field("error_code", INT16, 0), _PARTITION_ERRORS),
    history=(INITIAL,),
)

UPDATE_METADATA = Api(
    name="UpdateMetadata",
    doc="""The controller pushes cluster metadata into a broker's metadata cache.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``controller_epoch``, ``leader`` (-1 none, -2 topic being
    deleted), ``leader_epoch``, ``isr``, ``zk_version``, ``replicas``,
    ``offline_replicas``}; ``live_brokers[]`` of {id, host, port, rack}.
    Response: ``error_code``.
    """,
    request=struct(
        *_CONTROLLER_HEADER,
        Field(
            "partition_states",
            Array(
                struct(
                    *_TOPIC_PARTITION,
                    Field("controller_epoch", INT32),
                    Field("leader", INT32),
                    Field("leader_epoch", INT32),
                    Field("isr", Array(INT32)),
                    Field("zk_version", INT32),
                    Field("replicas", Array(INT32)),
                    Field("offline_replicas", Array(INT32), []),
                )
            ),
        ),
        Field("live_brokers", Array(BROKER)),
    ),
    response=struct(Field("error_code", INT16, 0)),
    history=(INITIAL,),
)

CONTROLLED_SHUTDOWN = Api(
    name="ControlledShutdown",
    doc="""A broker asks the controller to move leadership off it before it stops.

    Request: ``broker_id``, ``broker_epoch`` (-1 = don't check).
    Response: ``error_code`` and ``remaining_partitions[]`` of {topic_name,
    partition_index} it still leads (the broker retries while any remain).
    """,
    request=struct(Field("broker_id", INT32), Field("broker_epoch", INT64, -1)),
    response=struct(
        Field("error_code", INT16, 0),
        Field("remaining_partitions", Array(struct(*_TOPIC_PARTITION)), []),
    ),
    history=(INITIAL,),
)
