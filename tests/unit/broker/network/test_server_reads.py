"""How a plain socket connection reads after answering: a client that sends one request
and waits for its answer is not read before its next request can be there (a read that
finds nothing costs a system call and an exception per request)."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from minibroker.broker.network import server_connection
from minibroker.broker.network.server import BrokerServer
from minibroker.broker.requests.request_handler import Reply
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame
from minibroker.protocol.session import Session

ROUND_TRIPS = 200


class Echo:
    listener = "PLAINTEXT"

    def handle(self, frame: bytes, session: Session) -> Reply:
        return [encode_frame(frame)]


class ReadCounter:
    """Counts the server's direct reads, and those that found nothing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = self.empty = 0
        real = server_connection.read_fd_now

        def counted(fd: int, size: int) -> bytes | None:
            data = real(fd, size)
            self.reads += 1
            self.empty += data is None
            return data

        monkeypatch.setattr(server_connection, "read_fd_now", counted)


async def receive_answer(stream: trio.SocketStream, decoder: FrameDecoder) -> bytes:
    while (frame := decoder.next_frame()) is NEED_DATA:
        data = await stream.receive_some(65536)
        assert data, "closed instead of answering"
        decoder.feed(data)
    assert isinstance(frame, bytes)
    return frame


async def serve_pair(nursery: trio.Nursery) -> trio.SocketStream:
    """A TCP connection whose other end the server serves; returns the client end."""
    server = BrokerServer(Echo())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        left = socket.create_connection(listener.getsockname())
        right, _ = listener.accept()
    nursery.start_soon(server._serve_connection, _stream(right))
    return _stream(left)


def _stream(sock: socket.socket) -> trio.SocketStream:
    sock.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


async def test_a_send_and_wait_client_is_read_once_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = ReadCounter(monkeypatch)
    async with trio.open_nursery() as nursery:
        client = await serve_pair(nursery)
        decoder = FrameDecoder()
        for i in range(ROUND_TRIPS):
            payload = b"request %d" % i
            await client.send_all(encode_frame(payload))
            assert await receive_answer(client, decoder) == payload
        nursery.cancel_scope.cancel()
    # Once its reads right after an answer found nothing, the reader waits first and
    # only probes now and then: nearly every read finds a request.
    probes = ROUND_TRIPS // server_connection.ANSWERED_READ_PROBE
    assert counter.empty <= probes + server_connection.MAX_READ_CREDIT + 1
    assert counter.reads - counter.empty == ROUND_TRIPS


async def test_whole_split_and_pipelined_requests_are_answered_in_order() -> None:
    # A read that is exactly one frame skips the decoder's buffer; reads that hold part
    # of a frame, or several, go through it: the answers are the same either way.
    async with trio.open_nursery() as nursery:
        client = await serve_pair(nursery)
        decoder = FrameDecoder()
        await client.send_all(encode_frame(b"whole"))
        assert await receive_answer(client, decoder) == b"whole"
        split = encode_frame(b"split across reads")
        await client.send_all(split[:6])
        await trio.testing.wait_all_tasks_blocked()  # the server has read the first part
        await client.send_all(split[6:])
        assert await receive_answer(client, decoder) == b"split across reads"
        await client.send_all(encode_frame(b"one") + encode_frame(b"two"))
        assert [await receive_answer(client, decoder) for _ in range(2)] == [b"one", b"two"]
        await client.send_all(encode_frame(b"whole again"))
        assert await receive_answer(client, decoder) == b"whole again"
        nursery.cancel_scope.cancel()
