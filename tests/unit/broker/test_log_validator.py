"""Produce-side checks: record counts walked without decoding, LogAppendTime stamping."""

from __future__ import annotations

import struct

import pytest

from minibroker.broker.log_validator import (
    check_record_counts,
    recompress,
    stamp_log_append_time,
    stored_codec,
)
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    Compression,
    Record,
    decode_batch,
    encode_batch,
    validate_batch,
)


def with_count(batch: bytes, count: int) -> bytes:
    """``batch`` re-labelled as holding ``count`` records, with a CRC that matches."""
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


@pytest.mark.parametrize("size", [0, 10, 200, 9000, 70_000])
def test_honest_batches_pass(size: int) -> None:
    batch = encode_batch([Record(b"v" * size, key=b"k"), Record(None), Record(b"x" * size)])
    check_record_counts(batch + batch)


@pytest.mark.parametrize("count", [1, 2, 4, 100])
def test_a_count_that_does_not_match_the_records_is_corrupt(count: int) -> None:
    batch = encode_batch([Record(b"a"), Record(b"b"), Record(b"c")])
    with pytest.raises(CorruptMessageError):
        check_record_counts(with_count(batch, count))


def test_compressed_batches_are_left_to_their_crc() -> None:
    batch = encode_batch([Record(b"a"), Record(b"b")], compression=Compression.GZIP)
    check_record_counts(with_count(batch, 5))


def test_log_append_time_sets_timestamps_and_a_valid_crc() -> None:
    buf = bytearray(encode_batch([Record(b"a", timestamp=1), Record(b"b", timestamp=2)]))
    stamp_log_append_time(buf, 99)
    header = validate_batch(buf)
    assert header.max_timestamp == 99
    _, decoded = decode_batch(buf)
    assert [r.timestamp for r in decoded] == [99, 99]


def test_log_append_time_never_repairs_a_corrupt_batch() -> None:
    buf = bytearray(encode_batch([Record(b"a")]))
    buf[-1] ^= 1
    with pytest.raises(CorruptMessageError):
        stamp_log_append_time(buf, 99)


RECORDS = [
    Record(b"v%d" % i * 30, key=b"k%d" % i, headers=(("h", b"x"),), timestamp=5000 + i)
    for i in range(20)
]


def test_compression_type_names_the_stored_codec_and_producer_keeps_what_was_sent() -> None:
    assert stored_codec("producer") is None
    assert stored_codec("uncompressed") is Compression.NONE
    assert stored_codec("zstd") is Compression.ZSTD


@pytest.mark.parametrize("target", list(Compression), ids=lambda c: c.name.lower())
def test_batches_in_another_codec_are_re_encoded_with_the_same_records(target: Compression) -> None:
    sent = encode_batch(
        RECORDS[:10], compression=Compression.GZIP, producer_id=7, producer_epoch=1, base_sequence=3
    )
    sent += encode_batch(RECORDS[10:], compression=Compression.SNAPPY)
    stored = recompress(sent, target)
    pos = 0
    decoded = []
    while pos < len(stored):
        header = validate_batch(stored, pos)
        assert header.compression is target
        decoded += decode_batch(stored, pos)[1]
        pos += header.size
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in RECORDS
    ]
    first = validate_batch(stored, 0)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 1, 3)


def test_batches_already_in_the_topics_codec_are_not_touched() -> None:
    sent = encode_batch(RECORDS, compression=Compression.LZ4)
    assert recompress(sent, Compression.LZ4) is sent


def test_a_corrupt_batch_is_refused_rather_than_re_encoded() -> None:
    bad = bytearray(encode_batch(RECORDS, compression=Compression.GZIP))
    bad[-3] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        recompress(bytes(bad), Compression.NONE)
