"""TxnOffsetCommit's check of the transaction before the group coordinator writes the
offsets (coordinator/apis.py), through the same question a partition leader asks before
a Produce (transaction/verifier.py: the id's coordinator, on this broker or another):

- transaction version 2 (KIP-890 part 2, v5+): the client sends no AddOffsetsToTxn, so
  the group's ``__consumer_offsets`` partition is added to the producer's transaction;
- older versions (KIP-890 part 1, as Kafka verifies them): the partition must be in the
  ongoing transaction already (AddOffsetsToTxn put it there). Offsets written outside
  it would stay pending in the group with no marker to end them; the request is refused
  with TRANSACTION_ABORTABLE (v4) or INVALID_TXN_STATE (older, and the msgpack form),
  PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, as Kafka's leaders answer a verification.

Errors answer every partition of the request: PRODUCER_FENCED (v5) and
INVALID_PRODUCER_ID_MAPPING as they are (the producer is done), a transaction
coordinator busy, moving or unreachable COORDINATOR_LOAD_IN_PROGRESS, which producers
retry in place: its own NOT_COORDINATOR would send them looking for another *group*
coordinator, which this one is.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.broker.replication.txn_verification import (
    LocalTxnVerifier,
    TxnVerifier,
    knows_abortable,
    refusal,
)
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
)
from minibroker.protocol.features import transaction_v2
from minibroker.protocol.messages import bodies
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.topic_partition import TopicPartition

TxnOffsetCommitHandler = Callable[
    [RequestHeader, bodies.TxnOffsetCommitRequest], Answer[bodies.TxnOffsetCommitResponse]
]

_RETRIED = (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NetworkError,
)


class OffsetsPartitionAdder:
    def __init__(
        self,
        commit: TxnOffsetCommitHandler,
        verifier: TxnVerifier,
        *,
        offsets_partition: Callable[[str], int],
    ) -> None:
        """``commit``: the group coordinator's handler; ``offsets_partition``: a
        group's ``__consumer_offsets`` partition."""
        self.commit = commit
        self.verifier = verifier
        self.offsets_partition = offsets_partition

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.TXN_OFFSET_COMMIT, self.handle_txn_offset_commit)

    def handle_txn_offset_commit(
        self, header: RequestHeader, request: bodies.TxnOffsetCommitRequest
    ) -> Answer[bodies.TxnOffsetCommitResponse]:
        add = transaction_v2(header.api_key, header.api_version, request)
        tp = TopicPartition(OFFSETS_TOPIC, self.offsets_partition(request["group_id"]))
        ids = request["transactional_id"], request["producer_id"], request["producer_epoch"]
        abortable = knows_abortable(header.api_key, header.api_version)

        def refused(error: KafkaError) -> bodies.TxnOffsetCommitResponse:
            return _refused(request, error if add else refusal(error, abortable))

        if not add and isinstance(self.verifier, LocalTxnVerifier):
            try:  # this broker coordinates the id: answered in this turn
                now = self.verifier.now(*ids, [tp], False)
            except KafkaError as exc:
                now = {tp: exc}
            if now is not None:
                error = now.get(tp)
                return self.commit(header, request) if error is None else refused(error)

        async def checked_then_committed() -> bodies.TxnOffsetCommitResponse | None:
            try:
                verdicts = await self.verifier(*ids, [tp], add)
                error = verdicts.get(tp)
            except KafkaError as exc:
                error = exc
            if error is not None:
                return refused(error)
            answer = self.commit(header, request)
            if isinstance(answer, Deferred):
                return await answer.wait()
            return answer

        return Deferred(checked_then_committed)


def _refused(
    request: bodies.TxnOffsetCommitRequest, error: KafkaError
) -> bodies.TxnOffsetCommitResponse:
    """Every partition of ``request`` answered with ``error`` (as the module doc maps it)."""
    code = CoordinatorLoadInProgressError.code if isinstance(error, _RETRIED) else error.code
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in topic["partitions"]
                ],
            }
            for topic in request["topics"]
        ],
    }
