"""The compiled record codec agrees with the pure-Python one byte for byte, and hands
every input that is not plainly well formed back to it, so both raise the same errors.

Each public function is run once with the compiled codec and once without it, and the
two outcomes (the records or bytes returned, or the error's type and message) must be
equal. The compiled functions are also fed random and truncated bytes directly: they
must never crash, and whatever they accept must be what the Python code returns.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.errors import CorruptMessageError, InvalidRecordError
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    ConsumerRecord,
    DecodedRecord,
    Record,
    accel,
    decode_batch,
    decode_consumer_records,
    encode_batch,
    encode_values,
    read_header,
    validate_batch,
    walk,
)
from minibroker.protocol.records.batch import BatchHeader, assemble_batch
from minibroker.protocol.records.decode import _decode_section_python
from minibroker.protocol.records.encode import _encode_values_python
from minibroker.protocol.records.layout import HEADER
from minibroker.protocol.records.types import TimestampType
from minibroker.protocol.records.varint import VARINT_CACHE_SIZE, raw_varint
from minibroker.protocol.records.view import batch_views
from minibroker.storage import log_validator
from tests.support.record_codec import codec

INT64_MAX = 2**63 - 1


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """What ``call`` returns, or the type and message of what it raises."""
    try:
        return "returned", call()
    except Exception as exc:  # any error: the two paths must raise alike
        return type(exc).__name__, str(exc)


def both(compiled: ModuleType, call: Callable[[], Any]) -> tuple[Any, Any]:
    """``call``'s outcome on the compiled codec and on the pure-Python one."""
    with codec(compiled):
        fast = outcome(call)
    with codec(None):
        reference = outcome(call)
    return fast, reference


def same(compiled: ModuleType, call: Callable[[], Any]) -> Any:
    """Assert ``call`` has the same outcome on both codecs; return it."""
    fast, reference = both(compiled, call)
    assert fast == reference
    if fast[0] == "returned" and isinstance(fast[1], tuple) and isinstance(fast[1][1], list):
        # the same record classes too (== on tuples ignores the class)
        assert [type(r) for r in fast[1][1]] == [type(r) for r in reference[1][1]]
    return fast


# Lengths either side of each varint width (one byte holds zigzag 0..63, two 64..8191).
edge_size_st = st.sampled_from([0, 1, 63, 64, 65, 8191, 8192, 8193])
big_value_st = st.builds(lambda n, byte: bytes([byte]) * n, edge_size_st, st.integers(0, 255))
headers_st = st.lists(
    st.tuples(
        st.one_of(st.text(max_size=8), st.just("h" * 64)),
        st.one_of(st.none(), st.binary(max_size=16), big_value_st),
    ),
    max_size=3,
).map(tuple)
record_st = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300), big_value_st),
    key=st.one_of(st.none(), st.binary(max_size=70), big_value_st),
    headers=headers_st,
    timestamp=st.one_of(st.none(), st.integers(-(2**45), 2**45)),
)
batch_st = st.builds(
    encode_batch,
    st.lists(record_st, min_size=1, max_size=8),
    base_offset=st.one_of(st.integers(0, 2**40), st.just(INT64_MAX - 3)),
    now_ms=st.integers(0, 2**41),
    timestamp_type=st.sampled_from(TimestampType),
)


@settings(max_examples=150)
@given(batch=batch_st)
def test_both_codecs_decode_every_field_alike(compiled_codec: ModuleType, batch: bytes) -> None:
    kind, (_, records) = same(compiled_codec, lambda: decode_batch(batch))
    assert kind == "returned" and all(type(r) is DecodedRecord for r in records)
    kind, (_, records) = same(compiled_codec, lambda: decode_consumer_records(batch, 0, "t", 3))
    assert kind == "returned" and all(type(r) is ConsumerRecord for r in records)


@settings(max_examples=150)
@given(batch=batch_st, min_offset=st.integers(0, 3))
def test_both_codecs_give_the_same_batch_views(
    compiled_codec: ModuleType, batch: bytes, min_offset: int
) -> None:
    def read() -> list[Any]:
        views = batch_views(batch, "t", 1, read_header(batch).base_offset + min_offset)
        return [
            (
                [None if v is None else bytes(v) for v in view.values()],
                [None if k is None else bytes(k) for k in view.keys()],  # noqa: SIM118
                view.offsets(),
                view.timestamps(),
                [view.headers(i) for i in range(len(view))],
                view.records(),
            )
            for view in views
        ]

    same(compiled_codec, read)


@settings(max_examples=200)
@given(batch=batch_st, data=st.data())
def test_damaged_and_truncated_batches_raise_the_same_errors(
    compiled_codec: ModuleType, batch: bytes, data: st.DataObject
) -> None:
    """Bytes of the records section overwritten and the section cut short, with the
    header's length and CRC then made to fit, so the damage reaches the record decoder."""
    section = bytearray(batch[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(0, 3))):
        where = data.draw(st.integers(0, len(section) - 1))
        section[where] = data.draw(st.integers(0, 255))
    section = section[: data.draw(st.integers(0, len(section)))]
    header = read_header(batch)
    damaged = batch_of(
        bytes(section),
        count=data.draw(st.sampled_from([header.record_count, header.record_count + 1, 0])),
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        timestamp_type=header.timestamp_type,
    )
    same(compiled_codec, lambda: decode_batch(damaged))
    same(compiled_codec, lambda: decode_consumer_records(damaged, 0, "t", 3))
    same(
        compiled_codec,
        lambda: [
            (list(map(bytes, filter(None, v.values()))), v.records())
            for v in batch_views(damaged, "t", 3, 0)
        ],
    )
    same(
        compiled_codec,
        lambda: walk.count_records(damaged, BATCH_HEADER_SIZE, len(damaged), 0),
    )
    # the produce check: one batch filling the buffer, then with bytes after it
    same(compiled_codec, lambda: log_validator.check_record_counts(damaged))
    same(compiled_codec, lambda: log_validator.check_record_counts(damaged + b"\x00" * 61))


def batch_of(
    section: bytes, *, count: int, base_offset: int = 0, timestamp: int = 1, **header: Any
) -> bytes:
    """An uncompressed batch around ``section`` claiming ``count`` records."""
    fields: dict[str, Any] = {
        "base_timestamp": timestamp,
        "max_timestamp": timestamp,
        "compression": Compression.NONE,
        "timestamp_type": TimestampType.CREATE_TIME,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "partition_leader_epoch": -1,
    }
    return assemble_batch(section, count=count, base_offset=base_offset, **{**fields, **header})


def record(body: bytes) -> bytes:
    """A record: its length (a one-byte zigzag varint) then ``body``."""
    assert len(body) < 64
    return bytes([len(body) << 1]) + body


NINE_BYTE_MAX = b"\xfe" + b"\xff" * 7 + b"\x7f"  # zigzag 2**62 - 1: the largest 9-byte
TEN_BYTES = b"\x80" * 9 + b"\x01"  # raw 2**63, value 2**62: valid, but left to Python
ODD_SECTIONS = {
    "null key, null value": record(b"\x00\x00\x00\x01\x01\x00"),
    "non-canonical null value": record(b"\x00\x00\x00\x01\x81\x00\x00"),
    "non-canonical null key": record(b"\x00\x00\x00\x81\x00\x01\x00"),
    "negative key length": record(b"\x00\x00\x00\x03\x01\x00"),
    "value length -2": record(b"\x00\x00\x00\x01\x03\x00"),
    "value past the record": record(b"\x00\x00\x00\x01\x10ab\x00"),
    "header with a null name": record(b"\x00\x00\x00\x01\x01\x02\x01\x01"),
    "header with a null value": record(b"\x00\x00\x00\x01\x01\x02\x02h\x01"),
    "header value -2": record(b"\x00\x00\x00\x01\x01\x02\x02h\x03"),
    "negative header count": record(b"\x00\x00\x00\x01\x01\x01"),
    "header count past the record": record(b"\x00\x00\x00\x01\x01\x7e"),
    "invalid utf-8 header name": record(b"\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x00"),
    "largest nine-byte timestamp delta": record(b"\x00" + NINE_BYTE_MAX + b"\x00\x01\x01\x00"),
    "ten-byte offset delta": record(b"\x00\x00" + TEN_BYTES + b"\x01\x01\x00"),
    "eleven-byte varint": record(b"\x00" + b"\x80" * 11 + b"\x00\x00\x01\x01\x00"),
    "largest nine-byte offset delta": record(b"\x00\x00" + NINE_BYTE_MAX + b"\x01\x01\x00"),
    "record length 0": b"\x00",
    "record length -1": b"\x01",
    "record length past the section": b"\x7e\x00\x00",
    "record shorter than its fields": record(b"\x00\x00"),
    "bytes after the last record": record(b"\x00\x00\x00\x01\x01\x00") + b"\x00",
    "empty": b"",
}


@pytest.mark.parametrize("count", [0, 1, 2, -1, 2**31 - 1])
@pytest.mark.parametrize("name", sorted(ODD_SECTIONS))
@pytest.mark.parametrize("base_offset", [0, INT64_MAX - 1])
def test_odd_records_decode_or_fail_alike(
    compiled_codec: ModuleType, name: str, count: int, base_offset: int
) -> None:
    batch = batch_of(ODD_SECTIONS[name], count=count, base_offset=base_offset)
    same(compiled_codec, lambda: decode_consumer_records(batch, 0, "t", 0))
    same(compiled_codec, lambda: [v.records() for v in batch_views(batch, "t", 0, 0)])
    same(compiled_codec, lambda: walk.count_records(batch, BATCH_HEADER_SIZE, len(batch), 0))


def test_the_null_and_header_cases_decode_on_the_compiled_path(compiled_codec: ModuleType) -> None:
    """The well-formed odd records are decoded by the C code itself, not handed back."""
    for name in ("null key, null value", "header with a null value", "invalid utf-8 header name"):
        section = ODD_SECTIONS[name]
        records = compiled_codec.decode_records(section, 5, 1, 1, False, 1, DecodedRecord, (), ())
        assert records is not None, name
    (nulls,) = compiled_codec.decode_records(
        ODD_SECTIONS["header with a null value"], 5, 1, 1, False, 1, DecodedRecord, (), ()
    )
    assert nulls == DecodedRecord(5, 1, None, None, (("h", None),))


def python_decode(section: bytes, count: int, base_offset: int) -> list[DecodedRecord] | None:
    """The pure-Python decoder's records, or None where it raises CorruptMessageError."""
    header = read_header(batch_of(b"", count=count, base_offset=base_offset, timestamp=7))
    try:
        return _decode_section_python(section, header)
    except CorruptMessageError:
        return None


def fuzz_inputs(seed: int, rounds: int) -> list[bytes]:
    """Random bytes, and well-formed sections truncated or with a byte changed."""
    rng = random.Random(seed)
    good = encode_batch(
        [Record(b"v" * 70, key=b"k", headers=(("h", b"x"), ("n", None))), Record(None)] * 3,
        now_ms=5,
    )[BATCH_HEADER_SIZE:]
    out = []
    for _ in range(rounds):
        roll = rng.random()
        if roll < 0.3:
            out.append(rng.randbytes(rng.randrange(0, 64)))
        elif roll < 0.6:
            out.append(good[: rng.randrange(0, len(good))])
        else:
            damaged = bytearray(good)
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            out.append(bytes(damaged[: rng.randrange(len(damaged) // 2, len(damaged) + 1)]))
    return out


def test_random_and_truncated_bytes_never_crash_the_compiled_codec(
    compiled_codec: ModuleType,
) -> None:
    """Whatever the C functions accept, Python accepts with the same result; whatever
    Python refuses, they refuse (None / -1), so the Python error is what a caller sees."""
    accepted = 0
    for section in fuzz_inputs(seed=23, rounds=3000):
        for count in (1, 6, len(section)):
            fast = compiled_codec.decode_records(
                section, 9, 7, 7, False, count, DecodedRecord, (), ()
            )
            reference = python_decode(section, count, 9)
            if reference is None:
                assert fast is None, section
            else:
                assert fast is None or fast == reference, section
                accepted += fast is not None
            scanned = compiled_codec.scan_values(section, 0, len(section), count)
            if scanned is not None:
                assert reference is not None
                starts, ends, nulls = scanned
                assert [
                    None if e < 0 else section[s:e] for s, e in zip(starts, ends, strict=True)
                ] == [r.value for r in reference]
                assert nulls == any(r.value is None for r in reference)
        counted = compiled_codec.count_records(section, 0, len(section))
        try:
            with codec(None):
                expected = walk.count_records(section, 0, len(section), 0)
        except InvalidRecordError:
            expected = None
        assert counted == -1 or counted == expected
    assert accepted  # sections cut at a record boundary: decoded by the C code itself


@pytest.mark.parametrize(
    ("start", "stop"), [(-1, 5), (0, 10_000), (5, 4), (2**62, 2**62 + 1), (0, -1)]
)
def test_compiled_scans_refuse_bounds_outside_the_buffer(
    compiled_codec: ModuleType, start: int, stop: int
) -> None:
    data = encode_batch([Record(b"v")])
    assert compiled_codec.scan_values(data, start, stop, 1) is None
    assert compiled_codec.count_records(data, start, stop) == -1


def test_a_record_count_the_bytes_cannot_hold_allocates_nothing(compiled_codec: ModuleType) -> None:
    section = encode_batch([Record(b"v")])[BATCH_HEADER_SIZE:]
    for count in (2**31, 2**62, sys.maxsize):
        assert (
            compiled_codec.decode_records(section, 0, 0, 0, False, count, DecodedRecord, (), ())
            is None
        )
        assert compiled_codec.scan_values(section, 0, len(section), count) is None


@settings(max_examples=100)
@given(
    values=st.lists(
        st.one_of(st.binary(max_size=300), big_value_st, st.just(b"x" * 16_400)),
        min_size=1,
        max_size=70,
    ),
    timestamp=st.integers(0, 2**41),
)
def test_both_codecs_encode_value_batches_byte_for_byte(
    compiled_codec: ModuleType, values: list[bytes], timestamp: int
) -> None:
    assert compiled_codec.encode_values(values) == _encode_values_python(values)
    same(compiled_codec, lambda: encode_values(values, timestamp=timestamp, base_offset=4))


def test_value_batches_past_the_varint_cache_encode_alike(compiled_codec: ModuleType) -> None:
    values = [b"v" * (i % 7) for i in range(VARINT_CACHE_SIZE + 10)]
    assert compiled_codec.encode_values(values) == _encode_values_python(values)
    assert compiled_codec.encode_values(tuple(values)) == _encode_values_python(values)


def test_values_that_are_not_bytes_are_encoded_by_python(compiled_codec: ModuleType) -> None:
    values: list[Any] = [b"a", bytearray(b"b"), memoryview(b"c")]
    assert compiled_codec.encode_values(values) is None
    with codec(compiled_codec):
        encoded = encode_values(values, timestamp=1)
    assert encoded == encode_values([b"a", b"b", b"c"], timestamp=1)


def test_encoded_varints_read_back_at_each_width(compiled_codec: ModuleType) -> None:
    section = compiled_codec.encode_values([b"x" * 8192])
    length, pos = raw_varint(section, 0)
    assert length >> 1 == len(section) - pos


def import_backend(**env: str) -> str:
    probe = "from minibroker.protocol.records import accel; print(accel.BACKEND)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_the_environment_variable_forces_the_python_codec() -> None:
    assert import_backend(MINIBROKER_NO_SPEEDUPS="1") == "python"


def test_a_missing_compiled_module_falls_back_to_python() -> None:
    probe = (
        "import sys; sys.modules['minibroker.protocol.records._speedups'] = None\n"
        "from minibroker.protocol.records import accel, decode_batch, encode_values\n"
        "batch = encode_values([b'v'], timestamp=1)\n"
        "print(accel.BACKEND, decode_batch(batch)[1][0].value)"
    )
    assert run_probe(probe) == "python b'v'"


def test_a_compiled_module_older_than_the_source_is_not_used() -> None:
    probe = (
        "import sys, types\n"
        "stale = types.ModuleType('_speedups')\n"
        "stale.count_records = lambda *args: 1 / 0  # a build without batch_header\n"
        "sys.modules['minibroker.protocol.records._speedups'] = stale\n"
        "from minibroker.protocol.records import accel, encode_values, validate_batch\n"
        "print(accel.BACKEND, validate_batch(encode_values([b'v'], timestamp=1)).record_count)"
    )
    assert run_probe(probe) == "python 1"


def run_probe(probe: str) -> str:
    """What ``python -c probe`` prints, stripped (a fresh interpreter: a fresh import)."""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return out.stdout.strip()


def test_the_built_module_has_every_function_the_python_code_calls(
    compiled_codec: ModuleType,
) -> None:
    assert all(callable(getattr(compiled_codec, name)) for name in accel.FUNCTIONS)


wide_timestamp_st = st.one_of(
    st.none(),
    st.integers(-(2**45), 2**45),
    st.sampled_from([-(2**63), 2**63 - 1, -1, 0, 2**63, -(2**63) - 1]),
)


@settings(max_examples=150)
@given(
    records=st.lists(record_st, min_size=1, max_size=8),
    stamps=st.lists(wide_timestamp_st, min_size=8, max_size=8),
    now_ms=st.one_of(st.none(), st.integers(0, 2**41)),
)
def test_both_codecs_encode_record_batches_byte_for_byte(
    compiled_codec: ModuleType, records: list[Record], stamps: list[int | None], now_ms: int | None
) -> None:
    """Keys, headers, null keys and values, values at each varint width, and timestamps
    up to and past int64 (past it, the C code leaves the batch to Python)."""
    records = [r._replace(timestamp=t) for r, t in zip(records, stamps, strict=False)]
    same(compiled_codec, lambda: encode_batch(records, base_offset=7, now_ms=now_ms))


ODD_RECORDS: dict[str, list[Any]] = {
    "bytearray key": [Record(b"v", key=bytearray(b"k"))],
    "memoryview value": [Record(memoryview(b"v"))],
    "headers as a list": [Record(b"v", headers=[("h", b"x"), ("n", None)])],  # type: ignore[arg-type]
    "header value bytearray": [Record(b"v", headers=(("h", bytearray(b"x")),))],
    "non-ascii header name": [Record(b"v", headers=(("clé-名", b"x"),))],
    "lone surrogate header name": [Record(b"v", headers=(("\udc80", b"x"),))],
    "header of three": [Record(b"v", headers=(("h", b"x", b"y"),))],  # type: ignore[arg-type]
    "header name bytes": [Record(b"v", headers=((b"h", b"x"),))],  # type: ignore[arg-type]
    "float timestamp": [Record(b"v", timestamp=1.5)],  # type: ignore[arg-type]
    "bool timestamp": [Record(b"v", timestamp=True)],
    "str value": [Record("v")],  # type: ignore[arg-type]
    "a tuple, not a Record": [(b"v", None, (), 5)],
    "many headers": [Record(b"v", headers=tuple((f"h{i}", b"x" * i) for i in range(200)))],
}


@pytest.mark.parametrize("name", sorted(ODD_RECORDS))
def test_odd_records_encode_or_fail_alike(compiled_codec: ModuleType, name: str) -> None:
    same(compiled_codec, lambda: encode_batch(ODD_RECORDS[name], now_ms=3))


def test_the_compiled_encoder_writes_headers_and_nulls_itself(compiled_codec: ModuleType) -> None:
    records = [
        Record(None, key=b"k", headers=(("h", None), ("clé", b"x"))),
        Record(b"v", key=None, timestamp=-5),
    ]
    section = compiled_codec.encode_records(records, [9, -5], 9, Record)
    assert section == encode_batch(records, now_ms=9)[BATCH_HEADER_SIZE:]
    with codec(None):
        assert section == encode_batch(records, now_ms=9)[BATCH_HEADER_SIZE:]


# --- batch_header: validate_batch's checks in one call --------------------------------


@settings(max_examples=200)
@given(batch=batch_st, data=st.data())
def test_both_codecs_validate_batches_alike_whole_damaged_or_cut(
    compiled_codec: ModuleType, batch: bytes, data: st.DataObject
) -> None:
    """Any byte of the batch (header fields, CRC, records) overwritten, the batch cut
    short, or found after another batch: the same header or the same error."""
    damaged = bytearray(batch)
    for _ in range(data.draw(st.integers(0, 2))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    damaged = damaged[: data.draw(st.integers(len(damaged) - 3, len(damaged)))]
    for buf in (bytes(damaged), memoryview(bytearray(damaged))):
        kind, header = same(compiled_codec, lambda b=buf: validate_batch(b, 0))
        assert kind != "returned" or type(header) is BatchHeader
    second = batch + bytes(damaged)
    same(compiled_codec, lambda: validate_batch(second, len(batch)))


def test_the_compiled_check_returns_exactly_the_header_struct(compiled_codec: ModuleType) -> None:
    batch = encode_batch(
        [Record(b"v" * 100, key=b"k", timestamp=2**41)],
        base_offset=INT64_MAX - 3,
        producer_id=2**50,
        producer_epoch=7,
        base_sequence=2**31 - 2,
    )
    fields = compiled_codec.batch_header(batch, 0)
    assert fields == HEADER.unpack_from(batch, 0)
    assert compiled_codec.batch_header(b"\x00" * 8 + batch, 8) == fields


def test_large_batches_and_bad_positions_are_left_to_python(compiled_codec: ModuleType) -> None:
    small = encode_batch([Record(b"v")])
    large = encode_batch([Record(b"v" * 5000)])
    assert compiled_codec.batch_header(large, 0) is None
    with codec(compiled_codec):
        assert validate_batch(large).record_count == 1  # still checked, by Python
    for pos in (-1, 1, len(small), 2**62, 2**64, -(2**64)):
        assert compiled_codec.batch_header(small, pos) is None
    with codec(compiled_codec), pytest.raises(CorruptMessageError):
        validate_batch(small, 2**64)


def test_fuzzed_headers_pass_the_compiled_check_only_when_python_passes_them(
    compiled_codec: ModuleType,
) -> None:
    rng = random.Random(31)
    good = encode_batch([Record(b"value", key=b"key", timestamp=5)] * 3)
    passed = 0
    for _ in range(3000):
        damaged = bytearray(good)
        where = rng.randrange(BATCH_HEADER_SIZE)  # header fields and the CRC
        damaged[where] = rng.randrange(256)
        fields = compiled_codec.batch_header(bytes(damaged), 0)
        with codec(None):
            try:
                expected: Any = tuple(validate_batch(bytes(damaged)))
            except CorruptMessageError:
                expected = None
        assert fields is None or fields == expected
        passed += fields is not None
    assert passed  # baseOffset and partitionLeaderEpoch lie outside the CRC
