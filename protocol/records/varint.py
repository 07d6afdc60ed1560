"""Zigzag varints, as Kafka's record fields use them (protobuf's signed encoding).

Encoding small non-negative values is a list lookup (``CACHED_VARINTS``); the encoder's
fast path builds on that cache. Decoding here is the general loop; the consumer's
decode loop inlines the one- and two-byte cases and falls back to ``raw_varint``.
"""

from __future__ import annotations

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records.types import Buffer

VARINT_CACHE_SIZE = 1 << 14  # covers lengths and deltas of small records: no loop at all


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


CACHED_VARINTS: list[bytes] = [_zigzag_varint(i) for i in range(VARINT_CACHE_SIZE)]
"""``CACHED_VARINTS[i]`` is the encoding of ``i`` for 0 <= i < VARINT_CACHE_SIZE."""
MINUS_ONE = _zigzag_varint(-1)
"""The length of a null key or value."""


def varint(value: int) -> bytes:
    """Zigzag varint encoding of a signed 64-bit integer."""
    if 0 <= value < VARINT_CACHE_SIZE:
        return CACHED_VARINTS[value]
    return _zigzag_varint(value)


def raw_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """The unsigned (still zigzagged) varint at ``pos``; returns (raw value, next pos)."""
    shift = 0
    n = 0
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise CorruptMessageError("record data ends inside a varint") from None
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise CorruptMessageError("varint longer than 10 bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, position after it)."""
    n, pos = raw_varint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos
