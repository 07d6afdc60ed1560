"""The transactional producer's APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, and WriteTxnMarkers (coordinator to partition leaders).

A transactional producer first finds its transaction coordinator (FindCoordinator key
type 1) and gets its producer id and epoch from it (InitProducerId with its
``transactional_id``); each request below names the three. AddPartitionsToTxn v4+ is
KIP-890 part 1's broker-to-broker form (clients use v0-3, as Kafka's do). KIP-890 part 2
(the finalized feature ``transaction.version`` 2, protocol/features.py): EndTxn v5 bumps
the producer's epoch and answers it, TxnOffsetCommit v5 adds the group's offsets
partition to the transaction itself (no AddOffsetsToTxn), and Produce v12 has the
leader add its partition (no AddPartitionsToTxn from the client). On the msgpack
listener a request's ``transaction_version`` (2) asks for the same.
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

ADD_PARTITIONS_TO_TXN: Final = Message(
    24,
    "AddPartitionsToTxn",
    doc="""Add partitions to the producer's transaction before it writes to them.

    Request v0-3 (clients): ``transactional_id``, ``producer_id``, ``producer_epoch``,
    ``topics[]`` of {name, partitions[]}. Response: ``results[]`` of {name, results[] of
    {partition_index, partition_error_code}}: one error for every partition (a refused
    request answers OPERATION_NOT_ATTEMPTED for those it did not refuse).

    Request v4-5 (brokers, KIP-890): ``transactions[]`` of {transactional_id,
    producer_id, producer_epoch, verify_only, topics[]}; with ``verify_only`` a
    partition leader asks whether the partitions are in the ongoing transaction before
    it writes a producer's first transactional batch (part 1), without it the leader of
    a Produce v12 or the group coordinator of a TxnOffsetCommit v5 adds them (part 2).
    Response: ``error_code`` and ``results_by_transaction[]`` of {transactional_id,
    topic_results[] as above}.
    """,
    valid=versions("0-5"),
    flexible=versions("3+"),
    request=struct(
        f(
            "transactions",
            [
                f("transactional_id", STRING, "4+", required=True),
                f("producer_id", INT64, "4+", required=True),
                f("producer_epoch", INT16, "4+", required=True),
                f("verify_only", BOOL, "4+", default=False),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f("partitions", Array(INT32), required=True),
                    ],
                    "4+",
                    required=True,
                ),
            ],
            "4+",
        ),
        f("v3_and_below_transactional_id", STRING, "0-3", key="transactional_id"),
        f("v3_and_below_producer_id", INT64, "0-3", key="producer_id"),
        f("v3_and_below_producer_epoch", INT16, "0-3", key="producer_epoch"),
        f(
            "v3_and_below_topics",
            [f("name", STRING, required=True), f("partitions", Array(INT32), required=True)],
            "0-3",
            key="topics",
        ),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "4+"),
        f(
            "results_by_transaction",
            [
                f("transactional_id", STRING, "4+", required=True),
                f(
                    "topic_results",
                    [
                        f("name", STRING, required=True),
                        f(
                            "results_by_partition",
                            [
                                f("partition_index", INT32, required=True),
                                f("partition_error_code", INT16),
                            ],
                            required=True,
                        ),
                    ],
                    "4+",
                    required=True,
                ),
            ],
            "4+",
        ),
        f(
            "results_by_topic_v3_and_below",
            [
                f("name", STRING, required=True),
                f(
                    "results_by_partition",
                    [
                        f("partition_index", INT32, required=True),
                        f("partition_error_code", INT16),
                    ],
                    key="results",
                    required=True,
                ),
            ],
            "0-3",
            key="results",
        ),
    ),
    history={
        0: "transactional_id, producer_id, producer_epoch, topics",
        1: "unchanged (throttled after the response is sent)",
        2: "unchanged",
        3: "flexible",
        4: "brokers only: transactions[] with verify_only; error_code (KIP-890 part 1)",
        5: "unchanged (TRANSACTION_ABORTABLE may be answered, KIP-890)",
    },
)

ADD_OFFSETS_TO_TXN: Final = Message(
    25,
    "AddOffsetsToTxn",
    doc="""Add a group's ``__consumer_offsets`` partition to the transaction, before
    TxnOffsetCommit sends the group's offsets to its coordinator.

    Request: ``transactional_id``, ``producer_id``, ``producer_epoch``, ``group_id``.
    Response: ``error_code``.
    """,
    valid=versions("0-3"),
    flexible=versions("3+"),
    request=struct(
        f("transactional_id", STRING, required=True),
        f("producer_id", INT64, required=True),
        f("producer_epoch", INT16, required=True),
        f("group_id", STRING, required=True),
    ),
    response=struct(f("throttle_time_ms", INT32), f("error_code", INT16)),
    history={
        0: "transactional_id, producer_id, producer_epoch, group_id -> error_code",
        1: "unchanged (throttled after the response is sent)",
        2: "unchanged",
        3: "flexible",
    },
)

END_TXN: Final = Message(
    26,
    "EndTxn",
    doc="""Commit (``committed`` true) or abort the producer's ongoing transaction.

    Request: ``transactional_id``, ``producer_id``, ``producer_epoch``, ``committed``;
    ``transaction_version`` (msgpack only: 2 asks for v5's epoch bump).
    Response: ``error_code``, answered once the decision is in ``__transaction_state``
    (the markers are written after that); v5+: ``producer_id`` and ``producer_epoch``
    the producer uses from then on (the epoch is bumped by every transaction, so a late
    request of this one cannot land in the next; -1 on an error).
    """,
    valid=versions("0-5"),
    flexible=versions("3+"),
    request=struct(
        f("transactional_id", STRING, required=True),
        f("producer_id", INT64, required=True),
        f("producer_epoch", INT16, required=True),
        f("committed", BOOL, required=True),
        f("transaction_version", INT16, "", default=0),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id", INT64, "5+", default=-1),
        f("producer_epoch", INT16, "5+", default=-1),
    ),
    history={
        0: "transactional_id, producer_id, producer_epoch, committed -> error_code",
        1: "unchanged (throttled after the response is sent)",
        2: "unchanged",
        3: "flexible",
        4: "unchanged (TRANSACTION_ABORTABLE may be answered, KIP-890)",
        5: "the epoch is bumped by every transaction: producer_id, producer_epoch answered"
        " (KIP-890 part 2)",
    },
)

TXN_OFFSET_COMMIT: Final = Message(
    28,
    "TxnOffsetCommit",
    doc="""Commit a group's offsets inside a transaction (sent to the group coordinator):
    they become the group's committed offsets when the transaction commits.

    Request: ``transactional_id``, ``group_id``, ``producer_id``, ``producer_epoch``,
    ``generation_id``, ``member_id``, ``group_instance_id`` (v3+, KIP-447: the member's
    group metadata fences zombies), ``topics[]`` of {name, partitions[] of
    {partition_index, committed_offset, committed_leader_epoch, committed_metadata}};
    ``transaction_version`` (msgpack only: 2 asks for v5's behaviour).
    Response: ``topics[]`` of {name, partitions[] of {partition_index, error_code}}.
    From v5 the group's offsets partition is added to the transaction here (the client
    sends no AddOffsetsToTxn).
    """,
    valid=versions("0-5"),
    flexible=versions("3+"),
    request=struct(
        f("transactional_id", STRING, required=True),
        f("group_id", STRING, required=True),
        f("producer_id", INT64, required=True),
        f("producer_epoch", INT16, required=True),
        f("generation_id", INT32, "3+", default=-1),
        f("member_id", STRING, "3+"),
        f("group_instance_id", STRING, "3+", null="3+"),
        f("transaction_version", INT16, "", default=0),
        f(
            "topics",
            [
                f("name", STRING, required=True),
                f(
                    "partitions",
                    [
                        f("partition_index", INT32, required=True),
                        f("committed_offset", INT64, required=True),
                        f("committed_leader_epoch", INT32, "2+", default=-1),
                        f("committed_metadata", STRING, null="0+"),
                    ],
                    required=True,
                ),
            ],
            required=True,
        ),
    ),
    response=struct(
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
    history={
        0: "transactional_id, group_id, producer_id, producer_epoch, topics",
        1: "unchanged (throttled after the response is sent)",
        2: "committed_leader_epoch (KIP-320)",
        3: "flexible; generation_id, member_id, group_instance_id (KIP-447)",
        4: "unchanged (TRANSACTION_ABORTABLE may be answered, KIP-890)",
        5: "the group coordinator adds the offsets partition to the transaction (KIP-890 part 2)",
    },
)

WRITE_TXN_MARKERS: Final = Message(
    27,
    "WriteTxnMarkers",
    doc="""From a transaction coordinator to a partition leader: write the COMMIT or
    ABORT control batch that ends producers' transactions in these partitions.

    Request: ``markers[]`` of {producer_id, producer_epoch, transaction_result (true:
    commit), topics[] of {name, partition_indexes[]}, coordinator_epoch}.
    Response: ``markers[]`` of {producer_id, topics[] of {name, partitions[] of
    {partition_index, error_code}}}, answered once each marker is replicated (acks=all).
    """,
    valid=versions("0-1"),
    flexible=versions("1+"),
    request=struct(
        f(
            "markers",
            [
                f("producer_id", INT64, required=True),
                f("producer_epoch", INT16, required=True),
                f("transaction_result", BOOL, required=True),
                f(
                    "topics",
                    [
                        f("name", STRING, required=True),
                        f("partition_indexes", Array(INT32), required=True),
                    ],
                    required=True,
                ),
                f("coordinator_epoch", INT32, required=True),
            ],
            required=True,
        ),
    ),
    response=struct(
        f(
            "markers",
            [
                f("producer_id", INT64, required=True),
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
                    required=True,
                ),
            ],
        ),
    ),
    history={0: "markers", 1: "flexible"},
)

# -- administration (KIP-664: what kafka-transactions.sh asks) ---------------------------------

DESCRIBE_PRODUCERS: Final = Message(
    61,
    "DescribeProducers",
    doc="""The active producers of partitions this broker leads: per producer its id,
    epoch, last sequence and timestamp, the coordinator epoch of its last marker and
    the first offset of its open transaction (-1: none), as the partition's producer
    state holds them.

    Request: ``topics[]`` of {name, partition_indexes}. Response: ``topics[]`` of
    {name, partitions[] of {partition_index, error_code, error_message,
    active_producers[]}}.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(
        f(
            "topics",
            [f("name", STRING, required=True), f("partition_indexes", Array(INT32), required=True)],
            required=True,
        ),
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
                        f("error_code", INT16),
                        f("error_message", STRING, null="0+"),
                        f(
                            "active_producers",
                            [
                                f("producer_id", INT64, required=True),
                                f("producer_epoch", INT32, required=True),
                                f("last_sequence", INT32, default=-1),
                                f("last_timestamp", INT64, default=-1),
                                f("coordinator_epoch", INT32),
                                f("current_txn_start_offset", INT64, default=-1),
                            ],
                        ),
                    ],
                    required=True,
                ),
            ],
        ),
    ),
    history={0: "topics -> per partition its active producers (KIP-664)"},
)

DESCRIBE_TRANSACTIONS: Final = Message(
    65,
    "DescribeTransactions",
    doc="""The state of transactional ids this broker coordinates.

    Request: ``transactional_ids[]``. Response: ``transaction_states[]`` of
    {error_code, transactional_id, transaction_state (Kafka's state name),
    transaction_timeout_ms, transaction_start_time_ms, producer_id, producer_epoch,
    topics[] of {topic, partitions}}.
    """,
    valid=versions("0"),
    flexible=versions("0+"),
    request=struct(f("transactional_ids", Array(STRING), required=True)),
    response=struct(
        f("throttle_time_ms", INT32),
        f(
            "transaction_states",
            [
                f("error_code", INT16),
                f("transactional_id", STRING, required=True),
                f("transaction_state", STRING),
                f("transaction_timeout_ms", INT32),
                f("transaction_start_time_ms", INT64, default=-1),
                f("producer_id", INT64, default=-1),
                f("producer_epoch", INT16, default=-1),
                f(
                    "topics",
                    [f("topic", STRING, required=True), f("partitions", Array(INT32))],
                ),
            ],
        ),
    ),
    history={0: "transactional_ids -> their states (KIP-664)"},
)

LIST_TRANSACTIONS: Final = Message(
    66,
    "ListTransactions",
    doc="""The transactional ids this broker coordinates, filtered by state names,
    producer ids and (v1) how long their transaction has been open.

    Request: ``state_filters[]`` (Kafka's state names; empty: all),
    ``producer_id_filters[]``, ``duration_filter`` (ms, -1: none). Response:
    ``error_code``, ``unknown_state_filters[]``, ``transaction_states[]`` of
    {transactional_id, producer_id, transaction_state}.
    """,
    valid=versions("0-1"),
    flexible=versions("0+"),
    request=struct(
        f("state_filters", Array(STRING)),
        f("producer_id_filters", Array(INT64)),
        f("duration_filter", INT64, "1+", default=-1),
    ),
    response=struct(
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("unknown_state_filters", Array(STRING)),
        f(
            "transaction_states",
            [
                f("transactional_id", STRING, required=True),
                f("producer_id", INT64),
                f("transaction_state", STRING),
            ],
        ),
    ),
    history={0: "state and producer id filters (KIP-664)", 1: "duration_filter (KIP-994)"},
)
