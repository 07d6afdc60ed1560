"""One transactional id's state, and the state machine every change goes through.

The states are Kafka's (TransactionState.java), their ids the status byte of
``__transaction_state`` values (protocol/transaction_log.py). The table below is the
only place that says what may follow what; ``transition_to`` raises
``IllegalTxnTransition`` for anything else::

    Empty             -> Ongoing (AddPartitions/AddOffsets), Empty (InitProducerId
                         bumps the epoch), Dead (expired), PrepareAbort (an EndTxn v5
                         abort: below)
    Ongoing           -> Ongoing (more partitions), PrepareCommit, PrepareAbort
                         (EndTxn, a timeout), PrepareEpochFence (a new producer with
                         the same transactional id fences this one)
    PrepareCommit     -> CompleteCommit (every partition has its marker)
    PrepareAbort      -> CompleteAbort
    CompleteCommit    -> Empty, Ongoing, Dead (as Empty), PrepareAbort
    CompleteAbort     -> Empty, Ongoing, Dead, PrepareAbort
    PrepareEpochFence -> PrepareAbort (the fenced transaction is aborted)
    Dead              -> nothing

An abort from Empty or Complete* is transaction version 2's (KIP-890 part 2): its
client leaves adding partitions to the brokers, so it cannot tell whether a failed
Produce added one and always ends the transaction; the abort only bumps the epoch.

A change is made in two steps, as Kafka does: ``prepare`` computes the next value and
marks it pending (requests meanwhile answer CONCURRENT_TRANSACTIONS), the value is
written to ``__transaction_state``, and ``complete`` applies it once replicated (or
``abandon`` drops it when the write failed). Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.transaction_log import STATUS_NAMES, TransactionLogValue, TxnStatus

TxnState = TxnStatus
"""The coordinator's states are the status ids of the log's values."""

TRANSITIONS: Final[dict[TxnState, frozenset[TxnState]]] = {
    TxnState.EMPTY: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD, TxnState.PREPARE_ABORT}
    ),
    TxnState.ONGOING: frozenset(
        {
            TxnState.ONGOING,
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
            TxnState.PREPARE_EPOCH_FENCE,
        }
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD, TxnState.PREPARE_ABORT}
    ),
    TxnState.COMPLETE_ABORT: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD, TxnState.PREPARE_ABORT}
    ),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset(),
}
"""From each state, the states a transactional id may move to (see the module doc)."""

MAX_EPOCH: Final = 32767
"""Epochs are int16: past this a producer gets a new producer id."""
LAST_EPOCH: Final = MAX_EPOCH - 1
"""The last epoch a producer is given (Kafka's ``isEpochExhausted``): a transaction
version 2 end at it moves the producer to a new producer id at epoch 0, its prepared
state and markers carrying ``MAX_EPOCH`` under the old id."""


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= LAST_EPOCH


COMPLETE: Final = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARING: Final = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


class IllegalTxnTransition(MinibrokerError):
    """A transition the table does not allow: a coordinator bug, never a client's."""


@dataclass(frozen=True, slots=True)
class TxnValue:
    """What is stored for a transactional id (one ``__transaction_state`` value)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    """When the ongoing transaction began (-1: none)."""
    last_update_ms: int
    previous_producer_id: int = -1
    """The producer id this value moved away from (a Complete* after an end at the last
    epoch: a retry of that end presents it), -1 otherwise."""
    next_producer_id: int = -1
    """The producer id a prepared end at the last epoch moves to (-1: none)."""

    def to_log(self) -> TransactionLogValue:
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            tuple(sorted((tp.topic, tp.partition) for tp in self.partitions)),
            self.last_update_ms,
            self.start_ms,
            self.previous_producer_id,
            self.next_producer_id,
        )

    @classmethod
    def from_log(cls, value: TransactionLogValue) -> TxnValue:
        return cls(
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.status,
            frozenset(TopicPartition(t, p) for t, p in value.partitions),
            value.start_ms,
            value.last_update_ms,
            value.previous_producer_id,
            value.next_producer_id,
        )


@dataclass(slots=True)
class TransactionMetadata:
    """A transactional id: its current value and the change being written, if any."""

    transactional_id: str
    value: TxnValue
    pending: TxnValue | None = None
    coordinator_epoch: int = -1
    """The leader epoch of its ``__transaction_state`` partition when it was loaded or
    made: markers carry it, so a deposed coordinator's markers are refused."""
    previous_epoch: int = -1
    """The epoch before the last bump (a producer retrying InitProducerId after a lost
    answer presents it)."""

    @property
    def state(self) -> TxnState:
        return self.value.state

    @property
    def state_name(self) -> str:
        return STATUS_NAMES[self.value.state]

    def prepare(self, target: TxnState, now_ms: int, **changes: object) -> TxnValue:
        """The value after a move to ``target`` (with ``changes`` to its fields), marked
        pending; raises IllegalTxnTransition if the table forbids the move. The previous
        producer id is the last move's only: cleared unless ``changes`` set it."""
        if target not in TRANSITIONS[self.value.state]:
            raise IllegalTxnTransition(
                f"transactional id {self.transactional_id!r}:"
                f" {STATUS_NAMES[self.value.state]} -> {STATUS_NAMES[target]} is not allowed"
            )
        if self.pending is not None:
            raise IllegalTxnTransition(
                f"transactional id {self.transactional_id!r}: a change is already pending"
            )
        changes.setdefault("previous_producer_id", -1)
        after = replace(self.value, state=target, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]
        self.pending = after
        return after

    def fence(self) -> None:
        """Ongoing -> PrepareEpochFence, in memory only (Kafka never writes it): the
        abort that follows is written as PrepareAbort with the bumped epoch."""
        target = TxnState.PREPARE_EPOCH_FENCE
        if target not in TRANSITIONS[self.value.state] or self.pending is not None:
            raise IllegalTxnTransition(
                f"transactional id {self.transactional_id!r}: cannot fence in"
                f" {STATUS_NAMES[self.value.state]}"
            )
        self.value = replace(self.value, state=target)

    def unfence(self, before: TxnValue) -> None:
        """The fence's abort could not be written: back to ``before`` (Ongoing)."""
        if self.value.state is TxnState.PREPARE_EPOCH_FENCE:
            self.value = before

    def complete(self, after: TxnValue) -> None:
        """The pending value ``after`` is replicated: it is the state now."""
        if self.pending is after:
            self.pending = None
        if after.producer_epoch != self.value.producer_epoch:
            self.previous_epoch = self.value.producer_epoch
        self.value = after

    def abandon(self, after: TxnValue) -> None:
        if self.pending is after:
            self.pending = None
