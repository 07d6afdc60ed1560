"""Kafka messages of the data path: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch
(see protocol/kafka/schema.py for the declaration form, protocol/schemas/data.py for the
bodies the handlers read: Kafka's ``topic_data`` / ``partition_data`` and
``responses`` / ``partition_responses`` are ``topics`` / ``partitions`` there)."""

from __future__ import annotations

from typing import Final

from minibroker.protocol.kafka.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Array,
    Message,
    f,
    struct,
    versions,
)

_LEADER_AND_EPOCH = struct(
    f("leader_id", INT32, default=-1),
    f("leader_epoch", INT32, default=-1),
)

PRODUCE: Final = Message(
    0,
    "Produce",
    valid=versions("0-9"),
    flexible=versions("9+"),
    request=struct(
        f("transactional_id", STRING, "3+", null="3+"),
        f("acks", INT16),
        f("timeout_ms", INT32),
        f(
            "topic_data",
            [
                f("name", STRING),
                f(
                    "partition_data",
                    [f("index", INT32), f("records", RECORDS, null="0+")],
                    key="partitions",
                ),
            ],
            key="topics",
        ),
    ),
    response=struct(
        f(
            "responses",
            [
                f("name", STRING),
                f(
                    "partition_responses",
                    [
                        f("index", INT32),
                        f("error_code", INT16),
                        f("base_offset", INT64),
                        f("log_append_time_ms", INT64, "2+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f(
                            "record_errors",
                            [
                                f("batch_index", INT32),
                                f("batch_index_error_message", STRING, null="8+"),
                            ],
                            "8+",
                        ),
                        f("error_message", STRING, "8+", null="8+"),
                        f("current_leader", _LEADER_AND_EPOCH, "10+", tag=0),
                    ],
                    key="partitions",
                ),
            ],
            key="topics",
        ),
        f("throttle_time_ms", INT32, "1+"),
    ),
    history={
        1: "throttle_time_ms",
        2: "log_append_time_ms",
        3: "transactional_id; RecordBatch v2 only",
        4: "KAFKA_STORAGE_ERROR may be returned",
        5: "log_start_offset",
        6: "unchanged",
        7: "ZStandard compression allowed",
        8: "record_errors, error_message",
        9: "flexible",
    },
)

FETCH: Final = Message(
    1,
    "Fetch",
    valid=versions("4-12"),
    flexible=versions("12+"),
    request=struct(
        f("cluster_id", STRING, "12+", null="12+", tag=0),
        f("replica_id", INT32, default=-1),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        f("isolation_level", INT8, "4+"),
        f("session_id", INT32, "7+"),
        f("session_epoch", INT32, "7+", default=-1),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "9+", default=-1),
                        f("fetch_offset", INT64),
                        f("last_fetched_epoch", INT32, "12+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f("partition_max_bytes", INT32),
                    ],
                ),
            ],
        ),
        f("forgotten_topics_data", [f("topic", STRING), f("partitions", Array(INT32))], "7+"),
        f("rack_id", STRING, "11+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "7+"),
        f("session_id", INT32, "7+"),
        f(
            "responses",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("high_watermark", INT64),
                        f("last_stable_offset", INT64, "4+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f(
                            "diverging_epoch",
                            struct(
                                f("epoch", INT32, default=-1), f("end_offset", INT64, default=-1)
                            ),
                            "12+",
                            tag=0,
                        ),
                        f("current_leader", _LEADER_AND_EPOCH, "12+", tag=1),
                        f(
                            "snapshot_id",
                            struct(
                                f("end_offset", INT64, default=-1), f("epoch", INT32, default=-1)
                            ),
                            "12+",
                            tag=2,
                        ),
                        f(
                            "aborted_transactions",
                            [f("producer_id", INT64), f("first_offset", INT64)],
                            "4+",
                            null="4+",
                        ),
                        f("preferred_read_replica", INT32, "11+", default=-1),
                        f("records", RECORDS, null="0+"),
                    ],
                ),
            ],
            key="topics",
        ),
    ),
    history={
        4: "isolation_level, last_stable_offset, aborted_transactions",
        5: "log_start_offset",
        6: "KAFKA_STORAGE_ERROR may be returned",
        7: "fetch sessions (KIP-227)",
        8: "unchanged",
        9: "current_leader_epoch (fencing, KIP-320)",
        10: "ZStandard compression allowed",
        11: "rack_id, preferred_read_replica (KIP-392)",
        12: "flexible; last_fetched_epoch; diverging_epoch, current_leader",
    },
)

LIST_OFFSETS: Final = Message(
    2,
    "ListOffsets",
    valid=versions("1-6"),
    flexible=versions("6+"),
    request=struct(
        f("replica_id", INT32),
        f("isolation_level", INT8, "2+"),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("current_leader_epoch", INT32, "4+", default=-1),
                        f("timestamp", INT64),
                    ],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("name", STRING),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("timestamp", INT64, default=-1),
                        f("offset", INT64, default=-1),
                        f("leader_epoch", INT32, "4+", default=-1),
                    ],
                ),
            ],
        ),
    ),
    history={
        1: "one offset per partition (timestamp, offset)",
        2: "isolation_level, throttle_time_ms",
        3: "unchanged",
        4: "current_leader_epoch, leader_epoch",
        5: "unchanged",
        6: "flexible",
    },
)

OFFSET_FOR_LEADER_EPOCH: Final = Message(
    23,
    "OffsetForLeaderEpoch",
    valid=versions("2-4"),
    flexible=versions("4+"),
    request=struct(
        f("replica_id", INT32, "3+", default=-2),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "2+", default=-1),
                        f("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("topic", STRING),
                f(
                    "partitions",
                    [
                        f("error_code", INT16),
                        f("partition", INT32),
                        f("leader_epoch", INT32, "1+", default=-1),
                        f("end_offset", INT64, default=-1),
                    ],
                ),
            ],
        ),
    ),
    history={
        2: "current_leader_epoch, throttle_time_ms",
        3: "replica_id",
        4: "flexible",
    },
)
