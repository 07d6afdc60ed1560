"""The producer's record accumulator: per-partition batches waiting to be sent.

How this works. ``append`` is the producer's per-record hot path, so it does a few
dict and list operations and nothing else: no Trio task, no lock (Trio runs one task at
a time, and ``append`` never awaits), no encoding. A partition has a deque of batches;
the last one is open and takes records while its estimated size stays within
``batch_size`` (a record that would overflow it goes to a new batch, unless the batch is
empty: one oversized record still travels alone), then it is sealed and a new one opens
(which moves a sticky partition on). The sender walks ``partitions_with_batches`` and
takes the head batch of a partition once ``head_ready_at`` says it may go (full,
lingered ``linger_ms``, flushing, or a retry whose backoff is over): at most one batch
per partition per request (Kafka's drain), so a partition's batches leave in order.

A batch keeps its records as parallel lists. While no record carries a key, headers or
an explicit timestamp, the batch is "simple" and encodes with ``encode_values`` (one
timestamp, the time the batch opened: at most ``linger_ms`` earlier than the record's
own send time), which is several times faster than the general encoder.

Completion: a batch owns one ``trio.Event``; each record's :class:`Delivery` is just
(batch, index) and reads its offset as ``base_offset + index`` once the event is set.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import trio

from minibroker.protocol.errors import KafkaError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Header,
    Record,
    encode_batch,
    encode_values,
)

RECORD_OVERHEAD = 12  # bytes a small record adds besides key and value (varints, attributes)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed. ``offset`` is -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerBatch:
    """Records for one partition that travel (and succeed or fail) together."""

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "created",
        "deadline",
        "done",
        "encoded",
        "error",
        "headers",
        "keys",
        "log_append_time",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "sealed",
        "simple",
        "size",
        "timestamp",
        "timestamps",
        "topic",
        "transactional",
        "values",
    )

    def __init__(self, topic: str, partition: int, now: float, timestamp: int, deadline: float):
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None  # None while every key is None
        self.headers: list[tuple[Header, ...]] | None = None
        self.timestamps: list[int | None] | None = None
        self.size = BATCH_HEADER_SIZE
        self.created = now
        self.timestamp = timestamp  # wall-clock ms given to records without their own
        self.deadline = deadline
        self.sealed = False
        self.simple = True  # no keys, headers or own timestamps so far: the fast encoder
        self.retry_at = 0.0
        self.attempts = 0
        self.encoded: bytes | None = None
        self.done = trio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.producer_id = -1  # idempotence: set when first drained, kept by retries
        self.producer_epoch = -1
        self.base_sequence = -1
        self.transactional = False

    def set_producer(
        self, producer_id: int, epoch: int, base_sequence: int, *, transactional: bool = False
    ) -> None:
        """Stamp the idempotent producer's id, epoch and this batch's first sequence
        (``transactional``: a transactional producer's batch, KIP-98)."""
        self.producer_id, self.producer_epoch = producer_id, epoch
        self.base_sequence = base_sequence
        self.transactional = transactional
        self.encoded = None  # the header fields changed: encode again

    def __len__(self) -> int:
        return len(self.values)

    def encode(self, compression: Compression) -> bytes:
        """The batch as RecordBatch v2 bytes (encoded once, reused by retries)."""
        if self.encoded is None:
            # A null value needs the general encoder (`in` is one C-level scan).
            if self.simple and None not in self.values:
                values = cast(list[bytes], self.values)
                self.encoded = encode_values(
                    values,
                    timestamp=self.timestamp,
                    compression=compression,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=self.base_sequence,
                    transactional=self.transactional,
                )
            else:
                self.encoded = self._encode_general(compression)
        return self.encoded

    def _encode_general(self, compression: Compression) -> bytes:
        n = len(self.values)
        keys = self.keys or [None] * n
        headers = self.headers or [()] * n
        stamps = self.timestamps or [None] * n
        records = [
            Record(value=self.values[i], key=keys[i], headers=headers[i], timestamp=stamps[i])
            for i in range(n)
        ]
        return encode_batch(
            records,
            compression=compression,
            now_ms=self.timestamp,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            transactional=self.transactional,
        )

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.done.set()

    def fail(self, error: KafkaError) -> None:
        self.error = error
        self.done.set()

    def record_timestamp(self, index: int) -> int:
        if self.log_append_time >= 0:
            return self.log_append_time
        if self.timestamps is not None:
            own = self.timestamps[index]
            if own is not None:
                return own
        return self.timestamp


class PendingRecord:
    """Stands in for the batch of a record whose topic's metadata is not known yet."""

    __slots__ = ("error", "ready", "target")

    def __init__(self) -> None:
        self.ready = trio.Event()
        self.target: Delivery | None = None
        self.error: KafkaError | None = None

    def resolve(self, target: Delivery | None, error: KafkaError | None = None) -> None:
        self.target = target
        self.error = error
        self.ready.set()


class Delivery(tuple[ProducerBatch | PendingRecord, int]):
    """The future outcome of one record sent with ``send_nowait``: (batch, index).

    A tuple so that making one is a single C call (``new_delivery``): it is created for
    every record on the producer's hot path.
    """

    __slots__ = ()

    def done(self) -> bool:
        batch = self[0]
        if isinstance(batch, PendingRecord):
            target = batch.target
            return batch.error is not None or (target is not None and target.done())
        return batch.done.is_set()

    def exception(self) -> KafkaError | None:
        """The error of a finished record, None if it succeeded or is still pending."""
        batch = self[0]
        if isinstance(batch, PendingRecord):
            target = batch.target
            return batch.error if target is None else target.exception()
        return batch.error

    async def result(self) -> RecordMetadata:
        """Wait for the broker's answer; raises the batch's KafkaError if it failed."""
        batch = self[0]
        if isinstance(batch, PendingRecord):
            await batch.ready.wait()
            if batch.error is not None:
                raise batch.error
            assert batch.target is not None
            return await batch.target.result()
        await batch.done.wait()
        return self.outcome()

    def outcome(self) -> RecordMetadata:
        """The result of a record that is ``done()``: its metadata, or its batch's error
        raised."""
        batch, index = self
        if isinstance(batch, PendingRecord):
            if batch.error is not None:
                raise batch.error
            assert batch.target is not None
            return batch.target.outcome()
        if batch.error is not None:
            raise batch.error
        offset = -1 if batch.base_offset < 0 else batch.base_offset + index
        return RecordMetadata(batch.topic, batch.partition, offset, batch.record_timestamp(index))


def new_delivery(batch: ProducerBatch | PendingRecord, index: int) -> Delivery:
    return tuple.__new__(Delivery, (batch, index))


BatchClosed = Callable[[str, int], None]


def _sequence_before(first: int, second: int) -> bool:
    """Does sequence ``first`` come before ``second``? Sequences wrap at 2**31, and the
    unacknowledged ones of a partition always lie within a small window."""
    return first != second and (second - first) % 2**31 < 2**30


class RecordAccumulator:
    """Per-partition deques of batches; the open batch of each is the last one."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_s: float,
        delivery_timeout_s: float,
        on_batch_closed: BatchClosed,
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.delivery_timeout_s = delivery_timeout_s
        self._on_batch_closed = on_batch_closed
        self._wall_ms = wall_clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._queues: dict[str, dict[int, deque[ProducerBatch]]] = {}
        self.flushing = False
        self.pending_batches = 0  # batches opened and not yet completed or failed
        # Made by a waiter, set (and dropped) when pending_batches reaches 0 / a batch
        # finishes: a send-and-wait then makes no event nobody waits on.
        self._idle: trio.Event | None = None  # flush() waits on it
        self.sealed_count = 0  # batches filled up so far: enqueue() yields when it moves
        self._progress: trio.Event | None = None  # enqueue()'s back-pressure waits on it
        self.wakeup = trio.Event()  # set when a batch is sealed or opened: the sender looks
        # Set by a caller that drains right after appending (a send with no linger): the
        # batch it opens then does not wake the sender's loop, which would find nothing.
        self.draining_next = False

    def append(
        self,
        topic: str,
        partition: int,
        value: bytes | None,
        key: bytes | None,
        headers: tuple[Header, ...] | None,
        timestamp: int | None,
    ) -> tuple[ProducerBatch, int]:
        """Add one record to its partition's open batch; returns (batch, index)."""
        partitions = self._queues.get(topic)
        if partitions is None:
            partitions = self._queues[topic] = {}
        queue = partitions.get(partition)
        if queue is None:
            queue = partitions[partition] = deque()
        size = RECORD_OVERHEAD + (len(value) if value is not None else 0)
        if key is not None:
            size += len(key)
        if headers:
            size += sum(len(k) + len(v or b"") + 2 for k, v in headers)
        batch = queue[-1] if queue else None
        if (
            batch is not None
            and not batch.sealed
            and batch.values
            and batch.size + size > self.batch_size  # would overflow: full as it is
        ):
            self.seal(batch)
        if batch is None or batch.sealed:
            batch = self._open(topic, partition, queue)
        index = len(batch.values)
        batch.values.append(value)
        if key is not None or batch.keys is not None:
            if batch.keys is None:
                batch.keys = [None] * index
                batch.simple = False
            batch.keys.append(key)
        if headers or batch.headers is not None:
            if batch.headers is None:
                batch.headers = [()] * index
                batch.simple = False
            batch.headers.append(headers or ())
        if timestamp is not None or batch.timestamps is not None:
            if batch.timestamps is None:
                batch.timestamps = [None] * index
                batch.simple = False
            batch.timestamps.append(timestamp)
        batch.size += size
        if batch.size >= self.batch_size:
            self.seal(batch)
        return batch, index

    def seal(self, batch: ProducerBatch) -> None:
        """A batch is full: no more records go in, the sender may take it now."""
        batch.sealed = True
        self.sealed_count += 1
        self.wakeup.set()
        self._on_batch_closed(batch.topic, batch.partition)

    def _open(self, topic: str, partition: int, queue: deque[ProducerBatch]) -> ProducerBatch:
        now = trio.current_time()
        batch = ProducerBatch(topic, partition, now, self._wall_ms(), now + self.delivery_timeout_s)
        queue.append(batch)
        self.pending_batches += 1
        if not self.draining_next:
            self.wakeup.set()
        return batch

    def seal_all(self) -> None:
        """Flush: every open batch becomes sendable now."""
        for partitions in self._queues.values():
            for queue in partitions.values():
                if queue:
                    queue[-1].sealed = True
        self.wakeup.set()

    def has_queued_batches(self) -> bool:
        """Whether any batch waits to be sent (open, sealed or a retry)."""
        for partitions in self._queues.values():  # loops, not any(): twice per send
            for queue in partitions.values():
                if queue:
                    return True
        return False

    def partitions_with_batches(self) -> Iterator[tuple[str, int, deque[ProducerBatch]]]:
        for topic, partitions in self._queues.items():
            for partition, queue in partitions.items():
                if queue:
                    yield topic, partition, queue

    def head_ready_at(self, batch: ProducerBatch) -> float:
        """When the head batch of a partition may be sent (Trio clock)."""
        if batch.attempts:
            return batch.retry_at
        if batch.sealed or self.flushing:
            return 0.0
        return batch.created + self.linger_s

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a batch that failed retriably back at the head of its partition."""
        batch.retry_at = retry_at
        batch.sealed = True
        queue = self._queues[batch.topic][batch.partition]
        if batch.base_sequence < 0:
            queue.appendleft(batch)
        else:
            # Idempotence: retries wait at the head in sequence order, before new batches.
            at = 0
            while (
                at < len(queue)
                and queue[at].base_sequence >= 0
                and _sequence_before(queue[at].base_sequence, batch.base_sequence)
            ):
                at += 1
            queue.insert(at, batch)
        self.wakeup.set()

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove batches whose delivery timeout passed while waiting to be sent."""
        expired: list[ProducerBatch] = []
        for partitions in self._queues.values():
            for queue in partitions.values():
                while queue and queue[0].deadline <= now:
                    expired.append(queue.popleft())
        return expired

    def finish(
        self,
        batch: ProducerBatch,
        error: KafkaError | None = None,
        base_offset: int = -1,
        log_append_time: int = -1,
    ) -> None:
        """Complete or fail a batch that left the accumulator for good."""
        if error is None:
            batch.complete(base_offset, log_append_time)
        else:
            batch.fail(error)
        self.pending_batches -= 1
        if self.pending_batches == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    async def wait_progress(self) -> None:
        """Until the next batch completes or fails."""
        if self._progress is None:
            self._progress = trio.Event()
        await self._progress.wait()

    async def wait_idle(self) -> None:
        """Until every batch opened so far has completed or failed."""
        while self.pending_batches:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    def abort_all(self, error: KafkaError) -> None:
        for partitions in self._queues.values():
            for queue in partitions.values():
                while queue:
                    self.finish(queue.popleft(), error)
