"""The leader's side of transaction verification (KIP-890 part 1): which batches need
asking, how the coordinator's verdicts become Produce errors, and a marker landing
while the question is out makes the leader ask again."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import trio

from minibroker.broker.replication.txn_verification import (
    VERIFY_ATTEMPTS,
    knows_abortable,
    produce_error,
    unverified,
    verify,
)
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
)
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def partition(producers: dict[int, Any] | None = None, *, marker: int = -1) -> Any:
    state = SimpleNamespace(producers=producers or {}, last_marker_offset=marker)
    return SimpleNamespace(is_leader=True, log=SimpleNamespace(producer_state=state))


def batch(*, transactional: bool) -> bytes:
    return encode_batch(
        [Record(b"v", timestamp=1)],
        producer_id=7,
        producer_epoch=2,
        base_sequence=0,
        transactional=transactional,
    )


def test_only_a_batch_that_would_open_a_transaction_is_asked_about() -> None:
    fresh = partition()
    open_here = partition({7: SimpleNamespace(epoch=2, current_txn_first_offset=5)})
    older_epoch = partition({7: SimpleNamespace(epoch=1, current_txn_first_offset=5)})
    txn = batch(transactional=True)
    assert unverified(lambda tp: fresh, [(TP, txn)]) == {(7, 2): [TP]}
    assert unverified(lambda tp: open_here, [(TP, txn)]) == {}
    assert unverified(lambda tp: older_epoch, [(TP, txn)]) == {(7, 2): [TP]}
    assert unverified(lambda tp: fresh, [(TP, batch(transactional=False))]) == {}
    assert unverified(lambda tp: None, [(TP, txn)]) == {}  # the append answers for it


def test_verdicts_become_the_errors_producers_expect() -> None:
    assert isinstance(produce_error(ProducerFencedError()), InvalidProducerEpochError)
    for busy in (ConcurrentTransactionsError(), NotCoordinatorError()):
        assert isinstance(produce_error(busy), NotEnoughReplicasError)  # retried
    refused = InvalidTxnStateError()
    assert produce_error(refused) is refused


def test_a_partition_outside_the_transaction_is_transaction_abortable_to_clients_that_know_it() -> (
    None
):
    """KIP-890: Produce v11+ and TxnOffsetCommit v4+ get TRANSACTION_ABORTABLE (the
    producer aborts and goes on), older versions and the msgpack form INVALID_TXN_STATE."""
    outside = TransactionAbortableError("not in the transaction")
    assert produce_error(outside, abortable=True) is outside
    assert isinstance(produce_error(outside, abortable=False), InvalidTxnStateError)
    assert [knows_abortable(ApiKey.PRODUCE, v) for v in (0, 10, 11, 12)] == [
        False,
        False,
        True,
        True,
    ]
    assert [knows_abortable(ApiKey.TXN_OFFSET_COMMIT, v) for v in (0, 3, 4, 5)] == [
        False,
        False,
        True,
        True,
    ]


async def test_a_marker_landing_meanwhile_makes_the_leader_ask_again() -> None:
    p = partition()
    asked: list[int] = []

    async def coordinator(
        tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        asked.append(pid)
        if len(asked) == 1:
            p.log.producer_state.last_marker_offset = 10  # the transaction just ended
            return dict.fromkeys(tps)
        return dict.fromkeys(tps, TransactionAbortableError("not in it any more"))

    refused = await verify(coordinator, lambda tp: p, "tx", {(7, 2): [TP]})
    assert len(asked) == 2 and isinstance(refused[TP], InvalidTxnStateError)


async def test_the_coordinators_refusal_is_answered_as_the_produce_version_knows_it() -> None:
    async def coordinator(
        tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        return dict.fromkeys(tps, TransactionAbortableError("not in the transaction"))

    needed = {(7, 2): [TP]}
    newer = await verify(coordinator, lambda tp: partition(), "tx", needed, abortable=True)
    older = await verify(coordinator, lambda tp: partition(), "tx", needed)
    assert isinstance(newer[TP], TransactionAbortableError)
    assert isinstance(older[TP], InvalidTxnStateError)


async def test_markers_that_keep_landing_answer_a_retriable_error() -> None:
    p = partition()

    async def coordinator(
        tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        p.log.producer_state.last_marker_offset += 1
        await trio.lowlevel.checkpoint()
        return dict.fromkeys(tps)

    refused = await verify(coordinator, lambda tp: p, "tx", {(7, 2): [TP]})
    assert isinstance(refused[TP], NotEnoughReplicasError)
    assert p.log.producer_state.last_marker_offset == VERIFY_ATTEMPTS - 1


async def test_a_transaction_version_2_produce_asks_to_add_not_only_to_verify() -> None:
    """KIP-890 part 2: a Produce v12's client sent no AddPartitionsToTxn."""
    p = partition()
    asked: list[bool] = []

    async def coordinator(
        tid: str, pid: int, epoch: int, tps: Sequence[TopicPartition], add: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        asked.append(add)
        return dict.fromkeys(tps)

    assert await verify(coordinator, lambda tp: p, "tx", {(7, 2): [TP]}, add=True) == {}
    assert await verify(coordinator, lambda tp: p, "tx", {(7, 2): [TP]}) == {}
    assert asked == [True, False]
