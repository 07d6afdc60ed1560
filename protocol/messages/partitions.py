"""Growing a topic and trimming its partitions: CreatePartitions, DeleteRecords.

CreatePartitions' per-topic ``results`` keep Kafka's name. A topic's ``assignments``
is null when the broker places the new partitions itself.
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

CREATE_PARTITIONS: Final = Message(
    37,
    "CreatePartitions",
    doc="""Add partitions to existing topics (any broker writes the new assignment to
    ZooKeeper; the controller brings the partitions online).

    Request: ``topics[]`` of {name, count (the topic's new partition count),
    assignments (nil = the broker places them, else one {broker_ids} per new
    partition)}, ``timeout_ms``, ``validate_only``.
    Response: ``results[]`` of {name, error_code, error_message}.
    """,
    valid=versions("0-3"),
    flexible=versions("2+"),
    request=struct(
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f("count", INT32, required=True),
                f("assignments", [f("broker_ids", Array(INT32), required=True)], null="0+"),
            ],
            required=True,
        ),
        f("timeout_ms", INT32, default=60000),
        f("validate_only", BOOL),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "results",
            [
                f("name", STRING, required=True),
                f("error_code", INT16),
                f("error_message", STRING, null="0+"),
            ],
        ),
    ),
    history={
        1: "unchanged (throttling after the response)",
        2: "flexible",
        3: "unchanged (quota violations throttle)",
    },
)

DELETE_RECORDS: Final = Message(
    21,
    "DeleteRecords",
    doc="""Move partitions' log start offsets forward (the partition leader answers once
    every in-sync replica has moved its own).

    Request: ``topics[]`` of {name, partitions[] of {partition_index, offset (records
    below it go; -1 = the high watermark)}}, ``timeout_ms``.
    Response: ``topics[]`` of {name, partitions[] of {partition_index, low_watermark
    (the smallest log start offset over the replicas, -1 on error), error_code}}.
    """,
    valid=versions("0-2"),
    flexible=versions("2+"),
    request=struct(
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("offset", INT64, required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
        f("timeout_ms", INT32, default=60000),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("low_watermark", INT64, default=-1),
                        f("error_code", INT16),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history={1: "unchanged (throttling after the response)", 2: "flexible"},
)
