"""Every API this broker serves, declared once (form.py says how): the Kafka listener's
codec, the msgpack schemas and the handlers' typed bodies all come from these."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from minibroker.protocol.messages.admin import (
    ALTER_CLIENT_QUOTAS,
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    INCREMENTAL_ALTER_CONFIGS,
)
from minibroker.protocol.messages.cluster import (
    ALTER_CONFIGS,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    METADATA,
)
from minibroker.protocol.messages.control import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
)
from minibroker.protocol.messages.data import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, PRODUCE
from minibroker.protocol.messages.form import Message
from minibroker.protocol.messages.groups import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    SYNC_GROUP,
)
from minibroker.protocol.messages.offsets import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH
from minibroker.protocol.messages.partitions import CREATE_PARTITIONS, DELETE_RECORDS
from minibroker.protocol.messages.producer import INIT_PRODUCER_ID
from minibroker.protocol.messages.replicas import (
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_REPLICA_LOG_DIRS,
    DESCRIBE_LOG_DIRS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from minibroker.protocol.messages.security import (
    BROKER_CHALLENGE,
    BROKER_PROOF,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from minibroker.protocol.messages.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
)

ALL_MESSAGES: Final[dict[int, Message]] = {
    m.api_key: m
    for m in (
        API_VERSIONS,
        METADATA,
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        OFFSET_FOR_LEADER_EPOCH,
        LEADER_AND_ISR,
        STOP_REPLICA,
        UPDATE_METADATA,
        CONTROLLED_SHUTDOWN,
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        WRITE_TXN_MARKERS,
        TXN_OFFSET_COMMIT,
        DESCRIBE_PRODUCERS,
        DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS,
        FIND_COORDINATOR,
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        DELETE_GROUPS,
        OFFSET_DELETE,
        CREATE_TOPICS,
        DELETE_TOPICS,
        CREATE_PARTITIONS,
        DELETE_RECORDS,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS,
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        ALTER_USER_SCRAM_CREDENTIALS,
        DESCRIBE_CLIENT_QUOTAS,
        ALTER_CLIENT_QUOTAS,
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
        BROKER_CHALLENGE,
        BROKER_PROOF,
    )
}
"""Every declared message by API key."""
