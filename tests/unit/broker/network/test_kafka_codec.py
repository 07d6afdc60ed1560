"""The Kafka listener's codec in front of the shared dispatcher (broker/network/kafka_codec.py):
real Kafka frames in, Kafka responses out, checked with kafka-python's decoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.network.kafka_codec import KafkaCodec
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending
from minibroker.protocol.api import ApiKey, Body, RequestHeader
from minibroker.protocol.errors import NotLeaderOrFollowerError
from minibroker.protocol.kafka.codec import decode_response, encode_request
from minibroker.protocol.messages.bodies import Route

UNSUPPORTED_VERSION = 35
NOT_LEADER_OR_FOLLOWER = 6
CORRUPT_MESSAGE = 2

PRODUCE_BODY = {
    "acks": 1,
    "timeout_ms": 1000,
    "topics": [
        {"name": "t", "partitions": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]}
    ],
}


def codec_serving(**handlers: Any) -> KafkaCodec:
    dispatcher = RequestDispatcher(BrokerMetrics())
    for name, handler in handlers.items():
        dispatcher.register(Route(ApiKey[name.upper()]), handler)
    return KafkaCodec(dispatcher)


def frame_of(api_key: int, version: int, body: Body, correlation_id: int = 7) -> bytes:
    return encode_request(RequestHeader(api_key, version, correlation_id, "test"), body)[4:]


def answer(reply: object) -> bytes:
    assert isinstance(reply, list), reply
    buffers: Sequence[Buffer] = reply
    return b"".join(bytes(b) for b in buffers)


def test_api_versions_lists_only_the_apis_some_handler_serves() -> None:
    codec = codec_serving(metadata=lambda h, b: {}, produce=lambda h, b: {})
    reply = answer(codec.handle(frame_of(ApiKey.API_VERSIONS, 3, {})))
    response = ApiVersionsResponse[3].decode(reply, header=True, framed=True)
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        0: (0, 12),
        3: (0, 12),
        18: (0, 3),
    }


def test_an_unknown_api_versions_version_gets_a_v0_answer_with_the_ranges() -> None:
    codec = codec_serving(metadata=lambda h, b: {})
    frame = bytearray(frame_of(ApiKey.API_VERSIONS, 3, {}))
    frame[2:4] = (42).to_bytes(2, "big")  # ApiVersions v42 (from a client of the future)
    response = ApiVersionsResponse[0].decode(
        answer(codec.handle(bytes(frame))), header=True, framed=True
    )
    assert response.header.correlation_id == 7
    assert response.error_code == UNSUPPORTED_VERSION
    assert {k.api_key for k in response.api_keys} == {3, 18}


def test_produce_below_v3_is_refused_on_every_partition_without_reaching_the_handler() -> None:
    called: list[Body] = []
    codec = codec_serving(produce=lambda h, b: called.append(b))
    reply = answer(codec.handle(frame_of(ApiKey.PRODUCE, 2, PRODUCE_BODY)))
    response = ProduceResponse[2].decode(reply, header=True, framed=True)
    [topic] = response.responses
    assert [(p.index, p.error_code) for p in topic.partition_responses] == [
        (0, UNSUPPORTED_VERSION),
        (1, UNSUPPORTED_VERSION),
    ]
    assert called == []


def test_a_request_failing_as_a_whole_gets_the_apis_own_error_response() -> None:
    def refuse(header: RequestHeader, body: Body) -> Body:
        raise NotLeaderOrFollowerError("not here")

    codec = codec_serving(produce=refuse)
    reply = answer(codec.handle(frame_of(ApiKey.PRODUCE, 9, PRODUCE_BODY)))
    response = ProduceResponse[9].decode(reply, header=True, framed=True)
    [topic] = response.responses
    assert topic.name == "t"
    assert {p.index: p.error_code for p in topic.partition_responses} == {
        0: NOT_LEADER_OR_FOLLOWER,
        1: NOT_LEADER_OR_FOLLOWER,
    }


async def test_a_deferred_failure_also_gets_the_full_error_response() -> None:
    async def fail_later() -> Body:
        raise NotLeaderOrFollowerError("moved")

    codec = codec_serving(fetch=lambda h, b: Deferred(fail_later))
    body = {
        "max_wait_ms": 100,
        "min_bytes": 1,
        "topics": [{"topic": "t", "partitions": [{"partition": 3, "fetch_offset": 0}]}],
    }
    reply = codec.handle(frame_of(ApiKey.FETCH, 12, body))
    assert isinstance(reply, Pending)
    with trio.fail_after(5):
        buffers = await reply.wait()
    response = FetchResponse[12].decode(answer(buffers), header=True, framed=True)
    [topic] = response.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (3, NOT_LEADER_OR_FOLLOWER)
    ]


def test_metadata_advertises_kafka_listeners_and_leaves_out_brokers_without_one() -> None:
    def metadata(header: RequestHeader, body: Body) -> Body:
        return {
            "brokers": [
                {"node_id": 1, "host": "h", "port": 9092, "kafka_host": "k1", "kafka_port": 19092},
                {"node_id": 2, "host": "h", "port": 9093},
            ],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": [],
        }

    codec = codec_serving(metadata=metadata)
    reply = answer(codec.handle(frame_of(ApiKey.METADATA, 9, {"topics": None})))
    response = MetadataResponse[9].decode(reply, header=True, framed=True)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "k1", 19092)]


def test_metadata_v0_with_no_topics_asks_for_every_topic() -> None:
    asked: list[Any] = []

    def metadata(header: RequestHeader, body: Body) -> Body:
        asked.append(body["topics"])
        return {"brokers": [], "topics": []}

    codec = codec_serving(metadata=metadata)
    codec.handle(frame_of(ApiKey.METADATA, 0, {"topics": []}))
    codec.handle(frame_of(ApiKey.METADATA, 1, {"topics": []}))
    assert asked == [None, []]


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x03",  # no whole header
        b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x01c\x00\xff",  # a body cut short
        frame_of(ApiKey.METADATA, 99, {}),  # a Metadata version nobody speaks
        frame_of(ApiKey.METADATA, 0, {})[:2].replace(b"\x00\x03", b"\x03\xe7")
        + frame_of(ApiKey.METADATA, 0, {})[2:],  # API key 999
    ],
)
def test_frames_that_cannot_be_answered_close_the_connection(frame: bytes) -> None:
    codec = codec_serving(metadata=lambda h, b: {"brokers": [], "topics": []})
    with pytest.raises(CloseConnection):
        codec.handle(frame)


def test_acks_zero_produce_below_v3_closes_the_connection_instead_of_answering() -> None:
    codec = codec_serving(produce=lambda h, b: None)
    with pytest.raises(CloseConnection):
        codec.handle(frame_of(ApiKey.PRODUCE, 1, {**PRODUCE_BODY, "acks": 0}))


def test_produce_with_null_records_is_refused_as_corrupt_without_reaching_the_handler() -> None:
    called: list[Body] = []
    codec = codec_serving(produce=lambda h, b: called.append(b))
    body = {**PRODUCE_BODY, "topics": [{"name": "t", "partitions": [{"index": 4}]}]}
    response = ProduceResponse[9].decode(
        answer(codec.handle(frame_of(ApiKey.PRODUCE, 9, body))), header=True, framed=True
    )
    assert [(p.index, p.error_code) for p in response.responses[0].partition_responses] == [
        (4, CORRUPT_MESSAGE)
    ]
    assert called == []


async def test_a_deferred_failure_of_a_fetch_by_topic_id_answers_by_that_id() -> None:
    async def fail_later() -> Body:
        raise NotLeaderOrFollowerError("moved")

    topic_id = bytes(15) + b"\x2a"
    codec = codec_serving(fetch=lambda h, b: Deferred(fail_later))
    body = {
        "max_wait_ms": 100,
        "min_bytes": 1,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition": 3, "fetch_offset": 0}]}],
    }
    reply = codec.handle(frame_of(ApiKey.FETCH, 17, body))
    assert isinstance(reply, Pending)
    with trio.fail_after(5):
        buffers = await reply.wait()
    _, response = decode_response(answer(buffers)[4:], ApiKey.FETCH, 17)
    [topic] = response["topics"]
    assert topic["topic_id"] == topic_id
    assert [(p["partition_index"], p["error_code"]) for p in topic["partitions"]] == [
        (3, NOT_LEADER_OR_FOLLOWER)
    ]
