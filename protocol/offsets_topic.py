"""The record formats of ``__consumer_offsets``: Kafka's offset-commit and group-metadata
keys and values, byte for byte, so tools that read Kafka's offsets topic read ours.

Every key and value starts with an int16 version; strings are an int16 length and
UTF-8 bytes (length -1: null), bytes an int32 length and the bytes; all big-endian.

Keys (the record key picks the kind of record by its version)::

    offset commit key  v0, v1   version | group: string | topic: string | partition: int32
    group metadata key v2       version | group: string

Offset commit values::

    v0  offset: int64 | metadata: string | commit_timestamp: int64
    v1  offset | metadata | commit_timestamp | expire_timestamp: int64  (a retention
        asked by OffsetCommit v2-4)
    v2  offset | metadata | commit_timestamp                            (expiry moved to
        the broker's retention, KIP-211)
    v3  offset | leader_epoch: int32 | metadata | commit_timestamp      (KIP-320)

Group metadata values::

    protocol_type: string | generation: int32 | protocol: string? | leader: string? |
    current_state_timestamp: int64 (v2+) | members: int32 count, then each:
        member_id: string | group_instance_id: string? (v3+) | client_id: string |
        client_host: string | rebalance_timeout: int32 (v1+) | session_timeout: int32 |
        subscription: bytes | assignment: bytes

A null value is a tombstone: the offset (or the whole group) was deleted or expired.
We write offset commit key v1 with value v3 (v1 when a commit asked for its own
retention) and group metadata key v2 with value v3, as Kafka 2.3+ does, and read every
version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from minibroker.protocol.errors import CorruptMessageError

OFFSETS_TOPIC: Final = "__consumer_offsets"
"""The internal topic that holds committed offsets and group metadata."""

OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRING: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# An offset commit's fields packed together (a commit of 3,000 partitions encodes 3,000
# keys and values on the event loop: one pack per run of fixed fields, not per field).
_KEY_HEAD = struct.Struct(">hh")  # version, group length
_VALUE_HEAD = struct.Struct(">hqih")  # v3: version, offset, leader epoch, metadata length
_EXPIRING_HEAD = struct.Struct(">hqh")  # v1: version, offset, metadata length
_TWO_I64 = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    """-1: none (only value v1 carries one)."""


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


# -- encoding ----------------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode()
    return _I16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    group = key.group.encode()
    topic = key.topic.encode()
    return b"".join(
        (
            _KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(group)),
            group,
            _I16.pack(len(topic)),
            topic,
            _I32.pack(key.partition),
        )
    )


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Value v3, or v1 when the commit carries its own expiry."""
    metadata = value.metadata.encode()
    if value.expire_timestamp >= 0:
        return b"".join(
            (
                _EXPIRING_HEAD.pack(
                    OFFSET_COMMIT_VALUE_VERSION_EXPIRING, value.offset, len(metadata)
                ),
                metadata,
                _TWO_I64.pack(value.commit_timestamp, value.expire_timestamp),
            )
        )
    return b"".join(
        (
            _VALUE_HEAD.pack(
                OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, len(metadata)
            ),
            metadata,
            _I64.pack(value.commit_timestamp),
        )
    )


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    parts = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += (
            _string(m.member_id),
            _string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout),
            _I32.pack(m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        )
    return b"".join(parts)


# -- decoding ----------------------------------------------------------------------------------


class FieldReader:
    """Reads the big-endian fields of one key or value; raises CorruptMessageError."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptMessageError(f"offsets topic record truncated at byte {self.pos}")
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise CorruptMessageError("offsets topic record: a string is not UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptMessageError("offsets topic record: null where a string must be")
        return value

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n == -1 else self._take(n)

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise CorruptMessageError(
                f"offsets topic record: {len(self.buf) - self.pos} extra bytes"
            )


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """The key of an offsets-topic record; CorruptMessageError if it is none of Kafka's."""
    r = FieldReader(key)
    version = r.int16()
    if version in (0, 1):
        result: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(
            r.string(), r.string(), r.int32()
        )
    elif version == 2:
        result = GroupMetadataKey(r.string())
    else:
        raise CorruptMessageError(f"unknown offsets topic key version {version}")
    r.done()
    return result


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    r = FieldReader(value)
    version = r.int16()
    if version in (0, 2):
        result = OffsetCommitValue(r.int64(), r.string(), r.int64())
    elif version == 1:
        result = OffsetCommitValue(
            offset=r.int64(),
            metadata=r.string(),
            commit_timestamp=r.int64(),
            expire_timestamp=r.int64(),
        )
    elif version == 3:
        offset, epoch = r.int64(), r.int32()
        result = OffsetCommitValue(offset, r.string(), r.int64(), leader_epoch=epoch)
    else:
        raise CorruptMessageError(f"unknown offset commit value version {version}")
    r.done()
    return result


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    r = FieldReader(value)
    version = r.int16()
    if not 0 <= version <= GROUP_METADATA_VALUE_VERSION:
        raise CorruptMessageError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.int64() if version >= 2 else -1
    count = r.int32()
    if count < 0 or count > len(value):
        raise CorruptMessageError(f"group metadata value: bad member count {count}")
    members: list[MemberRecord] = []
    for _ in range(count):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = rebalance_timeout = r.int32()
        if version >= 1:
            session_timeout = r.int32()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    r.done()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, state_timestamp, tuple(members)
    )


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One offsets-topic record as text (``dump-log``); never raises."""
    if key is None:
        return "offsets topic record without a key"
    try:
        decoded_key = decode_key(key)
        if isinstance(decoded_key, OffsetCommitKey):
            k = (
                f"offset_commit::group={decoded_key.group} topic={decoded_key.topic}"
                f" partition={decoded_key.partition}"
            )
            if value is None:
                return f"{k} <DELETE>"
            v = decode_offset_commit_value(value)
            return (
                f"{k} offset={v.offset} leader_epoch={v.leader_epoch}"
                f" metadata={v.metadata!r} commit_timestamp={v.commit_timestamp}"
                + (f" expire_timestamp={v.expire_timestamp}" if v.expire_timestamp >= 0 else "")
            )
        k = f"group_metadata::group={decoded_key.group}"
        if value is None:
            return f"{k} <DELETE>"
        g = decode_group_metadata_value(value)
        members = ",".join(_describe_member(m) for m in g.members)
        return (
            f"{k} protocol_type={g.protocol_type} generation={g.generation}"
            f" protocol={g.protocol} leader={g.leader}"
            f" current_state_timestamp={g.current_state_timestamp} members=[{members}]"
        )
    except CorruptMessageError as exc:
        return f"undecodable offsets topic record: {exc}"


def _describe_member(m: MemberRecord) -> str:
    instance = "" if m.group_instance_id is None else f" instance={m.group_instance_id}"
    return (
        f"{{{m.member_id}{instance} client={m.client_id}/{m.client_host}"
        f" session={m.session_timeout} rebalance={m.rebalance_timeout}"
        f" subscription={len(m.subscription)}B assignment={len(m.assignment)}B}}"
    )


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units,
    in 32-bit two's complement, which Kafka uses to place a group on a partition."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's
    ``Utils.abs(groupId.hashCode) % partitions`` (Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
