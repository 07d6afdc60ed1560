"""The record formats of ``__transaction_state``: Kafka's TransactionLog key and value,
byte for byte, so tools that read Kafka's transaction log read ours.

Every key and value starts with an int16 version; all integers big-endian::

    key    v0   version | transactional_id: string (int16 length + UTF-8)
    value  v0   version | producer_id: int64 | producer_epoch: int16 |
                transaction_timeout_ms: int32 | status: int8 |
                partitions: int32 count (-1 null), each topic: string,
                    partition_ids: int32 count + int32s |
                last_update_timestamp_ms: int64 | start_timestamp_ms: int64
    value  v1   the same fields, flexible (KIP-482): strings and arrays carry uvarint
                length + 1, every struct ends with tagged fields (tag 0
                previous_producer_id, 1 next_producer_id, 2 client_transaction_version)

A null value is a tombstone: the transactional id expired. We write v0 (what Kafka
writes for clients without transaction version 2) unless the value names a previous or
next producer id (a producer moved to a new id at its last epoch: transaction version
2 only), then v1 with those two tags and tag 2 at 2; we read both.

``status`` is the coordinator's state of the transactional id; the numbers are
Kafka's ``TransactionState`` ids, the names here are the coordinator's states
(transaction/state.py holds the table of what may follow what).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.kafka.compiler import uvarint
from minibroker.protocol.offsets_topic import FieldReader
from minibroker.protocol.offsets_topic import partition_for as _hash_partition

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
"""The internal topic that holds every transactional id's state."""

KEY_VERSION: Final = 0
VALUE_VERSION: Final = 0
FLEXIBLE_VALUE_VERSION: Final = 1
TAG_PREVIOUS_PRODUCER_ID: Final = 0
TAG_NEXT_PRODUCER_ID: Final = 1
TAG_CLIENT_TRANSACTION_VERSION: Final = 2
CLIENT_TRANSACTION_VERSION: Final = 2
"""What v1 values we write say in tag 2: only transaction version 2 moves a producer
to a new id at an EndTxn."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnStatus(IntEnum):
    """Kafka's TransactionState ids, as the value's ``status`` byte."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


STATUS_NAMES: Final = {
    TxnStatus.EMPTY: "Empty",
    TxnStatus.ONGOING: "Ongoing",
    TxnStatus.PREPARE_COMMIT: "PrepareCommit",
    TxnStatus.PREPARE_ABORT: "PrepareAbort",
    TxnStatus.COMPLETE_COMMIT: "CompleteCommit",
    TxnStatus.COMPLETE_ABORT: "CompleteAbort",
    TxnStatus.DEAD: "Dead",
    TxnStatus.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
"""Kafka's names of the states (ListTransactions and kafka-transactions.sh show them)."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnStatus
    partitions: tuple[tuple[str, int], ...]
    """(topic, partition) pairs in the transaction, sorted."""
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    """v1 tag 0: the producer id this value's moved away from (-1: none)."""
    next_producer_id: int = -1
    """v1 tag 1: the producer id a prepared end moves to (-1: none)."""


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(value: TransactionLogValue) -> bytes:
    flexible = value.previous_producer_id >= 0 or value.next_producer_id >= 0
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [
        _I16.pack(FLEXIBLE_VALUE_VERSION if flexible else VALUE_VERSION),
        _I64.pack(value.producer_id),
        _I16.pack(value.producer_epoch),
        _I32.pack(value.timeout_ms),
        _I8.pack(value.status),
        uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic)),
    ]
    for topic, partitions in by_topic.items():
        if flexible:
            name = topic.encode()
            parts += (uvarint(len(name) + 1), name, uvarint(len(partitions) + 1))
        else:
            parts += (_string(topic), _I32.pack(len(partitions)))
        parts += (_I32.pack(p) for p in partitions)
        if flexible:
            parts.append(uvarint(0))  # the topic's tagged fields: none
    parts += (_I64.pack(value.last_update_ms), _I64.pack(value.start_ms))
    if flexible:
        tags = [
            (TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)),
            (TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)),
            (TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(CLIENT_TRANSACTION_VERSION)),
        ]
        parts.append(uvarint(len(tags)))
        for tag, data in tags:
            parts += (uvarint(tag), uvarint(len(data)), data)
    return b"".join(parts)


def decode_key(key: bytes) -> str:
    """The transactional id of a key; CorruptMessageError if it is not Kafka's v0."""
    r = FieldReader(key)
    version = r.int16()
    if version != KEY_VERSION:
        raise CorruptMessageError(f"unknown transaction log key version {version}")
    transactional_id = r.string()
    r.done()
    return transactional_id


class _FlexibleReader(FieldReader):
    """Value v1's compact strings and arrays and its tagged fields."""

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise CorruptMessageError("transaction log value: varint too long")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptMessageError("transaction log value: null where a string must be")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise CorruptMessageError("transaction log value: a string is not UTF-8") from exc

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self._take(self.uvarint())
        return fields


def decode_value(value: bytes) -> TransactionLogValue:
    version = _I16.unpack_from(value)[0] if len(value) >= 2 else -1
    if version not in (0, 1):
        raise CorruptMessageError(f"unknown transaction log value version {version}")
    flexible = version == 1
    r = _FlexibleReader(value)
    r.int16()
    producer_id = r.int64()
    epoch = r.int16()
    timeout_ms = r.int32()
    status_byte = r.int8()
    try:
        status = TxnStatus(status_byte)
    except ValueError:
        raise CorruptMessageError(f"unknown transaction status {status_byte}") from None
    partitions: list[tuple[str, int]] = []
    topics = r.uvarint() - 1 if flexible else r.int32()
    for _ in range(max(topics, 0)):
        topic = r.compact_string() if flexible else r.string()
        count = r.uvarint() - 1 if flexible else r.int32()
        partitions += ((topic, r.int32()) for _ in range(max(count, 0)))
        if flexible:
            r.skip_tagged_fields()
    last_update_ms = r.int64()
    start_ms = r.int64()
    tags = r.tagged_fields() if flexible else {}
    r.done()
    return TransactionLogValue(
        producer_id,
        epoch,
        timeout_ms,
        status,
        tuple(sorted(partitions)),
        last_update_ms,
        start_ms,
        _tagged_id(tags, TAG_PREVIOUS_PRODUCER_ID),
        _tagged_id(tags, TAG_NEXT_PRODUCER_ID),
    )


def _tagged_id(tags: dict[int, bytes], tag: int) -> int:
    data = tags.get(tag)
    if data is None:
        return -1
    if len(data) != _I64.size:
        raise CorruptMessageError(f"transaction log value: tag {tag} is not an int64")
    value: int = _I64.unpack(data)[0]
    return value


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One transaction-log record as text (``dump-log``); never raises."""
    if key is None:
        return "transaction log record without a key"
    try:
        k = f"transaction_metadata::transactionalId={decode_key(key)}"
        if value is None:
            return f"{k} <DELETE>"
        v = decode_value(value)
        partitions = ",".join(f"{t}-{p}" for t, p in v.partitions)
        return (
            f"{k} producerId:{v.producer_id},producerEpoch:{v.producer_epoch},"
            f"state={STATUS_NAMES[v.status]},partitions=[{partitions}],"
            f"txnLastUpdateTimestamp={v.last_update_ms},txnTimeoutMs={v.timeout_ms}"
            + (f",prevProducerId={v.previous_producer_id}" if v.previous_producer_id >= 0 else "")
            + (f",nextProducerId={v.next_producer_id}" if v.next_producer_id >= 0 else "")
        )
    except CorruptMessageError as exc:
        return f"undecodable transaction log record: {exc}"


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of a transactional id: the same hash as a
    group's (Kafka's ``Utils.abs(transactionalId.hashCode) % partitions``)."""
    return _hash_partition(transactional_id, num_partitions)
