"""The coordinator's view of ``__consumer_offsets``: append with acks=all, read back.

``OffsetsLog`` is the narrow interface the GroupMetadataManager uses, so its tests can
give it an in-memory log; ``ReplicaOffsetsLog`` is the real one, over the broker's
ReplicaManager (the same append and acks=all wait a Produce request goes through).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol, TypeAlias

from minibroker.broker.replica_manager import ReplicaManager
from minibroker.protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC
from minibroker.protocol.records import decode_records, encode_batch
from minibroker.protocol.records.batch import iter_headers
from minibroker.protocol.records.types import DecodedRecord, Record
from minibroker.storage.log_config import Clock
from minibroker.storage.names import TopicPartition

LOAD_CHUNK_BYTES = 1 << 20
"""Bytes read per step while loading a partition; the loop yields between steps, so a
large offsets partition does not hold the event loop in one go."""


Acknowledgement: TypeAlias = Callable[[], Awaitable["KafkaError | None"]]
"""The wait for an append's replication: None once acks=all is met, else the error."""


class OffsetsLog(Protocol):
    def leader_epoch(self, partition: int) -> int | None:
        """This broker's leader epoch of the partition, None when it does not lead it."""
        ...

    def append(self, partition: int, records: Sequence[Record]) -> Acknowledgement:
        """Write ``records`` as one batch at once, so batches reach the log in the order
        of the calls (pipelined commits stay in request order); the returned wait ends
        when acks=all is met."""
        ...

    def read_all(self, partition: int) -> Iterator[DecodedRecord | None]:
        """Every record from the log start to the log end as the read begins; None
        between chunks (the caller yields to the event loop there)."""
        ...

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """A partition's high watermark if this broker has a replica of it."""
        ...


class ReplicaOffsetsLog:
    def __init__(self, replica_manager: ReplicaManager, *, timeout_ms: int, clock: Clock) -> None:
        self.replica_manager = replica_manager
        self.timeout_ms = timeout_ms
        self.clock = clock

    def leader_epoch(self, partition: int) -> int | None:
        p = self.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, partition))
        return p.leader_epoch if p is not None and p.is_leader else None

    def append(self, partition: int, records: Sequence[Record]) -> Acknowledgement:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = encode_batch(records, now_ms=self.clock())
        results = self.replica_manager.append_records(-1, [(tp, batch)])
        _, result = results[0]

        async def acknowledged() -> KafkaError | None:
            if isinstance(result, KafkaError):
                return result
            outcomes = await self.replica_manager.wait_for_acks(results, self.timeout_ms)
            return outcomes.get(tp)

        return acknowledged

    def read_all(self, partition: int) -> Iterator[DecodedRecord | None]:
        p = self.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, partition))
        if p is None:
            return
        position = p.log_start_offset
        end = p.log_end_offset
        while position < end:
            try:
                read = p.read(position, LOAD_CHUNK_BYTES, from_follower=True)
            except (NotLeaderOrFollowerError, OffsetOutOfRangeError):
                return
            if not read.records:
                return
            chunk = bytes(read.records)
            start = position
            for record in decode_records(chunk):
                if record.offset >= end:
                    return
                if record.offset >= position:
                    yield record
                position = record.offset + 1
            # A cleaned log has batches whose last records were removed and empty
            # batches: continue after the last batch, not after the last record.
            for _, batch in iter_headers(chunk):
                position = max(position, batch.base_offset + batch.last_offset_delta + 1)
            if position <= start:
                return
            yield None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        p = self.replica_manager.get_partition(TopicPartition(topic, partition))
        return None if p is None else p.high_watermark


def commit_error(error: KafkaError) -> KafkaError:
    """What a commit answers when its append failed, as Kafka maps it: the client then
    retries (coordinator errors) or gives up (INVALID_COMMIT_OFFSET_SIZE)."""
    if isinstance(
        error,
        UnknownTopicOrPartitionError
        | NotEnoughReplicasError
        | NotEnoughReplicasAfterAppendError
        | RequestTimedOutError,
    ):
        return CoordinatorNotAvailableError(error.message)
    if isinstance(error, NotLeaderOrFollowerError | KafkaStorageError):
        return NotCoordinatorError(error.message)
    if isinstance(error, MessageTooLargeError | RecordListTooLargeError | InvalidFetchSizeError):
        return InvalidCommitOffsetSizeError(error.message)
    return error
