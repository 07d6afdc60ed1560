"""TxnOffsetCommit's check of the transaction (transaction/offsets_adder.py): before v5
the group's offsets partition must be in the ongoing transaction already (KIP-890 part
1), refused TRANSACTION_ABORTABLE to v4 and INVALID_TXN_STATE to older versions; v5
adds it (part 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from minibroker.broker.requests.dispatcher import Deferred
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.transaction.offsets_adder import OffsetsPartitionAdder

OFFSETS = TopicPartition(OFFSETS_TOPIC, 7)
COMMITTED = {"throttle_time_ms": 0, "topics": []}


class Coordinator:
    """A transaction coordinator on this broker (``now`` answers at once)."""

    def __init__(self, in_transaction: set[TopicPartition], error: KafkaError | None = None):
        self.in_transaction = in_transaction
        self.error = error
        self.asked: list[bool] = []

    def now(
        self, tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None] | None:
        if add:
            return None  # an add is awaited
        return self._verdicts(tps, add)

    async def __call__(
        self, tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        return self._verdicts(tps, add)

    def _verdicts(
        self, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        self.asked.append(add)
        if self.error is not None:
            raise self.error
        if add:
            self.in_transaction |= set(tps)
        return {
            tp: None if tp in self.in_transaction else TransactionAbortableError("not in it")
            for tp in tps
        }


def request() -> dict[str, Any]:
    return {
        "transactional_id": "tx",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
    }


def answer_code(coordinator: Coordinator, version: int) -> int:
    adder = OffsetsPartitionAdder(
        lambda header, body: COMMITTED,  # type: ignore[arg-type,return-value]
        coordinator,
        offsets_partition=lambda group: OFFSETS.partition,
    )
    header = RequestHeader(ApiKey.TXN_OFFSET_COMMIT, version, 1, "c")
    answer = adder.handle_txn_offset_commit(header, request())  # type: ignore[arg-type]
    if isinstance(answer, Deferred):
        answer = trio.run(answer.wait)
    if answer is COMMITTED:
        return 0
    assert answer is not None
    [code] = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
    return code


def test_offsets_outside_the_transaction_are_refused_as_each_version_knows() -> None:
    assert answer_code(Coordinator(set()), 3) == InvalidTxnStateError.code
    assert answer_code(Coordinator(set()), 4) == TransactionAbortableError.code
    assert answer_code(Coordinator({OFFSETS}), 3) == 0  # AddOffsetsToTxn put it there


def test_a_fenced_producer_is_told_invalid_producer_epoch_before_v5() -> None:
    fenced = Coordinator({OFFSETS}, ProducerFencedError("an older epoch"))
    assert answer_code(fenced, 4) == InvalidProducerEpochError.code


def test_transaction_version_2_adds_the_offsets_partition_instead() -> None:
    coordinator = Coordinator(set())
    assert answer_code(coordinator, 5) == 0
    assert coordinator.asked == [True]
