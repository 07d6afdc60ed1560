"""BatchView, the zero-object read path: the same records as the decoder, read in place,
and the same refusal of damaged batches."""

from __future__ import annotations

from itertools import chain

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import (
    Compression,
    Record,
    TimestampType,
    decode_consumer_records,
    encode_batch,
    encode_values,
    iter_headers,
)
from minibroker.protocol.records.view import batch_views

# Every test here runs on the compiled record codec and on the pure-Python one.
pytestmark = pytest.mark.usefixtures("record_codec")


def _decoded(buf: bytes, min_offset: int = 0) -> list[tuple[object, ...]]:
    out = []
    for pos, _ in iter_headers(buf):
        out += [r for r in decode_consumer_records(buf, pos, "t", 1)[1] if r.offset >= min_offset]
    return out


headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    headers=headers_st,
    timestamp=st.one_of(st.none(), st.integers(0, 2**41)),
)


@settings(max_examples=100)
@given(
    batches=st.lists(st.lists(record_st, min_size=1, max_size=6), min_size=1, max_size=3),
    compression=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]),
    log_append=st.booleans(),
    skip=st.integers(0, 10),
)
def test_views_hold_the_records_the_decoder_returns(
    batches: list[list[Record]],
    compression: Compression,
    log_append: bool,
    skip: int,
) -> None:
    timestamp_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    buf, base = b"", 0
    for records in batches:
        buf += encode_batch(
            records,
            base_offset=base,
            compression=compression,
            timestamp_type=timestamp_type,
            now_ms=5,
        )
        base += len(records)
    views = batch_views(buf, "t", 1, skip)
    expected = _decoded(buf, skip)
    flat = [r for v in views for r in v.records()]
    assert flat == expected
    assert sum(len(v) for v in views) == len(expected)
    assert [o for v in views for o in v.offsets()] == [r.offset for r in expected]
    assert [t for v in views for t in v.timestamps()] == [r.timestamp for r in expected]
    values = [v for view_ in views for v in view_.values()]
    assert [None if v is None else bytes(v) for v in values] == [r.value for r in expected]
    keys = list(chain.from_iterable(batch.keys() for batch in views))
    assert [None if k is None else bytes(k) for k in keys] == [r.key for r in expected]
    headers = [view_.headers(i) for view_ in views for i in range(len(view_))]
    assert headers == [r.headers for r in expected]


def test_values_are_slices_of_the_fetched_bytes_not_copies() -> None:
    buf = bytearray(encode_values([b"aaaa", b"bbbb"], timestamp=1))
    (batch,) = batch_views(buf, "t", 0, 0)
    values = batch.values()
    buf[-5:-1] = b"BBBB"  # the second value, in place: the view sees it
    assert values[1] == b"BBBB"


def test_a_crc_mismatch_is_refused() -> None:
    buf = bytearray(encode_batch([Record(b"value", key=b"k")]))
    buf[-2] ^= 0x01
    with pytest.raises(CorruptMessageError, match="CRC"):
        batch_views(bytes(buf), "t", 0, 0)


def test_a_record_that_does_not_fit_its_length_is_refused_with_the_decoders_error() -> None:
    buf = bytearray(encode_batch([Record(b"value")]))
    buf[61] = 0x0C  # record length 6: shorter than its fields
    with pytest.raises(CorruptMessageError, match="record length does not match its fields"):
        batch_views(bytes(buf), "t", 0, 0, verify_crc=False)


def test_records_before_the_minimum_offset_are_left_out() -> None:
    buf = encode_values([b"a", b"b", b"c"], timestamp=1, base_offset=10)
    (batch,) = batch_views(buf, "t", 0, 12)
    assert (batch.offsets(), batch.values(), len(batch)) == ([12], [memoryview(b"c")], 1)
    assert batch_views(buf, "t", 0, 13) == []


def test_headers_index_outside_the_view_raises() -> None:
    (batch,) = batch_views(encode_values([b"a"], timestamp=1), "t", 0, 0)
    with pytest.raises(IndexError):
        batch.headers(1)


def test_values_and_keys_with_long_length_varints_are_sliced_whole() -> None:
    big_value, big_key = bytes(range(256)) * 80, b"k" * 20_000  # 3-byte varint lengths
    records = [Record(big_value, key=big_key), Record(None, key=b"k"), Record(b"v")]
    buf = encode_batch(records, base_offset=7)
    (batch,) = batch_views(buf, "t", 1, 0)
    assert [None if v is None else bytes(v) for v in batch.values()] == [big_value, None, b"v"]
    keys = batch.keys()  # a BatchView, not a dict: keys() are the records' keys
    assert [None if k is None else bytes(k) for k in keys] == [big_key, b"k", None]
    assert batch.offsets() == [7, 8, 9]
    assert batch.records() == _decoded(buf)


def test_a_negative_header_count_is_refused_with_the_decoders_error() -> None:
    buf = bytearray(encode_values([b"value"], timestamp=1))
    buf[-1] = 0x03  # header count -2
    with pytest.raises(CorruptMessageError) as by_view:
        batch_views(bytes(buf), "t", 0, 0, verify_crc=False)
    with pytest.raises(CorruptMessageError) as by_decoder:
        decode_consumer_records(bytes(buf), 0, "t", 0, verify_crc=False)
    assert str(by_view.value) == str(by_decoder.value)


def test_a_record_running_into_the_next_batch_is_refused() -> None:
    first = bytearray(encode_values([b"aaaa"], timestamp=1))
    first[61] += 2  # record length 1 byte longer than its fields
    buf = bytes(first) + encode_values([b"bbbb"], timestamp=1, base_offset=1)
    with pytest.raises(CorruptMessageError):
        batch_views(buf, "t", 0, 0, verify_crc=False)


@settings(max_examples=200)
@given(
    records=st.lists(record_st, min_size=1, max_size=4),
    where=st.integers(0, 10_000),
    byte=st.integers(0, 255),
)
def test_a_damaged_records_section_is_read_or_refused_as_the_decoder_does(
    records: list[Record], where: int, byte: int
) -> None:
    buf = bytearray(encode_batch(records, base_offset=3))
    buf[61 + where % (len(buf) - 61)] = byte
    try:
        expected = decode_consumer_records(bytes(buf), 0, "t", 1, verify_crc=False)[1]
    except CorruptMessageError as exc:
        with pytest.raises(CorruptMessageError) as refused:
            batch_views(bytes(buf), "t", 1, 0, verify_crc=False)
        assert str(refused.value) == str(exc)
        return
    (batch,) = batch_views(bytes(buf), "t", 1, 0, verify_crc=False)
    assert batch.records() == expected
    assert [None if v is None else bytes(v) for v in batch.values()] == [r.value for r in expected]
    keys = batch.keys()
    assert [None if k is None else bytes(k) for k in keys] == [r.key for r in expected]
    assert [batch.headers(i) for i in range(len(batch))] == [r.headers for r in expected]
    assert batch.offsets() == [r.offset for r in expected]
