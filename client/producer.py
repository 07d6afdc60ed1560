"""Producer: ``async with Producer("h:p", acks="all") as p: await p.send(topic, value)``.

How this works. ``send_nowait`` picks the partition (explicit, murmur2 of the key, or
the topic's sticky partition) and appends the record to the accumulator; that is all
the per-record work, so a tight loop of ``send_nowait`` runs at well over a million
records a second. The sender task (client/sender.py) turns ready batches into one
Produce request per leader. A record of a topic whose metadata the client has not seen
yet waits in a per-topic list until a metadata request answers, then is appended.

``send`` waits for the record's acknowledgement; ``send_nowait`` returns a
:class:`Delivery` at once; ``enqueue`` is ``send_nowait`` for loops that produce faster
than the network drains: it waits while ``buffer_memory`` worth of batches is
outstanding and yields to the sender whenever a batch fills. ``flush`` makes every
batch sendable now and waits until all of them completed. Leaving the ``async with``
block flushes (unless it is left by an exception, which cancels what is unsent).

Idempotence (``enable_idempotence``, on by default with acks="all" as in Kafka 3): the
producer takes an id from the cluster and numbers its batches per partition, so a
retry after a lost answer or a leader change is never written twice and a partition's
records stay in send order with up to 5 batches in flight (client/idempotence.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Literal, Unpack

import trio

from minibroker.client.accumulator import (
    RECORD_OVERHEAD,
    Delivery,
    PendingRecord,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    new_delivery,
)
from minibroker.client.background import BackgroundTasks
from minibroker.client.errors import with_context
from minibroker.client.idempotence import MAX_IN_FLIGHT, IdempotenceState
from minibroker.client.metadata import ClusterClient
from minibroker.client.partitioner import StickyPartitioner
from minibroker.client.security import SecurityOptions, client_security
from minibroker.client.sender import Sender
from minibroker.client.transactions import GroupMetadata, TransactionManager
from minibroker.net.security import ClientSecurity
from minibroker.protocol.compression import CODEC_NAMES
from minibroker.protocol.errors import ConfigError, KafkaError, MinibrokerError
from minibroker.protocol.heap import keep_freed_memory
from minibroker.protocol.records import Compression, Header

__all__ = ["Delivery", "Producer", "RecordMetadata"]

_tuple_new = tuple.__new__  # makes a Delivery in one C call (see accumulator.Delivery)
METADATA_RETRY_S = 0.1  # between metadata refreshes while a record waits for its partition
MAX_BLOCK_S = 60.0  # Kafka's max.block.ms: how long a record waits for its topic's metadata


def _acks(value: Literal["all", 0, 1, -1] | str | int) -> int:
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise ConfigError(f"acks must be all, -1, 0 or 1, not {value!r}")


def _compression(value: str | None) -> Compression:
    codec = CODEC_NAMES.get(value or "none")
    if codec is None:
        raise ConfigError(f"compression must be one of {', '.join(CODEC_NAMES)}, not {value!r}")
    return codec


class Producer:
    """A Trio-native Kafka-style producer; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        acks: Literal["all", 0, 1, -1] | str | int = "all",
        linger_ms: float = 5,
        batch_size: int = 16384,
        max_in_flight: int = 5,
        retries: int = 2**31 - 1,
        retry_backoff_ms: float = 100,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: float = 30_000,
        compression: str | None = None,
        max_request_size: int = 1_048_576,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = MAX_BLOCK_S * 1000,
        preserve_order: bool = True,
        client_id: str = "minibroker-producer",
        allow_auto_create_topics: bool = True,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        config: Mapping[str, str] | ClientSecurity | None = None,
        **security: Unpack[SecurityOptions],
    ) -> None:
        """``config`` / ``security``: TLS and SASL, as Kafka's client properties
        (client/security.py). ``transactional_id``: a transactional producer
        (client/transactions.py): ``await init_transactions()`` first, then records go
        in transactions; it needs idempotence."""
        if batch_size <= 0 or max_in_flight <= 0 or linger_ms < 0:
            raise ConfigError("batch_size and max_in_flight must be > 0, linger_ms >= 0")
        self.acks = _acks(acks)
        if transactional_id is not None:
            if enable_idempotence is False:
                raise ConfigError("a transactional producer needs enable_idempotence")
            enable_idempotence = True
        explicit = enable_idempotence is not None
        if enable_idempotence is None:  # Kafka 3: on unless the settings forbid it
            enable_idempotence = self.acks == -1 and max_in_flight <= MAX_IN_FLIGHT and retries > 0
        elif enable_idempotence and (
            self.acks != -1 or max_in_flight > MAX_IN_FLIGHT or retries <= 0
        ):
            raise ConfigError(
                "enable_idempotence needs acks='all', max_in_flight <= 5 and retries > 0"
            )
        self._idempotence = (
            IdempotenceState(explicit=explicit, transactional=transactional_id is not None)
            if enable_idempotence
            else None
        )
        keep_freed_memory()  # batches of up to max_request_size: see protocol/heap.py
        self.cluster = ClusterClient(
            bootstrap_servers,
            security=client_security(config, **security),
            client_id=client_id,
            request_timeout_s=request_timeout_ms / 1000,
            allow_auto_topic_creation=allow_auto_create_topics,
        )
        self._partitioner = StickyPartitioner()
        self._acc = RecordAccumulator(
            batch_size=batch_size,
            linger_s=linger_ms / 1000,
            delivery_timeout_s=delivery_timeout_ms / 1000,
            on_batch_closed=self._batch_closed,
        )
        self._sender = Sender(
            self.cluster,
            self._acc,
            acks=self.acks,
            max_in_flight=max_in_flight,
            retries=retries,
            retry_backoff_s=retry_backoff_ms / 1000,
            request_timeout_s=request_timeout_ms / 1000,
            compression=_compression(compression),
            max_request_size=max_request_size,
            on_batch_drained=self._batch_closed,
            preserve_order=preserve_order,
            idempotence=self._idempotence,
            transactional_id=transactional_id,
        )
        self._max_pending_batches = max(1, buffer_memory // batch_size)
        self._batch_size = batch_size
        self._max_block_s = max_block_ms / 1000
        self._sticky_batches: dict[str, ProducerBatch] = {}  # the open batch null keys go to
        self._sealed_seen = 0
        self._waiting: dict[
            str,
            list[
                tuple[
                    PendingRecord,
                    bytes | None,
                    bytes | None,
                    tuple[Header, ...] | None,
                    int | None,
                    int | None,
                ]
            ],
        ] = {}
        self._metadata_done = trio.Event()
        self._metadata_done.set()
        self._tasks = BackgroundTasks()
        self._transactions: TransactionManager | None = None
        if transactional_id is not None:
            assert self._idempotence is not None
            self._transactions = TransactionManager(
                self.cluster,
                self._idempotence,
                transactional_id,
                timeout_ms=transaction_timeout_ms,
                flush=self.flush,
                wake_sender=self._wake_sender,
                spawn=self._spawn,
            )

    def _wake_sender(self) -> None:
        self._acc.wakeup.set()

    def _spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        nursery = self._tasks.nursery
        if nursery is None:
            raise MinibrokerError("the producer is not open (use it as `async with`)")
        nursery.start_soon(fn)

    # --- transactions ----------------------------------------------------------------

    def _txn(self) -> TransactionManager:
        if self._transactions is None:
            raise MinibrokerError("transactions need Producer(transactional_id=...)")
        return self._transactions

    async def init_transactions(self) -> None:
        """Get the producer id and epoch of ``transactional_id`` from its coordinator,
        fencing earlier producers with the same id (their open transaction is aborted)."""
        await self._txn().init_transactions()

    def begin_transaction(self) -> None:
        self._txn().begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_metadata: GroupMetadata | str,
    ) -> None:
        """Commit the group's ``offsets`` (next offset to read per partition) with the
        transaction: ``group_metadata`` is ``Consumer.group_metadata()`` (or a group id)."""
        await self._txn().send_offsets_to_transaction(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Flush, then commit; raises if a record of the transaction failed (abort)."""
        await self._txn().commit_transaction()

    async def abort_transaction(self) -> None:
        await self._txn().abort_transaction()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``async with producer.transaction():`` begins a transaction, commits it when
        the block ends, aborts it when the block raises (and re-raises)."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.abort_transaction()
            raise
        await self.commit_transaction()

    @property
    def enable_idempotence(self) -> bool:
        """Whether batches carry producer ids and sequences (off again when it was only
        the default and the cluster does not serve InitProducerId)."""
        return self._sender.idempotence is not None

    def retrying(self) -> dict[tuple[str, int], KafkaError]:
        """Partitions whose records wait to be sent again, each with the retriable error
        that sent them back (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, ...): what a
        ``flush`` or ``send`` is waiting for, until ``delivery_timeout_ms``."""
        return dict(self._sender.retrying)

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        nursery = await self._tasks.open()
        try:
            await nursery.start(self.cluster.run)
            await nursery.start(self._sender.run)
        except BaseException:
            await self._tasks.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            if exc is None:
                await self.flush()
        finally:
            self._acc.abort_all(KafkaError("the producer was closed before sending"))
            await self._tasks.close()
            self._sender.abort_in_flight(KafkaError("the producer was closed while sending"))
            for topic, waiting in self._waiting.items():  # their metadata never came
                for pending, *_ in waiting:
                    pending.resolve(None, KafkaError(f"topic {topic!r}: the producer was closed"))
            self._waiting.clear()
            self._metadata_done.set()
            if self._transactions is not None:
                with trio.CancelScope(shield=True):
                    await self._transactions.aclose()
        return None

    # --- sending ---------------------------------------------------------------------

    def send_nowait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: tuple[Header, ...] | list[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Enqueue one record; the returned Delivery's ``result()`` gives its offset."""
        if self._waiting and topic in self._waiting:
            # Earlier records of the topic wait for its metadata: this one queues behind
            # them, or it would overtake them (send order is partition order).
            return self._wait_for_topic(topic, value, key, headers, partition, timestamp_ms)
        if key is None and partition is None and headers is None and timestamp_ms is None:
            # The hot path (a value for the topic's sticky partition): append straight to
            # its open batch. Everything else takes the general path below.
            batch = self._sticky_batches.get(topic)
            if (
                batch is not None
                and batch.simple
                and not batch.sealed
                and value is not None
                and batch.size + len(value) + RECORD_OVERHEAD <= self._batch_size
            ):
                values = batch.values
                index = len(values)
                values.append(value)
                batch.size += len(value) + RECORD_OVERHEAD
                if batch.size >= self._batch_size:
                    self._acc.seal(batch)
                return _tuple_new(Delivery, (batch, index))
        return self._place(topic, value, key, headers, partition, timestamp_ms, may_wait=True)

    def _place(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: tuple[Header, ...] | list[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
        *,
        may_wait: bool,
    ) -> Delivery:
        """``send_nowait`` past its hot path. A partition beyond the ones the metadata
        lists waits for fresher metadata when ``may_wait`` (a broker that just
        restarted may list only some), as Kafka's producer does up to max.block.ms."""
        meta = self.cluster.metadata
        info = meta.topics.get(topic)
        if info is None or not info.partitions:
            return self._wait_for_topic(topic, value, key, headers, partition, timestamp_ms)
        count = len(info.partitions)
        if partition is None:
            partitioner = self._partitioner
            sticky = partitioner.sticky(topic) if key is None else None
            if sticky is not None and sticky < count:
                partition = sticky  # what partitioner.partition would answer: skip it
            else:
                # The partitions with a leader are only looked at to choose a new sticky
                # one: not listed for every record (a list as long as the topic's).
                available = meta.available_partitions(topic) if key is None else ()
                partition = partitioner.partition(topic, key, count, available)
        elif may_wait and partition >= count and self._tasks.nursery is not None:
            return self._wait_for_topic(topic, value, key, headers, partition, timestamp_ms)
        elif not 0 <= partition < count:
            raise MinibrokerError(f"{topic}-{partition}: topic {topic!r} has {count} partitions")
        batch, index = self._acc.append(
            topic, partition, value, key, tuple(headers) if headers else None, timestamp_ms
        )
        if key is None and partition == self._partitioner.sticky(topic):
            self._sticky_batches[topic] = batch
        return _tuple_new(Delivery, (batch, index))

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: tuple[Header, ...] | list[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        acc = self._acc
        if acc.linger_s or self._waiting:
            delivery = self.send_nowait(topic, value, key, headers, partition, timestamp_ms)
            return await delivery.result()
        acc.draining_next = True  # drain_here below looks at once: no sender loop turn
        try:
            delivery = self.send_nowait(topic, value, key, headers, partition, timestamp_ms)
        finally:
            acc.draining_next = False
        # The request starts now, from this task, which mostly reads the answer itself.
        await self._sender.drain_here()
        if delivery.done():  # no further scheduler pass to collect it
            return delivery.outcome()
        return await delivery.result()

    async def enqueue(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: tuple[Header, ...] | list[Header] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """``send_nowait`` with back-pressure: waits while the buffer is full."""
        delivery = self.send_nowait(topic, value, key, headers, partition, timestamp_ms)
        acc = self._acc
        if acc.pending_batches > self._max_pending_batches:
            while acc.pending_batches > self._max_pending_batches:
                await acc.wait_progress()
        elif acc.sealed_count != self._sealed_seen:
            self._sealed_seen = acc.sealed_count
            await trio.lowlevel.checkpoint()  # let the sender ship the batch that filled
        return delivery

    async def wait_for_room(self) -> None:
        """Yield to the sender, and wait while more than ``buffer_memory`` is buffered.

        For loops calling ``send_nowait`` (cheaper than ``enqueue``): call this every few
        hundred records.
        """
        acc = self._acc
        while acc.pending_batches > self._max_pending_batches:
            await acc.wait_progress()
        await trio.lowlevel.checkpoint()

    async def flush(self) -> None:
        """Send everything buffered now and wait until every record is answered."""
        while self._waiting:
            await self._metadata_done.wait()
        self._acc.flushing = True
        try:
            self._acc.seal_all()
            await self._acc.wait_idle()
        finally:
            self._acc.flushing = False

    # --- internals -------------------------------------------------------------------

    def _batch_closed(self, topic: str, partition: int) -> None:
        meta = self.cluster.metadata
        self._partitioner.on_new_batch(
            topic, partition, meta.partition_count(topic), meta.available_partitions(topic)
        )

    def _partitions_named(self, topic: str) -> int:
        """How many partitions the records waiting for ``topic`` need it to have."""
        named = [w[4] for w in self._waiting.get(topic, ()) if w[4] is not None]
        return max(named, default=-1) + 1

    def _wait_for_topic(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: tuple[Header, ...] | list[Header] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> Delivery:
        nursery = self._tasks.nursery
        if nursery is None:
            raise MinibrokerError("the producer is not open (use `async with Producer(...)`)")
        pending = PendingRecord()
        delivery = new_delivery(pending, 0)
        waiting = self._waiting.get(topic)
        if waiting is None:
            waiting = self._waiting[topic] = []
            if self._metadata_done.is_set():
                self._metadata_done = trio.Event()
            nursery.start_soon(self._fetch_topic, topic)
        waiting.append(
            (pending, value, key, tuple(headers) if headers else None, partition, timestamp_ms)
        )
        return delivery

    async def _fetch_topic(self, topic: str) -> None:
        error: KafkaError | None = None
        deadline = trio.current_time() + self._max_block_s
        try:
            info = await self.cluster.topic(topic, timeout_s=self._max_block_s)
            with trio.move_on_at(deadline):
                while len(info.partitions) < self._partitions_named(topic):
                    await trio.sleep(METADATA_RETRY_S)
                    info = await self.cluster.topic(topic, timeout_s=self._max_block_s)
        except KafkaError as exc:
            error = exc
        waiting = self._waiting.pop(topic)
        if not self._waiting:
            self._metadata_done.set()
        for pending, value, key, headers, partition, timestamp_ms in waiting:
            if error is not None:
                pending.resolve(None, with_context(error, f"topic {topic!r}"))
                continue
            try:
                placed = self._place(
                    topic, value, key, headers, partition, timestamp_ms, may_wait=False
                )
            except MinibrokerError as exc:  # e.g. a partition the topic does not have
                pending.resolve(None, KafkaError(str(exc)))
            else:
                pending.resolve(placed)
