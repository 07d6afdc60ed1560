"""The coordinator's view of ``__consumer_offsets``: append with acks=all, read back.

``OffsetsLog`` is the narrow interface the GroupMetadataManager uses, so its tests can
give it an in-memory log; ``ReplicaOffsetsLog`` is the real one, over the broker's
ReplicaManager (the same append and acks=all wait a Produce request goes through).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import NamedTuple, Protocol, TypeAlias

from minibroker.broker.replication.replica_manager import ReplicaManager
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
from minibroker.protocol.records.control import ControlRecordType, control_record_type
from minibroker.protocol.records.types import DecodedRecord, Record
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock

LOAD_CHUNK_BYTES = 1 << 20
"""Bytes read per step while loading a partition; the loop yields between steps, so a
large offsets partition does not hold the event loop in one go."""


class TxnProducer(NamedTuple):
    producer_id: int
    producer_epoch: int


class LoggedRecord(NamedTuple):
    """A record as loading sees it: a transactional producer's (``producer_id`` >= 0,
    ``transactional``) counts only once its marker commits it; a marker (``marker``:
    committed or not) ends that producer's transaction in the partition."""

    record: DecodedRecord
    producer_id: int = -1
    transactional: bool = False
    marker: bool | None = None


Acknowledgement: TypeAlias = Callable[[], Awaitable["KafkaError | None"]]
"""The wait for an append's replication: None once acks=all is met, else the error."""


class Acknowledged:
    """An ``Acknowledgement`` already decided when the append was made (a partition
    whose only in-sync replica is its leader, or an append refused at once): ``error``
    tells it now, so a caller may answer without a task or a wait."""

    __slots__ = ("error",)

    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    async def __call__(self) -> KafkaError | None:
        return self.error


class OffsetsLog(Protocol):
    def leader_epoch(self, partition: int) -> int | None:
        """This broker's leader epoch of the partition, None when it does not lead it."""
        ...

    def append(
        self, partition: int, records: Sequence[Record], *, producer: TxnProducer | None = None
    ) -> Acknowledgement:
        """Write ``records`` as one batch at once, so batches reach the log in the order
        of the calls (pipelined commits stay in request order); the returned wait ends
        when acks=all is met. ``producer``: as that transactional producer's batch."""
        ...

    def read_logged(self, partition: int) -> Iterator[LoggedRecord | None]:
        """Every record from the log start to the log end as the read begins, markers
        included; None between chunks (the caller yields to the event loop there)."""
        ...

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """A partition's high watermark if this broker has a replica of it."""
        ...


class ReplicaOffsetsLog:
    """``topic``: ``__consumer_offsets``, or another internal topic a coordinator keeps
    its state in the same way (the transaction coordinator's ``__transaction_state``)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        *,
        timeout_ms: int,
        clock: Clock,
        topic: str = OFFSETS_TOPIC,
    ) -> None:
        self.replica_manager = replica_manager
        self.timeout_ms = timeout_ms
        self.clock = clock
        self.topic = topic

    def leader_epoch(self, partition: int) -> int | None:
        p = self.replica_manager.replicas.get_partition(TopicPartition(self.topic, partition))
        return p.leader_epoch if p is not None and p.is_leader else None

    def append(
        self, partition: int, records: Sequence[Record], *, producer: TxnProducer | None = None
    ) -> Acknowledgement:
        """``producer``: write the records as that transactional producer's batch (a
        TxnOffsetCommit's offsets, which its transaction's marker commits or aborts)."""
        tp = TopicPartition(self.topic, partition)
        if producer is None:
            batch = encode_batch(records, now_ms=self.clock())
        else:
            batch = encode_batch(
                records,
                now_ms=self.clock(),
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                transactional=True,
            )
        results = self.replica_manager.append_records(-1, [(tp, batch)], coordinator=True)
        _, result = results[0]
        if isinstance(result, KafkaError):
            return Acknowledged(result)
        now = self.replica_manager.acknowledged_now(results)
        if now is not None:
            return Acknowledged(now.get(tp))

        async def acknowledged() -> KafkaError | None:
            outcomes = await self.replica_manager.wait_for_acks(results, self.timeout_ms)
            return outcomes.get(tp)

        return acknowledged

    def read_all(self, partition: int) -> Iterator[DecodedRecord | None]:
        """Every record but transactional ones and markers (a log no transaction
        writes to: ``__transaction_state``); None between chunks."""
        return (
            None if item is None else item.record
            for item in self.read_logged(partition)
            if item is None or not (item.transactional or item.marker is not None)
        )

    def read_logged(self, partition: int) -> Iterator[LoggedRecord | None]:
        p = self.replica_manager.replicas.get_partition(TopicPartition(self.topic, partition))
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
            for at, header in iter_headers(chunk):
                transactional = header.is_transactional and header.producer_id >= 0
                for record in decode_records(chunk[at : at + header.size]):
                    if record.offset >= end:
                        return
                    if record.offset >= position:
                        marker = None
                        if header.is_control:
                            kind = control_record_type(record.key)
                            if kind is None:
                                continue
                            marker = kind is ControlRecordType.COMMIT
                        yield LoggedRecord(record, header.producer_id, transactional, marker)
                    position = record.offset + 1
            # A cleaned log has batches whose last records were removed and empty
            # batches: continue after the last batch, not after the last record.
            for _, batch in iter_headers(chunk):
                position = max(position, batch.base_offset + batch.last_offset_delta + 1)
            if position <= start:
                return
            yield None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        p = self.replica_manager.replicas.get_partition(TopicPartition(topic, partition))
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
