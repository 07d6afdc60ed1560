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
(transaction/broker_links.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeAlias

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.replication.txn_markers import AppendedMarkers
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
from minibroker.transaction.broker_links import BrokerLinks

log = logging.getLogger(__name__)

LocalMarkers = Callable[[bodies.WriteTxnMarkersRequest], AppendedMarkers]
"""Appends markers on this broker now (broker/replication/txn_markers.py); the result answers now,
when replicated already, or once awaited."""

MarkersStarted: TypeAlias = tuple[set[TopicPartition], AppendedMarkers | None]
"""``MarkerSender.write_now``'s result: partitions still to write, appends to wait for."""

RETRY_BACKOFF_S = 0.05
"""First wait before a partition's marker is sent again; doubles up to the maximum."""
RETRY_BACKOFF_MAX_S = 1.0
REQUEST_TIMEOUT_S = 35.0
"""Longer than the leader's wait for its in-sync replicas (broker/replication/txn_markers.py)."""


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
        self.local = local
        self.links = BrokerLinks(
            metadata_cache,
            broker_id=broker_id,
            security=security,
            client_id="txn-marker-sender",
            request_timeout_s=REQUEST_TIMEOUT_S,
        )
        self.markers_sent = 0
        """Partition markers acknowledged so far (a metric)."""

    def write_now(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> MarkersStarted | None:
        """The markers of a transaction whose partitions this broker all leads,
        appended now. What is left for ``write``: the partitions without their marker
        yet (every one when some has another leader) and the appends to wait for (when
        a marker is not replicated yet); None when a newer coordinator fenced this one.
        Nothing waits: with this broker every partition's only in-sync replica, the
        transaction's markers are done here."""
        remaining = set(partitions)
        if self.local is None:
            return remaining, None
        for tp in remaining:
            info = self.metadata_cache.partition(tp)
            if info is None or info.leader != self.broker_id:
                return remaining, None
        marker = _marker(producer_id, producer_epoch, committed, coordinator_epoch, remaining)
        appended = self.local({"markers": [marker]})
        answer = appended.now()
        if answer is None:
            return remaining, appended
        if self._acknowledged(answer, remaining):
            return None
        return remaining, None

    async def write(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
        still_owner: Callable[[], bool],
        appended: AppendedMarkers | None = None,
    ) -> bool:
        """Write the marker to every partition; False if this coordinator was fenced
        or lost the transactional id meanwhile (``still_owner``). ``appended``: markers
        ``write_now`` appended to some of ``partitions``, whose answer comes first."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        if appended is not None and self._acknowledged(await appended(), remaining):
            return False
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
                marker = _marker(producer_id, producer_epoch, committed, coordinator_epoch, tps)
                try:
                    answer = await self._request(leader, {"markers": [marker]})
                except KafkaError as exc:
                    log.debug("markers to broker %d failed: %r", leader, exc)
                    return
                if self._acknowledged(answer, remaining):
                    fenced = True

            if len(by_leader) == 1:  # the usual case: no tasks to start
                [(leader, tps)] = by_leader.items()
                await send(leader, tps)
            else:
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

    def _acknowledged(
        self, answer: bodies.WriteTxnMarkersResponse, remaining: set[TopicPartition]
    ) -> bool:
        """Drop from ``remaining`` the partitions ``answer`` says are done; True when
        it says a newer coordinator fenced this one."""
        fenced = False
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
        return fenced

    async def _request(
        self, broker_id: int, body: bodies.WriteTxnMarkersRequest
    ) -> bodies.WriteTxnMarkersResponse:
        if broker_id == self.broker_id and self.local is not None:
            appended = self.local(body)
            now = appended.now()
            if now is not None:
                return now
            return await appended()
        answer: bodies.WriteTxnMarkersResponse = await self.links.request(
            broker_id, ApiKey.WRITE_TXN_MARKERS, body
        )
        return answer

    async def aclose(self) -> None:
        await self.links.aclose()


def _marker(
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    tps: Iterable[TopicPartition],
) -> bodies.WriteTxnMarkersRequestMarker:
    return {
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "transaction_result": committed,
        "topics": _topics(tps),
        "coordinator_epoch": coordinator_epoch,
    }


def _topics(tps: Iterable[TopicPartition]) -> list[bodies.WriteTxnMarkersRequestMarkerTopic]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]
