"""Transaction verification, the partition leader's side (KIP-890 part 1): before a
producer's first transactional batch in a partition (no transaction of that producer
epoch is open there), the leader asks the transaction coordinator whether the partition
is in the producer's ongoing transaction, and writes the batch only if it is.

Without it a late produce (a retry arriving after the transaction's marker) or a buggy
client's write to a partition it never added opens a transaction nobody ends: the
partition's last stable offset stops there and read_committed consumers hang (a
*hanging transaction*). With it such a batch is refused: the coordinator answers
TRANSACTION_ABORTABLE, which the leader passes on to clients whose request knows it
(Kafka's Produce v11+, TxnOffsetCommit v4+: ``TRANSACTION_ABORTABLE_SINCE``; the client
aborts and goes on) and answers INVALID_TXN_STATE to older ones, as Kafka does.

``TxnVerifier`` is the coordinator's answer (transaction/verifier.py implements it: a
direct call when this broker coordinates the id, else AddPartitionsToTxn v4
``verify_only`` to the coordinator). Errors are mapped as Kafka maps them for producers:
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, and the coordinator being busy, moving
or unreachable becomes NOT_ENOUGH_REPLICAS, which every producer retries without a
metadata refresh.

A marker written to the partition while the question was out may have ended the very
transaction just verified; the leader then asks again (``VERIFY_ATTEMPTS``), so a
verified batch is appended with no marker of its producer since the answer.

Transaction version 2 (KIP-890 part 2: Produce v12, ``add``): the client sends no
AddPartitionsToTxn; the leader asks the coordinator to add the partition to the
producer's transaction (starting it) instead of only asking whether it is in it. The
producer's epoch is bumped by every transaction, so a batch of an ended one is older
than the marker that ended it and refused by the append itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Final, Protocol, TypeAlias, runtime_checkable

from minibroker.broker.replication.partition import Partition
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
)
from minibroker.protocol.messages.bodies import Records
from minibroker.protocol.messages.data import PRODUCE
from minibroker.protocol.messages.transactions import TXN_OFFSET_COMMIT
from minibroker.protocol.records import read_header
from minibroker.protocol.topic_partition import TopicPartition

TxnVerifier: TypeAlias = Callable[
    [str, int, int, Sequence[TopicPartition], bool],
    Awaitable[dict[TopicPartition, KafkaError | None]],
]
"""(transactional id, producer id, epoch, partitions, add) -> each partition's verdict
(None: in the ongoing transaction; with ``add`` true, added to it if it was not);
raises the KafkaError of the whole question."""


class TxnVerification:
    """Where a leader finds the coordinator's answer: one per broker, a part
    (``BrokerParts.txn_verification``) handed to the Produce handler when it is made.
    The answer itself exists only once the transaction coordinator runs (it is built on
    the broker's parts), so its service provides it for as long as it runs
    (``provided_by``); until then, and without one, transactional batches are written
    unverified, as before KIP-890."""

    __slots__ = ("verifier",)

    def __init__(self) -> None:
        self.verifier: TxnVerifier | None = None
        """The coordinator's answer while its service runs (read per transactional
        Produce), else None."""

    @contextlib.contextmanager
    def provided_by(self, verifier: TxnVerifier) -> Iterator[None]:
        """Ask ``verifier`` for the duration of the block."""
        if self.verifier is not None:
            raise RuntimeError("a transaction verifier is provided already")
        self.verifier = verifier
        try:
            yield
        finally:
            self.verifier = None


@runtime_checkable
class LocalTxnVerifier(Protocol):
    def now(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, KafkaError | None] | None:
        """The verdicts at once when this broker coordinates the id and (with ``add``)
        nothing needs adding, else None (the question is awaited: ``__call__``).
        Raises as ``__call__``."""
        ...


TRANSACTION_ABORTABLE_SINCE: Final[Mapping[int, int]] = {
    PRODUCE.api_key: 11,
    TXN_OFFSET_COMMIT.api_key: 4,
}
"""The first Kafka version of each API whose clients know TRANSACTION_ABORTABLE
(KIP-890). The msgpack listener's one version of each predates it."""


def knows_abortable(api_key: int, api_version: int) -> bool:
    """Whether a request's client is answered TRANSACTION_ABORTABLE (else INVALID_TXN_STATE)."""
    return api_version >= TRANSACTION_ABORTABLE_SINCE[api_key]


VERIFY_ATTEMPTS = 3
"""Questions asked while markers keep landing in between, before answering a retriable
NOT_ENOUGH_REPLICAS."""

_RETRIABLE = (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NetworkError,
)

Unverified: TypeAlias = dict[tuple[int, int], list[TopicPartition]]
"""(producer id, epoch) -> the partitions whose first transactional batch needs asking."""


def unverified(
    partition_of: Callable[[TopicPartition], Partition | None],
    entries: Sequence[tuple[TopicPartition, Records]],
) -> Unverified:
    """The partitions of a transactional Produce whose batch would open a transaction
    (its producer has none open there at this epoch). Anything else is left to the
    append's own checks (not the leader, a malformed batch, no producer)."""
    found: Unverified = {}
    for tp, records in entries:
        partition = partition_of(tp)
        if partition is None or not partition.is_leader or records is None:
            continue
        try:
            header = read_header(records)
        except CorruptMessageError:
            continue
        if not header.is_transactional or header.producer_id < 0 or header.is_control:
            continue
        entry = partition.log.producer_state.producers.get(header.producer_id)
        if (
            entry is not None
            and entry.epoch == header.producer_epoch
            and entry.current_txn_first_offset >= 0
        ):
            continue  # its transaction is open here: verified when it began
        found.setdefault((header.producer_id, header.producer_epoch), []).append(tp)
    return found


def refusal(error: KafkaError, abortable: bool) -> KafkaError:
    """A coordinator's refusal as the client's request answers it (``abortable``: the
    client knows TRANSACTION_ABORTABLE): producers expect INVALID_PRODUCER_EPOCH where
    the coordinator says PRODUCER_FENCED."""
    if isinstance(error, ProducerFencedError):
        return InvalidProducerEpochError(error.message)
    if isinstance(error, TransactionAbortableError) and not abortable:
        return InvalidTxnStateError(error.message)
    return error


def produce_error(error: KafkaError, abortable: bool = False) -> KafkaError:
    """A verification's error as a Produce answers it: ``refusal``, and the retriable
    ones as NOT_ENOUGH_REPLICAS."""
    if isinstance(error, _RETRIABLE):
        return NotEnoughReplicasError(
            f"could not verify the partition is in the transaction: {error.name}"
        )
    return refusal(error, abortable)


def verify_now(
    verifier: TxnVerifier,
    transactional_id: str,
    needed: Unverified,
    *,
    add: bool = False,
    abortable: bool = False,
) -> dict[TopicPartition, KafkaError] | None:
    """``verify`` without a wait when this broker coordinates ``transactional_id`` (no
    marker can land between the answer and the caller's append): the partitions
    refused; None when the question must be awaited (another broker's, or an add)."""
    if not isinstance(verifier, LocalTxnVerifier):
        return None
    refused: dict[TopicPartition, KafkaError] = {}
    for (producer_id, epoch), tps in needed.items():
        try:
            verdicts = verifier.now(transactional_id, producer_id, epoch, tps, add)
        except KafkaError as exc:
            verdicts = dict.fromkeys(tps, exc)
        if verdicts is None:
            return None
        for tp in tps:
            error = verdicts.get(tp)
            if error is not None:
                refused[tp] = produce_error(error, abortable)
    return refused


async def verify(
    verifier: TxnVerifier,
    partition_of: Callable[[TopicPartition], Partition | None],
    transactional_id: str,
    needed: Unverified,
    *,
    add: bool = False,
    abortable: bool = False,
) -> dict[TopicPartition, KafkaError]:
    """Ask the coordinator about ``needed`` (``add``: to add them); the partitions
    refused, with the error their Produce answers (``abortable``: its client knows
    TRANSACTION_ABORTABLE). The caller appends the others at once (no await between)."""

    def markers() -> dict[TopicPartition, int]:
        seen = {}
        for tps in needed.values():
            for tp in tps:
                p = partition_of(tp)
                seen[tp] = -2 if p is None else p.log.producer_state.last_marker_offset
        return seen

    for _ in range(VERIFY_ATTEMPTS):
        before = markers()
        refused: dict[TopicPartition, KafkaError] = {}
        for (producer_id, epoch), tps in needed.items():
            try:
                verdicts = await verifier(transactional_id, producer_id, epoch, tps, add)
            except KafkaError as exc:
                verdicts = dict.fromkeys(tps, exc)
            for tp in tps:
                error = verdicts.get(tp)
                if error is not None:
                    refused[tp] = produce_error(error, abortable)
        if markers() == before:
            return refused
    retry = NotEnoughReplicasError("transaction markers kept arriving during verification")
    return {tp: retry for tps in needed.values() for tp in tps}
