"""Connection against an in-test Trio server on 127.0.0.1: pipelining, ordering,
timeouts, and failures mapped to NetworkError."""

from __future__ import annotations

import math
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import msgpack
import pytest
import trio

from minibroker.net.connection import Connection, ConnectionState, IllegalConnectionTransition
from minibroker.protocol.api import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_response,
    error_body,
)
from minibroker.protocol.errors import NetworkError, NotLeaderOrFollowerError, RequestTimedOutError
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame

Handler = Callable[[RequestHeader, Any], Awaitable[Any]]
"""Returns the response body, or None for no response."""


def metadata_answer(header: RequestHeader, body: Any) -> dict[str, Any]:
    """Echo the requested topic names back, so each caller can recognise its answer."""
    topics = [{"name": t["name"], "partitions": []} for t in body["topics"] or []]
    return {"brokers": [], "cluster_id": f"c{header.correlation_id}", "topics": topics}


async def answer_metadata(header: RequestHeader, body: Any) -> Any:
    return metadata_answer(header, body)


async def serve_frames(
    stream: trio.SocketStream, on_request: Callable[[RequestHeader, Any, bytes], Awaitable[None]]
) -> None:
    decoder = FrameDecoder()
    async with stream:
        while data := await stream.receive_some(65536):
            decoder.feed(data)
            while (frame := decoder.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                header, body = decode_request(frame)
                await on_request(header, body, frame)


async def listen(nursery: trio.Nursery, on_connection: Callable[..., Awaitable[None]]) -> int:
    """Serve ``on_connection`` on 127.0.0.1 port 0; return the port."""
    listeners = await nursery.start(partial(trio.serve_tcp, on_connection, 0, host="127.0.0.1"))
    port: int = listeners[0].socket.getsockname()[1]
    return port


@asynccontextmanager
async def server(
    handler: Handler = answer_metadata,
) -> AsyncIterator[tuple[int, list[RequestHeader]]]:
    """A one-at-a-time responder: answers each request in order with handler's body."""
    seen: list[RequestHeader] = []

    async def on_connection(stream: trio.SocketStream) -> None:
        async def on_request(header: RequestHeader, body: Any, frame: bytes) -> None:
            seen.append(header)
            answer = await handler(header, body)
            if answer is not None:
                for buf in encode_response(header.correlation_id, answer):
                    await stream.send_all(buf)

        with suppress(trio.BrokenResourceError):  # the client went away first
            await serve_frames(stream, on_request)

    async with trio.open_nursery() as nursery:
        port = await listen(nursery, on_connection)
        yield port, seen
        nursery.cancel_scope.cancel()


async def metadata(conn: Connection, name: str, **kwargs: Any) -> Any:
    return await conn.request(ApiKey.METADATA, {"topics": [{"name": name}]}, **kwargs)


async def test_request_returns_the_response_body_with_defaults_filled() -> None:
    async with server() as (port, seen), Connection("127.0.0.1", port, client_id="me") as conn:
        body = await metadata(conn, "events")
    assert body["topics"][0]["name"] == "events"
    assert body["controller_id"] == -1  # filled from the schema's default
    assert body["topics"][0]["is_internal"] is False
    assert seen == [RequestHeader(ApiKey.METADATA, 0, seen[0].correlation_id, "me")]


async def test_correlation_ids_increase_per_request() -> None:
    async with server() as (port, seen), Connection("127.0.0.1", port) as conn:
        for name in "abc":
            await metadata(conn, name)
    ids = [h.correlation_id for h in seen]
    assert ids == sorted(ids) and len(set(ids)) == 3


async def test_concurrent_requests_each_get_their_own_response() -> None:
    results: dict[str, Any] = {}
    async with server() as (port, _), Connection("127.0.0.1", port) as conn:

        async def one(name: str) -> None:
            results[name] = await metadata(conn, name)

        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(one, f"t{i}")
    assert {name: r["topics"][0]["name"] for name, r in results.items()} == {
        f"t{i}": f"t{i}" for i in range(100)
    }


async def test_requests_are_pipelined_not_sent_one_response_at_a_time() -> None:
    """The server answers nothing until it holds all N requests: only pipelining works."""
    n = 20

    async def on_connection(stream: trio.SocketStream) -> None:
        held: list[tuple[RequestHeader, Any]] = []

        async def hold(header: RequestHeader, body: Any, frame: bytes) -> None:
            held.append((header, body))
            if len(held) == n:
                for h, b in held:
                    await stream.send_all(
                        b"".join(encode_response(h.correlation_id, metadata_answer(h, b)))
                    )

        await serve_frames(stream, hold)

    names: list[str] = []
    async with trio.open_nursery() as nursery:
        port = await listen(nursery, on_connection)
        async with Connection("127.0.0.1", port) as conn:

            async def one(i: int) -> None:
                body = await metadata(conn, f"p{i}", timeout=10)
                names.append(body["topics"][0]["name"])

            async with trio.open_nursery() as clients:
                for i in range(n):
                    clients.start_soon(one, i)
        nursery.cancel_scope.cancel()
    assert sorted(names) == sorted(f"p{i}" for i in range(n))


async def test_a_top_level_error_code_is_returned_for_the_caller_to_decide() -> None:
    async def refuse(header: RequestHeader, body: Any) -> Any:
        return error_body(NotLeaderOrFollowerError("not here"))

    async with server(refuse) as (port, _), Connection("127.0.0.1", port) as conn:
        body = await conn.request(ApiKey.FETCH, {"max_wait_ms": 0, "min_bytes": 0, "topics": []})
    assert body["error_code"] == NotLeaderOrFollowerError.code
    assert body["error_message"] == "not here"


async def test_large_record_data_round_trips_both_ways() -> None:
    records = bytes(range(256)) * 4096 * 3  # 3 MiB: several receives each way

    async def check_and_serve(header: RequestHeader, body: Any) -> Any:
        if header.api_key == ApiKey.PRODUCE:
            assert body["topics"][0]["partitions"][0]["records"] == records
            return {"topics": [{"name": "t", "partitions": [{"index": 0, "base_offset": 0}]}]}
        partition = {"partition_index": 0, "high_watermark": 1, "records": memoryview(records)}
        return {"topics": [{"topic": "t", "partitions": [partition]}]}

    produce = {
        "acks": 1,
        "timeout_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"index": 0, "records": records}]}],
    }
    fetch = {"max_wait_ms": 0, "min_bytes": 0, "topics": []}
    async with server(check_and_serve) as (port, _), Connection("127.0.0.1", port) as conn:
        produced = await conn.request(ApiKey.PRODUCE, produce, timeout=10)
        fetched = await conn.request(ApiKey.FETCH, fetch, timeout=10)
    assert produced["topics"][0]["partitions"][0]["error_code"] == 0
    assert fetched["topics"][0]["partitions"][0]["records"] == records


@pytest.mark.timeout(20)
async def test_a_large_answer_arriving_in_pieces_is_read_whole_and_the_next_follows() -> None:
    """A large frame is received into its own buffer (FrameDecoder.frame_buffer) from its
    second read on, whatever the pieces: the prefix cut in two, a small last piece, and
    the next answer in the same write as the frame's last bytes."""
    records = bytes(range(256)) * 4096 * 2  # 2 MiB
    partition = {"partition_index": 0, "high_watermark": 1, "records": records}
    fetched = {"topics": [{"topic": "t", "partitions": [partition]}]}

    async def on_connection(stream: trio.SocketStream) -> None:
        headers: list[RequestHeader] = []

        async def on_request(header: RequestHeader, body: Any, frame: bytes) -> None:
            headers.append(header)
            if len(headers) < 2:
                return
            large = b"".join(encode_response(headers[0].correlation_id, fetched))
            answer = {"brokers": [], "cluster_id": "c", "topics": []}
            small = b"".join(encode_response(headers[1].correlation_id, answer))
            # the prefix cut in two, a large piece, a small last one with the next answer
            pieces = [large[:2], large[2:300_000], large[300_000:-10], large[-10:] + small]
            for piece in pieces:
                await stream.send_all(piece)
                await trio.testing.wait_all_tasks_blocked()  # the client reads each apart

        with suppress(trio.BrokenResourceError):
            await serve_frames(stream, on_request)

    fetch = {"max_wait_ms": 0, "min_bytes": 0, "topics": []}
    answers: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        port = await listen(nursery, on_connection)
        async with Connection("127.0.0.1", port) as conn, trio.open_nursery() as callers:

            async def call(name: str, api_key: int, body: Any) -> None:
                answers[name] = await conn.request(api_key, body, timeout=10)

            callers.start_soon(call, "fetch", ApiKey.FETCH, fetch)
            await trio.testing.wait_all_tasks_blocked()
            callers.start_soon(call, "metadata", ApiKey.METADATA, {"topics": None})
        nursery.cancel_scope.cancel()
    assert answers["fetch"]["topics"][0]["partitions"][0]["records"] == records
    assert answers["metadata"]["topics"] == []


@pytest.mark.timeout(20)
async def test_a_timed_out_request_is_abandoned_and_the_connection_stays_usable() -> None:
    release = trio.Event()

    async def slow_first(header: RequestHeader, body: Any) -> Any:
        if body["topics"][0]["name"] == "slow":
            await release.wait()
        return metadata_answer(header, body)

    async with server(slow_first) as (port, _), Connection("127.0.0.1", port) as conn:
        with pytest.raises(RequestTimedOutError):
            await metadata(conn, "slow", timeout=0.2)
        assert conn.is_usable
        release.set()
        # The late answer to "slow" arrives first and must be dropped, not handed on.
        assert (await metadata(conn, "next", timeout=5))["topics"][0]["name"] == "next"


@pytest.mark.timeout(20)
async def test_a_cancelled_reader_hands_reading_over_to_the_other_callers() -> None:
    release = trio.Event()

    async def gate_first(header: RequestHeader, body: Any) -> Any:
        if body["topics"][0]["name"] == "first":
            await release.wait()
        return metadata_answer(header, body)

    got: list[str] = []
    async with (
        server(gate_first) as (port, _),
        Connection("127.0.0.1", port) as conn,
        trio.open_nursery() as nursery,
    ):
        first_scope = trio.CancelScope()

        async def first() -> None:
            with first_scope:
                await metadata(conn, "first")

        async def later(name: str) -> None:
            got.append((await metadata(conn, name, timeout=5))["topics"][0]["name"])

        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        for name in ("second", "third"):
            nursery.start_soon(later, name)
        await trio.testing.wait_all_tasks_blocked()
        first_scope.cancel()  # "first" was the reader; someone must take over
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert sorted(got) == ["second", "third"]


@pytest.mark.timeout(20)
async def test_a_call_whose_waiter_was_cancelled_is_answered_to_the_next_waiter() -> None:
    release = trio.Event()

    async def gated(header: RequestHeader, body: Any) -> Any:
        await release.wait()
        return metadata_answer(header, body)

    async with server(gated) as (port, seen), Connection("127.0.0.1", port) as conn:
        call = conn.call(ApiKey.METADATA, {"topics": [{"name": "kept"}]}, timeout=5)
        with trio.CancelScope() as scope:
            scope.cancel()  # due at once: the frame is not even written
            await call.response()
        assert not call.queued
        with trio.move_on_after(0.05):  # written, then the wait is cut short
            await call.response()
        release.set()
        body = await call.response()  # sent once, answered to whoever waits now
    assert body["topics"][0]["name"] == "kept"
    assert [header.correlation_id for header in seen] == [call.correlation_id]


@pytest.mark.timeout(20)
async def test_an_abandoned_call_leaves_its_answer_to_be_dropped() -> None:
    release = trio.Event()

    async def gate_first(header: RequestHeader, body: Any) -> Any:
        if body["topics"][0]["name"] == "first":
            await release.wait()
        return metadata_answer(header, body)

    async with server(gate_first) as (port, _), Connection("127.0.0.1", port) as conn:
        call = conn.call(ApiKey.METADATA, {"topics": [{"name": "first"}]}, timeout=5)
        with trio.move_on_after(0.05):
            await call.response()
        call.abandon()
        release.set()
        assert (await metadata(conn, "next", timeout=5))["topics"][0]["name"] == "next"


@pytest.mark.timeout(20)
async def test_time_out_breaks_the_connection_of_an_unbounded_call_left_unanswered() -> None:
    async def never(header: RequestHeader, body: Any) -> Any:
        await trio.sleep_forever()

    async with server(never) as (port, _), Connection("127.0.0.1", port) as conn:
        call = conn.call(ApiKey.METADATA, {"topics": [{"name": "lost"}]}, timeout=5)
        async with trio.open_nursery() as nursery:

            async def watchdog() -> None:
                await trio.testing.wait_all_tasks_blocked()
                await conn.time_out(call)

            nursery.start_soon(watchdog)
            with pytest.raises(NetworkError, match="no response within 5"):
                await call.response(bounded=False)
        assert not conn.is_usable


async def test_time_out_leaves_an_answered_call_and_its_connection_alone() -> None:
    async with server() as (port, _), Connection("127.0.0.1", port) as conn:
        call = conn.call(ApiKey.METADATA, {"topics": [{"name": "fine"}]}, timeout=5)
        assert (await call.response(bounded=False))["topics"][0]["name"] == "fine"
        await conn.time_out(call)
        assert conn.is_usable


async def test_server_closing_mid_request_fails_every_pending_request() -> None:
    async def hang_up_after_three(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        frames = 0
        async with stream:
            while frames < 3:
                decoder.feed(await stream.receive_some(65536))
                while decoder.next_frame() is not NEED_DATA:
                    frames += 1

    errors: list[NetworkError] = []
    async with trio.open_nursery() as nursery:
        port = await listen(nursery, hang_up_after_three)
        async with Connection("127.0.0.1", port) as conn:

            async def one(name: str) -> None:
                try:
                    await metadata(conn, name, timeout=10)
                except NetworkError as exc:
                    errors.append(exc)

            async with trio.open_nursery() as clients:
                for name in "abc":
                    clients.start_soon(one, name)
            assert not conn.is_usable
            with pytest.raises(NetworkError):
                await metadata(conn, "after")
        nursery.cancel_scope.cancel()
    assert len(errors) == 3
    assert all(isinstance(e.__cause__, NetworkError) for e in errors)


async def test_a_response_with_the_wrong_correlation_id_breaks_the_connection() -> None:
    async def on_connection(stream: trio.SocketStream) -> None:
        async def reply_wrong(header: RequestHeader, body: Any, frame: bytes) -> None:
            answer = metadata_answer(header, body)
            await stream.send_all(b"".join(encode_response(header.correlation_id + 1, answer)))

        await serve_frames(stream, reply_wrong)

    async with trio.open_nursery() as nursery:
        port = await listen(nursery, on_connection)
        async with Connection("127.0.0.1", port) as conn:
            with pytest.raises(NetworkError, match="correlation id") as info:
                await metadata(conn, "x")
            assert info.value.__cause__ is not None
        nursery.cancel_scope.cancel()


async def test_garbage_from_the_server_is_a_network_error() -> None:
    async def on_connection(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(encode_frame(b"\xc1\xc1 not msgpack"))
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        port = await listen(nursery, on_connection)
        async with Connection("127.0.0.1", port) as conn:
            with pytest.raises(NetworkError, match="protocol violation"):
                await metadata(conn, "x")
        nursery.cancel_scope.cancel()


async def test_connect_refused_is_a_network_error_caused_by_the_os_error() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    with pytest.raises(NetworkError) as info:
        await Connection("127.0.0.1", port).connect()
    assert isinstance(info.value.__cause__, OSError)


async def test_connect_gives_up_after_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    async def never_connects(host: str, port: int) -> trio.SocketStream:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(trio, "open_tcp_stream", never_connects)
    with pytest.raises(NetworkError, match="nothing within"):
        await Connection("127.0.0.1", 9, connect_timeout=0.05).connect()


async def test_request_on_an_unopened_or_closed_connection_is_a_network_error() -> None:
    conn = Connection("127.0.0.1", 9)
    with pytest.raises(NetworkError, match="not open"):
        await metadata(conn, "x")
    async with server() as (port, _):
        conn = Connection("127.0.0.1", port)
        async with conn:
            await metadata(conn, "x")
        with pytest.raises(NetworkError, match="closed"):
            await metadata(conn, "x")


async def test_a_connection_connects_once() -> None:
    async with server() as (port, _):
        conn = Connection("127.0.0.1", port)
        states = [conn.state]
        async with conn:
            states.append(conn.state)
            with pytest.raises(IllegalConnectionTransition):
                await conn.connect()
        states.append(conn.state)
        assert states == [ConnectionState.NEW, ConnectionState.OPEN, ConnectionState.CLOSED]
        with pytest.raises(IllegalConnectionTransition):
            await conn.connect()


async def test_concurrent_closes_are_fine() -> None:
    async with server() as (port, _):
        conn = Connection("127.0.0.1", port)
        await conn.connect()
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(conn.aclose)
        assert conn.state is ConnectionState.CLOSED


async def test_send_without_response_then_request_still_matches() -> None:
    async def no_answer_for_acks_0(header: RequestHeader, body: Any) -> Any:
        if header.api_key == ApiKey.PRODUCE:
            return None
        return metadata_answer(header, body)

    produce = {"acks": 0, "timeout_ms": 0, "topics": []}
    async with server(no_answer_for_acks_0) as (port, seen), Connection("127.0.0.1", port) as c:
        await c.send(ApiKey.PRODUCE, produce)
        assert (await metadata(c, "after"))["topics"][0]["name"] == "after"
    assert [h.api_key for h in seen] == [ApiKey.PRODUCE, ApiKey.METADATA]


async def test_request_refuses_acks_0_produce_which_gets_no_response() -> None:
    async with server() as (port, seen), Connection("127.0.0.1", port) as conn:
        with pytest.raises(ValueError, match="send"):
            await conn.request(ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 0, "topics": []})
        assert conn.is_usable
    assert seen == []


async def test_an_unsupported_version_request_gets_the_raw_error_body() -> None:
    async def unsupported(header: RequestHeader, body: Any) -> Any:
        return {"error_code": 35, "error_message": "no"}

    async with server(unsupported) as (port, _), Connection("127.0.0.1", port) as conn:
        # The test server decodes what it gets, so send a version it would accept...
        body = await conn.request(ApiKey.METADATA, {"topics": None})
        assert body["error_code"] == 35
    # ...and check the client side of an unknown version without a server.
    payload = msgpack.packb([1, {"error_code": 35}])
    assert decode_response(payload, ApiKey.METADATA, 99) == (1, {"error_code": 35})


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(3))
async def test_many_callers_with_random_delays_timeouts_and_cancels_each_get_their_own(
    seed: int,
) -> None:
    """Readers come and go (timeouts, cancellations); every finished caller still gets
    exactly its own answer and the connection ends usable."""
    rng = random.Random(seed)
    delays = {f"n{i}": rng.choice([0, 0, 0, 0.001, 0.005, 0.02]) for i in range(150)}

    async def delayed(header: RequestHeader, body: Any) -> Any:
        await trio.sleep(delays.get(body["topics"][0]["name"], 0))
        return metadata_answer(header, body)

    answered: dict[str, str] = {}
    gave_up: list[str] = []
    async with (
        server(delayed) as (port, _),
        Connection("127.0.0.1", port) as conn,
    ):

        async def caller(name: str, timeout: float, cancel_after: float | None) -> None:
            with trio.move_on_after(cancel_after if cancel_after is not None else math.inf):
                try:
                    body = await metadata(conn, name, timeout=timeout)
                except RequestTimedOutError:
                    gave_up.append(name)
                    return
                answered[name] = body["topics"][0]["name"]
                return
            gave_up.append(name)

        async with trio.open_nursery() as nursery:
            for name in delays:
                timeout = rng.choice([0.002, 0.05, 10, 10, 10])
                cancel_after = rng.choice([None, None, None, 0.001, 0.03])
                nursery.start_soon(caller, name, timeout, cancel_after)
                if rng.random() < 0.3:
                    await trio.sleep(0)
        assert conn.is_usable
        assert (await metadata(conn, "last", timeout=10))["topics"][0]["name"] == "last"
    assert all(name == got for name, got in answered.items())
    assert len(answered) + len(gave_up) == len(delays)
    assert answered  # the run is not vacuous


SMALL_SOCKET_BUFFER = 64 * 1024  # both ends' buffers together hold a few hundred KiB


@pytest.mark.timeout(30)
async def test_writers_take_turns_in_order_and_one_cancelled_while_waiting_writes_nothing() -> None:
    """A frame that fills the socket holds the turn to write; the callers behind it
    write after it, in the order they came, and one cancelled before its turn leaves
    no byte on the wire (the connection stays usable)."""
    records = bytes(range(256)) * 4096 * 4  # 4 MiB: far more than the socket buffers hold
    reading = trio.Event()  # the server reads nothing before it is set
    seen: list[str] = []

    async def gated(stream: trio.SocketStream) -> None:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_SOCKET_BUFFER)
        await reading.wait()

        async def on_request(header: RequestHeader, body: Any, frame: bytes) -> None:
            name = body["topics"][0]["name"]
            assert body["topics"][0]["partitions"][0]["records"] == records
            seen.append(name)
            answer = {"topics": [{"name": name, "partitions": [{"index": 0, "base_offset": 0}]}]}
            for buf in encode_response(header.correlation_id, answer):
                await stream.send_all(buf)

        with suppress(trio.BrokenResourceError):
            await serve_frames(stream, on_request)

    def produce(name: str) -> dict[str, Any]:
        partitions = [{"index": 0, "records": records}]
        return {"acks": 1, "timeout_ms": 1000, "topics": [{"name": name, "partitions": partitions}]}

    answered: list[str] = []
    async with trio.open_nursery() as servers:
        port = await listen(servers, gated)
        async with Connection("127.0.0.1", port) as conn, trio.open_nursery() as nursery:
            assert isinstance(conn._stream, trio.SocketStream)
            conn._stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_SOCKET_BUFFER)

            async def send(name: str) -> None:
                body = await conn.request(ApiKey.PRODUCE, produce(name), timeout=20)
                answered.append(body["topics"][0]["name"])

            cancelled = trio.CancelScope()

            async def send_cancelled() -> None:
                with cancelled:
                    await send("cancelled")

            nursery.start_soon(send, "first")  # its frame fills the socket: it holds the turn
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(send_cancelled)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(send, "second")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(send, "third")
            await trio.testing.wait_all_tasks_blocked()
            cancelled.cancel()
            await trio.testing.wait_all_tasks_blocked()
            reading.set()
        assert conn.state is ConnectionState.CLOSED
        servers.cancel_scope.cancel()
    assert seen == ["first", "second", "third"]
    assert answered == ["first", "second", "third"]
    assert cancelled.cancelled_caught
