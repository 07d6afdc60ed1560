"""The Kafka wire codec against an independent one (kafka-python's protocol classes):
every declared (API, version), both directions, byte for byte; plus the header rules,
the KIP-511 ApiVersions fallback and the refusal of malformed frames."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from struct import pack
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.api import api_versions_body as msgpack_api_versions_body
from minibroker.protocol.api import encode_request as encode_msgpack_request
from minibroker.protocol.kafka.codec import (
    ADVERTISED_VERSIONS,
    MalformedKafkaRequest,
    UnsupportedKafkaVersion,
    api_versions_body,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    unsupported_api_versions,
)
from minibroker.protocol.kafka.compiler import SPLICE_BYTES
from minibroker.protocol.kafka.messages import MESSAGES
from minibroker.protocol.messages.form import Array, Field, Message, Primitive, Struct

ORACLE: dict[int, tuple[Any, Any]] = {
    0: (ProduceRequest, ProduceResponse),
    1: (FetchRequest, FetchResponse),
    2: (ListOffsetsRequest, ListOffsetsResponse),
    3: (MetadataRequest, MetadataResponse),
    8: (OffsetCommitRequest, OffsetCommitResponse),
    9: (OffsetFetchRequest, OffsetFetchResponse),
    10: (FindCoordinatorRequest, FindCoordinatorResponse),
    11: (JoinGroupRequest, JoinGroupResponse),
    12: (HeartbeatRequest, HeartbeatResponse),
    13: (LeaveGroupRequest, LeaveGroupResponse),
    14: (SyncGroupRequest, SyncGroupResponse),
    15: (DescribeGroupsRequest, DescribeGroupsResponse),
    16: (ListGroupsRequest, ListGroupsResponse),
    18: (ApiVersionsRequest, ApiVersionsResponse),
    19: (CreateTopicsRequest, CreateTopicsResponse),
    20: (DeleteTopicsRequest, DeleteTopicsResponse),
    21: (DeleteRecordsRequest, DeleteRecordsResponse),
    37: (CreatePartitionsRequest, CreatePartitionsResponse),
    22: (InitProducerIdRequest, InitProducerIdResponse),
    24: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    25: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    26: (EndTxnRequest, EndTxnResponse),
    27: (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    28: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    32: (DescribeConfigsRequest, DescribeConfigsResponse),
    33: (AlterConfigsRequest, AlterConfigsResponse),
    60: (DescribeClusterRequest, DescribeClusterResponse),
    61: (DescribeProducersRequest, DescribeProducersResponse),
    65: (DescribeTransactionsRequest, DescribeTransactionsResponse),
    66: (ListTransactionsRequest, ListTransactionsResponse),
    35: (DescribeLogDirsRequest, DescribeLogDirsResponse),
    34: (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    43: (ElectLeadersRequest, ElectLeadersResponse),
    45: (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    46: (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    29: (DescribeAclsRequest, DescribeAclsResponse),
    30: (CreateAclsRequest, CreateAclsResponse),
    31: (DeleteAclsRequest, DeleteAclsResponse),
    17: (SaslHandshakeRequest, SaslHandshakeResponse),
    36: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    42: (DeleteGroupsRequest, DeleteGroupsResponse),
    47: (OffsetDeleteRequest, OffsetDeleteResponse),
    44: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    48: (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    49: (AlterClientQuotasRequest, AlterClientQuotasResponse),
    50: (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    51: (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
}

CASES = [
    (message, version)
    for message in MESSAGES.values()
    for version in range(message.valid.low, (message.valid.high or message.valid.low) + 1)
]


def _case_id(case: tuple[Message, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


class _Samples:
    """Distinct, non-default values for every field, so a misplaced field shows."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def body(self, struct: Struct, version: int) -> dict[str, Any]:
        return {
            field.body_key: self.value(field, field.type, version)
            for field in struct.fields
            if version in field.versions
        }

    def value(self, field: Field, type_: Any, version: int) -> Any:
        n = next(self._n)
        if isinstance(type_, Struct):
            return self.body(type_, version)
        if isinstance(type_, Array):
            return [self.value(field, type_.of, version) for _ in range(2)]
        assert isinstance(type_, Primitive)
        return {
            "int8": n % 100 + 1,
            "int16": n + 1,
            "int32": 1000 + n,
            "int64": 2**40 + n,
            "bool": True,
            "uuid": uuid.UUID(int=n).bytes,
            "string": f"{field.name}-{n}",
            "bytes": bytes([n % 256]) * 3,
            "records": b"batch-%d" % n,
            "float64": n + 0.5,
        }[type_.name]


ORACLE_REPRESENTS_DIFFERENTLY = frozenset(
    {"topic_authorized_operations", "cluster_authorized_operations", "authorized_operations"}
)
"""Fields kafka-python renames and decodes as sets (the bytes are still compared)."""


def _assert_same(struct: Struct, version: int, ours: dict[str, Any], theirs: Any) -> None:
    """Every field present at ``version`` has the same value under Kafka's name."""
    for field in struct.fields:
        if version not in field.versions or field.name in ORACLE_REPRESENTS_DIFFERENTLY:
            continue
        _assert_value(field.type, ours[field.body_key], getattr(theirs, field.name), field.name)


def _assert_value(type_: Any, ours: Any, theirs: Any, where: str) -> None:
    if isinstance(type_, Struct):
        _assert_same(type_, _assert_value.version, ours, theirs)  # type: ignore[attr-defined]
    elif isinstance(type_, Array):
        assert len(ours) == len(theirs), where
        for mine, other in zip(ours, theirs, strict=True):
            _assert_value(type_.of, mine, other, where)
    elif type_.name == "uuid":
        assert uuid.UUID(bytes=ours) == theirs, where
    else:
        assert ours == theirs, where


def _present(type_: Any, value: Any, version: int) -> Any:
    """``value`` with only the fields present at ``version`` (decoders fill the rest)."""
    if isinstance(type_, Struct):
        return {
            f.body_key: _present(f.type, value[f.body_key], version)
            for f in type_.fields
            if version in f.versions
        }
    if isinstance(type_, Array) and value is not None:
        return [_present(type_.of, v, version) for v in value]
    return value


def _request_header(message: Message, version: int) -> RequestHeader:
    return RequestHeader(message.api_key, version, 12345, "test-client")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_requests_match_kafka_python_byte_for_byte(case: tuple[Message, int]) -> None:
    message, version = case
    body = _Samples().body(message.request, version)
    ours = encode_request(_request_header(message, version), body)

    theirs = ORACLE[message.api_key][0][version].decode(ours, header=True, framed=True)
    _assert_value.version = version  # type: ignore[attr-defined]
    _assert_same(message.request, version, body, theirs)
    assert theirs.header.correlation_id == 12345
    assert bytes(theirs.encode(header=True, framed=True)) == ours

    header, decoded = decode_request(ours[4:])
    assert header == _request_header(message, version)
    assert _present(message.request, decoded, version) == body


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_responses_match_kafka_python_byte_for_byte(case: tuple[Message, int]) -> None:
    message, version = case
    body = _Samples().body(message.response, version)
    if message.name == "ApiVersions":
        body["error_code"] = 0  # an error answer is always read as v0 (KIP-511)
    ours = b"".join(encode_response(_request_header(message, version), body))

    theirs = ORACLE[message.api_key][1][version].decode(ours, header=True, framed=True)
    _assert_value.version = version  # type: ignore[attr-defined]
    _assert_same(message.response, version, body, theirs)
    assert theirs.header.correlation_id == 12345
    assert bytes(theirs.encode(header=True, framed=True)) == ours

    correlation_id, decoded = decode_response(ours[4:], message.api_key, version)
    assert correlation_id == 12345
    assert _present(message.response, decoded, version) == body


def test_fields_a_version_lacks_decode_as_their_defaults() -> None:
    fetch_v4 = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1000,
        "isolation_level": 0,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5}]}],
    }
    _, body = decode_request(encode_request(RequestHeader(1, 4, 1, None), fetch_v4)[4:])
    partition = body["topics"][0]["partitions"][0]
    assert partition["current_leader_epoch"] == -1
    assert partition["last_fetched_epoch"] == -1
    assert partition["log_start_offset"] == -1
    assert body["session_epoch"] == -1


def test_large_fetch_records_are_passed_through_without_a_copy() -> None:
    records = memoryview(bytes(SPLICE_BYTES))
    body = {
        "topics": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": records}]},
        ]
    }
    buffers = encode_response(RequestHeader(1, 12, 9, None), body)
    assert any(buffer is records for buffer in buffers)
    _, decoded = decode_response(b"".join(buffers)[4:], 1, 12)
    assert decoded["topics"][0]["partitions"][0]["records"] == bytes(records)


def test_produced_records_are_a_read_only_view_of_the_frame_not_a_copy() -> None:
    records = bytes(range(256)) * 4
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"index": 0, "records": records}]}],
    }
    frame = encode_request(RequestHeader(0, 9, 1, "producer"), body)[4:]
    _, decoded = decode_request(frame)
    view = decoded["topics"][0]["partitions"][0]["records"]
    assert isinstance(view, memoryview)
    assert view.obj is frame
    assert view.readonly
    assert view == records


def test_api_versions_response_header_has_no_tagged_fields_even_when_flexible() -> None:
    frame = b"".join(encode_response(RequestHeader(18, 3, 77, None), {"api_keys": []}))
    # size, correlation id, then the body's error code at once (no tagged-field byte).
    assert frame[4:8] == (77).to_bytes(4, "big")
    assert frame[8:10] == b"\x00\x00"


def test_unknown_api_versions_version_is_answered_with_a_v0_body_of_supported_ranges() -> None:
    header = RequestHeader(18, 99, 5, "new-client")
    frame = b"".join(unsupported_api_versions(header))
    response = ApiVersionsResponse[0].decode(frame, header=True, framed=True)
    assert response.header.correlation_id == 5
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == dict(ADVERTISED_VERSIONS)
    assert ranges[0] == (0, 12) and ranges[18] == (0, 3)


def test_api_versions_v3_finalizes_transaction_version_2_in_its_tagged_fields() -> None:
    """KIP-890 part 2's feature, as Kafka's Java client 4.x reads it (tags 1 and 2;
    no supported features, which Kafka leaves out below v4 when their minimum is 0);
    v2 has no tagged fields, so older clients see nothing new."""
    frame = b"".join(encode_response(RequestHeader(18, 3, 5, None), api_versions_body()))
    theirs = ApiVersionsResponse[3].decode(frame, header=True, framed=True)
    assert theirs.finalized_features_epoch == 1
    [feature] = theirs.finalized_features
    assert (feature.name, feature.min_version_level, feature.max_version_level) == (
        "transaction.version",
        2,
        2,
    )
    assert not theirs.supported_features
    _, v2 = decode_response(
        b"".join(encode_response(RequestHeader(18, 2, 5, None), api_versions_body()))[4:],
        18,
        2,
    )
    assert v2["finalized_features"] == [] and v2["finalized_features_epoch"] == -1
    without_end_txn = api_versions_body({0, 1, 18})
    assert "finalized_features" not in without_end_txn  # no coordinator, no feature
    msgpack = msgpack_api_versions_body()  # the msgpack listener answers the same
    assert msgpack["finalized_features"] == api_versions_body()["finalized_features"]


def test_end_txn_v5_answers_the_bumped_producer_id_and_epoch_and_v4_does_not() -> None:
    answer = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4001, "producer_epoch": 8}
    v5 = b"".join(encode_response(RequestHeader(26, 5, 9, "c"), answer))[4:]
    assert v5 == pack(">i", 9) + b"\x00" + pack(">ihqh", 0, 0, 4001, 8) + b"\x00"
    v4 = b"".join(encode_response(RequestHeader(26, 4, 9, "c"), answer))[4:]
    assert v4 == pack(">i", 9) + b"\x00" + pack(">ih", 0, 0) + b"\x00"


def test_produce_v12_and_txn_offset_commit_v5_read_as_v11_and_v4_do() -> None:
    """Transaction version 2 changes what the versions mean, not their bytes."""
    produce = {
        "transactional_id": "tx",
        "acks": -1,
        "timeout_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"index": 0, "records": b"batch"}]}],
    }
    for key, old, new, body in (
        (0, 11, 12, produce),
        (
            28,
            4,
            5,
            {
                "transactional_id": "tx",
                "group_id": "g",
                "producer_id": 7,
                "producer_epoch": 1,
                "generation_id": 3,
                "member_id": "m",
                "group_instance_id": None,
                "topics": [],
            },
        ),
    ):
        before = encode_request(RequestHeader(key, old, 1, "c"), body)
        after = encode_request(RequestHeader(key, new, 1, "c"), body)
        assert before[:6] + before[8:] == after[:6] + after[8:]  # all but the version
        assert decode_request(after[4:])[1] == decode_request(before[4:])[1]


def test_unsupported_version_names_the_header_to_answer() -> None:
    frame = encode_request(RequestHeader(3, 0, 1, "c"), {"topics": []})
    frame = frame[:4] + b"\x00\x03\x00\x63" + frame[8:]  # Metadata v99
    with pytest.raises(UnsupportedKafkaVersion) as caught:
        decode_request(frame[4:])
    assert caught.value.header.correlation_id == 1


def test_init_producer_id_matches_an_independent_struct_encoding() -> None:
    """InitProducerId's bytes written out by hand: v0 (classic nullable string), v3
    (flexible, compact nullable string, the KIP-360 id and epoch) and the v4 answer."""
    v0 = encode_request(
        RequestHeader(22, 0, 7, "c"), {"transactional_id": None, "transaction_timeout_ms": 60_000}
    )
    body_v0 = pack(">hhih", 22, 0, 7, 1) + b"c" + pack(">hi", -1, 60_000)
    assert v0 == pack(">i", len(body_v0)) + body_v0
    assert decode_request(v0[4:])[1] == {
        "transactional_id": None,
        "transaction_timeout_ms": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }

    bump = {
        "transactional_id": None,
        "transaction_timeout_ms": 1000,
        "producer_id": 4001,
        "producer_epoch": 3,
    }
    body_v3 = (
        pack(">hhih", 22, 3, 8, 1)
        + b"c"
        + b"\x00"  # header v2: no tagged fields
        + b"\x00"  # compact nullable string: null
        + pack(">iqh", 1000, 4001, 3)
        + b"\x00"
    )
    assert encode_request(RequestHeader(22, 3, 8, "c"), bump)[4:] == body_v3
    assert decode_request(body_v3)[1] == bump

    answer = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4001, "producer_epoch": 4}
    expected = pack(">i", 9) + b"\x00" + pack(">ihqh", 0, 0, 4001, 4) + b"\x00"
    assert b"".join(encode_response(RequestHeader(22, 4, 9, "c"), answer))[4:] == expected


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00\x03",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab",  # client_id longer than the frame
        b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xff\x7f\xff\xff\xff",  # 2^31 topics
    ],
)
def test_malformed_requests_are_refused(payload: bytes) -> None:
    with pytest.raises(MalformedKafkaRequest):
        decode_request(payload)


def test_a_msgpack_client_on_the_kafka_listener_is_told_where_it_belongs() -> None:
    # minibroker's own client's Metadata request, as its msgpack listener would read it
    payload = encode_msgpack_request(ApiKey.METADATA, 0, 7, "minibroker", {"topics": None})

    with pytest.raises(MalformedKafkaRequest) as refused:
        decode_request(payload)

    assert str(refused.value) == (
        "a msgpack-protocol request on the Kafka listener: minibroker's own clients "
        "connect to the broker's msgpack listener (listeners)"
    )


def test_bytes_after_a_complete_body_are_ignored_as_kafka_ignores_them() -> None:
    # librdkafka's all-topics Metadata v9 (AdminClient.list_topics), byte for byte.
    frame = bytes.fromhex("0003000900000003000772646b61666b61000000000001000000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 9, "rdkafka")
    assert body["topics"] is None
    assert body["allow_auto_topic_creation"] is False


def test_every_declared_request_is_refused_one_byte_short_at_every_cut() -> None:
    for message, version in CASES:
        body = _Samples().body(message.request, version)
        frame = encode_request(_request_header(message, version), body)[4:]
        for cut in range(len(frame)):
            with pytest.raises(MalformedKafkaRequest):
                decode_request(frame[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_are_refused_never_crash(payload: bytes) -> None:
    with contextlib.suppress(MalformedKafkaRequest, UnsupportedKafkaVersion):
        decode_request(payload)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_damaged_requests_decode_or_are_refused_never_crash(
    case: tuple[Message, int], data: st.DataObject
) -> None:
    message, version = case
    frame = bytearray(
        encode_request(
            _request_header(message, version), _Samples().body(message.request, version)
        )[4:]
    )
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(MalformedKafkaRequest, UnsupportedKafkaVersion):
        decode_request(bytes(frame))
