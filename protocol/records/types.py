"""The values the record codec takes and returns: records to encode, records decoded.

A record inside a batch is ``length`` (varint) then: attributes (int8, unused),
timestampDelta (varlong), offsetDelta (varint), keyLength (varint, -1 for null) + key,
valueLength (varint, -1 for null) + value, header count (varint), and per header
keyLength + UTF-8 key, valueLength (-1 for null) + value. Every varint is
zigzag-encoded (``varint.py``).

NamedTuples rather than dataclasses for the record types: they are made once per record
on the client's hot paths, and a tuple costs a fraction of a frozen dataclass.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple, TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview

Header: TypeAlias = tuple[str, bytes | None]


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Record(NamedTuple):
    """A record to encode. ``timestamp`` None means "now" (the batch's ``now_ms``)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


class DecodedRecord(NamedTuple):
    """A record read back from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class ConsumerRecord(NamedTuple):
    """A record as a consumer hands it to an application: where it came from, then
    the record, then its batch's timestamp type (client.consumer re-exports it)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: TimestampType
