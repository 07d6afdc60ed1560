"""Request/response envelopes and schemas: round trips for every API, validation errors
that keep the header, and encode_response producing exactly msgpack.packb's bytes."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.api import (
    SCHEMAS,
    SUPPORTED_VERSIONS,
    ApiKey,
    InvalidRequestBody,
    MalformedRequest,
    MalformedResponse,
    RejectedRequest,
    RequestHeader,
    UnsupportedRequestVersion,
    api_versions_body,
    decode_request,
    decode_response,
    encode_request,
    encode_request_buffers,
    encode_response,
    error_body,
)
from minibroker.protocol.errors import InvalidRequestError, UnsupportedVersionError
from minibroker.protocol.frames import FrameDecoder, FrameError
from minibroker.protocol.schemas.packing import pack_buffers
from minibroker.protocol.schemas.types import (
    REQUIRED,
    Nullable,
    SchemaArray,
    SchemaPrimitive,
    SchemaStruct,
    Type,
)

NO_DEADLINE = settings(deadline=None)
"""Timing belongs to bench/; shared CI machines are slow and busy."""

INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def values(t: Type, version: int, *, complete: bool) -> st.SearchStrategy[Any]:
    """Valid values of ``t``; ``complete`` also includes every optional field."""
    if isinstance(t, SchemaPrimitive):
        if t.name in INT_RANGES:
            bits = INT_RANGES[t.name]
            return st.integers(min_value=-(2**bits), max_value=2**bits - 1)
        return {
            "bool": st.booleans(),
            "float64": st.floats(allow_nan=False),
            "string": st.text(max_size=20),
            "bytes": st.binary(max_size=40),
            "records": st.binary(max_size=40),
            "uuid": st.binary(min_size=16, max_size=16),
        }[t.name]
    if isinstance(t, Nullable):
        return st.none() | values(t.of, version, complete=complete)
    if isinstance(t, SchemaArray):
        return st.lists(values(t.of, version, complete=complete), max_size=3)
    return bodies(t, version, complete=complete)


def bodies(s: SchemaStruct, version: int, *, complete: bool) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in s.fields:
        if f.in_version(version):
            target = required if f.default is REQUIRED or complete else optional
            target[f.name] = values(f.type, version, complete=complete)
    return st.fixed_dictionaries(required, optional=optional)


def with_defaults(t: Type, version: int, value: Any) -> Any:
    """Reference model of the compiled validators: ``value`` with every default filled."""
    if value is None or isinstance(t, SchemaPrimitive):
        return value
    if isinstance(t, Nullable):
        return with_defaults(t.of, version, value)
    if isinstance(t, SchemaArray):
        return [with_defaults(t.of, version, v) for v in value]
    out = dict(value)
    for f in t.fields:
        if f.in_version(version):
            if f.name in out:
                out[f.name] = with_defaults(f.type, version, out[f.name])
            else:
                out[f.name] = f.default
    return out


def every_api_version() -> list[tuple[ApiKey, int]]:
    return [(k, v) for k, (low, high) in SUPPORTED_VERSIONS.items() for v in range(low, high + 1)]


@pytest.mark.parametrize(("key", "version"), every_api_version())
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_request_round_trips_with_defaults_filled(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    api = SCHEMAS[key]
    body = data.draw(bodies(api.request, version, complete=False))
    payload = encode_request(key, version, 12345, "client-1", body)
    header, decoded = decode_request(payload)
    assert header == RequestHeader(key, version, 12345, "client-1")
    assert decoded == with_defaults(api.request, version, body)


@pytest.mark.parametrize(("key", "version"), every_api_version())
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_response_round_trips_through_encode_response(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    api = SCHEMAS[key]
    body = data.draw(bodies(api.response, version, complete=True))
    frame = b"".join(encode_response(-7, body))
    decoder = FrameDecoder()
    decoder.feed(frame)
    payload = decoder.next_frame()
    assert isinstance(payload, bytes)
    assert decode_response(payload, key, version) == (-7, body)


@pytest.mark.parametrize(("key", "version"), every_api_version())
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_missing_required_field_is_invalid_request_with_the_header(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    api = SCHEMAS[key]
    required = [f.name for f in api.request.fields if f.default is REQUIRED]
    if not required:  # every field optional: an empty map is a valid request
        assert decode_request(encode_request(key, version, 1, None, {}))[1] is not None
        return
    body = data.draw(bodies(api.request, version, complete=True))
    del body[data.draw(st.sampled_from(required))]
    with pytest.raises(InvalidRequestBody) as info:
        decode_request(encode_request(key, version, 99, "c", body))
    assert info.value.header == RequestHeader(key, version, 99, "c")
    assert info.value.code == InvalidRequestError.code


@pytest.mark.parametrize(("key", "version"), every_api_version())
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_field_of_the_wrong_type_is_invalid_request_with_the_header(
    key: ApiKey, version: int, data: st.DataObject
) -> None:
    api = SCHEMAS[key]
    body = data.draw(bodies(api.request, version, complete=True))
    if not body:
        return
    name = data.draw(st.sampled_from(sorted(body)))
    body[name] = {"not": "this"}  # no field of any schema is a map of str -> str
    with pytest.raises(InvalidRequestError) as info:
        decode_request(encode_request(key, version, 5, None, body))
    assert isinstance(info.value, RejectedRequest)
    assert info.value.header.correlation_id == 5
    assert name in str(info.value)


PRODUCE = {
    "acks": -1,
    "timeout_ms": 30000,
    "topics": [{"name": "events", "partitions": [{"index": 0, "records": b"\x00" * 70}]}],
}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda b: b.update(acks="all"), "acks"),
        (lambda b: b.update(acks=1 << 15), "acks"),
        (lambda b: b.update(acks=True), "acks"),
        (lambda b: b["topics"][0].update(partitions={}), "topics[].partitions"),
        (lambda b: b["topics"][0]["partitions"][0].update(records="text"), "records"),
        (lambda b: b["topics"][0]["partitions"][0].pop("index"), "topics[].partitions[].index"),
        (lambda b: b["topics"].append(None), "topics[]"),
    ],
)
def test_produce_body_errors_name_the_field(mutate: Any, path: str) -> None:
    body = msgpack.unpackb(msgpack.packb(PRODUCE))
    mutate(body)
    with pytest.raises(InvalidRequestBody, match=path.replace("[", r"\[").replace("]", r"\]")):
        decode_request(encode_request(ApiKey.PRODUCE, 0, 1, "c", body))


def test_a_body_that_is_not_a_map_is_invalid_request() -> None:
    with pytest.raises(InvalidRequestBody) as info:
        decode_request(msgpack.packb([ApiKey.METADATA, 0, 3, "c", [1, 2]]))
    assert info.value.header.api_key == ApiKey.METADATA


def test_a_body_that_is_not_msgpack_is_invalid_request_when_the_header_parses() -> None:
    good_header = msgpack.packb([ApiKey.FETCH, 0, 8, "c", None])[:-1]  # drop the nil body
    with pytest.raises(InvalidRequestBody) as info:
        decode_request(good_header + b"\xc1")  # 0xc1: never used in msgpack
    assert info.value.header == RequestHeader(ApiKey.FETCH, 0, 8, "c")


def test_an_unsupported_version_wins_over_an_unparseable_body() -> None:
    header_only = msgpack.packb([ApiKey.FETCH, 7, 8, "c", None])[:-1]
    with pytest.raises(UnsupportedRequestVersion):
        decode_request(header_only + b"\xc1")


@pytest.mark.parametrize("version", [-1, 1, 30000])
def test_an_unsupported_version_is_rejected_with_the_header(version: int) -> None:
    with pytest.raises(UnsupportedRequestVersion) as info:
        decode_request(msgpack.packb([ApiKey.PRODUCE, version, 4, "c", PRODUCE]))
    assert info.value.code == UnsupportedVersionError.code
    assert info.value.header.api_version == version


def test_an_unknown_api_key_is_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(msgpack.packb([999, 0, 4, "c", {}]))
    assert isinstance(info.value, RejectedRequest)
    assert info.value.header.api_key == 999


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1garbage",
        msgpack.packb({"api_key": 0}),
        msgpack.packb([0, 0, 1, "c"]),
        msgpack.packb([0, 0, 1, "c", {}, "extra"]),
        msgpack.packb(["0", 0, 1, "c", {}]),
        msgpack.packb([0, 0, 1 << 40, "c", {}]),
        msgpack.packb([0, 0, 1, 17, {}]),
        msgpack.packb([0, 0, 1, "c", {}]) + b"trailing",
    ],
)
def test_an_unparseable_header_means_close_the_connection(payload: bytes) -> None:
    with pytest.raises(FrameError):
        try:
            decode_request(payload)
        except InvalidRequestBody:  # trailing bytes after a good header are the body's fault
            assert payload.endswith(b"trailing")
            raise MalformedRequest("accepted: header parsed") from None


def kafka_request_header(api_key: int, version: int, client_id: bytes | None) -> bytes:
    """A Kafka-protocol request header (v1: API key, version, correlation id, client id)."""
    if client_id is None:
        return struct.pack(">hhih", api_key, version, 7, -1)
    return struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        (kafka_request_header(18, 3, b"rdkafka") + b"\x00" * 30,
         "ApiVersions v3 request from client 'rdkafka'"),
        (kafka_request_header(3, 12, None) + b"\x01" * 30, "Metadata v12 request on"),
        (kafka_request_header(0, 9, b"") + b"\x00" * 30, "Produce v9 request on"),
    ],
)  # fmt: skip
def test_a_kafka_client_on_the_msgpack_listener_is_told_where_kafka_clients_go(
    payload: bytes, named: str
) -> None:
    with pytest.raises(MalformedRequest) as refused:
        decode_request(payload)

    message = str(refused.value)
    assert f"a Kafka-protocol {named}" in message
    assert message.endswith("connect to the broker's Kafka listener (kafka.listeners)")


@pytest.mark.parametrize(
    "payload",
    [
        kafka_request_header(18, 3, b"rdkafka")[:9],  # cut inside the client id length
        kafka_request_header(18, 3, b"rdkafka")[:12],  # cut inside the client id
        kafka_request_header(18, 99, b"rdkafka"),  # no Kafka API has a version 99
        kafka_request_header(999, 0, b"x"),  # no such API
        kafka_request_header(18, 3, None)[:8] + struct.pack(">h", -2),  # no such length
    ],
)
def test_bytes_that_only_start_like_a_kafka_header_are_just_unparseable(payload: bytes) -> None:
    with pytest.raises(MalformedRequest, match="unparseable request header"):
        decode_request(payload)


@NO_DEADLINE
@given(st.binary(max_size=200))
def test_decode_request_never_raises_anything_but_its_own_errors(payload: bytes) -> None:
    with contextlib.suppress(FrameError, RejectedRequest):
        decode_request(payload)


# -- encode_response: byte-identical to msgpack.packb, large bins not copied ----------

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=300),
    lambda children: (
        st.lists(children, max_size=20)
        | st.dictionaries(st.text(max_size=10), children, max_size=20)
    ),
    max_leaves=60,
)


@NO_DEADLINE
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), msgpack_values)
def test_encode_response_payload_equals_msgpack_packb(correlation_id: int, body: Any) -> None:
    pieces = encode_response(correlation_id, body, framed=False)
    assert b"".join(pieces) == msgpack.packb([correlation_id, body])


@NO_DEADLINE
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), msgpack_values, st.booleans())
def test_unspliced_response_is_one_buffer_of_the_same_bytes(
    correlation_id: int, body: Any, framed: bool
) -> None:
    pieces = encode_response(correlation_id, body, framed=framed, splice=False)
    assert len(pieces) == 1
    assert pieces[0] == b"".join(encode_response(correlation_id, body, framed=framed))


@NO_DEADLINE
@given(msgpack_values, st.integers(min_value=0, max_value=64), st.booleans())
def test_spliced_buffers_join_to_msgpack_packb(body: Any, splice_min: int, prefix: bool) -> None:
    pieces = pack_buffers(body, splice_min=splice_min, length_prefix=prefix)
    expected = msgpack.packb(body)
    if prefix:
        expected = len(expected).to_bytes(4, "big") + expected
    assert b"".join(pieces) == expected


@pytest.mark.parametrize(
    "size", [0, 31, 32, 255, 256, 65535, 65536, 70000, 32 * 1024 - 1, 32 * 1024]
)
def test_lengths_at_every_msgpack_boundary_match_packb(size: int) -> None:
    body = {"s": "x" * size, "b": b"y" * size, "a": [0] * min(size, 70000), "m": {}}
    body["m"] = {str(i): i for i in range(min(size, 70000))}
    assert b"".join(encode_response(1, body, framed=False)) == msgpack.packb([1, body])


@pytest.mark.parametrize("plain_entries", [0, 1, 15, 16, 65535, 65536])
def test_long_runs_beside_a_spliced_binary_match_packb(plain_entries: int) -> None:
    big = memoryview(b"B" * 40)
    mapping: dict[str, Any] = {str(i): i for i in range(plain_entries)}
    mapping["big"] = big
    mapping.update({f"after{i}": "x" for i in range(plain_entries)})
    array: list[Any] = [*range(plain_entries), big, *range(plain_entries)]
    for body in (mapping, array, [mapping, array]):
        pieces = pack_buffers(body, splice_min=32)
        assert any(p is big for p in pieces)
        assert b"".join(pieces) == msgpack.packb(body)


def test_large_record_data_is_passed_through_not_copied() -> None:
    records = memoryview(bytearray(b"r" * (1 << 20)))
    body = {
        "topics": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": records}]},
        ]
    }
    pieces = encode_response(77, body)
    assert any(p is records for p in pieces)
    frame = b"".join(pieces)
    decoder = FrameDecoder()
    decoder.feed(frame)
    payload = decoder.next_frame()
    assert payload == msgpack.packb([77, body])
    assert isinstance(payload, bytes)
    _, decoded = decode_response(payload, ApiKey.FETCH, 0)
    assert decoded["topics"][0]["partitions"][0]["records"] == bytes(records)


def test_encode_request_buffers_frame_equals_encode_frame_of_encode_request() -> None:
    body = msgpack.unpackb(msgpack.packb(PRODUCE))
    body["topics"][0]["partitions"][0]["records"] = b"z" * 100_000
    joined = b"".join(encode_request_buffers(ApiKey.PRODUCE, 0, 3, "c", body))
    payload = encode_request(ApiKey.PRODUCE, 0, 3, "c", body)
    assert joined == len(payload).to_bytes(4, "big") + payload


# -- error answers and ApiVersions ---------------------------------------------------


@pytest.mark.parametrize("key", list(ApiKey))
def test_an_error_body_decodes_as_a_response_of_any_api(key: ApiKey) -> None:
    header = RequestHeader(key, 0, 21, "c")
    body = error_body(InvalidRequestBody("bad", header))
    payload = b"".join(encode_response(header.correlation_id, body, framed=False))
    correlation_id, decoded = decode_response(payload, key, 0)
    assert correlation_id == 21
    assert (decoded["error_code"], decoded["error_message"]) == (InvalidRequestError.code, "bad")


def test_a_response_failing_its_schema_without_an_error_code_is_malformed() -> None:
    payload = msgpack.packb([1, {"topics": "nope"}])
    with pytest.raises(MalformedResponse):
        decode_response(payload, ApiKey.FETCH, 0)
    with pytest.raises(MalformedResponse):
        decode_response(msgpack.packb({"x": 1}), ApiKey.FETCH, 0)


def test_api_versions_body_lists_every_supported_key_and_validates() -> None:
    body = api_versions_body()
    keys = {
        entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in body["api_keys"]
    }
    assert keys == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
    payload = b"".join(encode_response(0, body, framed=False))
    decoded = decode_response(payload, ApiKey.API_VERSIONS, 0)[1]
    assert {key: decoded[key] for key in body} == body  # decoding adds the defaults


def test_every_design_api_key_has_kafkas_number() -> None:
    expected = {
        "PRODUCE": 0, "FETCH": 1, "LIST_OFFSETS": 2, "METADATA": 3, "LEADER_AND_ISR": 4,
        "STOP_REPLICA": 5, "UPDATE_METADATA": 6, "CONTROLLED_SHUTDOWN": 7,
        "API_VERSIONS": 18, "CREATE_TOPICS": 19, "DELETE_TOPICS": 20,
        "OFFSET_FOR_LEADER_EPOCH": 23, "ALTER_REPLICA_LOG_DIRS": 34,
        "DESCRIBE_LOG_DIRS": 35, "ELECT_LEADERS": 43, "ALTER_PARTITION_REASSIGNMENTS": 45,
        "LIST_PARTITION_REASSIGNMENTS": 46,
    }  # fmt: skip
    assert {name: ApiKey[name].value for name in expected} == expected
    assert set(SCHEMAS) == set(ApiKey)
