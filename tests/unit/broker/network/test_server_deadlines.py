"""BrokerServer's deadlines in virtual time (trio's autojump clock, memory streams): a
request frame must arrive whole within request_receive_timeout_s, however steadily
its bytes trickle in, while each new frame gets a fresh deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from minibroker.broker.network.server import BrokerServer
from minibroker.broker.requests.request_handler import Reply
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, encode_frame
from minibroker.protocol.session import Session

DEADLINE_S = 10.0
IDLE_S = 600.0


class Echo:
    listener = "PLAINTEXT"

    def handle(self, frame: bytes, session: Session) -> Reply:
        return [encode_frame(frame)]


@asynccontextmanager
async def connected() -> AsyncIterator[tuple[BrokerServer, trio.testing.MemoryStapledStream]]:
    """A server serving one connection over a memory stream; yields (server, client end)."""
    server = BrokerServer(Echo(), request_receive_timeout_s=DEADLINE_S, idle_timeout_s=IDLE_S)
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server._serve_connection, server_end)
        yield server, client_end
        nursery.cancel_scope.cancel()


async def trickle(stream: trio.abc.Stream, data: bytes, every_s: float) -> None:
    for byte in data:
        await stream.send_all(bytes([byte]))
        await trio.sleep(every_s)


async def receive_answer(stream: trio.abc.Stream) -> bytes:
    decoder = FrameDecoder()
    while (frame := decoder.next_frame()) is NEED_DATA:
        data = await stream.receive_some()
        assert data, "closed instead of answering"
        decoder.feed(data)
    assert isinstance(frame, bytes)
    return frame


async def test_a_frame_sent_a_byte_a_second_is_closed_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (server, stream):
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            # The recipe: one byte a second, forever (a 1 MB frame would take 12 days).
            nursery.start_soon(trickle, stream, encode_frame(bytes(1_000_000)), 1.0)
            assert await stream.receive_some() == b""  # closed by the broker
            nursery.cancel_scope.cancel()
        assert DEADLINE_S <= trio.current_time() - started < DEADLINE_S + 1.5
        assert server.closed["incomplete_request"] == 1


async def test_each_frame_gets_its_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (server, stream):
        frame = encode_frame(b"0123")  # 8 bytes at 1 s apart: within the 10 s deadline
        await trickle(stream, frame, 1.0)
        assert await receive_answer(stream) == b"0123"
        await trio.sleep(IDLE_S / 2)  # between frames only the idle timer runs
        await trickle(stream, frame, 1.0)
        assert await receive_answer(stream) == b"0123"
        assert server.closed["incomplete_request"] == 0


async def test_a_connection_with_no_frame_in_progress_closes_only_when_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as (server, stream):
        started = trio.current_time()
        assert await stream.receive_some() == b""
        assert trio.current_time() - started >= IDLE_S
        assert server.closed == {**server.closed, "idle": 1, "incomplete_request": 0}
