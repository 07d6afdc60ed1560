"""BrokerServer's limits against hostile and careless clients, with a scripted handler:
bounded memory per connection and broker-wide, deadlines for incomplete frames and for
responses nobody reads."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from minibroker.broker.network.server import BrokerServer
from minibroker.broker.network.server_connection import MAX_PENDING
from minibroker.broker.requests.request_handler import Buffer, Pending, Reply
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.session import Session
from tests.support.broker import assert_closed_by_peer, read_frames

pytestmark = pytest.mark.timeout(30)

RESPONSE = 100_000
"""Size of a 'big' answer."""


class SizedHandler:
    """'big' answers RESPONSE bytes, 'now:X' answers X, 'park' answers once ``release``
    is set; counts what it handled."""

    def __init__(self) -> None:
        self.handled = 0
        self.release = trio.Event()

    listener = "PLAINTEXT"

    def handle(self, frame: bytes, session: Session) -> Reply:
        self.handled += 1
        if frame == b"big":
            return [encode_frame(bytes(RESPONSE))]
        if frame == b"park":

            async def parked() -> Sequence[Buffer]:
                await self.release.wait()
                return [encode_frame(b"released")]

            return Pending(parked)
        return [encode_frame(frame.partition(b":")[2])]


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[BrokerServer, SizedHandler]]:
    handler = SizedHandler()
    server = BrokerServer(handler, host="127.0.0.1", port=0, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, handler
        nursery.cancel_scope.cancel()


async def connect(port: int, *, receive_buffer: int | None = None) -> trio.SocketStream:
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock)


async def answer(stream: trio.SocketStream) -> bytes:
    """The one answer a stream is waiting for."""
    (frame,) = await read_frames(stream, 1)
    return frame


async def pipeline_without_reading(
    stream: trio.SocketStream, frame: bytes, *, task_status: trio.TaskStatus[None]
) -> None:
    """Sends ``frame`` over and over (blocking once the peer stops reading us)."""
    task_status.started()
    burst = frame * 100
    try:
        while True:
            await stream.send_all(burst)
    except trio.BrokenResourceError:
        pass


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await trio.sleep(0.01)


async def test_a_client_that_never_reads_is_held_to_the_unsent_byte_bound() -> None:
    bound = 300_000
    async with serving(max_unsent_bytes=bound) as (server, handler):
        hog = await connect(server.port, receive_buffer=4096)
        async with trio.open_nursery() as nursery:
            await nursery.start(pipeline_without_reading, hog, encode_frame(b"big"))
            await trio.testing.wait_all_tasks_blocked(cushion=0.2)
            # What the kernel's socket buffers took plus the bound, then no more.
            assert handler.handled < 200
            assert server.queued_bytes.used <= bound + RESPONSE + 256 * 1024
            async with await connect(server.port) as other:
                await other.send_all(encode_frame(b"now:still served"))
                assert await answer(other) == b"still served"
            nursery.cancel_scope.cancel()
        await hog.aclose()
        await until(lambda: server.connections == 0)
        assert server.queued_bytes.used == 0


async def test_a_frame_trickling_in_a_byte_at_a_time_is_closed_at_its_deadline() -> None:
    async with (
        serving(request_receive_timeout_s=0.5, idle_timeout_s=30) as (server, _),
        await connect(server.port) as slow,
    ):
        started = trio.current_time()
        frame = encode_frame(b"now:" + b"x" * 100)

        async def trickle() -> None:
            try:
                for byte in frame:
                    await slow.send_all(bytes([byte]))
                    await trio.sleep(0.05)  # the recipe: a steady trickle
            except trio.BrokenResourceError:
                pass  # closed by the broker, as it should be

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            await assert_closed_by_peer(slow)
            nursery.cancel_scope.cancel()
        assert trio.current_time() - started < 5
        assert server.closed["incomplete_request"] == 1


async def test_a_slow_frame_completed_within_its_deadline_is_answered() -> None:
    async with (
        serving(request_receive_timeout_s=5, idle_timeout_s=30) as (server, _),
        await connect(server.port) as slow,
    ):
        frame = encode_frame(b"now:late")
        for byte in frame:
            await slow.send_all(bytes([byte]))
            await trio.sleep(0.01)
        assert await answer(slow) == b"late"
        assert server.closed["incomplete_request"] == 0


async def test_a_connection_whose_responses_are_not_taken_is_closed_after_the_idle_time() -> None:
    async with serving(idle_timeout_s=0.5) as (server, _):
        hog = await connect(server.port, receive_buffer=4096)
        async with trio.open_nursery() as nursery:
            await nursery.start(pipeline_without_reading, hog, encode_frame(b"big"))
            await until(lambda: server.closed["stalled_response"] == 1)
            nursery.cancel_scope.cancel()
        await hog.aclose()
        await until(lambda: server.connections == 0)
        assert server.queued_bytes.used == 0


async def test_replies_of_unknown_size_are_limited_in_number_per_connection() -> None:
    async with serving() as (server, handler), await connect(server.port) as client:
        count = 3 * MAX_PENDING
        await client.send_all(encode_frame(b"park") * count)
        await trio.testing.wait_all_tasks_blocked(cushion=0.1)
        assert handler.handled == MAX_PENDING
        handler.release.set()
        assert await read_frames(client, count) == [b"released"] * count
        assert handler.handled == count


IDLE_S = 0.3
"""connections.max.idle.ms of the idle tests, in seconds."""


async def test_a_plain_connection_that_sends_nothing_is_closed_once_idle() -> None:
    async with serving(idle_timeout_s=IDLE_S) as (server, _):
        started = trio.current_time()
        async with await connect(server.port) as client:
            await assert_closed_by_peer(client)
        assert trio.current_time() - started >= IDLE_S
        assert server.closed["idle"] == 1


async def test_requests_more_often_than_the_idle_time_keep_a_connection_open() -> None:
    # A longer idle time than the other tests' and short gaps: a loaded machine that
    # stretches a gap several times over still sends within every idle period.
    idle_s = 1.0
    async with serving(idle_timeout_s=idle_s) as (server, _), await connect(server.port) as client:
        started = trio.current_time()
        while trio.current_time() - started < 3 * idle_s:  # never an idle period without one
            await client.send_all(encode_frame(b"now:x"))
            assert await answer(client) == b"x"
            await trio.sleep(idle_s / 10)
        assert server.closed["idle"] == 0


async def test_a_connection_owed_an_answer_is_not_idle_until_it_got_it() -> None:
    async with serving(idle_timeout_s=IDLE_S) as (server, handler):
        async with await connect(server.port) as client:
            await client.send_all(encode_frame(b"park"))
            await trio.sleep(3 * IDLE_S)  # nothing sent since, but an answer is owed
            assert server.closed["idle"] == 0
            handler.release.set()
            assert await answer(client) == b"released"
            # Silent for longer than the idle time already: closed once answered.
            await assert_closed_by_peer(client)
        assert server.closed["idle"] == 1


@contextlib.contextmanager
def descriptors_below(floor: int) -> Iterator[None]:
    """Hold every free descriptor below ``floor``, so the next socket opened gets one at
    or above it (select() cannot watch those)."""
    held: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY)
            if fd >= floor:
                os.close(fd)
                break
            held.append(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)


async def test_an_idle_connection_on_a_descriptor_above_1023_is_closed() -> None:
    # A broker with many partitions holds more than 1024 files: the idle watch must not
    # use select(), which raises on such descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    async with serving(idle_timeout_s=IDLE_S) as (server, _):
        with descriptors_below(1100):
            client = await connect(server.port)
            await until(lambda: server.connections == 1)
        async with client:
            assert client.socket.fileno() >= 1100
            await assert_closed_by_peer(client)
        assert server.closed["idle"] == 1
        async with await connect(server.port) as other:  # still serving
            await other.send_all(encode_frame(b"now:ok"))
            assert await answer(other) == b"ok"
