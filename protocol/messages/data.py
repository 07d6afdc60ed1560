"""The data path: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch.

Kafka's per-topic collections ``topic_data`` / ``responses`` and per-partition
``partition_data`` / ``partition_responses`` are ``topics`` and ``partitions`` in the
bodies handlers read. ``records`` is RecordBatch v2 bytes, possibly several batches.

Sentinels follow Kafka: leader epoch -1 = "unknown / don't check", offset -1 =
"unknown", replica_id -1 = an ordinary consumer (a follower sends its broker id).
"""

from __future__ import annotations

from typing import Final

from minibroker.protocol.messages.form import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Array,
    Message,
    f,
    struct,
    versions,
)

PRODUCE: Final = Message(
    0,
    "Produce",
    doc="""Append record batches to partition leaders.

    Request: ``acks`` (0 none, 1 leader, -1 all ISR), ``timeout_ms`` (how long acks=-1
    may wait), ``topics[].partitions[].records`` one partition's batches.
    Response: per partition ``error_code``, ``base_offset`` (first offset assigned),
    ``log_append_time_ms`` (-1 unless the topic uses LogAppendTime),
    ``log_start_offset``, ``error_message``. acks=0 gets no response at all.
    A transactional Produce v12+ (or, on the msgpack listener, ``transaction_version``
    2) has the leader add a partition to the producer's transaction before its first
    batch there (KIP-890 part 2); before v12 the leader only verifies it is in it.
    """,
    valid=versions("0-12"),
    flexible=versions("9+"),
    request=struct(
        f("transactional_id", STRING, "3+", null="3+"),
        f("transaction_version", INT16, "", default=0),
        f("acks", INT16, required=True),
        f("timeout_ms", INT32, required=True),
        f(
            "topic_data",
            [
                f("name", STRING, required=True),
                f(
                    "partition_data",
                    [
                        f("index", INT32, required=True),
                        f("records", RECORDS, null="0+", body_null=False, required=True),
                    ],
                    key="partitions",
                    required=True,
                ),
            ],
            key="topics",
            required=True,
        ),
    ),
    response=struct(
        f(
            "responses",
            [
                f("name", STRING, required=True),
                f(
                    "partition_responses",
                    [
                        f("index", INT32, required=True),
                        f("error_code", INT16),
                        f("base_offset", INT64, default=-1),
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
                        f(
                            "current_leader",
                            struct(
                                f("leader_id", INT32, default=-1),
                                f("leader_epoch", INT32, default=-1),
                            ),
                            "10+",
                            tag=0,
                        ),
                    ],
                    key="partitions",
                    required=True,
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
        10: "unchanged (current_leader, KIP-951)",
        11: "unchanged (TRANSACTION_ABORTABLE may be answered, KIP-890)",
        12: "the leader adds the partition to the transaction (KIP-890 part 2)",
    },
)

FETCH: Final = Message(
    1,
    "Fetch",
    doc="""Read record batches; used by consumers and by followers (replica_id >= 0).

    Request: ``replica_id`` (-1 consumer, else the follower's broker id), ``max_wait_ms``
    and ``min_bytes`` (long poll: answer once min_bytes are available or max_wait_ms
    passed), ``max_bytes`` (whole response), ``isolation_level`` (0 read uncommitted,
    1 read committed), per partition ``fetch_offset``, ``current_leader_epoch`` (fencing,
    -1 = don't check), ``last_fetched_epoch`` (epoch of the follower's last batch, for
    divergence detection, -1 = unknown), ``log_start_offset`` (the follower's),
    ``partition_max_bytes``.
    Response: per partition ``error_code``, ``high_watermark``, ``last_stable_offset``,
    ``log_start_offset``, ``diverging_epoch`` (nil, or {epoch, end_offset} when the
    follower must truncate first), ``current_leader`` (nil or {leader_id, leader_epoch},
    a hint on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH), ``preferred_read_replica``,
    ``records`` (whole batches; the first may start before fetch_offset).

    v13+ name topics by ``topic_id`` alone (KIP-516; ``topic`` is then "", and a topic
    whose id no topic here has is answered UNKNOWN_TOPIC_ID); the answer carries both
    the name and the id, each version encoding the one it has. v15+ carry the
    follower's id in ``replica_state`` (the Kafka codec copies it into ``replica_id``).
    """,
    valid=versions("4-17"),
    flexible=versions("12+"),
    request=struct(
        f("cluster_id", STRING, "12+", null="12+", tag=0),
        f("replica_id", INT32, "0-14", default=-1),
        f(
            "replica_state",
            struct(
                f("replica_id", INT32, default=-1, required=True),
                f("replica_epoch", INT64, default=-1, required=True),
            ),
            "15+",
            tag=1,
            body_null=True,
        ),
        f("max_wait_ms", INT32, required=True),
        f("min_bytes", INT32, required=True),
        f("max_bytes", INT32, "3+", default=2147483647),
        f("isolation_level", INT8, "4+"),
        f("session_id", INT32, "7+"),
        f("session_epoch", INT32, "7+", default=-1),
        f(
            "topics",
            [
                f("topic", STRING, "0-12", required=True),
                f("topic_id", UUID, "13+"),
                f(
                    "partitions",
                    [
                        f("partition", INT32, required=True),
                        f("current_leader_epoch", INT32, "9+", default=-1),
                        f("fetch_offset", INT64, required=True),
                        f("last_fetched_epoch", INT32, "12+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f("partition_max_bytes", INT32, required=True),
                        f("replica_directory_id", UUID, "17+", tag=0),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
        f(
            "forgotten_topics_data",
            [f("topic", STRING, "7-12"), f("topic_id", UUID, "13+"), f("partitions", Array(INT32))],
            "7+",
        ),
        f("rack_id", STRING, "11+"),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "1+"),
        f("error_code", INT16, "7+"),
        f("session_id", INT32, "7+"),
        f(
            "responses",
            [
                f("topic", STRING, "0-12", required=True),
                f("topic_id", UUID, "13+"),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("error_code", INT16),
                        f("high_watermark", INT64, default=-1),
                        f("last_stable_offset", INT64, "4+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1),
                        f(
                            "diverging_epoch",
                            struct(
                                f("epoch", INT32, default=-1), f("end_offset", INT64, default=-1)
                            ),
                            "12+",
                            tag=0,
                            body_null=True,
                        ),
                        f(
                            "current_leader",
                            struct(
                                f("leader_id", INT32, default=-1),
                                f("leader_epoch", INT32, default=-1),
                            ),
                            "12+",
                            tag=1,
                            body_null=True,
                        ),
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
                        f("records", RECORDS, null="0+", body_null=False, default=b""),
                    ],
                    required=True,
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
        13: "topic_id replaces topic (KIP-516); UNKNOWN_TOPIC_ID",
        14: "unchanged (OFFSET_MOVED_TO_TIERED_STORAGE, KIP-405: no tiered storage here)",
        15: "replica_state replaces replica_id (KIP-903)",
        16: "node_endpoints (KIP-951; not sent: no current_leader is answered)",
        17: "replica_directory_id (KIP-853)",
    },
)

LIST_OFFSETS: Final = Message(
    2,
    "ListOffsets",
    doc="""Find offsets by timestamp: -2 earliest (log start), -1 latest (end, or HW for
    consumers), -3 the first record with the largest timestamp (v7+), -4 earliest local
    (v8+: the log start), -5 latest tiered (v9+: -1, no tiered storage), otherwise the
    first offset whose timestamp is >= ``timestamp``.

    Request: ``replica_id`` (-1 consumer), ``isolation_level``, per partition
    ``partition_index``, ``current_leader_epoch`` (-1 = don't check), ``timestamp``.
    Response: per partition ``error_code``, ``timestamp`` and ``offset`` found (-1, -1
    when none), ``leader_epoch`` of that offset.
    """,
    valid=versions("1-9"),
    flexible=versions("6+"),
    request=struct(
        f("replica_id", INT32, default=-1),
        f("isolation_level", INT8, "2+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("current_leader_epoch", INT32, "4+", default=-1),
                        f("timestamp", INT64, required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("error_code", INT16),
                        f("timestamp", INT64, default=-1),
                        f("offset", INT64, default=-1),
                        f("leader_epoch", INT32, "4+", default=-1),
                    ],
                    required=True,
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
        7: "timestamp -3: the largest timestamp (KIP-734)",
        8: "timestamp -4: the earliest local offset (KIP-405)",
        9: "timestamp -5: the latest tiered offset (KIP-1005)",
    },
)

OFFSET_FOR_LEADER_EPOCH: Final = Message(
    23,
    "OffsetForLeaderEpoch",
    doc="""Where does a leader epoch end on the leader? (KIP-101, KIP-279.)

    Request: ``replica_id`` (the asking follower, -1 for a consumer), per partition
    ``current_leader_epoch`` (fencing: the asker's view of the leader's epoch, -1 =
    don't check) and ``leader_epoch`` (the epoch asked about).
    Response: per partition ``error_code``, ``leader_epoch`` (the largest epoch <= the
    one asked about that the leader knows) and ``end_offset`` (the start offset of the
    next larger epoch, or the log end offset); -1/-1 when unknown.
    """,
    valid=versions("2-4"),
    flexible=versions("4+"),
    request=struct(
        f("replica_id", INT32, "3+", default=-1),
        f(
            "topics",
            [
                f("topic", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition", INT32, required=True),
                        f("current_leader_epoch", INT32, "2+", default=-1),
                        f("leader_epoch", INT32, required=True),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32, "2+"),
        f(
            "topics",
            [
                f("topic", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("error_code", INT16),
                        f("partition", INT32, required=True),
                        f("leader_epoch", INT32, "1+", default=-1),
                        f("end_offset", INT64, default=-1),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history={2: "current_leader_epoch, throttle_time_ms", 3: "replica_id", 4: "flexible"},
)
