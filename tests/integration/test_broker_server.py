"""BrokerServer on its own, with a scripted handler: ordering, back-pressure, failures."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Sequence

import pytest
import trio
import trio.testing

from minibroker.broker.network.server import BrokerServer
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending, Reply
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.session import Session
from tests.support.broker import read_frames

pytestmark = pytest.mark.timeout(30)


class ScriptedHandler:
    """Frames are ASCII commands: 'now:X' answers X at once, 'later:X' parks until
    released (released in any order), 'close' is unparseable, 'quiet' has no answer,
    'size:N' answers N bytes."""

    listener = "PLAINTEXT"

    def __init__(self) -> None:
        self.gates: dict[str, trio.Event] = {}
        self.sessions: list[Session] = []

    def handle(self, frame: bytes, session: Session) -> Reply:
        self.sessions.append(session)
        command, _, arg = frame.decode().partition(":")
        if command == "close":
            raise CloseConnection("scripted close")
        if command == "quiet":
            return None
        if command == "size":
            return [encode_frame(b"z" * int(arg))]
        if command == "later":
            gate = self.gates.setdefault(arg, trio.Event())

            async def wait() -> Sequence[Buffer]:
                await gate.wait()
                return [encode_frame(arg.encode())]

            return Pending(wait)
        return [encode_frame(arg.encode())]


@pytest.fixture
async def server() -> AsyncIterator[tuple[BrokerServer, ScriptedHandler]]:
    handler = ScriptedHandler()
    server = BrokerServer(handler, host="127.0.0.1", port=0, idle_timeout_s=30)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, handler
        nursery.cancel_scope.cancel()


async def test_answers_leave_in_request_order_even_when_finished_in_reverse(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, handler = server
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as stream:
        commands = [b"later:a", b"now:b", b"later:c", b"quiet", b"now:d"]
        await stream.send_all(b"".join(encode_frame(c) for c in commands))
        await trio.testing.wait_all_tasks_blocked()
        handler.gates["c"].set()  # the later request finishes first
        await trio.testing.wait_all_tasks_blocked()
        handler.gates["a"].set()
        assert await read_frames(stream, 4) == [b"a", b"b", b"c", b"d"]


async def test_every_request_carries_its_connections_anonymous_session(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, handler = server
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as stream:
        await stream.send_all(encode_frame(b"now:a") + encode_frame(b"now:b"))
        assert await read_frames(stream, 2) == [b"a", b"b"]
    assert handler.sessions == [Session("User:ANONYMOUS", "127.0.0.1", "PLAINTEXT")] * 2


async def test_an_unparseable_frame_closes_after_earlier_answers_are_written(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, _ = server
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as stream:
        await stream.send_all(encode_frame(b"now:x") + encode_frame(b"close"))
        assert await read_frames(stream, 1) == [b"x"]
        assert await stream.receive_some(100) == b""


async def test_a_negative_length_closes_only_that_connection(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, _ = server
    async with (
        await trio.open_tcp_stream("127.0.0.1", srv.port) as good,
        await trio.open_tcp_stream("127.0.0.1", srv.port) as bad,
    ):
        await bad.send_all(struct.pack(">i", -1))
        assert await bad.receive_some(100) == b""
        await good.send_all(encode_frame(b"now:still here"))
        assert await read_frames(good, 1) == [b"still here"]


async def test_a_client_that_stops_reading_is_stopped_being_read_not_others(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, _ = server
    big = encode_frame(b"now:" + b"z" * 60_000)
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as hog:
        with trio.move_on_after(2):  # its socket buffers fill, then sends block
            while True:
                await hog.send_all(big)
        async with await trio.open_tcp_stream("127.0.0.1", srv.port) as other:
            await other.send_all(encode_frame(b"now:ok"))
            assert await read_frames(other, 1) == [b"ok"]


async def test_ready_answers_of_a_later_read_wait_behind_an_earlier_parked_one(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, handler = server
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as stream:
        await stream.send_all(encode_frame(b"later:first"))
        await trio.testing.wait_all_tasks_blocked()
        await stream.send_all(encode_frame(b"now:second") + encode_frame(b"now:third"))
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0.2):  # nothing may overtake the parked answer
            got = await stream.receive_some(100)
            pytest.fail(f"received {got!r} before the parked answer")
        handler.gates["first"].set()
        assert await read_frames(stream, 3) == [b"first", b"second", b"third"]


async def test_an_answer_larger_than_the_socket_takes_at_once_arrives_whole_and_in_order(
    server: tuple[BrokerServer, ScriptedHandler],
) -> None:
    srv, _ = server
    size = 16 * 1024 * 1024  # far beyond loopback socket buffers: written in parts
    async with await trio.open_tcp_stream("127.0.0.1", srv.port) as stream:
        await stream.send_all(encode_frame(f"size:{size}".encode()))
        await trio.testing.wait_all_tasks_blocked()  # the broker wrote what fits, then waits
        await stream.send_all(encode_frame(b"now:after"))
        big, after = await read_frames(stream, 2)
        assert (len(big), after) == (size, b"after")
    assert srv.bytes_out == (4 + size) + (4 + len(b"after"))
