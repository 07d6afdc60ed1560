"""Control records: the transaction markers a transaction coordinator writes (KIP-98).

A control batch (attribute bit 5) holds one record whose key says what it marks and
whose value the marker's coordinator epoch::

    key    version: int16 (0)   type: int16 (0 = ABORT, 1 = COMMIT)
    value  version: int16 (0)   coordinatorEpoch: int32

The marker closes the producer's open transaction in that partition: its batches since
the last marker are committed or aborted together. A marker batch carries the
producer's id and epoch, no sequence (-1), and is never compressed. Sans-IO: bytes in,
values out.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records.batch import read_header
from minibroker.protocol.records.encode import encode_batch
from minibroker.protocol.records.layout import BATCH_HEADER_SIZE
from minibroker.protocol.records.types import Buffer, Record
from minibroker.protocol.records.varint import read_varint

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


def control_record_type(key: bytes | None) -> ControlRecordType | None:
    """The marker type of a control record's ``key``; None when the key is too short or
    names a type this code does not know (Kafka skips those too)."""
    if key is None or len(key) < _KEY.size:
        return None
    _version, kind = _KEY.unpack_from(key)
    try:
        return ControlRecordType(kind)
    except ValueError:
        return None


def control_record_key(kind: ControlRecordType) -> bytes:
    """The key of a version-0 marker of ``kind``."""
    return _KEY.pack(0, kind)


class Marker(NamedTuple):
    """What a marker batch says: COMMIT or ABORT, and the epoch of the coordinator that
    wrote it."""

    kind: ControlRecordType
    coordinator_epoch: int


def encode_marker_batch(
    kind: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    now_ms: int,
) -> bytes:
    """A control batch holding one marker (offsets are assigned on append)."""
    record = Record(_VALUE.pack(0, coordinator_epoch), key=control_record_key(kind))
    return encode_batch(
        [record],
        now_ms=now_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_marker(buf: Buffer, pos: int = 0) -> Marker | None:
    """The marker of the control batch at ``pos`` (its header already validated); None
    when its first record is not a marker this code knows. Raises CorruptMessageError
    when the record runs past the batch."""
    header = read_header(buf, pos)
    end = pos + header.size
    at = pos + BATCH_HEADER_SIZE
    try:
        _length, at = read_varint(buf, at)
        at += 1  # attributes
        _ts, at = read_varint(buf, at)
        _delta, at = read_varint(buf, at)
        key_length, at = read_varint(buf, at)
        if key_length < 0 or at + key_length > end:
            return None
        key = bytes(buf[at : at + key_length])
        at += key_length
        value_length, at = read_varint(buf, at)
        value = bytes(buf[at : at + value_length]) if 0 <= value_length <= end - at else b""
    except IndexError:
        raise CorruptMessageError(f"control batch at {pos} ends inside its record") from None
    kind = control_record_type(key)
    if kind is None:
        return None
    epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return Marker(kind, epoch)
