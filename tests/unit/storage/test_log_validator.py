"""Produce-side checks: record counts walked without decoding, LogAppendTime stamping."""

from __future__ import annotations

import struct
import zlib

import pytest

from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError, InvalidRecordError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Record,
    decode_batch,
    encode_batch,
    encode_values,
    validate_batch,
)
from minibroker.storage import log_validator
from minibroker.storage.log_validator import (
    check_record_counts,
    recompress,
    stamp_log_append_time,
    stored_codec,
)

# Every test here runs on the compiled record codec and on the pure-Python one.
pytestmark = pytest.mark.usefixtures("record_codec")


def with_count(batch: bytes, count: int) -> bytes:
    """``batch`` re-labelled as holding ``count`` records, with a CRC that matches."""
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def with_section(batch: bytes, section: bytes) -> bytes:
    """``batch``'s header over another records section, length and CRC fixed."""
    buf = bytearray(batch[:BATCH_HEADER_SIZE] + section)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


@pytest.mark.parametrize("size", [0, 10, 200, 9000, 70_000])
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_honest_batches_pass(size: int, compression: Compression) -> None:
    records = [Record(b"v" * size, key=b"k"), Record(None), Record(b"x" * size)]
    batch = encode_batch(records, compression=compression)
    check_record_counts(batch + batch)


def test_a_batch_of_more_than_65536_records_passes_when_honest() -> None:
    batch = encode_values([b"v"] * 70_000, timestamp=1)
    check_record_counts(batch)


@pytest.mark.parametrize("count", [1, 2, 4, 100, 70_000, 2**31 - 1])
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_a_count_that_does_not_match_the_records_is_invalid(
    count: int, compression: Compression
) -> None:
    batch = encode_batch([Record(b"a"), Record(b"b"), Record(b"c")], compression=compression)
    with pytest.raises(InvalidRecordError):
        check_record_counts(with_count(batch, count))


def test_a_one_record_batch_claiming_2_31_records_is_invalid() -> None:
    lying = with_count(encode_batch([Record(b"a")]), 2**31 - 1)
    validate_batch(lying)  # well-formed and its CRC matches: only the count lies
    with pytest.raises(InvalidRecordError, match="declares 2147483647 records but holds 1"):
        check_record_counts(lying)


def test_a_last_record_whose_offset_delta_is_not_its_index_is_invalid() -> None:
    honest = encode_batch([Record(b"a"), Record(b"b")])
    # The second record's offsetDelta (zigzag 1 -> byte 2) becomes 5 (byte 10).
    section = bytearray(honest[BATCH_HEADER_SIZE:])
    second = section[0] // 2 + 1
    assert section[second + 3] == 2  # length, attributes, timestampDelta, offsetDelta
    section[second + 3] = 10
    with pytest.raises(InvalidRecordError, match="offset delta 5"):
        check_record_counts(with_section(honest, bytes(section)))


@pytest.mark.parametrize("records", [b"", None])
def test_empty_produce_data_is_invalid(records: bytes | None) -> None:
    with pytest.raises(InvalidRecordError):
        check_record_counts(records)  # type: ignore[arg-type]


def test_a_gzip_batch_that_inflates_beyond_the_bound_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(log_validator, "MAX_DECOMPRESSED_BATCH_BYTES", 1000)
    batch = encode_batch([Record(b"z" * 5000)], compression=Compression.GZIP)
    with pytest.raises(CorruptMessageError, match="inflates beyond 1000"):
        check_record_counts(batch)


def test_a_gzip_batch_whose_data_ends_early_is_corrupt() -> None:
    batch = encode_batch([Record(b"z" * 5000)], compression=Compression.GZIP)
    section = zlib.compress(b"x" * 100, wbits=31)[:-10]
    with pytest.raises(CorruptMessageError, match="ends early"):
        check_record_counts(with_section(batch, section))


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


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_compacted_topics_refuse_a_record_without_a_key(codec: Compression) -> None:
    keyed = encode_batch([Record(b"v", b"k"), Record(None, b"gone")], compression=codec)
    log_validator.check_keys(keyed)  # keyed records and tombstones are fine
    keyless = encode_batch([Record(b"v", b"k"), Record(b"no key")], compression=codec)
    with pytest.raises(InvalidRecordError, match="without a key"):
        log_validator.check_keys(keyed + keyless)


def test_a_keyless_record_is_named_by_its_index_in_the_first_batch_holding_one() -> None:
    good = encode_batch([Record(b"v", b"k")])
    mixed = encode_batch([Record(b"a", b"k"), Record(b"b"), Record(b"c", b"k"), Record(b"d")])
    with pytest.raises(InvalidRecordError) as refused:
        log_validator.check_keys(good + mixed)
    assert [index for index, _ in refused.value.record_errors] == [1, 3]
    assert all("without a key" in why for _, why in refused.value.record_errors)
