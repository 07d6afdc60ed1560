"""The leader's checks of producer batches before they are written.

Each producer batch of an append (in log order, a second batch of the same producer
checked against the first) is compared with the producer's kept epoch and last batches
(storage/producer_entries.py's ``PartitionProducers``):

- a batch whose epoch and sequence range equal one of those kept is a *duplicate* (a
  retry of a batch already written): the append answers its original offsets and
  writes nothing;
- an epoch older than the producer's -> INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- the same epoch must continue right after the last sequence; a batch that ends at or
  before it was written already but is no longer among those kept (a snapshot keeps only
  the last batch): DUPLICATE_SEQUENCE_NUMBER, which clients take as success with an
  unknown offset; anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (a gap: an earlier batch
  is missing);
- a producer the partition has no state for (never seen, or expired after
  ``producer.id.expiration.ms`` without a batch) may start at sequence 0; any other
  sequence is UNKNOWN_PRODUCER_ID, so the client resets its sequences.

Transactions (KIP-98): a producer's first transactional batch opens its transaction
in the partition (its offset is the transaction's first offset); a marker (a control
batch the coordinator had the leader write) ends it, committed or aborted, and may
carry a newer epoch (a fenced or bumped producer: its sequences restart at 0). A marker
older than the producer's epoch is INVALID_PRODUCER_EPOCH; one from a coordinator epoch
older than the last marker's is TRANSACTION_COORDINATOR_FENCED (a deposed coordinator).
"""

from __future__ import annotations

from minibroker.protocol.errors import (
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from minibroker.protocol.records import BatchHeader, ControlRecordType, Marker
from minibroker.storage.producer_entries import (
    MAX_SEQUENCE,
    NO_EPOCH,
    NO_SEQUENCE,
    BatchMetadata,
    CompletedTxn,
    PartitionProducers,
    ProducerStateEntry,
)


def _at_or_before(sequence: int, reference: int) -> bool:
    """Is ``sequence`` at or before ``reference``, sequences wrapping at 2**31? A
    producer's pending sequences lie within a small window, far below half the space."""
    return (reference - sequence) % (MAX_SEQUENCE + 1) < 2**30


def _check(
    current_epoch: int,
    last: int,
    epoch: int,
    first_sequence: int,
    last_sequence: int,
    where: str,
) -> None:
    """Raise the error Kafka answers when a batch does not follow the producer's
    ``current_epoch`` (NO_EPOCH: no state) and ``last`` sequence."""
    if current_epoch == NO_EPOCH:
        if first_sequence != 0:
            raise UnknownProducerIdError(
                f"{where}: no state for this producer, sequence {first_sequence} is not 0"
            )
        return
    if epoch < current_epoch:
        raise InvalidProducerEpochError(f"{where}: epoch {epoch} is older than {current_epoch}")
    if epoch > current_epoch:
        if first_sequence != 0:
            raise OutOfOrderSequenceNumberError(
                f"{where}: new epoch {epoch} must start at sequence 0, not {first_sequence}"
            )
        return
    if last != NO_SEQUENCE and first_sequence != (last + 1) % (MAX_SEQUENCE + 1):
        if _at_or_before(last_sequence, last) and _at_or_before(first_sequence, last_sequence):
            raise DuplicateSequenceNumberError(
                f"{where}: sequences {first_sequence}-{last_sequence} were written already"
            )
        raise OutOfOrderSequenceNumberError(
            f"{where}: sequence {first_sequence} does not follow {last}"
        )


class ProducerAppend:
    """The producer batches of one append, checked (leader) before anything is written.

    ``add`` each batch in log order; it returns the original metadata of a duplicate, or
    raises the partition error. ``commit`` after the write makes the batches part of the
    state; an append that fails in between is simply dropped.
    """

    __slots__ = ("_coordinator", "_pending", "_pending_last", "_state", "_validate")

    def __init__(
        self, state: PartitionProducers, *, validate: bool, coordinator: bool = False
    ) -> None:
        """``coordinator``: a coordinator's own batches (no sequences: only the epoch
        is checked)."""
        self._state = state
        self._validate = validate
        self._coordinator = coordinator
        # (id, epoch, batch, transactional, marker offset, marker): a batch or a marker.
        self._pending: list[tuple[int, int, BatchMetadata | None, bool, int, Marker | None]] = []
        self._pending_last: dict[int, tuple[int, int]] = {}  # id -> (epoch, last sequence)

    def add_marker(self, header: BatchHeader, offset: int, marker: Marker) -> None:
        """A marker batch at ``offset``; raises the partition error on the leader."""
        producer_id, epoch = header.producer_id, header.producer_epoch
        if self._validate:
            current = self._state.producers.get(producer_id)
            earlier = self._pending_last.get(producer_id)
            known_epoch = max(
                NO_EPOCH if current is None else current.epoch,
                NO_EPOCH if earlier is None else earlier[0],
            )
            if epoch < known_epoch:
                raise InvalidProducerEpochError(
                    f"{self._state.name}: marker epoch {epoch} is older than {known_epoch}"
                )
            if current is not None and marker.coordinator_epoch < current.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"{self._state.name}: coordinator epoch {marker.coordinator_epoch} is"
                    f" older than {current.coordinator_epoch}"
                )
        self._pending.append((producer_id, epoch, None, True, offset, marker))
        self._pending_last.pop(producer_id, None)  # sequences are checked against the state

    def add(self, header: BatchHeader, first_offset: int) -> BatchMetadata | None:
        producer_id = header.producer_id
        epoch = header.producer_epoch
        first_sequence = header.base_sequence
        if first_sequence < 0:  # a coordinator's batch (a transaction's offsets)
            if self._validate:
                if not self._coordinator:
                    raise OutOfOrderSequenceNumberError(
                        f"{self._state.name}: a producer batch without a sequence"
                    )
                current = self._state.producers.get(producer_id)
                if current is not None and epoch < current.epoch:
                    raise InvalidProducerEpochError(
                        f"{self._state.name}: epoch {epoch} is older than {current.epoch}"
                    )
            self._pending.append(
                (producer_id, epoch, None, header.is_transactional, first_offset, None)
            )
            return None
        delta = header.last_offset_delta
        last_sequence = (first_sequence + delta) % (MAX_SEQUENCE + 1)
        if self._validate:
            earlier = self._pending_last.get(producer_id)
            if earlier is not None:  # a second batch of the producer in this append
                _check(*earlier, epoch, first_sequence, last_sequence, self._state.name)
            else:
                current = self._state.producers.get(producer_id)
                if current is None:
                    _check(
                        NO_EPOCH,
                        NO_SEQUENCE,
                        epoch,
                        first_sequence,
                        last_sequence,
                        self._state.name,
                    )
                elif (
                    epoch == current.epoch
                    and current.batches
                    and (
                        first_sequence
                        == (current.batches[-1].last_sequence + 1) % (MAX_SEQUENCE + 1)
                    )
                ):
                    pass  # the next batch in sequence, the usual case: nothing to look up
                else:
                    duplicate = current.find_duplicate(epoch, first_sequence, last_sequence)
                    if duplicate is not None:
                        return duplicate
                    _check(
                        current.epoch,
                        current.last_sequence,
                        epoch,
                        first_sequence,
                        last_sequence,
                        self._state.name,
                    )
        batch = tuple.__new__(
            BatchMetadata,
            (
                first_sequence,
                last_sequence,
                first_offset,
                first_offset + delta,
                header.max_timestamp,
            ),
        )
        self._pending.append((producer_id, epoch, batch, header.is_transactional, -1, None))
        self._pending_last[producer_id] = (epoch, last_sequence)
        return None

    def commit(self, end_offset: int) -> list[CompletedTxn]:
        """The batches are in the log, which now ends at ``end_offset``; returns the
        transactions their markers ended."""
        state = self._state
        producers = state.producers
        ongoing = state.ongoing
        completed: list[CompletedTxn] = []
        for producer_id, epoch, batch, transactional, offset, marker in self._pending:
            entry = producers.get(producer_id)
            if entry is None:
                entry = producers[producer_id] = ProducerStateEntry(producer_id)
            if marker is None:
                if batch is None:  # a batch without sequences
                    entry.update_epoch(epoch)
                    first_offset = offset
                else:
                    entry.add_batch(epoch, batch)
                    first_offset = batch.first_offset
                if transactional and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = first_offset
                    ongoing[producer_id] = first_offset
                continue
            entry.update_epoch(epoch)
            entry.coordinator_epoch = marker.coordinator_epoch
            first = entry.current_txn_first_offset
            if first >= 0:
                aborted = marker.kind is ControlRecordType.ABORT
                completed.append(CompletedTxn(producer_id, first, offset, aborted))
                entry.current_txn_first_offset = -1
                ongoing.pop(producer_id, None)
            state.last_marker_offset = offset
        state.map_end_offset = end_offset
        return completed
