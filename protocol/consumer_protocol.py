"""Kafka's ConsumerProtocol: the bytes group members exchange through the coordinator.

The coordinator treats a member's JoinGroup ``metadata`` and its SyncGroup
``assignment`` as opaque bytes; consumers agree on their layout, which is Kafka's
``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment`` (protocol type
"consumer"). Writing exactly Kafka's bytes is what lets a Java, librdkafka or Python
Kafka client and the bundled consumer be members of one group.

Both start with an int16 version, then the fields of that version in Kafka's classic
(non-flexible) encoding: int16-length strings, int32-length bytes (-1 is null), int32
element counts, big-endian integers::

    Subscription  v0: topics [string], user_data nullable bytes
                  v1: + owned_partitions [{topic string, partitions [int32]}]
                      (cooperative rebalancing: what the member holds now)
                  v2: + generation_id int32 (the generation those were owned in)
                  v3: + rack_id nullable string
    Assignment    v0, v1: assigned_partitions [{topic string, partitions [int32]}],
                      user_data nullable bytes (v1 changed nothing on the wire; it
                      signals that the member understands cooperative revocation)

We write version 1 of both. Readers accept any version: a newer member's extra fields
come after the ones we know and are skipped, which is how Kafka's own reader treats a
newer writer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1
PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]
"""((topic, (partition, ...)), ...), the wire's grouping of partitions by topic."""


class ConsumerProtocolError(ValueError):
    """Bytes that are not a ConsumerProtocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    assigned_partitions: TopicPartitions
    user_data: bytes | None = None

    def partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, ps in self.assigned_partitions for p in ps]


def group_by_topic(partitions: Iterable[tuple[str, int]]) -> TopicPartitions:
    """Partitions ``[(topic, p), ...]`` as the wire groups them, sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return tuple((t, tuple(ps)) for t, ps in by_topic.items())


# --- encoding -------------------------------------------------------------------------


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    out = bytearray(_INT16.pack(version))
    _put_array_of_strings(out, sub.topics)
    _put_nullable_bytes(out, sub.user_data)
    if version >= 1:
        _put_topic_partitions(out, sub.owned_partitions)
    if version >= 2:
        out += _INT32.pack(sub.generation_id)
    if version >= 3:
        _put_nullable_string(out, sub.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    out = bytearray(_INT16.pack(version))
    _put_topic_partitions(out, assignment.assigned_partitions)
    _put_nullable_bytes(out, assignment.user_data)
    return bytes(out)


def _put_string(out: bytearray, text: str) -> None:
    raw = text.encode()
    out += _INT16.pack(len(raw))
    out += raw


def _put_nullable_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _INT16.pack(-1)
    else:
        _put_string(out, text)


def _put_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += _INT32.pack(-1)
    else:
        out += _INT32.pack(len(data))
        out += data


def _put_array_of_strings(out: bytearray, items: tuple[str, ...]) -> None:
    out += _INT32.pack(len(items))
    for item in items:
        _put_string(out, item)


def _put_topic_partitions(out: bytearray, groups: TopicPartitions) -> None:
    out += _INT32.pack(len(groups))
    for topic, partitions in groups:
        _put_string(out, topic)
        out += _INT32.pack(len(partitions))
        for partition in partitions:
            out += _INT32.pack(partition)


# --- decoding -------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError(f"truncated at byte {self.pos} (wanted {n} more)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        try:
            return bytes(self._take(length)).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"string at byte {self.pos} is not UTF-8") from exc

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise ConsumerProtocolError(f"null string at byte {self.pos}")
        return text

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else bytes(self._take(length))

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data):  # each element takes at least one byte
            raise ConsumerProtocolError(f"bad array length {n} at byte {self.pos}")
        return n

    def topic_partitions(self) -> TopicPartitions:
        groups = []
        for _ in range(self.count()):
            topic = self.string()
            groups.append((topic, tuple(self.int32() for _ in range(self.count()))))
        return tuple(groups)


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"subscription version {version}")
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned = reader.topic_partitions() if version >= 1 else ()
    generation = reader.int32() if version >= 2 else -1
    rack = reader.nullable_string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    """An empty byte string is no assignment (what a member that got none may see)."""
    if not data:
        return Assignment(())
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"assignment version {version}")
    return Assignment(reader.topic_partitions(), reader.nullable_bytes())
