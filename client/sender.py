"""The producer's sender: drains ready batches into Produce requests, one per leader.

How this works. One task loops: it expires batches whose delivery timeout passed,
then walks the partitions that hold batches and takes the head batch of each partition
that is ready (full, lingered, flushing, or a retry whose backoff ended) and whose
leader is known and has fewer than ``max_in_flight`` requests outstanding. Batches of
partitions led by the same broker go into ONE Produce request (up to
``max_request_size`` bytes), sent from a short task per request; the connection
pipelines them. Then the loop sleeps until the accumulator's wakeup event (a batch
opened or filled, a request finished) or the next linger deadline.

``Producer.send`` with no linger drains from the caller's task instead (``drain_here``)
and waits for its own request there, without a cancel scope: one scheduler pass per
round trip. The loop then also watches those requests' deadlines (``_watch``) and
breaks the connection of one left unanswered, as Kafka's clients do; a caller
cancelled mid-request hands the request to a task, which carries it on.

A partition error that is retriable (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
NETWORK_EXCEPTION, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, ...) puts the batch back at
the head of its partition after ``retry_backoff`` and asks for fresh metadata, so the
retry goes to the new leader; it gives up after ``retries`` attempts or at the batch's
delivery deadline.

Order within a partition: with ``preserve_order`` (the default) a partition with a
batch in flight is *muted* - its next batch waits until the answer came - so neither a
retry nor Trio's scheduling of two request tasks can swap batches (Kafka gets the same
guarantee from max.in.flight=1 or idempotence). Pipelining then happens across
partitions: up to ``max_in_flight`` requests per broker, each with other partitions'
batches. Without it a single partition pipelines too, and a retry may reorder it, like
Kafka's producer without idempotence.

With idempotence (``client/idempotence.py``) a partition pipelines up to 5 batches
instead, each carrying its sequence; the IdempotenceState decides when a partition's
head batch may go (retries in order), and the sender bumps the epoch or fails every
pending delivery on the errors that call for it.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import trio

from minibroker.client.accumulator import ProducerBatch, RecordAccumulator
from minibroker.client.errors import wire_error, with_context
from minibroker.client.idempotence import FATAL_ERRORS, RESET_ERRORS, IdempotenceState
from minibroker.client.metadata import ClusterClient
from minibroker.client.produce_request import ProduceBodies
from minibroker.net.calls import Call
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey, PackedBody, latest_version
from minibroker.protocol.errors import (
    DuplicateSequenceNumberError,
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from minibroker.protocol.records import Compression

log = logging.getLogger(__name__)

RESPONSE_MARGIN_S = 5.0  # beyond the broker's own acks timeout before we give up waiting
PRODUCE_VERSION = latest_version(ApiKey.PRODUCE)  # looked up once, not per request


def _with_partition(error: KafkaError, batch: ProducerBatch) -> KafkaError:
    """The same error class, its message naming the topic-partition."""
    return with_context(error, f"{batch.topic}-{batch.partition}")


class Sender:
    def __init__(
        self,
        cluster: ClusterClient,
        accumulator: RecordAccumulator,
        *,
        acks: int,
        max_in_flight: int,
        retries: int,
        retry_backoff_s: float,
        request_timeout_s: float,
        compression: Compression,
        max_request_size: int,
        on_batch_drained: Callable[[str, int], None],
        preserve_order: bool = True,
        idempotence: IdempotenceState | None = None,
        transactional_id: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.idempotence = idempotence
        self.acc = accumulator
        self.acks = acks
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.request_timeout_s = request_timeout_s
        self.compression = compression
        self.max_request_size = max_request_size
        self._bodies = ProduceBodies(acks, int(request_timeout_s * 1000), transactional_id)
        self._on_batch_drained = on_batch_drained
        self._in_flight: dict[int, int] = defaultdict(int)
        self.preserve_order = preserve_order
        self._muted: set[tuple[str, int]] = set()  # partitions with a batch in flight
        self.in_flight_batches: set[ProducerBatch] = set()  # failed by abort_in_flight()
        self._nursery: trio.Nursery | None = None  # run()'s, where requests are started
        # Requests that callers' tasks await without a cancel scope (drain_here), oldest
        # (earliest deadline) first: the drain loop times them out. While it holds any,
        # the loop's timer is armed for the oldest one (``_watching``).
        self._calls_here: dict[Call, None] = {}
        self._watching = False
        self.retrying: dict[tuple[str, int], KafkaError] = {}
        """Partitions whose batch waits to be sent again, with the error that sent it
        back; a partition leaves once one of its batches is answered."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            if self.idempotence is not None and not self.idempotence.transactional:
                nursery.start_soon(self._init_producer_id)  # transactional: init_transactions
            try:
                while True:
                    self.acc.wakeup = trio.Event()
                    now = trio.current_time()
                    for batch in self.acc.expire(now):
                        self._fail(batch, self._expired(batch))
                    next_at = min(self._drain(now, nursery), self._watch(now, nursery))
                    if next_at == math.inf:  # no timer to arm: the usual case, cheaper
                        await self.acc.wakeup.wait()
                        continue
                    with trio.move_on_at(next_at):
                        await self.acc.wakeup.wait()
            finally:
                self._nursery = None  # closing: drain_here starts nothing more
                with trio.CancelScope(shield=True):
                    # Nobody watches their deadlines any more: they fail now, as the
                    # requests of the sender's own tasks do when it closes.
                    for call in list(self._calls_here):
                        await self.cluster.time_out(call)

    def _expired(self, batch: ProducerBatch) -> KafkaError:
        """The error of a batch whose delivery timeout ran out: with the retriable
        error it was last sent back with, the reason it never got through."""
        last = self.retrying.get((batch.topic, batch.partition))
        why = "delivery timeout expired"
        return RequestTimedOutError(why if last is None else f"{why}; last error: {last}")

    def _watch(self, now: float, nursery: trio.Nursery) -> float:
        """Time out the requests awaited in callers' tasks whose deadline passed; returns
        the next deadline to look at (inf: none in flight, the timer is not needed)."""
        calls = self._calls_here
        while calls:
            call = next(iter(calls))
            if call.deadline > now:
                return call.deadline
            del calls[call]
            nursery.start_soon(self.cluster.time_out, call)
        self._watching = False
        return math.inf

    async def drain_here(self) -> None:
        """Start requests for the batches ready now; wait for one of them in this task.

        For ``Producer.send`` with no linger, right after it appended its record: the
        request goes out from the caller's task, which then reads the answer itself, so
        a round trip costs one scheduler pass (the wait for the socket) instead of three
        (start a task, that task's wait, waking the caller). That takes a connection
        already open to the leader; otherwise, and for every other request, a task
        sends it. A caller cancelled meanwhile hands its request to a task of the
        sender, which carries it on: the records still go, as if a task had sent them.

        The batch opened for the record did not wake the loop (``draining_next``): the
        loop is woken here only if something is left for it (a batch that cannot go
        yet, or whose leader is unknown).
        """
        nursery = self._nursery
        here: tuple[int, list[ProducerBatch], Connection] | None = None
        if nursery is not None:  # None: closing, nothing more starts
            for node, batches in self._take_ready(trio.current_time())[1].items():
                conn = None
                if here is None and self.acks:  # acks=0: nothing to wait for, a task sends it
                    conn = self.cluster.usable_connection(node)
                if conn is None:
                    nursery.start_soon(self._produce, node, batches)
                else:
                    here = (node, batches, conn)
        if self.acc.has_queued_batches():
            self.acc.wakeup.set()
        if here is not None:
            await self._produce_here(*here)

    async def _init_producer_id(self) -> None:
        idempotence = self.idempotence
        assert idempotence is not None
        await idempotence.init_producer_id(self.cluster, self.retry_backoff_s)
        fatal = idempotence.fatal
        if isinstance(fatal, UnsupportedVersionError) and not idempotence.explicit:
            # A broker without InitProducerId: idempotence was only the default, so the
            # producer goes on without it (batches not sent yet carry no sequence).
            log.warning("the cluster does not serve InitProducerId: idempotence is off")
            self.idempotence = None
        elif fatal is not None:
            self.acc.abort_all(fatal)
        self.acc.wakeup.set()

    def _drain(self, now: float, nursery: trio.Nursery) -> float:
        """Start requests for every ready batch that can go; returns the next deadline."""
        next_at, by_node = self._take_ready(now)
        for node, batches in by_node.items():
            nursery.start_soon(self._produce, node, batches)
        return next_at

    def _take_ready(self, now: float) -> tuple[float, dict[int, list[ProducerBatch]]]:
        """Take every ready batch that can go, grouped by leader (one request each, its
        in-flight slot taken: the caller sends it); also returns when to look again."""
        idempotence = self.idempotence
        if idempotence is not None:
            if idempotence.fatal is not None:
                self.acc.abort_all(idempotence.fatal)
                return math.inf, {}
            idempotence.maybe_bump()
        acc = self.acc
        meta = self.cluster.metadata
        by_node: dict[int, list[ProducerBatch]] = {}
        bytes_by_node: dict[int, int] = {}
        next_at = math.inf
        unknown_leader = False
        # Comparisons, not min(): this runs for every send-and-wait.
        for topic, partition, queue in acc.partitions_with_batches():
            batch = queue[0]
            if batch.deadline < next_at:
                next_at = batch.deadline
            ready_at = acc.head_ready_at(batch)
            if ready_at > now:
                if ready_at < next_at:
                    next_at = ready_at
                continue
            leader = meta.leader(topic, partition)
            if leader < 0 or leader not in meta.brokers:
                unknown_leader = True
                continue
            if self._in_flight[leader] >= self.max_in_flight:
                continue  # a finishing request sets the wakeup event
            if idempotence is not None:
                if not idempotence.may_send(batch):
                    continue  # a request finishing sets the wakeup event
            elif (topic, partition) in self._muted:
                continue  # its previous batch is in flight (preserve_order)
            taken = bytes_by_node.get(leader, 0)
            if taken and taken + batch.size > self.max_request_size:
                next_at = now  # the rest goes in the next request, right away
                continue
            queue.popleft()
            if not batch.sealed:
                self._on_batch_drained(topic, partition)  # a lingered batch: move sticky on
            batch.sealed = True
            batches = by_node.get(leader)
            if batches is None:
                by_node[leader] = [batch]
            else:
                batches.append(batch)
            bytes_by_node[leader] = taken + batch.size
            if idempotence is not None:
                idempotence.sending(batch)
            elif self.preserve_order:
                self._muted.add((topic, partition))
        if unknown_leader:
            self.cluster.request_update()
            next_at = min(next_at, now + self.retry_backoff_s)
        for node, batches in by_node.items():
            self._in_flight[node] += 1
            self.in_flight_batches.update(batches)
        return next_at, by_node

    def _request_body(self, batches: list[ProducerBatch]) -> dict[str, Any] | PackedBody:
        if len(batches) == 1:  # a send-and-wait's request: packed from a cached prefix
            batch = batches[0]
            return self._bodies.one_batch(
                batch.topic, batch.partition, batch.encode(self.compression)
            )
        return self._bodies.body(
            [(batch.topic, batch.partition, batch.encode(self.compression)) for batch in batches]
        )

    async def _produce(
        self, node: int, batches: list[ProducerBatch], call: Call | None = None
    ) -> None:
        """One Produce request, in a task of the sender's nursery. ``call``: the request
        of a ``drain_here`` whose caller was cancelled, carried on from where it was."""
        try:
            if call is not None:
                response = await self.cluster.response(call)
            else:
                body = self._request_body(batches)
                if self.acks == 0:
                    await self.cluster.send(node, ApiKey.PRODUCE, body)
                    self.in_flight_batches.difference_update(batches)
                    for batch in batches:
                        self.acc.finish(batch, base_offset=-1)
                    return
                # The broker answers acks=all within timeout_ms; allow the network a margin.
                response = await self.cluster.request(
                    node, ApiKey.PRODUCE, body, timeout=self.request_timeout_s + RESPONSE_MARGIN_S
                )
        except KafkaError as exc:  # network, timeout, or a request-level error
            self._request_failed(batches, exc)
            return
        finally:
            self._answered(node, batches)
        # Not in `finally`: a request cancelled by close() leaves its batches here, and
        # abort_in_flight() fails them.
        self.in_flight_batches.difference_update(batches)
        self._handle_response(batches, response)

    async def _produce_here(
        self, node: int, batches: list[ProducerBatch], conn: Connection
    ) -> None:
        """``_produce`` in the calling task (``drain_here``), on an open connection."""
        call = None
        calls = self._calls_here
        try:
            body = self._request_body(batches)
            call = conn.call(
                ApiKey.PRODUCE,
                body,
                version=PRODUCE_VERSION,
                timeout=self.request_timeout_s + RESPONSE_MARGIN_S,
            )
            # Its deadline is the drain loop's to enforce (see _watch): no cancel scope.
            calls[call] = None
            if not self._watching:  # the loop arms its timer for it
                self._watching = True
                self.acc.wakeup.set()
            response = await self.cluster.response(call, bounded=False)
        except KafkaError as exc:
            if call is not None:
                calls.pop(call, None)
            if self._nursery is None:  # closed meanwhile: nothing would send a retry
                self.in_flight_batches.difference_update(batches)
                for batch in batches:
                    if not batch.done.is_set():  # abort_in_flight() may have been first
                        self._fail(batch, exc)
            else:
                self._request_failed(batches, exc)
            self._answered(node, batches)
            return
        except BaseException:
            if call is not None:
                calls.pop(call, None)
            # The caller was cancelled (or interrupted): a task carries the request on,
            # sending it if it is not on the wire yet, so the records are not lost.
            nursery = self._nursery
            if nursery is not None:
                nursery.start_soon(self._produce, node, batches, call)
            else:  # closing: abort_in_flight() fails the batches
                if call is not None:
                    call.abandon()
                self._answered(node, batches)
            raise
        calls.pop(call, None)  # _watch dropped it if the answer came at its deadline
        self._answered(node, batches)
        self.in_flight_batches.difference_update(batches)
        if self._nursery is None:  # closed meanwhile: abort_in_flight() may have been first
            batches = [batch for batch in batches if not batch.done.is_set()]
        self._handle_response(batches, response)

    def _request_failed(self, batches: list[ProducerBatch], error: KafkaError) -> None:
        """A Produce request failed as a whole: retry or fail each of its batches."""
        self.in_flight_batches.difference_update(batches)
        for batch in batches:
            self._retry_or_fail(batch, error)

    def _answered(self, node: int, batches: list[ProducerBatch]) -> None:
        """A Produce request is over (answered, failed or cancelled): its slot and its
        partitions are free again."""
        self._in_flight[node] -= 1
        for batch in batches:
            self._muted.discard((batch.topic, batch.partition))
            if self.idempotence is not None:
                self.idempotence.answered(batch)
        if self.acc.has_queued_batches():
            # A batch may have waited for this request's slot or its partition (or, with
            # idempotence, for its turn or an epoch bump): the drain loop looks again.
            # With none queued it would find nothing; a retry re-queued wakes it itself.
            self.acc.wakeup.set()

    def _handle_response(self, batches: list[ProducerBatch], response: dict[str, Any]) -> None:
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for topic in response.get("topics", ()):
            for part in topic["partitions"]:
                results[(topic["name"], part["index"])] = part
        for batch in batches:
            part = results.get((batch.topic, batch.partition))
            if part is None:
                self._retry_or_fail(batch, NetworkError("the broker did not answer for it"))
                continue
            code = part.get("error_code", 0)
            if code == DuplicateSequenceNumberError.code:
                code = 0  # Kafka's answer to a retry it had already written: a success
            if code:
                where = f"{batch.topic}-{batch.partition}"
                self._retry_or_fail(batch, wire_error(code, where, part.get("error_message")))
            else:
                if self.idempotence is not None:
                    self.idempotence.completed(batch)
                if self.retrying:
                    self.retrying.pop((batch.topic, batch.partition), None)
                self.acc.finish(
                    batch,
                    base_offset=part.get("base_offset", -1),
                    log_append_time=part.get("log_append_time_ms", -1),
                )

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        now = trio.current_time()
        retriable = error.retriable
        idempotence = self.idempotence
        if idempotence is not None:
            if idempotence.fatal is not None or isinstance(error, FATAL_ERRORS):
                if idempotence.fatal is None:
                    idempotence.fatal = _with_partition(error, batch)
                self._fail(batch, idempotence.fatal)
                self.acc.abort_all(idempotence.fatal)
                return
            if isinstance(error, RESET_ERRORS):
                # The oldest pending batch refused: the leader lost this producer's
                # earlier batches; a later one: an earlier batch is missing, retry.
                if idempotence.is_oldest(batch):
                    log.warning("%s: %s for the oldest pending batch", error, batch.base_sequence)
                    idempotence.request_bump()
                retriable = True
        if retriable and batch.attempts < self.retries and now < batch.deadline:
            batch.attempts += 1
            self.retrying[(batch.topic, batch.partition)] = error
            self.cluster.request_update()
            self.acc.reenqueue(batch, now + self.retry_backoff_s)
        else:
            self._fail(batch, error)

    def abort_in_flight(self, error: KafkaError) -> None:
        """Fail batches whose request was cancelled (the producer closed mid-request)."""
        for batch in self.in_flight_batches:
            if not batch.done.is_set():
                self._fail(batch, error)
        self.in_flight_batches.clear()

    def _fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        if self.idempotence is not None:
            self.idempotence.completed(batch)
            if self.idempotence.first_failure is None:
                self.idempotence.first_failure = error
        self.retrying.pop((batch.topic, batch.partition), None)
        self.acc.finish(batch, _with_partition(error, batch))
