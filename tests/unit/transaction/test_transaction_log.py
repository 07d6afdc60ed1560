"""``__transaction_state`` records in Kafka's bytes: key v0, value v0 written and read,
value v1 (flexible, tagged fields) read, and written when it names a previous or next
producer id."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.transaction_log import (
    TransactionLogValue,
    TxnStatus,
    decode_key,
    decode_value,
    describe_record,
    encode_key,
    encode_value,
    partition_for,
)

VALUE = TransactionLogValue(
    producer_id=4000,
    producer_epoch=2,
    timeout_ms=60000,
    status=TxnStatus.ONGOING,
    partitions=(("a", 0), ("a", 2), ("b", 1)),
    last_update_ms=1_700_000_000_500,
    start_ms=1_700_000_000_000,
)


def test_the_key_is_a_version_and_the_transactional_id() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx-é")) == "tx-é"


def test_value_v0_has_kafkas_layout() -> None:
    expected = b"".join(
        [
            struct.pack(">hqhib", 0, 4000, 2, 60000, 1),
            struct.pack(">i", 2),
            struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2),
            struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1),
            struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000),
        ]
    )
    assert encode_value(VALUE) == expected
    assert decode_value(expected) == VALUE


def test_value_v1_flexible_with_tagged_fields_is_read() -> None:
    tagged = b"\x01" + b"\x00\x08" + struct.pack(">q", 3999)  # tag 0: previous producer id
    data = b"".join(
        [
            struct.pack(">hqhib", 1, 4000, 2, 60000, 1),
            b"\x03",  # two topics
            b"\x02a" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00",
            b"\x02b" + b"\x02" + struct.pack(">i", 1) + b"\x00",
            struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000),
            tagged,
        ]
    )
    assert decode_value(data) == dataclasses.replace(VALUE, previous_producer_id=3999)


def test_a_value_with_a_next_producer_id_is_written_as_v1() -> None:
    value = dataclasses.replace(VALUE, status=TxnStatus.PREPARE_COMMIT, next_producer_id=5000)
    expected = b"".join(
        [
            struct.pack(">hqhib", 1, 4000, 2, 60000, 2),
            b"\x03",  # two topics
            b"\x02a" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00",
            b"\x02b" + b"\x02" + struct.pack(">i", 1) + b"\x00",
            struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000),
            b"\x03",  # three tagged fields: previous and next producer id, client version
            b"\x00\x08" + struct.pack(">q", -1),
            b"\x01\x08" + struct.pack(">q", 5000),
            b"\x02\x02" + struct.pack(">h", 2),
        ]
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value
    assert "nextProducerId=5000" in describe_record(encode_key("tx"), expected)


@pytest.mark.parametrize("data", [b"", b"\x00\x05", encode_value(VALUE)[:-3]])
def test_a_bad_value_is_corrupt_not_a_crash(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_value(data)


def test_dump_log_describes_values_and_tombstones() -> None:
    assert "state=Ongoing" in describe_record(encode_key("tx"), encode_value(VALUE))
    assert describe_record(encode_key("tx"), None).endswith("<DELETE>")


def test_ids_are_placed_as_groups_are() -> None:
    # Java: "tx-1".hashCode() == 3572520
    assert partition_for("tx-1", 50) == 3572520 % 50
