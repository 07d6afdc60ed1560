"""Controller-to-broker requests, served on the msgpack listener only: LeaderAndIsr,
StopReplica, UpdateMetadata, and ControlledShutdown (broker to controller).

Every controller request carries ``controller_id``, ``controller_epoch`` (a broker
obeys only the id and epoch of /controller and /controller_epoch, else
STALE_CONTROLLER_EPOCH) and ``broker_epoch`` (the recipient's registration as the
controller saw it: the czxid of its /brokers/ids znode; anything else, -1 included, is
STALE_BROKER_EPOCH, which fences requests meant for an earlier incarnation of a
restarted broker).

Simplified against Kafka: partition states are one flat list whose entries name their
``topic_name`` (Kafka's v0-1 "ungrouped" form), and a live broker is ``{id, host, port,
rack, kafka_host, kafka_port}``: its msgpack listener, and its Kafka-protocol listener
(``kafka_host`` None when it has none), instead of Kafka's endpoint lists.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    BOOL,
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

_CONTROLLER_HEADER: Final = (
    f("controller_id", INT32, required=True),
    f("controller_epoch", INT32, required=True),
    f("broker_epoch", INT64, default=-1),
)

_TOPIC_PARTITION: Final = (
    f("topic_name", STRING, required=True),
    f("partition_index", INT32, required=True),
)

_PARTITION_STATE: Final = (
    *_TOPIC_PARTITION,
    f("controller_epoch", INT32, required=True),
    f("leader", INT32, required=True),
    f("leader_epoch", INT32, required=True),
    f("isr", Array(INT32), required=True),
    f("zk_version", INT32, required=True),
    f("replicas", Array(INT32), required=True),
)

_BROKER: Final = struct(
    f("id", INT32, required=True),
    f("host", STRING, required=True),
    f("port", INT32, required=True),
    f("rack", STRING, body_null=True),
    f("kafka_host", STRING, body_null=True),
    f("kafka_port", INT32, default=-1),
    doc="A live broker: its id, the listener clients and replicas connect to, and its "
    "Kafka-protocol listener (kafka_host None when it has none).",
)

_TOPIC_IDS: Final = f(
    "topic_ids", [f("topic_name", STRING, required=True), f("topic_id", UUID, required=True)]
)
"""The ids (KIP-516) of the topics a request names, once per topic; a topic from before
ids is missing until the controller gave it one."""

_ERROR_MESSAGE: Final = f("error_message", STRING, body_null=True)
"""Why a request was refused as a whole (a stale controller), None otherwise."""

_PARTITION_ERRORS: Final = f("partition_errors", [*_TOPIC_PARTITION, f("error_code", INT16)])


LEADER_AND_ISR: Final = Message(
    4,
    "LeaderAndIsr",
    doc="""The controller tells a broker which of its replicas lead and which follow.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``controller_epoch`` (that wrote this state), ``leader``,
    ``leader_epoch``, ``isr``, ``zk_version`` (of the partition state znode, for the
    leader's conditional ISR updates), ``replicas`` (AR), ``adding_replicas`` and
    ``removing_replicas`` (an ongoing reassignment's RAR - OAR and OAR - RAR),
    ``is_new`` (just created: no data to look for elsewhere)}; ``live_leaders[]``
    (brokers leading any of those partitions, so followers know whom to fetch from);
    ``topic_ids[]`` of {topic_name, topic_id} (each partition directory's
    ``partition.metadata``).
    Response: ``error_code`` (STALE_CONTROLLER_EPOCH rejects the whole request) and
    ``partition_errors[]`` of {topic_name, partition_index, error_code}.
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(
        *_CONTROLLER_HEADER,
        f(
            "partition_states",
            [
                *_PARTITION_STATE,
                f("adding_replicas", Array(INT32)),
                f("removing_replicas", Array(INT32)),
                f("is_new", BOOL),
            ],
            required=True,
        ),
        f("live_leaders", Array(_BROKER)),
        _TOPIC_IDS,
    ),
    response=struct(f("error_code", INT16), _ERROR_MESSAGE, _PARTITION_ERRORS),
)

STOP_REPLICA: Final = Message(
    5,
    "StopReplica",
    doc="""Stop serving replicas (stop fetching, drop leadership), optionally deleting them.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``leader_epoch`` (fencing; -1 = don't check, -2 = the topic
    is being deleted), ``delete_partition`` (also remove the log: rename to
    ``-delete``)}.
    Response: ``error_code`` and ``partition_errors[]``.
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(
        *_CONTROLLER_HEADER,
        f(
            "partition_states",
            [
                *_TOPIC_PARTITION,
                f("leader_epoch", INT32, default=-1),
                f("delete_partition", BOOL),
            ],
            required=True,
        ),
    ),
    response=struct(f("error_code", INT16), _ERROR_MESSAGE, _PARTITION_ERRORS),
)

UPDATE_METADATA: Final = Message(
    6,
    "UpdateMetadata",
    doc="""The controller pushes cluster metadata into a broker's metadata cache.

    Request: controller header; ``partition_states[]`` of {``topic_name``,
    ``partition_index``, ``controller_epoch``, ``leader`` (-1 none, -2 topic being
    deleted), ``leader_epoch``, ``isr``, ``zk_version``, ``replicas``,
    ``offline_replicas``}; ``live_brokers[]`` of {id, host, port, rack}; ``topic_ids[]``
    of {topic_name, topic_id} (KIP-516, for Metadata v10+).
    Response: ``error_code``.
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(
        *_CONTROLLER_HEADER,
        f(
            "partition_states",
            [*_PARTITION_STATE, f("offline_replicas", Array(INT32))],
            required=True,
        ),
        f("live_brokers", Array(_BROKER), required=True),
        _TOPIC_IDS,
    ),
    response=struct(f("error_code", INT16), _ERROR_MESSAGE),
)

CONTROLLED_SHUTDOWN: Final = Message(
    7,
    "ControlledShutdown",
    doc="""A broker asks the controller to move leadership off it before it stops.

    Request: ``broker_id``, ``broker_epoch`` (-1 = don't check).
    Response: ``error_code`` and ``remaining_partitions[]`` of {topic_name,
    partition_index} it still leads (the broker retries while any remain).
    """,
    valid=versions(""),
    flexible=versions(""),
    request=struct(f("broker_id", INT32, required=True), f("broker_epoch", INT64, default=-1)),
    response=struct(
        f("error_code", INT16),
        f("remaining_partitions", list(_TOPIC_PARTITION)),
    ),
)
