"""The Kafka messages this broker speaks, one declaration per API (see schema.py),
in the modules protocol/schemas/ has: data.py, cluster.py, replicas.py, producer.py.

Field names are Kafka's, in snake_case; ``key=`` gives the name the broker's handlers
use where it differs (protocol/schemas/ call every per-topic collection ``topics`` and
every per-partition one ``partitions``). Versions below a message's ``valid`` range are
not decoded; protocol/kafka/codec.py says which versions are advertised.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from minibroker.protocol.kafka.cluster import (
    ALTER_CONFIGS,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    METADATA,
)
from minibroker.protocol.kafka.data import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, PRODUCE
from minibroker.protocol.kafka.producer import INIT_PRODUCER_ID
from minibroker.protocol.kafka.replicas import (
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_REPLICA_LOG_DIRS,
    DESCRIBE_LOG_DIRS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from minibroker.protocol.kafka.schema import Message
from minibroker.protocol.kafka.security import SASL_AUTHENTICATE, SASL_HANDSHAKE

MESSAGES: Final[dict[int, Message]] = {
    m.api_key: m
    for m in (
        API_VERSIONS,
        METADATA,
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        OFFSET_FOR_LEADER_EPOCH,
        INIT_PRODUCER_ID,
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
        DESCRIBE_ACLS,
        CREATE_ACLS,
        DELETE_ACLS,
        SASL_HANDSHAKE,
        SASL_AUTHENTICATE,
    )
}
"""Every declared message by API key."""
