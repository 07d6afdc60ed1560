"""Schemas of the data path: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch.

Field names are Kafka's message JSON names in snake_case. Simplified against Kafka:
no tagged fields, no fetch sessions, no topic ids; the per-topic collections Kafka
calls ``topic_data`` / ``responses`` and the per-partition ``partition_data`` /
``partition_responses`` are ``topics`` and ``partitions`` in both directions.
``records`` is RecordBatch v2 bytes (msgpack ``bin``), possibly several batches.

Sentinels follow Kafka: leader epoch -1 = "unknown / don't check", offset -1 =
"unknown", replica_id -1 = an ordinary consumer (a follower sends its broker id).
"""

from __future__ import annotations

from minibroker.protocol.schemas.types import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Api,
    Field,
    Nullable,
    per_topic,
    struct,
)

INITIAL = "initial version"

PRODUCE = Api(
    name="Produce",
    doc="""Append record batches to partition leaders.

    Request: ``acks`` (0 none, 1 leader, -1 all ISR), ``timeout_ms`` (how long acks=-1
    may wait), ``topics[].partitions[].records`` one partition's batches.
    Response: per partition ``error_code``, ``base_offset`` (first offset assigned),
    ``log_append_time_ms`` (-1 unless the topic uses LogAppendTime),
    ``log_start_offset``, ``error_message``. acks=0 gets no response at all.
    """,
    request=struct(
        Field("transactional_id", Nullable(STRING), None),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        per_topic(Field("index", INT32), Field("records", RECORDS)),
    ),
    response=struct(
        per_topic(
            Field("index", INT32),
            Field("error_code", INT16, 0),
            Field("base_offset", INT64, -1),
            Field("log_append_time_ms", INT64, -1),
            Field("log_start_offset", INT64, -1),
            Field("error_message", Nullable(STRING), None),
            default=[],
        ),
        Field("throttle_time_ms", INT32, 0),
    ),
    history=(INITIAL,),
)

_EPOCH_END_OFFSET = struct(Field("epoch", INT32, -1), Field("end_offset", INT64, -1))
_LEADER_ID_AND_EPOCH = struct(Field("leader_id", INT32, -1), Field("leader_epoch", INT32, -1))

FETCH = Api(
    name="Fetch",
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
    """,
    request=struct(
        Field("replica_id", INT32, -1),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, 0x7FFFFFFF),
        Field("isolation_level", INT8, 0),
        per_topic(
            Field("partition", INT32),
            Field("current_leader_epoch", INT32, -1),
            Field("fetch_offset", INT64),
            Field("last_fetched_epoch", INT32, -1),
            Field("log_start_offset", INT64, -1),
            Field("partition_max_bytes", INT32),
            topic="topic",
        ),
    ),
    response=struct(
        Field("throttle_time_ms", INT32, 0),
        Field("error_code", INT16, 0),
        per_topic(
            Field("partition_index", INT32),
            Field("error_code", INT16, 0),
            Field("high_watermark", INT64, -1),
            Field("last_stable_offset", INT64, -1),
            Field("log_start_offset", INT64, -1),
            Field("diverging_epoch", Nullable(_EPOCH_END_OFFSET), None),
            Field("current_leader", Nullable(_LEADER_ID_AND_EPOCH), None),
            Field("preferred_read_replica", INT32, -1),
            Field("records", RECORDS, b""),
            topic="topic",
            default=[],
        ),
    ),
    history=(INITIAL,),
)

LIST_OFFSETS = Api(
    name="ListOffsets",
    doc="""Find offsets by timestamp: -2 earliest (log start), -1 latest (end, or HW for
    consumers), otherwise the first offset whose timestamp is >= ``timestamp``.

    Request: ``replica_id`` (-1 consumer), ``isolation_level``, per partition
    ``partition_index``, ``current_leader_epoch`` (-1 = don't check), ``timestamp``.
    Response: per partition ``error_code``, ``timestamp`` and ``offset`` found (-1, -1
    when none), ``leader_epoch`` of that offset.
    """,
    request=struct(
        Field("replica_id", INT32, -1),
        Field("isolation_level", INT8, 0),
        per_topic(
            Field("partition_index", INT32),
            Field("current_leader_epoch", INT32, -1),
            Field("timestamp", INT64),
        ),
    ),
    response=struct(
        Field("throttle_time_ms", INT32, 0),
        per_topic(
            Field("partition_index", INT32),
            Field("error_code", INT16, 0),
            Field("timestamp", INT64, -1),
            Field("offset", INT64, -1),
            Field("leader_epoch", INT32, -1),
            default=[],
        ),
    ),
    history=(INITIAL,),
)

OFFSET_FOR_LEADER_EPOCH = Api(
    name="OffsetForLeaderEpoch",
    doc="""Where does a leader epoch end on the leader? (KIP-101, KIP-279.)

    Request: ``replica_id`` (the asking follower, -1 for a consumer), per partition
    ``current_leader_epoch`` (fencing: the asker's view of the leader's epoch, -1 =
    don't check) and ``leader_epoch`` (the epoch asked about).
    Response: per partition ``error_code``, ``leader_epoch`` (the largest epoch <= the
    one asked about that the leader knows) and ``end_offset`` (the start offset of the
    next larger epoch, or the log end offset); -1/-1 when unknown.
    """,
    request=struct(
        Field("replica_id", INT32, -1),
        per_topic(
            Field("partition", INT32),
            Field("current_leader_epoch", INT32, -1),
            Field("leader_epoch", INT32),
            topic="topic",
        ),
    ),
    response=struct(
        Field("throttle_time_ms", INT32, 0),
        per_topic(
            Field("error_code", INT16, 0),
            Field("partition", INT32),
            Field("leader_epoch", INT32, -1),
            Field("end_offset", INT64, -1),
            topic="topic",
            default=[],
        ),
    ),
    history=(INITIAL,),
)
