"""RecordBatch v2: exact bytes, round trips, and refusal of anything damaged.

kafka-python's DefaultRecordBatchBuilder is an independent implementation of Kafka's
format; agreeing with it byte for byte (both directions) is our known-answer test.
"""

from __future__ import annotations

import contextlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Record,
    TimestampType,
    decode_batch,
    decode_consumer_records,
    decode_records,
    encode_batch,
    encode_values,
    iter_headers,
    patch_base_offset,
    patch_partition_leader_epoch,
    read_header,
    read_varint,
    set_log_append_time,
    validate_batch,
    varint,
)

# Every test here runs on the compiled record codec and on the pure-Python one.
pytestmark = pytest.mark.usefixtures("record_codec")

# Zigzag varints as the Kafka protocol guide defines them (value -> bytes).
VARINT_VECTORS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (8191, b"\xfe\x7f"),
    (-8192, b"\xff\x7f"),
    (8192, b"\x80\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    headers=headers_st,
    timestamp=st.integers(min_value=0, max_value=2**41),
)
records_st = st.lists(record_st, min_size=1, max_size=20)


def kafka_python_batch(
    records: list[Record], compression: int = 0, producer: tuple[int, int, int] = (-1, -1, -1)
) -> bytes:
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 24,
    )
    for offset, record in enumerate(records):
        builder.append(
            offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
        )
    batch = bytearray(builder.build())
    # kafka-python writes partitionLeaderEpoch 0; Kafka's producer writes -1 (no epoch).
    patch_partition_leader_epoch(batch, 0, -1)
    return bytes(batch)


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_varints_match_the_protocol_guide(value: int, encoded: bytes) -> None:
    assert varint(value) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))


@given(records_st)
def test_encoding_is_byte_identical_to_an_independent_implementation(records: list[Record]) -> None:
    assert encode_batch(records) == kafka_python_batch(records)


@given(
    records_st,
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(0, 2**31 - 1),
)
def test_idempotent_batches_are_byte_identical_to_an_independent_implementation(
    records: list[Record], producer_id: int, producer_epoch: int, base_sequence: int
) -> None:
    ids = {"producer_id": producer_id, "producer_epoch": producer_epoch}
    encoded = encode_batch(records, **ids, base_sequence=base_sequence)
    assert encoded == kafka_python_batch(records, producer=(*ids.values(), base_sequence))


@given(records_st)
def test_batches_of_the_independent_implementation_decode(records: list[Record]) -> None:
    # kafka-python falls back to no compression when gzip would not save space.
    _, decoded = decode_batch(kafka_python_batch(records, compression=1))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]


@given(records_st, st.sampled_from(list(Compression)), st.integers(0, 2**40))
def test_round_trip_keeps_every_field(
    records: list[Record], compression: Compression, base_offset: int
) -> None:
    batch = encode_batch(records, base_offset=base_offset, compression=compression)
    header, decoded = decode_batch(batch)
    assert header.size == len(batch)
    assert header.record_count == len(records)
    assert header.base_offset == base_offset
    assert header.last_offset == base_offset + len(records) - 1
    assert header.max_timestamp == max(r.timestamp or 0 for r in records)
    assert [d.offset for d in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [(d.key, d.value, d.headers, d.timestamp) for d in decoded] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records
    ]


@given(records_st, st.sampled_from(list(Compression)), st.booleans())
def test_consumer_records_are_the_decoded_records_with_their_topic_partition(
    records: list[Record], compression: Compression, log_append_time: bool
) -> None:
    batch = bytearray(encode_batch(records, base_offset=7, compression=compression))
    if log_append_time:
        set_log_append_time(batch, 0, 99_000)
    header, decoded = decode_batch(batch)
    _, consumed = decode_consumer_records(batch, 0, "events", 3)
    assert consumed == [("events", 3, *record, header.timestamp_type) for record in decoded]
    assert {c.timestamp_type for c in consumed} == {
        TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME
    }


def test_gzip_section_is_gzip_framed_like_kafka() -> None:
    batch = encode_batch([Record(b"x" * 1000)], compression=Compression.GZIP)
    section = batch[BATCH_HEADER_SIZE:]
    assert section[:2] == b"\x1f\x8b"
    assert zlib.decompress(section, wbits=31).endswith(b"x" * 1000 + b"\x00")
    reader = DefaultRecordBatch(bytearray(batch))
    assert [r.value for r in reader] == [b"x" * 1000]


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=50), st.integers(0, 2**41))
def test_fast_value_path_equals_the_general_encoder(values: list[bytes], ts: int) -> None:
    general = encode_batch([Record(v, timestamp=ts) for v in values])
    assert encode_values(values, timestamp=ts) == general


@pytest.mark.parametrize("size", [0, 63, 64, 8191, 8192, 16367, 16368, 16369, 16384, 20_000])
def test_fast_value_path_is_exact_around_its_cache_limits(size: int) -> None:
    values = [b"v" * size, b"w" * (size // 2)]
    general = encode_batch([Record(v, timestamp=3) for v in values])
    assert encode_values(values, timestamp=3) == general


@pytest.mark.parametrize("count", [16_384, 16_385])
def test_fast_value_path_is_exact_for_batches_past_the_delta_cache(count: int) -> None:
    values = [b"%d" % i for i in range(count)]
    general = encode_batch([Record(v, timestamp=3) for v in values])
    assert encode_values(values, timestamp=3) == general


def test_records_without_a_timestamp_take_now() -> None:
    batch = encode_batch([Record(b"a"), Record(b"b", timestamp=5)], now_ms=1_000)
    _, decoded = decode_batch(batch)
    assert [d.timestamp for d in decoded] == [1_000, 5]


def test_empty_batches_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_batch([])
    with pytest.raises(ValueError):
        encode_values([], timestamp=0)


def sample_batch() -> bytes:
    return encode_batch(
        [Record(b"v1", b"k1", (("h", b"x"),), 1_000), Record(None, None, (), 1_005)]
    )


def test_decoding_byte_by_byte_never_accepts_a_partial_batch() -> None:
    batch = sample_batch()
    for cut in range(len(batch)):
        with pytest.raises(CorruptMessageError):
            validate_batch(batch[:cut])
        assert list(iter_headers(batch[:cut])) == []
    assert [pos for pos, _ in iter_headers(batch)] == [0]


def test_trailing_bytes_are_not_part_of_the_batch() -> None:
    batch = sample_batch()
    padded = batch + b"\x00" * 7 + sample_batch()[:30]
    header = validate_batch(padded)
    assert header.size == len(batch)
    assert [pos for pos, _ in iter_headers(padded)] == [0]
    assert [r.value for r in decode_records(padded)] == [b"v1", None]


def test_every_single_byte_flip_inside_the_crc_is_detected() -> None:
    batch = sample_batch()
    for index in range(21, len(batch)):
        damaged = bytearray(batch)
        damaged[index] ^= 0x40
        with pytest.raises(CorruptMessageError):
            validate_batch(damaged)


def test_bad_magic_and_bad_length_are_corrupt() -> None:
    batch = bytearray(sample_batch())
    batch[16] = 1
    with pytest.raises(CorruptMessageError, match="magic"):
        read_header(batch)
    batch = bytearray(sample_batch())
    batch[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptMessageError, match="length"):
        read_header(batch)
    with pytest.raises(CorruptMessageError):
        list(iter_headers(bytes(batch)))


def test_zeros_from_preallocation_are_not_a_batch() -> None:
    with pytest.raises(CorruptMessageError):
        validate_batch(bytes(4096))


def test_record_count_must_match_last_offset_delta() -> None:
    batch = bytearray(sample_batch())
    batch[57:61] = (3).to_bytes(4, "big")
    with pytest.raises(CorruptMessageError, match="records"):
        validate_batch(batch)


def test_patching_offset_and_epoch_keeps_the_crc_valid() -> None:
    batch = bytearray(sample_batch())
    patch_base_offset(batch, 0, 1234)
    patch_partition_leader_epoch(batch, 0, 7)
    header = validate_batch(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 7)
    assert [r.offset for r in decode_batch(batch)[1]] == [1234, 1235]


def test_patching_inside_a_larger_buffer_touches_only_that_batch() -> None:
    buffer = bytearray(sample_batch() * 3)
    size = len(sample_batch())
    for index, (pos, _) in enumerate(iter_headers(buffer)):
        patch_base_offset(buffer, pos, 10 * index)
    assert [h.base_offset for _, h in iter_headers(buffer)] == [0, 10, 20]
    assert all(validate_batch(buffer, pos) for pos in range(0, 3 * size, size))


def test_log_append_time_rewrites_timestamps_and_crc() -> None:
    batch = bytearray(sample_batch())
    set_log_append_time(batch, 0, 99_000)
    header = validate_batch(batch)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in decode_batch(batch)[1]] == [99_000, 99_000]
    reader = DefaultRecordBatch(batch)
    assert reader.timestamp_type == 1
    assert reader.validate_crc()


def test_truncated_gzip_data_is_corrupt_not_a_crash() -> None:
    batch = encode_batch([Record(b"y" * 500)], compression=Compression.GZIP)
    _, decoded = decode_batch(batch)
    damaged = bytearray(batch)
    damaged[-5] ^= 0xFF
    # With the CRC off we reach the decompressor, which must fail cleanly.
    with pytest.raises(CorruptMessageError):
        decode_batch(damaged, verify_crc=False)
    assert decoded[0].value == b"y" * 500


@given(st.binary(min_size=61, max_size=400))
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    with contextlib.suppress(CorruptMessageError):
        decode_batch(data, verify_crc=False)
