"""What a partition remembers of its idempotent producers: per producer id, the epoch
and the last batches (storage/producer_state.py explains how the state is used).

``PartitionProducers`` is that memory for one partition: the entries, the open
transactions and how far the log has been applied. The ProducerStateManager owns one
(storage/producer_state.py) and the leader's checks (storage/producer_append.py) apply
an append to it; neither module is imported here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

BATCHES_KEPT = 5
"""Batches remembered per producer: the client keeps at most 5 in flight per partition,
so any retry it can send is one of these."""
MAX_SEQUENCE = 2**31 - 1
"""Sequences are int32 and wrap from here to 0."""
NO_EPOCH = -1
NO_SEQUENCE = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Kafka's producer.id.expiration.ms: a day without a batch forgets a producer."""


def next_sequence(sequence: int, increment: int) -> int:
    """``sequence`` + ``increment`` in the int32 space that wraps to 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


class BatchMetadata(NamedTuple):
    """What the partition remembers of one producer batch (a NamedTuple: one is made
    per appended batch on the leader's hot path)."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


class ProducerStateEntry:
    """One producer's epoch and its last batches, oldest first; for a transactional
    producer also the first offset of its open transaction here (-1: none) and the
    epoch of the coordinator whose marker it last saw."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "epoch",
        "last_timestamp",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        epoch: int = NO_EPOCH,
        batches: Iterable[BatchMetadata] = (),
        last_timestamp: int = -1,
        *,
        coordinator_epoch: int = -1,
        current_txn_first_offset: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=BATCHES_KEPT)
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(
        self, epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        """The kept batch with this epoch and sequence range, if any."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.update_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp

    def update_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()  # sequences restart with a new epoch

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(id={self.producer_id}, epoch={self.epoch},"
            f" last_sequence={self.last_sequence}, last_offset={self.last_offset},"
            f" txn_first_offset={self.current_txn_first_offset})"
        )


class CompletedTxn(NamedTuple):
    """A transaction a marker ended in this partition: its data lies in
    [first_offset, marker_offset)."""

    producer_id: int
    first_offset: int
    marker_offset: int
    aborted: bool


class PartitionProducers:
    """The producers of one partition as the log has them (see the module doc);
    ``name`` (the partition dir's) is what errors and warnings say."""

    __slots__ = ("last_marker_offset", "map_end_offset", "name", "ongoing", "producers")

    def __init__(self, name: str) -> None:
        self.name = name
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state reflects every producer batch below this
        # Open transactions: producer id -> first offset, in log order (a transaction
        # opens with its first batch, so insertion order is offset order): the first
        # one is the partition's first unstable offset.
        self.ongoing: dict[int, int] = {}
        self.last_marker_offset = -1  # the newest marker the state has applied
