"""net/tls.py: a TLS stream returns every record already received per read, byte for
byte what was sent, whether the bytes arrive at once or trickle in."""

from __future__ import annotations

import os
from pathlib import Path
from socket import MSG_PEEK

import pytest
import trio
import trio.testing

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.security.security import server_ssl_context
from minibroker.client.cli.dev_certs import issue, make_ca
from minibroker.net.security import client_ssl_context
from minibroker.net.tls import TlsStream

TLS_RECORD = 16 * 1024


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    pki = tmp_path_factory.mktemp("pki")
    ca = make_ca(pki)
    issued = issue(ca, pki, "broker")
    server = server_ssl_context(
        BrokerConfig.from_properties(
            None,
            {
                "ssl.certificate.location": str(issued.certificate),
                "ssl.key.location": str(issued.key),
            },
        )
    )
    return server, client_ssl_context(ca_location=str(Path(ca.certificate)))


class Trickle(trio.abc.Stream):
    """A transport that hands over at most 1000 bytes per read: records arrive cut."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(min(max_bytes or 1000, 1000))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.mark.parametrize("trickle", [False, True], ids=["bulk", "trickle"])
async def test_reads_return_whole_buffered_records_and_every_byte(
    contexts: tuple[object, object], trickle: bool
) -> None:
    server_context, client_context = contexts
    left, right = trio.testing.memory_stream_pair()
    transport: trio.abc.Stream = Trickle(left) if trickle else left
    server = TlsStream(transport, server_context, server_side=True)  # type: ignore[arg-type]
    client = TlsStream(right, client_context, server_hostname="127.0.0.1")  # type: ignore[arg-type]
    payload = os.urandom(1024 * 1024)
    received = bytearray()
    sizes: list[int] = []

    async def read_all() -> None:
        while len(received) < len(payload):
            data = await server.receive_some(256 * 1024)
            sizes.append(len(data))
            received.extend(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_all)
        await client.send_all(payload)
    assert bytes(received) == payload
    if not trickle:
        assert max(sizes) > TLS_RECORD  # more than one record per read


async def _tcp_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    await listeners[0].aclose()
    return server, client


async def _handshaken(
    contexts: tuple[object, object], left: trio.abc.Stream, right: trio.abc.Stream
) -> tuple[TlsStream, TlsStream]:
    server_context, client_context = contexts
    server = TlsStream(left, server_context, server_side=True)  # type: ignore[arg-type]
    client = TlsStream(right, client_context, server_hostname="127.0.0.1")  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    return server, client


async def _receive_exactly(stream: TlsStream, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        data = await stream.receive_some(4 * 1024 * 1024)
        assert data, "the stream ended early"
        received.extend(data)
    return bytes(received)


async def test_both_directions_at_once_over_a_socket_carry_every_byte(
    contexts: tuple[object, object],
) -> None:
    """Large sends both ways at once over TCP (the os.read / os.write path), bigger than
    the socket buffers, so each side's writer waits while its reader runs."""
    server, client = await _handshaken(contexts, *await _tcp_pair())
    up, down = os.urandom(6 * 1024 * 1024), os.urandom(5 * 1024 * 1024 + 123)
    got: dict[str, bytes] = {}

    async def receive(name: str, stream: TlsStream, size: int) -> None:
        got[name] = await _receive_exactly(stream, size)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive, "up", server, len(up))
        nursery.start_soon(receive, "down", client, len(down))
        nursery.start_soon(client.send_all, up)
        nursery.start_soon(server.send_all, memoryview(down))
    assert got == {"up": up, "down": down}
    await client.aclose()
    await server.aclose()


@pytest.mark.parametrize("socket", [False, True], ids=["memory", "tcp"])
async def test_a_closed_tls_session_reads_as_end_of_stream(
    contexts: tuple[object, object], socket: bool
) -> None:
    left, right = await _tcp_pair() if socket else trio.testing.memory_stream_pair()
    server, client = await _handshaken(contexts, left, right)
    await client.send_all(b"last words")
    await client.aclose()  # close_notify first
    assert await _receive_exactly(server, 10) == b"last words"
    assert await server.receive_some(1024) == b""
    assert await server.receive_some(1024) == b""
    await server.aclose()


async def test_a_connection_cut_without_close_notify_is_a_broken_stream(
    contexts: tuple[object, object],
) -> None:
    left, right = await _tcp_pair()
    server, client = await _handshaken(contexts, left, right)
    await client.send_all(b"cut")
    await right.aclose()  # the TCP connection ends, the TLS session does not
    assert await server.receive_some(1024) == b"cut"
    with pytest.raises(trio.BrokenResourceError):
        await server.receive_some(1024)
    await server.aclose()


async def test_a_failed_handshake_is_a_broken_stream_caused_by_the_ssl_error(
    contexts: tuple[object, object],
) -> None:
    import ssl

    server_context, client_context = contexts
    left, right = await _tcp_pair()
    server = TlsStream(left, server_context, server_side=True)  # type: ignore[arg-type]
    client = TlsStream(right, client_context, server_hostname="someone-else")  # type: ignore[arg-type]
    failures: list[BaseException] = []

    async def handshake(stream: TlsStream) -> None:
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:
            failures.append(exc)
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handshake, server)
        nursery.start_soon(handshake, client)
    assert len(failures) == 2  # the client refuses the name, the server hears its alert
    assert all(isinstance(exc.__cause__, ssl.SSLError) for exc in failures)


async def test_a_closed_stream_refuses_reads_and_writes(contexts: tuple[object, object]) -> None:
    server, client = await _handshaken(contexts, *trio.testing.memory_stream_pair())
    await client.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await client.receive_some(10)
    with pytest.raises(trio.ClosedResourceError):
        await client.send_all(b"x")
    await client.aclose()  # twice is fine
    await server.aclose()


async def test_send_now_writes_what_the_socket_takes_and_send_all_the_rest_in_order(
    contexts: tuple[object, object],
) -> None:
    """More than the socket buffers take while nobody reads: ``send_now`` stops without
    waiting and hands back the rest; ``send_all`` sends it after the records already
    made. The reader sees every byte in order."""
    server, client = await _handshaken(contexts, *await _tcp_pair())
    payload = os.urandom(32 * 1024 * 1024)
    rest = client.send_now(payload)
    assert rest is not None and 0 < len(rest) < len(payload)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.send_all, rest)
        received = await _receive_exactly(server, len(payload))
    assert received == payload
    assert client.send_now(b"small") is None  # an empty socket buffer takes it at once
    assert await _receive_exactly(server, 5) == b"small"
    await client.aclose()
    await server.aclose()


async def test_receive_now_returns_only_records_already_there(
    contexts: tuple[object, object],
) -> None:
    left, right = await _tcp_pair()
    server, client = await _handshaken(contexts, left, right)
    assert server.receive_now(1024) is None
    await client.send_all(b"hello")  # one small record: one segment over loopback
    with trio.fail_after(10):
        await trio.lowlevel.wait_readable(left.socket)
    assert server.receive_now(1024) == b"hello"
    assert server.receive_now(1024) is None
    await client.aclose()
    assert await server.receive_some(1024) == b""
    await server.aclose()


async def test_receive_now_tops_up_from_the_socket_before_handing_out_what_was_buffered(
    contexts: tuple[object, object],
) -> None:
    """Part of a record is decrypted and held back, and a second record waits in the
    socket: one ``receive_now`` returns both, as one read of a plain socket would."""
    left, right = await _tcp_pair()
    server, client = await _handshaken(contexts, left, right)
    await client.send_all(b"a" * 100)
    with trio.fail_after(10):
        await trio.lowlevel.wait_readable(left.socket)
    assert server.receive_now(5) == b"a" * 5
    await client.send_all(b"b" * 100)
    with trio.fail_after(10):
        await trio.lowlevel.wait_readable(left.socket)
    assert server.receive_now(1000) == b"a" * 95 + b"b" * 100
    await client.aclose()
    await server.aclose()


async def test_a_read_asking_for_a_whole_large_frame_gets_every_record_already_there(
    contexts: tuple[object, object],
) -> None:
    """A reader that knows a 3 MiB frame is arriving and asks for it gets all of it
    that was received in one piece, not one buffer's worth per call."""
    server, client = await _handshaken(contexts, *trio.testing.memory_stream_pair())
    payload = os.urandom(3 * 1024 * 1024)
    await client.send_all(payload)  # a memory stream takes it all at once
    assert await server.receive_some(4 * 1024 * 1024) == payload
    await client.aclose()
    await server.aclose()


class CutAfter(trio.abc.Stream):
    """A transport that, once ``cut_at`` is set, sends only that many more bytes and
    then closes the connection: the peer sees it end in the middle of a TLS record."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.cut_at: int | None = None

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.cut_at is None:
            await self.stream.send_all(data)
            return
        await self.stream.send_all(memoryview(data)[: self.cut_at])
        await self.stream.aclose()

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.mark.parametrize("socket", [False, True], ids=["memory", "tcp"])
async def test_a_connection_ending_inside_a_record_hands_out_the_whole_records_then_breaks(
    contexts: tuple[object, object], socket: bool
) -> None:
    """The peer vanishes 40,000 bytes into its ciphertext: the reader gets the records
    that arrived whole (a prefix of what was sent, never a byte of the cut record) and
    then a broken stream, not an end of stream that would pass for a clean close."""
    left, right = await _tcp_pair() if socket else trio.testing.memory_stream_pair()
    cutting = CutAfter(right)
    server, client = await _handshaken(contexts, left, cutting)
    payload = os.urandom(100 * 1024)
    cutting.cut_at = 40_000  # two whole records and part of the third
    await client.send_all(payload)
    received = bytearray()
    with pytest.raises(trio.BrokenResourceError):
        while True:
            data = await server.receive_some(1024 * 1024)
            assert data, "a cut connection must not read as a clean end of stream"
            received.extend(data)
    assert len(received) == 2 * TLS_RECORD
    assert received == payload[: len(received)]
    await server.aclose()


async def test_a_receive_cancelled_while_waiting_loses_nothing_and_the_stream_reads_on(
    contexts: tuple[object, object],
) -> None:
    """A reader blocked on an idle connection is cancelled (a timeout, a server
    stopping a task): the stream stays usable, and what the peer sends afterwards
    (records already started included) arrives whole and in order."""
    server, client = await _handshaken(contexts, *await _tcp_pair())
    payload = os.urandom(3 * 1024 * 1024)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.receive_some, 1024)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    with trio.fail_after(20):  # a lost byte would leave the reader waiting forever
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, payload)
            # Cancelled again part-way through the transfer, with records half received.
            with trio.CancelScope() as partway:
                first = await server.receive_some(64 * 1024)
                partway.cancel()
                await server.receive_some(64 * 1024)
            received = bytearray(first)
            received.extend(await _receive_exactly(server, len(payload) - len(first)))
    assert received == payload
    await client.aclose()
    await server.aclose()


@pytest.mark.parametrize(
    ("first_read", "rest"), [(100, b"b" * 100), (150, b"b" * 50)], ids=["record", "part"]
)
async def test_a_read_that_waits_first_still_hands_out_records_already_buffered(
    contexts: tuple[object, object], first_read: int, rest: bytes
) -> None:
    """``wait_first`` skips trying the socket, never what the stream already holds: a
    whole record left in its buffer, or the rest of one already decrypted, comes out
    at once (waiting on the socket instead would wait for bytes that never come)."""
    left, right = await _tcp_pair()
    server, client = await _handshaken(contexts, left, right)
    await client.send_all(b"a" * 100)
    await client.send_all(b"b" * 100)
    ciphertext = 2 * (100 + 22)  # two records: header, tag and content type each
    with trio.fail_after(10):
        while len(await left.socket.recv(4096, MSG_PEEK)) < ciphertext:
            await trio.sleep(0.01)  # no event says "this many bytes are there"
    first = server.receive_now(first_read)  # both records go into its buffer
    assert first is not None
    assert first == (b"a" * 100 + b"b" * 100)[:first_read]
    with trio.fail_after(10):
        assert await server.receive_some(1000, wait_first=True) == rest
    await client.aclose()
    await server.aclose()
