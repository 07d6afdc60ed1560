"""The group coordinator's offsets APIs: OffsetCommit, OffsetFetch, OffsetDelete.

- OffsetCommit: ``retention_time_ms`` (v2-4; -1: the broker's retention).
- OffsetFetch: ``group_id`` / ``topics`` (v1-7, one group) or ``groups[]`` (v8); the
  answer carries ``groups[]`` and, for a one-group request, the v1-7 top-level
  ``topics`` / ``error_code``. ``topics`` None asks for every committed partition.
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
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
    doc="""Store a group's consumed positions (written to ``__consumer_offsets``).

    Request: ``group_id``, ``generation_id`` (-1 with ``member_id`` "": a commit from
    outside the group protocol), ``member_id``, ``group_instance_id``,
    ``retention_time_ms`` (-1: the broker's), ``topics[]`` of {name, partitions[] of
    {partition_index, committed_offset, committed_leader_epoch, committed_metadata}}.
    Response: ``topics[]`` of {name, partitions[] of {partition_index, error_code}}.
    """,
    valid=versions("2-8"),
    flexible=versions("8+"),
    request=struct(
        f("group_id", STRING, required=True),
        f("generation_id_or_member_epoch", INT32, "1+", key="generation_id", default=-1),
        f("member_id", STRING, "1+"),
        f("group_instance_id", STRING, "7+", null="7+"),
        f("retention_time_ms", INT64, "2-4", default=-1),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("committed_offset", INT64, required=True),
                        f("committed_leader_epoch", INT32, "6+", default=-1),
                        f("committed_metadata", STRING, null="0+"),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [f("partition_index", INT32, required=True), f("error_code", INT16)],
                    required=True,
                ),
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
    doc="""Read committed offsets; -1 where a partition has none.

    Request: ``groups[]`` of {group_id, topics[] (nil: all) of {name,
    partition_indexes}}, or one group as ``group_id`` / ``topics``; ``require_stable``.
    Response: ``groups[]`` of {group_id, topics[] of {name, partitions[] of
    {partition_index, committed_offset, committed_leader_epoch, metadata, error_code}},
    error_code}; for a one-group request also ``topics`` and ``error_code`` at the top.
    """,
    valid=versions("1-8"),
    flexible=versions("6+"),
    request=struct(
        f("group_id", STRING, "0-7", body_null=True),
        f(
            "topics",
            [f("name", STRING, required=True), f("partition_indexes", Array(INT32), required=True)],
            "0-7",
            null="2-7",
        ),
        f(
            "groups",
            [
                f("group_id", STRING, required=True),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f("partition_indexes", Array(INT32), required=True),
                    ],
                    null="8+",
                ),
            ],
            "8+",
            body_null=True,
        ),
        f("require_stable", BOOL, "7+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "3+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("committed_offset", INT64, required=True, default=-1),
                        f("committed_leader_epoch", INT32, "5-7", default=-1),
                        f("metadata", STRING, null="0-7"),
                        f("error_code", INT16),
                    ],
                    required=True,
                ),
            ],
            "0-7",
        ),
        f("error_code", INT16, "2-7"),
        f(
            "groups",
            [
                f("group_id", STRING, required=True),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f(
                            "partitions",
                            [
                                f("partition_index", INT32, required=True),
                                f("committed_offset", INT64, required=True, default=-1),
                                f("committed_leader_epoch", INT32, default=-1),
                                f("metadata", STRING, null="8+"),
                                f("error_code", INT16),
                            ],
                            required=True,
                        ),
                    ],
                    required=True,
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
    doc="""Delete a group's committed offsets of some partitions (tombstones in the log).

    Request: ``group_id``, ``topics[]`` of {name, partitions[] of {partition_index}}.
    Response: ``error_code``, ``topics[]`` of {name, partitions[] of {partition_index,
    error_code}} (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes the topic).
    """,
    valid=versions("0"),
    flexible=versions(""),
    request=struct(
        f("group_id", STRING, required=True),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f("partitions", [f("partition_index", INT32, required=True)], required=True),
            ],
            required=True,
        ),
    ),
    response=struct(
        f("error_code", INT16),
        f("throttle_time_ms", INT32),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [f("partition_index", INT32, required=True), f("error_code", INT16)],
                    required=True,
                ),
            ],
        ),
    ),
    history={0: "delete a group's committed offsets of partitions it no longer consumes (KIP-496)"},
)
