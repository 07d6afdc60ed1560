"""The transactional producer's handlers: InitProducerId (with a transactional id;
without one the broker's idempotent handler answers), AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn. Request bodies in, response bodies out; the work is
transaction/coordinator.py's.

Clients from before KIP-588 do not know PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH
instead, as Kafka answers them (InitProducerId v0-3, the others v0-1).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.cluster.producer_ids import InitProducerIdApi
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    InvalidProducerEpochError,
    KafkaError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.features import transaction_v2
from minibroker.protocol.messages import bodies
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.transaction_log import STATUS_NAMES
from minibroker.transaction.coordinator import TransactionCoordinator
from minibroker.transaction.state_manager import StateWrite

_Body = TypeVar("_Body")

FENCED_SINCE: Final = {
    "InitProducerId": 4,
    "AddPartitionsToTxn": 2,
    "AddOffsetsToTxn": 2,
    "EndTxn": 2,
}
"""The first version of each API whose clients understand PRODUCER_FENCED (KIP-588)."""

BROKER_FORM_SINCE: Final = 4
"""Kafka's AddPartitionsToTxn from this version on is the brokers' form (KIP-890 part 1)."""


def _code(error: KafkaError, api: str, version: int) -> int:
    if isinstance(error, ProducerFencedError) and version < FENCED_SINCE[api]:
        return InvalidProducerEpochError.code
    return error.code


class TransactionApis:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        idempotent: InitProducerIdApi,
        metadata_cache: MetadataCache,
        *,
        offsets_partition: Callable[[str], int],
    ) -> None:
        """``offsets_partition``: a group's ``__consumer_offsets`` partition."""
        self.coordinator = coordinator
        self.idempotent = idempotent
        self.metadata_cache = metadata_cache
        self.offsets_partition = offsets_partition

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.INIT_PRODUCER_ID, self.handle_init_producer_id)
        dispatcher.register(bodies.ADD_PARTITIONS_TO_TXN, self.handle_add_partitions_to_txn)
        dispatcher.register(bodies.ADD_OFFSETS_TO_TXN, self.handle_add_offsets_to_txn)
        dispatcher.register(bodies.END_TXN, self.handle_end_txn)
        dispatcher.register(bodies.DESCRIBE_TRANSACTIONS, self.handle_describe_transactions)
        dispatcher.register(bodies.LIST_TRANSACTIONS, self.handle_list_transactions)

    # -- administration ------------------------------------------------------------------------

    def handle_describe_transactions(
        self, header: RequestHeader, request: bodies.DescribeTransactionsRequest
    ) -> Answer[bodies.DescribeTransactionsResponse]:
        state = self.coordinator.state
        answers: list[bodies.DescribeTransactionsResponseTransactionState] = []
        for transactional_id in request["transactional_ids"]:
            try:
                state.check_owner(transactional_id)
                meta = state.get(transactional_id)
                if meta is None:
                    raise TransactionalIdNotFoundError(f"{transactional_id!r} is not known")
            except KafkaError as exc:
                answers.append(
                    {"error_code": exc.code, "transactional_id": transactional_id, "topics": []}
                )
                continue
            value = meta.value
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(value.partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            answers.append(
                {
                    "error_code": NONE,
                    "transactional_id": transactional_id,
                    "transaction_state": meta.state_name,
                    "transaction_timeout_ms": value.timeout_ms,
                    "transaction_start_time_ms": value.start_ms,
                    "producer_id": value.producer_id,
                    "producer_epoch": value.producer_epoch,
                    "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()],
                }
            )
        return {"throttle_time_ms": 0, "transaction_states": answers}

    def handle_list_transactions(
        self, header: RequestHeader, request: bodies.ListTransactionsRequest
    ) -> Answer[bodies.ListTransactionsResponse]:
        known = set(STATUS_NAMES.values())
        states = set(request["state_filters"])
        producer_ids = set(request["producer_id_filters"])
        duration = request["duration_filter"]
        now = self.coordinator.clock()
        listed: list[bodies.ListTransactionsResponseTransactionState] = []
        for meta in self.coordinator.state.owned_transactions():
            value = meta.value
            if states and meta.state_name not in states:
                continue
            if producer_ids and value.producer_id not in producer_ids:
                continue
            if duration >= 0 and (value.start_ms < 0 or now - value.start_ms < duration):
                continue
            listed.append(
                {
                    "transactional_id": meta.transactional_id,
                    "producer_id": value.producer_id,
                    "transaction_state": meta.state_name,
                }
            )
        return {
            "throttle_time_ms": 0,
            "error_code": NONE,
            "unknown_state_filters": sorted(states - known),
            "transaction_states": listed,
        }

    def handle_init_producer_id(
        self, header: RequestHeader, request: bodies.InitProducerIdRequest
    ) -> Answer[bodies.InitProducerIdResponse]:
        transactional_id = request["transactional_id"]
        if transactional_id is None:
            return self.idempotent.handle_init_producer_id(header, request)

        async def answer() -> bodies.InitProducerIdResponse:
            try:
                producer_id, epoch = await self.coordinator.init_producer_id(
                    transactional_id,
                    request["transaction_timeout_ms"],
                    request["producer_id"],
                    request["producer_epoch"],
                )
            except KafkaError as exc:
                code = _code(exc, "InitProducerId", header.api_version)
                return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
            return {"error_code": NONE, "producer_id": producer_id, "producer_epoch": epoch}

        return Deferred(answer)

    def handle_add_partitions_to_txn(
        self, header: RequestHeader, request: bodies.AddPartitionsToTxnRequest
    ) -> Answer[bodies.AddPartitionsToTxnResponse]:
        if header.api_version >= BROKER_FORM_SINCE or request.get("transactions"):
            # Kafka's v4+, or a broker's msgpack body (which names its transactions)
            return self._brokers_add_partitions(header, request)
        wanted = [
            TopicPartition(topic["name"], p)
            for topic in request["topics"]
            for p in topic["partitions"]
        ]
        unknown = {tp for tp in wanted if self.metadata_cache.partition(tp) is None}

        def results(
            code_of: Callable[[TopicPartition], int],
        ) -> bodies.AddPartitionsToTxnResponse:
            by_topic: dict[str, list[bodies.AddPartitionsToTxnResponseResultResult]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "partition_error_code": code_of(tp)}
                )
            return {
                "throttle_time_ms": 0,
                "results": [{"name": t, "results": r} for t, r in by_topic.items()],
            }

        if not wanted:  # nothing (left) to add: no transaction starts
            return results(lambda tp: NONE)
        if unknown:
            missing, other = UnknownTopicOrPartitionError.code, OperationNotAttemptedError.code
            return results(lambda tp: missing if tp in unknown else other)

        def answer(error: KafkaError | None) -> bodies.AddPartitionsToTxnResponse:
            code = NONE if error is None else _code(error, "AddPartitionsToTxn", header.api_version)
            return results(lambda tp: code)

        ids = request["transactional_id"], request["producer_id"], request["producer_epoch"]
        return self._now_or_later(
            ids[0],
            lambda: self.coordinator.add_partitions_now(*ids, wanted),
            lambda: self.coordinator.add_partitions(*ids, wanted),
            answer,
        )

    def _brokers_add_partitions(
        self, header: RequestHeader, request: bodies.AddPartitionsToTxnRequest
    ) -> Deferred[bodies.AddPartitionsToTxnResponse]:
        """v4, from partition leaders: for each transaction verify (``verify_only``) or
        add its partitions; one error per partition."""

        async def one(
            txn: bodies.AddPartitionsToTxnRequestTransaction,
        ) -> bodies.AddPartitionsToTxnResponseResultsByTransaction:
            tps = [TopicPartition(t["name"], p) for t in txn["topics"] for p in t["partitions"]]
            ids = txn["transactional_id"], txn["producer_id"], txn["producer_epoch"]
            errors: dict[TopicPartition, KafkaError | None]
            try:
                if txn["verify_only"]:
                    errors = self.coordinator.verify_partitions(*ids, tps)
                else:
                    await self.coordinator.add_partitions(*ids, tps)
                    errors = dict.fromkeys(tps)
            except KafkaError as exc:
                errors = dict.fromkeys(tps, exc)
            by_topic: dict[
                str,
                list[
                    bodies.AddPartitionsToTxnResponseResultsByTransactionTopicResultResultsByPartition
                ],
            ] = {}
            for tp, error in errors.items():
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "partition_error_code": NONE if error is None else error.code,
                    }
                )
            return {
                "transactional_id": txn["transactional_id"],
                "topic_results": [
                    {"name": t, "results_by_partition": r} for t, r in by_topic.items()
                ],
            }

        async def answer() -> bodies.AddPartitionsToTxnResponse:
            return {
                "throttle_time_ms": 0,
                "error_code": NONE,
                "results_by_transaction": [await one(t) for t in request["transactions"]],
            }

        return Deferred(answer)

    def handle_add_offsets_to_txn(
        self, header: RequestHeader, request: bodies.AddOffsetsToTxnRequest
    ) -> Answer[bodies.AddOffsetsToTxnResponse]:
        tp = TopicPartition(OFFSETS_TOPIC, self.offsets_partition(request["group_id"]))
        ids = request["transactional_id"], request["producer_id"], request["producer_epoch"]
        return self._now_or_later(
            ids[0],
            lambda: self.coordinator.add_partitions_now(*ids, [tp]),
            lambda: self.coordinator.add_partitions(*ids, [tp]),
            self._simple_answer("AddOffsetsToTxn", header),
        )

    def handle_end_txn(
        self, header: RequestHeader, request: bodies.EndTxnRequest
    ) -> Answer[bodies.EndTxnResponse]:
        """v5+ (transaction version 2) bumps the epoch and answers the producer id and
        epoch to go on with (-1 on an error)."""
        ids = request["transactional_id"], request["producer_id"], request["producer_epoch"]
        committed = request["committed"]
        bump = transaction_v2(header.api_key, header.api_version, request)
        simple = self._simple_answer("EndTxn", header)

        def answer(error: KafkaError | None) -> bodies.EndTxnResponse:
            body = simple(error)
            producer_id, epoch = -1, -1
            if error is None:
                producer_id, epoch = self.coordinator.producer_of(ids[0])
            body["producer_id"], body["producer_epoch"] = producer_id, epoch
            return body

        return self._now_or_later(
            ids[0],
            lambda: self.coordinator.end_transaction_now(*ids, committed, bump_epoch=bump),
            lambda: self.coordinator.end_transaction(*ids, committed, bump_epoch=bump),
            answer,
        )

    @staticmethod
    def _simple_answer(
        api: str, header: RequestHeader
    ) -> Callable[[KafkaError | None], bodies.EndTxnResponse]:
        def answer(error: KafkaError | None) -> bodies.EndTxnResponse:
            code = NONE if error is None else _code(error, api, header.api_version)
            return {"throttle_time_ms": 0, "error_code": code}

        return answer

    def _now_or_later(
        self,
        transactional_id: str,
        now: Callable[[], StateWrite | None],
        later: Callable[[], Awaitable[None]],
        answer: Callable[[KafkaError | None], _Body],
    ) -> Answer[_Body]:
        """Answer at once when the id's last transaction has completed and ``now`` needs
        no wait (its ``__transaction_state`` write was replicated as it was made: a
        single in-sync replica), with no task; else a Deferred that waits (``later``
        from the start when the last transaction is still completing)."""
        if not self.coordinator.completing(transactional_id):
            try:
                wait = now()
            except KafkaError as exc:
                return answer(exc)
            if wait is None:
                return answer(None)
            later = wait

        async def deferred() -> _Body:
            try:
                await later()
            except KafkaError as exc:
                return answer(exc)
            return answer(None)

        return Deferred(deferred)
