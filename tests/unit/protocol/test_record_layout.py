"""The batch layout (protocol/records/layout.py) is the one declaration every header
reader builds on: its partial structs must read the same bytes as the whole header."""

from __future__ import annotations

import pytest

from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    CRC_COVERED,
    CRC_START,
    HEAD,
    HEADER,
    HEADER_FIELDS,
    header_struct,
)


def test_the_fields_tile_the_61_byte_header_with_no_gap() -> None:
    at = 0
    for field in HEADER_FIELDS:
        assert field.offset == at, field
        at += header_struct(field.name).size - field.offset
    assert at == BATCH_HEADER_SIZE == HEADER.size
    assert HEAD.size == CRC_START
    assert HEAD.size + CRC_COVERED.size == BATCH_HEADER_SIZE


def test_a_partial_struct_reads_what_the_whole_header_reads() -> None:
    batch = encode_batch(
        [Record(b"v", b"k", timestamp=7), Record(b"w", timestamp=9)],
        base_offset=40,
        producer_id=3,
        producer_epoch=1,
        base_sequence=5,
        partition_leader_epoch=2,
    )
    whole = dict(zip((f.name for f in HEADER_FIELDS), HEADER.unpack_from(batch), strict=True))
    names = ("batch_length", "attributes", "last_offset_delta", "record_count")
    assert header_struct(*names).unpack_from(batch) == tuple(whole[name] for name in names)
    assert whole["base_offset"] == 40 and whole["record_count"] == 2
    assert whole["max_timestamp"] == 9 and whole["base_sequence"] == 5


def test_fields_must_be_asked_for_in_header_order() -> None:
    with pytest.raises(ValueError, match="not after"):
        header_struct("record_count", "base_offset")
