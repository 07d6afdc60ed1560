"""The transaction coordinator: what each transactional request does to its id's state.

How this works (Kafka's TransactionCoordinator, KIP-98). A transactional id lives on
partition ``abs(hash(id)) % N`` of ``__transaction_state``; the leader of that
partition coordinates it (``TransactionStateManager``, transaction/state_manager.py,
loads and stores the values). Every change of an id's state is a transition of the
table in transaction/metadata.py, written to the log (acks=all) before it counts:

- InitProducerId: a new id gets a producer id at epoch 0; a known one is bumped to the
  next epoch (fencing every earlier producer with the same id). An Ongoing transaction
  is first fenced and aborted (PrepareEpochFence -> PrepareAbort with the bumped epoch)
  and the request answered CONCURRENT_TRANSACTIONS: the client retries once the abort
  completed.
- AddPartitionsToTxn / AddOffsetsToTxn: Empty or Complete* -> Ongoing (the transaction
  starts), Ongoing -> Ongoing with more partitions. A partition leader verifies that a
  partition is in the ongoing transaction before the producer's first transactional
  write there (KIP-890 part 1, ``verify_partitions``), so a late or stray write cannot
  open a transaction nobody will end.
- EndTxn: Ongoing -> PrepareCommit or PrepareAbort, answered once that is replicated:
  the decision is durable. Then, in the background, the markers go to every partition
  (transaction/markers.py), retried until each has one, and only then CompleteCommit /
  CompleteAbort is written. Requests meanwhile answer CONCURRENT_TRANSACTIONS.
- Transaction version 2 (KIP-890 part 2, EndTxn v5, ``bump_epoch``): the prepared
  state carries the next epoch, so the markers do too and fence every batch of the
  ended transaction still on its way; the producer goes on with the epoch the answer
  gives. A retry of that EndTxn presents the epoch before the bump and gets the same
  answer; any other request with it is fenced, so a late EndTxn cannot end the next
  transaction (KAFKA-17754). Such a client also aborts from Empty or Complete* (it
  cannot know whether a failed Produce added a partition): the abort bumps the epoch.
  At the last epoch (``LAST_EPOCH``) the end moves the producer to a new producer id,
  as Kafka's does: the prepared state still has the old id at the bumped epoch (so do
  the markers) and names the next id; Complete* has the next id at epoch 0 and names
  the old one, which a retry of that end presents (with the last epoch) to get the same
  answer. The answer names the next id and epoch 0 at once.
- A transaction open past its ``transaction.timeout.ms`` is aborted as a fence would
  (epoch bumped, so the abandoned producer cannot add to the next transaction); an id
  idle for ``transactional.id.expiration.ms`` is removed (a tombstone). A fence or
  timeout at the last epoch aborts under ``MAX_EPOCH`` and moves the id to a new
  producer id, as an end at the last epoch does (Kafka's KAFKA-20090).

A producer whose epoch is older than the id's answers PRODUCER_FENCED (the handlers
translate it to INVALID_PRODUCER_EPOCH for versions that predate KIP-588); a producer id
that is not the id's answers INVALID_PRODUCER_ID_MAPPING. One exception (KIP-588): a
producer whose transaction the coordinator aborted at its timeout presents the epoch
before that abort's bump to InitProducerId, and gets a new epoch instead of being
fenced (a producer fenced by a newer instance is two bumps behind and stays fenced).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import trio

from minibroker.broker.cluster.producer_ids import ProducerIdManager
from minibroker.broker.replication.txn_markers import AppendedMarkers
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock
from minibroker.transaction.markers import MarkerSender
from minibroker.transaction.metadata import (
    COMPLETE,
    LAST_EPOCH,
    MAX_EPOCH,
    PREPARING,
    TransactionMetadata,
    TxnState,
    TxnValue,
    epoch_exhausted,
)
from minibroker.transaction.state_manager import StateWrite, TransactionStateManager

log = logging.getLogger(__name__)

COMPLETION_RETRY_S = 0.1
"""Wait before writing a Complete* again after its write failed."""
COMPLETION_WAIT_S = 1.0
"""How long a request for the next transaction waits for the previous one's markers
before answering CONCURRENT_TRANSACTIONS: usually milliseconds, and a client told to
retry backs off far longer (librdkafka and the Java client wait 20-100 ms)."""


@dataclass(frozen=True)
class TransactionConfig:
    max_timeout_ms: int
    id_expiration_ms: int
    abort_interval_ms: int


class TransactionCoordinator:
    def __init__(
        self,
        state: TransactionStateManager,
        producer_ids: ProducerIdManager,
        markers: MarkerSender,
        config: TransactionConfig,
        *,
        clock: Clock,
    ) -> None:
        self.state = state
        self.producer_ids = producer_ids
        self.markers = markers
        self.config = config
        self.clock = clock
        self._spawn: Callable[[Callable[[], Awaitable[None]]], None] | None = None
        self._completing: dict[str, trio.Event] = {}
        """Transactional ids whose markers are being written: set when complete."""
        state.on_loaded = self._loaded

    async def _settled(self, transactional_id: str) -> None:
        """Wait (a little) for the previous transaction of the id to complete."""
        done = self._completing.get(transactional_id)
        if done is not None:
            with trio.move_on_after(COMPLETION_WAIT_S):
                await done.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Completions of loaded transactions and the timeout checks, until cancelled."""
        async with trio.open_nursery() as nursery:

            def spawn(fn: Callable[[], Awaitable[None]]) -> None:
                nursery.start_soon(fn)

            self._spawn = spawn
            task_status.started()
            interval = self.config.abort_interval_ms / 1000
            while True:
                await trio.sleep(interval)
                self.check_timeouts()

    # -- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """The producer id and epoch for ``transactional_id``; raises the KafkaError."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {timeout_ms} ms is not in (0,"
                f" transaction.max.timeout.ms {self.config.max_timeout_ms}]"
            )
        self.state.check_owner(transactional_id)
        await self._settled(transactional_id)
        meta = self.state.get(transactional_id)
        if meta is None:
            new_id = await self.producer_ids.next_id()
            meta = self.state.get(transactional_id)  # another request may have made it
            if meta is None:
                now = self.clock()
                value = TxnValue(new_id, -1, timeout_ms, TxnState.EMPTY, frozenset(), -1, now)
                meta = self.state.add(transactional_id, value)
        if meta.pending is not None or meta.state in PREPARING:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: a change is in flight")
        value = meta.value
        if meta.state is TxnState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: being fenced")
        if producer_id >= 0 and not _retry_after_new_producer_id(
            meta, producer_id, producer_epoch
        ):  # KIP-360: the producer presents its current id and epoch (or, its transaction
            # ended at the last epoch, the id it had: it goes on with the new one)
            if producer_id != value.producer_id:
                raise ProducerFencedError(
                    f"{transactional_id!r}: producer id {producer_id} is not the current one"
                )
            if producer_epoch != value.producer_epoch:
                if producer_epoch != meta.previous_epoch:
                    raise ProducerFencedError(
                        f"{transactional_id!r}: epoch {producer_epoch} is not the current"
                        f" {value.producer_epoch}"
                    )
                if meta.state is TxnState.EMPTY:
                    return value.producer_id, value.producer_epoch  # a retry of the last bump
                # KIP-588: the coordinator aborted this producer's transaction under a
                # bumped epoch (its timeout): it may recover with a new epoch. A producer
                # fenced by a newer instance presents an older epoch and stays fenced.
        if meta.state is TxnState.ONGOING:
            await self._fence_and_abort(meta)
            raise ConcurrentTransactionsError(
                f"{transactional_id!r}: the open transaction is being aborted"
            )
        new_id, new_epoch = value.producer_id, value.producer_epoch + 1
        if new_epoch >= MAX_EPOCH:
            new_id, new_epoch = await self.producer_ids.next_id(), 0
            if meta.pending is not None:
                raise ConcurrentTransactionsError(f"{transactional_id!r}: a change is in flight")
        after = meta.prepare(
            TxnState.EMPTY,
            self.clock(),
            producer_id=new_id,
            producer_epoch=new_epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
        )
        await self.state.write(meta, after)
        return new_id, new_epoch

    # -- the transaction -----------------------------------------------------------------------

    def completing(self, transactional_id: str) -> bool:
        """Whether the id's last transaction is still writing its markers (its next
        request waits for that first, a little: ``_settled``)."""
        return transactional_id in self._completing

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        """Add ``partitions`` to the transaction (starting it); raises the KafkaError."""
        # the producer id a completing end moves to is told to wait: it waits below
        with contextlib.suppress(ConcurrentTransactionsError):
            self._producer(transactional_id, producer_id, producer_epoch)
        await self._settled(transactional_id)
        wait = self.add_partitions_now(transactional_id, producer_id, producer_epoch, partitions)
        if wait is not None:
            await wait()

    def add_partitions_now(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> StateWrite | None:
        """``add_partitions`` without waiting for the last transaction to complete (the
        caller checked ``completing``): None when done now, else the wait that finishes
        it; raises the KafkaError."""
        meta = self._producer(transactional_id, producer_id, producer_epoch)
        if meta.pending is not None or meta.state in PREPARING:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: the last one is completing")
        if meta.state is TxnState.PREPARE_EPOCH_FENCE:
            raise ProducerFencedError(f"{transactional_id!r}: being fenced")
        value = meta.value
        added = frozenset(partitions)
        if meta.state is TxnState.ONGOING and added <= value.partitions:
            return None
        now = self.clock()
        after = meta.prepare(
            TxnState.ONGOING,
            now,
            partitions=value.partitions | added,
            start_ms=value.start_ms if meta.state is TxnState.ONGOING else now,
        )
        return self.state.write_now(meta, after)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, KafkaError | None]:
        """KIP-890 part 1: is each partition in the producer's ongoing transaction, as
        replicated? (A partition leader asks before the producer's first transactional
        write there; TRANSACTION_ABORTABLE refuses it, which the leader answers as
        INVALID_TXN_STATE to clients that predate it.) Raises the error of the whole."""
        meta = self._producer(transactional_id, producer_id, producer_epoch)
        if meta.state in PREPARING:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: the last one is completing")
        ongoing = meta.value.partitions if meta.state is TxnState.ONGOING else frozenset()
        return {
            tp: None
            if tp in ongoing
            else TransactionAbortableError(
                f"{tp} is not in the transaction of {transactional_id!r}"
            )
            for tp in partitions
        }

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        bump_epoch: bool = False,
    ) -> None:
        """Commit or abort: answered once the decision is replicated; raises the error.
        ``bump_epoch``: transaction version 2's EndTxn (the module doc)."""
        self._ending(transactional_id, producer_id, producer_epoch, bump_epoch)
        await self._settled(transactional_id)
        wait = self.end_transaction_now(
            transactional_id, producer_id, producer_epoch, committed, bump_epoch=bump_epoch
        )
        if wait is not None:
            await wait()

    def end_transaction_now(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        bump_epoch: bool = False,
        next_producer_id: int = -1,
    ) -> StateWrite | None:
        """``end_transaction`` without waiting for the last transaction to complete (the
        caller checked ``completing``): None when decided now, else the wait until the
        decision is replicated; raises the KafkaError. ``next_producer_id``: the id
        reserved for an end at the last epoch (reserved here when it is needed)."""
        meta, retry = self._ending(transactional_id, producer_id, producer_epoch, bump_epoch)
        if meta.pending is not None:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: a change is in flight")
        state = meta.state
        wanted = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        fresh = bump_epoch and not retry  # transaction version 2, not a retry
        if fresh and (state in PREPARING or (committed and state in COMPLETE)):
            # the epoch of a transaction that ended already, not a retry of its end
            raise ProducerFencedError(
                f"{transactional_id!r}: epoch {producer_epoch} ended its transaction"
            )
        abort_of_nothing = (
            fresh and not committed and (state is TxnState.EMPTY or state in COMPLETE)
        )
        if state is TxnState.ONGOING or abort_of_nothing:
            changes: dict[str, object] = {}
            if bump_epoch:
                epoch = meta.value.producer_epoch
                if epoch_exhausted(epoch):
                    if next_producer_id < 0:
                        return self._end_with_next_producer_id(
                            transactional_id, producer_id, producer_epoch, committed
                        )
                    changes["next_producer_id"] = next_producer_id
                changes["producer_epoch"] = min(epoch + 1, MAX_EPOCH)
            if state is not TxnState.ONGOING:  # an abort of nothing: only the bump
                changes.update(partitions=frozenset(), start_ms=-1)
            after = meta.prepare(wanted, self.clock(), **changes)
            wait = self.state.write_now(meta, after)
            if wait is None:
                self._complete_later(meta)
                return None

            async def decided() -> None:
                await wait()
                self._complete_later(meta)

            return decided
        if state is done:
            return None  # a retry of an EndTxn that succeeded
        if retry and committed and state is TxnState.COMPLETE_ABORT:
            # the coordinator aborted it (its timeout) under the epoch after this one: the
            # producer is fenced, not broken (Kafka's KAFKA-20785)
            raise ProducerFencedError(
                f"{transactional_id!r}: its transaction was aborted by the coordinator"
            )
        if state is wanted:
            raise ConcurrentTransactionsError(f"{transactional_id!r}: still completing")
        if state is TxnState.PREPARE_EPOCH_FENCE:
            raise ProducerFencedError(f"{transactional_id!r}: being fenced")
        raise InvalidTxnStateError(
            f"{transactional_id!r}: cannot {'commit' if committed else 'abort'} in"
            f" state {meta.state_name}"
        )

    def _end_with_next_producer_id(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> StateWrite:
        """The end at the last epoch: reserve the next producer id, then end as asked
        (checked again: the state may have moved while the id was reserved)."""

        async def end() -> None:
            next_id = await self.producer_ids.next_id()
            wait = self.end_transaction_now(
                transactional_id,
                producer_id,
                producer_epoch,
                committed,
                bump_epoch=True,
                next_producer_id=next_id,
            )
            if wait is not None:
                await wait()

        return end

    def producer_of(self, transactional_id: str) -> tuple[int, int]:
        """The id's producer id and epoch to go on with (what EndTxn v5 answers): the
        next producer id at epoch 0 once an end at the last epoch is prepared."""
        meta = self.state.get(transactional_id)
        if meta is None:
            return -1, -1
        value = meta.value
        if value.next_producer_id >= 0:
            return value.next_producer_id, 0
        return value.producer_id, value.producer_epoch

    def _ending(
        self, transactional_id: str, producer_id: int, producer_epoch: int, bump_epoch: bool
    ) -> tuple[TransactionMetadata, bool]:
        """EndTxn's check of the producer: the id's metadata, and whether the request
        is a retry of a transaction version 2 end that bumped the epoch already (it
        presents the epoch before the bump); raises as ``_producer``."""
        if not bump_epoch:
            return self._producer(transactional_id, producer_id, producer_epoch), False
        self.state.check_owner(transactional_id)
        meta = self.state.get(transactional_id)
        if meta is not None and _retry_after_new_producer_id(meta, producer_id, producer_epoch):
            return meta, True
        if meta is None or meta.value.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"{transactional_id!r} does not have producer id {producer_id}"
            )
        current = meta.value.producer_epoch
        retry = (meta.state in PREPARING or meta.state in COMPLETE) and (
            current == producer_epoch + 1
        )
        if producer_epoch != current and not retry:
            raise ProducerFencedError(
                f"{transactional_id!r}: epoch {producer_epoch} is not the current {current}"
            )
        return meta, retry

    def _producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata:
        self.state.check_owner(transactional_id)
        meta = self.state.get(transactional_id)
        if meta is not None and meta.value.next_producer_id == producer_id >= 0:
            raise ConcurrentTransactionsError(
                f"{transactional_id!r}: the end that moves it to producer id {producer_id}"
                " is completing"
            )
        if meta is None or meta.value.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"{transactional_id!r} does not have producer id {producer_id}"
            )
        if producer_epoch != meta.value.producer_epoch:
            raise ProducerFencedError(
                f"{transactional_id!r}: epoch {producer_epoch} is not the current"
                f" {meta.value.producer_epoch}"
            )
        return meta

    # -- fencing, timeouts, completion ---------------------------------------------------------

    async def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Abort the Ongoing transaction under a bumped epoch (PrepareEpochFence ->
        PrepareAbort), then complete it in the background. Fenced at the last epoch, the
        abort carries ``MAX_EPOCH`` (its markers fence every batch of the last epoch)
        and names the next producer id, which Complete* moves to (as an end at the last
        epoch does, Kafka's KAFKA-20090): nobody goes on under the exhausted id."""
        value = meta.value
        changes: dict[str, object] = {"producer_epoch": _bumped(value.producer_epoch)}
        if changes["producer_epoch"] == MAX_EPOCH:
            next_id = await self.producer_ids.next_id()
            if meta.value is not value or meta.pending is not None:
                raise ConcurrentTransactionsError(
                    f"{meta.transactional_id!r}: changed while it was being fenced"
                )
            changes["next_producer_id"] = next_id
        meta.fence()
        after = meta.prepare(TxnState.PREPARE_ABORT, self.clock(), **changes)
        try:
            await self.state.write(meta, after)
        except KafkaError:
            meta.unfence(value)
            raise
        self._complete_later(meta)

    def check_timeouts(self) -> None:
        """Abort transactions open past their timeout, remove ids idle past expiry."""
        now = self.clock()
        for meta in self.state.owned_transactions():
            value = meta.value
            if meta.pending is not None:
                continue
            if meta.state is TxnState.ONGOING and now > value.start_ms + value.timeout_ms:
                log.info(
                    "aborting the transaction of %r: open %d ms, past its timeout",
                    meta.transactional_id,
                    now - value.start_ms,
                )
                self._later(lambda meta=meta: self._abort_timed_out(meta))  # type: ignore[misc]
            elif (
                meta.state is TxnState.EMPTY or meta.state in COMPLETE
            ) and now - value.last_update_ms > self.config.id_expiration_ms:
                self._later(lambda meta=meta: self.state.expire(meta))  # type: ignore[misc]

    async def _abort_timed_out(self, meta: TransactionMetadata) -> None:
        if meta.pending is not None or meta.state is not TxnState.ONGOING:
            return
        try:
            await self._fence_and_abort(meta)
        except KafkaError as exc:
            log.info("aborting %r failed (retried later): %r", meta.transactional_id, exc)

    def _loaded(self, transactions: Iterable[TransactionMetadata]) -> None:
        """A partition was loaded: finish what it left prepared."""
        for meta in transactions:
            if meta.state in PREPARING:
                self._complete_later(meta)

    def _complete_later(self, meta: TransactionMetadata) -> None:
        """The second phase of the prepared transaction of ``meta``, in a task of its own,
        so the request that prepared it is answered first: the decision is durable, and
        Kafka answers EndTxn then too. Requests of the id meanwhile wait for it
        (``_settled``)."""
        done = self._completing[meta.transactional_id] = trio.Event()

        async def complete() -> None:
            try:
                await self._second_phase(meta)
            finally:
                done.set()
                if self._completing.get(meta.transactional_id) is done:
                    del self._completing[meta.transactional_id]

        self._later(complete)

    async def _second_phase(self, meta: TransactionMetadata) -> None:
        """Markers, then Complete*: appended at once when nothing needs a wait (every
        partition's leader is this broker and its only in-sync replica: the
        single-broker case), else sent and awaited (``_complete``)."""
        value = meta.value
        started = self.markers.write_now(
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            committed=value.state is TxnState.PREPARE_COMMIT,
            coordinator_epoch=meta.coordinator_epoch,
            partitions=value.partitions,
        )
        if started is None:
            log.warning("markers of %r: a newer coordinator took over", meta.transactional_id)
            return
        remaining, appended = started
        if not remaining and meta.pending is None:
            try:
                written = self.state.write_now(meta, self._completed(meta))
                if written is not None:  # Complete* is appended: wait for its replicas
                    await written()
                return
            except KafkaError as exc:
                log.info("completing %r failed: %r", meta.transactional_id, exc)
        await self._complete(meta, remaining, appended)

    def _later(self, fn: Callable[[], Awaitable[None]]) -> None:
        if self._spawn is None:
            raise RuntimeError("the transaction coordinator is not running")
        self._spawn(fn)

    def _completed(self, meta: TransactionMetadata) -> TxnValue:
        """The prepared transaction's Complete* value, pending."""
        value = meta.value
        committed = value.state is TxnState.PREPARE_COMMIT
        target = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        changes: dict[str, object] = {}
        if value.next_producer_id >= 0:  # an end at the last epoch: the new producer id
            changes.update(
                producer_id=value.next_producer_id,
                producer_epoch=0,
                next_producer_id=-1,
                previous_producer_id=value.producer_id,
            )
        return meta.prepare(target, self.clock(), partitions=frozenset(), start_ms=-1, **changes)

    async def _complete(
        self,
        meta: TransactionMetadata,
        partitions: Iterable[TopicPartition],
        appended: AppendedMarkers | None = None,
    ) -> None:
        """Markers to ``partitions`` (those of the prepared transaction still without
        theirs; ``appended``: markers already appended to some, not yet replicated),
        then Complete*: the second phase of the commit."""
        value = meta.value
        still_owner = self.state.owner_check(meta)
        written = await self.markers.write(
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            committed=value.state is TxnState.PREPARE_COMMIT,
            coordinator_epoch=meta.coordinator_epoch,
            partitions=partitions,
            still_owner=still_owner,
            appended=appended,
        )
        if not written:
            return
        while still_owner() and meta.state is value.state:
            if meta.pending is None:
                try:
                    await self.state.write(meta, self._completed(meta))
                    return
                except KafkaError as exc:
                    log.info("completing %r failed: %r", meta.transactional_id, exc)
            await trio.sleep(COMPLETION_RETRY_S)


def _retry_after_new_producer_id(
    meta: TransactionMetadata, producer_id: int, producer_epoch: int
) -> bool:
    """Whether a request presents the producer id and last epoch of the producer whose
    end at the last epoch (its own, or a fence or timeout's abort) moved the id to its
    current producer id: a retry of that EndTxn (Kafka's ``retryOnOverflow``), or an
    InitProducerId of that producer, which goes on with the new id."""
    value = meta.value
    return (
        meta.state in COMPLETE
        and value.producer_epoch == 0
        and value.previous_producer_id == producer_id != value.producer_id
        and producer_epoch == LAST_EPOCH
    )


def _bumped(epoch: int) -> int:
    """The epoch after ``epoch`` (at most ``MAX_EPOCH``: a fence at the last epoch gets
    it, and the producer a new id)."""
    return min(epoch + 1, MAX_EPOCH)
