"""The request path's three steps: codec, dispatcher, handlers (broker/requests/dispatcher.py)."""

from __future__ import annotations

from collections.abc import Sequence

import msgpack
import pytest
import trio

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.network.request_codec import MsgpackCodec
from minibroker.broker.requests.dispatcher import ITEMS_PER_TURN, Deferred, RequestDispatcher
from minibroker.broker.requests.request_caps import RequestCaps
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending
from minibroker.protocol.api import ApiKey, Body, RequestHeader, decode_response, encode_request
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    InvalidRequestError,
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


async def test_a_request_naming_many_items_is_handled_in_turns_after_its_effects() -> None:
    """An OffsetFetch naming more than ITEMS_PER_TURN partitions: nothing runs before
    the server's task does, the connection may read on once the handler ran
    (``ordered``), and a KafkaError is still answered with its code."""
    calls: list[str] = []

    def handler(header: RequestHeader, body: Body) -> Body:
        calls.append(body["group_id"])
        if body["group_id"] == "bad":
            raise InvalidRequestError("refused")
        return {"error_code": NONE}

    dispatcher = RequestDispatcher(BrokerMetrics(), RequestCaps(10 * ITEMS_PER_TURN))
    dispatcher.register(bodies.OFFSET_FETCH, handler)  # type: ignore[arg-type]
    header = RequestHeader(ApiKey.OFFSET_FETCH, 1, 7, "test")
    topics = [{"name": "t", "partition_indexes": list(range(ITEMS_PER_TURN + 1))}]
    for group, answer in (("g", b"7 [('error_code', 0)]"), ("bad", b"7 error 42")):
        body = {"group_id": group, "topics": topics, "groups": None}
        reply = dispatcher.dispatch(header, body, TextCodec())
        assert isinstance(reply, Pending) and reply.ordered is not None
        assert calls[-1:] != [group] and not reply.ordered.is_set()
        assert await reply.wait() == [answer]
        assert calls[-1] == group and reply.ordered.is_set()
