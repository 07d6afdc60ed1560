"""The idempotent producer's bookkeeping: its id and epoch, and sequences per partition.

How this works (Kafka's TransactionManager, idempotent part). At start the producer asks
any broker for an id (InitProducerId) and starts at its epoch. A batch gets its
partition's next sequence when the sender first drains it and keeps it across retries,
so a retry that reaches a leader which already has the batch is answered with the
original offset instead of being written again.

Per partition the sender may have up to ``MAX_IN_FLIGHT`` batches on the wire. A batch
that fails retriably goes back to the head of its partition in sequence order
(``RecordAccumulator.reenqueue``) and a retried batch is only sent when it is the oldest
unacknowledged batch of its partition and nothing else of the partition is on the wire,
so retries reach the leader in order.

OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for the oldest unacknowledged batch
means the leader no longer has the producer's earlier batches (state expired, an unclean
election): the producer bumps its epoch (locally, as Kafka's idempotent producer does -
a newer epoch is accepted from sequence 0), waits until none of its batches is on the
wire, gives every unacknowledged batch a new sequence in the new epoch and resends them
in order. The same errors for a later batch just mean an earlier one is missing (it
failed, or the two crossed on the way): that batch is retried. INVALID_PRODUCER_EPOCH
and PRODUCER_FENCED are fatal: every pending delivery fails with the error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
)

if TYPE_CHECKING:
    from minibroker.client.accumulator import ProducerBatch

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 5
"""Batches per partition on the wire at once: the broker remembers the last 5 of a
producer, so any retry is recognised."""
MAX_EPOCH = 32767
MAX_SEQUENCE = 2**31 - 1

FATAL_ERRORS = (InvalidProducerEpochError, ProducerFencedError)
RESET_ERRORS = (OutOfOrderSequenceNumberError, UnknownProducerIdError)


def next_sequence(sequence: int, increment: int) -> int:
    return (sequence + increment) % (MAX_SEQUENCE + 1)


@dataclass(slots=True)
class PartitionSequences:
    """One partition's sequences in the current epoch."""

    next_sequence: int = 0
    unresolved: list[ProducerBatch] = field(default_factory=list)  # by sequence
    on_wire: int = 0


class IdempotenceState:
    """The producer id and epoch, and every partition's sequences."""

    def __init__(self, *, explicit: bool = True, transactional: bool = False) -> None:
        self.explicit = explicit  # asked for by the application, not just a default
        self.transactional = transactional
        """A transactional producer's: its batches say so, its id comes from
        ``init_transactions`` (client/transactions.py) and a partition's batches wait
        until ``partition_gate`` says the partition is in the transaction."""
        self.partition_gate: Callable[[tuple[str, int]], bool] | None = None
        self.first_failure: KafkaError | None = None
        """The first batch that failed for good since it was last cleared (a
        transaction with one cannot commit)."""
        self.producer_id = -1
        self.epoch = -1
        self.partitions: dict[tuple[str, int], PartitionSequences] = {}
        self.bump_pending = False
        self.fatal: KafkaError | None = None
        self.on_wire = 0  # batches of all partitions in requests not answered yet

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0 and self.fatal is None

    async def init_producer_id(self, cluster: ClusterClient, retry_backoff_s: float) -> None:
        """InitProducerId until a broker answers; retriable failures are retried."""
        while True:
            try:
                response: dict[str, Any] = await cluster.request_any(
                    ApiKey.INIT_PRODUCER_ID,
                    {"transactional_id": None, "producer_id": -1, "producer_epoch": -1},
                )
            except KafkaError as exc:
                if not exc.retriable:
                    self.fatal = exc
                    return
                await trio.sleep(retry_backoff_s)
                continue
            self.producer_id = response["producer_id"]
            self.epoch = response["producer_epoch"]
            return

    def _partition(self, batch: ProducerBatch) -> PartitionSequences:
        key = (batch.topic, batch.partition)
        state = self.partitions.get(key)
        if state is None:
            state = self.partitions[key] = PartitionSequences()
        return state

    def may_send(self, batch: ProducerBatch) -> bool:
        """May the head batch of its partition go now?"""
        if not self.ready or self.bump_pending:
            return False
        gate = self.partition_gate
        if gate is not None and not gate((batch.topic, batch.partition)):
            return False
        state = self._partition(batch)
        if state.on_wire >= MAX_IN_FLIGHT:
            return False
        if batch.base_sequence >= 0:  # a retry: in order, alone
            return state.on_wire == 0 and state.unresolved[0] is batch
        return True

    def sending(self, batch: ProducerBatch) -> None:
        """The batch leaves in a request: give it a sequence the first time."""
        state = self._partition(batch)
        if batch.base_sequence < 0:
            batch.set_producer(
                self.producer_id, self.epoch, state.next_sequence, transactional=self.transactional
            )
            state.next_sequence = next_sequence(state.next_sequence, len(batch))
            state.unresolved.append(batch)
        state.on_wire += 1
        self.on_wire += 1

    def answered(self, batch: ProducerBatch) -> None:
        """Its request came back (whatever the outcome)."""
        self._partition(batch).on_wire -= 1
        self.on_wire -= 1

    def completed(self, batch: ProducerBatch) -> None:
        """Acknowledged, or failed for good: no longer pending in its partition."""
        state = self._partition(batch)
        if batch in state.unresolved:
            state.unresolved.remove(batch)

    def is_oldest(self, batch: ProducerBatch) -> bool:
        unresolved = self._partition(batch).unresolved
        return bool(unresolved) and unresolved[0] is batch

    def request_bump(self) -> None:
        self.bump_pending = True

    def maybe_bump(self) -> bool:
        """With a bump pending and nothing on the wire: new epoch, every pending batch
        re-sequenced from 0 in its partition. True if it happened."""
        if not self.bump_pending or self.on_wire:
            return False
        self.bump_pending = False
        if self.epoch >= MAX_EPOCH:
            self.fatal = ProducerFencedError("the producer epoch is exhausted")
            return True
        if self.transactional:  # only the coordinator bumps a transactional epoch
            self.fatal = OutOfOrderSequenceNumberError(
                "a partition lost this transaction's earlier batches: abort it"
            )
            return True
        self.epoch += 1
        log.warning("producer %d: epoch bumped to %d", self.producer_id, self.epoch)
        for state in self.partitions.values():
            sequence = 0
            for batch in state.unresolved:
                batch.set_producer(
                    self.producer_id, self.epoch, sequence, transactional=self.transactional
                )
                sequence = next_sequence(sequence, len(batch))
            state.next_sequence = sequence
        return True

    def pending_batches(self) -> list[ProducerBatch]:
        return [batch for state in self.partitions.values() for batch in state.unresolved]
