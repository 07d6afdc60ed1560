"""The request path's three steps: codec, dispatcher, handlers (broker/dispatcher.py)."""

from __future__ import annotations

from collections.abc import Sequence

import msgpack
import pytest
import trio

from minibroker.broker.dispatcher import Deferred, RequestDispatcher
from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.request_codec import MsgpackCodec
from minibroker.broker.request_handler import Buffer, CloseConnection, Pending
from minibroker.protocol.api import ApiKey, Body, RequestHeader, decode_response, encode_request
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnsupportedVersionError,
)
from minibroker.protocol.messages import bodies

HEADER = RequestHeader(ApiKey.METADATA, 0, 7, "test")


class TextCodec:
    """A second wire format, as a test would write one: answers are repr() text."""

    listener = "TEXT"

    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]:
        return [f"{header.correlation_id} {sorted(body.items())}".encode()]

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        return [f"{header.correlation_id} error {error.code}".encode()]


def dispatcher_serving(handler: object) -> RequestDispatcher:
    dispatcher = RequestDispatcher(BrokerMetrics())
    dispatcher.register(bodies.METADATA, handler)  # type: ignore[arg-type]
    return dispatcher


def test_a_second_codec_reuses_the_dispatcher_and_handler_unchanged() -> None:
    seen: list[tuple[RequestHeader, Body]] = []

    def handler(header: RequestHeader, body: Body) -> Body:
        seen.append((header, body))
        return {"brokers": [], "topics": []}

    dispatcher = dispatcher_serving(handler)
    text = dispatcher.dispatch(HEADER, {"topics": None}, TextCodec())
    frame = encode_request(ApiKey.METADATA, 0, 8, "test", {"topics": None})
    packed = MsgpackCodec(dispatcher).handle(frame)

    assert text == [b"7 [('brokers', []), ('topics', [])]"]
    assert isinstance(packed, list)
    _, body = decode_response(b"".join(packed)[4:], ApiKey.METADATA, 0)
    assert body["brokers"] == [] and body["topics"] == []
    assert [h.correlation_id for h, _ in seen] == [7, 8]


def test_a_kafka_error_from_a_handler_is_answered_with_its_code() -> None:
    def handler(header: RequestHeader, body: Body) -> Body:
        raise NotLeaderOrFollowerError("not here")

    reply = dispatcher_serving(handler).dispatch(HEADER, {}, TextCodec())
    assert reply == [f"7 error {NotLeaderOrFollowerError.code}".encode()]


def test_a_bug_in_a_handler_is_answered_unknown_server_error() -> None:
    def handler(header: RequestHeader, body: Body) -> Body:
        raise ZeroDivisionError

    reply = dispatcher_serving(handler).dispatch(HEADER, {}, TextCodec())
    assert reply == [f"7 error {KafkaError.code}".encode()]


def test_an_api_key_nobody_serves_is_answered_unsupported_version() -> None:
    reply = RequestDispatcher(BrokerMetrics()).dispatch(HEADER, {}, TextCodec())
    assert reply == [f"7 error {UnsupportedVersionError.code}".encode()]


def test_close_connection_from_a_handler_reaches_the_server() -> None:
    def handler(header: RequestHeader, body: Body) -> Body:
        raise CloseConnection("acks=0 failed")

    with pytest.raises(CloseConnection):
        dispatcher_serving(handler).dispatch(HEADER, {}, TextCodec())


def test_an_unparseable_msgpack_header_closes_the_connection() -> None:
    codec = MsgpackCodec(RequestDispatcher(BrokerMetrics()))
    with pytest.raises(CloseConnection):
        codec.handle(msgpack.packb([1, 2]))


async def test_a_deferred_answer_is_encoded_once_it_is_ready() -> None:
    ready = trio.Event()

    async def answer() -> Body:
        await ready.wait()
        return {"error_code": NONE}

    def handler(header: RequestHeader, body: Body) -> Deferred:
        return Deferred(answer)

    reply = dispatcher_serving(handler).dispatch(HEADER, {}, TextCodec())
    assert isinstance(reply, Pending)
    ready.set()
    assert await reply.wait() == [b"7 [('error_code', 0)]"]


def test_a_key_bound_to_a_listener_is_refused_on_the_others() -> None:
    def handler(header: RequestHeader, body: Body) -> Body:
        return {"error_code": NONE}

    dispatcher = RequestDispatcher(BrokerMetrics())
    dispatcher.register(bodies.STOP_REPLICA, handler, listener="TEXT")
    header = RequestHeader(ApiKey.STOP_REPLICA, 0, 9, "forger")

    class OtherListener(TextCodec):
        listener = "CLIENTS"

    assert dispatcher.dispatch(header, {}, TextCodec()) == [b"9 [('error_code', 0)]"]
    refused = dispatcher.dispatch(header, {}, OtherListener())
    assert refused == [f"9 error {ClusterAuthorizationFailedError.code}".encode()]
