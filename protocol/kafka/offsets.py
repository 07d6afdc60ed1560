"""Kafka messages of committed offsets: OffsetCommit, OffsetFetch, OffsetDelete (see
protocol/kafka/schema.py for the declaration form, protocol/kafka/groups.py for the
membership messages).

Field names are Kafka's, in snake_case, as the coordinator's handlers read them, except
OffsetCommit's ``generation_id_or_member_epoch`` (so named since consumer-protocol
members have epochs), which classic-group handlers read as ``generation_id``.
OffsetFetch before v8 asks for one group at top level (``group_id``, ``topics``) and
answers at top level; v8 batches groups (``groups``). Both are declared as they are on
the wire; protocol/kafka/reshape.py makes the handlers see only v8's shape.

``committed_metadata`` (OffsetCommit) and ``metadata`` (OffsetFetch) are the same
client-chosen string, stored with the offset and handed back.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    BOOL,
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

OFFSET_COMMIT: Final = Message(
    8,
    "OffsetCommit",
    valid=versions("2-8"),
    flexible=versions("8+"),
    request=struct(
        f("group_id", STRING),
        f("generation_id_or_member_epoch", INT32, "1+", default=-1, key="generation_id"),
        f("member_id", STRING, "1+"),
        f("group_instance_id", STRING, "7+", null="7+"),
        f("retention_time_ms", INT64, "2-4", default=-1),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("committed_offset", INT64),
                        f("committed_leader_epoch", INT32, "6+", default=-1),
                        f("committed_metadata", STRING, null="0+"),
                    ],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "topics",
            [
                f("name", STRING),
                f("partitions", [f("partition_index", INT32), f("error_code", INT16)]),
            ],
        ),
    ),
    history={
        2: "retention_time_ms (v0 commits to ZooKeeper, v1 carries a commit timestamp)",
        3: "throttle_time_ms",
        4: "unchanged (throttled after the response is sent)",
        5: "retention_time_ms removed: the broker's offsets.retention.minutes rules (KIP-211)",
        6: "committed_leader_epoch (KIP-320)",
        7: "group_instance_id (KIP-345)",
        8: "flexible",
    },
)

OFFSET_FETCH: Final = Message(
    9,
    "OffsetFetch",
    valid=versions("1-8"),
    flexible=versions("6+"),
    request=struct(
        f("group_id", STRING, "0-7"),
        f(
            "topics",
            [f("name", STRING), f("partition_indexes", Array(INT32))],
            "0-7",
            null="2-7",
        ),
        f(
            "groups",
            [
                f("group_id", STRING),
                f(
                    "topics",
                    [f("name", STRING), f("partition_indexes", Array(INT32))],
                    null="8+",
                ),
            ],
            "8+",
        ),
        f("require_stable", BOOL, "7+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("committed_offset", INT64, default=-1),
                        f("committed_leader_epoch", INT32, "5-7", default=-1),
                        f("metadata", STRING, null="0-7"),
                        f("error_code", INT16),
                    ],
                ),
            ],
            "0-7",
        ),
        f("error_code", INT16, "2-7"),
        f(
            "groups",
            [
                f("group_id", STRING),
                f(
                    "topics",
                    [
                        f("name", STRING),
                        f(
                            "partitions",
                            [
                                f("partition_index", INT32),
                                f("committed_offset", INT64, default=-1),
                                f("committed_leader_epoch", INT32, default=-1),
                                f("metadata", STRING, null="8+"),
                                f("error_code", INT16),
                            ],
                        ),
                    ],
                ),
                f("error_code", INT16),
            ],
            "8+",
        ),
    ),
    history={
        1: "offsets kept by the coordinator (v0 reads ZooKeeper)",
        2: "a top-level error_code; null topics asks for every committed partition",
        3: "throttle_time_ms",
        4: "unchanged (throttled after the response is sent)",
        5: "committed_leader_epoch (KIP-320)",
        6: "flexible",
        7: "require_stable: wait for pending transactional commits (KIP-447)",
        8: "groups: several groups in one request (KIP-709)",
    },
)

OFFSET_DELETE: Final = Message(
    47,
    "OffsetDelete",
    valid=versions("0"),
    flexible=versions(""),
    request=struct(
        f("group_id", STRING),
        f(
            "topics",
            [f("name", STRING), f("partitions", [f("partition_index", INT32)])],
        ),
    ),
    response=struct(
        f("error_code", INT16),
        f("throttle_time_ms", INT32),
        f(
            "topics",
            [
                f("name", STRING),
                f("partitions", [f("partition_index", INT32), f("error_code", INT16)]),
            ],
        ),
    ),
    history={
        0: "delete a group's committed offsets of partitions it no longer consumes (KIP-496)",
    },
)
