"""WriteTxnMarkers, the partition leader's side (KIP-98): a transaction coordinator asks
this broker to end producers' transactions in partitions it leads.

For each marker and partition the leader appends one control batch (the producer's id
and epoch, COMMIT or ABORT, the coordinator's epoch; protocol/records/control.py) with
acks=all, as a Produce with acks=all would be: the answer waits until every in-sync
replica has it, so a marker the coordinator saw acknowledged survives a failover. The
producer state (storage/producer_append.py) refuses a marker of an older producer
epoch (INVALID_PRODUCER_EPOCH) or an older coordinator epoch
(TRANSACTION_COORDINATOR_FENCED). Partitions of a topic that no longer exists answer
UNKNOWN_TOPIC_OR_PARTITION, which the coordinator takes as done.

``marker_listeners`` hear of every marker replicated here (the group coordinator makes
a transaction's offsets visible when its ``__consumer_offsets`` partition gets one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeAlias

import trio

from minibroker.broker.replication.partition import AppendResult
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import NONE, KafkaError
from minibroker.protocol.messages import bodies
from minibroker.protocol.records import ControlRecordType, encode_marker_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock

log = logging.getLogger(__name__)

MARKER_TIMEOUT_MS = 30_000
"""How long a marker waits for the in-sync replicas before its partition answers
REQUEST_TIMED_OUT (the coordinator retries it)."""

MarkerAppends: TypeAlias = tuple[
    bodies.WriteTxnMarkersRequestMarker, list[tuple[TopicPartition, AppendResult | KafkaError]]
]
"""One marker of a request and its append to each of its partitions."""

MarkerListener = Callable[[TopicPartition, int, bool], None]
"""(partition, producer id, committed): a marker was replicated there."""


class WriteTxnMarkersApi:
    def __init__(self, replica_manager: ReplicaManager, *, clock: Clock) -> None:
        self.replica_manager = replica_manager
        self.clock = clock
        self.marker_listeners: list[MarkerListener] = []

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.WRITE_TXN_MARKERS, self.handle_write_txn_markers)

    def handle_write_txn_markers(
        self, header: RequestHeader, request: bodies.WriteTxnMarkersRequest
    ) -> Answer[bodies.WriteTxnMarkersResponse]:
        appended = self.start(request)
        answer = appended.now()
        return Deferred(appended) if answer is None else answer

    def start(self, request: bodies.WriteTxnMarkersRequest) -> AppendedMarkers:
        """Append the markers now; awaiting the result answers once they are replicated
        (also what this broker's own transaction coordinator calls, without a round
        trip through its listener)."""
        now = self.clock()
        writes: list[MarkerAppends] = []
        for marker in request["markers"]:
            kind = (
                ControlRecordType.COMMIT
                if marker["transaction_result"]
                else ControlRecordType.ABORT
            )
            batch = encode_marker_batch(
                kind,
                producer_id=marker["producer_id"],
                producer_epoch=marker["producer_epoch"],
                coordinator_epoch=marker["coordinator_epoch"],
                now_ms=now,
            )
            entries = [
                (TopicPartition(topic["name"], index), batch)
                for topic in marker["topics"]
                for index in topic["partition_indexes"]
            ]
            # Appended now, while the request is handled: markers reach the log in order.
            results = self.replica_manager.append_records(-1, entries, coordinator=True)
            writes.append((marker, results))
        return AppendedMarkers(self, writes)

    async def _answer(self, writes: list[MarkerAppends]) -> bodies.WriteTxnMarkersResponse:
        outcomes: list[dict[TopicPartition, KafkaError | None]] = [{} for _ in writes]

        async def wait(
            i: int, results: list[tuple[TopicPartition, AppendResult | KafkaError]]
        ) -> None:
            outcomes[i] = await self.replica_manager.wait_for_acks(results, MARKER_TIMEOUT_MS)

        if len(writes) == 1:  # a coordinator's usual request: no task to start
            await wait(0, writes[0][1])
        else:
            async with trio.open_nursery() as nursery:
                for i, (_, results) in enumerate(writes):
                    nursery.start_soon(wait, i, results)
        return self._response(writes, outcomes)

    def _answer_now(self, writes: list[MarkerAppends]) -> bodies.WriteTxnMarkersResponse | None:
        """The answer if every in-sync replica has every marker already (a partition
        whose only in-sync replica is this leader), else None."""
        outcomes: list[dict[TopicPartition, KafkaError | None]] = []
        for _, results in writes:
            outcome = self.replica_manager.acknowledged_now(results)
            if outcome is None:
                return None
            outcomes.append(outcome)
        return self._response(writes, outcomes)

    def _response(
        self, writes: list[MarkerAppends], outcomes: list[dict[TopicPartition, KafkaError | None]]
    ) -> bodies.WriteTxnMarkersResponse:
        answer: list[bodies.WriteTxnMarkersResponseMarker] = []
        for (marker, results), waited in zip(writes, outcomes, strict=True):
            by_topic: dict[str, list[bodies.WriteTxnMarkersResponseMarkerTopicPartition]] = {}
            for tp, result in results:
                error = result if isinstance(result, KafkaError) else waited.get(tp)
                code = NONE if error is None else error.code
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "error_code": code}
                )
                if error is None:
                    for listener in self.marker_listeners:
                        try:
                            listener(tp, marker["producer_id"], marker["transaction_result"])
                        except Exception:
                            log.exception("a marker listener failed")
            answer.append(
                {
                    "producer_id": marker["producer_id"],
                    "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                }
            )
        return {"markers": answer}


class AppendedMarkers:
    """Markers ``WriteTxnMarkersApi.start`` appended: ``now()`` answers at once when
    each is replicated already (None when not); awaiting it answers once they are."""

    __slots__ = ("_api", "_writes")

    def __init__(self, api: WriteTxnMarkersApi, writes: list[MarkerAppends]) -> None:
        self._api = api
        self._writes = writes

    def now(self) -> bodies.WriteTxnMarkersResponse | None:
        return self._api._answer_now(self._writes)

    async def __call__(self) -> bodies.WriteTxnMarkersResponse:
        return await self._api._answer(self._writes)
