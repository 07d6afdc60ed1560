"""Sending a transaction's markers: WriteTxnMarkers to every partition's leader, retried
until each partition has its marker (Kafka's TransactionMarkerChannelManager).

The coordinator calls ``write`` once its PrepareCommit or PrepareAbort is replicated;
it returns once every partition answered NONE (or its topic is gone), and only then
may the transaction be recorded complete. Partitions are grouped by their leader as
the metadata cache knows it; a partition without a live leader, or one whose leader
answers a retriable error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a timeout),
waits and is sent again, to whichever broker leads it then. A marker of a producer
epoch older than the partition has seen (INVALID_PRODUCER_EPOCH) is moot: a newer
epoch's marker already ended the transaction there. TRANSACTION_COORDINATOR_FENCED
means a newer coordinator owns the transactional id: give up.

Connections go to the brokers' inter-broker listener and prove this broker's id
(docs/architecture.md, "Who may command a broker").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import trio

from minibroker.broker.metadata_cache import MetadataCache
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    InvalidProducerEpochError,
    KafkaError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

LocalMarkers = Callable[
    [bodies.WriteTxnMarkersRequest], Callable[[], Awaitable[bodies.WriteTxnMarkersResponse]]
]
"""Appends markers on this broker now; the returned wait answers once replicated."""

RETRY_BACKOFF_S = 0.05
"""First wait before a partition's marker is sent again; doubles up to the maximum."""
RETRY_BACKOFF_MAX_S = 1.0
REQUEST_TIMEOUT_S = 35.0
"""Longer than the leader's wait for its in-sync replicas (broker/txn_markers.py)."""


class MarkerSender:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        *,
        broker_id: int,
        security: ClientSecurity | None,
        local: LocalMarkers | None = None,
    ) -> None:
        """``local``: this broker's own WriteTxnMarkers (partitions it leads get their
        markers without a connection to itself)."""
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.security = security
        self.local = local
        self._connections: dict[int, Connection] = {}
        self._connecting: dict[int, trio.Lock] = {}
        self.markers_sent = 0
        """Partition markers acknowledged so far (a metric)."""

    async def write(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
        still_owner: Callable[[], bool],
    ) -> bool:
        """Write the marker to every partition; False if this coordinator was fenced
        or lost the transactional id meanwhile (``still_owner``)."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        while remaining:
            if not still_owner():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(remaining):
                if not self.metadata_cache.contains(tp.topic):
                    log.info("%s was deleted: its marker is not needed", tp)
                    remaining.discard(tp)
                    continue
                info = self.metadata_cache.partition(tp)
                if info is not None and info.leader >= 0:
                    by_leader.setdefault(info.leader, []).append(tp)
            fenced = False

            async def send(leader: int, tps: list[TopicPartition]) -> None:
                nonlocal fenced
                marker: bodies.WriteTxnMarkersRequestMarker = {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": committed,
                    "topics": _topics(tps),
                    "coordinator_epoch": coordinator_epoch,
                }
                try:
                    answer = await self._request(leader, {"markers": [marker]})
                except KafkaError as exc:
                    log.debug("markers to broker %d failed: %r", leader, exc)
                    return
                for result in answer.get("markers", ()):
                    for topic in result["topics"]:
                        for p in topic["partitions"]:
                            tp = TopicPartition(topic["name"], p["partition_index"])
                            code = p["error_code"]
                            if code == NONE or code == InvalidProducerEpochError.code:
                                remaining.discard(tp)
                                self.markers_sent += 1
                            elif code == TransactionCoordinatorFencedError.code:
                                fenced = True
                            elif code == UnknownTopicOrPartitionError.code and (
                                not self.metadata_cache.contains(tp.topic)
                            ):
                                remaining.discard(tp)

            async with trio.open_nursery() as nursery:
                for leader, tps in by_leader.items():
                    nursery.start_soon(send, leader, tps)
            if fenced:
                log.warning("markers of producer %d: a newer coordinator took over", producer_id)
                return False
            if remaining:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return True

    async def _request(
        self, broker_id: int, body: bodies.WriteTxnMarkersRequest
    ) -> bodies.WriteTxnMarkersResponse:
        if broker_id == self.broker_id and self.local is not None:
            return await self.local(body)()
        connection = await self._connection(broker_id)
        try:
            answer: bodies.WriteTxnMarkersResponse = await connection.request(
                ApiKey.WRITE_TXN_MARKERS, body
            )
        except KafkaError:
            await self._drop(broker_id, connection)
            raise
        return answer

    async def _connection(self, broker_id: int) -> Connection:
        lock = self._connecting.setdefault(broker_id, trio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            if connection is not None and connection.is_usable:
                return connection
            broker = self.metadata_cache.broker(broker_id)
            if broker is None:
                raise UnknownTopicOrPartitionError(f"no address known for broker {broker_id}")
            connection = Connection(
                broker.host,
                broker.port,
                client_id=f"txn-marker-sender-{self.broker_id}",
                request_timeout=REQUEST_TIMEOUT_S,
                security=self.security,
            )
            await connection.connect()
            self._connections[broker_id] = connection
            return connection

    async def _drop(self, broker_id: int, connection: Connection) -> None:
        if self._connections.get(broker_id) is connection:
            del self._connections[broker_id]
        with trio.CancelScope(shield=True):
            await connection.aclose()

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        with trio.CancelScope(shield=True):
            for connection in connections.values():
                await connection.aclose()


def _topics(tps: list[TopicPartition]) -> list[bodies.WriteTxnMarkersRequestMarkerTopic]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]
