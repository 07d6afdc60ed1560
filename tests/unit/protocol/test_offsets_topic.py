"""``__consumer_offsets`` keys and values against bytes built by hand with ``struct``
from Kafka's message definitions (OffsetCommitKey/Value, GroupMetadataKey/Value), and
the group -> partition placement against values Java's String.hashCode gives."""

from __future__ import annotations

import struct

import pytest

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.offsets_topic import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    describe_record,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
)


def s(text: str | None) -> bytes:
    """Kafka's (nullable) string: int16 length, UTF-8 bytes."""
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_v1_is_version_group_topic_partition() -> None:
    expected = struct.pack(">h", 1) + s("g1") + s("orders") + struct.pack(">i", 7)
    key = OffsetCommitKey("g1", "orders", 7)
    assert encode_offset_commit_key(key) == expected
    assert decode_key(expected) == key


def test_offset_commit_key_v0_decodes_like_v1() -> None:
    raw = struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 0)
    assert decode_key(raw) == OffsetCommitKey("g", "t", 0)


def test_group_metadata_key_v2_is_version_and_group() -> None:
    expected = struct.pack(">h", 2) + s("grüppe")
    assert encode_group_metadata_key(GroupMetadataKey("grüppe")) == expected
    assert decode_key(expected) == GroupMetadataKey("grüppe")


def test_offset_commit_value_v3_puts_the_leader_epoch_after_the_offset() -> None:
    expected = (
        struct.pack(">hqi", 3, 1234567890123, 5) + s("meta") + struct.pack(">q", 1700000000000)
    )
    value = OffsetCommitValue(1234567890123, "meta", 1700000000000, leader_epoch=5)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_a_commit_with_its_own_retention_is_written_as_value_v1() -> None:
    expected = struct.pack(">hq", 1, 10) + s("") + struct.pack(">qq", 1000, 2000)
    value = OffsetCommitValue(10, "", 1000, expire_timestamp=2000)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


@pytest.mark.parametrize("version", [0, 2])
def test_offset_commit_values_v0_and_v2_carry_offset_metadata_and_timestamp(version: int) -> None:
    raw = struct.pack(">hq", version, 99) + s("x") + struct.pack(">q", 123)
    assert decode_offset_commit_value(raw) == OffsetCommitValue(99, "x", 123)


def _member_v3(member: MemberRecord) -> bytes:
    return (
        s(member.member_id)
        + s(member.group_instance_id)
        + s(member.client_id)
        + s(member.client_host)
        + struct.pack(">ii", member.rebalance_timeout, member.session_timeout)
        + b(member.subscription)
        + b(member.assignment)
    )


def test_group_metadata_value_v3_layout() -> None:
    members = (
        MemberRecord("m-1", "instance-a", "client", "/10.0.0.1", 300000, 10000, b"sub", b"asg"),
        MemberRecord("m-2", None, "client", "/10.0.0.2", 60000, 6000, b"", b""),
    )
    expected = (
        struct.pack(">h", 3)
        + s("consumer")
        + struct.pack(">i", 4)
        + s("range")
        + s("m-1")
        + struct.pack(">q", 1700000000000)
        + struct.pack(">i", 2)
        + _member_v3(members[0])
        + _member_v3(members[1])
    )
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 1700000000000, members)
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_an_empty_group_has_null_protocol_and_leader() -> None:
    expected = (
        struct.pack(">h", 3)
        + s("consumer")
        + struct.pack(">i", 2)
        + s(None)
        + s(None)
        + struct.pack(">qi", 5, 0)
    )
    value = GroupMetadataValue("consumer", 2, None, None, 5, ())
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_group_metadata_value_v0_has_one_timeout_and_no_state_timestamp() -> None:
    raw = (
        struct.pack(">h", 0)
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("h")
        + struct.pack(">i", 30000)
        + b(b"s")
        + b(b"a")
    )
    (member,) = decode_group_metadata_value(raw).members
    assert (member.session_timeout, member.rebalance_timeout) == (30000, 30000)
    assert member.group_instance_id is None
    assert decode_group_metadata_value(raw).current_state_timestamp == -1


def test_group_metadata_value_v1_puts_the_rebalance_timeout_before_the_session_timeout() -> None:
    raw = (
        struct.pack(">h", 1)
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + s("m")
        + s("c")
        + s("h")
        + struct.pack(">ii", 60000, 10000)
        + b(b"s")
        + b(b"a")
    )
    (member,) = decode_group_metadata_value(raw).members
    assert (member.rebalance_timeout, member.session_timeout) == (60000, 10000)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        struct.pack(">h", 9) + s("g"),
        struct.pack(">h", 1) + s("g") + s("t"),  # partition missing
        struct.pack(">h", 2) + s("g") + b"\x00",  # a byte too many
        struct.pack(">h", 2) + struct.pack(">h", 5) + b"ab",  # string cut short
    ],
)
def test_keys_that_are_not_kafkas_are_refused_as_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_key(raw)


def test_describe_record_decodes_commits_groups_and_tombstones() -> None:
    key = encode_offset_commit_key(OffsetCommitKey("g", "t", 3))
    value = encode_offset_commit_value(OffsetCommitValue(42, "m", 7))
    assert "offset_commit::group=g topic=t partition=3 offset=42" in describe_record(key, value)
    assert describe_record(key, None).endswith("<DELETE>")
    group_key = encode_group_metadata_key(GroupMetadataKey("g"))
    group = encode_group_metadata_value(GroupMetadataValue("consumer", 1, "range", "x", 0, ()))
    assert "group_metadata::group=g protocol_type=consumer generation=1" in describe_record(
        group_key, group
    )
    assert describe_record(b"\x00", None).startswith("undecodable")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # "hello".hashCode() in Java
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair: two UTF-16 units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_a_group_lands_on_abs_hash_mod_partitions_and_min_int_on_partition_zero() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    # "zzzzzzzzzz".hashCode() overflows to -1580979136 in Java.
    assert java_string_hash("zzzzzzzzzz") == -1580979136
    assert partition_for("zzzzzzzzzz", 7) == 1580979136 % 7
